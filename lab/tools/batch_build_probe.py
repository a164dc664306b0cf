"""Where the batched executor's host time per cell goes, and what a cell's graphs cost built
three ways (H200, hot, fp32). Run from the repository root:

    python3 lab/tools/batch_build_probe.py

Part 1: BatchedExecutor.measure_many over 64 default-grid variants at 2, 45 and 300 MiB, with
the host time inside each of its steps accumulated per cell (inclusive: a step inside another
counts in both), then cProfile at 45 MiB (tottime).

Part 2: one cell's slot graph [warm-up call, event record, `calls` calls, event record] made
ready to launch for a new variant, at 16 and 128 calls, per cell:
  chain        what the executor does: capture the one-call unit, build the slot graph from it
               by doubling (child-graph nodes, each a copy), update a pooled instantiation;
  child-set    capture the unit, then point each call's child-graph node of one instantiated
               slot graph at it (cuGraphExecChildGraphNodeSetParams per call);
  kernel-set   capture the unit, read its kernel node's parameters, set them on each call's
               kernel node of one instantiated slot graph (cuGraphExecKernelNodeSetParams);
  capture      the unit's capture alone (a Numba launch under stream capture).
Each instantiation is uploaded after it is set (cuGraphUpload), as a batch does. The last
variant's graph is then launched on poisoned outputs and its output compared with the
reference: a set that did not reach the instantiated graph shows as a mismatch.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import random
import time
from collections import defaultdict

import numpy as np
from numba import cuda
from sweeper_kernels import get_grid, get_launcher, reference_relu

from sweeper.run import batched as B
from sweeper.run import timers as T
from sweeper.units import MiB

STEPS = [
    (B, "capture"), (B, "slot_graph"), (B, "add_chain"), (B, "chain"),
    (B.BatchedExecutor, "_new_cell"), (B.BatchedExecutor, "_fresh_units"),
    (B.BatchedExecutor, "_exec"), (B.BatchedExecutor, "_segment"),
    (B.BatchedExecutor, "_finish"), (B.BatchedExecutor, "_row"),
    (B.BatchedExecutor, "_launch"), (B.BatchedExecutor, "_build"),
    (B.BatchedExecutor, "candidate_launch"), (B.LaunchQueue, "upload"), (B.LaunchQueue, "run"),
    (T.ExecPool, "take"), (T.Bench, "persisting_state"), (T.Bench, "reset_persisting"),
]  # fmt: skip


def wrap_steps(acc: dict) -> None:
    for owner, name in STEPS:
        f = getattr(owner, name)

        def timed(*a, _f=f, _name=name, **k):
            t0 = time.perf_counter()
            try:
                return _f(*a, **k)
            finally:
                acc[_name] += time.perf_counter() - t0

        setattr(owner, name, timed)


def part1() -> None:
    acc: dict = defaultdict(float)
    wrap_steps(acc)
    ex = B.BatchedExecutor()
    vs = list(get_grid("default", ["fp32"]))
    random.Random(1).shuffle(vs)
    vs = vs[:64]
    ex.prepare(vs)
    for size in (2, 45, 300):
        n = size * MiB // 8
        ex.reference("hot", "fp32", n)
        acc.clear()
        ex.bench.clock.take()
        prof = cProfile.Profile() if size == 45 else None
        t0 = time.perf_counter()
        if prof:
            prof.enable()
        rows = list(ex.measure_many("hot", "fp32", n, vs))
        if prof:
            prof.disable()
        dt = time.perf_counter() - t0
        ok = sum(r.get("status") == "ok" for r in rows)
        gpu = sum(2 * r.get("n_samples", 0) * (r.get("time_us", 0) + r.get("base_time_us", 0))
                  for r in rows) * ex.hot_calls("fp32", n) / 1e3  # fmt: skip
        print(f"\n## {size} MiB: {len(rows)} cells ({ok} ok), calls {ex.hot_calls('fp32', n)}, "
              f"{dt / len(rows) * 1e3:.2f} ms/cell wall{' (profiled)' if prof else ''}, timed GPU "
              f"~{gpu / len(rows):.2f} ms/cell")  # fmt: skip
        for name, t in sorted(acc.items(), key=lambda kv: -kv[1]):
            print(f"  {name:20s} {t / len(rows) * 1e3:8.3f} ms/cell")
        print("  clocks:", {k: round(v / len(rows) * 1e3, 3)
                            for k, v in ex.bench.clock.take().items()})  # fmt: skip
        if prof:
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(30)
            print(s.getvalue()[:9000])
        ex.release("fp32", n)


def part2() -> None:
    cu = T.cuda_driver()
    bench = T.Bench()
    s, h = bench.stream, bench.h
    n = 45 * MiB // 8
    rng = np.random.default_rng(0)
    xh = rng.standard_normal(n).astype(np.float32)
    x = cuda.to_device(xh)
    ys = [cuda.device_array(n, np.float32) for _ in range(2)]  # variant k writes ys[k % 2]
    want = reference_relu(xh, "fp32")
    vs = list(get_grid("default", ["fp32"]))
    random.Random(2).shuffle(vs)
    launches = []
    for k, v in enumerate(vs[:8]):
        lau = get_launcher(v)
        launches.append(lambda st, lau=lau, y=ys[k % 2]: lau(x, y, n, st))
        launches[-1](s)
    s.synchronize()
    ev = cuda.event(timing=True)
    evh = int(ev.handle)

    def nodes_of(g):
        count = T.check(cu.cuGraphGetNodes(g, 0))[1]
        return list(T.check(cu.cuGraphGetNodes(g, count))[0])

    def verify(ex, k: int) -> str:
        """Launch `ex` on poisoned outputs: variant k's output must be exact, the other
        output untouched (a set that did not reach `ex` leaves the template's variant 0)."""
        for y in ys:
            T.check(cu.cuMemsetD32Async(y.device_ctypes_pointer.value, 0xFFFFFFFF, n, h))
        T.check(cu.cuGraphLaunch(ex, h))
        s.synchronize()
        out, other = ys[k % 2].copy_to_host(), ys[1 - k % 2].copy_to_host()
        ok = np.array_equal(out, want) and np.all(other.view(np.uint32) == 0xFFFFFFFF)
        return "exact" if ok else "MISMATCH"

    def strategies(calls, results):
        # chain: the executor's way
        pool = T.ExecPool()
        t0 = time.perf_counter()
        held = []
        for i in range(64):
            unit = T.capture(launches[i % 8], 1, s, h)
            g, nodes = B.slot_graph(lambda g, p, u=unit: B.add_chain(g, p, u, 1),
                                    lambda g, p, u=unit: B.add_chain(g, p, u, calls), evh)  # fmt: skip
            ex, _, owned = pool.take_addressed(("slot", calls), g, nodes)
            T.check(cu.cuGraphUpload(ex, h))
            pool.give(("slot", calls), ex)
            held.append((unit, None if owned else g))
        results["chain"] = (time.perf_counter() - t0) / 64, verify(ex, 63 % 8)
        for unit, g in held:
            cu.cuGraphDestroy(unit)
            if g is not None:
                cu.cuGraphDestroy(g)
        # child-set: one instantiated slot graph of child-graph nodes, each pointed at the unit
        unit0 = T.capture(launches[0], 1, s, h)
        g = T.check(cu.cuGraphCreate(0))
        prev = T.check(cu.cuGraphAddChildGraphNode(g, None, 0, unit0))
        children = [prev]
        prev = T.check(cu.cuGraphAddEventRecordNode(g, [prev], 1, evh))
        for _ in range(calls):
            prev = T.check(cu.cuGraphAddChildGraphNode(g, [prev], 1, unit0))
            children.append(prev)
        T.check(cu.cuGraphAddEventRecordNode(g, [prev], 1, evh))
        ex = T.check(cu.cuGraphInstantiate(g, 0))
        t0 = time.perf_counter()
        units = []
        for i in range(64):
            unit = T.capture(launches[(i + 2) % 8], 1, s, h)
            for node in children:
                T.check(cu.cuGraphExecChildGraphNodeSetParams(ex, node, unit))
            T.check(cu.cuGraphUpload(ex, h))
            units.append(unit)
        results["child-set"] = (time.perf_counter() - t0) / 64, verify(ex, 65 % 8)
        for u in units:
            cu.cuGraphDestroy(u)
        # kernel-set: the same of kernel nodes, set from the unit's kernel node parameters
        flat = T.capture(launches[0], calls + 1, s, h)
        knodes = nodes_of(flat)
        exk = T.check(cu.cuGraphInstantiate(flat, 0))
        t0 = time.perf_counter()
        units = []
        for i in range(64):
            unit = T.capture(launches[(i + 2) % 8], 1, s, h)
            (node,) = nodes_of(unit)
            p = T.check(cu.cuGraphKernelNodeGetParams(node))
            for kn in knodes:
                T.check(cu.cuGraphExecKernelNodeSetParams(exk, kn, p))
            T.check(cu.cuGraphUpload(exk, h))
            units.append(unit)
        results["kernel-set"] = (time.perf_counter() - t0) / 64, verify(exk, 65 % 8)
        for u in units:
            cu.cuGraphDestroy(u)
        t0 = time.perf_counter()
        for i in range(64):
            cu.cuGraphDestroy(T.capture(launches[i % 8], 1, s, h))
        results["capture"] = (time.perf_counter() - t0) / 64, "-"

    for calls in (16, 128):
        results = {}
        try:
            strategies(calls, results)
        except Exception as e:  # noqa: BLE001 - a probe reports what failed and goes on
            results["failed"] = (0.0, f"{type(e).__name__}: {e}")
        print(f"\n## slot graph of {calls} calls (+1 warm-up), per new variant")
        for name, (t, ok) in results.items():
            print(f"  {name:12s} {t * 1e6:9.1f} us   {ok}")


if __name__ == "__main__":
    part2()
    part1()
