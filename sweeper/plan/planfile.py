"""A plan as a typed object and a versioned file: make, summarise, validate, load, write."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweeper import __version__, schema
from sweeper.dtypes import DTYPES, ITEMSIZE
from sweeper.errors import FieldError, SchemaError, SweeperError
from sweeper.ops import elements, working_set
from sweeper.plan.gpus import GpuSpec, require_plannable
from sweeper.plan.ladder import (
    EST_CALLS_PER_SAMPLE,
    EST_MIN_CALL_S,
    EST_SAMPLES,
    EST_WARMUP,
    OUTER_RATIO,
    TAIL_NS,
    Bounds,
    _check_resolution,
    _dtype_list,
    ladder,
)

# ---- the Plan -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """A validated plan. `sizes(dtype)` is what the runner iterates over."""

    gpu: str
    spec: dict
    resolution: int
    dtypes: tuple[str, ...]
    entries: tuple[dict, ...]
    tails: tuple[dict, ...]
    sweeper_version: str
    plan_hash: str
    notes: tuple[str, ...] = ()

    def sizes(self, dtype: str) -> list[dict]:
        if dtype not in self.dtypes:
            raise SweeperError(f"dtype {dtype!r} is not in this plan ({', '.join(self.dtypes)})")
        return [e for e in self.entries if e["dtype"] == dtype]

    def tail_sizes(self, dtype: str) -> list[dict]:
        return [t for t in self.tails if t["dtype"] == dtype]

    @property
    def l2_bytes(self) -> int:
        return self.spec["l2_bytes"]

    @property
    def persisting_l2_max_bytes(self) -> int | None:
        return self.spec["persisting_l2_max_bytes"]

    @property
    def memory_bytes(self) -> int:
        return self.spec["memory_bytes"]

    @property
    def sm_count(self) -> int:
        return self.spec["sm_count"]

    @property
    def cc(self) -> tuple[int, int]:
        return tuple(self.spec["cc"])  # type: ignore[return-value]

    @property
    def dram_peak_gbps(self) -> float:
        return self.spec["dram_peak_gbps"]

    @property
    def bounds(self) -> Bounds:
        return _bounds(self.spec, self.resolution)

    def payload(self) -> dict:
        return {
            "gpu": self.gpu,
            "spec": self.spec,
            "resolution": self.resolution,
            "dtypes": list(self.dtypes),
            "entries": list(self.entries),
            "tails": list(self.tails),
            "notes": list(self.notes),
            "sweeper_version": self.sweeper_version,
            "plan_hash": self.plan_hash,
        }


def _bounds(spec: dict, resolution: int) -> Bounds:
    return Bounds(
        l2=spec["l2_bytes"],
        persisting=spec["persisting_l2_max_bytes"],
        memory=spec["memory_bytes"],
        resolution=resolution,
    )


def spec_snapshot(spec: GpuSpec) -> dict:
    return {
        "key": spec.key,
        "name": spec.name,
        "l2_bytes": spec.l2_bytes,
        "persisting_l2_max_bytes": spec.persisting_l2_max_bytes,
        "memory_bytes": spec.memory_bytes,
        "sm_count": spec.sm_count,
        "cc": list(spec.cc),
        "dram_peak_gbps": spec.dram_peak_gbps,
    }


def _hash(payload: dict) -> str:
    body = {k: v for k, v in payload.items() if k not in ("plan_hash", "kind", "schema_version")}
    return schema.content_hash(body)


def make_plan(
    spec: GpuSpec,
    dtypes: str | list[str] | tuple[str, ...] | None = None,
    resolution: int = 32,
    notes: list[str] | tuple[str, ...] = (),
) -> Plan:
    """Build the plan for one GPU spec (pure; no GPU). SweeperError when the spec lacks a
    field a plan needs (L2, memory, SM count, cc, DRAM peak)."""
    require_plannable(spec)
    _check_resolution(resolution, spec.l2_bytes)
    dts = _dtype_list(dtypes)
    snap = spec_snapshot(spec)
    b = _bounds(snap, resolution)
    entries: list[dict] = []
    tails: list[dict] = []
    for d in dts:
        item = ITEMSIZE[d]
        names_at: dict[int, list[str]] = {}
        for name, ws in b.anchors(item).items():
            names_at.setdefault(ws, []).append(name)
        for ws in ladder(b, item):
            entries.append(
                {
                    "dtype": d,
                    "n": elements(ws, d),
                    "working_set_bytes": ws,
                    "region": b.region(ws),
                    "anchors": names_at.get(ws, []),
                }
            )
        tails.extend({"dtype": d, "n": n, "working_set_bytes": working_set(n, d)} for n in TAIL_NS)
    payload = {
        "gpu": spec.key,
        "spec": snap,
        "resolution": resolution,
        "dtypes": list(dts),
        "entries": entries,
        "tails": tails,
        "notes": list(notes),
        "sweeper_version": __version__,
    }
    return Plan(
        gpu=spec.key,
        spec=snap,
        resolution=resolution,
        dtypes=dts,
        entries=tuple(entries),
        tails=tuple(tails),
        sweeper_version=__version__,
        plan_hash=_hash(payload),
        notes=tuple(notes),
    )


# ---- summary ------------------------------------------------------------------------------


def estimate_seconds(ws_list: list[int], dram_peak_gbps: float) -> float:
    """Rough time for ONE config over these sizes (the runner reports real times).

    Per size: (EST_WARMUP + EST_SAMPLES) graph replays of EST_CALLS_PER_SAMPLE calls, each call
    taking max(ws / DRAM peak, EST_MIN_CALL_S). Using DRAM peak for every size over-estimates
    the L2-resident ones, which is the safe side. Multiply by the number of configs (variants
    plus the baseline) for a run's total.
    """
    bw = dram_peak_gbps * 1e9
    per_size = EST_CALLS_PER_SAMPLE * (EST_WARMUP + EST_SAMPLES)
    return sum(per_size * max(ws / bw, EST_MIN_CALL_S) for ws in ws_list)


def summarize(plan: Plan) -> list[dict]:
    """Per-dtype summary rows (plain dicts; the CLI renders them)."""
    b = plan.bounds
    rows = []
    for d in plan.dtypes:
        ws = [e["working_set_bytes"] for e in plan.sizes(d)]
        gaps_in = [
            y - x
            for x, y in zip(ws, ws[1:], strict=False)
            if b.region(x) == "dense" and b.region(y) == "dense"
        ]
        ratios_out = [
            y / x
            for x, y in zip(ws, ws[1:], strict=False)
            if not (b.region(x) == "dense" and b.region(y) == "dense")
        ]
        rows.append(
            {
                "dtype": d,
                "sizes": len(ws),
                "dense_lo_bytes": b.dense_lo,
                "dense_hi_bytes": b.dense_hi,
                "dense_count": sum(1 for x in ws if b.region(x) == "dense"),
                "max_gap_dense_bytes": max(gaps_in, default=0),
                "max_ratio_outer": max(ratios_out, default=1.0),
                "min_ws_bytes": ws[0],
                "max_ws_bytes": ws[-1],
                "est_seconds_per_config": estimate_seconds(ws, plan.dram_peak_gbps),
            }
        )
    return rows


# ---- file IO ------------------------------------------------------------------------------


def _req(doc: dict, key: str, typ, where: str = "") -> Any:
    return schema.require(doc, key, typ, where)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def validate_plan_doc(doc: dict) -> None:
    """Raise FieldError(field, message) on any inconsistency in a plan document."""
    _req(doc, "gpu", str)
    resolution = _req(doc, "resolution", int)
    spec = _req(doc, "spec", dict)
    for k in ("l2_bytes", "memory_bytes", "sm_count"):
        v = _req(spec, k, int, "spec.")
        if v <= 0:
            raise FieldError(f"spec.{k}", f"must be positive, found {v}")
    p = spec.get("persisting_l2_max_bytes", "missing")
    if p is not None and not (_int(p) and p >= 0):
        raise FieldError(
            "spec.persisting_l2_max_bytes", f"expected an integer or null, found {p!r}"
        )
    cc = _req(spec, "cc", list, "spec.")
    if len(cc) != 2 or not all(_int(x) for x in cc):
        raise FieldError("spec.cc", f"expected [major, minor], found {cc!r}")
    _req(spec, "dram_peak_gbps", (int, float), "spec.")
    try:
        _check_resolution(resolution, spec["l2_bytes"])
    except SweeperError as e:
        raise FieldError("resolution", str(e)) from None
    dtypes = _req(doc, "dtypes", list)
    if not dtypes:
        raise FieldError("dtypes", "empty")
    for i, d in enumerate(dtypes):
        if d not in DTYPES:
            raise FieldError(f"dtypes[{i}]", f"unknown dtype {d!r}; known: {', '.join(DTYPES)}")
    if len(set(dtypes)) != len(dtypes):
        raise FieldError("dtypes", "duplicate dtype")
    b = _bounds(spec, resolution)

    entries = _req(doc, "entries", list)
    by_dtype: dict[str, list[tuple[int, dict]]] = {d: [] for d in dtypes}
    for i, e in enumerate(entries):
        where = f"entries[{i}]."
        if not isinstance(e, dict):
            raise FieldError(f"entries[{i}]", "expected an object")
        d = _req(e, "dtype", str, where)
        if d not in by_dtype:
            raise FieldError(where + "dtype", f"unknown dtype {d!r} (plan dtypes: {dtypes})")
        n = _req(e, "n", int, where)
        ws = _req(e, "working_set_bytes", int, where)
        item = ITEMSIZE[d]
        if n <= 0:
            raise FieldError(where + "n", f"must be positive, found {n}")
        if ws != working_set(n, d):
            raise FieldError(
                where + "working_set_bytes",
                f"{ws} != n * bytes per element = {working_set(n, d)} ({d})",
            )
        if (n * item) % 16:
            raise FieldError(where + "n", f"n * itemsize = {n * item} is not a multiple of 16")
        region = _req(e, "region", str, where)
        if region != b.region(ws):
            raise FieldError(where + "region", f"{region!r} but {ws} bytes is {b.region(ws)!r}")
        names = _req(e, "anchors", list, where)
        if not all(isinstance(x, str) for x in names):
            raise FieldError(where + "anchors", "expected a list of names")
        by_dtype[d].append((i, e))

    for d, items in by_dtype.items():
        item = ITEMSIZE[d]
        if not items:
            raise FieldError("entries", f"no sizes for dtype {d}")
        ws = [e["working_set_bytes"] for _, e in items]
        for (i, _), a, c in zip(items[1:], ws, ws[1:], strict=False):
            where = f"entries[{i}].working_set_bytes"
            if c <= a:
                raise FieldError(where, f"{d}: {c} after {a}; sizes must be sorted and unique")
            if b.region(a) == "dense" and b.region(c) == "dense":
                if c - a > b.l2 / resolution:
                    raise FieldError(
                        where, f"{d}: gap {c - a} bytes in the dense region > L2/resolution"
                    )
            elif c / a > OUTER_RATIO:
                raise FieldError(where, f"{d}: ratio {c / a:.3f} outside the dense region > 1.25")
        if ws[0] > b.lo(item):
            raise FieldError("entries", f"{d}: smallest size {ws[0]} > {b.lo(item)}")
        if ws[-1] < b.hi(item):
            raise FieldError("entries", f"{d}: largest size {ws[-1]} < {b.hi(item)}")
        for edge in (b.dense_lo, b.dense_hi):
            if edge not in ws:
                raise FieldError("entries", f"{d}: dense-region edge {edge} bytes missing")
        expected = b.anchors(item)
        have: set[str] = set()
        for i, e in items:
            for name in e["anchors"]:
                if expected.get(name) != e["working_set_bytes"]:
                    raise FieldError(
                        f"entries[{i}].anchors",
                        f"{d}: anchor {name!r} does not belong at {e['working_set_bytes']} bytes",
                    )
                have.add(name)
        for name, want in expected.items():
            if name not in have:
                raise FieldError("entries", f"{d}: anchor {name!r} ({want} bytes) missing")

    tails = _req(doc, "tails", list)
    for i, t in enumerate(tails):
        where = f"tails[{i}]."
        if not isinstance(t, dict):
            raise FieldError(f"tails[{i}]", "expected an object")
        d = _req(t, "dtype", str, where)
        if d not in DTYPES:
            raise FieldError(where + "dtype", f"unknown dtype {d!r}")
        n = _req(t, "n", int, where)
        ws = _req(t, "working_set_bytes", int, where)
        if n <= 0 or ws != working_set(n, d):
            raise FieldError(where + "working_set_bytes", f"{ws} != n * bytes per element")
    _req(doc, "sweeper_version", str)
    got = _req(doc, "plan_hash", str)
    want = _hash(doc)
    if got != want:
        raise FieldError(
            "plan_hash",
            f"{got} does not match the content ({want}); was the file edited? "
            "Re-run `sweeper plan`",
        )


def plan_from_doc(doc: dict) -> Plan:
    return Plan(
        gpu=doc["gpu"],
        spec=doc["spec"],
        resolution=doc["resolution"],
        dtypes=tuple(doc["dtypes"]),
        entries=tuple(doc["entries"]),
        tails=tuple(doc["tails"]),
        sweeper_version=doc["sweeper_version"],
        plan_hash=doc["plan_hash"],
        notes=tuple(doc.get("notes", [])),
    )


def load_plan(path: str | os.PathLike) -> Plan:
    """Read and validate a plan file; SchemaError names the file and field on any problem."""
    return plan_from_doc(schema.load(path, "plan", validate=validate_plan_doc))


def write_plan(plan: Plan, path: str | os.PathLike, force: bool = False) -> Path:
    """Write atomically; refuse to replace a different plan, or a file that is no valid plan,
    unless force (the same plan: nothing is written); never a path `check_output` refuses."""
    from sweeper.runfolder import check_output

    path = check_output(path)
    if path.exists() and not force:
        try:
            same = load_plan(path).payload() == plan.payload()
        except SchemaError as e:
            raise SweeperError(f"{e}; pass --force to overwrite it with the new plan") from None
        if not same:
            raise SweeperError(
                f"{path} already holds a different plan (hash {load_plan(path).plan_hash}, new "
                f"{plan.plan_hash}); pass --force to overwrite it"
            )
        return path
    return schema.dump("plan", plan.payload(), path)


@dataclass(frozen=True)
class PlanResult:
    """What `api.plan()` returns: the plan, where it was written, and what to show."""

    plan: Plan
    path: Path
    summary: list[dict]
    notes: tuple[str, ...]
