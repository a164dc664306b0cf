"""Winners per (mode, pattern, dtype, size), with ties decided inside the noise.

Pure pandas on the tidy results table (sweeper.analyze.columns): no GPU, no files except the two
tables `write_selection` puts next to a run.

Two configs are TIED at a size when the difference between them is inside the noise: their
95% CIs of the median time overlap, or their GB/s differ by at most `tolerance` (relative).
Among the configs tied with the fastest one, those measured below the baseline (ratio CI
wholly under 1.0) drop out if any tied config is not below it: a tie, whose sides are equal
inside the noise, never goes to a config that loses to the baseline when a tied one does not
(the project's target is to be at least the baseline at every size). Then the chosen config is

1. the config chosen at the neighbouring smaller size (so a selection does not flip-flop on
   noise, which would create band boundaries that mean nothing), else
2. the SIMPLEST config, by `simplicity_key`:
   a. fewer non-default cache hints. Cache operators are the choice most sensitive to the
      L2 regime (evict-first loads were the v2 cliff: 0.34-0.65x of torch inside L2), so
      a hint has to earn its place by being measurably faster;
   b. smaller unroll (fewer registers, fewer loads in flight that only help when latency
      is exposed; unroll >= 4 measured slower at DRAM sizes on the 4090);
   c. 'onepass' grids before grid-stride ones (the grid does not depend on the SM count);
   d. smaller vector width (less alignment required: fewer inputs take the scalar fallback);
   e. block size closest to 256 (the conventional default), then the name (determinism).

The floor and the confirmation round. A run searched with a floor (sweeper.run.search,
SearchParams.floor) tags the rows of its floor config, the grid's config closest to the
baseline's own launch shape (`floor` = 1), and measures it at every size; its confirmation
round times, at every size, the configs tied with the fastest and the floor a second time, in
another order (role `confirm`). Where a size has both measurements of the floor, the tied set
of the rule above is replaced by one that must survive the second measurement:

* a config BEATS the floor when its ratio to the baseline over the floor's ratio exceeds
  1 + the pass-to-pass noise in BOTH measurements (ratios are paired with the baseline cell
  by cell, so drift between the cells cancels); the noise is the p95 of |second ratio /
  first ratio - 1| over the run's confirmed cells in the working set's range
  (TOLERANCE_RANGES_MIB, as verify's tolerance is measured; `pass_noise`);
* no config timed twice beats the floor: the floor alone is acceptable there, whatever the
  first measurement's ranking (six configs that each tie the baseline inside the noise do
  not make six bands, and none of them can lose to it where the floor's shape does not);
* otherwise the acceptable set is the one-measurement tied set less every config that is
  not faster than the floor in each measurement it has: a config tied with a confirmed
  winner can serve a band over sizes where the round did not time it, never one measured
  slower than the floor.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from sweeper.analyze.columns import MEASURED
from sweeper.errors import SweeperError
from sweeper.runfolder import BEYOND_L2, SELECTION_CSV, SELECTION_MD
from sweeper.units import fmt_bytes

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_TOLERANCE = 0.02
VARIANT_FIELDS = ("vec_bytes", "unroll", "load_hint", "store_hint", "block", "grid")
GROUP = ("mode", "pattern", "dtype")


def _int(v: object, default: int = 0) -> int:
    """int(v), or `default` for a missing value (None, NaN) or text that is no number."""
    try:
        return int(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):  # None, NaN, junk
        return default


def _hint_is_default(h: object) -> bool:
    """No hint: absent, empty, "default", or a missing value as pandas writes it."""
    return h is None or str(h).strip().lower() in ("", "default", "none", "nan", "<na>")


def simplicity_key(variant: dict) -> tuple:
    """Sort key: smaller is simpler (see the module docstring for the order and why)."""
    hints = sum(not _hint_is_default(variant.get(h)) for h in ("load_hint", "store_hint"))
    block = _int(variant.get("block"), 256)
    return (
        hints,
        _int(variant.get("unroll"), 1),
        variant.get("grid") != "onepass",
        _int(variant.get("vec_bytes"), 0),
        abs(math.log2(block / 256)) if block > 0 else math.inf,
        block,
        str(variant.get("config", variant.get("name", ""))),
    )


def tied_with(best: dict, other: dict, tolerance: float) -> bool:
    """True when `other` is inside the noise of `best` (CIs overlap or within tolerance)."""
    if other["gbps"] >= best["gbps"] * (1.0 - tolerance):
        return True
    lo, hi = other.get("time_lo_us"), best.get("time_hi_us")
    if _nan(lo) or _nan(hi):  # not known (None or NaN): no overlap to speak of
        return False
    # time CIs overlap <=> the slower one's low end is not above the faster one's high end
    return float(lo) <= float(hi)


def below_baseline(r: dict) -> bool:
    """The ratio to the baseline's CI lies wholly below 1.0 (NaN: not known to be below)."""
    hi = r.get("ratio_hi")
    return not _nan(hi) and float(hi) < 1.0  # type: ignore[arg-type]


