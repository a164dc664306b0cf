"""Launch policy: the fewest working-set bands per dtype, each served by one config.

A band is a run of consecutive MEASURED sizes over which one config is inside the noise (or
the tie tolerance, one number or one per range of working set: `select.tolerance_at`) of the
fastest at every size but those of 2. below; a tie that would give up a project target the
run meets at that size is no tie (`keep_floors`). Segmentation (`segment`) is an exact dynamic
program; it minimises, in this order,

1. boundaries whose bracket (last measured size below, first measured size above) is wider
   than the plan resolution (l2_bytes / resolution): these are refused, not emitted, because
   a boundary there is a guess across an unsampled stretch (the v2 bug: a 32 MiB threshold
   extrapolated across (33.6 MB, 134 MB));
2. the sizes a band serves outside the tolerance, each weighted by how far
   (`bands.miss_cost`): a config that wins at one size alone (a lone winner, most often
   noise) gets no band of its own where the sizes are finely sampled; that size joins the
   neighbouring band that serves it best, at its measured fraction of the best (the band's
   `outside_tolerance` lists such sizes, and its worst fraction shows the cost). Beside a
   gap wider than the resolution the lone winner keeps its band (`bands.segment`);
3. the number of bands;
4. the performance given up: minus the sum over sizes of (band config GB/s / fastest GB/s).

Minimality is exact because the DP tries every last band [i, j] for every prefix end j.
Without the two-size rule a band is feasible iff the intersection of the per-size acceptable
sets is non-empty, which is hereditary, so greedy extension gives the same band count when no
bracket is too wide (`greedy_band_count`, used as an independent witness in the tests).

Files: `policy.json` (kind "policy", one GPU / run) and merged policies (kind
"merged-policy", keyed by what code can read at run time: compute capability and
l2CacheSize, bands relative to L2).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeper_kernels import hints

from sweeper import __version__
from sweeper.analyze.bands import misses, segment
from sweeper.analyze.columns import with_pct_ceiling, with_pct_copy
from sweeper.analyze.select import (
    DEFAULT_TOLERANCE,
    fracs_and_floor_sizes,
    ok_candidates,
    searched,
    simplicity_key,
    tolerance_at,
    variants,
)
from sweeper.dtypes import DTYPES
from sweeper.errors import FieldError, SweeperError
from sweeper.runfolder import baseline_of, dispatch_configs, user_configs
from sweeper.schema import dump, load, require, stamp
from sweeper.units import fmt_bytes

# A band of a policy as plots and tables use it: [lo, hi) working-set bytes (hi None: open), config
Band = tuple[int, "int | None", str]

if TYPE_CHECKING:
    import pandas as pd

VEC_BYTES = (4, 8, 16)  # what sweeper_kernels builds (1, 2 or 4 uint32 words)
GRID_RE = re.compile(r"^(onepass|flat|flat32|fixed32|stride[1-9][0-9]*)$")
# Tuned bands dispatch only on the device they were measured on: band edges come from that
# GPU's L2 size and from wave effects of its SM count. Anywhere else: the generic config.
FALLBACK_RULE = [
    "exact (cc major.minor, l2_bytes, sm_count)",
    "the generic config of the first entry with the dtype (highest worst-case ratio to the "
    "baseline over its run's sizes)",
]


# ---- build -----------------------------------------------------------------------------


DEFAULT_MODES = ("after-write", "hot")  # the policy's mode when a run has several


def _pick(values: Sequence[str], wanted: str | None, what: str, prefer: Sequence[str]) -> str:
    vals = sorted(set(values))
    if wanted is not None:
        if wanted not in vals:
            raise SweeperError(f"no {what} {wanted!r} in this run (it has: {', '.join(vals)})")
        return wanted
    if len(vals) == 1:
        return vals[0]
    for p in prefer:
        if p in vals:
            return p
    raise SweeperError(f"the run has several {what}s ({', '.join(vals)}); pass --{what}")


def build_policy(
    results: pd.DataFrame,
    manifest: dict,
    tolerance: float | Sequence[tuple[int | None, float]] = DEFAULT_TOLERANCE,
    mode: str | None = None,
    pattern: str | None = None,
    resolution: int | None = None,
    dtypes: Sequence[str] | None = None,
    floors: Sequence[Any] = (),
    ceiling_gbps: float | None = None,
) -> dict:
    """The policy payload (not yet stamped) for one run; SweeperError on a wide bracket.
    `floors`: targets (sweeper.analyze.targets.Target) whose floors a tie keeps (keep_floors);
    `ceiling_gbps`: the run's L2-resident ceiling, for a floor on it."""
    device = manifest.get("device", {})
    plan = manifest.get("plan", {})
    l2 = int(plan.get("l2_bytes") or device.get("l2_bytes") or 0)
    if l2 <= 0:
        raise SweeperError("the run manifest has no l2_bytes (device.l2_bytes / plan.l2_bytes)")
    res = resolution or plan.get("resolution")
    if not res:
        raise SweeperError("the run manifest has no plan.resolution; pass --resolution")
    step = l2 / int(res)
    results = searched(results, manifest)
    # A policy (and the header exported from it) serves sweeper's own kernels: users' kernels
    # (docs/external-kernels.md) and shipped policies' dispatch (an audit's) are compared in
    # the selection and report, not chosen here.
    users = [*user_configs(manifest), *dispatch_configs(manifest)]
    if users:
        results = results[~((results["role"] == "candidate") & results["config"].isin(users))]
    ok = results[(results["role"] == "candidate") & (results["status"] == "ok")]
    if ok.empty:
        raise SweeperError("the run has no ok candidate rows: nothing to build a policy from")
    # A run with several modes: after-write by default, the residency a kernel's input has in
    # production (the layer before just wrote it), then hot.
    mode = _pick(ok["mode"].tolist(), mode, "mode", DEFAULT_MODES)
    pattern = _pick(ok["pattern"].tolist(), pattern, "pattern", ("preallocated",))
    picked = results[(results["mode"] == mode) & (results["pattern"] == pattern)]
    sets, floor_only = fracs_and_floor_sizes(picked, tolerance)
    sets, floored = keep_floors(sets, picked, results, mode, floors, ceiling_gbps)
    table = variants(results)
    simpler = lambda c: simplicity_key({**table.get(c, {}), "config": c})  # noqa: E731
    out_dtypes: dict[str, Any] = {}
    for (_, _, dtype), seq in sorted(sets.items()):
        if dtypes is not None and dtype not in dtypes:
            continue
        sizes = [s for s, _, _ in seq]
        acc = [a for _, a, _ in seq]
        measured = [f for _, _, f in seq]
        tol = [tolerance_at(tolerance, ws) for ws in sizes]
        soft = floor_only.get((mode, pattern, dtype), set())
        bands, wide = segment(sizes, acc, step, simpler, measured=measured, tolerance=tol,
                              soft=[ws in soft for ws in sizes])  # fmt: skip
        if wide:
            bad = [
                (sizes[i - 1], sizes[i])
                for i, _, _ in bands
                if i > 0 and sizes[i] - sizes[i - 1] > step * (1 + 1e-12)
            ]
            lo, hi = bad[0]
            raise SweeperError(
                f"{dtype}: the best config changes between {lo} and {hi} bytes of working set "
                f"({lo / l2:.4f}-{hi / l2:.4f} x L2), a bracket wider than the plan resolution "
                f"({step:.0f} bytes = L2/{res}); refusing to place a boundary there. "
                "`sweeper run --resume --run-dir RUN` samples that stretch (the runner adds "
                "sizes wherever a boundary's bracket is too wide)"
            )
        out_dtypes[dtype] = _bands_doc(sizes, acc, measured, bands, l2)
        out_dtypes[dtype]["generic"] = generic_config(picked, dtype, simpler)
    if not out_dtypes:
        raise SweeperError("no dtype left to build a policy for")
    used = sorted(
        {b["config"] for d in out_dtypes.values() for b in d["bands"]}
        | {d["generic"]["config"] for d in out_dtypes.values()}
    )
    cc = device.get("cc") or [0, 0]
    return {
        "provenance": {
            "run_ids": [manifest.get("run_id", "")],
            "gpu": manifest.get("gpu", ""),
            "device": device,
            "plan_hash": plan.get("plan_hash", ""),
            "plan_path": plan.get("path", ""),
            "resolution": int(res),
            **_tolerance_doc(tolerance),
            **({"floors": [t.name for t in floors], "floored_sizes": floored} if floors else {}),
            "mode": mode,
            "pattern": pattern,
            "baseline": baseline_of(manifest),
            "sweeper_version": __version__,
        },
        "cc": [int(cc[0]), int(cc[1])],
        "l2_bytes": l2,
        "resolution_bytes": step,
        "configs": {c: table[c] for c in used},
        "dtypes": out_dtypes,
    }


