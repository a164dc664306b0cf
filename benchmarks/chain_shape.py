"""Does the shape or the history of a timed graph change what it measures? On a GPU: per call
time of the same `calls` launches as one flat capture, as the batched executor's doubling chain
of child graphs (sweeper.run.batched.chain), and as that chain written by cuGraphExecUpdate
into an instantiated chain of the previous launch (what an ExecPool hands out), for the
baseline and a few candidate configs, alternated.

    python benchmarks/chain_shape.py [--mib 45] [--calls 64] [--reps 41]
"""

from __future__ import annotations

import argparse
import statistics


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=float, default=45)
    ap.add_argument("--calls", type=int, default=64)
    ap.add_argument("--reps", type=int, default=41)
    ap.add_argument("--configs", type=int, default=6)
    a = ap.parse_args()
    from sweeper_kernels import GRIDS, get_launcher

    from sweeper.run.batched import BatchedExecutor, chain
    from sweeper.run.timers import capture, check, cuda_driver
    from sweeper.stats import Stopping

    ex = BatchedExecutor(stopping=Stopping())
    n = int(a.mib * 2**20) // 8
    ex.reference("hot", "fp32", n)
    b = ex.buffers("fp32", n)
    cu, s, h = cuda_driver(), ex.bench.stream, ex.bench.h
    grid = list(GRIDS["default"](["fp32"]))
    picks = grid[:: max(1, len(grid) // a.configs)][: a.configs]
    launches = [("torch", ex.baseline_launch("fp32", b, n, "A"))]
    launches += [(v.id, ex.candidate_launch(get_launcher(v), b, n, "A")) for v in picks]
    e0, e1 = ex.cuda.event(timing=True), ex.cuda.event(timing=True)
    print(f"fp32 {a.mib} MiB, {a.calls} calls per graph, {a.reps} alternated replays")
    print(f"{'launch':50s} {'flat us':>8s} {'chain/flat':>10s} {'updated/flat':>12s}")
    prev = None
    for name, launch in launches:
        launch(s)
        flat = capture(launch, a.calls, s, h)
        unit = capture(launch, 1, s, h)
        nested = chain(unit, a.calls)
        execs = {
            k: check(cu.cuGraphInstantiate(g, 0)) for k, g in (("flat", flat), ("chain", nested))
        }
        kinds = ["flat", "chain"]
        if prev is not None:  # the previous launch's chain, instantiated, then updated to this one
            up = check(cu.cuGraphInstantiate(prev, 0))
            if cu.cuGraphExecUpdate(up, nested)[0] == cu.CUresult.CUDA_SUCCESS:
                execs["updated"] = up
                kinds.append("updated")
            else:
                cu.cuGraphExecDestroy(up)
        got = {k: [] for k in kinds}
        for i in range(a.reps):
            for k in kinds if i % 2 == 0 else kinds[::-1]:
                check(cu.cuGraphLaunch(execs[k], h))  # warm
                e0.record(s)
                check(cu.cuGraphLaunch(execs[k], h))
                e1.record(s)
                e1.synchronize()
                got[k].append(ex.cuda.event_elapsed_time(e0, e1) * 1e3 / a.calls)
        med = {k: statistics.median(v) for k, v in got.items()}
        f = med["flat"]
        upd = f"{med['updated'] / f:12.4f}" if "updated" in med else f"{'-':>12s}"
        print(f"{name:50s} {f:8.3f} {med['chain'] / f:10.4f} {upd}")
        for x in execs.values():
            cu.cuGraphExecDestroy(x)
        for g in (flat, unit):
            cu.cuGraphDestroy(g)
        if prev is not None:
            cu.cuGraphDestroy(prev)
        prev = nested
    if prev is not None:
        cu.cuGraphDestroy(prev)


if __name__ == "__main__":
    main()
