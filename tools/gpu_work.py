#!/usr/bin/env python3
"""A lower bound on the GPU work of a hot run's candidate cells, from its recorded samples.

    python tools/gpu_work.py results/h200/hot-7 [--max-samples 8] [--current-warm-up]

Per dtype and search phase (screen, sweep, refine): the seconds of GPU time the cells' kernels
alone must take, whatever the host does (sweeper.analyze.gpuwork: timed, warm-up and
fresh-input replay). `--max-samples K` counts every cell at no more than K samples per side:
the floor of the same cells under a stopping rule capped there; `--current-warm-up` counts
the warm-up calls by today's rule (sweeper.run.stats.WARM_RULE) rather than the one the run
recorded: the floor of the same cells timed now. The report's Timing section
prints the run's total.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

from sweeper.analyze.gpuwork import PARTS, floor, fresh_replayed, warm_up_calls
from sweeper.analyze.store import load_manifest, read_trials
from sweeper.errors import SweeperError
from sweeper.run.stats import WARM_RULE, warm_rule


def gpu_work(
    run: str, max_samples: int | None = None, current_warm_up: bool = False
) -> tuple[dict, dict, bool]:
    """((dtype, phase) -> {"cells": n, part: seconds}, the manifest's timing, whether hot is
    the run's only mode). `current_warm_up`: warm-up calls counted by today's rule
    (stats.WARM_RULE), not the run's own."""
    m = load_manifest(run)
    if "hot" not in m.get("modes", []):
        raise SweeperError(
            f"{run}: not a hot run (modes {m.get('modes')}); the bound is hot mode's"
        )
    trials, _ = read_trials(run)
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for t in trials:
        groups[(t["dtype"], t.get("phase", "?"))].append(t)
    fresh = fresh_replayed(m)
    if current_warm_up:
        warm = warm_rule(WARM_RULE, int(m["device"]["l2_bytes"]))
    else:
        warm = warm_up_calls(m)
    out = {k: floor(rows, m["stopping"], max_samples, fresh, warm) for k, rows in groups.items()}
    only_hot = list(m.get("modes", [])) == ["hot"]
    return {k: v for k, v in out.items() if v["cells"]}, m.get("timing", {}), only_hot


def _row(dtype: str, phase: str, row: dict) -> str:
    """One table line: the cells, each part, their sum and the sum per cell."""
    total = sum(row[p] for p in PARTS)
    return (
        f"| {dtype} | {phase} | {int(row['cells'])} | "
        + " | ".join(f"{row[p]:.1f}" for p in PARTS)
        + f" | {total:.1f} | {1e3 * total / max(row['cells'], 1):.2f} |"
    )


def table(run: str, max_samples: int | None = None, current_warm_up: bool = False) -> list[str]:
    work, timing, only_hot = gpu_work(run, max_samples, current_warm_up)
    lines = [
        "| dtype | phase | cells | "
        + " | ".join(f"{p} s" for p in PARTS)
        + " | floor s | ms per cell |",
        "|---|---|---:|" + "---:|" * (len(PARTS) + 2),
    ]
    total = dict.fromkeys(("cells", *PARTS), 0.0)
    for (dtype, phase), row in sorted(work.items()):
        lines.append(_row(dtype, phase, row))
        for k in total:
            total[k] += row[k]
    lines.append(_row("all", "all", total))
    work_s = sum(total[p] for p in PARTS)
    if current_warm_up:
        lines.append(f"\nWarm-up calls counted by today's rule: {WARM_RULE}.")
    if max_samples is not None:
        lines.append(f"\nEvery cell counted at no more than {max_samples} samples per side.")
    # the run's wall time, beside the floor of its own cells as timed (other modes share it)
    elif timing.get("total_s") and only_hot and not current_warm_up:
        lines.append(
            f"\nThe run took {timing['total_s']:.1f} s: the GPU work above is "
            f"{work_s / timing['total_s']:.0%} of it."
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
    ap.add_argument(
        "--current-warm-up",
        action="store_true",
        help="count warm-up calls by today's rule, not the run's own (the floor of the same "
        "cells timed now)",
    )
    args = ap.parse_args(argv)
    try:
        if args.max_samples is not None and args.max_samples < 1:
            raise SweeperError(f"--max-samples {args.max_samples}: 1 or more")
        out = [
            f"## {run}\n\n" + "\n".join(table(run, args.max_samples, args.current_warm_up))
            for run in args.runs
        ]
    except SweeperError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
