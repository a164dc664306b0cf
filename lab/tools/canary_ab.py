"""The canary's cost to what is timed: 48 default-grid fp32 configs, hot, at 3/4 of the L2,
timed by the classic executor once, then by the batched executor with and without the canary
(BatchedExecutor.canary), alternating, `--reps` times. Run from the repository root on a GPU
machine:

    python3 lab/tools/canary_ab.py [--reps 2]

Per batched run: the median candidate time and ratio against the classic executor's, the slot
test (a round's first candidate sample against its second, sweeper.analyze.position), the
cells not ok and the canary calls checked.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

from sweeper_kernels import GRIDS

from sweeper.analyze.position import segment_start
from sweeper.plan.gpus import detect
from sweeper.run.batched import BatchedExecutor
from sweeper.run.executor import GpuExecutor
from sweeper.stats import Stopping


def _median_pct(b: dict, c: dict, field: str) -> float:
    return 100 * math.expm1(statistics.median(math.log(b[k][field] / c[k][field]) for k in c))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()
    stop = Stopping(min_samples=4, max_samples=8, rel_tol=0.02, time_cap_s=0.5)
    n = detect().l2_bytes * 3 // 4 // 8
    grid = list(GRIDS["default"](["fp32"]))
    variants = grid[:: max(1, len(grid) // 48)][:48]
    classic = GpuExecutor(stopping=stop)
    classic.reference("hot", "fp32", n)
    c = {v.id: classic.measure("hot", "fp32", n, v) for v in variants}
    for rep in range(args.reps):
        for canary in (True, False):
            ex = BatchedExecutor(stopping=stop)
            ex.canary = canary
            ex.reference("hot", "fp32", n)
            t0 = time.time()
            b = {r["variant_id"]: r for r in ex.measure_many("hot", "fp32", n, variants)}
            dt = time.time() - t0
            slot = segment_start(list(b.values()))
            bad = sum(1 for r in b.values() if r["status"] != "ok")
            calls = sum(r.get("canaries", 0) for r in b.values())
            print(f"rep {rep} canary {canary!s:5}: time vs classic {_median_pct(b, c, 'time_us'):+.2f}%, "
                  f"ratio vs classic {_median_pct(b, c, 'ratio'):+.2f}%, slot {slot['verdict']} "
                  f"{slot['effect_pct']:+.2f}%, not ok {bad}, canaries {calls}, {dt:.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
