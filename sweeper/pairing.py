"""Cross-checks on a run's recorded pairings: does the baseline's time depend on what it was
paired with? No GPU needed (reads results.csv).

The baseline (torch) is timed in every cell, next to a different candidate each time. At one
size, its median time should not depend on the candidate's cache hints. If the baseline is
slower next to candidates whose loads mark lines L2::evict_last, those lines outlived the
candidate's turn and shrank the L2 the baseline got: the candidates' ratios are inflated by
that factor. (Found in results/h200/hot-4 and hot-6, 3-6% at 30-44 MiB; the timers now demote
the cell's lines to normal priority between slots, see sweeper.measure; hot-7 and hot-8 show
no such slowdown there.)
"""

from __future__ import annotations

import pandas as pd

FLAG = 0.02  # baseline slower by more than this next to evict_last candidates: flagged
MIN_CELLS = 2  # cells needed on each side of the comparison at one size


def evict_last_contamination(
    results: pd.DataFrame, flag: float = FLAG, min_cells: int = MIN_CELLS
) -> pd.DataFrame:
    """Per mode x dtype x size: the baseline's median time next to candidates with
    L2::evict_last-family loads over its median next to the other candidates (`slowdown`,
    1.0 = no effect), with the cell counts, for sizes with >= min_cells on both sides.
    `flagged` is slowdown > 1 + flag."""
    cols = ["mode", "dtype", "ws_bytes", "slowdown", "cells_el", "cells_other", "flagged"]
    ok = results[(results["role"] == "candidate") & (results["status"] == "ok")]
    ok = ok.dropna(subset=["base_time_us", "load_hint"])
    if ok.empty:
        return pd.DataFrame(columns=cols)
    el = ok["load_hint"].astype(str).str.startswith("L2::evict_last")
    g = ok.assign(el=el).groupby(["mode", "dtype", "ws_bytes", "el"])["base_time_us"]
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
    return out[cols]
