"""The batched executor's cell graphs (sweeper.run.batched.CellGraph) without a GPU: a driver
of Python objects records what is built, instantiated and set, so the pool's reuse (set the
kernel; re-point the size's graphs only when the size changed; build anew where the driver
refuses) is checked on the CPU. The GPU tests time them (tests/gpu/test_batched_gpu.py)."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest

from sweeper.run import batched
from sweeper.run.batched import BatchedExecutor, CellGraphPool, cell_graph
from sweeper.run.timers import PhaseClock


class FakeDriver:
    class CUresult:
        CUDA_SUCCESS = 0

    def __init__(self):
        self.ids = itertools.count(1)
        self.graphs = {}  # graph -> [(node, kind, arg, deps)]
        self.execs = {}  # exec -> {node: arg}
        self.refuse_child = False
        self.destroyed = []
        self.stream = []  # what reached the stream, in order

    def cuGraphCreate(self, flags):
        g = next(self.ids)
        self.graphs[g] = []
        return 0, g

    def _add(self, kind, g, deps, n, arg):
        assert n == len(deps or ())
        node = next(self.ids)
        self.graphs[g].append((node, kind, arg, list(deps or ())))
        return 0, node

    def cuGraphAddKernelNode(self, g, deps, n, params):
        return self._add("kernel", g, deps, n, params)

    def cuGraphAddChildGraphNode(self, g, deps, n, child):
        return self._add("child", g, deps, n, child)

    def cuGraphAddEventRecordNode(self, g, deps, n, event):
        return self._add("event", g, deps, n, event)

    def cuGraphInstantiate(self, g, flags):
        ex = next(self.ids)
        self.execs[ex] = {node: arg for node, _, arg, _ in self.graphs[g]}
        return 0, ex

    def cuGraphExecKernelNodeSetParams(self, ex, node, params):
        self.execs[ex][node] = params
        return (0,)

    def cuGraphExecChildGraphNodeSetParams(self, ex, node, child):
        if self.refuse_child:
            return (1,)
        self.execs[ex][node] = child
        return (0,)

    def _issue(self, what, *args):
        self.stream.append((what, *args))
        return (0,)

    def cuGraphLaunch(self, ex, h):
        return self._issue("launch", ex)

    def cuGraphUpload(self, ex, h):
        return self._issue("upload", ex)

    def cuGraphExecEventRecordNodeSetEvent(self, ex, node, event):
        return self._issue("set-event", ex, node, event)

    def cuMemsetD32Async(self, ptr, value, words, h):
        return self._issue("memset", ptr, value, words)

    def cuMemcpyHtoDAsync(self, dst, src, nbytes, h):
        return self._issue("copy", dst, src, nbytes)

    def cuGraphExecDestroy(self, ex):
        self.destroyed.append(ex)

    def cuGraphDestroy(self, g):
        pass


@pytest.fixture
def cu(monkeypatch):
    d = FakeDriver()
    monkeypatch.setattr(batched, "cuda_driver", lambda: d)
    return d


def test_a_cell_graph_is_its_parts_in_one_line(cu):
    cg = cell_graph([("fixed", "normalize", "N"), ("call", 2), ("event",), ("call", 3),
                     ("event",)], "K", event="E")  # fmt: skip
    (g,) = cu.graphs.values()
    assert [kind for _, kind, _, _ in g] == ["child", *["kernel"] * 2, "event",
                                             *["kernel"] * 3, "event"]  # fmt: skip
    assert [deps for *_, deps in g] == [[], *[[g[i][0]] for i in range(len(g) - 1)]]
    assert cg.calls == [g[i][0] for i in (1, 2, 4, 5, 6)]
    assert cg.fixed == [(g[0][0], "normalize")] and cg.events == (g[3][0], g[7][0])
    assert cu.execs[cg.exec][g[3][0]] == "E"


def _executor():
    return SimpleNamespace(_cell_graphs=CellGraphPool(), _scratch=SimpleNamespace(handle=7),
                           bench=SimpleNamespace(clock=PhaseClock()))  # fmt: skip


def _cell():
    return SimpleNamespace(cgs={})


def _take(ex, cell, params, serials, graphs):
    parts = [("fixed", "normalize", graphs["normalize"]), ("call", 2)]
    BatchedExecutor._cell_graph(ex, cell, "slot-A", ("slot", 2), parts, graphs, serials, params)
    return cell.cgs["slot-A"][1]


def test_a_pooled_cell_graph_gets_the_next_cells_kernel_and_the_new_sizes_graphs(cu):
    ex = _executor()
    first = _cell()
    cg = _take(ex, first, "K1", (1, "size-1"), {"normalize": "N1"})
    ex._cell_graphs.give(*first.cgs["slot-A"])
    again = _take(ex, _cell(), "K2", (1, "size-1"), {"normalize": "N1"})
    assert again is cg and ex._cell_graphs.take_counts() == {"set": 1, "built": 1}
    assert set(ex.bench.clock.take()) == {"cell-graphs"}  # the host time it took, booked
    nodes = cu.execs[cg.exec]
    assert [nodes[n] for n in cg.calls] == ["K2", "K2"]
    ex._cell_graphs.give(("slot", 2), cg)
    _take(ex, _cell(), "K3", (2, "size-2"), {"normalize": "N2"})  # the size changed
    assert [nodes[n] for n, _ in cg.fixed] == ["N2"] and cg.holds == (2, "size-2")
    assert [nodes[n] for n in cg.calls] == ["K3", "K3"]


def test_a_cell_graph_the_driver_will_not_re_point_is_replaced_by_a_new_one(cu):
    ex = _executor()
    cell = _cell()
    cg = _take(ex, cell, "K1", (1, "size-1"), {"normalize": "N1"})
    ex._cell_graphs.give(*cell.cgs["slot-A"])
    cu.refuse_child = True
    new = _take(ex, _cell(), "K2", (2, "size-2"), {"normalize": "N2"})
    assert new is not cg and cu.destroyed == [cg.exec]
    assert ex._cell_graphs.take_counts() == {"set": 1, "built": 2}
    assert new.holds == (2, "size-2")
    assert [cu.execs[new.exec][n] for n in new.calls] == ["K2", "K2"]


def test_a_batch_reaches_the_stream_only_when_it_runs_and_in_the_order_built(cu):
    """A batch's counters are cleared and its tables copied as its first work, graphs and
    slots follow in the order built; nothing is issued while it is built (the stream's queue
    is finite, and the batch in flight fills it), and a second run repeats all of it."""
    q = batched.LaunchQueue()
    q.memset(0x1000, 64)
    q.copy(0x2000, 0x3000, 256)
    q.child(11)
    q.slot(12, (1, 2), SimpleNamespace(handle=21), SimpleNamespace(handle=22))
    q.child(11)
    assert cu.stream == [] and q.slots == 1
    q.upload(h=0)
    assert cu.stream == [("upload", 11), ("upload", 12)]  # each graph once, no copies
    cu.stream.clear()
    q.run(stream=None, h=0)
    first = list(cu.stream)
    assert first == [("memset", 0x1000, 0, 64), ("copy", 0x2000, 0x3000, 256), ("launch", 11),
                     ("set-event", 12, 1, 21), ("set-event", 12, 2, 22), ("launch", 12),
                     ("launch", 11)]  # fmt: skip
    cu.stream.clear()
    q.run(stream=None, h=0)
    assert cu.stream == first


def test_a_canary_launch_sets_one_call_to_the_canary_for_that_launch_only(cu):
    """The settle replay's canary: the slot graph's events set to the scratch event, one call
    node set to the canary's parameters, the launch, the node set back, all in queue order,
    so the timed launches queued after it run the cell's own parameters."""
    cu.cuGraphExecKernelNodeSetParams = lambda ex, node, params: cu._issue("set", ex, node, params)
    q = batched.LaunchQueue()
    q.canary(12, (1, 2), SimpleNamespace(handle=9), 5, "CANARY", "K")
    q.slot(12, (1, 2), SimpleNamespace(handle=21), SimpleNamespace(handle=22))
    assert cu.stream == [] and q.slots == 2
    q.upload(h=0)
    assert cu.stream == [("upload", 12)]
    cu.stream.clear()
    q.run(stream=None, h=0)
    assert cu.stream == [("set-event", 12, 1, 9), ("set-event", 12, 2, 9), ("set", 12, 5, "CANARY"),
                         ("launch", 12), ("set", 12, 5, "K"), ("set-event", 12, 1, 21),
                         ("set-event", 12, 2, 22), ("launch", 12)]  # fmt: skip


