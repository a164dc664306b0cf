"""Cross-checks on a run's recorded pairings: does the baseline's time depend on what it was
paired with? No GPU needed (reads results.csv).

The baseline (torch) is timed in every cell, next to a different candidate each time. At one
size, its median time should not depend on the candidate's cache hints. If the baseline is
slower next to candidates whose loads mark lines L2::evict_last, those lines outlived the
candidate's turn and shrank the L2 the baseline got: the candidates' ratios are inflated by
that factor (3-6% at 30-44 MiB on the H200 before the timers demoted the cell's lines to
normal priority between slots, see sweeper.run.timers and docs/methodology.md; with that
demotion the check finds no such slowdown there).
"""

from __future__ import annotations

from itertools import combinations
from math import comb

import numpy as np
import pandas as pd

FLAG = 0.02  # baseline slower by more than this next to evict_last candidates: flagged
MIN_CELLS = 2  # cells needed on each side of the comparison at one size
ALPHA = 0.05  # a flagged size whose permutation p-value is below this is "significant"
EXACT_MAX = 20000  # enumerate every split up to this many, else draw this many at random


def permutation_p(a, b, *, exact_max: int = EXACT_MAX, seed: int = 0) -> float:
    """One-sided permutation p-value of median(a) / median(b) being as large as observed
    when the labels are exchangeable (no effect): the share of the splits of a + b into
    groups of len(a) and len(b) whose median ratio is >= the observed one. Exact when there
    are at most `exact_max` splits, else `exact_max` random splits (fixed seed) with the
    usual +1 correction. With few cells the smallest possible p is 1 / C(len(a)+len(b),
    len(a)); 10 against 2 cells cannot go below 1/66."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    pool, k = np.concatenate([a, b]), len(a)
    n = len(pool)
    observed = np.median(a) / np.median(b)
    if comb(n, k) <= exact_max:
        idx = np.array(list(combinations(range(n), k)))
        inside = np.zeros((len(idx), n), dtype=bool)
        inside[np.arange(len(idx))[:, None], idx] = True
        extra = 0
    else:
        rng = np.random.default_rng(seed)
        order = rng.random((exact_max, n)).argsort(axis=1)
        inside = np.zeros((exact_max, n), dtype=bool)
        inside[np.arange(exact_max)[:, None], order[:, :k]] = True
        extra = 1
    vals = np.broadcast_to(pool, inside.shape)
    med_in = np.nanmedian(np.where(inside, vals, np.nan), axis=1)
    med_out = np.nanmedian(np.where(inside, np.nan, vals), axis=1)
    hits = int(np.sum(med_in / med_out >= observed * (1 - 1e-12)))
    return (hits + extra) / (len(inside) + extra)


def evict_last_contamination(
    results: pd.DataFrame, flag: float = FLAG, min_cells: int = MIN_CELLS
) -> pd.DataFrame:
    """Per mode x dtype x size: the baseline's median time next to candidates with
    L2::evict_last-family loads over its median next to the other candidates (`slowdown`,
    1.0 = no effect), with the cell counts, for sizes with >= min_cells on both sides.
    `flagged` is slowdown > 1 + flag; `p` (flagged sizes only, else NaN) is the permutation
    p-value of that slowdown (`permutation_p` over the baseline times of the size's cells):
    an isolated flag with a large p is what noise alone gives at 1-3 us calls."""
    cols = ["mode", "dtype", "ws_bytes", "slowdown", "cells_el", "cells_other", "flagged", "p"]
    ok = results[(results["role"] == "candidate") & (results["status"] == "ok")]
    ok = ok.dropna(subset=["base_time_us", "load_hint"])
    if ok.empty:
        return pd.DataFrame(columns=cols)
    ok = ok.assign(el=ok["load_hint"].astype(str).str.startswith("L2::evict_last"))
    size = ["mode", "dtype", "ws_bytes"]
    g = ok.groupby([*size, "el"])["base_time_us"]
    med, cnt = g.median().unstack(), g.size().unstack()
    if True not in med.columns or False not in med.columns:
        return pd.DataFrame(columns=cols)
    keep = (cnt[True] >= min_cells) & (cnt[False] >= min_cells)
    out = pd.DataFrame(
        {
            "slowdown": med[True] / med[False],
            "cells_el": cnt[True],
            "cells_other": cnt[False],
        }
    )[keep].reset_index()
    out["cells_el"] = out["cells_el"].astype(int)
    out["cells_other"] = out["cells_other"].astype(int)
    out["flagged"] = out["slowdown"] > 1 + flag
    cells = ok.groupby(size)
    out["p"] = [
        _p_of(cells.get_group(tuple(r[size]))) if r["flagged"] else np.nan
        for _, r in out.iterrows()
    ]
    return out[cols]


def _p_of(cells: pd.DataFrame) -> float:
    t = cells["base_time_us"].to_numpy(dtype=float)
    el = cells["el"].to_numpy(dtype=bool)
    return permutation_p(t[el], t[~el])
