#!/usr/bin/env python3
"""What fewer samples per cell would do to a run's agreement with another run.

    python lab/tools/sample_budget.py results/h200/hot-7 OTHER_RUN --per-half 8,4,3

Every ok candidate cell of RUN that OTHER_RUN measured too (same mode, dtype, size and config)
is summarised again from only its first k sample pairs of each buffer-swapped half, as a
stopping rule capped at 2k samples per side would have left it (sweeper.stats.PairTiming,
the run's own summary); the table shows how often that ratio to the baseline lies within 3% of
OTHER_RUN's, and the median and p95 of the difference, beside the share of RUN's cells that
took more samples than that. Cells recorded without their two halves are left out.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from sweeper.analyze.store import read_trials
from sweeper.errors import SweeperError
from sweeper.stats import PairTiming

WITHIN = 0.03


def _cells(run: str) -> dict[tuple, dict]:
    trials, _ = read_trials(run)
    return {
        (t["mode"], t["dtype"], t["n"], t["config"]): t
        for t in trials
        if t["role"] == "candidate" and t["status"] == "ok"
    }


def truncated_ratio(cell: dict, k: int) -> float | None:
    """The cell's ratio from the first k pairs of each half (None without two halves)."""
    parts = cell.get("sample_parts") or []
    if len(parts) != 2 or not cell.get("samples_us"):
        return None
    a, b = np.asarray(cell["samples_us"]), np.asarray(cell["base_samples_us"])
    p0, p1 = parts
    k0, k1 = min(k, p0), min(k, p1)
    pick = np.r_[0:k0, p0 : p0 + k1]
    return PairTiming(a[pick], b[pick], 1, cell["mode"], parts=(k0, k1)).summary()["ratio"]


def budget(run: str, other: str, per_half: list[int]) -> list[dict]:
    mine, theirs = _cells(run), _cells(other)
    common = [(c, theirs[key]) for key, c in mine.items() if key in theirs]
    if not common:
        raise SweeperError(f"{run} and {other} have no ok candidate cell in common")
    out = []
    for k in per_half:
        pairs = [(truncated_ratio(c, k), o["ratio"]) for c, o in common]
        dev = np.array([abs(x / y - 1) for x, y in pairs if x is not None])
        out.append({
            "per_half": k,
            "cells": int(dev.size),
            "capped": float(np.mean([c["n_samples"] > 2 * k for c, _ in common])),
            "within": float(np.mean(dev <= WITHIN)),
            "median": float(np.median(dev)),
            "p95": float(np.quantile(dev, 0.95)),
        })  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run")
    ap.add_argument("other")
    ap.add_argument("--per-half", default="8,4,3", help="sample pairs kept per half, e.g. 8,4,3")
    a = ap.parse_args(argv)
    try:
        ks = [int(x) for x in a.per_half.split(",") if x.strip().isdigit()]
        if not ks or min(ks) < 1 or len(ks) != len(a.per_half.split(",")):
            raise SweeperError(f"--per-half {a.per_half}: whole numbers of 1 or more, e.g. 8,4,3")
        rows = budget(a.run, a.other, ks)
    except SweeperError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{a.run} against {a.other}: ratio to the baseline, {rows[0]['cells']} common cells\n")
    print("| pairs per half kept | cells that took more | within 3% | median diff | p95 diff |")
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['per_half']} | {r['capped']:.1%} | {r['within']:.1%} | {r['median']:.2%} | "
              f"{r['p95']:.2%} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
