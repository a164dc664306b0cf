"""REPORT.md for a run folder: one markdown file that renders on GitHub.

Built from what is in the folder (manifest, results table, and when present selection.csv,
policy.json and plots/); a stage that has not run yet is named as missing, never silently
left out. Pure text: `build_report` takes plain inputs, `api.report()` does the file IO.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeper.analyze.columns import MODES
from sweeper.analyze.spread import spread_lines
from sweeper.analyze.targets import DEFAULT_SOURCE, Target
from sweeper.dtypes import DTYPES
from sweeper.report.plots import _plots_stale, plot_order, render_plots
from sweeper.report.summary import SHOWN, first_screen, target_result
from sweeper.report.tables import best_per_size, dtypes_in, facets, md_cell, md_table
from sweeper.run.search import climb_trades
from sweeper.runfolder import (
    BEYOND_L2,
    CELL_PHASES,
    PLOTS,
    REPLAY_GRAPHS,
    REPORT,
    baseline_of,
    is_audit,
    user_configs,
)
from sweeper.units import fmt_bytes, fmt_mib

if TYPE_CHECKING:
    import pandas as pd

SECTIONS = (
    "Summary",
    "Environment",
    "Plan coverage",
    "Selection",
    "Policy",
    "Project targets",
    "Targets",
    "Verify",
    "Plots",
    "Guards",
    "Batch position and clocks",
    "Pruned",
    "Timing",
)


def _num(v: Any, fmt: str = ".0f") -> str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return "-"
    return "-" if math.isnan(f) else format(f, fmt)


def _times(v: Any) -> str:
    """A ratio as 1.003x, or "-"."""
    return "-" if _num(v) == "-" else f"{float(v):.3f}x"


def _ratio_ci(r: Any, lo: Any, hi: Any) -> str:
    if _num(r) == "-":
        return "-"
    ci = f" [{_num(lo, '.2f')}, {_num(hi, '.2f')}]" if _num(lo) != "-" else ""
    return f"{_num(r, '.2f')}x{ci}"


def _duration(s: Any) -> str:
    try:
        s = float(s)
    except (TypeError, ValueError):
        return md_cell(s)
    h, rem = divmod(int(round(s)), 3600)
    m, sec = divmod(rem, 60)
    return f"{s:,.1f} s ({h}:{m:02d}:{sec:02d})"


# ---- sections -----------------------------------------------------------------------------


def environment(manifest: Mapping[str, Any]) -> list[str]:
    dev = manifest.get("device") or {}
    plan = manifest.get("plan") or {}
    cc = dev.get("cc")
    cc_text = f"{cc[0]}.{cc[1]}" if isinstance(cc, (list, tuple)) and len(cc) == 2 else cc
    rows = [
        ("GPU", f"{dev.get('name', '-')} (`{manifest.get('gpu', '-')}`)"),
        ("compute capability", cc_text or "-"),
        ("SMs", dev.get("sm_count", "-")),
        ("L2", fmt_bytes(dev.get("l2_bytes"))),
        ("persisting-L2 max", fmt_bytes(dev.get("persisting_l2_max_bytes"))),
        ("DRAM peak", f"{_num(dev.get('dram_peak_gbps'))} GB/s"),
        ("memory", fmt_bytes(dev.get("memory_bytes"))),
        ("driver", dev.get("driver_version", "-")),
        ("git commit", f"`{manifest.get('git_commit', '-')}`"),
        ("plan", f"`{plan.get('path', '-')}` (hash `{plan.get('plan_hash', '-')}`)"),
        ("modes", ", ".join(manifest.get("modes") or [str(manifest.get("mode", "-"))])),
        ("baseline", manifest.get("baseline", "-")),
        ("started / finished", f"{manifest.get('started', '-')} / {manifest.get('finished', '-')}"),
    ]
    resumed = manifest.get("resumed") or []
    if resumed:
        rows.append(("resumed", f"{len(resumed)} time(s), at " + ", ".join(
            str(r.get("at", "-")) for r in resumed)))  # fmt: skip
    versions = manifest.get("versions") or {}
    rows.append(("versions", ", ".join(f"{k} {v}" for k, v in sorted(versions.items())) or "-"))
    return md_table(("", "value"), rows)


def largest_gaps(sizes: Sequence[int], k: int = 3) -> list[tuple[int, int]]:
    """The k widest steps between consecutive sampled sizes, by ratio (widest first)."""
    s = sorted(set(int(x) for x in sizes))
    pairs = list(zip(s, s[1:], strict=False))
    return sorted(pairs, key=lambda p: (-p[1] / p[0], p[0]))[:k]


def coverage(results: pd.DataFrame, manifest: Mapping[str, Any]) -> list[str]:
    plan = manifest.get("plan") or {}
    dev = manifest.get("device") or {}
    lo, hi = plan.get("dense_lo_bytes"), plan.get("dense_hi_bytes")
    l2 = plan.get("l2_bytes") or dev.get("l2_bytes")
    res = plan.get("resolution")
    step = l2 / res if l2 and isinstance(res, (int, float)) and res >= 1 else None
    out = [
        f"Dense band of the plan: {fmt_bytes(lo)} .. {fmt_bytes(hi)}; L2 {fmt_bytes(l2)}. "
        f"Dense-band step target: {fmt_bytes(step)} (L2/{res}). "
        "Gaps are between consecutive sampled working sets (all rows, any status).",
        "",
    ]
    rows = []
    for facet, sub in facets(results):
        for dtype in dtypes_in(sub):
            sizes = sorted(int(x) for x in sub[sub["dtype"] == dtype]["ws_bytes"].unique())
            dense = [s for s in sizes if lo and hi and lo <= s <= hi]
            widest = max(
                zip(dense, dense[1:], strict=False), key=lambda p: p[1] - p[0], default=None
            )
            if widest:
                a, b = widest
                flag = f" ⚠ wider than L2/{res:g}" if step and b - a > step * (1 + 1e-9) else ""
                dense_step = f"{fmt_bytes(b - a)} ({fmt_mib(a)} → {fmt_mib(b)}){flag}"
            else:
                dense_step = "no two sizes in the dense band"
            gaps = "; ".join(
                f"{fmt_mib(a)} → {fmt_mib(b)} MiB (×{b / a:.2f})" for a, b in largest_gaps(sizes)
            )
            below = max((s for s in sizes if l2 and s <= l2), default=None)
            above = min((s for s in sizes if l2 and s > l2), default=None)
            bracket = (
                f"{fmt_mib(below)} .. {fmt_mib(above)}" if below and above else "not bracketed"
            )
            rows.append(
                (
                    dtype,
                    facet,
                    len(sizes),
                    f"{fmt_mib(sizes[0])} .. {fmt_mib(sizes[-1])}",
                    len(dense),
                    dense_step,
                    bracket,
                    gaps or "-",
                )
            )
    header = ("dtype", "mode", "sizes", "range (MiB)", "in dense band", "widest dense step")
    return out + md_table(
        (*header, "L2 bracket (MiB)", "largest gaps (by ratio)"), rows, "--rrrrr-"
    )


def selection(
    results: pd.DataFrame,
    sel: pd.DataFrame | None,
    l2_bytes: int | None = None,
    baseline: str = "torch",
) -> list[str]:
    """Per mode and dtype, a line of what was chosen: the table for every size is
    selection.md / selection.csv."""
    if sel is None:
        out = [
            "**No selection built yet** (`sweeper select` writes selection.csv and "
            "selection.md into the run folder). Summarised instead: the fastest ok config at "
            "each size, without the noise-aware tie handling of the selection.",
            "",
        ]
        table = best_per_size(results)
    else:
        out = [
            "The chosen config at every size, with runner-up, margin and ties: "
            "[selection.md](selection.md) ([selection.csv](selection.csv)). Per mode and "
            f"dtype: the configs chosen, how often the choice changes from one size to the "
            f"next, and the chosen config's ratio to {baseline}, lowest-highest per range of "
            "working set.",
            "",
        ]
        table = sel
    if table.empty:
        return [*out, "No ok candidate cell in this run: nothing to select from."]
    return out + selection_summary(table, l2_bytes)


def floor_section(
    results: pd.DataFrame, manifest: Mapping[str, Any], sel: pd.DataFrame | None
) -> list[str]:
    """The floor of each dtype (how it was found) and the confirmation round: cells timed
    twice, the pass-to-pass noise per range of working set, and the sizes the floor serves
    because nothing beat it in both measurements (sweeper.analyze.select, "The floor")."""
    from sweeper.analyze.select import confirm_context

    floors = manifest.get("floor") or {}
    if not floors:
        return []
    out = ["", "### Floor and confirmation", ""]
    for dtype in sorted(floors, key=lambda d: _rank(d, DTYPES)):
        doc = floors[dtype] or {}
        if not doc.get("config"):
            out.append(f"- {dtype}: no floor ({doc.get('why', 'none found')}).")
            continue
        how = doc.get("source", "")
        k = (doc.get("launches") or [{}])[0]
        if k.get("grid"):
            how += (f": {k['grid'][0]} blocks x {k['block'][0]} threads at n = {doc['n']}"
                    f" ({'the same launch' if doc.get('exact') else 'the closest, not the same'})")  # fmt: skip
        out.append(f"- {dtype}: `{doc['config']}` ({how}).")
    context = confirm_context(results)
    if not context:
        return out
    out += ["", "| mode | dtype | sizes confirmed | cells timed twice | pass-to-pass noise (p95) "
            "| sizes served by the floor |", "|---|---|---:|---:|---|---:|"]  # fmt: skip
    for (mode, _, dtype), c in sorted(context.items()):
        cells = sum(len(v) for v in c["by_ws"].values())
        noise = ", ".join(
            f"{'<=' if hi is not None else '>'} {fmt_bytes(hi if hi is not None else prev)}: "
            f"{100 * v:.2f}%"
            for (hi, v), prev in zip(c["noise"], [0, *[h for h, _ in c["noise"][:-1]]],
                                     strict=True)
        )  # fmt: skip
        served = "-"
        if sel is not None and "reason" in sel:
            part = sel[(sel["mode"] == mode) & (sel["dtype"] == dtype)]
            served = str(int(part["reason"].astype(str).str.startswith("floor").sum()))
        out.append(f"| {mode} | {dtype} | {len(c['by_ws'])} | {cells} | {noise} | {served} |")
    return out


# ranges of working set the selection's ratios are summarised over, as multiples of L2
RANGES = ((0, 1 / 8, "<= L2/8"), (1 / 8, 1 / 2, "L2/8 - L2/2"), (1 / 2, 1, "L2/2 - L2"),
          (1, 4, "L2 - 4 x L2"), (4, math.inf, "> 4 x L2"))  # fmt: skip


def selection_summary(table: pd.DataFrame, l2_bytes: int | None) -> list[str]:
    """One row per (mode, pattern, dtype): sizes, distinct configs chosen, changes of config
    between consecutive sizes, the ratio's lowest-highest per range of working set (where L2
    is known, else over every size), the lowest ratio and where, and how many sizes have a
    ratio below 1."""
    by_pattern = table["pattern"].nunique() > 1
    groups = sorted(
        table.groupby(["mode", "pattern", "dtype"], sort=False),
        key=lambda g: (_rank(g[0][0], MODES), g[0][1], _rank(g[0][2], DTYPES), g[0][2]),
    )
    ranges = [(lo * l2_bytes, hi * l2_bytes, name) for lo, hi, name in RANGES] if l2_bytes else []
    rows = []
    for (mode, pattern, dtype), grp in groups:
        grp = grp.sort_values("ws_bytes")
        ratio = grp["ratio"].astype(float)
        cells = []
        for lo, hi, _ in ranges or [(0, math.inf, "")]:
            r = ratio[(grp.ws_bytes > lo) & (grp.ws_bytes <= hi)].dropna()
            cells.append(f"{r.min():.2f}-{r.max():.2f}" if len(r) else "-")
        low = grp.loc[ratio.idxmin()] if ratio.notna().any() else None
        rows.append(
            (
                f"{mode}-{pattern}" if by_pattern else mode,
                dtype,
                len(grp),
                grp["config"].nunique(),
                len(config_runs(grp["config"], grp["ws_bytes"])) - 1,
                *cells,
                "-" if low is None else f"{low['ratio']:.3f} @ {fmt_mib(low['ws_bytes'])}",
                int((ratio < 1).sum()),
            )
        )
    names = [name for _, _, name in ranges] or ["every size"]
    header = ("mode", "dtype", "sizes", "configs", "changes", *names)
    align = "--rrr" + "r" * len(names) + "rr"
    return md_table((*header, "lowest ratio @ MiB", "sizes below 1"), rows, align)


def _rank(value: str, order: Sequence[str]) -> int:
    return order.index(value) if value in order else len(order)


def config_runs(configs: Sequence[str], sizes: Sequence[int]) -> list[tuple[str, int, int]]:
    """Consecutive sizes with the same config, as (config, first size, last size)."""
    out: list[tuple[str, int, int]] = []
    for c, ws in zip(configs, sizes, strict=True):
        if out and out[-1][0] == c:
            out[-1] = (c, out[-1][1], int(ws))
        else:
            out.append((c, int(ws), int(ws)))
    return out


def policy(doc: Mapping[str, Any] | None) -> list[str]:
    if doc is None:
        return [
            "**No policy built yet** (`sweeper policy` writes policy.json into the run folder)."
        ]
    from sweeper.analyze.policy import describe_tolerance

    prov = doc.get("provenance") or {}
    out = [
        f"From `policy.json`: mode {prov.get('mode', '-')}, pattern {prov.get('pattern', '-')}, "
        f"tolerance {describe_tolerance(prov)}, resolution L2/{prov.get('resolution', '-')}. "
        "A band holds working sets in [lo, hi); the bracket is the pair of measured sizes "
        "the boundary below it sits between.",
        "",
    ]
    rows = []
    for dtype, d in (doc.get("dtypes") or {}).items():
        for b in d.get("bands", []):
            hi = b.get("hi_bytes")
            br = b.get("bracket_below")
            worst = b.get("worst_frac_of_best")
            rows.append(
                (
                    dtype,
                    f"[{fmt_mib(b.get('lo_bytes') or 0)}, {'∞' if hi is None else fmt_mib(hi)})",
                    f"`{b.get('config')}`",
                    f"{fmt_mib(b['first_measured'])} .. {fmt_mib(b['last_measured'])}"
                    if "first_measured" in b
                    else "-",
                    b.get("n_sizes", "-"),
                    f"{fmt_mib(br[0])} .. {fmt_mib(br[1])}" if br else "-",
                    _num(100 * worst, ".1f") if isinstance(worst, (int, float)) else "-",
                )
            )
    header = ("dtype", "band (MiB)", "config", "measured (MiB)", "sizes", "bracket (MiB)")
    return out + md_table((*header, "worst % of best"), rows, "--r-rrr")


def headline_plot(plot_files: Sequence[Path], mode: str | None) -> Path | None:
    """The summary's figure: an audit's cliff plot, else the ratio plot, of the policy's mode
    (else the first one)."""
    for kind in ("cliff", "ratio"):
        pngs = [p for p in plot_files if p.suffix == ".png" and p.stem.startswith(f"{kind}_")]
        if pngs:
            return next((p for p in pngs if p.stem == f"{kind}_{mode}"), pngs[0])
    return None


def plots_section(
    run_dir: Path, plot_files: Sequence[Path], headline: Path | None = None
) -> list[str]:
    pngs = [p for p in plot_files if p.suffix == ".png"]
    if not pngs:
        return ["**No plots** (`sweeper plot` writes them into plots/)."]
    out = [f"Vector (SVG) versions: `sweeper plot {run_dir} --format svg`."]
    if headline is not None:
        out[0] += f" `{headline.stem}` is in the [Summary](#summary)."
    for png in pngs:
        if png != headline:
            out += ["", f"![{png.stem}]({_rel(png, run_dir)})"]
    return out


def _rel(path: Path, run_dir: Path) -> str:
    return Path(os.path.relpath(path, run_dir)).as_posix()


LONGEST = 10  # rows of a listing shown in the report; the file named beside it has them all


def guards(
    results: pd.DataFrame, manifest: Mapping[str, Any], chk: pd.DataFrame | None = None
) -> list[str]:
    bad = results[results["status"] != "ok"].sort_values(["mode", "dtype", "ws_bytes", "config"])
    logged = manifest.get("guards") or []
    out = [
        f"{len(bad)} of {len(results)} cells (rows of the trial log) are not ok (left out of "
        f"every table and plot above); {len(logged)} finding(s) in the run's guard log.",
        "",
    ]
    if len(bad):
        rows = [
            (
                r["mode"],
                r["dtype"],
                fmt_mib(r["ws_bytes"]),
                r["role"],
                f"`{r['config']}`",
                r["status"],
                r["status_detail"],
            )
            for _, r in bad.head(LONGEST).iterrows()
        ]
        header = ("mode", "dtype", "size (MiB)", "role", "config", "status", "detail")
        out += md_table(header, rows, "--r----") + [""]
        out += _more(len(bad), "the trial log (`status`, `status_detail`)")
    if logged:
        out += ["Guard log (manifest):", ""]
        rows = [
            (g.get("cell", "-"), g.get("status", "-"), g.get("detail", ""))
            for g in logged[:LONGEST]
        ]
        out += md_table(("cell", "status", "detail"), rows)
        out += [""] + _more(len(logged), "the manifest's `guards`")
    return (out + canary_lines(results) + physical_limits(results, manifest)
            + pairing_check(results, manifest, chk))  # fmt: skip


def canary_lines(results: pd.DataFrame) -> list[str]:
    """How many canary calls the hot cells' untimed replays checked (sweeper.run.batched)
    and how many cells one caught; nothing for a run recorded without them."""
    if "canaries" not in results.columns or results["canaries"].isna().all():
        return []
    checked = results[results["canaries"].notna()]
    caught = checked["status_detail"].fillna("").str.startswith("canary:")
    return [
        f"**Canary.** {int(checked['canaries'].sum()):,} canary calls (before each settle "
        f"replay, one call at a random position of an untimed back-to-back replay, writing a "
        f"poisoned buffer) checked in {len(checked):,} cells; {int(caught.sum())} cell(s) "
        "failed it.",
        "",
    ]


def _more(n: int, where: str) -> list[str]:
    """The line under a listing cut at LONGEST rows."""
    return [f"The first {LONGEST} of {n}; every one: {where}.", ""] if n > LONGEST else []


def physical_limits(results: pd.DataFrame, manifest: Mapping[str, Any]) -> list[str]:
    """The physical-limit check's ceilings and margin as the run applied them."""
    from sweeper.analyze.ceilings import ABOVE_CEILING, ceilings_of

    if "ceiling_check" not in (manifest.get("harness") or {}):
        return ["**Physical limits.** This run was recorded without the physical-limit check.", ""]
    c = ceilings_of(manifest)
    l2c = f"{c.l2_resident_gbps:.0f} GB/s" if c.l2_resident_gbps else "not measured"
    peak = f"{c.dram_peak_gbps:.0f} GB/s" if c.dram_peak_gbps else "unknown"
    n = int((results["status"] == ABOVE_CEILING).sum())
    return [
        f"**Physical limits.** A candidate above {c.margin:g}x the L2-resident ceiling ({l2c}) "
        f"at any size, or from {c.copy_from_x_l2:g} x L2 on above {c.margin:g}x the copy "
        f"kernel at its size or the DRAM peak ({peak}), is `{ABOVE_CEILING}`: {n} cell(s) "
        "in this run.",
        "",
    ]