def tied_set(recs: list[dict], tolerance: float) -> list[dict]:
    """The configs tied with recs[0] (the fastest), less those below the baseline when a tied
    config is not below it (module docstring)."""
    tied = [r for r in recs if tied_with(recs[0], r, tolerance)]
    return [r for r in tied if not below_baseline(r)] or tied


def _nan(v: object) -> bool:
    try:
        return math.isnan(float(v))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return True


def ok_candidates(results: pd.DataFrame) -> pd.DataFrame:
    """Candidate rows that may be selected: status ok, a positive finite GB/s."""
    df = results[(results["role"] == "candidate") & (results["status"] == "ok")]
    df = df[df["gbps"].notna() & (df["gbps"] > 0)]
    return df


# the fields of a candidate row that selection reads (_cells hands out no others)
CELL_FIELDS = (*GROUP, "ws_bytes", "n", "config", "gbps", "ratio", "ratio_lo", "ratio_hi",
               "time_lo_us", "time_hi_us", "copy_gbps", *VARIANT_FIELDS)  # fmt: skip


def _cells(
    cands: pd.DataFrame,
) -> Iterator[tuple[tuple[str, str, str], int, list[dict], list[dict]]]:
    """Per (mode, pattern, dtype) and size (ws_bytes), both ascending: the cell's candidate
    rows as records in table order, and one row per config fastest first (GB/s descending,
    equal GB/s in the order pandas' sort_values gives them; a config measured twice keeps
    its first row in that order). One pass over the table instead of one frame per cell."""
    import numpy as np

    recs = cands[[c for c in CELL_FIELDS if c in cands.columns]].to_dict("records")
    gbps = cands["gbps"].to_numpy(dtype=np.float64)
    where: dict[tuple, list[int]] = {}
    for i, r in enumerate(recs):
        where.setdefault((r["mode"], r["pattern"], r["dtype"], int(r["ws_bytes"])), []).append(i)
    for mode, pattern, dtype, ws in sorted(where):
        rows = where[(mode, pattern, dtype, ws)]
        # descending as pandas orders it (sorting.nargsort): quicksort of the reversed values,
        # reversed back
        g = gbps[rows][::-1]
        order = np.arange(len(rows))[::-1][g.argsort(kind="quicksort")][::-1]
        best: list[dict] = []
        seen: set[str] = set()
        for k in order:
            r = recs[rows[k]]
            if r["config"] not in seen:
                seen.add(r["config"])
                best.append(r)
        yield (mode, pattern, dtype), ws, [recs[i] for i in rows], best


def searched(results: pd.DataFrame, manifest: dict) -> pd.DataFrame:
    """The rows without the candidates the search pruned (the manifest's `pruned`: more than
    the margin behind the best at every screening size, by paired ratio). A pruned config
    was measured only at screening sizes, so it can serve no band, and at one size its
    GB/s can rank above the survivors' by the drift between cells measured minutes apart
    while its ratio to the baseline, timed side by side, ranks it behind. Selection and
    policy choose among the configs the sweep measured at every size; the runner closes
    brackets over the same rows. A survivor of the sizes beyond the L2 only (the manifest's
    `beyond_l2_only`) keeps its rows beyond the L2: within it, only its screening measured
    it, and there it was more than the margin behind the best."""
    import pandas as pd

    pruned = [(p["mode"], p["dtype"], p["config"]) for p in manifest.get("pruned") or []]
    scoped = [
        (*key.split("/", 1), c) for key, cs in (manifest.get(BEYOND_L2) or {}).items() for c in cs
    ]
    if not pruned and not scoped:
        return results
    keys = pd.MultiIndex.from_frame(results[["mode", "dtype", "config"]])
    candidate = (results["role"] == "candidate").to_numpy()
    drop = keys.isin(pruned) & candidate
    if scoped:
        inside = (results["ws_bytes"] <= int(manifest["plan"]["l2_bytes"])).to_numpy()
        drop |= keys.isin(scoped) & candidate & inside
    return results[~drop]


