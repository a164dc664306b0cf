"""Does a cell's place in its batch move its ratio? The batch-position test.

The batched executor times the cells of one (mode, dtype, size) one after another in a single
graph launch and records each candidate row's `batch`, `batch_pos` (0-based) and `batch_cells`.
If the GPU warms up, throttles or carries state from one cell into the next, the ratio drifts
with the position. The test:

1. y = log(ratio) of the ok candidate rows with a batch position, in batches of two or more
   cells; u = batch_pos / (batch_cells - 1), the place in the batch from 0 (first) to 1 (last).
2. Both y and u lose the (mode, dtype, n) effect and the config effect: two-way fixed effects,
   removed by alternating projections (demean by one factor, then the other, until nothing
   moves; PASSES at most). Removing them from u too (Frisch-Waugh-Lovell) keeps a config that
   always sits early from passing for a position effect, and the reverse.
3. The slope of y's residual on u's is the effect across a whole batch, first cell to last
   (the slope per position x (cells - 1)); in % of the ratio: 100 (e^slope - 1).
4. Its 95% CI: a bootstrap that resamples whole batches (BOOT replicates, seed SEED), the
   fixed effects estimated again in each replicate.
5. Apart from the slope: the median residual of the first cells of batches against that of
   the others (a first cell can differ without any ramp).

Verdict: "position effect" when the CI excludes 0 and the effect is at least MIN_EFFECT_PCT in
size, else "none found"; None when the rows carry no batch positions (cells timed one at a
time) or position cannot be told apart from config (`why` says which).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

PASSES = 30  # alternating-projection passes at most (they stop when nothing moves)
TOL = 1e-9  # in log ratio: a change of 1e-7 %
BOOT = 500
SEED = 0
MIN_EFFECT_PCT = 1.0
BATCH_FIELDS = ("batch", "batch_pos", "batch_cells")


def _codes(*cols: np.ndarray) -> np.ndarray:
    """One integer code per distinct combination of the columns' values."""
    keys = list(zip(*cols, strict=True))
    index: dict[Any, int] = {}
    return np.fromiter(
        (index.setdefault(k, len(index)) for k in keys), dtype=np.int64, count=len(keys)
    )


def _dense(codes: np.ndarray) -> np.ndarray:
    """Integer codes renumbered 0..k-1 (a resample can miss some)."""
    return np.unique(codes, return_inverse=True)[1]


def _demean(x: np.ndarray, g1: np.ndarray, g2: np.ndarray) -> np.ndarray:
    """x less its two-way fixed effects (groups g1 and g2), by alternating projections."""
    r = x - x.mean()
    n1, n2 = np.bincount(g1), np.bincount(g2)
    for _ in range(PASSES):
        m1 = np.bincount(g1, weights=r) / n1
        r = r - m1[g1]
        m2 = np.bincount(g2, weights=r) / n2
        r = r - m2[g2]
        if max(np.abs(m1).max(), np.abs(m2).max()) < TOL:
            break
    return r


def _slope(y: np.ndarray, u: np.ndarray, g1: np.ndarray, g2: np.ndarray) -> tuple[float, float]:
    """(slope of y on u with both fixed effects removed, variance of u's residual)."""
    ry, ru = _demean(y, g1, g2), _demean(u, g1, g2)
    var = float(ru @ ru) / len(ru)
    if var < 1e-9:
        return float("nan"), var
    return float(ru @ ry) / len(ru) / var, var


def _pct(log_ratio: float) -> float:
    return 100.0 * float(np.expm1(log_ratio))


def _frame(rows: Any):
    import pandas as pd

    if isinstance(rows, pd.DataFrame):
        return rows
    return pd.DataFrame(list(rows) if isinstance(rows, Iterable) else rows)


