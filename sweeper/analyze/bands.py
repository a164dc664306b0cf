"""Segmentation: the fewest bands of one config each that cover a size ladder, every size served by a config acceptable there."""

from __future__ import annotations

import math
from collections.abc import Sequence

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
    sizes: Sequence[int], acc: Sequence[dict[str, float]], max_bracket: float, simpler=None
) -> tuple[list[tuple[int, int, str]], int]:
    """Exact minimal segmentation. Returns ([(i, j, config)] inclusive index ranges, number
    of boundaries whose bracket is wider than max_bracket). acc[k]: config -> frac of best
    for the configs acceptable at sizes[k] (never empty)."""
    m = len(sizes)
    if m == 0:
        return [], 0
    key = simpler or (lambda name: name)
    INF = (math.inf, math.inf, math.inf)
    best: list[tuple[float, float, float]] = [INF] * (m + 1)
    back: list[tuple[int, str]] = [(-1, "")] * (m + 1)
    best[0] = (0, 0, 0.0)
    for j in range(m):  # band ends at j (inclusive)
        sums: dict[str, float] | None = None
        for i in range(j, -1, -1):
            if sums is None:
                sums = dict(acc[i])
            else:
                sums = {c: v + acc[i][c] for c, v in sums.items() if c in acc[i]}
            if not sums:
                break
            config = min(sums, key=lambda c: (-round(sums[c], 12), key(c)))
            wide = 1 if i > 0 and sizes[i] - sizes[i - 1] > max_bracket * (1 + 1e-12) else 0
            prev = best[i]
            cand = (prev[0] + wide, prev[1] + 1, prev[2] - sums[config])
            if cand < best[j + 1]:
                best[j + 1] = cand
                back[j + 1] = (i, config)
    bands = []
    j = m
    while j > 0:
        i, config = back[j]
        bands.append((i, j - 1, config))
        j = i
    bands.reverse()
    return bands, int(best[m][0])