def _copy_lookup(results: pd.DataFrame) -> dict[tuple[str, str, int], float]:
    """(mode, pattern, ws_bytes) -> copy GB/s measured in the same run (ok rows only)."""
    cp = results[(results["role"] == "copy") & (results["status"] == "ok")]
    out: dict[tuple[str, str, int], float] = {}
    for r in cp.itertuples(index=False):
        out[(r.mode, r.pattern, int(r.ws_bytes))] = float(r.gbps)
        out.setdefault((r.mode, "", int(r.ws_bytes)), float(r.gbps))
    return out


def check_tolerance(tolerance) -> None:
    """A tie tolerance is a relative GB/s difference: a number in [0, 1), or one per range
    of working set (tolerance_at)."""
    values = [tolerance] if isinstance(tolerance, (int, float)) else [v for _, v in tolerance]
    for value in values:
        if not 0 <= value < 1:  # False for NaN
            raise SweeperError(
                f"--tolerance {value}: a relative GB/s difference in [0, 1), e.g. 0.02"
            )


# Working-set ranges (upper edges in MiB; the last range is open) over which verify's
# pass-to-pass movement sets a tolerance (`sweeper policy build --tolerance verify`): on the
# H200 its p95 runs from 0.8% above 256 MiB to 4.1% at or below 1 MiB within one verify
# (docs/export.md). A range with fewer sizes than TOLERANCE_MIN_SIZES takes the p95 over all.
TOLERANCE_RANGES_MIB = (1, 4, 16, 64, 256)
TOLERANCE_MIN_SIZES = 10


def tolerance_at(tolerance, ws_bytes: int) -> float:
    """The tie tolerance at a working set: `tolerance` is a number, or one per range of
    working set, [(hi_bytes, value), ..., (None, value)] ascending, each range (the previous
    hi, hi] (what `sweeper policy build --tolerance verify` measures)."""
    if isinstance(tolerance, (int, float)):
        return float(tolerance)
    for hi, value in tolerance:
        if hi is None or ws_bytes <= hi:
            return float(value)
    return float(tolerance[-1][1])


# ---- the floor and the confirmation round (module docstring) --------------------------------


def floor_config(results: pd.DataFrame) -> dict[tuple[str, str, str], str]:
    """(mode, pattern, dtype) -> the floor config its rows are tagged with (`floor` = 1)."""
    if "floor" not in results:
        return {}
    tagged = results[(results["floor"] == 1) & results["role"].isin(MEASURED)]
    out: dict[tuple[str, str, str], str] = {}
    for key, grp in tagged.groupby(list(GROUP), sort=True):
        names = sorted(set(grp["config"]))
        if len(names) != 1:
            raise SweeperError(
                f"{'/'.join(map(str, key))}: {len(names)} configs are tagged as the floor "
                f"({', '.join(names)}); a run has one floor per dtype"
            )
        out[tuple(key)] = names[0]  # type: ignore[index]
    return out


def confirmations(results: pd.DataFrame) -> dict[tuple[str, str, str], dict[int, dict]]:
    """(mode, pattern, dtype) -> {ws_bytes: {config: its confirmation row}} (ok rows)."""
    conf = results[(results["role"] == "confirm") & (results["status"] == "ok")]
    conf = conf[conf["ratio"].notna() & (conf["ratio"] > 0)]
    out: dict[tuple[str, str, str], dict[int, dict]] = {}
    for r in conf.to_dict("records"):
        key = (r["mode"], r["pattern"], r["dtype"])
        out.setdefault(key, {}).setdefault(int(r["ws_bytes"]), {})[r["config"]] = r
    return out


