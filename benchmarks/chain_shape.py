"""Does the shape of a timed graph change what it measures? On a GPU: per call time of the same
`calls` launches as one flat capture and as the batched executor's doubling chain of child
graphs (sweeper.run.batched.chain), for a few candidate configs and the baseline, alternated.

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
    print(f"{'launch':40s} {'flat us':>9s} {'chain us':>9s} {'chain/flat':>10s}")
    for name, launch in launches:
        launch(s)
        flat = capture(launch, a.calls, s, h)
        unit = capture(launch, 1, s, h)
        nested = chain(unit, a.calls)
        execs = {
            k: check(cu.cuGraphInstantiate(g, 0)) for k, g in (("flat", flat), ("chain", nested))
        }
        got = {"flat": [], "chain": []}
        for i in range(a.reps):
            for k in ("flat", "chain") if i % 2 == 0 else ("chain", "flat"):
                check(cu.cuGraphLaunch(execs[k], h))  # warm
                e0.record(s)
                check(cu.cuGraphLaunch(execs[k], h))
                e1.record(s)
                e1.synchronize()
                got[k].append(ex.cuda.event_elapsed_time(e0, e1) * 1e3 / a.calls)
        f, c = statistics.median(got["flat"]), statistics.median(got["chain"])
        print(f"{name:40s} {f:9.3f} {c:9.3f} {c / f:10.4f}")
        for x in execs.values():
            cu.cuGraphExecDestroy(x)
        for g in (flat, unit, nested):
            cu.cuGraphDestroy(g)


if __name__ == "__main__":
    main()
