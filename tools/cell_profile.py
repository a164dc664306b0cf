#!/usr/bin/env python3
"""Where a cell's host time goes, on a GPU machine.

    python tools/cell_profile.py [--dtype fp32] [--mib 45] [--cells 24] [--top 25]

Times `--cells` default-grid configs (a seeded sample) against the baseline at one working set
in hot mode under cProfile, and prints the wall time per cell, the GPU time its samples cover,
the functions with the most cumulative time, then the host cost of one Numba launch and of
building a 64-call graph by capture and by chaining (timers.Graph), with each replay's time per
call.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--mib", type=float, default=45.0, help="working set, MiB")
    ap.add_argument("--cells", type=int, default=24)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)

    import numpy as np
    from sweeper_kernels import get_launcher, itemsize
    from sweeper_kernels.variants import default_grid, sample

    from sweeper.run.executor import GpuExecutor
    from sweeper.run.timers import CAPTURE_CALLS, Graph, _capture

    ex = GpuExecutor()
    variants = sample(default_grid([args.dtype]), args.cells, seed=1)
    ex.prepare(variants)
    n = int(args.mib * 2**20) // (2 * itemsize(args.dtype)) // 16 * 16
    ex.reference("hot", args.dtype, n)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    rows = [ex.measure("hot", args.dtype, n, v) for v in variants]
    prof.disable()
    wall = (time.perf_counter() - t0) / len(rows)
    gpu = np.mean([2 * r["n_samples"] * (r["time_us"] + r["base_time_us"]) for r in rows]) / 1e3
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(args.top)
    print(out.getvalue())
    print(f"{args.dtype} at {args.mib:g} MiB: {wall * 1e3:.1f} ms per cell (under cProfile), "
          f"timed GPU work about {gpu:.2f} ms per cell")  # fmt: skip

    b = ex._bufs(args.dtype, n)
    launcher = get_launcher(variants[0])
    x, y, _ = b.side("A")

    def launch(s):
        launcher(x, y, n, s)

    stream = ex.bench.stream
    t0 = time.perf_counter()
    for _ in range(200):
        launch(stream)
    ex.bench.sync()
    print(f"Numba launch: {(time.perf_counter() - t0) / 200 * 1e6:.1f} us of host time per call")
    from sweeper.run.timers import _cu, check

    cu = _cu()
    t0 = time.perf_counter()
    captured = _capture(launch, 64, stream, ex.bench.h)
    exec_ = check(cu.cuGraphInstantiate(captured, 0))
    t_capture = time.perf_counter() - t0
    t0 = time.perf_counter()
    chained = Graph(launch, 64, stream)  # 64 > CAPTURE_CALLS: chained from a two-call unit
    t_chain = time.perf_counter() - t0
    assert CAPTURE_CALLS < 64
    ev0, ev1 = ex.bench._event(0), ex.bench._event(1)
    for name, run, secs in (
        ("captured", lambda: check(cu.cuGraphLaunch(exec_, ex.bench.h)), t_capture),
        ("chained", chained.launch, t_chain),
    ):
        per = []
        for _ in range(20):
            run()
            ev0.record(stream)
            run()
            ev1.record(stream)
            ev1.synchronize()
            per.append(ex.cuda.event_elapsed_time(ev0, ev1) * 1e3 / 64)
        print(f"64-call graph {name}: built in {secs * 1e3:.2f} ms, "
              f"replay {np.median(per):.3f} us per call")  # fmt: skip
    cu.cuGraphExecDestroy(exec_)
    cu.cuGraphDestroy(captured)
    chained.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
