"""The size ladder: working-set sizes that are gap-free in BYTES around the L2 boundary.

Pure functions, no GPU. For a ReLU the working set is input + output = 2 * n * itemsize.

For every dtype the ladder holds (the validator checks all of these on load):

* dense region [L2/4, 2*L2] (rounded outward to the 32-byte grain, capped by the memory cap):
  consecutive working sets at most L2/resolution bytes apart;
* outside it, from 64 KiB up to max(32*L2, every anchor) or the memory cap: consecutive working
  sets within a ratio of 1.25;
* anchors: 32 MiB and one small step (L2/256 rounded to the grain) either side, L2 and either
  side, the persisting-L2 max (when known), 2*L2, and 1024^2 / 4096^2 ELEMENTS of the dtype;
* every n is whole and n*itemsize is a multiple of 16 bytes (so working sets are multiples of
  32 bytes and vector paths are exercised); sorted, no duplicates.

The memory cap: the largest working set is at most memory_bytes / 8, so the candidate's and
the baseline's buffers (2 x working set) plus an L2 flush buffer fit with room to spare.

Odd "tail" sizes (n = 1, 3, 15, ...) are stored separately for correctness checks; never timed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sweeper.dtypes import DTYPES
from sweeper.errors import SweeperError
from sweeper.units import KiB, MiB

GRAIN = 32  # working-set grain in bytes: n * itemsize % 16 == 0  <=>  ws % 32 == 0
MIN_WS = 64 * KiB
OUTER_RATIO = 1.25
UPPER_L2_MULTIPLE = 32
MEMORY_FRACTION = 8  # largest working set <= memory_bytes // MEMORY_FRACTION
RESOLUTION_MIN, RESOLUTION_MAX = 32, 4096
OLD_THRESHOLD = 32 * MiB  # v2's streaming threshold, always sampled
TAIL_NS = (1, 3, 15, 17, 4097, 1000003)

# run-time estimate (see estimate_seconds)
EST_WARMUP = 5
EST_SAMPLES = 30
EST_CALLS_PER_SAMPLE = 20
EST_MIN_CALL_S = 5e-6


def _floor(x: int) -> int:
    return x // GRAIN * GRAIN


def _ceil(x: int) -> int:
    return -(-x // GRAIN) * GRAIN


def _round(x: int) -> int:
    return max(GRAIN, (x + GRAIN // 2) // GRAIN * GRAIN)


# ---- the ladder ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Bounds:
    """Everything the ladder and its validator derive from (l2, persisting, memory)."""

    l2: int
    persisting: int | None
    memory: int
    resolution: int

    @property
    def cap(self) -> int:
        return _floor(self.memory // MEMORY_FRACTION)

    @property
    def dense_step(self) -> int:
        return _floor(self.l2 // self.resolution)

    @property
    def dense_lo(self) -> int:
        return min(_floor(self.l2 // 4), self.cap)

    @property
    def dense_hi(self) -> int:
        return min(_ceil(2 * self.l2), self.cap)

    @property
    def small_step(self) -> int:
        return max(GRAIN, _round(self.l2 // 256))

    def anchors(self, itemsize: int) -> dict[str, int]:
        """name -> working-set bytes for one dtype, dropping any above the memory cap."""
        s = self.small_step
        l2 = _round(self.l2)
        named = {
            "32MiB-": OLD_THRESHOLD - s,
            "32MiB": OLD_THRESHOLD,
            "32MiB+": OLD_THRESHOLD + s,
            "L2-": l2 - s,
            "L2": l2,
            "L2+": l2 + s,
            "2xL2": _round(2 * self.l2),
            "1024^2": 2 * 1024 * 1024 * itemsize,
            "4096^2": 2 * 4096 * 4096 * itemsize,
        }
        if self.persisting:
            named["persist-max"] = _round(self.persisting)
        return {k: v for k, v in named.items() if GRAIN <= v <= self.cap}

    def lo(self, itemsize: int) -> int:
        return min([MIN_WS, self.dense_lo, *self.anchors(itemsize).values()])

    def hi(self, itemsize: int) -> int:
        want = max([_ceil(UPPER_L2_MULTIPLE * self.l2), *self.anchors(itemsize).values()])
        return min(want, self.cap)

    def region(self, ws: int) -> str:
        return "dense" if self.dense_lo <= ws <= self.dense_hi else "outer"


def _check_resolution(resolution: Any, l2: int) -> None:
    if isinstance(resolution, bool) or not isinstance(resolution, int):
        raise SweeperError(f"--resolution must be an integer, got {resolution!r}")
    if not RESOLUTION_MIN <= resolution <= RESOLUTION_MAX:
        raise SweeperError(
            f"--resolution must be between {RESOLUTION_MIN} and {RESOLUTION_MAX} "
            f"(steps of L2/resolution bytes in the dense band), got {resolution}"
        )
    if l2 // resolution < GRAIN:
        raise SweeperError(
            f"--resolution {resolution} gives steps below {GRAIN} bytes for an L2 of {l2} bytes; "
            f"use at most {max(RESOLUTION_MIN, l2 // GRAIN)}"
        )


def _geometric(start: int, stop: int) -> list[int]:
    """Grain multiples from start to stop (both included), consecutive ratio <= OUTER_RATIO."""
    out = [start]
    while out[-1] < stop:
        nxt = _floor(int(out[-1] * OUTER_RATIO))
        if nxt <= out[-1]:
            nxt = out[-1] + GRAIN
        out.append(min(nxt, stop))
    return out


def ladder(b: Bounds, itemsize: int) -> list[int]:
    """Sorted unique working-set sizes (bytes) for one dtype."""
    lo, hi = b.lo(itemsize), b.hi(itemsize)
    d_lo, d_hi = b.dense_lo, b.dense_hi
    sizes: set[int] = set()
    sizes.update(range(d_lo, d_hi, b.dense_step))  # d_lo <= d_hi: both clip at the cap
    sizes.add(d_hi)
    sizes.update(_geometric(lo, d_lo))
    sizes.update(_geometric(d_hi, hi))
    sizes.update(b.anchors(itemsize).values())
    return sorted(sizes)


def _dtype_list(dtypes: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    if dtypes is None:
        return tuple(DTYPES)
    items = dtypes.split(",") if isinstance(dtypes, str) else list(dtypes)
    out: list[str] = []
    for d in (x.strip().lower() for x in items):
        if not d:
            continue
        if d not in DTYPES:
            raise SweeperError(f"unknown dtype {d!r}; known: {', '.join(DTYPES)}")
        if d not in out:
            out.append(d)
    if not out:
        raise SweeperError(f"no dtypes given; known: {', '.join(DTYPES)}")
    return tuple(out)
