"""Host time per cell at the H200 (hot, fp32): cProfile over 24 default-grid cells at each
working set, then the cost of one Numba launch and of a 64-call graph built by capture and by
chaining two-call units, with each replay's time per call. Run from the repository root:

    python3 lab/tools/cell_profile.py tottime 8 45 457     # profile-a.txt
    python3 lab/tools/cell_profile.py cumulative 45        # profile-b.txt
"""

import cProfile
import io
import pstats
import random
import sys
import time

import numpy as np
from sweeper_kernels import get_grid, get_launcher

from sweeper.run.executor import GpuExecutor
from sweeper.run.timers import Graph, check, cuda_driver


def main():
    sort, sizes = sys.argv[1], [int(x) for x in sys.argv[2:]]
    ex = GpuExecutor()
    vs = list(get_grid("default", ["fp32"]))
    random.Random(1).shuffle(vs)
    vs = vs[:24]
    ex.prepare(vs)
    from sweeper.units import MiB

    for ws in (s * MiB for s in sizes):
        n = ws // 8
        ex.reference("hot", "fp32", n)
        t0 = time.perf_counter()
        pr = cProfile.Profile()
        pr.enable()
        rows = [ex.measure("hot", "fp32", n, v) for v in vs]
        pr.disable()
        dt = time.perf_counter() - t0
        gpu = sum(2 * r["n_samples"] * (r["time_us"] + r["base_time_us"]) for r in rows) / 1e6
        print(
            f"ws {ws / MiB:.0f} MiB: {dt / len(vs) * 1e3:.1f} ms/cell, timed-GPU approx "
            f"{gpu / len(vs) * 1e3:.2f} ms/cell, samples "
            f"{np.mean([r['n_samples'] for r in rows]):.1f}"
        )
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats(sort).print_stats(40 if sort == "cumulative" else 14)
        print(s.getvalue()[:7000])
        ex.release("fp32", n)
    cu = cuda_driver()
    n = 45 * MiB // 8
    b = ex.buffers("fp32", n)
    launcher = get_launcher(vs[0])
    x, y, _ = b.side("A")

    def launch(s):
        launcher(x, y, n, s)

    t0 = time.perf_counter()
    g = Graph(launch, 64, ex.bench.stream)
    print(f"capture 64 calls: {(time.perf_counter() - t0) * 1e3:.2f} ms")
    t0 = time.perf_counter()
    for _ in range(200):
        launch(ex.bench.stream)
    ex.bench.sync()
    print(f"numba launch: {(time.perf_counter() - t0) / 200 * 1e6:.1f} us/call")
    g1 = Graph(launch, 1, ex.bench.stream)
    t0 = time.perf_counter()
    G = check(cu.cuGraphCreate(0))
    prev = None
    for _ in range(64):
        prev = check(
            cu.cuGraphAddChildGraphNode(G, [prev] if prev else None, 1 if prev else 0, g1.graph)
        )
    E = check(cu.cuGraphInstantiate(G, 0))
    print(f"child chain 64: {(time.perf_counter() - t0) * 1e3:.2f} ms")
    ev0, ev1 = ex.bench.event(0), ex.bench.event(1)
    for name, run in (("captured", g.launch), ("chain", lambda: check(cu.cuGraphLaunch(E, g.h)))):
        ts = []
        for _ in range(20):
            run()
            ev0.record(ex.bench.stream)
            run()
            ev1.record(ex.bench.stream)
            ev1.synchronize()
            ts.append(ex.cuda.event_elapsed_time(ev0, ev1) * 1e3 / 64)
        print(name, f"{np.median(ts):.3f} us/call")


if __name__ == "__main__":
    main()