def pairing_check(
    results: pd.DataFrame, manifest: Mapping[str, Any], chk: pd.DataFrame | None = None
) -> list[str]:
    """The baseline's time next to evict_last candidates vs next to the others, same size."""
    from sweeper.report.pairing import ALPHA, FLAG, evict_last_contamination

    harness = manifest.get("harness") or {}
    normalized = harness.get("l2_normalize_between_slots")
    how = (
        "This run demoted the cell's L2 lines to normal priority between slots."
        if normalized
        else "This run did NOT demote L2 lines between slots: "
        + (
            f"the normalizer could not run ({harness['l2_normalize_error']})."
            if harness.get("l2_normalize_error")
            else "it was recorded before that guard."
        )
    )
    chk = evict_last_contamination(results) if chk is None else chk
    out = [
        "**Baseline next to evict_last candidates.** At one size the baseline's median time "
        "should not depend on the candidate it was paired with; if it is slower next to "
        "candidates with `L2::evict_last` loads, their lines outlived their turn and those "
        f"candidates' ratios are inflated by that factor. {how}",
        "",
    ]
    if chk.empty:
        return out + ["No size has cells on both sides to compare."]
    flagged = chk[chk["flagged"]]
    significant = int((flagged["p"] < ALPHA).sum())
    out.append(
        f"{len(chk)} size(s) compared; {len(flagged)} flagged (baseline more than "
        f"{FLAG:.0%} slower next to evict_last candidates), {significant} of them with "
        f"p < {ALPHA} (one-sided permutation test over the size's cells); "
        f"worst {chk['slowdown'].max():.3f}x. A run of adjacent flagged sizes is an effect; "
        "isolated flags with large p are what noise gives at 1-3 us calls, where 2% is "
        "inside the spread."
    )
    if len(flagged):
        rows = [
            (
                r["mode"],
                r["dtype"],
                fmt_mib(r["ws_bytes"]),
                f"{r['slowdown']:.3f}",
                r["cells_el"],
                r["cells_other"],
                f"{r['p']:.3f}",
            )
            for _, r in flagged.iterrows()
        ]
        header = (
            "mode", "dtype", "size (MiB)", "baseline slowdown", "cells el", "cells other", "p",
        )  # fmt: skip
        out += [""] + md_table(header, rows, "--rrrrr")
    return out


