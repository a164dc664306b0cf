"""Statistics of a timed cell: bootstrap CIs of medians and paired ratios, stopping rules, PairTiming."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

# ---------------------------------------------------------------------------------------------
# Statistics (pure numpy; unit-tested on the CPU)

_BOOT = 400


@functools.lru_cache(maxsize=256)
def _resample_counts(seed: int, sizes: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """For each part size in turn, how often each sample is drawn in each of _BOOT resamples
    with replacement: shape (_BOOT, size), drawn from one generator seeded with `seed`.
    The draws depend only on (seed, sizes), so a stopping rule that asks after every round
    reuses them."""
    rng = np.random.default_rng(seed)
    out = []
    for k in sizes:
        idx = rng.integers(0, k, size=(_BOOT, k))
        counts = np.zeros((_BOOT, k), dtype=np.int32)
        np.add.at(counts, (np.arange(_BOOT)[:, None], idx), 1)
        counts.setflags(write=False)
        out.append(counts)
    return tuple(out)


def _resample_medians(x: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The median of every resample described by `counts` (rows: resamples; columns: how often
    each sample of x is drawn), as np.median of the drawn values would compute it
    (_resample_medians_rows of one row)."""
    return _resample_medians_rows(x[None, :], counts)[0]


def _resample_medians_rows(x: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The resample medians (_resample_medians) of every row of x, arrays of one size, as an
    array (rows of x, resamples), in one pass over all rows: a resample's order statistics
    are its row's, in the row's sorted order, so the median ranks are found by a cumulative
    count over the row sorted."""
    k = x.shape[1]
    order = np.argsort(x, axis=1, kind="stable")
    xs = np.take_along_axis(x, order, axis=1)
    cum = np.cumsum(counts.T[order], axis=1)  # (rows, k, resamples)
    # 1-based ranks (k+1)//2 and k//2 + 1: the first position whose cumulative count
    # reaches each, that is the positions below it
    lo = (cum < (k + 1) // 2).sum(axis=1)
    hi = (cum < k // 2 + 1).sum(axis=1)
    rows = np.arange(x.shape[0])[:, None]
    return (xs[rows, lo] + xs[rows, hi]) / 2


def _quantiles_rows(values: np.ndarray, qs: tuple[float, float]) -> tuple[np.ndarray, ...]:
    """np.quantile's default (linear) interpolation at each level of `qs`, for every row of
    `values`, on one sort: one array per level."""
    v = np.sort(values, axis=1)
    size = v.shape[1]
    out = []
    for q in qs:
        pos = (size - 1) * q
        i = int(math.floor(pos))
        j = min(i + 1, size - 1)
        out.append(v[:, i] + (v[:, j] - v[:, i]) * (pos - i))
    return tuple(out)


def _quantiles(values: np.ndarray, qs: tuple[float, float]) -> tuple[float, float]:
    """_quantiles_rows of one array."""
    lo, hi = _quantiles_rows(np.asarray(values)[None, :], qs)
    return float(lo[0]), float(hi[0])


def ci_tails(level: float) -> tuple[float, float]:
    """The quantiles a two-sided percentile interval at `level` takes: (1 - level) / 2 in
    each tail."""
    tail = (1 - level) / 2
    return tail, 1 - tail


def median_ci(samples: np.ndarray, *, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Bootstrap CI of the median (deterministic for a given seed)."""
    s = np.asarray(samples, dtype=float)
    if s.size == 0:
        return (math.nan, math.nan)
    if s.size == 1:
        return (float(s[0]), float(s[0]))
    (counts,) = _resample_counts(seed, (s.size,))
    return _quantiles(_resample_medians(s, counts), ci_tails(level))


def _geomean_ci(parts: list[tuple[np.ndarray, ...]], stat, seed: int, level: float):
    """Geometric mean over parts of stat(*part) (a part: equal-length arrays, rows paired),
    with a bootstrap CI that resamples each part's rows on its own (deterministic per seed).
    `stat` takes the part's arrays and returns (point, resampled values) for the counts given."""
    parts = [p for p in parts if p[0].size]
    if not parts:
        return (math.nan, math.nan, math.nan)
    all_counts = _resample_counts(seed, tuple(p[0].size for p in parts))
    point_logs, logs = [], np.zeros(_BOOT)
    for p, counts in zip(parts, all_counts, strict=True):
        point, resampled = stat(counts, *p)
        point_logs.append(math.log(point))
        logs += np.log(resampled)
    point = float(np.exp(np.mean(point_logs)))
    lo, hi = _quantiles(np.exp(logs / len(parts)), ci_tails(level))
    return (point, lo, hi)


def _median(counts, x):
    return float(np.median(x)), _resample_medians(x, counts)


def _median_ratio(counts, num, den):
    point = float(np.median(num) / np.median(den))
    return point, _resample_medians(num, counts) / _resample_medians(den, counts)


def ratio_ci(
    num: np.ndarray, den: np.ndarray, *, seed: int = 0, level: float = 0.95
) -> tuple[float, float, float]:
    """median(num)/median(den) with a paired bootstrap CI (pairs resampled together)."""
    return parts_ratio_ci([num], [den], seed=seed, level=level)


def parts_ratio_ci(
    nums: list[np.ndarray], dens: list[np.ndarray], *, seed: int = 0, level: float = 0.95
) -> tuple[float, float, float]:
    """Geometric mean over parts of median(num)/median(den), with a bootstrap CI that resamples
    each part's pairs on its own. The parts are the buffer-swapped halves of a cell: a
    multiplicative placement effect p (one buffer set faster than the other) reads r*p in one
    half and r/p in the other, so the geometric mean is r whatever the halves' sample counts,
    where the median of the concatenated samples leans to the half with more samples."""
    parts = []
    for n, d in zip(nums, dens, strict=True):
        n, d = np.asarray(n, dtype=float), np.asarray(d, dtype=float)
        k = min(n.size, d.size)
        parts.append((n[:k], d[:k]))
    return _geomean_ci(parts, _median_ratio, seed, level)


def parts_median_ci(
    parts: list[np.ndarray], *, seed: int = 0, level: float = 0.95
) -> tuple[float, float, float]:
    """Geometric mean over parts of each part's median, with a per-part bootstrap CI."""
    return _geomean_ci([(np.asarray(p, dtype=float),) for p in parts], _median, seed, level)


def paired_summary_ci(
    a_parts: list[np.ndarray], b_parts: list[np.ndarray], *, seed: int = 0, level: float = 0.95
) -> tuple[tuple[float, float, float], ...]:
    """parts_median_ci(a_parts), parts_median_ci(b_parts) and parts_ratio_ci(b_parts, a_parts),
    the same values, with each part's resample medians drawn once for all three
    (paired_summaries of one cell)."""
    return paired_summaries([(a_parts, b_parts)], seed=seed, level=level)[0]


def paired_summaries(
    cells: list[tuple[list[np.ndarray], list[np.ndarray]]], *, seed: int = 0, level: float = 0.95
) -> list[tuple[tuple[float, float, float], ...]]:
    """For every (a_parts, b_parts) in `cells`: parts_median_ci(a_parts),
    parts_median_ci(b_parts) and parts_ratio_ci(b_parts, a_parts), the same values. Cells
    whose sides' parts have the same sizes share their resample counts, and each part's
    resample medians are drawn once for all three and for all such cells at once; where the
    sides' sizes differ (or a part is empty) the three are computed apart."""
    out: list = [None] * len(cells)
    groups: dict[tuple[int, ...], list[int]] = {}
    arrays: dict[int, tuple[list, list]] = {}  # the grouped cells' parts as float arrays
    for c, (a_parts, b_parts) in enumerate(cells):
        a_parts = [np.asarray(p, dtype=float) for p in a_parts]
        b_parts = [np.asarray(p, dtype=float) for p in b_parts]
        sizes = tuple(p.size for p in a_parts)
        if not sizes or 0 in sizes or sizes != tuple(p.size for p in b_parts):
            out[c] = (
                parts_median_ci(a_parts, seed=seed, level=level),
                parts_median_ci(b_parts, seed=seed, level=level),
                parts_ratio_ci(b_parts, a_parts, seed=seed, level=level),
            )
        else:
            groups.setdefault(sizes, []).append(c)
            arrays[c] = (a_parts, b_parts)
    tails = ci_tails(level)
    for sizes, members in groups.items():
        all_counts = _resample_counts(seed, sizes)
        m = len(members)
        logs = [np.zeros((m, _BOOT)) for _ in range(3)]
        points = [[[] for _ in range(m)] for _ in range(3)]
        for p, counts in enumerate(all_counts):
            a = np.array([arrays[c][0][p] for c in members])
            b = np.array([arrays[c][1][p] for c in members])
            ma, mb = _resample_medians_rows(a, counts), _resample_medians_rows(b, counts)
            pa, pb = np.median(a, axis=1), np.median(b, axis=1)
            for r in range(m):
                points[0][r].append(math.log(float(pa[r])))
                points[1][r].append(math.log(float(pb[r])))
                points[2][r].append(math.log(float(pb[r] / pa[r])))
            for i, resampled in enumerate((ma, mb, mb / ma)):
                logs[i] += np.log(resampled)
        bounds = [_quantiles_rows(np.exp(lg / len(sizes)), tails) for lg in logs]
        for r, c in enumerate(members):
            out[c] = tuple(
                (float(np.exp(np.mean(points[i][r]))), float(bounds[i][0][r]),
                 float(bounds[i][1][r]))
                for i in range(3)
            )  # fmt: skip
    return out


def rel_halfwidth(samples: np.ndarray) -> float:
    """Half the width of the median's bootstrap CI (median_ci), over the median; inf where
    the median is not above 0."""
    return rel_halfwidths([samples])[0]


def rel_halfwidths(arrays: list[np.ndarray]) -> list[float]:
    """rel_halfwidth of every array in `arrays`: arrays of one size share their resample
    counts, and their bootstraps run at once."""
    floats = [np.asarray(x, dtype=float) for x in arrays]
    out: list[float] = [math.nan] * len(arrays)
    groups: dict[int, list[int]] = {}
    for i, x in enumerate(floats):
        if x.size < 2:  # one sample's interval is the sample: no width; none: no median
            out[i] = 0.0 if x.size and x[0] > 0 else math.inf
        else:
            groups.setdefault(x.size, []).append(i)
    tails = ci_tails(0.95)
    for k, members in groups.items():
        x = np.array([floats[i] for i in members])
        (counts,) = _resample_counts(0, (k,))
        lo, hi = _quantiles_rows(_resample_medians_rows(x, counts), tails)
        med = np.median(x, axis=1)
        for r, i in enumerate(members):
            m = float(med[r])
            out[i] = (float(hi[r]) - float(lo[r])) / 2 / m if m > 0 else math.inf
    return out


@dataclass
class Stopping:
    """When to stop sampling a cell: enough samples and a tight CI, or a cap."""

    min_samples: int = 6
    max_samples: int = 16
    rel_tol: float = 0.01  # CI half-width of the median, relative
    time_cap_s: float = 2.0
    target_sample_us: float = 150.0  # GPU time per hot sample (sets calls per graph)
    max_calls: int = 128


def calls_per_sample(per_call_us: float, stop: Stopping) -> int:
    """Hot mode's calls per graph replay: enough that one sample is about
    stop.target_sample_us of GPU time at per_call_us per call (at least 0.5 us counted), at
    most stop.max_calls."""
    return int(
        min(stop.max_calls, max(1, math.ceil(stop.target_sample_us / max(per_call_us, 0.5))))
    )


# The side ("a": the timed one, "b": the one it is timed against) that takes a round's first
# and last slots in each of a cell's two buffer-swapped halves; manifests record it
# (harness.halves_first_side; side a in both halves before the field).
HALVES_FIRST = ("a", "b")
WARM_RULE = "4 from L2 / 4 to L2 of working set, else 1"  # manifests record it
WARM_CALLS = 4


def warm_calls(ws_bytes: int, l2_bytes: int) -> int:
    """Hot mode's untimed warm-up calls of a side before each of its samples: WARM_CALLS
    where the working set is a quarter of the L2 to all of it, one elsewhere. Each side of a
    pairing has its own buffers; in that range the other side's lines still fill part of the
    L2 when a sample begins, and one call does not clear them: on the H200 one kernel timed
    against itself read up to 1.9% slow on one side with one warm-up call and within 0.2%
    with four (lab/tools/hot_slots.py; docs/methodology.md, "Warm-up between sides")."""
    return WARM_CALLS if 4 * ws_bytes >= l2_bytes and ws_bytes <= l2_bytes else 1


def warm_rule(rule, l2_bytes: int) -> Callable[[int], int]:
    """Warm-up calls per sample and side, by working set in bytes, for a recorded rule
    (`harness.hot_warm_calls`): WARM_RULE (warm_calls on this L2) or a fixed number of calls."""
    if rule == WARM_RULE:
        return lambda ws: warm_calls(ws, l2_bytes)
    if isinstance(rule, int) and not isinstance(rule, bool) and rule >= 1:
        return lambda ws: rule
    raise ValueError(f"unknown warm-up rule {rule!r}")


@dataclass
class PairTiming:
    """Per-call times (us) of two sides timed in ABBA order, adjacent samples paired."""

    a_us: np.ndarray
    b_us: np.ndarray
    calls: int
    mode: str
    order: list[str] = field(default_factory=list)
    # samples per part when the pairing ran in parts (the buffer-swapped halves): the figures
    # are then geometric means over the parts (parts_ratio_ci), so each part weighs the same
    parts: tuple[int, ...] = ()

    def _split(self, x: np.ndarray) -> list[np.ndarray]:
        return np.split(x, np.cumsum(self.parts)[:-1])

    def summary_parts(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """The parts the summary weighs equally: the halves where they add up to the samples,
        else one part (the plain paired estimate)."""
        if len(self.parts) > 1 and sum(self.parts) == self.a_us.size == self.b_us.size:
            return self._split(self.a_us), self._split(self.b_us)
        return [self.a_us], [self.b_us]

    def summary(self) -> dict:
        return self.summary_of(paired_summary_ci(*self.summary_parts()))

    def summary_of(self, cis) -> dict:
        """The summary from paired_summary_ci of summary_parts() (or paired_summaries)."""
        (a_med, a_lo, a_hi), (b_med, b_lo, b_hi), (r, r_lo, r_hi) = cis
        return {
            "time_us": a_med,
            "time_lo_us": a_lo,
            "time_hi_us": a_hi,
            "base_time_us": b_med,
            "base_time_lo_us": b_lo,
            "base_time_hi_us": b_hi,
            "ratio": r,
            "ratio_lo": r_lo,
            "ratio_hi": r_hi,
            "n_samples": int(min(self.a_us.size, self.b_us.size)),
        }


def summaries(timings: list[PairTiming]) -> list[dict]:
    """PairTiming.summary() of each of `timings`, the same values, their bootstraps drawn
    together (paired_summaries)."""
    cis = paired_summaries([t.summary_parts() for t in timings])
    return [t.summary_of(c) for t, c in zip(timings, cis, strict=True)]