def keep_floors(
    sets: dict,
    picked: pd.DataFrame,
    results: pd.DataFrame,
    mode: str,
    floors: Sequence[Any],
    ceiling_gbps: float | None,
) -> tuple[dict, int]:
    """The tie sets (select.fracs_of_best of `picked`, the run's rows in `mode`) with the
    targets' floors kept: at a size where a config tied with the fastest meets a target's
    floor there, the tied configs that miss it are no longer acceptable, target by target in
    the targets' order. A tie tolerance wide enough to merge bands (one per range of working
    set, from verify's repeat noise) thus never trades away a target that the run's data
    meets at that size: the fastest config always stays. The metrics are the report's
    (`ratio`, `ratio_hi`, and `pct_copy` and `pct_ceiling` as columns.with_pct_copy and
    with_pct_ceiling derive them; no ceiling floor without `ceiling_gbps`). Returns the sets
    and how many sizes a floor narrowed."""
    if not floors:
        return sets, 0
    ok = with_pct_ceiling(with_pct_copy(ok_candidates(picked), results, mode), ceiling_gbps)
    best = ok.sort_values("gbps", ascending=False).drop_duplicates(
        ["mode", "pattern", "dtype", "ws_bytes", "config"]
    )
    rows = best.set_index(["mode", "pattern", "dtype", "ws_bytes", "config"]).to_dict("index")

    out, narrowed = {}, 0
    for (m, pattern, dtype), seq in sets.items():
        new = []
        for ws, acc, measured in seq:
            keep = dict(acc)
            for t in floors:
                if m not in t.modes or dtype not in t.dtypes or not t.contains(ws):
                    continue
                meets = {
                    c: f for c, f in keep.items()
                    if float(rows[(m, pattern, dtype, ws, c)][t.metric]) >= t.floor
                }  # fmt: skip
                keep = meets or keep
            narrowed += len(keep) < len(acc)
            new.append((ws, keep, measured))
        out[(m, pattern, dtype)] = new
    return out, narrowed


