"""Scorecard: performance targets (sweeper.analyze.targets), checked against a run and its
policy, and against verify.

Every figure is the POLICY's config at that size (what production would dispatch to), taken
from the run's own measurements, with the ratio to the baseline measured side by side (ABBA);
or, for the verify scorecard, the exported header's own timing over verify's passes, where a
size fails a target only if it fails in every pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from sweeper.analyze.columns import with_pct_ceiling, with_pct_copy
from sweeper.analyze.targets import Target, targets
from sweeper.units import MiB


def policy_rows(results, policy: dict, mode: str = "hot"):
    """The measured row of the policy's config at every size the run measured it."""
    import pandas as pd

    df = results[(results.role == "candidate") & (results["mode"] == mode)]
    out = []
    for dtype, spec in policy["dtypes"].items():
        d = df[df.dtype == dtype]
        for band in spec["bands"]:
            hi = band["hi_bytes"] if band["hi_bytes"] is not None else float("inf")
            rows = d[
                (d.config == band["config"]) & (d.ws_bytes >= band["lo_bytes"]) & (d.ws_bytes < hi)
            ]
            out.append(rows)
    rows = pd.concat(out) if out else df.iloc[:0]
    return with_pct_copy(rows, results, mode).sort_values(["dtype", "ws_bytes"])


def scorecard(
    results,
    policy: dict,
    l2_bytes: int,
    mode: str = "hot",
    ceiling_gbps: float | None = None,
    chosen: Sequence[Target] | None = None,
) -> list[dict]:
    """One line per (target, dtype) of this mode: sizes checked, worst value, pass, failing
    sizes (MiB). `chosen`: the targets to check (default: `targets(l2_bytes)`)."""
    rows = policy_rows(results, policy, mode)
    return _card(with_pct_ceiling(rows, ceiling_gbps), l2_bytes, mode, chosen)


def verify_scorecard(
    verify,
    l2_bytes: int,
    mode: str = "hot",
    ceiling_gbps: float | None = None,
    chosen: Sequence[Target] | None = None,
) -> list[dict]:
    """The targets on `sweeper verify`'s timing of the exported header (verify_timing.csv).
    A target whose `passes` is "every" (at least X in every pass) is checked on each size's
    lowest pass; a loss target ("any") on its best pass, so a size fails there only where it
    fails in every pass. Verify times no copy kernel, so the copy target has no sizes here."""
    import pandas as pd

    v = verify[verify["mode"] == mode]
    if v.empty:
        return _card(v.assign(pct_copy=[]), l2_bytes, mode, chosen)

    def per_size(how: str):
        cols = {c: (c, how) for c in ("ratio", "ratio_lo", "ratio_hi", "gbps")}
        rows = v.groupby(["dtype", "ws_bytes"], as_index=False).agg(**cols)
        return with_pct_ceiling(rows.assign(pct_copy=pd.NA), ceiling_gbps)

    lowest, best = per_size("min"), per_size("max")
    chosen = list(targets(l2_bytes) if chosen is None else chosen)
    card = []
    for t in chosen:  # in the targets' order
        card += _card(best if t.passes == "any" else lowest, l2_bytes, mode, [t])
    return card


def _card(rows, l2_bytes: int, mode: str, chosen: Sequence[Target] | None = None) -> list[dict]:
    """The targets of this mode, for the dtypes these rows hold."""
    card = []
    present = set(rows.dtype)
    for t in targets(l2_bytes) if chosen is None else chosen:
        if mode not in t.modes:
            continue
        for dtype in (d for d in t.dtypes if d in present):
            r = rows[(rows.dtype == dtype) & t.contains(rows.ws_bytes)]
            # n/a where the metric was not measured at all (verify times no copy kernel; a run
            # without a ceiling); a NaN among measured values counts as failing its floor
            if r.empty or r[t.metric].isna().all():
                card.append(
                    {"target": t.name, "dtype": dtype, "sizes": 0, "worst": None,
                     "floor": t.floor, "ok": None, "failing_mib": [], "spec": t}
                )  # fmt: skip
                continue
            # A missing value (NaN) can never count as meeting a floor.
            bad = r[~(r[t.metric].astype(float) >= t.floor)]
            card.append(
                {
                    "target": t.name,
                    "dtype": dtype,
                    "sizes": int(len(r)),
                    "worst": float(r[t.metric].astype(float).min()),
                    "floor": t.floor,
                    "ok": bad.empty,
                    "failing_mib": [round(float(w) / MiB, 2) for w in bad.ws_bytes],
                    "failing_ws": [int(w) for w in bad.ws_bytes],
                    "lowest_ratio": _lowest_ratio(r) if t.metric.startswith("ratio") else None,
                    "spec": t,
                }
            )
    return card


