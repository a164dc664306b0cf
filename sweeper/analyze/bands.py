"""Segmentation: the fewest bands of one config each that cover a size ladder, every size served by a config acceptable there, but where a lone winner on finely sampled sizes gets no band of its own (segment)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

# ---- segmentation: pure functions on [(size, {config: frac_of_best})] -------------------


def greedy_band_count(sets: Sequence[set[str]]) -> int:
    """Fewest bands ignoring brackets: extend each band while a common config remains."""
    count, common = 0, None
    for s in sets:
        common = (common & s) if common is not None else set(s)
        if not common:
            count, common = count + 1, set(s)
    return count + (1 if sets else 0)


def segment(
    sizes: Sequence[int],
    acc: Sequence[dict[str, float]],
    max_bracket: float,
    simpler=None,
    measured: Sequence[dict[str, float]] | None = None,
    tolerance: Sequence[float] | None = None,
    soft: Sequence[bool] | None = None,
) -> tuple[list[tuple[int, int, str]], int]:
    """Exact minimal segmentation. Returns ([(i, j, config)] inclusive index ranges, number
    of boundaries whose bracket is wider than max_bracket). acc[k]: config -> frac of best
    for the configs acceptable at sizes[k] (never empty).

    With `measured` (measured[k]: config -> frac of best for every config measured at
    sizes[k], a superset of acc[k]) and `tolerance` (the tie tolerance at each size), no band
    rests on one finely sampled size: a config that wins at one size alone (a lone winner,
    most often noise) gets no band of its own; that size joins a neighbour's band, whose
    config serves it outside the tolerance (a `miss`). A miss costs one for each tolerance
    (or part of one) its config falls behind beyond the tolerance (`miss_cost`), and the
    total is minimised right after wide brackets, so a lone winner joins the band that
    serves its size best, even at the price of a band (a config 57% behind a failed
    neighbour's cell costs 28 at a 2% tolerance, one 3.4% behind costs 1). A size with a gap
    wider than max_bracket beside it is not finely sampled: there a lone winner may be the
    only sample of a real change (the v2 cliff seen at one size), so it keeps its own band
    and is never a miss, and the wide brackets it brings are reported, never absorbed.

    `soft[k]` (with `measured`): the size's set holds the floor alone because nothing beat it
    in two measurements (sweeper.analyze.select, "The floor"). That is no sign of a change,
    so such a size may join a neighbour's band as a miss beside a wide gap too."""
    m = len(sizes)
    if m == 0:
        return [], 0
    key = simpler or (lambda name: name)
    pool = measured if measured is not None else acc
    min_len = 2 if measured is not None and m > 1 else 1  # where sampled finely
    if measured is not None and (tolerance is None or len(tolerance) != m):
        raise ValueError("segment: `measured` needs the tolerance at every size")
    if soft is not None and (measured is None or len(soft) != m):
        raise ValueError("segment: `soft` needs `measured` and a flag at every size")
    gap = [b - a for a, b in zip(sizes, sizes[1:], strict=False)]
    loose = np.array(
        [
            max(gap[t - 1] if t > 0 else 0, gap[t] if t < m - 1 else 0) > max_bracket * (1 + 1e-12)
            for t in range(m)
        ]
    )
    names = sorted({c for a in pool for c in a}, key=lambda c: (key(c), c))
    col = {c: k for k, c in enumerate(names)}
    frac = np.zeros((m, len(names)))
    there = np.zeros((m, len(names)), dtype=bool)
    inside = np.zeros((m, len(names)), dtype=bool)
    for t in range(m):
        for c, f in pool[t].items():
            frac[t, col[c]], there[t, col[c]] = f, True
        inside[t, [col[c] for c in acc[t]]] = True
    cost = np.zeros((m, len(names)), dtype=np.int64)
    if measured is not None:
        for t in range(m):
            cost[t] = [
                0 if inside[t, k] else miss_cost(frac[t, k], tolerance[t])
                for k in range(len(names))
            ]
    INF = (math.inf, math.inf, math.inf, math.inf)
    best: list[tuple[float, float, float, float]] = [INF] * (m + 1)
    back: list[tuple[int, int]] = [(-1, -1)] * (m + 1)
    best[0] = (0, 0, 0, 0.0)
    for j in range(m):  # band ends at j (inclusive)
        sums = np.zeros(len(names))
        miss = np.zeros(len(names), dtype=np.int64)
        ok = np.ones(len(names), dtype=bool)
        for i in range(j, -1, -1):
            sums += frac[i]
            miss += cost[i]
            ok &= there[i] & (inside[i] | ~loose[i] | (soft is not None and bool(soft[i])))
            if not ok.any():
                break
            if best[i][0] == math.inf or (j == i and min_len > 1 and not loose[i]):
                continue
            # the band's config: fewest misses, then closest to the best, then simplest
            fewest = np.where(ok, miss, np.iinfo(np.int64).max)
            pick = fewest == fewest.min()
            total = np.where(pick, np.round(sums, 12), -np.inf)
            k = int(np.flatnonzero(total == total.max())[0])
            wide = 1 if i > 0 and sizes[i] - sizes[i - 1] > max_bracket * (1 + 1e-12) else 0
            prev = best[i]
            cand = (prev[0] + wide, prev[1] + int(miss[k]), prev[2] + 1, prev[3] - sums[k])
            if cand < best[j + 1]:
                best[j + 1] = cand
                back[j + 1] = (i, k)
    if best[m][0] == math.inf:  # two neighbours share no measured config: one-size bands
        return segment(sizes, acc, max_bracket, simpler)
    bands = []
    j = m
    while j > 0:
        i, k = back[j]
        bands.append((i, j - 1, names[k]))
        j = i
    bands.reverse()
    return bands, int(best[m][0])


def miss_cost(frac: float, tolerance: float) -> int:
    """What serving a size at `frac` of its fastest config costs a segmentation, outside the
    tie tolerance: one for each tolerance, or part of one, that it falls behind beyond it."""
    return max(1, math.ceil((1.0 - tolerance - frac) / tolerance - 1e-9)) if tolerance > 0 else 1


def misses(bands, acc: Sequence[dict[str, float]]) -> list[int]:
    """Indices of the sizes a band's config serves outside the tolerance (segment with
    `measured`)."""
    return [t for i, j, c in bands for t in range(i, j + 1) if c not in acc[t]]