def batch_checks(
    results: pd.DataFrame, manifest: Mapping[str, Any], sample_rows: Any = None
) -> list[str]:
    """What batching could have done to the cells: the batch-position test
    (sweeper.analyze.position) and the clocks the run recorded around its batches. The slot
    test reads each cell's samples: `sample_rows`, the trial records (the results table does
    not hold them), else `results`."""
    from sweeper.analyze.gpuwork import executor_kind
    from sweeper.analyze.position import (
        position_effect,
        position_line,
        segment_line,
        segment_start,
    )

    executor = executor_kind(manifest)
    clocks = (manifest.get("timing") or {}).get("clocks")
    pos = position_effect(results)
    slots = segment_line(segment_start(results if sample_rows is None else sample_rows))
    if executor != "batched" and pos["cells"] == 0 and not clocks:
        return [
            f"This run timed its cells one at a time ({executor} executor): there are no batch "
            "positions to test, and the clocks were not recorded.",
            "",
            slots,
        ]
    return [position_line(pos), "", slots, "", clocks_line(clocks)]


def clocks_line(clocks: Mapping[str, Any] | None) -> str:
    """The manifest's `timing.clocks` (sweeper.run.clocks.ClockMonitor.summary) in one line."""
    if not clocks:
        return "**Clocks: not recorded.** The manifest has no `timing.clocks`."
    if not clocks.get("available"):
        return f"**Clocks: not recorded.** {clocks.get('why', 'NVML was not available')}."

    def mhz(key: str) -> str:
        v = clocks.get(key) or {}
        if not v:
            return "not read"
        return f"{v['min']:.0f} / {v['median']:.0f} / {v['max']:.0f} MHz"

    n, throttled = clocks.get("batches", 0), clocks.get("throttled", 0)
    reasons = clocks.get("reasons") or {}
    seen = ", ".join(f"`{k}` {v}" for k, v in reasons.items()) or "none"
    kept = clocks.get("kept_throttled", 0)
    line = (
        f"**Clocks.** SM clock {mhz('sm_mhz')} (min / median / max at the end of {n:,} "
        f"batches), memory clock {mhz('mem_mhz')}. {throttled} batch(es) throttled: "
        f"{clocks.get('repeated', 0)} repeated, {kept} kept after the last repeat (their cells "
        f"are marked). Clock-event reasons seen (batches): {seen}."
    )
    if clocks.get("why"):
        line += f" NVML stopped during the run: {clocks['why']}."
    return line


