"""Segmentation: the fewest bands of one config each that cover a size ladder, every size served by a config acceptable there."""

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
) -> tuple[list[tuple[int, int, str]], int]:
    """Exact minimal segmentation. Returns ([(i, j, config)] inclusive index ranges, number
    of boundaries whose bracket is wider than max_bracket). acc[k]: config -> frac of best
    for the configs acceptable at sizes[k] (never empty).

    With `measured` (measured[k]: config -> frac of best for the configs that may serve
    sizes[k], a superset of acc[k]), a band that rests on one finely sampled size counts as
    a cost, as a size served outside the tolerance does: a config that wins at one size alone
    (a lone winner, most often noise) gets no band of its own where a neighbour's band has a
    config in measured[k] there (that size is then a `miss`); both are minimised right after
    wide brackets. A size with a gap wider than max_bracket beside it is not finely sampled:
    there a lone winner may be the only sample of a real change (the v2 cliff seen at one
    size), so it keeps its own band at no cost and is never a miss, and the wide brackets it
    brings are reported, never absorbed."""
    m = len(sizes)
    if m == 0:
        return [], 0
    key = simpler or (lambda name: name)
    pool = measured if measured is not None else acc
    min_len = 2 if measured is not None and m > 1 else 1  # else a cost, where sampled finely
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
            miss += ~inside[i]
            ok &= there[i] & (inside[i] | ~loose[i])
            if not ok.any():
                break
            if best[i][0] == math.inf:
                continue
            lone = int(j == i and min_len > 1 and not loose[i])
            # the band's config: fewest misses, then closest to the best, then simplest
            fewest = np.where(ok, miss, np.iinfo(np.int64).max)
            pick = fewest == fewest.min()
            total = np.where(pick, np.round(sums, 12), -np.inf)
            k = int(np.flatnonzero(total == total.max())[0])
            wide = 1 if i > 0 and sizes[i] - sizes[i - 1] > max_bracket * (1 + 1e-12) else 0
            prev = best[i]
            cand = (prev[0] + wide, prev[1] + int(miss[k]) + lone, prev[2] + 1, prev[3] - sums[k])
            if cand < best[j + 1]:
                best[j + 1] = cand
                back[j + 1] = (i, k)
    bands = []
    j = m
    while j > 0:
        i, k = back[j]
        bands.append((i, j - 1, names[k]))
        j = i
    bands.reverse()
    return bands, int(best[m][0])


def misses(bands, acc: Sequence[dict[str, float]]) -> list[int]:
    """Indices of the sizes a band's config serves outside the tolerance (segment with
    `measured`)."""
    return [t for i, j, c in bands for t in range(i, j + 1) if c not in acc[t]]