def position_effect(rows: Any, boot: int = BOOT, seed: int = SEED) -> dict[str, Any]:
    """The batch-position test over trial rows (a DataFrame or dicts with the results table's
    columns): `verdict` ("position effect" | "none found" | None), `effect_pct` (first cell to
    last, % of the ratio) and its `ci_pct` [low, high], `first_vs_rest_pct`, `cells`,
    `batches`, `why` (the reason when verdict is None)."""
    df = _frame(rows)
    out: dict[str, Any] = {
        "verdict": None,
        "effect_pct": None,
        "ci_pct": None,
        "first_vs_rest_pct": None,
        "cells": 0,
        "batches": 0,
        "min_effect_pct": MIN_EFFECT_PCT,
        "why": "",
    }
    if any(c not in df.columns for c in BATCH_FIELDS) or df["batch_pos"].isna().all():
        out["why"] = "no batch positions: cells were timed one at a time"
        return out
    keep = df["batch_pos"].notna() & df["batch_cells"].notna() & df["batch"].notna()
    if "role" in df.columns:
        keep &= df["role"] == "candidate"
    if "status" in df.columns:
        keep &= df["status"] == "ok"
    ratio = df["ratio"].astype("float64")
    keep &= np.isfinite(ratio) & (ratio > 0)
    d = df[keep]
    d = d[d["batch_cells"].astype("int64") >= 2]
    if d.empty:
        out["why"] = "no ok candidate cell in a batch of two or more"
        return out
    y = np.log(d["ratio"].to_numpy(dtype="float64"))
    pos = d["batch_pos"].to_numpy(dtype="float64")
    u = pos / (d["batch_cells"].to_numpy(dtype="float64") - 1)
    g1 = _codes(*(d[c].to_numpy() for c in ("mode", "dtype", "n")))
    g2 = _codes(d["config"].to_numpy())
    b = _codes(d["batch"].to_numpy())
    nb = int(b.max()) + 1
    out["cells"], out["batches"] = len(d), nb

    slope, _ = _slope(y, u, g1, g2)
    if not np.isfinite(slope):
        out["why"] = "position cannot be told apart from config and size (fixed places)"
        return out
    out["effect_pct"] = _pct(slope)
    res = _demean(y, g1, g2)
    first, rest = res[pos == 0], res[pos > 0]
    if len(first) and len(rest):
        out["first_vs_rest_pct"] = _pct(float(np.median(first) - np.median(rest)))

    # bootstrap over batches: the rows of each drawn batch, drawn batches kept apart
    rng = np.random.default_rng(seed)
    order = np.argsort(b, kind="stable")
    starts = np.searchsorted(b[order], np.arange(nb + 1))
    members = [order[starts[i] : starts[i + 1]] for i in range(nb)]
    slopes = []
    for _ in range(boot):
        idx = np.concatenate([members[i] for i in rng.integers(0, nb, nb)])
        s, _ = _slope(y[idx], u[idx], _dense(g1[idx]), _dense(g2[idx]))
        if np.isfinite(s):
            slopes.append(s)
    if len(slopes) < boot / 2:
        out["why"] = "too few batches to resample (position fixed in most replicates)"
        out["verdict"] = "none found"
        return out
    lo, hi = np.percentile(slopes, [2.5, 97.5])
    out["ci_pct"] = [_pct(lo), _pct(hi)]
    excludes_zero = lo > 0 or hi < 0
    big = abs(out["effect_pct"]) >= MIN_EFFECT_PCT
    out["verdict"] = "position effect" if excludes_zero and big else "none found"
    return out


def position_line(result: Mapping[str, Any]) -> str:
    """The report's one line for a position_effect result."""
    why = str(result.get("why") or "")
    if result.get("verdict") is None:
        return f"**Batch position: not measured.** {why[:1].upper()}{why[1:]}."
    ci = result.get("ci_pct")
    ci_s = f"95% CI {ci[0]:+.2f}% to {ci[1]:+.2f}%" if ci else f"no CI: {why}"
    first = result.get("first_vs_rest_pct")
    first_s = f"; first cell of a batch vs the others {first:+.2f}%" if first is not None else ""
    return (
        f"**Batch position: {result['verdict']}.** From a batch's first cell to its last the "
        f"candidate ratio moves {result['effect_pct']:+.2f}% ({ci_s}, bootstrap over "
        f"{result['batches']} batches, {result['cells']} cells, size and config effects "
        f"removed){first_s}. A position effect is a CI that excludes 0 with the effect at "
        f"least {result.get('min_effect_pct', MIN_EFFECT_PCT):g}%."
    )