def pruned(manifest: Mapping[str, Any], closest: int = 10) -> list[str]:
    """What screening left out: counts per mode and dtype, and the closest misses (where they
    came nearest the best and by how much). The full list is the manifest's `pruned`."""
    items = manifest.get("pruned") or []
    if not items:
        return ["Nothing was screened out: every config of the grid was measured at every size."]
    climb = manifest.get("climb") or {}
    groups: dict[tuple[str, str], list] = {}
    for p in items:
        groups.setdefault((p.get("mode", "-"), p.get("dtype", "-")), []).append(p)
    rows = []
    for (mode, dtype), ps in sorted(groups.items()):
        c = climb.get(f"{mode}/{dtype}", {})
        failed = sum(1 for p in ps if str(p.get("reason", "")).startswith("failed"))
        conv = {True: "yes", False: "no (round limit)"}.get(c.get("converged"), "-")
        rows.append((mode, dtype, str(c.get("configs", "-")), str(len(ps)), str(failed),
                     str(c.get("rounds", "-")), conv))  # fmt: skip
    moves = ""
    if climb:
        trades = climb_trades(manifest.get("search") or {})
        moves = " The climb's moves: " + (
            "one-axis changes, and trades at the same bytes in flight per block."
            if trades
            else "one-axis changes only."
        )
    out = [
        f"{len(items)} config(s) screened out before the full sweep; every one, with where it "
        "came closest to the best and why it was left out: `pruned` in "
        f"[manifest.json](manifest.json).{moves}",
        "",
        *md_table(
            (
                "mode",
                "dtype",
                "configs screened",
                "screened out",
                "failed",
                "climb rounds",
                "climb converged",
            ),
            rows,
            "--rrrr-",
        ),
    ]
    near = sorted(
        (p for p in items if p.get("shortfall") is not None), key=lambda p: p["shortfall"]
    )[:closest]
    if near:
        out += ["", f"The {len(near)} closest misses:", ""] + md_table(
            ("config", "mode", "dtype", "closest at (MiB)", "behind the best there"),
            [
                (
                    f"`{p['config']}`",
                    p.get("mode", "-"),
                    p.get("dtype", "-"),
                    fmt_mib(p["ws_bytes"]) if p.get("ws_bytes") else "-",
                    f"{p['shortfall']:.2%}",
                )
                for p in near
            ],
            "---rr",
        )
    scoped = {k: v for k, v in (manifest.get(BEYOND_L2) or {}).items() if v}
    if scoped:
        counts = ", ".join(f"{k} {len(v)}" for k, v in sorted(scoped.items()))
        out += ["", f"Survivors swept beyond the L2 only (within the margin of the best at "
                f"no screening size that fits it): {counts}; `{BEYOND_L2}` in "
                "[manifest.json](manifest.json) names them."]  # fmt: skip
    return out


# the phases of one mode and dtype, in the order they run; "(part of ...)" ones are inside
# another and are not added into the sum
PHASES = {
    "screen_s": "screen",
    "climb_s": "climb (part of screen)",
    "climb_compile_s": "climb compile (part of climb)",
    "sweep_s": "sweep",
    "refine_s": "refine",
    "refine_points": "sizes added by refine",
    "bracket_points": "sizes added by bracketing",
}
INSIDE = ("climb_s", "climb_compile_s")


def run_seconds(manifest: Mapping[str, Any]) -> tuple[float | None, float, bool]:
    """(total, sum of the phases, whether total is the run's recorded wall time): the total
    is the manifest's `total_s`, else the sum of the phases; counts and the phases that run
    inside another are never added."""
    t = manifest.get("timing") or {}
    parts = 0.0
    for key, value in t.items():
        if key == "total_s" or not key.endswith("_s") or key.rsplit("/", 1)[-1] in INSIDE:
            continue
        if isinstance(value, int | float) and not isinstance(value, bool):
            parts += float(value)
    total = t.get("total_s")
    if isinstance(total, int | float) and not isinstance(total, bool):
        return float(total), parts, True
    return (parts if t else None), parts, False


CELL_PHASE_NAMES = {
    "rounds": "timed rounds",
    "graphs": "graph builds",
    "fresh": "fresh-input replay",
    "checks": "output checks",
    "stopping": "stopping rule",
    "summary": "summary",
    "reference": "per-size reference",
    "cell": "the rest",
}


def cell_phases(phases: Any) -> list[str]:
    """One line per mode: where its cells' host time went, largest first, with shares."""
    if not isinstance(phases, Mapping) or not phases:
        return []
    by_mode: dict[str, dict[str, float]] = {}
    for key, v in phases.items():
        mode, _, phase = str(key).rpartition("/")
        if isinstance(v, int | float) and not isinstance(v, bool):
            by_mode.setdefault(mode or "all", {})[phase] = float(v)
    out = [""]
    for mode, ph in by_mode.items():
        total = sum(ph.values())
        parts = ", ".join(
            f"{CELL_PHASE_NAMES.get(p, p)} {_secs(v)} ({v / total:.0%})"
            for p, v in sorted(ph.items(), key=lambda kv: -kv[1])
        ) if total > 0 else "none"  # fmt: skip
        out.append(f"Where the {mode} cells' time went (host wall time, {_secs(total)}): {parts}.")
    return out


def gpu_work_line(manifest: Mapping[str, Any], results: pd.DataFrame | None) -> list[str]:
    """The lower bound on the hot cells' GPU work (sweeper.analyze.gpuwork), beside the run's
    wall time; nothing for a run without ok hot candidate cells or its stopping rule."""
    from sweeper.analyze.gpuwork import floor, fresh_replayed, warm_up_calls

    stopping = manifest.get("stopping")
    if results is None or results.empty or not isinstance(stopping, Mapping):
        return []
    need = ["mode", "role", "status", "time_us", "base_time_us", "n_samples", "ws_bytes"]
    if any(c not in results.columns for c in need):
        return []
    hot = results[(results["mode"] == "hot") & (results["role"] == "candidate")]
    fresh = fresh_replayed(manifest)
    f = floor(hot[need].to_dict("records"), stopping, fresh=fresh, warm=warm_up_calls(manifest))
    if not f["cells"]:
        return []
    total = f["timed"] + f["warm-up"] + f["fresh"]
    wall = (manifest.get("timing") or {}).get("total_s")
    only_hot = list(manifest.get("modes") or []) == ["hot"]
    share = f", {total / wall:.0%} of the run's wall time" if wall and only_hot else ""
    replay = f", fresh-input replay {_secs(f['fresh'])}" if fresh else ""
    return [
        f"The hot cells' GPU work, at least: {_secs(total)} for {int(f['cells']):,} candidate "
        "cells "
        f"(timed {_secs(f['timed'])}, warm-up calls {_secs(f['warm-up'])}{replay}; "
        f"`sweeper gpu-work`){share}."
    ]