def device(address: int):
    """A stand-in device array at `address`."""
    return SimpleNamespace(__cuda_array_interface__={"data": (address, False)})


def _settle(cu, cell, seed=0, on="slot"):
    ex = SimpleNamespace(_canary_rng=np.random.default_rng(seed), _scratch=SimpleNamespace(handle=77),
                         _poison_graph=lambda b, key, side: f"poison-{side}", canary=True,
                         canary_graph=on,
                         _check_graph=lambda b, key, side: f"check-{side}")  # fmt: skip
    ex._counter = lambda batch, cell, what: BatchedExecutor._counter(ex, batch, cell, what)
    batch = batched._Batch(0, 0, batched.LaunchQueue())
    hf = SimpleNamespace(sa="B", sb="A")
    out = BatchedExecutor._settle(ex, batch, cell, hf, None, ("fp32", 1), ("SLOT", (1, 2)))
    return batch, out


def test_a_settle_replay_runs_a_canary_into_its_poisoned_output_where_it_can(cu):
    """canary_graph "slot": one call of the settle replay itself, past its first, writes the
    canary's poisoned output; nothing runs after the replay (the segment counts the output
    after its rounds)."""
    cg = cell_graph([("call", 3), ("event",), ("call", 5), ("event",)], "K", event="E")
    cell = batched._Cell(row={}, cgs={"slot-B": (("slot",), cg)}, params={"B": "K"},
                         canary={"B": "CANARY"})  # fmt: skip
    nodes = set()
    for seed in range(40):
        batch, canaried = _settle(cu, cell, seed)
        poison, (kind, (ex, n0, n1, e, node, canary, params)) = batch.graph.ops
        assert canaried and poison == ("graph", "poison-C") and batch.counters == []
        assert (kind, ex, (n0, n1), e) == ("canary", cg.exec, cg.events, 77)
        assert (canary, params) == ("CANARY", "K")
        nodes.add(node)
    assert nodes == set(cg.calls[1:])  # every call but the first (after a gap) can be it
    assert cell.canaries == 40
    # a slot that is not a CellGraph (a launcher of several launches): the settle alone
    plain = batched._Cell(row={}, params={"B": "K"})
    batch, canaried = _settle(cu, plain)
    assert batch.graph.ops == [("slot", ("SLOT", 1, 2, 77, 77))] and plain.canaries == 0
    assert not canaried


