"""Performance targets: what a run and its policy are checked against, the defaults and a
user's targets file.

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

from sweeper.analyze.columns import MODES
from sweeper.dtypes import DTYPES
from sweeper.units import MiB

# what a target's value is checked on, as the report names it
METRICS = {
    "ratio": "ratio",
    "ratio_hi": "ratio CI upper end",
    "pct_ceiling": "% of the L2-resident ceiling",
    "pct_copy": "% of the copy kernel",
}

DEFAULT_SOURCE = "defaults from `sweeper/analyze/targets.py` (the H200 project targets)"


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
    from pathlib import Path

    from sweeper.errors import FieldError, SchemaError
    from sweeper.files import read_json

    path = Path(path)
    doc = read_json(path)
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