def check_complete(run_dir: str | os.PathLike, manifest: dict) -> None:
    """A policy is built from a finished run: one that stopped part-way has sizes and
    bracketing rounds missing, so its bands would stand on less than the plan."""
    from sweeper.errors import SchemaError
    from sweeper.runfolder import MANIFEST

    status = manifest.get("status")
    if status not in (None, "complete"):
        raise SchemaError(
            Path(run_dir) / MANIFEST,
            "status",
            f"the run is {status}, not complete; `sweeper run --resume --run-dir {run_dir}` "
            "finishes it",
        )


def generic_config(results: pd.DataFrame, dtype: str, simpler) -> dict:
    """The config for a device the policy was not measured on: of the configs measured ok at
    every size the run has for this dtype, the one whose lowest ratio to the baseline is
    highest (ties to the simpler)."""
    ok = results[
        (results["role"] == "candidate") & (results["status"] == "ok") & (results["dtype"] == dtype)
    ]
    sizes = ok["ws_bytes"].nunique()
    per = ok.groupby("config").agg(worst=("ratio", "min"), sizes=("ws_bytes", "nunique"))
    per = per[(per["sizes"] == sizes) & per["worst"].notna()]
    if per.empty:
        raise SweeperError(
            f"{dtype}: no config was measured ok at every size, so the policy has no generic "
            "config for other GPUs"
        )
    best = min(per.index, key=lambda c: (-round(float(per.at[c, "worst"]), 12), simpler(c)))
    return {"config": best, "worst_ratio": round(float(per.at[best, "worst"]), 5)}


def _tolerance_doc(tolerance) -> dict:
    """provenance.tolerance (the largest, for readers of one number) and, for a tolerance per
    range of working set, provenance.tolerance_by_range."""
    if isinstance(tolerance, (int, float)):
        return {"tolerance": float(tolerance)}
    ranges = [{"hi_bytes": hi, "tolerance": float(v)} for hi, v in tolerance]
    return {"tolerance": max(r["tolerance"] for r in ranges), "tolerance_by_range": ranges}


def _validate_ranges(prov: dict) -> None:
    ranges = prov.get("tolerance_by_range")
    if ranges is None:
        return
    where = "provenance.tolerance_by_range"
    if not isinstance(ranges, list):
        ranges = []  # refused below, as an empty list is
    his = [r.get("hi_bytes", "missing") if isinstance(r, dict) else "missing" for r in ranges]
    values = [r.get("tolerance") if isinstance(r, dict) else None for r in ranges]
    ok = (
        ranges
        and his[-1] is None
        and all(isinstance(h, int) for h in his[:-1])
        and his[:-1] == sorted(set(his[:-1]))
        and all(isinstance(v, (int, float)) and 0 <= v < 1 for v in values)
    )
    if not ok:
        raise FieldError(
            where, "expected [{hi_bytes, tolerance}, ...] ascending, the last hi_bytes null"
        )
    if max(values) != prov["tolerance"]:
        raise FieldError("provenance.tolerance", "expected the largest of tolerance_by_range")


def _bands_doc(sizes: list[int], acc, measured, bands, l2: int) -> dict:
    out = []
    lone = set(misses(bands, acc))
    for k, (i, j, config) in enumerate(bands):
        fracs = [measured[t][config] for t in range(i, j + 1)]
        lo = 0 if k == 0 else (sizes[i - 1] + sizes[i]) // 2
        out.append(
            {
                "lo_bytes": lo,
                "hi_bytes": None,
                "lo_rel": lo / l2,
                "hi_rel": None,
                "config": config,
                "first_measured": sizes[i],
                "last_measured": sizes[j],
                "n_sizes": j - i + 1,
                "worst_frac_of_best": min(fracs),
                "mean_frac_of_best": sum(fracs) / len(fracs),
                "bracket_below": None if k == 0 else [sizes[i - 1], sizes[i]],
                "bracket_below_rel": None if k == 0 else [sizes[i - 1] / l2, sizes[i] / l2],
                "outside_tolerance": [sizes[t] for t in range(i, j + 1) if t in lone],
            }
        )
    for a, b in zip(out, out[1:], strict=False):
        a["hi_bytes"], a["hi_rel"] = b["lo_bytes"], b["lo_rel"]
    gaps = [b - a for a, b in zip(sizes, sizes[1:], strict=False)]
    return {
        "bands": out,
        "n_sizes": len(sizes),
        "measured_range": [sizes[0], sizes[-1]],
        "widest_gap_bytes": max(gaps) if gaps else 0,
    }


def write_policy(path: str | os.PathLike, payload: dict) -> Path:
    """Write a policy file; in a finished run's folder its manifest records it."""
    from sweeper.records import record_derived

    validate_policy({"kind": "policy", **payload})
    path = dump("policy", payload, path)
    record_derived(path)
    return path


# ---- validation -------------------------------------------------------------------------