def pass_noise(first: dict[int, dict], second: dict[int, dict]):
    """The pass-to-pass noise of one (mode, pattern, dtype): per range of working set
    (TOLERANCE_RANGES_MIB) the p95 of |second ratio / first ratio - 1| over the configs
    measured twice there, as [(hi_bytes, value), ..., (None, value)] (`tolerance_at` reads
    it); a range with fewer than TOLERANCE_MIN_SIZES such values takes the p95 over all, and
    fewer than that in all the default tolerance. first/second: {ws: {config: row}}."""
    import numpy as np

    devs = [
        (ws, abs(float(r2["ratio"]) / float(first[ws][c]["ratio"]) - 1.0))
        for ws, confirmed in second.items()
        for c, r2 in confirmed.items()
        if c in first.get(ws, {}) and float(first[ws][c]["ratio"]) > 0
    ]
    overall = (
        float(np.percentile([d for _, d in devs], 95))
        if len(devs) >= TOLERANCE_MIN_SIZES
        else DEFAULT_TOLERANCE
    )
    out, lo = [], 0
    for hi_mib in (*TOLERANCE_RANGES_MIB, None):
        hi = None if hi_mib is None else hi_mib << 20
        inside = [d for ws, d in devs if ws > lo and (hi is None or ws <= hi)]
        p95 = float(np.percentile(inside, 95)) if len(inside) >= TOLERANCE_MIN_SIZES else overall
        out.append((hi, p95))
        lo = hi or 0
    return out


def confirmed_set(
    recs: list[dict],
    confirmed: dict[str, dict],
    floor: str | None,
    tolerance: float,
    noise: float,
) -> tuple[list[dict], str] | None:
    """The acceptable configs at one size under the floor and the confirmation round (module
    docstring), fastest first, and "floor" (nothing beats it) or "confirmed"; None where the
    size lacks either measurement of the floor (the one-measurement rule applies). `recs`:
    the first measurement's rows, one per config, fastest first."""
    first = {r["config"]: r for r in recs}
    if floor is None or floor not in first or floor not in confirmed:
        return None
    f1, f2 = float(first[floor]["ratio"]), float(confirmed[floor]["ratio"])
    if not (f1 > 0 and f2 > 0):
        return None

    def ahead(c: str, margin: float) -> bool:
        """Faster than the floor by more than `margin` in each measurement `c` has."""
        if c == floor or float(first[c]["ratio"]) / f1 <= 1.0 + margin:
            return False
        return c not in confirmed or float(confirmed[c]["ratio"]) / f2 > 1.0 + margin

    if not any(c in confirmed and ahead(c, noise) for c in first):
        return [first[floor]], "floor"
    tied = [r for r in tied_set(recs, tolerance) if ahead(r["config"], 0.0)]
    # the tie is with the fastest config, which need not beat the floor itself
    return (tied or [first[floor]]), ("confirmed" if tied else "floor")


def _acceptable(recs: list[dict], ws: int, tolerance, confirm: dict) -> tuple[list[dict], str]:
    """The acceptable configs at one size (recs: one row per config, fastest first) and how
    they were found: "" (the one-measurement rule), "floor" or "confirmed"."""
    tol = tolerance_at(tolerance, ws)
    got = None
    if confirm:
        got = confirmed_set(recs, confirm["by_ws"].get(ws, {}), confirm["floor"], tol,
                            tolerance_at(confirm["noise"], ws))  # fmt: skip
    return got if got is not None else (tied_set(recs, tol), "")


def confirm_context(results: pd.DataFrame) -> dict[tuple[str, str, str], dict]:
    """Per (mode, pattern, dtype) with a floor and confirmation rows: its floor config, its
    confirmation rows by size and its pass-to-pass noise."""
    floors, conf = floor_config(results), confirmations(results)
    keys = [key for key in conf if key in floors]
    if not keys:
        return {}
    import pandas as pd

    cands = ok_candidates(results)
    own = cands[pd.MultiIndex.from_frame(cands[list(GROUP)]).isin(keys)]
    first: dict[tuple[str, str, str], dict[int, dict]] = {key: {} for key in keys}
    for key, ws, _, recs in _cells(own):
        first[key][ws] = {r["config"]: r for r in recs}
    return {
        key: {"floor": floors[key], "by_ws": conf[key], "noise": pass_noise(first[key], conf[key])}
        for key in keys
    }


