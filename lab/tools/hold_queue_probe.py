"""How many graph launches fit behind one hold of a stream, by the graph's shape, on a GPU:

    python lab/tools/hold_queue_probe.py

For chains of 1, 8, 26 and 100 kernels (fp32 ReLU over 4 MiB) and slot graphs (two warm-up
calls, an event record, 1, 24 or 100 timed calls, an event record: sweeper.run.batched
.slot_graph, its events set before each launch), K launches of one instantiated graph are
queued behind a blocking kernel that times out after 2 s, for K from 100 to 1000; it prints
the largest K that was queued without the blocker timing out. The batched executor bounds a
batch by its slot launches (SLOTS_PER_HOLD) from this.

The same for operations that are not graphs: an 8-byte device-to-device copy
(cuMemcpyDtoDAsync) and a 2-word memset (cuMemsetD32Async). Then mixes: K chain1 launches
after 200 slot1 launches; K pairs of a chain1 launch and a copy, alone and after them.
"""

from __future__ import annotations

from numba import cuda
from slot_graph_probe import relu_unit  # this folder: run as a script

from sweeper.run.batched import add_chain, chain, slot_graph
from sweeper.run.timers import Bench, check, cuda_driver

COUNTS = (100, 150, 200, 250, 300, 350, 400, 600, 1000)
MIX_COUNTS = (0, 50, 100, 200, 300, 400, 600, 800)


def main() -> None:
    cu = cuda_driver()
    bench = Bench(block_timeout_s=2.0)
    s, h = bench.stream, bench.h
    unit, _buffers = relu_unit(1 << 20, bench)
    ev = [cuda.event(timing=True) for _ in range(2)]
    shapes = {}
    for k in (1, 8, 26, 100):
        shapes[f"chain{k}"] = (check(cu.cuGraphInstantiate(chain(unit, k), 0)), None)
    for k in (1, 24, 100):
        g, nodes = slot_graph(
            lambda g, p: add_chain(g, p, unit, 2),
            lambda g, p, k=k: add_chain(g, p, unit, k),
            int(ev[0].handle),
        )
        shapes[f"slot{k}"] = (check(cu.cuGraphInstantiate(g, 0)), nodes)
    words = cuda.device_array(2, "u8")
    src, dst = words[0:1], words[1:2]
    a, b = int(src.device_ctypes_pointer.value), int(dst.device_ctypes_pointer.value)
    ops = {
        "copy-d2d": lambda: check(cu.cuMemcpyDtoDAsync(b, a, 8, h)),
        "memset": lambda: check(cu.cuMemsetD32Async(b, 0, 2, h)),
    }
    for name, (ex, nodes) in shapes.items():
        ops[name] = lambda ex=ex, nodes=nodes: launch(cu, ex, nodes, ev, h)
    slot, chain1 = ops["slot1"], ops["chain1"]
    ops["200 slot1 + chain1"] = Mix(slot, chain1, 200)
    copy = ops["copy-d2d"]
    pair = lambda: (chain1(), copy())  # noqa: E731
    ops["chain1 and copy-d2d, alternating"] = pair
    ops["200 slot1 + (chain1 and copy-d2d)"] = Mix(slot, pair, 200)
    for name, op in ops.items():
        ok = 0
        for count in MIX_COUNTS if isinstance(op, Mix) else COUNTS:
            bench.hold(0)
            if isinstance(op, Mix):
                op.start()
            for _ in range(count):
                op()
            bench.release_flag(0)
            s.synchronize()
            if int(bench.timed_out.copy_to_host()[0]):
                bench.timed_out[0] = 0
                print(f"{name}: ok up to {ok} launches, blocked at {count}", flush=True)
                break
            ok = count
        else:
            print(f"{name}: ok up to {ok} launches", flush=True)


class Mix:
    """Called K times in a hold: `first` `head` times, then `then` for every call after."""

    def __init__(self, first, then, head: int) -> None:
        self.first, self.then, self.head = first, then, head

    def start(self) -> None:
        for _ in range(self.head):
            self.first()

    def __call__(self) -> None:
        self.then()


def launch(cu, ex, nodes, ev, h) -> None:
    if nodes:
        check(cu.cuGraphExecEventRecordNodeSetEvent(ex, nodes[0], int(ev[0].handle)))
        check(cu.cuGraphExecEventRecordNodeSetEvent(ex, nodes[1], int(ev[1].handle)))
    check(cu.cuGraphLaunch(ex, h))


if __name__ == "__main__":
    main()
