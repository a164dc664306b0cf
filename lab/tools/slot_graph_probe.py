"""Slot graphs on a GPU: what one launch per timed slot costs and what it times.

    python lab/tools/slot_graph_probe.py

A slot graph is [warm-up calls, event record, timed calls, event record]
(sweeper.run.batched.slot_graph) on an fp32 ReLU over 24 MiB, 20 timed calls. It prints:

- per trial, 40 slots queued behind one hold, the slot graph with its two events set per launch
  (cuGraphExecEventRecordNodeSetEvent) against the same work as separate launches (warm-up
  graph, cuEventRecord, timed graph, cuEventRecord): the time per call each reads, and the
  host time per slot to queue it;
- after cuGraphExecUpdate of the instantiated slot graph from a second graph of the same shape,
  which graph's record nodes SetEvent takes (CUDA names a node by the graph the instantiation
  was made from);
- how many slot launches fit behind one hold before the host blocks (a blocking kernel that
  times out after 3 s).
"""

from __future__ import annotations

import time

import numpy as np
from numba import cuda

from sweeper.run.batched import chain
from sweeper.run.timers import Bench, capture, check, cuda_driver

CALLS, K = 20, 40


def relu_unit(n: int, bench: Bench):
    """A one-call graph of an fp32 ReLU over `n` random words on `bench`'s stream, the kernel
    run once first; returns (graph, its buffers: keep them alive while it is launched)."""
    x = cuda.to_device(np.random.rand(n).astype(np.float32))
    y = cuda.device_array_like(x)

    @cuda.jit
    def relu(x, y):
        i = cuda.grid(1)
        if i < x.size:
            v = x[i]
            y[i] = v if v > 0 else 0

    def launch(st):
        relu[(n + 255) // 256, 256, st](x, y)

    launch(bench.stream)
    bench.stream.synchronize()
    return capture(launch, 1, bench.stream, bench.h), (x, y)


def main() -> None:
    cu = cuda_driver()
    bench = Bench()
    s, h = bench.stream, bench.h
    unit, _buffers = relu_unit((24 << 20) // 4, bench)
    timed, warm = chain(unit, CALLS), chain(unit, 4)
    evs = [cuda.event(timing=True) for _ in range(2 * K + 2)]

    def slot(graph_events):
        g = check(cu.cuGraphCreate(0))
        n_w = check(cu.cuGraphAddChildGraphNode(g, None, 0, warm))
        n0 = check(cu.cuGraphAddEventRecordNode(g, [n_w], 1, graph_events))
        n_t = check(cu.cuGraphAddChildGraphNode(g, [n0], 1, timed))
        n1 = check(cu.cuGraphAddEventRecordNode(g, [n_t], 1, graph_events))
        return g, n0, n1

    g, n0, n1 = slot(int(evs[-2].handle))
    t = time.perf_counter()
    ex = check(cu.cuGraphInstantiate(g, 0))
    t_inst = time.perf_counter() - t
    tw, tt = check(cu.cuGraphInstantiate(warm, 0)), check(cu.cuGraphInstantiate(timed, 0))

    def per_call(k):
        return cuda.event_elapsed_time(evs[2 * k], evs[2 * k + 1]) * 1e3 / CALLS

    for trial in range(3):
        bench.hold(0)
        t = time.perf_counter()
        for k in range(K):
            check(cu.cuGraphExecEventRecordNodeSetEvent(ex, n0, int(evs[2 * k].handle)))
            check(cu.cuGraphExecEventRecordNodeSetEvent(ex, n1, int(evs[2 * k + 1].handle)))
            check(cu.cuGraphLaunch(ex, h))
        t_fused = (time.perf_counter() - t) / K
        bench.release_flag(0)
        s.synchronize()
        fused = [per_call(k) for k in range(K)]
        bench.hold(0)
        t = time.perf_counter()
        for k in range(K):
            check(cu.cuGraphLaunch(tw, h))
            check(cu.cuEventRecord(int(evs[2 * k].handle), h))
            check(cu.cuGraphLaunch(tt, h))
            check(cu.cuEventRecord(int(evs[2 * k + 1].handle), h))
        t_sep = (time.perf_counter() - t) / K
        bench.release_flag(0)
        s.synchronize()
        sep = [per_call(k) for k in range(K)]
        print(
            f"trial {trial}: fused median {np.median(fused):.3f} us/call (min {min(fused):.3f} "
            f"max {max(fused):.3f}), separate {np.median(sep):.3f} (min {min(sep):.3f} max "
            f"{max(sep):.3f}); host per slot fused {t_fused * 1e6:.1f} us, separate "
            f"{t_sep * 1e6:.1f} us; distinct fused values {len(set(fused))}"
        )
    print(f"slot instantiate {t_inst * 1e6:.0f} us; timed out flag "
          f"{int(bench.timed_out.copy_to_host()[0])}")  # fmt: skip
    g2, m0, m1 = slot(int(evs[-2].handle))
    t = time.perf_counter()
    r = cu.cuGraphExecUpdate(ex, g2)
    print("update:", r[0], f"{(time.perf_counter() - t) * 1e6:.0f} us")
    for label, (a0, a1) in {"new graph's nodes": (m0, m1), "old graph's nodes": (n0, n1)}.items():
        r0 = cu.cuGraphExecEventRecordNodeSetEvent(ex, a0, int(evs[0].handle))
        r1 = cu.cuGraphExecEventRecordNodeSetEvent(ex, a1, int(evs[1].handle))
        check(cu.cuGraphLaunch(ex, h))
        s.synchronize()
        print(label, r0[0], r1[0], f"{per_call(0):.3f} us/call")
    b3 = Bench(block_timeout_s=3.0)
    s3, h3 = b3.stream, b3.h
    ex3 = check(cu.cuGraphInstantiate(g, 0))
    for k3 in (100, 200, 400, 800, 1600):
        b3.hold(0)
        t = time.perf_counter()
        for _ in range(k3):
            check(cu.cuGraphExecEventRecordNodeSetEvent(ex3, n0, int(evs[0].handle)))
            check(cu.cuGraphExecEventRecordNodeSetEvent(ex3, n1, int(evs[1].handle)))
            check(cu.cuGraphLaunch(ex3, h3))
        dt = time.perf_counter() - t
        b3.release_flag(0)
        s3.synchronize()
        to = int(b3.timed_out.copy_to_host()[0])
        print(f"K={k3}: queued in {dt * 1e3:.1f} ms, blocker timed out {to}")
        if to:
            break


if __name__ == "__main__":
    main()