def select(results: pd.DataFrame, tolerance: float = DEFAULT_TOLERANCE) -> pd.DataFrame:
    """One row per (mode, pattern, dtype, size): the chosen config and why.

    Columns: mode pattern dtype n ws_bytes config gbps pct_copy copy_gbps ratio ratio_lo
    ratio_hi fastest fastest_gbps runner_up runner_up_gbps margin tied n_tied n_configs
    reason, plus the chosen config's variant fields.
    """
    import pandas as pd

    check_tolerance(tolerance)
    cands = ok_candidates(results)
    copies = _copy_lookup(results)
    context = confirm_context(results)
    rows: list[dict] = []
    previous: str | None = None
    group = None
    for key, ws, cell, recs in _cells(cands):
        mode, pattern, dtype = key
        if key != group:
            group, previous = key, None
        row = _select_cell(recs, previous, tolerance, context.get(key))
        copy = copies.get((mode, pattern, ws), copies.get((mode, "", ws)))
        if copy is None:
            col = [r["copy_gbps"] for r in cell if r["config"] == row["config"]]
            copy = float(col[0]) if col and not _nan(col[0]) else math.nan
        row.update(mode=mode, pattern=pattern, dtype=dtype, ws_bytes=ws)
        row["copy_gbps"] = copy
        row["pct_copy"] = 100.0 * row["gbps"] / copy if copy and not _nan(copy) else math.nan
        rows.append(row)
        previous = row["config"]
    cols = [
        "mode", "pattern", "dtype", "n", "ws_bytes", "config", "gbps", "pct_copy", "copy_gbps",
        "ratio", "ratio_lo", "ratio_hi", "fastest", "fastest_gbps", "runner_up",
        "runner_up_gbps", "margin", "tied", "n_tied", "n_configs", "reason", *VARIANT_FIELDS,
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=cols)


def _select_cell(
    recs: list[dict], previous: str | None, tolerance: float, confirm: dict | None = None
) -> dict:
    """The choice at one size; `recs`: one row per config, fastest first (_cells)."""
    fastest = recs[0]
    tied, how = _acceptable(recs, int(fastest["ws_bytes"]), tolerance, confirm or {})
    names = {r["config"] for r in tied}
    if how == "floor":
        chosen, reason = tied[0], "floor: none beats it in both measurements"
    elif previous in names:
        chosen = next(r for r in tied if r["config"] == previous)
        reason = "fastest" if chosen is fastest else "tie: neighbour"
    else:
        chosen = min(tied, key=simplicity_key)
        reason = "fastest" if chosen is fastest else "tie: simpler"
    if how == "confirmed":
        reason += ", confirmed"
    elif not how and fastest not in tied:
        reason += " (fastest below baseline)"
    others = [r for r in recs if r is not chosen]
    runner = others[0] if others else None
    return {
        "n": int(chosen["n"]),
        "config": chosen["config"],
        "gbps": float(chosen["gbps"]),
        "ratio": float(chosen["ratio"]),
        "ratio_lo": float(chosen["ratio_lo"]),
        "ratio_hi": float(chosen["ratio_hi"]),
        "fastest": fastest["config"],
        "fastest_gbps": float(fastest["gbps"]),
        "runner_up": runner["config"] if runner else "",
        "runner_up_gbps": float(runner["gbps"]) if runner else math.nan,
        "margin": chosen["gbps"] / runner["gbps"] - 1.0 if runner else math.nan,
        "tied": ";".join(sorted(names)),
        "n_tied": len(names),
        "n_configs": len(recs),
        "reason": reason,
        **{f: chosen.get(f) for f in VARIANT_FIELDS},
    }


def acceptable_sets(
    results: pd.DataFrame, tolerance: float = DEFAULT_TOLERANCE
) -> dict[tuple[str, str, str], list[tuple[int, dict[str, float]]]]:
    """Per (mode, pattern, dtype): sorted [(ws_bytes, {config: gbps / fastest gbps})] of the
    configs tied with the fastest at that size (the sets band segmentation works on)."""
    return {
        k: [(ws, tied) for ws, tied, _ in seq]
        for k, seq in fracs_of_best(results, tolerance).items()
    }


def fracs_of_best(
    results: pd.DataFrame, tolerance: float = DEFAULT_TOLERANCE
) -> dict[tuple[str, str, str], list[tuple[int, dict[str, float], dict[str, float]]]]:
    """Per (mode, pattern, dtype): sorted [(ws_bytes, tied, measured)], each a {config: gbps
    / fastest gbps}: `tied` the acceptable_sets entry, `measured` every config measured at
    that size (what a band that must span two sizes may fall back on, bands.segment)."""
    return fracs_and_floor_sizes(results, tolerance)[0]


def floor_sizes(
    results: pd.DataFrame, tolerance: float = DEFAULT_TOLERANCE
) -> dict[tuple[str, str, str], set[int]]:
    """Per (mode, pattern, dtype): the sizes (ws_bytes) where the floor alone is acceptable
    because no config timed twice beat it (module docstring)."""
    return fracs_and_floor_sizes(results, tolerance)[1]