def segment_start(rows: Any, boot: int = BOOT, seed: int = SEED) -> dict[str, Any]:
    """Does the first a-sample of a hot round read differently from the second? The slot test.

    A hot round times side a twice: slots 0 and 3 of a b b a in a cell's first half, 1 and 2
    of b a a b in its second. Per ok hot candidate row (`samples_us`, `base_samples_us` and
    `sample_parts`, samples in the order they were timed), per half, the mean over rounds of
    log(first / second); the cell's figure is the mean of its halves' (in one half the first
    a-sample follows b's slot, in the other a's own or the start of the segment, so what
    precedes a round is what is left). `effect_pct` is the median over cells (its 95% CI a
    bootstrap over cells), `base_pct` the same for side b. Verdict "slot effect" when the CI
    excludes 0 with the effect at least MIN_EFFECT_PCT, "none found", or None without samples.
    """
    df = _frame(rows)
    out: dict[str, Any] = {"verdict": None, "effect_pct": None, "ci_pct": None,
                           "base_pct": None, "cells": 0, "min_effect_pct": MIN_EFFECT_PCT,
                           "why": ""}  # fmt: skip
    need = ("samples_us", "base_samples_us", "sample_parts", "mode")
    if df.empty or any(c not in df.columns for c in need):
        out["why"] = "no per-sample times in the trial rows"
        return out
    keep = df["mode"] == "hot"
    if "role" in df.columns:
        keep &= df["role"] == "candidate"
    if "status" in df.columns:
        keep &= df["status"] == "ok"
    cand, base = [], []
    for a, b, parts in df.loc[keep, ["samples_us", "base_samples_us", "sample_parts"]].itertuples(
        index=False
    ):
        fa, fb = _first_second(a, parts), _first_second(b, parts)
        if fa is not None and fb is not None:
            cand.append(fa)
            base.append(fb)
    if not cand:
        out["why"] = "no ok hot candidate row with two a-samples in each half"
        return out
    c, bb = np.array(cand), np.array(base)
    out["cells"] = len(c)
    out["effect_pct"], out["base_pct"] = _pct(np.median(c)), _pct(np.median(bb))
    rng = np.random.default_rng(seed)
    meds = np.median(c[rng.integers(0, len(c), (boot, len(c)))], axis=1)
    lo, hi = np.percentile(meds, [2.5, 97.5])
    out["ci_pct"] = [_pct(lo), _pct(hi)]
    big = abs(out["effect_pct"]) >= MIN_EFFECT_PCT
    out["verdict"] = "slot effect" if (lo > 0 or hi < 0) and big else "none found"
    return out


def _first_second(samples: Any, parts: Any) -> float | None:
    """The mean over halves of each half's mean log(first / second a-sample) over its rounds;
    None where a half has fewer than two samples or the parts do not add up."""
    if not isinstance(samples, list | tuple | np.ndarray) or not isinstance(
        parts, list | tuple | np.ndarray
    ):
        return None
    # plain floats: a row holds tens of samples, too few for numpy's per-call cost to pay
    s = [float(x) for x in samples]
    k = [int(p) for p in parts]
    if not k or sum(k) != len(s) or min(k) < 2 or not all(x > 0 for x in s):
        return None
    halves, off = [], 0
    for n in k:
        pairs = (n - n % 2) // 2
        halves.append(
            math.fsum(math.log(s[i] / s[i + 1]) for i in range(off, off + 2 * pairs, 2)) / pairs
        )
        off += n
    return math.fsum(halves) / len(halves)


def segment_line(result: Mapping[str, Any]) -> str:
    """The report's one line for a segment_start result."""
    why = str(result.get("why") or "")
    if result.get("verdict") is None:
        return f"**Slot order: not measured.** {why[:1].upper()}{why[1:]}."
    lo, hi = result["ci_pct"]
    return (
        f"**Slot order: {result['verdict']}.** A round's first candidate sample against its "
        f"second: {result['effect_pct']:+.2f}% (95% CI {lo:+.2f}% to {hi:+.2f}%, bootstrap over "
        f"{result['cells']} cells; the baseline's {result['base_pct']:+.2f}%), the two halves' "
        f"slot orders averaged. A slot effect is a CI that excludes 0 with the effect at least "
        f"{result.get('min_effect_pct', MIN_EFFECT_PCT):g}%."
    )