def _validate_configs(doc: dict) -> dict:
    configs = require(doc, "configs", dict)
    for name, c in configs.items():
        w = f"configs.{name}."
        if not isinstance(c, dict):
            raise FieldError(f"configs.{name}", "expected an object of variant fields")
        vec = require(c, "vec_bytes", int, w)
        if vec not in VEC_BYTES:
            raise FieldError(w + "vec_bytes", f"must be one of {VEC_BYTES}, found {vec}")
        if require(c, "unroll", int, w) < 1:
            raise FieldError(w + "unroll", "must be >= 1")
        block = require(c, "block", int, w)
        if not 32 <= block <= 1024 or block % 32:
            raise FieldError(w + "block", f"must be a multiple of 32 in [32, 1024], found {block}")
        for kind in hints.KINDS:
            h = f"{kind}_hint"
            if require(c, h, str, w) not in hints.names(kind):
                raise FieldError(w + h, f"not a {kind} cache operator sweeper knows: {c[h]!r}")
        if not GRID_RE.match(require(c, "grid", str, w)):
            raise FieldError(
                w + "grid",
                f"must be 'onepass', 'flat', 'flat32', 'fixed32' or 'strideW', found {c['grid']!r}",
            )
    return configs


def _validate_bands(bands: Any, where: str, configs: dict, rel_only: bool) -> None:
    if not isinstance(bands, list) or not bands:
        raise FieldError(where, "expected a non-empty list of bands")
    lo_key, hi_key = ("lo_rel", "hi_rel") if rel_only else ("lo_bytes", "hi_bytes")
    num = (int, float) if rel_only else int
    for k, b in enumerate(bands):
        w = f"{where}[{k}]."
        if not isinstance(b, dict):
            raise FieldError(f"{where}[{k}]", "expected an object")
        config = require(b, "config", str, w)
        if config not in configs:
            raise FieldError(w + "config", f"names config {config!r}, not in the config table")
        lo = require(b, lo_key, num, w)
        hi = b.get(hi_key, "missing")
        if k == 0 and lo != 0:
            raise FieldError(w + lo_key, f"the first band must start at 0 (gap below), found {lo}")
        last = k == len(bands) - 1
        if last:
            if hi is not None:
                raise FieldError(w + hi_key, "the last band must be open-ended (null): gap above")
            continue
        if isinstance(hi, bool) or not isinstance(hi, num):
            raise FieldError(w + hi_key, f"expected a number, found {hi!r}")
        if not hi > lo:
            raise FieldError(w + hi_key, f"band is empty or reversed ({lo} .. {hi})")
        nxt = bands[k + 1].get(lo_key) if isinstance(bands[k + 1], dict) else None
        if nxt != hi:
            kind = "overlap" if isinstance(nxt, int | float) and nxt < hi else "gap"
            raise FieldError(
                f"{where}[{k + 1}].{lo_key}", f"{kind}: previous band ends at {hi}, found {nxt}"
            )


def _validate_dtypes(doc: dict, configs: dict, rel_only: bool, where: str = "") -> None:
    dts = require(doc, "dtypes", dict, where)
    if not dts:
        raise FieldError(where + "dtypes", "no dtype")
    for dt, d in dts.items():
        if dt not in DTYPES:
            raise FieldError(f"{where}dtypes.{dt}", f"unknown dtype (known: {', '.join(DTYPES)})")
        if not isinstance(d, dict):
            raise FieldError(f"{where}dtypes.{dt}", "expected an object with 'bands'")
        _validate_bands(d.get("bands"), f"{where}dtypes.{dt}.bands", configs, rel_only)
        g = d.get("generic")
        if g is not None and (not isinstance(g, dict) or g.get("config") not in configs):
            raise FieldError(f"{where}dtypes.{dt}.generic", f"not a config of the policy: {g!r}")


def validate_policy(doc: dict) -> None:
    """Raise FieldError naming the first problem in a policy document: every field that
    show, plot, report and the exports read, the relative edges, and every boundary's bracket
    against the plan resolution."""
    prov = require(doc, "provenance", dict)
    run_ids = require(prov, "run_ids", list, "provenance.")
    if not all(isinstance(r, str) for r in run_ids):
        raise FieldError("provenance.run_ids", "expected a list of run ids")
    for f in ("gpu", "mode", "pattern", "plan_hash"):
        require(prov, f, str, "provenance.")
    require(prov, "tolerance", (int, float), "provenance.")
    _validate_ranges(prov)
    res = require(prov, "resolution", int, "provenance.")
    if res < 1:
        raise FieldError("provenance.resolution", f"must be a positive integer, found {res}")
    l2 = require(doc, "l2_bytes", int)
    if l2 <= 0:
        raise FieldError("l2_bytes", "must be > 0")
    device = require(prov, "device", dict, "provenance.")
    if device.get("l2_bytes", l2) != l2:
        raise FieldError(
            "l2_bytes", f"{l2} is not provenance.device.l2_bytes ({device['l2_bytes']})"
        )
    cc = require(doc, "cc", list)
    if len(cc) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in cc):
        raise FieldError("cc", f"expected [major, minor], found {cc!r}")
    _check_catalog_gpu(prov["gpu"], {
        "cc": (cc, "cc"),
        "provenance.device.cc": (device.get("cc"), "cc"),
        "provenance.device.sm_count": (device.get("sm_count"), "sm_count"),
        "l2_bytes": (l2, "l2_bytes"),
    })  # fmt: skip
    step = require(doc, "resolution_bytes", (int, float))
    if not abs(step - l2 / res) <= 1e-9 * (l2 / res):  # False for NaN
        raise FieldError(
            "resolution_bytes", f"{step!r} is not l2_bytes / provenance.resolution ({l2 / res!r})"
        )
    configs = _validate_configs(doc)
    _validate_dtypes(doc, configs, rel_only=False)
    _validate_rel_edges(doc)
    _validate_brackets(doc)


