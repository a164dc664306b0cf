"""Scorecard: performance targets, checked against a run and its policy, and against verify.

Every figure is the POLICY's config at that size (what production would dispatch to), taken
from the run's own measurements, with the ratio to the baseline measured side by side (ABBA);
or, for the verify scorecard, the exported header's own timing over verify's passes, where a
size fails a target only if it fails in every pass.

`sweeper report --targets FILE.json` checks the targets of a file (`load_targets`); without
one, these defaults, the H200 project targets (the L2-resident ceiling is the run's own,
`manifest.json` `ceiling`):
  * never slower than the baseline: at no planned size does the ratio's whole CI lie below 1;
  * no loss of more than 1% (ratio >= 0.99), in every mode;
  * hot, fp32/fp16/bf16: at least 1.3x the baseline at every size in [42, 52] MiB, and at least
    97% of the L2-resident ceiling at every size in (32, 48] MiB;
  * hot, int8: at least 1.2x the baseline at every size of 8 MiB or more;
  * after-write, fp32/fp16/bf16: at least 1.05x the baseline in (36 MiB, 2 x L2];
  * at DRAM sizes (>= 4 x L2) at least 97% of the copy bandwidth measured in the same run.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

from sweeper.analyze.columns import MODES, with_pct_ceiling, with_pct_copy
from sweeper.dtypes import DTYPES
from sweeper.units import MiB

# what a target's value is checked on, as the report names it
METRICS = {
    "ratio": "ratio",
    "ratio_hi": "ratio CI upper end",
    "pct_ceiling": "% of the L2-resident ceiling",
    "pct_copy": "% of the copy kernel",
}

DEFAULT_SOURCE = "defaults from `sweeper/report/checks.py` (the H200 project targets)"


@dataclass(frozen=True)
class Target:
    name: str
    dtypes: tuple[str, ...]
    lo_bytes: float  # exclusive, inclusive when lo_closed
    hi_bytes: float  # inclusive
    metric: str  # a key of METRICS
    floor: float
    modes: tuple[str, ...] = MODES
    lo_closed: bool = False
    # on verify's timing: "every" pass must meet the floor (a target stated as "at least X",
    # checked on a size's lowest pass), or "any" (a loss: a size fails only where every pass
    # fails, checked on its best pass)
    passes: str = "every"

    def sizes_text(self) -> str:
        """The sizes it applies to, e.g. "[42, 52] MiB", "> 32 MiB", "every size"."""
        lo, hi = self.lo_bytes / MiB, self.hi_bytes / MiB
        if not self.lo_bytes and self.hi_bytes == float("inf"):
            return "every size"
        if self.hi_bytes == float("inf"):
            return f"{'>=' if self.lo_closed else '>'} {lo:g} MiB"
        return f"{'[' if self.lo_closed else '('}{lo:g}, {hi:g}] MiB"

    def contains(self, ws_bytes):
        """A mask (or bool) of the working sets this target applies to."""
        above = ws_bytes >= self.lo_bytes if self.lo_closed else ws_bytes > self.lo_bytes
        return above & (ws_bytes <= self.hi_bytes)


def targets(l2_bytes: int) -> list[Target]:
    inf = float("inf")
    all4 = ("fp32", "fp16", "bf16", "int8")
    float3 = ("fp32", "fp16", "bf16")
    return [
        Target("never below the baseline (CI)", all4, 0, inf, "ratio_hi", 1.0, passes="any"),
        Target("no loss over 1%", all4, 0, inf, "ratio", 0.99, passes="any"),
        Target("1.3x in [42, 52] MiB", float3, 42 * MiB, 52 * MiB, "ratio", 1.3, ("hot",), True),
        Target(
            ">= 97% of the L2 ceiling in (32, 48] MiB",
            float3,
            32 * MiB,
            48 * MiB,
            "pct_ceiling",
            97.0,
            ("hot",),
        ),
        Target("int8 1.2x at >= 8 MiB", ("int8",), 8 * MiB, inf, "ratio", 1.2, ("hot",), True),
        Target(
            "after-write 1.05x in (36 MiB, 2 x L2]",
            float3,
            36 * MiB,
            2 * l2_bytes,
            "ratio",
            1.05,
            ("after-write",),
        ),
        Target(
            ">= 97% of copy at >= 4 x L2", all4, 4 * l2_bytes, inf, "pct_copy", 97.0, MODES, True
        ),
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


# ---- targets from a file ------------------------------------------------------------------

_TARGET_FIELDS = {
    "name", "metric", "floor", "from_mib", "above_mib", "to_mib", "dtypes", "modes",
    "verify_passes",
}  # fmt: skip


def load_targets(path: str | os.PathLike) -> list[Target]:
    """The targets of a JSON file: `{"targets": [{"name", "metric", "floor", and optionally
    "from_mib" (inclusive) or "above_mib" (exclusive), "to_mib" (inclusive), "dtypes",
    "modes", "verify_passes" ("every", the default, or "any")}, ...]}`; sizes default to
    every size, dtypes and modes to all. SchemaError naming the file and field on anything
    else."""
    import json
    from pathlib import Path

    from sweeper.errors import FieldError, SchemaError

    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SchemaError(path, None, "file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SchemaError(path, None, f"cannot read: {e}") from None
    except json.JSONDecodeError as e:
        raise SchemaError(path, None, f"not valid JSON (line {e.lineno}: {e.msg})") from None
    try:
        return _parse_targets(doc)
    except FieldError as e:
        raise SchemaError(path, e.field, str(e)) from None


def _parse_targets(doc: object) -> list[Target]:
    from sweeper.errors import FieldError

    if not isinstance(doc, dict):
        raise FieldError("targets", 'expected a JSON object {"targets": [...]}')
    extra = sorted(set(doc) - {"targets"})
    if extra:
        raise FieldError(extra[0], 'unknown field; the file holds only "targets"')
    items = doc.get("targets")
    if not isinstance(items, list) or not items:
        raise FieldError("targets", "expected a non-empty list of targets")
    out: list[Target] = []
    for i, t in enumerate(items):
        where = f"targets[{i}]"
        if not isinstance(t, dict):
            raise FieldError(where, "expected an object")
        extra = sorted(set(t) - _TARGET_FIELDS)
        if extra:
            raise FieldError(
                f"{where}.{extra[0]}", f"unknown field; known: {', '.join(sorted(_TARGET_FIELDS))}"
            )
        name = t.get("name")
        if not isinstance(name, str) or not name.strip():
            raise FieldError(f"{where}.name", "expected a non-empty string")
        if any(name == o.name for o in out):
            raise FieldError(f"{where}.name", f"{name!r} is used by an earlier target")
        metric = t.get("metric")
        if metric not in METRICS:
            raise FieldError(
                f"{where}.metric", f"expected one of {', '.join(METRICS)}, found {metric!r}"
            )
        floor = _number(t, "floor", where, required=True)
        if "from_mib" in t and "above_mib" in t:
            raise FieldError(f"{where}.above_mib", "give from_mib or above_mib, not both")
        closed = "from_mib" in t
        lo = _number(t, "from_mib" if closed else "above_mib", where) or 0.0
        hi = _number(t, "to_mib", where)
        hi = math.inf if hi is None else hi
        if lo < 0 or hi < lo or (hi == lo and not closed):
            raise FieldError(f"{where}.to_mib", f"no size lies in {lo:g} .. {hi:g} MiB")
        dtypes = _names(t, "dtypes", DTYPES, where)
        modes = _names(t, "modes", MODES, where)
        passes = t.get("verify_passes", "every")
        if passes not in ("every", "any"):
            raise FieldError(
                f"{where}.verify_passes",
                f'"every" (each verify pass meets the floor) or "any" (a size fails only where '
                f"every pass fails), found {passes!r}",
            )
        out.append(
            Target(name.strip(), dtypes, lo * MiB, hi * MiB, metric, floor, modes, closed, passes)
        )
    return out


def _number(t: dict, key: str, where: str, required: bool = False) -> float | None:
    from sweeper.errors import FieldError

    if key not in t:
        if required:
            raise FieldError(f"{where}.{key}", "missing")
        return None
    v = t[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise FieldError(f"{where}.{key}", f"expected a finite number, found {v!r}")
    return float(v)


def _names(t: dict, key: str, known: Sequence[str], where: str) -> tuple[str, ...]:
    from sweeper.errors import FieldError

    if key not in t:
        return tuple(known)
    v = t[key]
    if not isinstance(v, list) or not v or not all(isinstance(x, str) for x in v):
        raise FieldError(f"{where}.{key}", "expected a non-empty list of names")
    bad = [x for x in v if x not in known]
    if bad:
        raise FieldError(f"{where}.{key}", f"unknown {bad[0]!r}; known: {', '.join(known)}")
    return tuple(v)