def timing(manifest: Mapping[str, Any], results: pd.DataFrame | None = None) -> list[str]:
    t = manifest.get("timing") or {}
    if not t:
        return ["No timing recorded in the manifest."]
    groups: dict[str, dict[str, Any]] = {}
    top = []
    for key, value in t.items():
        if key in ("total_s", CELL_PHASES, REPLAY_GRAPHS):
            continue
        if key.count("/") == 2:  # mode/dtype/phase
            group, phase = key.rsplit("/", 1)
            groups.setdefault(group, {})[phase] = value
        else:
            top.append((key.removesuffix("_s"), value))
    out = []
    if top:
        out += ["Before the sweeps: " + ", ".join(
            f"{name} {_secs(v)}" if isinstance(v, int | float) else f"{name} {md_cell(v)}"
            for name, v in top) + "."]  # fmt: skip
    if groups:
        seen = {p for g in groups.values() for p in g}
        cols = [p for p in PHASES if p in seen] + sorted(seen - set(PHASES))
        rows = [(group, *(_phase(g.get(p), p) for p in cols)) for group, g in groups.items()]
        out += ["", *md_table(("mode/dtype", *(PHASES.get(p, p) for p in cols)), rows,
                            "-" + "r" * len(cols))]  # fmt: skip
    out += cell_phases(t.get(CELL_PHASES))
    g = t.get(REPLAY_GRAPHS)
    if isinstance(g, Mapping) and g:
        out += [f"The fresh-input replay updated {g.get('updated', 0):,} graphs in place and "
                f"instantiated {g.get('instantiated', 0):,}."]  # fmt: skip
        if any(k.startswith("batch_") for k in g):
            out[-1] += (
                f" The batches' cell graphs: {g.get('batch_set', 0):,} set in place and "
                f"{g.get('batch_built', 0):,} built, {g.get('batch_updated', 0):,} updated and "
                f"{g.get('batch_instantiated', 0):,} instantiated (docs/timing.md)."
            )
    out += gpu_work_line(manifest, results)
    total, parts, recorded = run_seconds(manifest)
    out += [
        "",
        f"**Total: {_duration(total)}**, "
        + (
            f"the run's wall time (`total_s`); the phases above add up to {_secs(parts)}."
            if recorded
            else "the sum of the phases (the manifest records no `total_s`)."
        ),
    ]
    return out[1:] if out[0] == "" else out


def _secs(v: Any) -> str:
    return f"{float(v):,.1f} s"


def _phase(v: Any, phase: str) -> str:
    if v is None:
        return "-"
    if not phase.endswith("_s"):
        return md_cell(v)
    return _secs(v) if isinstance(v, int | float) else md_cell(v)


# ---- the document -------------------------------------------------------------------------


@dataclass
class Findings:
    """What the summary and the detail sections both read, computed once."""

    mode: str  # the mode the targets are checked in: the policy's
    targets: list[Target]  # the targets checked
    targets_source: str  # where the targets came from, as the report names it
    card: list[dict] | None  # the targets on the run's measurements; None without a policy
    vcard: list[dict] | None  # the same on verify's timing; None without verify_timing.csv
    verify: dict | None  # sweeper verify's verdict (timing_verdict); None without verify
    pairing: pd.DataFrame  # the pairing check (pairing.evict_last_contamination)
    ceiling_gbps: float | None
    cliff: list[dict]  # users' kernels against the baseline (sweeper.analyze.cliff); [] if none


def findings(
    results: pd.DataFrame,
    manifest: Mapping[str, Any],
    doc: Mapping[str, Any] | None,
    vt: pd.DataFrame | None,
    chosen: Sequence[Target] | None = None,
    targets_source: str = DEFAULT_SOURCE,
) -> Findings:
    from sweeper.analyze.targets import targets
    from sweeper.analyze.verdict import timing_verdict
    from sweeper.report.checks import scorecard, verify_scorecard
    from sweeper.report.pairing import evict_last_contamination

    modes = list(manifest.get("modes") or [manifest.get("mode") or "hot"])
    mode = (doc.get("provenance") or {}).get("mode", modes[0]) if doc else modes[0]
    l2 = int((doc or {}).get("l2_bytes") or manifest["device"]["l2_bytes"])
    ceiling = (manifest.get("ceiling") or {}).get("gbps")
    chosen = list(targets(l2) if chosen is None else chosen)
    card = vcard = checked = None
    if doc is not None:
        card = scorecard(results, dict(doc), l2, mode=mode, ceiling_gbps=ceiling, chosen=chosen)
    if vt is not None:
        checked = timing_verdict(vt.to_dict("records"))
        if "ratio" in vt:
            vcard = verify_scorecard(vt, l2, mode=mode, ceiling_gbps=ceiling, chosen=chosen)
    chk = evict_last_contamination(results)
    from sweeper.analyze.cliff import cliff

    users = cliff(results, dict(manifest))
    return Findings(mode, chosen, targets_source, card, vcard, checked, chk, ceiling, users)


def _checked(card: list[dict] | None) -> tuple[int, int]:
    """(checks with data, of them failing) of a scorecard."""
    rows = [c for c in card or [] if c["ok"] is not None]
    return len(rows), sum(1 for c in rows if not c["ok"])


def verdict(manifest: Mapping[str, Any], f: Findings) -> tuple[str, str]:
    """("pass" | "fail" | "incomplete", the sentence after it). Fail: a target check fails
    on the run's measurements or on verify's timing, or verify fails. Incomplete, where
    nothing fails: no policy, not verified, the run not complete or a boundary bracketed
    more widely than the plan resolution."""
    if is_audit(manifest):
        return _audit_verdict(manifest, f)
    said, missing = [], []  # in order: the run's targets, verify's targets, verify
    n, bad = _checked(f.card)
    if f.card is None:
        missing.append("no policy, so no target is checked (`sweeper policy build RUN`)")
    elif bad:
        said.append(f"{bad} of {n} target checks fail on the run's measurements")
    else:
        said.append(f"all {n} target checks are met on the run's measurements")
    vn, vbad = _checked(f.vcard)
    if f.vcard is not None:
        said.append(f"{vbad} of {vn} fail on verify's timing" if vbad else
                    f"all {vn} are met on verify's timing")  # fmt: skip
    v = f.verify
    if v is None:
        missing.append("not verified (`sweeper verify RUN/policy.json` on a GPU)")
    elif not v["ok"]:
        what = [
            f"{len(v['bit_failures'])} row(s) not bit-exact after timing",
            f"{len(v['baseline_losses'])} size(s) lose to the baseline in every pass",
            f"{len(v['parity_failures'])} size(s) off the Numba kernel by more than 5% in "
            "every pass",
        ]
        keep = [w for w, k in zip(what, ("bit_failures", "baseline_losses", "parity_failures"),
                                  strict=True) if v[k]]  # fmt: skip
        said.append("verify fails (" + "; ".join(keep) + ")")
    else:
        said.append("verify passes")
    if manifest.get("status") not in (None, "complete"):
        missing.append(f"the run is {manifest['status']}")
    if manifest.get("open_brackets"):
        missing.append("a band boundary is bracketed more widely than the plan resolution")
    failed = bool(bad or vbad or (v is not None and not v["ok"]))
    word = "fail" if failed else ("incomplete" if missing else "pass")
    return word, "; ".join(said + missing) + "."