def _check_catalog_gpu(gpu: Any, fields: dict[str, tuple[Any, str]]) -> None:
    """A policy (or merged-policy entry) that names a GPU of sweeper's catalog
    (sweeper.plan.gpus) carries that GPU's compute capability, SM count and L2 size, so a
    policy edited to claim another GPU is not exported as tuned for it. `fields`: field name
    -> (its value, the catalog's attribute: "cc", "sm_count" or "l2_bytes"). A GPU the catalog
    does not know (a spec file's), or a value it does not know, is not checked."""
    from sweeper.errors import SweeperError
    from sweeper.plan.gpus import lookup

    if not isinstance(gpu, str):
        return
    try:
        spec = lookup(gpu)
    except SweeperError:
        return
    if spec.key != gpu:
        return
    for field, (have, attr) in fields.items():
        want = getattr(spec, attr)
        want = list(want) if isinstance(want, tuple) else want
        if want is not None and have is not None and have != want:
            raise FieldError(
                field,
                f"{have!r} is not the {spec.name}'s ({want!r}), the GPU the policy names: it "
                "was measured on another GPU",
            )


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and v == v


def _validate_brackets(doc: dict) -> None:
    """Every band states the sizes it stands on, and every boundary lies inside its bracket
    (the last measured size below, the first above), which is at most the plan resolution
    wide: a boundary across a wider stretch is a guess `policy build` refuses to make."""
    step = doc["resolution_bytes"]
    for dt, d in doc["dtypes"].items():
        if "generic" not in d:
            raise FieldError(f"dtypes.{dt}.generic", "missing (the config for other GPUs)")
        prev_last = None
        for k, b in enumerate(d["bands"]):
            w = f"dtypes.{dt}.bands[{k}]."
            first = require(b, "first_measured", int, w)
            last = require(b, "last_measured", int, w)
            if require(b, "n_sizes", int, w) < 1 or not first <= last:
                raise FieldError(w + "n_sizes", "a band stands on at least one measured size")
            for f in ("worst_frac_of_best", "mean_frac_of_best"):
                if not _num(require(b, f, (int, float), w)):
                    raise FieldError(w + f, f"expected a number, found {b[f]!r}")
            outside = b.get("outside_tolerance", [])  # absent in policies built before it
            if not (
                isinstance(outside, list)
                and all(isinstance(x, int) and first <= x <= last for x in outside)
            ):
                raise FieldError(
                    w + "outside_tolerance",
                    f"expected the band's measured sizes served outside the tolerance, "
                    f"found {outside!r}",
                )
            br = b.get("bracket_below", "missing")
            if k == 0:
                if br is not None:
                    raise FieldError(w + "bracket_below", "the first band has none (null)")
                prev_last = last
                continue
            if not (isinstance(br, list) and len(br) == 2 and all(isinstance(x, int) for x in br)):
                raise FieldError(
                    w + "bracket_below", f"expected [below, above] bytes, found {br!r}"
                )
            if br[1] - br[0] > step * (1 + 1e-12):
                raise FieldError(
                    w + "bracket_below",
                    f"{br[0]}..{br[1]} bytes is wider than the plan resolution ({step:.0f} "
                    "bytes): a boundary there is not bracketed; rebuild the policy with "
                    "`sweeper policy build`",
                )
            if br != [prev_last, first]:
                raise FieldError(
                    w + "bracket_below",
                    f"{br} is not [the band below's last_measured, first_measured] "
                    f"([{prev_last}, {first}])",
                )
            if not br[0] < b["lo_bytes"] <= br[1]:
                raise FieldError(
                    w + "lo_bytes", f"{b['lo_bytes']} is outside its bracket {br[0]}..{br[1]}"
                )
            prev_last = last


def _validate_rel_edges(doc: dict) -> None:
    """A policy's relative edges (what the exports dispatch on) must be its byte edges over
    its L2 size, exactly (the division that wrote them): a swapped, NaN or edited `lo_rel` /
    `hi_rel` would make the export serve other bands than the policy says, and one float step
    above `hi_bytes / l2_bytes` already serves the band below at the edge itself."""
    l2 = doc["l2_bytes"]
    for dt, d in doc["dtypes"].items():
        for k, b in enumerate(d["bands"]):
            for rel_key, bytes_key in (("lo_rel", "lo_bytes"), ("hi_rel", "hi_bytes")):
                rel, nbytes = b.get(rel_key, "missing"), b.get(bytes_key)
                want = None if nbytes is None else nbytes / l2
                ok = rel is None and want is None
                if want is not None and isinstance(rel, int | float) and not isinstance(rel, bool):
                    ok = rel == want  # False for NaN
                if not ok:
                    raise FieldError(
                        f"dtypes.{dt}.bands[{k}].{rel_key}",
                        f"{rel!r} is not {bytes_key} / l2_bytes ({want!r})",
                    )


