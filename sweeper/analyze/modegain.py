"""A gain over the baseline that only hot mode sees.

From twice the L2 size on, nothing of one call's input is left in L2 for the next call, so hot
(back-to-back calls), after-write and cold time the same memory traffic there, and a config's
ratio to the baseline agrees across the modes within run-to-run noise. A hot ratio well above
the other modes' there is what a kernel looks like that works less inside a back-to-back replay
than after a write or a flush: one that skips a call started right after another ended, say.
Below 2 x L2 hot gains are real (the input stays in L2 between calls), so they are shown and
never flagged.

Per dtype, config and range of working set, over the sizes measured in both modes: the median
hot ratio and the median ratio in the other mode (after-write where the run has it, else cold).
A config is flagged where a range at or beyond 2 x L2 holds at least MIN_SIZES common sizes and
its hot median exceeds the other mode's by more than HOT_ONLY_MARGIN. Pure: reads the results
table (sweeper.analyze.columns) and the L2 size.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from sweeper.units import fmt_bytes

if TYPE_CHECKING:
    import pandas as pd

# A hot median ratio this far above the other mode's, relatively, is not noise: on the H200
# a hot ratio moved by 2.56% (p95) from one verify pass to the next (results/h200/hot-7), and a
# median over several sizes moves less.
HOT_ONLY_MARGIN = 0.05
MIN_SIZES = 3  # common sizes a flagged range needs
OTHER_MODES = ("after-write", "cold")  # the mode compared with hot, the first the run has
# ranges of working set, in units of the L2 size: (name, from, to); flagged only from FLAG_FROM
RANGES = (("< L2/2", 0.0, 0.5), ("L2/2 - L2", 0.5, 1.0), ("L2 - 2 L2", 1.0, 2.0),
          (">= 2 L2", 2.0, math.inf))  # fmt: skip
FLAG_FROM = 2.0


def mode_gains(results: pd.DataFrame, l2_bytes: int) -> list[dict]:
    """One row per (dtype, config, range) that hot and the other mode both measured: the
    common sizes, both medians, the excess of hot over the other (hot / other - 1) and
    whether it is flagged. Empty when the run has no hot cells or no other mode."""
    ok = results[(results["status"] == "ok") & (results["role"] == "candidate")]
    modes = set(ok["mode"])
    other = next((m for m in OTHER_MODES if m in modes), None)
    if "hot" not in modes or other is None or not l2_bytes:
        return []
    cols = ["dtype", "config", "ws_bytes", "ratio"]
    hot = ok[ok["mode"] == "hot"][cols]
    oth = ok[ok["mode"] == other][cols]
    both = hot.merge(oth, on=["dtype", "config", "ws_bytes"], suffixes=("_hot", "_other"))
    both = both[(both["ratio_hot"] > 0) & (both["ratio_other"] > 0)]
    out = []
    for (dtype, config), g in both.groupby(["dtype", "config"], sort=True):
        rel = g["ws_bytes"] / l2_bytes
        for name, lo, hi in RANGES:
            part = g[(rel >= lo) & (rel < hi)]
            if part.empty:
                continue
            h, o = float(part["ratio_hot"].median()), float(part["ratio_other"].median())
            excess = h / o - 1
            out.append(
                {
                    "dtype": dtype,
                    "config": config,
                    "range": name,
                    "other_mode": other,
                    "sizes": len(part),
                    "lo_bytes": int(part["ws_bytes"].min()),
                    "hi_bytes": int(part["ws_bytes"].max()),
                    "hot": h,
                    "other": o,
                    "excess": excess,
                    "flagged": lo >= FLAG_FROM
                    and len(part) >= MIN_SIZES
                    and excess > HOT_ONLY_MARGIN,
                }
            )
    return out


def hot_only_lines(results: pd.DataFrame, l2_bytes: int, show: tuple[str, ...] = ()) -> list[str]:
    """The report's lines: what was compared, every flagged config and range, and the whole
    table for the configs in `show` (an audit's kernels). Empty without hot and another mode."""
    rows = mode_gains(results, l2_bytes)
    if not rows:
        return []
    other = rows[0]["other_mode"]
    configs = len({(r["dtype"], r["config"]) for r in rows})
    flagged = [r for r in rows if r["flagged"]]
    out = [
        f"Hot against {other}: the median ratio to the baseline per range of working set, "
        f"over the sizes both modes measured ({configs} dtype-config pairs). From 2 x L2 on "
        f"the modes time the same traffic; a hot median more than {HOT_ONLY_MARGIN:.0%} above "
        f"the {other} one there (over {MIN_SIZES} or more sizes) is a hot-only gain: a kernel "
        "that works less in back-to-back calls than after a write.",
        "",
    ]
    if flagged:
        out += [
            f"**{len(flagged)} hot-only gain(s)**: do not trust these configs' hot figures.",
            "",
        ]
    else:
        out += ["No hot-only gain.", ""]
    shown = [r for r in rows if r["flagged"] or r["config"] in show]
    if shown:
        out += [
            "| dtype | config | range | sizes | hot | " + other + " | hot / " + other + " |",
            "|---|---|---|--:|--:|--:|--:|",
        ]
        out += [
            f"| {r['dtype']} | `{r['config']}` | {r['range']} ({fmt_bytes(r['lo_bytes'])} - "
            f"{fmt_bytes(r['hi_bytes'])}) | {r['sizes']} | {r['hot']:.3f} | {r['other']:.3f} | "
            f"{r['excess']:+.1%}{' **hot only**' if r['flagged'] else ''} |"
            for r in shown
        ]
        out.append("")
    return out