def _audit_verdict(manifest: Mapping[str, Any], f: Findings) -> tuple[str, str]:
    """An audit's verdict: whether the user's kernel falls below the baseline anywhere, from
    the cliff (an audit builds no policy, so no target applies)."""
    base = baseline_of(manifest)
    worst = [c for c in f.cliff if c["worst"] is not None]
    below = [c for c in worst if c["worst"]["ratio"] < 1]
    tail = "; the cliff above gives each mode and dtype; an audit builds no policy"
    if manifest.get("status") not in (None, "complete"):
        tail += f"; the run is {manifest['status']}"
    if not worst:
        return "incomplete", f"no ok cell of your kernel{tail}."
    if below:
        w = min(below, key=lambda c: c["worst"]["ratio"])
        return (
            f"below {base}",
            f"your kernel falls below {base} in {len(below)} of {len(worst)} mode-dtype pairs, "
            f"down to {w['worst']['ratio']:.3f}x ({w['dtype']} {w['mode']} at "
            f"{fmt_bytes(w['worst']['ws_bytes'])}){tail}.",
        )
    return f"never below {base}", f"at every size measured{tail}."


def _out_of_reach_lines(results: pd.DataFrame, f: Findings) -> list[str]:
    """The summary's line for failing sizes that no measured config meets: there the target is
    beyond what the run found, not a choice of the policy."""
    from sweeper.report.checks import best_measured, out_of_reach

    if not f.card and not f.vcard:
        return []
    gone = out_of_reach([f.card, f.vcard], best_measured(results, f.mode, f.ceiling_gbps))
    if not gone:
        return []
    parts = []
    for e in gone:
        shown = ", ".join(
            f"{fmt_bytes(ws)} ({v:.3f})"
            if e["metric"] != "pct_ceiling"
            else f"{fmt_bytes(ws)} ({v:.1f}%)"
            for ws, v in e["sizes"][:SHOWN]
        )
        more = f", ... ({len(e['sizes'])} in all)" if len(e["sizes"]) > SHOWN else ""
        parts.append(f"{e['target']}, {e['dtype']} at {shown}{more}")
    n = sum(len(e["sizes"]) for e in gone)
    return [
        f"- Out of the run's reach ({n}): failing sizes where no config the run measured meets "
        "the floor either, so no policy built from this run could; the best measured value in "
        "brackets: " + "; ".join(parts) + "."
    ]


def cells_text(results: pd.DataFrame) -> str:
    """ "45581 cells (44483 candidate, 549 baseline, 549 copy kernel)": rows of the trial log,
    by role."""
    names = {"candidate": "candidate", "baseline": "baseline", "copy": "copy kernel"}
    counts = results["role"].value_counts()
    order = [r for r in names if r in counts] + sorted(r for r in counts.index if r not in names)
    parts = ", ".join(f"{int(counts[r])} {names.get(r, r)}" for r in order)
    return f"{len(results)} cells ({parts})" if len(order) > 1 else f"{len(results)} {parts} cells"


def summary(
    run_dir: Path,
    manifest: Mapping[str, Any],
    results: pd.DataFrame,
    f: Findings,
    missing: Sequence[str],
    headline: Path | None,
) -> list[str]:
    """The run in one line, what it measured against, what failed and where, the headline
    figure and the way to every section."""
    from sweeper.analyze.ceilings import ABOVE_CEILING

    cand = results[results["role"] == "candidate"]
    per = cand.groupby(["mode", "dtype"])["ws_bytes"].nunique() if len(cand) else None
    sizes = "no" if per is None else (
        f"{per.min()}" if per.min() == per.max() else f"{per.min()}-{per.max()}")  # fmt: skip
    total, _, recorded = run_seconds(manifest)
    modes = ", ".join(manifest.get("modes") or [str(manifest.get("mode", "-"))])
    audit = is_audit(manifest)
    if audit:  # an audit builds no policy: nothing after the run is missing
        missing = [m for m in missing if not m.startswith(("policy", "verify"))]
    out = [
        f"`{run_dir.as_posix()}`: {modes} mode; {', '.join(dtypes_in(results))}; "
        f"{sizes} sizes per dtype; {cells_text(results)}, a cell being one row of the trial "
        f"log, timed against {baseline_of(manifest)}"
        + (f"; wall time {_duration(total)}" if total is not None and recorded else "")
        + ". "
        + ("Not built yet: " + "; ".join(missing) + "." if missing else "Every stage built.")
        + " Written by `sweeper report`.",
        "",
    ]
    if manifest.get("baseline_kernel"):
        k = manifest["baseline_kernel"]
        out += [
            f"**The baseline is your kernel `{k['kernel']}`** ({manifest['baseline']}, asked for "
            "with `--baseline`), not torch: every ratio in this report is against it.",
            "",
        ]
    elif baseline_of(manifest) != "torch":
        out += [
            f"**The baseline is `{manifest['baseline']}`, not torch**: every ratio in this "
            "report is against it (torch was not importable, or another baseline was asked "
            "for; `pip install -e '.[torch]'`).",
            "",
        ]
    if manifest.get("status") not in (None, "complete"):
        out += [f"**The run is {manifest['status']}**: `sweeper run --resume` completes it.", ""]
    if manifest.get("open_brackets"):
        out += [
            "**A band boundary is bracketed more widely than the plan resolution** in "
            + ", ".join(manifest["open_brackets"])
            + " (the run's bracketing stopped at its round limit): `sweeper policy build` "
            "refuses it; `sweeper run --resume --run-dir RUN` samples that stretch.",
            "",
        ]
    out += ["What failed, and where:", ""]
    v = f.verify
    if v is not None:
        for title, key in (
            ("not bit-exact after timing", "bit_failures"),
            ("losses to the baseline in every pass", "baseline_losses"),
            ("off the Numba kernel by more than 5% in every pass", "parity_failures"),
            ("losses in some passes only", "unrepeated_losses"),
        ):
            items = v[key]
            if not items:
                continue
            what = "parity" if key == "parity_failures" else "ratio"
            named = [
                f"{r['dtype']} {fmt_bytes(r['ws_bytes'])}"
                + ("" if key == "bit_failures" else f" ({_pass_ratios(r, what)})")
                for r in items[:SHOWN]
            ]
            more = f", ... ({len(items)} in all)" if len(items) > SHOWN else ""
            out.append(f"- Verify, {title} ({len(items)}): " + "; ".join(named) + more + ".")
        if not (v["bit_failures"] or v["baseline_losses"] or v["parity_failures"]):
            out.append(
                "- Verify: bit-exact; no size loses or is off its Numba kernel in every pass."
            )
    bad = results[results["status"] != "ok"]
    statuses = ", ".join(f"{n} {s}" for s, n in bad["status"].value_counts().sort_index().items())
    chk = f.pairing
    flagged = chk[chk["flagged"]] if len(chk) else chk
    from sweeper.report.pairing import ALPHA

    if "ceiling_check" in (manifest.get("harness") or {}):
        above = f"{int((results['status'] == ABOVE_CEILING).sum())} above a physical limit"
    else:
        above = "recorded without the physical-limit check"
    out += [
        f"- Guards: {len(bad)} of {len(results)} cells not ok"
        + (f" ({statuses})" if len(bad) else "")
        + f"; {len(manifest.get('guards') or [])} guard-log finding(s); {above}; "
        f"baseline slower next to evict_last candidates at {len(flagged)} of "
        f"{len(chk)} sizes ({int((flagged['p'] < ALPHA).sum()) if len(flagged) else 0} with "
        f"p < {ALPHA}). Detail: [Guards](#guards).",
        "",
    ]
    if headline is not None:
        out += [f"![{headline.stem}]({_rel(headline, run_dir)})", ""]
    out.append(" · ".join(f"[{s}](#{s.lower().replace(' ', '-')})" for s in SECTIONS[1:]))
    return out