def validate_merged(doc: dict) -> None:
    configs = _validate_configs(doc)
    entries = require(doc, "entries", list)
    if not entries:
        raise FieldError("entries", "no entry")
    seen = set()
    for k, e in enumerate(entries):
        w = f"entries[{k}]."
        if not isinstance(e, dict):
            raise FieldError(f"entries[{k}]", "expected an object")
        cc = require(e, "cc", list, w)
        l2 = require(e, "l2_bytes", int, w)
        sms = e.get("sm_count")
        if sms is not None and (not isinstance(sms, int) or isinstance(sms, bool) or sms <= 0):
            raise FieldError(w + "sm_count", f"expected a positive integer or null, found {sms!r}")
        if (tuple(cc), l2, sms) in seen:
            raise FieldError(w + "cc", f"duplicate key (cc {cc}, l2_bytes {l2}, sm_count {sms})")
        seen.add((tuple(cc), l2, sms))
        _check_catalog_gpu(e.get("gpu"), {w + "cc": (cc, "cc"), w + "l2_bytes": (l2, "l2_bytes"),
                                          w + "sm_count": (sms, "sm_count")})  # fmt: skip
        _validate_dtypes(e, configs, rel_only=True, where=w)
    require(doc, "fallback", list)


def load_policy(path: str | os.PathLike) -> dict:
    """A policy file, validated as a whole; one inside a run folder (a manifest.json beside
    it) must also carry that run's plan resolution, plan hash and L2 size."""
    from sweeper.files import file_bytes
    from sweeper.records import check_derived

    doc = load(path, "policy", validate_policy)
    check_against_run(path, doc)
    check_derived(path, file_bytes(path))
    return doc


def check_against_run(path: str | os.PathLike, doc: dict) -> None:
    """A policy in its run's folder is that run's: its GPU and device record, compute
    capability, plan resolution, plan hash and L2 size are the manifest's."""
    from sweeper.analyze.store import load_manifest
    from sweeper.errors import SchemaError
    from sweeper.runfolder import MANIFEST

    run_dir = Path(path).parent
    if not (run_dir / MANIFEST).is_file():
        return
    manifest = load_manifest(run_dir)
    prov = doc["provenance"]
    if manifest["run_id"] not in prov["run_ids"]:
        return  # a policy of another run, kept here
    plan, device = manifest["plan"], manifest["device"]
    # the GPU the bands were measured on: an export dispatches them there and nowhere else
    for field, have, want in (
        ("provenance.gpu", prov["gpu"], manifest["gpu"]),
        ("provenance.device", prov["device"], device),
        ("cc", doc["cc"], device.get("cc")),
        ("provenance.resolution", prov["resolution"], plan.get("resolution")),
        ("provenance.plan_hash", prov["plan_hash"], plan["plan_hash"]),
        ("l2_bytes", doc["l2_bytes"], plan.get("l2_bytes", device["l2_bytes"])),
    ):
        if want is not None and have != want:
            raise SchemaError(
                path,
                field,
                f"{have!r} is not the run's ({want!r} in {run_dir / MANIFEST}); rebuild the "
                "policy with `sweeper policy build`",
            )


def load_merged(path: str | os.PathLike) -> dict:
    return load(path, "merged-policy", validate_merged)


def load_any(path: str | os.PathLike) -> dict:
    """A policy or merged policy, always returned in merged form (export works on that)."""
    from sweeper.files import read_json

    try:
        kind = read_json(path).get("kind")
    except (SweeperError, AttributeError):
        kind = None
    if kind == "merged-policy":
        return load_merged(path)
    doc = load_policy(path)
    return merge_docs([doc], [str(path)])


# ---- merge ------------------------------------------------------------------------------


def merge_docs(policies: Sequence[dict], names: Sequence[str]) -> dict:
    """One rule for several GPUs: per (cc, l2_bytes) bands relative to L2, plus disagreements."""
    configs: dict[str, dict] = {}
    entries = []
    for doc, name in zip(policies, names, strict=True):
        for c, v in doc["configs"].items():
            if c in configs and configs[c] != v:
                raise SweeperError(
                    f"config {c!r} means different variants in {name} and an earlier policy "
                    f"({v} vs {configs[c]}); rebuild the policies with the same kernels"
                )
            configs[c] = v
        prov = doc["provenance"]
        sms = (prov.get("device") or {}).get("sm_count")
        key = (tuple(doc["cc"]), doc["l2_bytes"], sms)
        for e in entries:
            if (tuple(e["cc"]), e["l2_bytes"], e.get("sm_count")) == key:
                raise SweeperError(
                    f"{name} and {e['source']['file']} are both for cc {doc['cc']} with L2 "
                    f"{doc['l2_bytes']} bytes and {sms} SMs; merge one policy per GPU"
                )
        entries.append(
            {
                "cc": list(doc["cc"]),
                "l2_bytes": doc["l2_bytes"],
                "sm_count": sms,
                "gpu": prov.get("gpu", ""),
                "device_name": prov.get("device", {}).get("name", ""),
                "source": {
                    "file": name,
                    "run_ids": prov.get("run_ids", []),
                    "plan_hash": prov.get("plan_hash", ""),
                    "tolerance": prov.get("tolerance"),
                    **(
                        {"tolerance_by_range": prov["tolerance_by_range"]}
                        if prov.get("tolerance_by_range")
                        else {}
                    ),
                    "mode": prov.get("mode", ""),
                    "resolution": prov.get("resolution"),
                },
                "dtypes": {
                    dt: {
                        "bands": [_rel_band(b) for b in d["bands"]],
                        **({"generic": d["generic"]} if "generic" in d else {}),
                    }
                    for dt, d in doc["dtypes"].items()
                },
            }
        )
    entries.sort(key=lambda e: (e["cc"], e["l2_bytes"], e.get("sm_count") or 0))
    generic: dict[str, str] = {}
    for e in entries:
        for dt, d in e["dtypes"].items():
            if "generic" in d:
                generic.setdefault(dt, d["generic"]["config"])
    return {
        "configs": dict(sorted(configs.items())),
        "entries": entries,
        "generic": generic,
        "fallback": FALLBACK_RULE,
        "disagreements": disagreements(entries),
    }