def best_measured(results, mode: str, ceiling_gbps: float | None):
    """Per dtype and working set of this mode: the best value of each target metric over every
    ok candidate the run measured there (each metric on its own), what the run's data reaches
    at that size whatever a policy serves."""
    from sweeper.analyze.select import ok_candidates

    df = ok_candidates(results[results["mode"] == mode])
    df = with_pct_ceiling(with_pct_copy(df, results, mode), ceiling_gbps)
    return df.groupby(["dtype", "ws_bytes"])[["ratio", "ratio_hi", "pct_ceiling", "pct_copy"]].max()


def out_of_reach(cards: Sequence[list[dict] | None], best) -> list[dict]:
    """The failing sizes of the cards' targets where no config the run measured meets the
    floor either (`best`: best_measured): a limit of the configs measured there, which no
    policy built from the run could have met. One entry per target and dtype:
    {target, dtype, metric, floor, sizes: [(ws_bytes, best value)]}."""
    out: dict[tuple[str, str], dict] = {}
    for card in cards:
        for c in card or []:
            t = c["spec"]
            for ws in c.get("failing_ws", []):
                value = best[t.metric].get((c["dtype"], ws), math.nan)
                if value >= t.floor:  # False for NaN: not measured is not met
                    continue
                e = out.setdefault(
                    (c["target"], c["dtype"]),
                    {"target": c["target"], "dtype": c["dtype"], "metric": t.metric,
                     "floor": t.floor, "sizes": {}},
                )  # fmt: skip
                e["sizes"][ws] = float(value)
    return [{**e, "sizes": sorted(e["sizes"].items())} for e in out.values()]


def _lowest_ratio(r) -> dict | None:
    """The size with the lowest point ratio, with its CI: for the CI target, `worst` is the
    lowest CI upper end, which alone would read as if no ratio were below it."""
    r = r[r["ratio"].notna()]
    if r.empty:
        return None
    w = r.loc[r["ratio"].idxmin()]
    return {"ratio": float(w["ratio"]), "lo": float(w["ratio_lo"]), "hi": float(w["ratio_hi"]),
            "mib": round(float(w["ws_bytes"]) / MiB, 2)}  # fmt: skip


def scorecard_markdown(card: list[dict], verify: list[dict] | None = None) -> str:
    """The scorecard as a Markdown table; with `verify` (verify_scorecard's lines), each
    line gets the same target's sizes, worst, met and failing sizes on verify's timing."""
    head = "| target | dtype | sizes | worst | floor | met | lowest ratio [95% CI] @ MiB "
    head += "| failing sizes (MiB) |"
    align = "|---|---|---:|---:|---:|:---:|---|---|"
    if verify is not None:
        head += " verify: sizes | verify: worst | verify: met | verify: failing sizes (MiB) |"
        align += "---:|---:|:---:|---|"
    by_key = {(c["target"], c["dtype"]): c for c in verify or []}
    lines = [head, align]
    for c in card:
        low = c.get("lowest_ratio")
        low_s = (
            ""
            if not low
            else f"{low['ratio']:.3f} [{low['lo']:.3f}, {low['hi']:.3f}] @ {low['mib']}"
        )
        line = (
            f"| {c['target']} | {c['dtype']} | {c['sizes']} | {_worst(c)} | {c['floor']} "
            f"| {_met(c)} | {low_s} | {_fails(c)} |"
        )
        if verify is not None:
            v = by_key.get((c["target"], c["dtype"]))
            line += (
                " - | - | - | - |"
                if v is None
                else f" {v['sizes']} | {_worst(v)} | {_met(v)} | {_fails(v)} |"
            )
        lines.append(line)
    return "\n".join(lines) + "\n"


def _worst(c: dict) -> str:
    return "-" if c["worst"] is None else f"{c['worst']:.3f}"


def _met(c: dict) -> str:
    return "n/a" if c["ok"] is None else ("yes" if c["ok"] else "**no**")


def _fails(c: dict) -> str:
    fails = ", ".join(str(x) for x in c["failing_mib"][:12])
    if len(c["failing_mib"]) > 12:
        fails += f", ... ({len(c['failing_mib'])} in all)"
    return fails
