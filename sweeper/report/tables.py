"""Tables drawn from a results frame, shared by plots and report: best per size, rankings,
facets; and the Markdown table the report writes them as."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sweeper.analyze.policy import Band
from sweeper.analyze.select import ok_candidates
from sweeper.dtypes import DTYPES

if TYPE_CHECKING:
    import pandas as pd

from collections.abc import Sequence

from sweeper.analyze.columns import MODES

# ---- table helpers (pure pandas) ----------------------------------------------------------


def best_per_size(results: pd.DataFrame) -> pd.DataFrame:
    """The fastest ok candidate at each (mode, pattern, dtype, ws_bytes): one row each."""
    cand = ok_candidates(results).dropna(subset=["gbps"])
    keys = ["mode", "pattern", "dtype", "ws_bytes"]
    if cand.empty:
        return cand.copy()
    best = cand.loc[cand.groupby(keys)["gbps"].idxmax()].copy()
    best["pct_of_copy"] = 100.0 * best["gbps"] / best["copy_gbps"]
    return best.sort_values(keys).reset_index(drop=True)


def pct_of_best(results: pd.DataFrame) -> pd.DataFrame:
    """Ok candidates with `pct_best`: 100 * gbps / best gbps at the same cell (0..100)."""
    cand = ok_candidates(results).dropna(subset=["gbps"]).copy()
    keys = ["mode", "pattern", "dtype", "ws_bytes"]
    cand["pct_best"] = 100.0 * cand["gbps"] / cand.groupby(keys)["gbps"].transform("max")
    return cand


def rank_configs(results: pd.DataFrame) -> list[str]:
    """Configs best first: mean % of best over every sampled size (unmeasured counts as 0)."""
    pct = pct_of_best(results)
    if pct.empty:
        return []
    sizes = results["ws_bytes"].nunique()
    score = pct.groupby("config")["pct_best"].sum() / max(sizes, 1)
    return sorted(score.index, key=lambda c: (-score[c], c))


def shown_configs(results: pd.DataFrame, top: int) -> list[str]:
    """At most `top` configs, in rank order: the configs that win most sizes first (so a
    regime's winner is shown), then the best by mean % of best."""
    ranked = rank_configs(results)
    pos = {c: i for i, c in enumerate(ranked)}
    wins = best_per_size(results)["config"].value_counts()
    winners = sorted(wins.index, key=lambda c: (-wins[c], pos.get(c, len(pos))))[:top]
    fill = [c for c in ranked if c not in winners][: max(0, top - len(winners))]
    return [c for c in ranked if c in winners or c in fill]


def band_config(bands: Sequence[Band], ws_bytes: int) -> str | None:
    """The policy's config for a working set: the band with lo <= ws < hi (hi None = inf)."""
    for lo, hi, config in bands:
        if ws_bytes >= (lo or 0) and (hi is None or ws_bytes < hi):
            return config
    return None


def facets(results: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Split by residency mode (and call pattern when a run has more than one)."""
    by_pattern = results["pattern"].nunique() > 1
    out = []
    modes = sorted(results["mode"].unique(), key=lambda m: MODES.index(m) if m in MODES else 99)
    for mode in modes:
        sub = results[results["mode"] == mode]
        if by_pattern:
            for pattern in sorted(sub["pattern"].unique()):
                out.append((f"{mode}-{pattern}", sub[sub["pattern"] == pattern]))
        else:
            out.append((mode, sub))
    return out


def dtypes_in(results: pd.DataFrame) -> list[str]:
    present = list(results["dtype"].unique())
    return sorted(present, key=lambda d: (DTYPES.index(d) if d in DTYPES else 99, d))


# ---- Markdown -----------------------------------------------------------------------------


def md_cell(v: object) -> str:
    """Text for a table cell: no pipes or newlines that would break the table."""
    text = "" if v is None else str(v)
    return text.replace("|", "\\|").replace("\n", " ").strip()


def md_table(header: Sequence[str], rows: Sequence[Sequence[object]], align: str = "") -> list[str]:
    """A Markdown table's lines; `align` one letter per column: "-" left, "r" right, "c"
    centred."""
    align = align or "-" * len(header)
    marks = {"-": "---", "r": "---:", "c": ":---:"}
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(marks[a] for a in align) + "|"]
    out += ["| " + " | ".join(md_cell(v) for v in row) + " |" for row in rows]
    return out


# ---- axis helpers -------------------------------------------------------------------------