def _rel_band(b: dict) -> dict:
    keep = ("lo_rel", "hi_rel", "config", "lo_bytes", "hi_bytes", "bracket_below")
    keep += ("first_measured", "last_measured", "worst_frac_of_best")
    return {k: b.get(k) for k in keep}


def config_at(bands: list[dict], rel: float) -> str:
    """The config a validated band list (from 0, its last band open-ended: _validate_bands)
    serves at `rel` x L2: a band holds its lower edge, not its upper one."""
    return next(b["config"] for b in bands if b["hi_rel"] is None or rel < b["hi_rel"])


def disagreements(entries: list[dict]) -> list[dict]:
    """Stretches of working set (relative to L2) where two GPUs' policies pick different
    configs for the same dtype."""
    out = []
    for a in range(len(entries)):
        for b in range(a + 1, len(entries)):
            ea, eb = entries[a], entries[b]
            for dt in sorted(set(ea["dtypes"]) & set(eb["dtypes"])):
                ba, bb = ea["dtypes"][dt]["bands"], eb["dtypes"][dt]["bands"]
                cuts = sorted({x["lo_rel"] for x in ba + bb})
                run = None
                for k, lo in enumerate(cuts):
                    hi = cuts[k + 1] if k + 1 < len(cuts) else None
                    pair = (config_at(ba, lo), config_at(bb, lo))
                    if pair[0] != pair[1] and run and run["configs"] == list(pair):
                        run["rel"][1] = hi
                        continue
                    if run:
                        out.append(run)
                        run = None
                    if pair[0] != pair[1]:
                        run = {
                            "dtype": dt,
                            "gpus": [ea["gpu"], eb["gpu"]],
                            "rel": [lo, hi],
                            "configs": list(pair),
                        }
                if run:
                    out.append(run)
    return out


def write_merged(
    path: str | os.PathLike,
    payload: dict,
    inputs: Sequence[str | os.PathLike] = (),
    force: bool = False,
) -> Path:
    """Write a merged policy; never onto one of its `inputs`, nor over a file with other
    contents unless `force` (the same contents: nothing is written), nor onto a path
    `check_output` refuses (the merged policies' run folders are the ones it works on)."""
    from sweeper.runfolder import check_output

    validate_merged(payload)
    path = Path(path)
    for p in inputs:
        if path.exists() and path.resolve() == Path(p).resolve():
            raise SweeperError(f"{path} is a policy being merged; write the merge elsewhere")
    check_output(path, works_on=tuple(inputs))
    if path.exists():
        try:
            same = load_merged(path) == stamp("merged-policy", payload)
        except SweeperError:
            same = False
        if same:
            return path
        if not force:
            raise SweeperError(f"{path} exists with other contents; --force overwrites it")
    return dump("merged-policy", payload, path)


# ---- text rendering (CLI `policy show`) ----------------------------------------------------


def describe(doc: dict) -> str:
    """Readable summary of a policy (either kind)."""
    lines = []
    if doc.get("kind") == "merged-policy" or "entries" in doc:
        for e in doc["entries"]:
            lines.append(
                f"{e['gpu']} (cc {e['cc'][0]}.{e['cc'][1]}, L2 {fmt_bytes(e['l2_bytes'], none='inf')}), "
                f"runs {', '.join(e['source']['run_ids'])}"
            )
            for dt, d in e["dtypes"].items():
                for b in d["bands"]:
                    hi = "inf" if b["hi_rel"] is None else f"{b['hi_rel']:.4f}"
                    lines.append(f"  {dt:5} [{b['lo_rel']:.4f}, {hi}) x L2  {b['config']}")
        lines.append("fallback: " + " > ".join(doc["fallback"]))
        for d in doc.get("disagreements", []):
            hi = "inf" if d["rel"][1] is None else f"{d['rel'][1]:.4f}"
            lines.append(
                f"DISAGREE {d['dtype']} [{d['rel'][0]:.4f}, {hi}) x L2: "
                f"{d['gpus'][0]} -> {d['configs'][0]}, {d['gpus'][1]} -> {d['configs'][1]}"
            )
        return "\n".join(lines)
    prov = doc["provenance"]
    lines.append(
        f"{prov['gpu']} L2 {fmt_bytes(doc['l2_bytes'], none='inf')}, runs {', '.join(prov['run_ids'])}, "
        f"mode {prov['mode']}, tolerance {describe_tolerance(prov)}"
    )
    for dt, d in doc["dtypes"].items():
        for b in d["bands"]:
            br = b["bracket_below"]
            brs = (
                f" (boundary bracketed by {fmt_bytes(br[0], none='inf')}..{fmt_bytes(br[1], none='inf')})"
                if br
                else ""
            )
            lines.append(
                f"  {dt:5} [{fmt_bytes(b['lo_bytes'], none='inf')}, {fmt_bytes(b['hi_bytes'], none='inf')})  {b['config']}  "
                f"worst {b['worst_frac_of_best']:.3f} of best over {b['n_sizes']} sizes{brs}"
                + _outside_note(b)
            )
    return "\n".join(lines)