def test_a_canary_on_its_own_graph_runs_before_the_settle_replay_and_leaves_the_slot_be(cu):
    """canary_graph "own": the canary's node is set on the cell's canary graph, launched
    before the plain settle replay; the timed slot's graph is never set."""
    slot = cell_graph([("call", 2), ("event",), ("call", 3), ("event",)], "K", event="E")
    own = cell_graph([("call", batched.CANARY_CALLS)], "K")
    cell = batched._Cell(row={}, cgs={"slot-B": (("slot",), slot), "canary-B": (("canary",), own)},
                         params={"B": "K"}, canary={"B": "CANARY"})  # fmt: skip
    nodes = set()
    for seed in range(60):
        batch, canaried = _settle(cu, cell, seed, on="own")
        poison, (kind, (ex, e, node, canary, params)), settle = batch.graph.ops
        assert poison == ("graph", "poison-C") and canaried
        assert (kind, ex, e, canary, params) == ("canary", own.exec, 77, "CANARY", "K")
        assert settle == ("slot", ("SLOT", 1, 2, 77, 77))
        nodes.add(node)
    assert nodes == set(own.calls[1:])
    batch.graph.run(stream=None, h=0)
    launched = [op[1] for op in cu.stream if op[0] == "launch"]
    assert launched == ["poison-C", own.exec, "SLOT"]


