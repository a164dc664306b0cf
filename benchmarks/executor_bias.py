"""On a GPU: the same fp32 cells timed by the classic executor and by the batched one at two
batch sizes, in one process; prints each batched run's median time difference from classic,
candidate and baseline apart; `--clocks both` also with the batched executor's NVML clock
monitor closed (no NVML reads during the batches).

    python benchmarks/executor_bias.py [--mib 45] [--cells 12] [--clocks on|both]
"""

from __future__ import annotations

import argparse
import math
import statistics


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=float, default=45)
    ap.add_argument("--cells", type=int, default=12)
    ap.add_argument("--clocks", choices=("on", "both"), default="on")
    a = ap.parse_args()
    from sweeper_kernels import GRIDS

    from sweeper.run.batched import BatchedExecutor
    from sweeper.run.executor import GpuExecutor
    from sweeper.stats import Stopping

    stop = Stopping()
    grid = list(GRIDS["default"](["fp32"]))
    vs = grid[:: max(1, len(grid) // a.cells)][: a.cells]
    n = int(a.mib * 2**20) // 8
    c = GpuExecutor(stopping=stop)
    c.reference("hot", "fp32", n)
    cr = {v.id: c.measure("hot", "fp32", n, v) for v in vs}
    runs = [(cells, True) for cells in (1, 16)]
    if a.clocks == "both":
        runs += [(cells, False) for cells in (1, 16)]
    for cells, clocks in runs:
        b = BatchedExecutor(stopping=stop, batch_cells=cells)
        if not clocks:
            b.clocks.close()
        b.reference("hot", "fp32", n)
        br = {r["variant_id"]: r for r in b.measure_many("hot", "fp32", n, vs)}

        def diff(col: str, br=br) -> float:
            return 100 * statistics.median(math.log(br[k][col] / cr[k][col]) for k in cr)

        samples = statistics.median(r["n_samples"] for r in br.values())
        print(
            f"batch_cells={cells}{'' if clocks else ', no NVML'}: candidate time vs classic median {diff('time_us'):+.2f}%, "
            f"baseline {diff('base_time_us'):+.2f}%, samples {samples} vs classic "
            f"{statistics.median(r['n_samples'] for r in cr.values())}"
        )


if __name__ == "__main__":
    main()