def describe_tolerance(prov: Mapping[str, Any]) -> str:
    """The tie tolerance a policy was built with, for people: one number, or one per range;
    and, where ties kept the targets' floors (keep_floors), at how many sizes that mattered."""
    floors = prov.get("floors")
    note = f" (target floors kept: {prov.get('floored_sizes', 0)} sizes)" if floors else ""
    ranges = prov.get("tolerance_by_range")
    if not ranges:
        return f"{prov.get('tolerance', '-')}{note}"
    parts, lo = [], "0 B"
    for r in ranges:
        hi = fmt_bytes(r["hi_bytes"], none="inf")
        parts.append(f"{r['tolerance']} in ({lo}, {hi}]")
        lo = hi
    return "by working set: " + ", ".join(parts) + note


def _outside_note(band: Mapping[str, Any]) -> str:
    outside = band.get("outside_tolerance") or []
    if not outside:
        return ""
    where = ", ".join(fmt_bytes(x) for x in outside)
    return f"; served outside the tolerance at {where}"


def bands_from_policy(policy: Mapping[str, Any]) -> dict[str, list[Band]]:
    """{dtype: [(lo, hi, config)]} from a policy document (see sweeper/analyze/policy.py)."""
    table = policy.get("dtypes", policy.get("bands", policy))
    out: dict[str, list[Band]] = {}
    for dtype, entry in table.items():
        items = entry.get("bands", []) if isinstance(entry, Mapping) else entry
        if not isinstance(items, list):
            continue
        bands = []
        for b in items:
            if isinstance(b, Mapping) and "config" in b:
                hi = b.get("hi_bytes")
                bands.append(
                    (int(b.get("lo_bytes") or 0), None if hi is None else int(hi), str(b["config"]))
                )
        if bands:
            out[str(dtype)] = sorted(bands, key=lambda b: b[0])
    return out


def load_bands(run_dir: str | Path) -> dict[str, list[Band]] | None:
    """The bands of `<run_dir>/policy.json`, or None when no policy has been built yet."""
    from sweeper.runfolder import POLICY

    path = Path(run_dir) / POLICY
    return bands_from_policy(load_policy(path)) if path.exists() else None


def policy_tolerance(prov: Mapping[str, Any]):
    """A policy's tie tolerance as select.tolerance_at takes it: its ranges, else one number."""
    ranges = prov.get("tolerance_by_range")
    if ranges:
        return [(r["hi_bytes"], r["tolerance"]) for r in ranges]
    return float(prov.get("tolerance") or 0.0)


def _pick_at(bands: list[Band], ws_bytes: int) -> str | None:
    for lo, hi, config in bands:
        if lo <= ws_bytes and (hi is None or ws_bytes < hi):
            return config
    return None


def policy_agreement(
    pol_a: Mapping[str, Any], pol_b: Mapping[str, Any], cells_a, cells_b
) -> list[dict]:
    """How two policies' picks compare at every size both runs measured (their ok candidate
    cells of policy A's mode), per dtype both cover: the same config; another config whose ratio
    to the baseline is within policy A's tie tolerance of A's pick in both runs' cells (a tie:
    either is a right answer); outside it in either run; or not comparable (a pick not measured
    at that size). `outside` lists those sizes' working sets in bytes."""
    mode = (pol_a.get("provenance") or {}).get("mode", "hot")
    prov = pol_a.get("provenance") or {}
    bands_a, bands_b = bands_from_policy(pol_a), bands_from_policy(pol_b)

    def ratios(cells) -> dict:
        ok = cells[(cells["role"] == "candidate") & (cells["status"] == "ok")]
        ok = ok[ok["mode"] == mode]
        return {(r.dtype, int(r.ws_bytes), r.config): float(r.ratio) for r in ok.itertuples()}

    ra, rb = ratios(cells_a), ratios(cells_b)
    out = []
    for dtype in sorted(set(bands_a) & set(bands_b)):
        sizes = sorted({k[1] for k in ra if k[0] == dtype} & {k[1] for k in rb if k[0] == dtype})
        same = tied = unknown = 0
        outside: list[int] = []
        for ws in sizes:
            ca, cb = _pick_at(bands_a[dtype], ws), _pick_at(bands_b[dtype], ws)
            if ca == cb:
                same += 1
                continue
            pairs = [(r.get((dtype, ws, ca)), r.get((dtype, ws, cb))) for r in (ra, rb)]
            if any(x is None or y is None for x, y in pairs):
                unknown += 1
                continue
            tol = tolerance_at(policy_tolerance(prov), ws)
            if all(abs(y / x - 1) <= tol for x, y in pairs):
                tied += 1
            else:
                outside.append(ws)
        out.append({"dtype": dtype, "mode": mode, "sizes": len(sizes), "same": same,
                    "tied": tied, "outside": outside, "unknown": unknown})  # fmt: skip
    return out