def project_targets(manifest: Mapping[str, Any], results: pd.DataFrame, f: Findings) -> list[str]:
    """The project's H200 targets (checks.targets) on the run's measurements and on verify's
    timing: the verdict on them, one line per target, and the failing sizes no measured
    config could have met. They grade the project, not a user's run: the report's first
    screen grades the user's targets."""
    from sweeper.analyze.targets import METRICS

    if is_audit(manifest):
        return ["An audit builds no policy: no project target applies."]
    word, why = verdict(manifest, f)
    out = [f"**Project targets: {word}.** {why[0].upper()}{why[1:]}", ""]
    if f.card is None:
        return out + [f"Targets: {f.targets_source}; none checked without a policy."]
    out += [
        f"Targets: {f.targets_source}; checked on the policy's config at every measured "
        f"size ({f.mode} mode)"
        + (
            ' and on verify\'s timing of the exported header (an "at least" target must '
            "hold in every pass; a loss counts only where every pass loses)"
            if f.vcard is not None
            else ""
        )
        + ". Detail: [Targets](#targets).",
        "",
    ]
    specs: dict[str, Any] = {}
    for c in [*f.card, *(f.vcard or [])]:
        specs.setdefault(c["target"], c["spec"])
    rows = []
    for name, t in specs.items():
        run = [c for c in f.card if c["target"] == name]
        ver = [c for c in f.vcard or [] if c["target"] == name]
        rule = f"{METRICS.get(t.metric, t.metric)} >= {t.floor:g}, {t.sizes_text()}, " + "/".join(
            c["dtype"] for c in run or ver
        )
        rows.append((name, rule, target_result(run),
                     "not verified" if f.vcard is None else target_result(ver)))  # fmt: skip
    out += md_table(("target", "rule", "run", "verify"), rows) + [""]
    idle = [t.name for t in f.targets if t.name not in specs]
    if idle:
        out += ["Not applicable to this run's mode and dtypes: " + "; ".join(idle) + ".", ""]
    return out + _out_of_reach_lines(results, f)


def _pass_ratios(r: Mapping[str, Any], what: str) -> str:
    rows = r.get("passes") or [r]
    if what == "parity":
        return " / ".join(f"{float(x['vs_numba']):.3f}x of Numba" for x in rows)
    return " / ".join(f"{float(x['ratio']):.3f}x" for x in rows)


def targets_section(f: Findings) -> list[str]:
    if f.card is None:
        return ["No policy yet: the targets are checked on the policy's configs."]
    from sweeper.report.checks import scorecard_markdown

    ceiling_s = f"{f.ceiling_gbps:.0f} GB/s" if f.ceiling_gbps else "not measured in this run"
    return [
        f"Targets: {f.targets_source}. The policy's config at every measured size "
        f"({f.mode} mode); ratios are to the baseline, measured side by side. `worst` is the "
        "value the target is checked on (for the CI target, the lowest upper end of a "
        "ratio's CI); the lowest point ratio is shown beside it. L2-resident "
        f"ceiling: {ceiling_s}."
        + (
            " The `verify:` columns: the same targets on the exported header's own timing "
            '(`sweeper verify`): an "at least" target is checked on each size\'s lowest '
            "pass, a loss target (below the baseline, a loss over 1%) on its best, so a loss "
            "counts only where every pass loses."
            if f.vcard is not None
            else " Not verified: no `verify:` columns."
        ),
        "",
        scorecard_markdown(f.card, f.vcard),
    ]


def _run_ratios(results: pd.DataFrame | None) -> dict[tuple, float]:
    """The run's own ratio of each ok candidate cell, by (mode, dtype, ws_bytes, config)."""
    from sweeper.analyze.select import ok_candidates

    if results is None or results.empty:
        return {}
    ok = ok_candidates(results)
    keys = zip(ok["mode"], ok["dtype"], ok["ws_bytes"].astype(int), ok["config"], strict=True)
    return dict(zip(keys, ok["ratio"].astype(float), strict=True))


def verify_against_run(rows: list[dict], run: dict[tuple, float]) -> dict | None:
    """Verify's ratio over the run's ratio of the same config at the same size, per size and
    pass: median and 5-95% range, and how many size-passes the run measured. None when the
    run measured none of them."""
    import numpy as np

    q = [
        r["ratio"] / run[k]
        for r in rows
        if (k := (r.get("mode"), r["dtype"], int(r["ws_bytes"]), r["config"])) in run
    ]
    if not q:
        return None
    lo, med, hi = np.percentile(q, [5, 50, 95])
    return {"median": med, "p5": lo, "p95": hi, "n": len(q), "of": len(rows)}


def verify_section(
    run_dir: Path,
    vt: pd.DataFrame | None,
    v: dict | None = None,
    results: pd.DataFrame | None = None,
) -> list[str]:
    """What `sweeper verify` measured for this run's policy (verify_timing.csv): the verdict
    as verify computes it, with every repeated failure and the pass-to-pass noise; with the
    run's cells (`results`), how verify's ratios compare with the run's own for the same
    config and size, overall and at each failure."""
    if vt is None:
        return [
            "Not verified yet: `sweeper verify <run>/policy.json` on a GPU builds the exported "
            "header, checks it bit-exact and times it here."
        ]
    from sweeper.analyze.verdict import pass_values, timing_verdict

    rows = vt.to_dict("records")
    v = timing_verdict(rows) if v is None else v
    mode = rows[0].get("mode", "?") if rows else "?"
    txt = run_dir / "verify.txt"
    out = [
        "From `verify_timing.csv`"
        + (" (verify's printout: [verify.txt](verify.txt))" if txt.exists() else "")
        + f": {v['sizes']} sizes x {v['passes']} pass{'es' if v['passes'] != 1 else ''}, "
        f"{mode} mode. A size fails parity or loses only if it does in every pass.",
        "",
    ]
    sp = v["pass_spread"]
    spread = f"median {sp['median']:.2%}, p95 {sp['p95']:.2%}, max {sp['max']:.2%}" if sp else "-"
    run = _run_ratios(results)
    vr = verify_against_run(rows, run)
    against = (
        f"median {vr['median']:.3f}, 5-95% {vr['p5']:.3f}-{vr['p95']:.3f} "
        f"({vr['n']} of {vr['of']} size-passes)"
        if vr
        else "-"
    )
    out += md_table(
        ["check", "result"],
        [
            [
                "bit-exact after timing",
                "yes" if not v["bit_failures"] else f"**no** ({len(v['bit_failures'])} rows)",
            ],
            ["export vs its Numba kernel, max deviation (any pass)", f"{v['max_parity_dev']:.1%}"],
            ["sizes off Numba by > 5% in every pass", len(v["parity_failures"])],
            ["sizes losing to the baseline in every pass", len(v["baseline_losses"])],
            ["sizes losing in some passes only", len(v["unrepeated_losses"])],
            ["lowest ratio to the baseline (any pass)", _num(v["min_ratio"], ".3f")],
            ["pass-to-pass movement of the ratio", spread],
            ["ratio over the run's ratio of the same config and size", against],
            ["verdict", "**pass**" if v["ok"] else "**fail**"],
        ],  # fmt: skip
        "--",
    )
    for title, key, what in (
        ("Losses in every pass", "baseline_losses", "ratio"),
        ("Parity failures in every pass", "parity_failures", "parity"),
        ("Losses in some passes only", "unrepeated_losses", "ratio"),
    ):
        if not v[key]:
            continue
        body = [
            [
                r["dtype"],
                fmt_bytes(r["ws_bytes"]),
                f"`{r['config']}`",
                "; ".join(pass_values(r, what))
                + (" (within the pass-to-pass noise)" if r.get("within_noise") else ""),
                _times(run.get((mode, r["dtype"], int(r["ws_bytes"]), r["config"]))),
            ]
            for r in v[key][:LONGEST]
        ]
        out += ["", f"**{title}**", ""]
        out += md_table(["dtype", "size", "config", "each pass", "in the run"], body, "----r")
        out += [""] + _more(len(v[key]), "verify_timing.csv") if len(v[key]) > LONGEST else []
    return out


