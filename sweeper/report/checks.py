"""Scorecard: performance targets, checked against a run and its policy, and against verify.

Every figure is the POLICY's config at that size (what production would dispatch to), taken
from the run's own measurements, with the ratio to the baseline measured side by side (ABBA);
or, for the verify scorecard, the exported header's own timing over verify's passes, where a
size fails a target only if it fails in every pass.

Targets (defaults; the L2-resident ceiling is the run's own, `manifest.json` `ceiling`):
  * never slower than the baseline: at no planned size does the ratio's whole CI lie below 1;
  * no loss of more than 1% (ratio >= 0.99), in every mode;
  * hot, fp32/fp16/bf16: at least 1.3x the baseline at every size in [42, 52] MiB, and at least
    97% of the L2-resident ceiling at every size in (32, 48] MiB;
  * hot, int8: at least 1.2x the baseline at every size of 8 MiB or more;
  * after-write, fp32/fp16/bf16: at least 1.05x the baseline in (36 MiB, 2 x L2];
  * at DRAM sizes (>= 4 x L2) at least 97% of the copy bandwidth measured in the same run.
"""

from __future__ import annotations

from dataclasses import dataclass

from sweeper.analyze.columns import MODES
from sweeper.units import MiB


@dataclass(frozen=True)
class Target:
    name: str
    dtypes: tuple[str, ...]
    lo_bytes: float  # exclusive
    hi_bytes: float  # inclusive
    metric: str  # "ratio_hi" | "ratio" | "pct_copy" | "pct_ceiling"
    floor: float
    modes: tuple[str, ...] = MODES


def targets(l2_bytes: int) -> list[Target]:
    inf = float("inf")
    all4 = ("fp32", "fp16", "bf16", "int8")
    float3 = ("fp32", "fp16", "bf16")
    return [
        Target("never below the baseline (CI)", all4, 0, inf, "ratio_hi", 1.0),
        Target("no loss over 1%", all4, 0, inf, "ratio", 0.99),
        Target("1.3x in [42, 52] MiB", float3, 42 * MiB - 1, 52 * MiB, "ratio", 1.3, ("hot",)),
        Target(
            ">= 97% of the L2 ceiling in (32, 48] MiB",
            float3,
            32 * MiB,
            48 * MiB,
            "pct_ceiling",
            97.0,
            ("hot",),
        ),
        Target("int8 1.2x at >= 8 MiB", ("int8",), 8 * MiB - 1, inf, "ratio", 1.2, ("hot",)),
        Target(
            "after-write 1.05x in (36 MiB, 2 x L2]",
            float3,
            36 * MiB,
            2 * l2_bytes,
            "ratio",
            1.05,
            ("after-write",),
        ),
        Target(">= 97% of copy at >= 4 x L2", all4, 4 * l2_bytes - 1, inf, "pct_copy", 97.0),
    ]


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
    # The copy roofline from the run's own copy rows at the same size (not a cached column).
    copy = results[(results.role == "copy") & (results["mode"] == mode)]
    copy = copy.set_index(["dtype", "n"])["gbps"]
    idx = pd.MultiIndex.from_arrays([rows.dtype, rows.n])
    rows = rows.assign(copy_gbps=copy.reindex(idx).to_numpy())
    rows = rows.assign(pct_copy=100 * rows.gbps / rows.copy_gbps)
    return rows.sort_values(["dtype", "ws_bytes"])


def scorecard(
    results, policy: dict, l2_bytes: int, mode: str = "hot", ceiling_gbps: float | None = None
) -> list[dict]:
    """One line per (target, dtype) of this mode: sizes checked, worst value, pass, failing
    sizes (MiB)."""
    rows = policy_rows(results, policy, mode)
    return _card(_with_ceiling(rows, ceiling_gbps), l2_bytes, mode)


def verify_scorecard(
    verify, l2_bytes: int, mode: str = "hot", ceiling_gbps: float | None = None
) -> list[dict]:
    """The targets on `sweeper verify`'s timing of the exported header (verify_timing.csv):
    per size the best of its passes, so a size fails only where it fails in every pass. Verify
    times no copy kernel, so the copy target has no sizes here."""
    import pandas as pd

    v = verify[verify["mode"] == mode]
    if v.empty:
        return _card(v.assign(pct_copy=[]), l2_bytes, mode)
    best = (
        v.groupby(["dtype", "ws_bytes"], as_index=False)
        .agg(
            ratio=("ratio", "max"),
            ratio_lo=("ratio_lo", "max"),
            ratio_hi=("ratio_hi", "max"),
            gbps=("gbps", "max"),
        )
        .assign(pct_copy=pd.NA)
    )
    return _card(_with_ceiling(best, ceiling_gbps), l2_bytes, mode)


def _with_ceiling(rows, ceiling_gbps: float | None):
    return rows.assign(pct_ceiling=100 * rows.gbps / ceiling_gbps if ceiling_gbps else float("nan"))


def _card(rows, l2_bytes: int, mode: str) -> list[dict]:
    """The targets of this mode, for the dtypes these rows hold."""
    card = []
    present = set(rows.dtype)
    for t in targets(l2_bytes):
        if mode not in t.modes:
            continue
        for dtype in (d for d in t.dtypes if d in present):
            r = rows[
                (rows.dtype == dtype) & (rows.ws_bytes > t.lo_bytes) & (rows.ws_bytes <= t.hi_bytes)
            ]
            # n/a where the metric was not measured at all (verify times no copy kernel; a run
            # without a ceiling); a NaN among measured values counts as failing its floor
            if r.empty or r[t.metric].isna().all():
                card.append(
                    {"target": t.name, "dtype": dtype, "sizes": 0, "worst": None,
                     "floor": t.floor, "ok": None, "failing_mib": []}
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
                    "lowest_ratio": _lowest_ratio(r) if t.metric.startswith("ratio") else None,
                }
            )
    return card


def _lowest_ratio(r) -> dict | None:
    """The size with the lowest point ratio, with its CI: for the CI target, `worst` is the
    lowest CI upper end, which alone would read as if no ratio were below it."""
    r = r[r["ratio"].notna()]
    if r.empty:
        return None
    w = r.loc[r["ratio"].idxmin()]
    return {"ratio": float(w["ratio"]), "lo": float(w["ratio_lo"]), "hi": float(w["ratio_hi"]),
            "mib": round(float(w["ws_bytes"]) / MiB, 2)}  # fmt: skip


def scorecard_markdown(card: list[dict]) -> str:
    lines = [
        "| target | dtype | sizes | worst | floor | met | lowest ratio [95% CI] @ MiB "
        "| failing sizes (MiB) |",
        "|---|---|---:|---:|---:|:---:|---|---|",
    ]
    for c in card:
        worst = "-" if c["worst"] is None else f"{c['worst']:.3f}"
        low = c.get("lowest_ratio")
        low_s = (
            ""
            if not low
            else f"{low['ratio']:.3f} [{low['lo']:.3f}, {low['hi']:.3f}] @ {low['mib']}"
        )
        met = "n/a" if c["ok"] is None else ("yes" if c["ok"] else "**no**")
        fails = ", ".join(str(x) for x in c["failing_mib"][:12])
        if len(c["failing_mib"]) > 12:
            fails += f", ... ({len(c['failing_mib'])} in all)"
        lines.append(
            f"| {c['target']} | {c['dtype']} | {c['sizes']} | {worst} | {c['floor']} | {met} "
            f"| {low_s} | {fails} |"
        )
    return "\n".join(lines) + "\n"