def fracs_and_floor_sizes(results: pd.DataFrame, tolerance=DEFAULT_TOLERANCE) -> tuple[dict, dict]:
    """fracs_of_best and floor_sizes from one pass over the rows (a policy needs both)."""
    seqs = _sets(results, tolerance)
    fracs = {k: [(ws, tied, frac) for ws, tied, frac, _ in seq] for k, seq in seqs.items()}
    floor = {k: {ws for ws, _, _, how in seq if how == "floor"} for k, seq in seqs.items()}
    return fracs, floor


def _sets(results: pd.DataFrame, tolerance) -> dict:
    """fracs_of_best's entries, each with how its tied set was found (_acceptable)."""
    check_tolerance(tolerance)
    context = confirm_context(results)
    out: dict = {}
    for key, ws, _, recs in _cells(ok_candidates(results)):
        best = float(recs[0]["gbps"])
        frac = {r["config"]: float(r["gbps"]) / best for r in recs}
        tied, how = _acceptable(recs, ws, tolerance, context.get(key) or {})
        out.setdefault(key, []).append(
            (ws, {r["config"]: frac[r["config"]] for r in tied}, frac, how)
        )
    return out


def variants(results: pd.DataFrame, names: Iterable[str] | None = None) -> dict[str, dict]:
    """Config name -> its variant fields, from the candidate rows (all must agree)."""
    cands = results[results["role"] == "candidate"]
    wanted = set(names) if names is not None else None
    out: dict[str, dict] = {}
    for r in cands.drop_duplicates([*("config",), *VARIANT_FIELDS]).to_dict("records"):
        name = r["config"]
        if wanted is not None and name not in wanted:
            continue
        v = {
            "vec_bytes": _int(r["vec_bytes"]),
            "unroll": _int(r["unroll"]),
            "load_hint": str(r["load_hint"]) or "default",
            "store_hint": str(r["store_hint"]) or "default",
            "block": _int(r["block"]),
            "grid": str(r["grid"]),
        }
        if name in out and out[name] != v:
            raise SweeperError(
                f"config {name!r} has two different variant definitions in the results "
                f"({out[name]} vs {v}); the run mixes kernel versions"
            )
        out[name] = v
    return out


def to_markdown(sel: pd.DataFrame, l2_bytes: int | None, title: str, baseline: str) -> str:
    lines = [f"# Selection: {title}", "", f"Baseline: `{baseline}`.", ""]
    lines.append(
        "Chosen config per size (ties inside the noise go to the smaller size's choice, "
        "then to the simpler config; see sweeper/analyze/select.py)."
    )
    for (mode, pattern, dtype), grp in sel.groupby(list(GROUP), sort=True):
        lines += ["", f"## {dtype}, mode {mode}, pattern {pattern}", ""]
        lines.append(
            f"| working set | x L2 | config | GB/s | % copy | vs {baseline} [95% CI] "
            "| runner-up | margin | tied | why |"
        )
        lines.append("|---:|---:|---|---:|---:|---|---|---:|---:|---|")
        for r in grp.sort_values("ws_bytes").itertuples(index=False):
            rel = f"{r.ws_bytes / l2_bytes:.3f}" if l2_bytes else ""
            lines.append(
                f"| {fmt_bytes(r.ws_bytes)} | {rel} | `{r.config}` | {r.gbps:.0f} "
                f"| {r.pct_copy:.1f} | {r.ratio:.3f}x [{r.ratio_lo:.3f}, {r.ratio_hi:.3f}] "
                f"| `{r.runner_up}` | {100 * r.margin:+.1f}% | {r.n_tied} | {r.reason} |"
            )
    return "\n".join(lines) + "\n"


def write_selection(
    run_dir: str | os.PathLike,
    sel: pd.DataFrame,
    l2_bytes: int | None,
    title: str,
    baseline: str,
) -> tuple[Path, Path]:
    """Atomically write selection.csv (with the baseline's name in a `baseline` column) and
    selection.md into the run folder; a finished run's manifest records both."""
    import io

    from sweeper.records import record_derived
    from sweeper.schema import atomic_write_text

    run_dir = Path(run_dir)
    buf = io.StringIO()
    sel.assign(baseline=baseline).to_csv(buf, index=False)
    csv = atomic_write_text(run_dir / SELECTION_CSV, buf.getvalue())
    md = atomic_write_text(run_dir / SELECTION_MD, to_markdown(sel, l2_bytes, title, baseline))
    record_derived(csv, md)
    return csv, md