def test_a_segment_counts_the_canarys_own_output_after_its_rounds(cu):
    """The segment: the canary's output poisoned, the canary's replay, the settle replay, a's
    output poisoned, the rounds, a's output counted, then the canary's output counted: nothing
    between the settle replay and the first timed slot but the poison that runs there without
    a canary."""
    cg = cell_graph([("call", 2), ("event",), ("call", 3), ("event",)], "K", event="E")
    own = cell_graph([("call", batched.CANARY_CALLS)], "K")
    cell = batched._Cell(row={}, cgs={"slot-A": (("slot",), cg), "canary-A": (("canary",), own)},
                         params={"A": "K"}, canary={"A": "CANARY"})  # fmt: skip
    ex = SimpleNamespace(_canary_rng=np.random.default_rng(0), _scratch=SimpleNamespace(handle=77),
                         _poison_graph=lambda b, key, side: f"poison-{side}", canary=True,
                         canary_graph="own",
                         _check_graph=lambda b, key, side, parity: f"check-{side}-{parity}",
                         _check_sum=device(5000), _counters=[device(1000), device(3000)],
                         _slot=lambda cell, side, calls: ("SLOT-A", (1, 2)),
                         _base_slot=lambda b, key, side, calls, warm: ("SLOT-B", (3, 4)))  # fmt: skip
    ex._counter = lambda batch, cell, what: BatchedExecutor._counter(ex, batch, cell, what)
    ex._queue_check = lambda *a: BatchedExecutor._queue_check(ex, *a)
    ex._settle = lambda *a: BatchedExecutor._settle(ex, *a)
    events = iter(range(100))
    ex._slot_events = lambda batch: (
        next(events),
        SimpleNamespace(handle=1),
        SimpleNamespace(handle=2),
    )
    batch = batched._Batch(0, 0, batched.LaunchQueue())
    hf = SimpleNamespace(sa="A", sb="B", first="A")
    BatchedExecutor._segment(ex, batch, cell, hf, 0, None, ("fp32", 1), 3, 2, 1)
    kinds = [op if kind == "graph" else kind for kind, op in batch.graph.ops]
    assert kinds == ["poison-C", "canary", "slot", "poison-A", "slot", "slot", "slot", "slot",
                     "check-A-0", "check-C-0"]  # fmt: skip
    assert batch.graph.ops[1][1][0] == own.exec and batch.graph.ops[2][1][0] == "SLOT-A"
    assert batch.counters == [(cell, "h0", 0), (cell, "canary", 1)]
    # one launch per check, its counter taken in the order the checks are queued


def test_a_canary_the_driver_refuses_leaves_the_cell_without_one_and_its_calls_as_they_were(cu):
    cg = cell_graph([("call", 2)], "K")
    assert batched.canary_fits(cg, "CANARY", "K")
    assert [cu.execs[cg.exec][n] for n in cg.calls] == ["K", "K"]  # set back
    cu.cuGraphExecKernelNodeSetParams = lambda ex, node, params: (1,)  # another function
    assert not batched.canary_fits(cg, "CANARY", "K")
    assert [cu.execs[cg.exec][n] for n in cg.calls] == ["K", "K"]
