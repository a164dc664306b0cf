#!/usr/bin/env python3
"""A lower bound on the GPU work of a hot run's candidate cells, from its recorded samples.

    python tools/gpu_work.py results/h200/hot-5 [--max-samples 8]

Per dtype and search phase (screen, sweep, refine), the seconds of GPU time that the cells'
kernels alone must take, whatever the host does:

* timed: samples per side x calls per sample x (candidate + baseline time per call);
* warm-up: the one call of each side before every sample;
* fresh: the fresh-input replay (sweeper.run.fresh): 2 x (calls + 1) candidate calls and
  4 x calls one-block kernels, each counted at an empty kernel's time in a hot graph.

Calls per sample are estimated as the calibration sets them (Bench.calibrate_calls) from the
baseline's time per call. Pre-checks, calibration, the L2 normalizer, the output checks and
the reference cells are left out, so the run cannot take less than the total: it is the floor
that a faster host loop alone can reach for this set of cells. `--max-samples K` counts every
cell at no more than K samples per side: the floor of the same cells under a stopping rule
capped there.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict

from sweeper.analyze.store import load_manifest, read_trials
from sweeper.errors import SweeperError

EMPTY_KERNEL_US = 0.52  # an empty kernel's time per call in a hot graph (docs/methodology.md)
PARTS = ("timed", "warm-up", "fresh")


def calls_per_sample(base_us: float, stopping: dict) -> int:
    """Bench.calibrate_calls: calls per hot graph so one sample is about target_sample_us."""
    per_call = max(base_us, 0.5)
    return int(
        min(stopping["max_calls"], max(1, math.ceil(stopping["target_sample_us"] / per_call)))
    )


def cell_work(cell: dict, stopping: dict) -> dict[str, float]:
    """Seconds of GPU work of one hot candidate cell, by part."""
    calls = calls_per_sample(cell["base_time_us"], stopping)
    a, b, k = cell["time_us"], cell["base_time_us"], cell["n_samples"]
    return {
        "timed": k * calls * (a + b) / 1e6,
        "warm-up": k * (a + b) / 1e6,
        "fresh": (2 * (calls + 1) * a + 4 * calls * EMPTY_KERNEL_US) / 1e6,
    }


def gpu_work(run: str, max_samples: int | None = None) -> tuple[dict, dict]:
    """((dtype, phase) -> {"cells": n, part: seconds}, the manifest's timing)."""
    m = load_manifest(run)
    if "hot" not in m.get("modes", []):
        raise SweeperError(
            f"{run}: not a hot run (modes {m.get('modes')}); the bound is hot mode's"
        )
    trials, _ = read_trials(run)
    out: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for t in trials:
        if t["role"] != "candidate" or t["mode"] != "hot" or t["status"] != "ok":
            continue
        row = out[(t["dtype"], t.get("phase", "?"))]
        row["cells"] += 1
        if max_samples is not None:
            t = {**t, "n_samples": min(t["n_samples"], max_samples)}
        for part, s in cell_work(t, m["stopping"]).items():
            row[part] += s
    return dict(out), m.get("timing", {})


def table(run: str, max_samples: int | None = None) -> list[str]:
    work, timing = gpu_work(run, max_samples)
    lines = [
        "| dtype | phase | cells | "
        + " | ".join(f"{p} s" for p in PARTS)
        + " | floor s | ms per cell |",
        "|---|---|---:|" + "---:|" * (len(PARTS) + 2),
    ]
    total = defaultdict(float)
    for (dtype, phase), row in sorted(work.items()):
        floor = sum(row[p] for p in PARTS)
        lines.append(
            f"| {dtype} | {phase} | {int(row['cells'])} | "
            + " | ".join(f"{row[p]:.1f}" for p in PARTS)
            + f" | {floor:.1f} | {1e3 * floor / row['cells']:.2f} |"
        )
        for k in ("cells", *PARTS):
            total[k] += row[k]
    floor = sum(total[p] for p in PARTS)
    lines.append(
        f"| all | all | {int(total['cells'])} | "
        + " | ".join(f"{total[p]:.1f}" for p in PARTS)
        + f" | {floor:.1f} | {1e3 * floor / max(total['cells'], 1):.2f} |"
    )
    if max_samples is not None:
        lines.append(f"\nEvery cell counted at no more than {max_samples} samples per side.")
    elif timing.get("total_s"):
        lines.append(
            f"\nThe run took {timing['total_s']:.1f} s: the GPU work above is "
            f"{floor / timing['total_s']:.0%} of it."
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="run folders (hot mode)")
    ap.add_argument(
        "--max-samples",
        type=int,
        default=None,
        help="count cells at most this many samples per side",
    )
    args = ap.parse_args(argv)
    try:
        if args.max_samples is not None and args.max_samples < 1:
            raise SweeperError(f"--max-samples {args.max_samples}: 1 or more")
        out = [f"## {run}\n\n" + "\n".join(table(run, args.max_samples)) for run in args.runs]
    except SweeperError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
