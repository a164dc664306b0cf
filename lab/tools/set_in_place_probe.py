"""The batched executor's host time per cell with its cell graphs set in place (CellGraph:
the candidate's kernel set on pooled instantiated graphs) and built per cell (captures chained
into new graphs, a pooled instantiation updated), one after the other on one executor, hot,
64 default-grid variants per size. Run from the repository root on a GPU machine:

    python3 lab/tools/set_in_place_probe.py [--dtype fp32] [--mib 2 45 300] [--reps 2]

Per size and way: wall ms per cell (host and GPU overlapped, as in a run), the phase clocks
per cell, the cells whose status is not ok, the graphs set and built, and the median of
|ratio(set) / ratio(built) - 1| over the cells both ways measured ok.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from sweeper_kernels import get_grid

from sweeper.run.batched import BatchedExecutor
from sweeper.units import MiB


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--mib", type=float, nargs="+", default=[2, 45, 300])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--variants", type=int, default=64)
    a = ap.parse_args()
    ex = BatchedExecutor()
    vs = list(get_grid("default", [a.dtype]))
    random.Random(1).shuffle(vs)
    vs = vs[: a.variants]
    ex.prepare(vs)
    item = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1}[a.dtype]
    print("| MiB | way | rep | ms/cell | not ok | set | built | updated | instantiated | "
          "build ms/cell | launch ms/cell |")  # fmt: skip
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for mib in a.mib:
        n = int(mib * MiB) // (2 * item)
        ex.reference("hot", a.dtype, n)
        ratios: dict[bool, dict] = {True: {}, False: {}}
        for rep in range(a.reps):
            for way in (False, True) if rep % 2 == 0 else (True, False):
                ex.set_in_place = way
                ex.replay_graphs()
                ex.bench.clock.take()
                t0 = time.perf_counter()
                rows = list(ex.measure_many("hot", a.dtype, n, vs))
                dt = (time.perf_counter() - t0) / len(rows) * 1e3
                g = ex.replay_graphs()
                clocks = ex.bench.clock.take()
                bad = [r for r in rows if r.get("status") != "ok"]
                for r in rows:
                    if r.get("status") == "ok":
                        ratios[way].setdefault(r["config"], []).append(r["ratio"])
                build = clocks.get("hot/batch-build", 0) / len(rows) * 1e3
                launch = clocks.get("hot/batch-launch", 0) / len(rows) * 1e3
                print(f"| {mib:g} | {'set' if way else 'built'} | {rep} | {dt:.2f} | {len(bad)} | "
                      f"{g.get('batch_set', 0)} | {g.get('batch_built', 0)} | "
                      f"{g.get('batch_updated', 0)} | {g.get('batch_instantiated', 0)} | "
                      f"{build:.2f} | {launch:.2f} |")  # fmt: skip
                for r in bad[:3]:
                    print(f"    {r['config']}: {r.get('status')} {r.get('status_detail', '')}")
        common = set(ratios[True]) & set(ratios[False])
        diffs = [abs(statistics.median(ratios[True][c]) / statistics.median(ratios[False][c]) - 1)
                 for c in common]  # fmt: skip
        if diffs:
            within = sum(d <= 0.03 for d in diffs) / len(diffs)
            print(f"    {mib:g} MiB: {len(common)} configs ok both ways, median |set/built - 1| "
                  f"{statistics.median(diffs) * 100:.2f}%, {within * 100:.1f}% within 3%")  # fmt: skip
        ex.release(a.dtype, n)


if __name__ == "__main__":
    main()