def audit_section(results: pd.DataFrame, manifest: Mapping[str, Any]) -> list[str]:
    """The cliff of the users' kernels (sweeper.analyze.cliff), first in an audit's report;
    nothing for a run without users' kernels."""
    from sweeper.analyze.cliff import cliff_lines

    lines = cliff_lines(results, dict(manifest))
    if not lines:
        return []
    return ["### The cliff", "", "```", *lines, "```", ""]


def _l2(manifest: Mapping[str, Any]) -> int:
    return int((manifest.get("device") or {}).get("l2_bytes") or
               (manifest.get("plan") or {}).get("l2_bytes") or 0)  # fmt: skip


# what a run that measured hot mode alone cannot check, and how to check it
HOT_ALONE = (
    "This run measured hot mode alone, so a kernel that works less in back-to-back calls than "
    "after a write (a hot-only gain) cannot be told from a fast one here: run it with "
    "`--modes hot,after-write` to compare the modes from 2 x L2 on."
)


def _hot_alone(manifest: Mapping[str, Any], results: pd.DataFrame) -> bool:
    """Whether the run measured hot mode alone (its manifest's modes, else its results')."""
    modes = manifest.get("modes") or (
        sorted(set(results["mode"])) if "mode" in results.columns else []
    )
    return list(modes) == ["hot"]


def hot_only(results: pd.DataFrame, manifest: Mapping[str, Any]) -> list[str]:
    """Hot against the run's other mode, per range of working set (sweeper.analyze.modegain);
    for a run of hot mode alone, that the check could not be made; nothing for another run
    of one mode."""
    from sweeper.analyze.modegain import hot_only_lines

    lines = hot_only_lines(results, _l2(manifest), show=user_configs(manifest))
    if not lines and _hot_alone(manifest, results):
        lines = [HOT_ALONE, ""]
    return ["### Hot-only gains", "", *lines] if lines else []


def hot_only_warning(results: pd.DataFrame, manifest: Mapping[str, Any]) -> list[str]:
    """An audit's first screen: the users' kernels whose hot gain the other mode does not see,
    or, for an audit of hot mode alone, that it could not be looked for."""
    from sweeper.analyze.modegain import mode_gains

    mine = set(user_configs(manifest))
    if mine and _hot_alone(manifest, results):
        return ["", f"**Hot mode alone**: {HOT_ALONE}"]
    bad = [r for r in mode_gains(results, _l2(manifest)) if r["flagged"] and r["config"] in mine]
    if not bad:
        return []
    where = "; ".join(
        f"{r['dtype']} {r['range']}: hot {r['hot']:.3f}x, {r['other_mode']} {r['other']:.3f}x"
        for r in bad
    )
    return [
        "",
        f"**Hot-only gain**: the kernel's hot ratios are not seen in the other mode where both "
        f"time the same traffic ({where}); its hot figures are not to be trusted (Guards).",
    ]


def build_report(
    run_dir: str | os.PathLike,
    manifest: Mapping[str, Any],
    results: pd.DataFrame,
    plot_files: Sequence[Path] = (),
    selection_table: pd.DataFrame | None = None,
    policy_doc: Mapping[str, Any] | None = None,
    verify_table: pd.DataFrame | None = None,
    targets: Sequence[Target] | None = None,
    targets_source: str | None = None,
    sample_rows: Any = None,
) -> str:
    """The REPORT.md text. Links are relative to run_dir. `targets`: the user's targets the
    first screen grades (default: summary.default_targets), `targets_source` where they came
    from; the Project targets and Targets sections check checks.targets whatever they are.
    `sample_rows`: the trial records, for the tests that read each cell's samples."""
    run_dir = Path(run_dir)
    missing = []
    if selection_table is None:
        missing.append("selection (run `sweeper select`)")
    if policy_doc is None:
        missing.append("policy (run `sweeper policy`)")
    if not any(p.suffix == ".png" for p in plot_files):
        missing.append("plots (run `sweeper plot`)")
    f = findings(results, manifest, policy_doc, verify_table)
    headline = headline_plot(plot_files, f.mode)
    top = first_screen(
        run_dir, manifest, results, policy_doc, verify_table, f.verify, targets, targets_source
    )
    if is_audit(manifest):  # an audit's first screen: the cliff of the user's kernel, its verdict
        word, why = verdict(manifest, f)
        top = [*audit_section(results, manifest), f"**Verdict: {word}.** {why[0].upper()}{why[1:]}"]
        top += hot_only_warning(results, manifest)
    cliff = [] if is_audit(manifest) else audit_section(results, manifest)  # users' kernels
    bodies = {
        "Summary": [*cliff, *summary(run_dir, manifest, results, f, missing, headline)],
        "Environment": [*environment(manifest), *spread_lines(sample_rows or (), manifest)],
        "Plan coverage": coverage(results, manifest),
        "Selection": [
            *selection(
                results,
                selection_table,
                manifest.get("device", {}).get("l2_bytes"),
                baseline_of(manifest),
            ),
            *floor_section(results, manifest, selection_table),
        ],
        "Policy": policy(policy_doc),
        "Project targets": project_targets(manifest, results, f),
        "Targets": targets_section(f),
        "Verify": verify_section(run_dir, verify_table, f.verify, results),
        "Plots": plots_section(run_dir, plot_files, headline),
        "Guards": [*guards(results, manifest, f.pairing), *hot_only(results, manifest)],
        "Batch position and clocks": batch_checks(results, manifest, sample_rows),
        "Pruned": pruned(manifest),
        "Timing": timing(manifest, results),
    }
    lines = [f"# Run report: {manifest.get('gpu', '?')} · {manifest.get('run_id', '?')}"]
    while top and top[-1] == "":
        top = top[:-1]
    lines += ["", *top] if top else []
    for name in SECTIONS:
        lines += ["", f"## {name}", "", *bodies[name]]
    return "\n".join(lines).rstrip() + "\n"


def write_report(run_dir: str | os.PathLike, targets: str | os.PathLike | None = None) -> Path:
    """Write <run>/REPORT.md, rendering the plots first if they are missing or stale.
    `targets`: a targets file (`sweeper.analyze.targets.load_targets`) the first screen grades instead of the
    default targets."""
    from sweeper.analyze.policy import load_policy
    from sweeper.analyze.store import load_run, read_selection
    from sweeper.analyze.targets import load_targets
    from sweeper.analyze.verdict import load_verify
    from sweeper.files import file_to_write, folder_to_write
    from sweeper.runfolder import POLICY
    from sweeper.schema import atomic_write_text

    run_dir = Path(run_dir)
    # every input is read and checked before anything is written
    chosen, source = None, None
    if targets is not None:
        chosen = load_targets(targets)
        source = f"from `{Path(targets).as_posix()}`, {len(chosen)} target" + (
            "s" if len(chosen) != 1 else ""
        )
    file_to_write(run_dir / REPORT)
    folder_to_write(run_dir / PLOTS, "figures' folder")
    run = load_run(run_dir)
    sel = read_selection(run_dir, run.results)
    doc = load_policy(run_dir / POLICY) if (run_dir / POLICY).exists() else None
    verify = load_verify(run_dir)
    if _plots_stale(run_dir):
        render_plots(run_dir, loaded=run)
    files = sorted((run_dir / PLOTS).glob("*.*"), key=plot_order)
    text = build_report(run_dir, run.manifest, run.results, files, sel, doc, verify, chosen, source,
                        sample_rows=run.trials)  # fmt: skip
    return atomic_write_text(run_dir / REPORT, text)
