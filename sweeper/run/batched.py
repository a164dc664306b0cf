"""The batched executor: the hot cells of one size, many variants, timed BATCH_CELLS to a batch.

GpuExecutor (sweeper.run.executor) times one cell at a time and waits for the GPU about 25
times per cell: after every ABBA round, after every output check, around the fresh-input
replay. BatchedExecutor measures the same cells with the same guards, queued so that the host
waits for the GPU once per batch and prepares the next batch while one runs.

Each cell's pieces are CUDA graphs. Where the cell's launcher makes one kernel launch they are
CellGraphs: pooled instantiated graphs whose calls are kernel nodes set to the cell's kernel
(its parameters read from a one-call capture), nothing built or instantiated per cell. Else
they are chained from the cell's captures and instantiated from a pool (an instantiated graph
of the same shape is updated, not rebuilt). On each buffer set the slot
graph [L2 normalizer, warm-up calls, event record, `calls` calls, event record] (slot_graph;
calls chained from a one-call capture by doubling), launched once per slot with that slot's
two events set first, the fresh-input replay's chains, and per size the baseline's slot
graphs and the poison and check graphs. A slot reaches the GPU as one launch, so nothing the
host does between its parts can fall between its events. A batch is the sequence of these
launches, its graphs uploaded first, then queued behind one hold of the stream (the blocking
kernel) and released once all of it is queued. Per new cell, in order:

  half 1   warm-up of b on B, the canary (its output poisoned, CANARY_CALLS calls of a's
           kernel, one of them into it), a's slot on A launched once untimed (the settle
           replay), a's outputs poisoned; R rounds of slots a b b a; a's output on A compared
           with the reference, the mismatches counted on the device, then the canary's
  half 2   the same with the buffer sets swapped, rounds b a a b
  soak     where the timed calls are fewer than SOAK_CALLS: untimed calls on B, then checked
  fresh    per buffer set: the warm-up calls, then `calls` units [rewrite, call, check] of the
           fresh-input replay (sweeper.run.fresh), the input words restored

Before its halves, each new cell's pre-check: a's output on A poisoned, one call of the
captured unit, the mismatches counted. A batch's own work comes first: its counters cleared
and its cells' fresh-input tables copied up; after the batch, one device-to-host copy of every
counter. Nothing of a batch reaches the stream while it is built (a stream's queue is finite,
and the batch in flight fills it), with one exception: the pre-check of a kernel the grid
does not know (an adversarial or a user's kernel), which is that kernel's first call in every
cell (poison, uncaptured call, count, queued at once), as in the classic executor. A grid
kernel's first call in the run is made outside any capture, so that its module loads there
(CUDA lazy loading), for all of a size's new kernels before its first batch is queued. The
host reads the batch's events and counters once, then decides each half's stopping rule as
GpuExecutor does (the same rule, after each round from the second on); a half that needs
more samples gets a top-up segment (the canary, the settle replay, a's outputs poisoned,
one round, checked) in a later batch. A cell's row is the classic executor's row, plus its
batch, its position in the batch and the batch's SM clock. Events around each batch measure the GPU's
time in batches and between them (batch_spans; timing.batch_spans).

Guards kept: the paired baseline in every round, ABBA order, the buffer-swapped halves, the L2
normaliser before every slot, poisoning and re-checking of the outputs, the soak, the fresh-
input replay; and one more, single calls inside a replay checked (the canary). The
persisting-L2 state is read (and reset where set) before each batch is prepared and read back
after each cell's launches were captured: a launcher can only change it from the host, and
every host call of a cell's launcher happens while it is captured.

Falls back to GpuExecutor's cells for cold and after-write modes and the allocating pattern.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sweeper.errors import USER_ERRORS, SweeperError
from sweeper.run.executor import (
    SOAK_CALLS,
    Buffers,
    GpuExecutor,
    device_pointer,
    half_stopping,
    merge_timings,
)
from sweeper.run.fresh import FreshInput, fresh_table
from sweeper.run.timers import ExecPool, capture, check, cuda_driver, round_slots
from sweeper.stats import PairTiming, Stopping, rel_halfwidths, summaries

BATCH_CELLS = 16  # new cells per batch (top-up segments of earlier cells come on top)
# new cells in a call's first batch: the GPU waits for that batch's build (about 2.5 ms of
# host time per cell), and the next batch is built while it runs
FIRST_BATCH_CELLS = 4
CANARY_CALLS = 8  # the canary graph's back-to-back calls (BatchedExecutor._settle)
COUNTERS_PER_CELL = 6  # pre-check, half 1, half 2, soak, the two opening canaries
# Launches queued behind one hold of the stream. The stream's queue is finite, and what fills
# it is the event records: on the H200, 1000 launches of a graph of 1 to 100 kernels queued
# behind one hold, where 300 launches of a slot graph (two event records each) blocked the
# host until the blocking kernel timed out, 250 did not, whatever its number of kernels.
SLOTS_PER_HOLD = 200  # slot launches (settle replays included)
OPS_PER_HOLD = 800  # all launches
THROTTLE_REPEATS = 2  # a batch whose clocks throttled is launched again up to this many times
EXECUTOR_NAME = "batched"
# timing.batch_spans: launches of batches counted, the GPU's seconds in them, those of the
# batches that held only top-up segments, and the seconds between one batch and the next
# between_s splits into the gaps before a call's first batch (between_calls_s: the runner's
# work between two measure_many calls, a size's reference cells and setup), before a batch of
# top-up segments only (between_topups_s), and before the other batches of a call;
# size_setups counts the calls that set their size up (GpuExecutor.buffers), not kept
SPAN_KEYS = ("batches", "gpu_s", "topup_batches", "topup_gpu_s", "between_s", "calls",
             "between_calls_s", "between_topups_s", "size_setups")  # fmt: skip


def pci_bus_id() -> str:
    """The current CUDA device's PCI address as NVML spells it (domain:bus:device.0)."""
    cu = cuda_driver()
    dev = check(cu.cuCtxGetDevice())
    attr = cu.CUdevice_attribute
    ids = [
        check(cu.cuDeviceGetAttribute(a, dev))
        for a in (attr.CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, attr.CU_DEVICE_ATTRIBUTE_PCI_BUS_ID,
                  attr.CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)
    ]  # fmt: skip
    return "{:04x}:{:02x}:{:02x}.0".format(*ids)


def add_children(g, prev, parts) -> Any:
    """Append the child graphs `parts` to graph `g` one after another, after node `prev`
    (None: as its first nodes). Returns the last node added (`prev` where there is none)."""
    cu = cuda_driver()
    for part in parts:
        deps = [prev] if prev is not None else None
        prev = check(cu.cuGraphAddChildGraphNode(g, deps, len(deps or ()), part))
    return prev


def add_chain(g, prev, unit, calls: int):
    """Append `calls` replays of the one-call graph `unit` to graph `g` after node `prev`
    (None: as its first nodes), built by doubling: log2(calls) child-graph nodes where a chain
    of child nodes takes `calls`. Returns the last node added (`prev` where calls is 0)."""
    cu = cuda_driver()
    powers, owned = [unit], []
    try:
        while (1 << len(powers)) <= calls:
            p = check(cu.cuGraphCreate(0))
            owned.append(p)
            add_children(p, None, [powers[-1]] * 2)
            powers.append(p)
        return add_children(g, prev, [powers[k] for k in reversed(range(len(powers)))
                                      if calls >> k & 1])  # fmt: skip
    finally:
        for p in owned:
            cu.cuGraphDestroy(p)


def chain(unit, calls: int):
    """A graph (not instantiated) of `calls` replays of the one-call graph `unit` (add_chain)."""
    g = check(cuda_driver().cuGraphCreate(0))
    add_chain(g, None, unit, calls)
    return g


def unit_kernel(unit):
    """The kernel-node parameters of a captured one-call graph that is a single kernel node
    (a launcher that makes one launch), else None."""
    cu = cuda_driver()
    count = check(cu.cuGraphGetNodes(unit, 0))[1]
    if count != 1:
        return None
    (node,) = check(cu.cuGraphGetNodes(unit, 1))[0]
    if check(cu.cuGraphNodeGetType(node)) != cu.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL:
        return None
    return check(cu.cuGraphKernelNodeGetParams(node))


def canary_fits(cg: CellGraph, canary, params) -> bool:
    """Whether the driver takes `canary` on a call node of `cg` (an idle graph, just taken
    for a new cell), which is then set back to `params`. Where it does not (another kernel
    function: a launcher whose kernel depends on the output's address), the cell's settle
    replays run without their canary, and its row's `canaries` says so."""
    cu = cuda_driver()
    node = cg.calls[0]
    if cu.cuGraphExecKernelNodeSetParams(cg.exec, node, canary)[0] != cu.CUresult.CUDA_SUCCESS:
        return False
    check(cu.cuGraphExecKernelNodeSetParams(cg.exec, node, params))
    return True


@dataclass(eq=False)
class CellGraph:
    """An instantiated cell graph whose candidate calls are kernel nodes, set per cell to the
    cell's own kernel (cuGraphExecKernelNodeSetParams) instead of built and instantiated (or
    updated) anew: `calls` the nodes set to the cell's kernel, `fixed` the child-graph nodes
    that run the size's own graphs (the L2 normalizer, the fresh-input rewrite and check),
    set when the size changes (cuGraphExecChildGraphNodeSetParams), `events` a slot's two
    event record nodes (set per launch)."""

    graph: Any
    exec: Any
    calls: list
    fixed: list  # (node, name of the size graph it runs)
    events: tuple = ()
    holds: Any = None  # the size graphs' serials the fixed nodes run now

    def set_kernel(self, params) -> None:
        cu = cuda_driver()
        set_params, ex = cu.cuGraphExecKernelNodeSetParams, self.exec
        for node in self.calls:
            check(set_params(ex, node, params))

    def set_fixed(self, graphs: dict, serials: tuple) -> bool:
        """Point the fixed nodes at `graphs` (name -> graph) unless they run them already;
        False where the driver refuses (another topology: build a new one)."""
        if self.holds == serials:
            return True
        cu = cuda_driver()
        for node, name in self.fixed:
            err = cu.cuGraphExecChildGraphNodeSetParams(self.exec, node, graphs[name])[0]
            if err != cu.CUresult.CUDA_SUCCESS:
                self.holds = None
                return False
        self.holds = serials
        return True

    def destroy(self) -> None:
        cu = cuda_driver()
        cu.cuGraphExecDestroy(self.exec)
        cu.cuGraphDestroy(self.graph)


def cell_graph(parts: list, params, event=None) -> CellGraph:
    """Build and instantiate a CellGraph from `parts`, in order: ("call", count) adds `count`
    kernel nodes of `params`, ("fixed", name, graph) a child-graph node running `graph`,
    ("event",) an event record node recording `event`."""
    cu = cuda_driver()
    g = check(cu.cuGraphCreate(0))
    prev, calls, fixed, events = None, [], [], []

    def add(adder, arg):
        """A node after the last one added (as the first node where there is none)."""
        nonlocal prev
        deps = [prev] if prev is not None else None
        prev = check(adder(g, deps, len(deps or ()), arg))
        return prev

    try:
        for part in parts:
            if part[0] == "call":
                calls += [add(cu.cuGraphAddKernelNode, params) for _ in range(part[1])]
            elif part[0] == "fixed":
                fixed.append((add(cu.cuGraphAddChildGraphNode, part[2]), part[1]))
            else:
                events.append(add(cu.cuGraphAddEventRecordNode, event))
        ex = check(cu.cuGraphInstantiate(g, 0))
    except BaseException:
        cu.cuGraphDestroy(g)
        raise
    return CellGraph(g, ex, calls, fixed, tuple(events))


class CellGraphPool:
    """CellGraphs kept for reuse, by shape: a new cell sets one's kernel nodes instead of
    building its graphs. Counts the graphs set and built since take_counts."""

    def __init__(self) -> None:
        self._free: dict[tuple, list[CellGraph]] = {}
        self.set = self.built = 0

    def take(self, key: tuple, build) -> tuple[CellGraph, bool]:
        """A free CellGraph of shape `key`, else `build()`; and whether it was built."""
        free = self._free.get(key)
        if free:
            self.set += 1
            return free.pop(), False
        return self.build(build), True

    def build(self, build) -> CellGraph:
        self.built += 1
        return build()

    def give(self, key: tuple, cg: CellGraph) -> None:
        self._free.setdefault(key, []).append(cg)

    def take_counts(self) -> dict[str, int]:
        out = {"set": self.set, "built": self.built}
        self.set = self.built = 0
        return out


def slot_graph(warm_up, timed, event):
    """One timed slot as a graph (not instantiated): what `warm_up(g, prev)` adds (the L2
    normalizer, the warm-up calls), an event record, what `timed(g, prev)` adds (the timed
    calls), an event record; each callable adds its nodes after `prev` and returns the last.
    Returns (graph, (first record node, second record node)); both record `event` until a
    launch sets its own (LaunchQueue.slot). The slot's work reaches the GPU as one launch:
    nothing the host does between its parts can fall inside the two events."""
    cu = cuda_driver()
    g = check(cu.cuGraphCreate(0))
    prev = warm_up(g, None)
    deps = [prev] if prev is not None else None
    n0 = check(cu.cuGraphAddEventRecordNode(g, deps, len(deps or ()), event))
    n1 = check(cu.cuGraphAddEventRecordNode(g, [timed(g, n0)], 1, event))
    return g, (n0, n1)


class LaunchQueue:
    """A batch's work in order, queued on the stream at once: instantiated graphs, timed
    slots (a slot graph launched with the two events it records set first), and the copies
    and memsets the batch needs (its counters cleared, the fresh-input tables uploaded).
    Nothing reaches the stream before `run`: building the next batch never waits for the
    one in flight."""

    def __init__(self) -> None:
        self.ops: list[tuple[str, Any]] = []
        self.slots = 0  # slot launches among them

    def child(self, exec_) -> None:
        self.ops.append(("graph", exec_))

    def memset(self, ptr: int, words: int) -> None:
        """Zero `words` 32-bit words at device address `ptr`."""
        self.ops.append(("memset", (ptr, words)))

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """Copy `nbytes` from pinned host address `src` to device address `dst`."""
        self.ops.append(("copy", (dst, src, nbytes)))

    def slot(self, exec_, nodes, e0, e1) -> None:
        self.ops.append(("slot", (exec_, *nodes, int(e0.handle), int(e1.handle))))
        self.slots += 1

    def canary(self, exec_, nodes, event, node, canary, params) -> None:
        """An untimed launch of graph `exec_` (its event records `nodes`, if any, set to
        `event`) whose call node `node` runs with the kernel parameters `canary` (the same
        kernel writing another buffer), set back to `params` for every later launch."""
        self.ops.append(("canary", (exec_, *nodes, int(event.handle), node, canary, params)))
        self.slots += 1

    def upload(self, h) -> None:
        """Upload every instantiated graph of the batch to the device (cuGraphUpload), so
        that the launches queued behind a hold carry no upload work of their own."""
        cu = cuda_driver()
        seen = set()
        for kind, x in self.ops:
            if kind in ("memset", "copy"):
                continue
            ex = x[0] if kind in ("slot", "canary") else x
            if int(ex) not in seen:
                seen.add(int(ex))
                check(cu.cuGraphUpload(ex, h))

    def run(self, stream, h) -> None:
        cu = cuda_driver()
        launch, set_event = cu.cuGraphLaunch, cu.cuGraphExecEventRecordNodeSetEvent
        set_kernel = cu.cuGraphExecKernelNodeSetParams
        for kind, x in self.ops:
            if kind == "memset":
                check(cu.cuMemsetD32Async(x[0], 0, x[1], h))
            elif kind == "copy":
                check(cu.cuMemcpyHtoDAsync(*x, h))
            elif kind == "slot":
                ex, n0, n1, e0, e1 = x
                # a later setting never reaches a launch already queued (CUDA: "already
                # enqueued or running launches of hGraphExec are not affected")
                check(set_event(ex, n0, e0))
                check(set_event(ex, n1, e1))
                check(launch(ex, h))
            elif kind == "canary":
                ex, *events, e, node, canary, params = x
                for n in events:
                    check(set_event(ex, n, e))
                check(set_kernel(ex, node, canary))
                check(launch(ex, h))
                check(set_kernel(ex, node, params))
            else:
                check(launch(x, h))


@dataclass(eq=False)
class _Half:
    """One buffer-swapped half of a cell: its samples so far and whether its rule stopped."""

    sa: str  # buffer set of side a
    sb: str
    first: str  # "A" or "B": which side takes a round's first and last slots
    stop: Stopping
    a_us: list = field(default_factory=list)
    b_us: list = field(default_factory=list)
    order: list = field(default_factory=list)
    done: bool = False


@dataclass(eq=False)
class _Cell:
    row: dict
    launcher: Any = None
    graphs: dict = field(default_factory=dict)  # name -> CUgraph owned by the cell
    execs: dict = field(default_factory=dict)  # name -> (pool key, its instantiated graph)
    cgs: dict = field(default_factory=dict)  # name -> (pool key, CellGraph set to its kernel)
    params: dict = field(default_factory=dict)  # buffer set -> its one-call kernel's parameters
    # buffer set -> the same kernel's parameters with the canary's own output (Buffers.y_c)
    canary: dict = field(default_factory=dict)
    nodes: dict = field(default_factory=dict)  # slot graph name -> its two event record nodes
    halves: list = field(default_factory=list)
    bad_pre: int = 0
    bad: int = 0  # output words wrong after the timed rounds (every segment's check)
    bad_soak: int = 0
    bad_canary: int = 0  # output words wrong after a canary call (every segment's)
    canaries: int = 0  # canary calls checked
    stale: int = 0
    checked: int = 0
    state: dict = field(default_factory=dict)
    fresh: list = field(default_factory=list)  # (buffer set, FreshInput) of the replay
    batch: int = -1
    pos: int = -1
    cells: int = 0
    sm_mhz: int | None = None
    throttled: bool = False  # its batch throttled on every launch and was kept

    def destroy(self, pool=None, cell_graphs=None) -> None:
        """Graphs destroyed, instantiated ones back to `pool` and CellGraphs to `cell_graphs`
        (every launch of them is complete when a cell's row is made, and none was queued
        when a cell failed before it was)."""
        cu = cuda_driver()
        for key, cg in self.cgs.values():
            if cell_graphs is not None:
                cell_graphs.give(key, cg)
            else:
                cg.destroy()
        self.cgs.clear()
        for key, ex in self.execs.values():
            if pool is not None:
                pool.give(key, ex)
            else:
                cu.cuGraphExecDestroy(ex)
        self.execs.clear()
        for g in self.graphs.values():
            cu.cuGraphDestroy(g)
        self.graphs.clear()


@dataclass(eq=False)
class _Batch:
    parity: int
    index: int
    graph: LaunchQueue
    call: int = 0  # the measure_many call it belongs to
    slots: list = field(default_factory=list)  # (cell, half, side, event index)
    counters: list = field(default_factory=list)  # (cell, what, counter index)
    fresh: list = field(default_factory=list)  # (cell, FreshInput)
    new: list = field(default_factory=list)  # cells whose first segment this is
    errors: list = field(default_factory=list)  # rows of cells that failed before queueing
    next_counter: int = 0
    start_event: Any = None  # recorded when its hold releases it: its GPU span's start
    done_event: Any = None
    clock_token: Any = None
    clocks: Any = None  # a Future of its BatchClocks (ClockMonitor.end_after)


class BatchedExecutor(GpuExecutor):
    """GpuExecutor whose hot cells of one size are measured in batches (module docstring)."""

    def __init__(self, *args, batch_cells: int = BATCH_CELLS, set_in_place: bool = True,
                 **kwargs):  # fmt: skip
        super().__init__(*args, **kwargs)
        self.batch_cells = batch_cells
        self.first_batch_cells = min(FIRST_BATCH_CELLS, batch_cells)
        # a cell whose launcher makes one kernel launch gets its graphs by setting that
        # kernel on pooled CellGraphs; False: every cell's graphs built from its captures
        self.set_in_place = set_in_place
        self._cell_graphs = CellGraphPool()
        self._batches = 0
        self._calls = 0  # measure_many calls that batched
        self._last_call = 0  # the call of the batch whose span was counted last
        self._events: dict[int, list] = {0: [], 1: []}
        # a batch's check counts, then its cursor: the counter the next check's count goes to
        n_counters = COUNTERS_PER_CELL * 2 * batch_cells
        self._counters = [self.cuda.device_array(n_counters + 1, np.uint64) for _ in range(2)]
        self._counters_host = [self.cuda.pinned_array(n_counters + 1, np.uint64) for _ in range(2)]
        # a size's check graph counts into this sum, then moves it to the counter at the
        # batch's cursor (_check_graph): one check graph per size, buffer set and parity
        self._check_sum = self.cuda.device_array(1, np.uint64)
        # a pre-check queued at once keeps its count here until its batch's counters are
        # cleared, then a held-count graph moves it in (_new_cell)
        self._held = [self.cuda.device_array(n_counters, np.uint64) for _ in range(2)]
        self._held_moves: dict[tuple, Any] = {}  # (parity, counter) -> its graph
        self._move = move_kernel()
        # its first call outside any capture: a kernel's first launch can load its module
        scratch = self.cuda.to_device(np.zeros(2, np.uint64))
        self._move[1, 1, self.bench.stream](scratch, scratch[0:1])
        self.bench.sync()
        n_fresh = 2 * 2 * batch_cells  # call index and stale count per buffer set and cell
        self._fresh_counters = [self.cuda.device_array(n_fresh, np.uint32) for _ in range(2)]
        self._fresh_host = [self.cuda.pinned_array(n_fresh, np.uint32) for _ in range(2)]
        self._fresh_rooms: dict[tuple, FreshInput] = {}
        self._launched: set = set()  # the kernels launched outside a capture (_kernel_key)
        self._spans = dict.fromkeys(SPAN_KEYS, 0.0)  # batch_spans
        self._last_done = None  # the done event of the last batch whose span was counted
        self._room_serials = itertools.count()  # a room's name in the size graphs' keys
        self._canary_rng = np.random.default_rng(self.seed)  # which call is a settle's canary
        self.canary = True  # False: settle replays without their canary (lab/tools/canary_ab.py)
        # where the canary call runs: "own" a graph of CANARY_CALLS calls launched before the
        # settle replay, "slot" one call of the settle replay itself (lab/tools/canary_ab.py)
        self.canary_graph = "own"
        # per size: the poison, check and fresh rooms' graphs, (graph, instantiated graph)
        self._size_graphs: dict[tuple, Any] = {}
        self._cell_pool = ExecPool()  # cells' instantiated graphs, updated cell to cell
        self._slot_nodes: dict[tuple, tuple] = {}  # a size's slot graph -> its record nodes
        # what a slot graph's event records record until a launch sets the slot's own
        self._scratch = self.cuda.event(timing=False)
        self._timed_out = [self.cuda.pinned_array(1, np.int32) for _ in range(2)]
        from sweeper.run.clocks import ClockMonitor

        self.clocks = ClockMonitor(pci_bus_id())  # disabled (and says why) without NVML
        self._context = check(cuda_driver().cuCtxGetCurrent())

    def _context_current(self) -> None:
        """Make this executor's CUDA context current on the calling thread."""
        check(cuda_driver().cuCtxSetCurrent(self._context))

    def describe(self) -> dict:
        doc = super().describe()
        harness = doc["harness"]
        harness["executor"] = EXECUTOR_NAME
        harness["batch_cells"] = self.batch_cells
        harness["first_batch_cells"] = self.first_batch_cells
        # hot rounds run inside the batch's graph: no hold of the stream, no round queued ahead
        harness["hot_rounds_held"] = False
        harness["hot_rounds_pipelined"] = False
        harness["hot_rounds_in_graph"] = True
        return doc

    def clock_summary(self) -> dict:
        """The clocks around every batch so far (sweeper.run.clocks), for timing.clocks."""
        return self.clocks.summary()

    def replay_graphs(self) -> dict[str, int]:
        """The fresh-input replay's graphs (modes timed cell by cell) and the batches'
        instantiated graphs, updated in place or instantiated, since the last call."""
        out = super().replay_graphs()
        cells = self._cell_pool.take_counts()
        out["batch_updated"], out["batch_instantiated"] = cells["updated"], cells["instantiated"]
        cgs = self._cell_graphs.take_counts()
        out["batch_set"], out["batch_built"] = cgs["set"], cgs["built"]
        return out

    def batch_spans(self) -> dict[str, float]:
        """The GPU's time in batches and between them since the last call (timing.batch_spans,
        docs/methodology.md): measured by events, not estimated."""
        out = {k: round(v, 4) for k, v in self._spans.items()}
        self._spans = dict.fromkeys(SPAN_KEYS, 0.0)
        return out

    def _count_span(self, batch: _Batch) -> None:
        """Count a completed launch of a batch: from its release to its last copy, and from
        the batch before it (the GPU's time outside batches: reference cells, a size's setup,
        waiting for the host)."""
        span = self.cuda.event_elapsed_time(batch.start_event, batch.done_event) / 1e3
        s = self._spans
        s["batches"] += 1
        s["gpu_s"] += span
        if not batch.new:
            s["topup_batches"] += 1
            s["topup_gpu_s"] += span
        if self._last_done is not None:
            gap = self.cuda.event_elapsed_time(self._last_done, batch.start_event) / 1e3
            s["between_s"] += gap
            if batch.call != self._last_call:
                s["between_calls_s"] += gap
            elif not batch.new:
                s["between_topups_s"] += gap
        if batch.call != self._last_call:
            s["calls"] += 1
        self._last_done, self._last_call = batch.done_event, batch.call

    def drop(self, dtype: str, n: int) -> None:
        self._drop_size_graphs([k for k in self._size_graphs if k[:2] == (dtype, n)])
        super().drop(dtype, n)

    def _drop_size_graphs(self, keys: list) -> None:
        """Destroy the size graphs of `keys` (and forget a slot graph's record nodes)."""
        cu = cuda_driver()
        for k in keys:
            g, ex = self._size_graphs.pop(k)
            self._slot_nodes.pop(k, None)
            cu.cuGraphExecDestroy(ex)
            cu.cuGraphDestroy(g)

    # -- measuring ------------------------------------------------------------------------
    def measure_many(self, mode: str, dtype: str, n: int, variants: list[Any]):
        """Rows of the candidate cells of `variants` at this size, yielded as each completes
        (not in the order given)."""
        if mode != "hot" or self.pattern == "allocating":
            yield from super().measure_many(mode, dtype, n, variants)
            return
        self.bench.clock.prefix = mode
        if (dtype, n) not in self._buffers:
            self._spans["size_setups"] += 1
        b = self.buffers(dtype, n)
        if self.canary and b.y_c is None:
            b.y_c = self.cuda.device_array_like(b.y_a)  # the canary's own output
        self._load_kernels(dtype, n, variants)
        self._calls += 1
        pending = deque(variants)
        topups: list[tuple[_Cell, int]] = []
        inflight: _Batch | None = None
        parity = 0
        cells = self.first_batch_cells
        try:
            with self.cuda.defer_cleanup():
                while pending or topups or inflight is not None:
                    batch = None
                    if pending or topups:
                        with self.bench.clock("batch-build"):
                            batch = self._build(mode, dtype, n, pending, topups, parity, cells)
                        topups, cells = [], self.batch_cells
                        parity ^= 1
                        yield from batch.errors
                    if inflight is not None:
                        finished, topups = self._finish(inflight, dtype, n)
                        yield from self._rows(finished)
                    inflight = batch
        finally:
            self.bench.sync()

    def _load_kernels(self, dtype: str, n: int, variants: list[Any]) -> None:
        """The first call in the run of every grid kernel among `variants`, all made before
        the first batch is queued: a kernel's first launch can load its module (CUDA lazy
        loading), which must not happen while the stream is being captured, and made here,
        with nothing in flight, it waits for no batch. One call each, on side A's buffers,
        whose outputs each cell's pre-check poisons before its own call. A kernel whose
        launcher fails here is left to its cell, which records the error."""
        from sweeper_kernels import get_launcher

        new = {}
        for v in variants:
            kernel = _kernel_key(v)
            if kernel is not None and kernel not in self._launched:
                new.setdefault(kernel, v)
        if not new:
            return
        b = self.buffers(dtype, n)
        with self.bench.clock("cell-load"):
            for kernel, v in new.items():
                try:
                    launcher = v.launcher() if hasattr(v, "launcher") else get_launcher(v)
                    self.candidate_launch(launcher, b, n, "A")(self.bench.stream)
                except USER_ERRORS:
                    continue
                self._launched.add(kernel)

    def _build(self, mode, dtype, n, pending: deque, topups, parity: int, cells: int) -> _Batch:
        """Queue the next batch: top-up segments of earlier cells, then up to `cells` new
        cells; launched before it returns."""
        key = (dtype, n)
        b = self.buffers(dtype, n)
        stop = self.stopping
        warm = self.warm_calls(key)
        for side in "BA":  # the reference cell captured them; captured here if it did not
            if (*key, side, warm) not in self._base_graphs:
                self._baseline_graphs(self.baseline_launch(dtype, b, n, side), key, side, stop)
        calls = self._base_calls[key]
        batch = _Batch(parity, self._batches, LaunchQueue(), self._calls)
        self._batches += 1
        self._zero_counters(batch)
        state = self.bench.persisting_state()  # a reset can wait for the batch in flight
        if state["limit"] != 0 or state["window_bytes"] != 0:
            self.bench.reset_persisting()
        for cell, h in topups:
            self._segment(batch, cell, cell.halves[h], h, b, key, calls, warm, rounds=1)
        slot = 0
        room = self._counters[parity].size - 1 - COUNTERS_PER_CELL
        q = batch.graph
        # launches and slot launches a new cell queues (measured on the last one added)
        per_ops, per_slots = 40, 40
        while (
            pending
            and len(batch.new) < cells
            and batch.next_counter <= room
            and (not batch.new or (len(q.ops) + per_ops <= OPS_PER_HOLD
                                   and q.slots + per_slots <= SLOTS_PER_HOLD))
        ):  # fmt: skip
            v = pending.popleft()
            before = len(q.ops), q.slots
            cell = self._new_cell(mode, dtype, n, v, b, calls, warm, batch, slot)
            if cell is None:
                continue
            per_ops, per_slots = len(q.ops) - before[0], q.slots - before[1]
            slot += 1
        for i, cell in enumerate(batch.new):
            cell.pos, cell.cells = i, len(batch.new)
        with self.bench.clock("batch-launch"):
            self._launch(batch)
        return batch

    def _zero_counters(self, batch: _Batch) -> None:
        """The clearing of the batch's check and fresh-input counters, as its first work (a
        repeated launch clears them again)."""
        counters, fresh = self._counters[batch.parity], self._fresh_counters[batch.parity]
        batch.graph.memset(device_pointer(counters), 2 * counters.size)
        batch.graph.memset(device_pointer(fresh), fresh.size)

    def _launch(self, batch: _Batch) -> None:
        """Queue the batch behind one hold, then the copy of its counters to the host and the
        event the host waits for."""
        cu, h = cuda_driver(), self.bench.h
        counters = self._counters[batch.parity]
        fresh_counters = self._fresh_counters[batch.parity]
        with self.bench.clock("batch-upload"):
            batch.graph.upload(h)
        batch.clock_token = self.clocks.begin()
        # The whole batch is queued behind the blocking kernel, then released: no slot can
        # time the host still submitting (Bench.time_pair_hot); nothing here waits for the GPU.
        self.bench.hold(batch.parity)
        try:
            batch.start_event = self.cuda.event(timing=True)
            batch.start_event.record(self.bench.stream)
            batch.graph.run(self.bench.stream, h)
        finally:
            self.bench.release_flag(batch.parity)
        copies = ((self._counters_host, counters), (self._fresh_host, fresh_counters),
                  (self._timed_out, self.bench.timed_out))  # fmt: skip
        for host, dev in copies:
            check(cu.cuMemcpyDtoHAsync(host[batch.parity].ctypes.data, device_pointer(dev),
                                       dev.nbytes, h))  # fmt: skip
        batch.done_event = done = self.cuda.event(timing=True)
        done.record(self.bench.stream)
        # the batch's clocks are read on the monitor's worker once it completed, while this
        # thread builds the next batch
        batch.clocks = self.clocks.end_after(
            batch.clock_token,
            wait=lambda: check(cu.cuEventSynchronize(int(done.handle))),
            start=self._context_current,
        )

    def _slot_events(self, batch: _Batch):
        pool = self._events[batch.parity]
        i = len(batch.slots) * 2
        while len(pool) <= i + 1:
            pool.append(self.cuda.event(timing=True))
        return i, pool[i], pool[i + 1]

    def _counter(self, batch: _Batch, cell: _Cell, what: str) -> int:
        """The next of the batch's device counters, for `what` of `cell` (never reused within
        a batch: a failed cell's launches may already have counted into its own)."""
        j = batch.next_counter
        batch.next_counter += 1
        batch.counters.append((cell, what, j))
        return j

    def _size_entry(self, name: str, key: tuple, make):
        """(graph, instantiated graph) that `make()` builds, once per size."""
        k = (*key, name)
        if k not in self._size_graphs:
            with self.bench.clock("size-graphs"):
                g = make()
                self._size_graphs[k] = (g, check(cuda_driver().cuGraphInstantiate(g, 0)))
        return self._size_graphs[k]

    def _size_graph(self, name: str, key: tuple, make):
        """The instantiated graph `make()` builds, once per size."""
        return self._size_entry(name, key, make)[1]

    def _exec(self, cell: _Cell, name: str, calls: int):
        """The cell's graph `name` instantiated (a CellGraph set to the cell's kernel, or from
        the pool: updated where the driver allows, else instantiated)."""
        if name in cell.cgs:
            return cell.cgs[name][1].exec
        if name not in cell.execs:
            key = (name.split("-")[0], calls)
            if name in cell.nodes:  # a slot graph: its events are set per launch
                ex, cell.nodes[name], owned = self._cell_pool.take_addressed(
                    key, cell.graphs[name], cell.nodes[name])  # fmt: skip
                if owned:
                    del cell.graphs[name]
            else:
                ex = self._cell_pool.take(key, cell.graphs[name])
            cell.execs[name] = (key, ex)
        return cell.execs[name][1]

    def _slot(self, cell: _Cell, side: str, calls: int):
        """The cell's slot graph on buffer set `side`: (instantiated graph, the two record
        nodes that address it)."""
        name = f"slot-{side}"
        if name in cell.cgs:
            cg = cell.cgs[name][1]
            return cg.exec, cg.events
        return self._exec(cell, name, calls), cell.nodes[name]

    def _cell_graph(self, cell: _Cell, name: str, key: tuple, parts: list, graphs: dict,
                    serials: tuple, params) -> None:  # fmt: skip
        """Cell graph `name` of `cell` as a CellGraph of shape `key` (cell_graph's `parts`):
        a pooled one set to the cell's kernel and pointed at the size's `graphs`, else a new
        one."""
        pool = self._cell_graphs
        scratch = int(self._scratch.handle)

        def build() -> CellGraph:
            return cell_graph(parts, params, scratch)

        with self.bench.clock("cell-graphs"):
            cg, built = pool.take(key, build)
            if not built:
                if cg.set_fixed(graphs, serials):
                    cg.set_kernel(params)
                else:  # another topology of the size's graphs: one of its own
                    cg.destroy()
                    cg, built = pool.build(build), True
            if built:  # it runs this size's graphs and this kernel
                cg.holds = serials
        cell.cgs[name] = (key, cg)

    def _poison_graph(self, b: Buffers, key: tuple, side: str):
        y = b.output(side)
        return self._size_graph(f"poison-{side}", key,
                                lambda: capture(lambda s: self._poison(y), 1, self.bench.stream,
                                                 self.bench.h))  # fmt: skip

    def _count_graph(self, b: Buffers, key: tuple, side: str):
        """The mismatch count of side's output into the checks' sum, cleared first."""
        y = b.output(side)
        total = self._check_sum

        def count(s):
            check(cuda_driver().cuMemsetD32Async(device_pointer(total), 0, 2, self.bench.h))
            self.count_mismatches(y, b, total, s)

        return self._size_graph(f"count-{side}", key,
                                lambda: capture(count, 1, self.bench.stream, self.bench.h))  # fmt: skip

    def _check_graph(self, b: Buffers, key: tuple, side: str, parity: int):
        """The mismatch count of side's output into the counter at the cursor of the
        counters of `parity`, the cursor then advanced: one graph per size, buffer set and
        parity, whatever the counter, and one launch per check (a batch's launches wait
        behind one hold, in a queue of finite length: docs/timing.md). The batch's counters
        are taken in the order its checks are queued (_queue_check)."""
        y = b.output(side)
        total, counters, move = self._check_sum, self._counters[parity], self._move

        def count(s):
            check(cuda_driver().cuMemsetD32Async(device_pointer(total), 0, 2, self.bench.h))
            self.count_mismatches(y, b, total, s)
            move[1, 1, s](counters, total)

        return self._size_graph(f"check-{side}-{parity}", key,
                                lambda: capture(count, 1, self.bench.stream, self.bench.h))  # fmt: skip

    def _held_graph(self, parity: int, j: int):
        """The graph that moves a pre-check's held count j to the counter at the cursor of
        the counters of `parity` (one per counter, whatever the size)."""
        k = (parity, j)
        if k not in self._held_moves:
            move, counters, held = self._move, self._counters[parity], self._held[parity][j : j + 1]
            g = capture(lambda s: move[1, 1, s](counters, held), 1, self.bench.stream, self.bench.h)
            self._held_moves[k] = check(cuda_driver().cuGraphInstantiate(g, 0))
            cuda_driver().cuGraphDestroy(g)
        return self._held_moves[k]

    def _queue_check(self, batch: _Batch, cell: _Cell, b: Buffers, key: tuple, side: str,
                     what: str) -> None:  # fmt: skip
        """Queue the count of side's output for `what` of `cell` into its own counter: the
        next one, which the check's graph moves its count to (the graph first, so that a
        failure to make it takes no counter)."""
        g = self._check_graph(b, key, side, batch.parity)
        self._counter(batch, cell, what)
        batch.graph.child(g)

    def _new_cell(self, mode, dtype, n, v, b, calls, warm, batch: _Batch, slot: int):
        """Capture a new cell's graphs and add its segments to the batch; None (and the row
        kept for the output) where the cell failed before it could be queued."""
        from sweeper_kernels import get_launcher

        key = (dtype, n)
        row = self._candidate_row(mode, dtype, n, v)
        cell = _Cell(row=row)
        s, h = self.bench.stream, self.bench.h
        try:
            cell.launcher = v.launcher() if hasattr(v, "launcher") else get_launcher(v)
            units = {}
            kernel = _kernel_key(v)
            for side in "AB":
                launch = self.candidate_launch(cell.launcher, b, n, side)
                if side == "A" and kernel is None:
                    # a kernel the grid does not know (an adversarial or a user's): its
                    # pre-check is its first call, uncaptured, queued at once as the classic
                    # executor makes it: poison, call, count
                    cu = cuda_driver()
                    poison = self._poison_graph(b, key, "A")
                    counted = self._count_graph(b, key, "A")
                    j = batch.next_counter
                    moved = self._held_graph(batch.parity, j)
                    # the counter and the launch that fills it, queued together (the batch's
                    # cursor must see one launch per counter, even where the call below fails);
                    # the move runs after the batch clears its counters (its first work)
                    self._counter(batch, cell, "pre")
                    batch.graph.child(moved)
                    held = device_pointer(self._held[batch.parity]) + 8 * j
                    with self.bench.clock("cell-precheck"):
                        check(cu.cuGraphLaunch(poison, h))
                        launch(s)  # loads the kernel's module outside any capture
                        check(cu.cuGraphLaunch(counted, h))
                        check(cu.cuMemcpyDtoDAsync(held, device_pointer(self._check_sum), 8, h))
                elif side == "A" and kernel not in self._launched:
                    # not loaded by _load_kernels (a launcher that failed there): its first
                    # call here, outside any capture, waits for the batch in flight
                    with self.bench.clock("cell-load"):
                        launch(s)
                    self._launched.add(kernel)
                with self.bench.clock("cell-capture"):
                    units[side] = capture(launch, 1, s, h)
                    cell.graphs[f"unit-{side}"] = units[side]
                    unit = units[side]
                    params = unit_kernel(unit) if self.set_in_place else None
                if side == "A" and kernel is not None:  # the pre-check's call
                    if params is not None:
                        self._cell_graph(cell, "pre", ("pre",), [("call", 1)], {}, (), params)
                    else:
                        cell.graphs["pre"] = chain(unit, 1)
                if params is not None:
                    cell.params[side] = params
                    canary = None
                    if self.canary:
                        with self.bench.clock("cell-capture"):
                            canary = capture(self.canary_launch(cell.launcher, b, n, side), 1, s, h)
                            cell.graphs[f"canary-{side}"] = canary  # owns the parameters' storage
                            canary = unit_kernel(canary)
                    before = self._before_slot(b)
                    parts = [*(("fixed", "normalize", g) for g in before), ("call", warm),
                             ("event",), ("call", calls), ("event",)]  # fmt: skip
                    self._cell_graph(cell, f"slot-{side}", ("slot", side, len(before), warm, calls),
                                     parts, {"normalize": before[0] if before else None},
                                     (b.epoch, key), params)  # fmt: skip
                    on = f"slot-{side}"
                    if canary is not None and self.canary_graph == "own":
                        on = f"canary-{side}"  # CANARY_CALLS back-to-back calls of its own
                        self._cell_graph(cell, on, ("canary", CANARY_CALLS),
                                         [("call", CANARY_CALLS)], {}, (), params)  # fmt: skip
                    if canary is not None and canary_fits(cell.cgs[on][1], canary, params):
                        cell.canary[side] = canary
                    continue
                cell.graphs[f"slot-{side}"], cell.nodes[f"slot-{side}"] = slot_graph(
                    lambda g, p, u=unit: add_chain(g, add_children(g, p, self._before_slot(b)),
                                                   u, warm),
                    lambda g, p, u=unit: add_chain(g, p, u, calls),
                    int(self._scratch.handle),
                )  # fmt: skip
            cell.fresh = self._fresh_units(cell, b, n, key, batch, slot, calls, warm)
            cell.state = self.bench.persisting_state()
        except USER_ERRORS as e:
            cell.destroy(self._cell_pool, self._cell_graphs)
            cell.row.update(status="error", status_detail=str(e))
            batch.counters = [c for c in batch.counters if c[0] is not cell]
            batch.errors.append(cell.row)
            return None
        cell.batch = batch.index
        half = half_stopping(self.stopping)
        cell.halves = [_Half("A", "B", "A", half), _Half("B", "A", "B", half)]
        batch.new.append(cell)
        if kernel is not None:
            # the pre-check: A's output poisoned, one call of the captured unit, the
            # mismatches counted; a failed pre-check discards the cell's timing (_row)
            g = batch.graph
            g.child(self._poison_graph(b, key, "A"))
            g.child(self._exec(cell, "pre", 1))
            self._queue_check(batch, cell, b, key, "A", "pre")
        rounds = max(1, math.ceil(half.min_samples / 2))
        for i, hf in enumerate(cell.halves):
            self._segment(batch, cell, hf, i, b, key, calls, warm, rounds, opening=True)
        made = sum(2 * rounds * (calls + 1) for _ in cell.halves)
        if made < SOAK_CALLS:
            g = batch.graph
            g.child(self._poison_graph(b, key, "B"))
            more = SOAK_CALLS - made
            if "B" in cell.params:
                self._cell_graph(cell, "soak", ("soak", more), [("call", more)], {}, (),
                                 cell.params["B"])  # fmt: skip
            else:
                cell.graphs["soak"] = chain(cell.graphs["unit-B"], more)
            g.child(self._exec(cell, "soak", more))
            self._queue_check(batch, cell, b, key, "B", "soak")
        for side, fresh, restore in cell.fresh:
            g = batch.graph
            g.child(self._exec(cell, f"fresh-{side}", calls))
            g.child(restore)
            batch.fresh.append((cell, fresh))
        if cell.state["limit"] != 0 or cell.state["window_bytes"] != 0:
            self.bench.reset_persisting()
        return cell

    def _fresh_units(self, cell: _Cell, b, n, key, batch: _Batch, slot: int, calls, warm):
        """The fresh-input replay of one cell: its tables (queued now), its replay chains and
        the restore graphs, as (buffer set, FreshInput, instantiated restore graph).

        A replay unit is [rewrite, the cell's captured one-call graph, check]: the replay runs
        the very graph that is timed. The rewrite, check and restore graphs depend only on the
        room (its tables' device buffers and counters) and the size's buffers, so they are
        captured once per room and size."""
        words = b.nbytes // 4
        if not words:
            return []
        cu, s, h = cuda_driver(), self.bench.stream, self.bench.h
        expected = self._host.get(key[0], n)[1]
        index = self._fresh_cells
        self._fresh_cells += 1
        out = []
        for i, side in enumerate("AB"):
            room_key = (batch.parity, slot, side)
            with self.bench.clock("fresh-tables"):
                table = fresh_table(expected, calls, seed=(self.seed, index, i))
                fresh = self._fresh_rooms.get(room_key)
                if fresh is None or not fresh.fits(table):
                    room = max(calls, self.stopping.max_calls)
                    c = 2 * (2 * slot + i)
                    fresh = FreshInput(self.cuda, room,
                                       counters=self._fresh_counters[batch.parity][c : c + 2])  # fmt: skip
                    fresh.counter_index = c
                    fresh.serial = next(self._room_serials)
                    self._fresh_rooms[room_key] = fresh
                fresh.stage(table)
                batch.graph.copy(*fresh.copy_args())
            x, y, _ = b.side(side)
            if not self._fresh_loaded:  # modules loaded outside any capture
                check(cu.cuMemcpyHtoDAsync(*fresh.copy_args(), h))  # the table they read
                fresh.load(x, y, b.src, s)
                self._fresh_loaded = True
            room = f"{fresh.serial}-{fresh.table.calls}x{fresh.table.words}"

            def graph_of(what, launch, room=room):
                return self._size_entry(f"fresh-{what}-{room}", key,
                                        lambda: capture(launch, 1, s, h))  # fmt: skip

            rewrite = graph_of("rewrite", lambda st, x=x, fresh=fresh: fresh.rewrite(x, st))[0]
            checked = graph_of("check", lambda st, y=y, fresh=fresh: fresh.check(y, st))[0]
            restore = graph_of("restore",
                               lambda st, x=x, fresh=fresh: fresh.restore(x, b.src, st))[1]  # fmt: skip
            if side in cell.params:  # the replay's calls set to the cell's kernel
                unit = [("fixed", "rewrite", rewrite), ("call", 1), ("fixed", "check", checked)]
                self._cell_graph(cell, f"fresh-{side}", ("fresh", *room_key, warm, calls),
                                 [("call", warm), *unit * calls],
                                 {"rewrite": rewrite, "check": checked},
                                 (b.epoch, key, room), cell.params[side])  # fmt: skip
                out.append((side, fresh, restore))
                continue
            u = check(cu.cuGraphCreate(0))
            try:
                add_children(u, None, (rewrite, cell.graphs[f"unit-{side}"], checked))
                # the side's warm-up calls, then the replay units
                f = cell.graphs[f"fresh-{side}"] = check(cu.cuGraphCreate(0))
                add_chain(f, add_chain(f, None, cell.graphs[f"unit-{side}"], warm), u, calls)
            finally:
                cu.cuGraphDestroy(u)
            out.append((side, fresh, restore))
        return out

    def _segment(self, batch, cell, hf: _Half, h: int, b, key, calls, warm, rounds,
                 opening: bool = False) -> None:  # fmt: skip
        """Rounds of one half into the batch: the opening segment warms side b first. Each
        slot is one launch of a slot graph (slot_graph: L2 normalizer, warm-up, event,
        `calls` calls, event) with the slot's own two events."""
        g = batch.graph
        sides = {"A": self._slot(cell, hf.sa, calls),
                 "B": self._base_slot(b, key, hf.sb, calls, warm)}  # fmt: skip
        if opening:
            base_warm = self._baseline_graphs(None, key, hf.sb, self.stopping)[1][1]
            g.child(base_warm.exec)
        # The settle replay: side a's slot once, untimed (its events are the scratch event),
        # before the poison. Without it the first a-slot of every segment follows other work
        # than a's (the previous cell, the batch's start) and read 4.6% slower than the second
        # over 36-52 MiB fp32 on the H200, the baseline's not at all (docs/timing.md, "The
        # settle replay").
        canary = self._settle(batch, cell, hf, b, key, sides["A"])
        g.child(self._poison_graph(b, key, hf.sa))
        for _ in range(rounds):
            for side in round_slots(hf.first):
                i, e0, e1 = self._slot_events(batch)
                g.slot(*sides[side], e0, e1)
                batch.slots.append((cell, h, side, i))
        self._queue_check(batch, cell, b, key, hf.sa, f"h{h}")
        if canary:  # its output, written by the canary call, counted after the rounds
            self._queue_check(batch, cell, b, key, "C", "canary")

    def canary_launch(self, launcher, b: Buffers, n: int, side: str):
        """One call of a cell's kernel on buffer set `side`'s input into the canary's own
        output (Buffers.y_c): the canary (_settle)."""
        x = b.side(side)[0]
        y = b.output("C")
        return lambda s: launcher(x, y, n, s)

    def _settle(self, batch: _Batch, cell: _Cell, hf: _Half, b: Buffers, key: tuple, slot):
        """Side a's settle replay, after its canary where the cell has one: one call of a
        replay, chosen at random past its first, writes the canary's own output buffer ("C"),
        poisoned before the replay and counted after the segment's rounds (_segment). The
        replay is back to back and untimed, and the canary call looks like any other of it
        (the same kernel, the same input, no node added), so a kernel that skips calls only
        inside a replay skips the canary as often as any call, and its stale output is counted;
        a check after the timed rounds sees only the last call's output, which a skipped call
        leaves right. The canary's replay is a graph of CANARY_CALLS calls of its own, launched
        before the settle replay (canary_graph "own"): a canary call inside the settle replay
        itself ("slot"), at any position, left the first timed slot reading 4-5% slow, as with
        no settle replay at all (docs/timing.md, "The canary"). Whether the segment has a
        canary."""
        g = batch.graph
        name = f"canary-{hf.sa}" if self.canary_graph == "own" else f"slot-{hf.sa}"
        if not self.canary or hf.sa not in cell.canary or name not in cell.cgs:
            g.slot(*slot, self._scratch, self._scratch)
            return False
        cg = cell.cgs[name][1]
        node = cg.calls[1 + int(self._canary_rng.integers(len(cg.calls) - 1))]
        g.child(self._poison_graph(b, key, "C"))
        g.canary(cg.exec, cg.events, self._scratch, node, cell.canary[hf.sa], cell.params[hf.sa])
        if self.canary_graph == "own":
            g.slot(*slot, self._scratch, self._scratch)
        cell.canaries += 1
        return True

    def _before_slot(self, b: Buffers) -> list:
        """What a slot graph runs before its warm-up: the L2 normalizer's graph, if any."""
        return [b.normalize.graph.graph] if b.normalize is not None else []

    def _base_slot(self, b: Buffers, key: tuple, side: str, calls: int, warm: int):
        """The baseline's slot graph on buffer set `side`, once per size: (instantiated graph,
        its event record nodes)."""
        name = f"slot-base-{side}-{warm}"

        def make():
            timed, warm_g = (gr.graph for gr in self._baseline_graphs(None, key, side,
                                                                      self.stopping)[1])  # fmt: skip
            g, self._slot_nodes[(*key, name)] = slot_graph(
                lambda g, p: add_children(g, p, [*self._before_slot(b), warm_g]),
                lambda g, p: add_children(g, p, [timed]),
                int(self._scratch.handle),
            )
            return g

        ex = self._size_graph(name, key, make)
        return ex, self._slot_nodes[(*key, name)]

    def _finish(self, batch: _Batch, dtype: str, n: int):
        """Wait for a batch, read its events and counters, decide every half it timed.
        Returns (cells now complete, top-up segments for the next batch)."""
        host = fresh_host = sm = None
        throttled = False
        for attempt in range(THROTTLE_REPEATS + 1):
            with self.bench.clock("batch-wait"):
                batch.done_event.synchronize()
            self._count_span(batch)
            if int(self._timed_out[batch.parity][0]):
                self.bench.timed_out[0] = 0
                raise SweeperError(
                    "the blocking kernel timed out before a batch was released; the "
                    "measurement was discarded (fewer cells per batch: batch_cells)"
                )
            if host is None:  # the checks' counts: the first launch's
                host = self._counters_host[batch.parity].copy()
                fresh_host = self._fresh_host[batch.parity].copy()
                if int(host[-1]) != batch.next_counter or batch.next_counter >= host.size:
                    raise SweeperError(
                        f"a batch's checks counted into {int(host[-1])} counters, not the "
                        f"{batch.next_counter} queued; its measurement was discarded"
                    )
            with self.bench.clock("batch-clocks"):
                res = batch.clocks.result()
            sm = res.sm_mhz if self.clocks.available else None
            throttled = bool(res.throttled)
            last = attempt == THROTTLE_REPEATS
            self.clocks.note(res, kept=not throttled or last)
            if not throttled or last:
                break
            with self.bench.clock("batch-launch"):  # the same batch again: its timing only
                self._launch(batch)
        with self.bench.clock("batch-read"):
            pool = self._events[batch.parity]
            calls = self._base_calls[(dtype, n)]
            for cell, h, side, i in batch.slots:
                us = self.cuda.event_elapsed_time(pool[i], pool[i + 1]) * 1e3 / calls
                hf = cell.halves[h]
                (hf.a_us if side == "A" else hf.b_us).append(us)
                hf.order.append(side)
            for cell, what, j in batch.counters:
                v = int(host[j])
                if what == "pre":
                    cell.bad_pre += v
                elif what == "soak":
                    cell.bad_soak += v
                elif what == "canary":
                    cell.bad_canary += v
                else:
                    cell.bad += v
            for cell, fresh in batch.fresh:
                c = fresh.counter_index
                cell.stale += int(fresh_host[c + 1])
                cell.checked += fresh.table.calls * fresh.table.words
        touched = list(dict.fromkeys(c for c, *_ in batch.slots))
        for cell in batch.new:
            cell.sm_mhz, cell.throttled = sm, throttled
        finished, topups = [], []
        with self.bench.clock("stopping"):
            open_halves = [hf for cell in touched for hf in cell.halves if not hf.done]
            for hf, done in zip(open_halves, _halves_done(open_halves), strict=True):
                hf.done = done
            for cell in touched:
                topups += [(cell, h) for h, hf in enumerate(cell.halves) if not hf.done]
                if all(hf.done for hf in cell.halves):
                    finished.append(cell)
        return finished, topups

    def _timing(self, cell: _Cell) -> PairTiming | None:
        """A measured cell's samples, its halves merged; None where it has no timing to
        summarise (failed before it was queued, or its pre-check)."""
        row = cell.row
        if row["status"] == "error" or cell.bad_pre:
            return None
        calls = self._base_calls.get((row["dtype"], row["n"]), 1)
        return merge_timings([PairTiming(np.array(hf.a_us), np.array(hf.b_us), calls, "hot",
                                         hf.order) for hf in cell.halves])  # fmt: skip

    def _rows(self, cells: list[_Cell]) -> list[dict]:
        """The rows of measured cells (_row), their summaries' bootstraps drawn together."""
        try:
            timings = [self._timing(cell) for cell in cells]
            with self.bench.clock("summary"):
                found = iter(summaries([t for t in timings if t is not None]))
        except BaseException:
            for cell in cells:
                cell.destroy(self._cell_pool, self._cell_graphs)
            raise
        return [self._row(cell, t, next(found) if t is not None else None)
                for cell, t in zip(cells, timings, strict=True)]  # fmt: skip

    def _row(self, cell: _Cell, timing: PairTiming | None, summary: dict | None) -> dict:
        """The classic executor's row for a measured cell (GpuExecutor._measure), from its
        timing and that timing's summary (_rows)."""
        row = cell.row
        try:
            if row["status"] == "error":
                return row
            if cell.bad_pre:
                return {**row, "status": "mismatch",
                        "status_detail": f"pre-check: {cell.bad_pre} words"}  # fmt: skip
            assert timing is not None and summary is not None
            row.update(summary)
            row["gbps"] = row["ws_bytes"] / summary["time_us"] / 1e3
            row["samples_us"] = [float(f"{t:.4g}") for t in timing.a_us]
            row["base_samples_us"] = [float(f"{t:.4g}") for t in timing.b_us]
            row["sample_parts"] = list(timing.parts)
            row["batch"], row["batch_pos"], row["batch_cells"] = cell.batch, cell.pos, cell.cells
            if cell.sm_mhz is not None:
                row["sm_mhz"] = int(cell.sm_mhz)
            if cell.throttled:
                row["clock_throttled"] = 1
            if cell.canaries:
                row["canaries"] = cell.canaries
            if cell.bad:
                row["status"] = "mismatch"
                row["status_detail"] = (
                    f"after the timed loop: {cell.bad} words differ from the reference"
                )
            elif cell.bad_canary:
                row["status"] = "mismatch"
                row["status_detail"] = (
                    f"canary: {cell.bad_canary} words differ from the reference after "
                    f"{cell.canaries} canary calls (before each settle replay, one call at a "
                    "random position of an untimed back-to-back replay, writing a poisoned "
                    "buffer)"
                )
            elif cell.bad_soak:
                row["status"] = "mismatch"
                row["status_detail"] = (
                    f"after {SOAK_CALLS} calls (timed loop + untimed soak): {cell.bad_soak} "
                    "words differ from the reference"
                )
            elif cell.stale:
                row["status"] = "mismatch"
                row["status_detail"] = (
                    f"fresh input: {cell.stale} of {cell.checked} checked words were stale "
                    "(input rewritten at random positions before every call, output checked "
                    "after every call)"
                )
            elif cell.state.get("limit", 0) != 0 or cell.state.get("window_bytes", 0) != 0:
                row["status"] = "guard"
                row["status_detail"] = (
                    f"persisting-L2 state changed during the cell: limit {cell.state['limit']} "
                    f"B, stream window {cell.state['window_bytes']} B"
                )
            return row
        finally:
            cell.destroy(self._cell_pool, self._cell_graphs)


def _kernel_key(v) -> str | None:
    """What names a variant's kernel for as long as the process runs: a grid variant's id
    (its kernel is compiled and loaded once per process); None for any other (an adversarial
    or a user's kernel), whose every cell makes its uncaptured first call."""
    from sweeper_kernels.variants import Variant, is_adversarial_id

    if isinstance(v, Variant):
        return v.id
    if isinstance(v, str) and not is_adversarial_id(v):
        return v
    return None


def _halves_done(halves: list[_Half]) -> list[bool]:
    """GpuExecutor's stopping rule for each half (timers.Bench._done, without the time cap):
    enough samples and both sides' CI half-widths within the tolerance, or the cap; the
    half-widths of all of them drawn together (rel_halfwidths)."""
    out: list[bool | None] = []
    asked = []
    for hf in halves:
        n = min(len(hf.a_us), len(hf.b_us))
        if n < hf.stop.min_samples:
            out.append(False)
        elif n >= hf.stop.max_samples:
            out.append(True)
        else:
            out.append(None)
            asked += [np.array(hf.a_us), np.array(hf.b_us)]
    widths = iter(rel_halfwidths(asked))
    return [
        d if d is not None else max(next(widths), next(widths)) <= hf.stop.rel_tol
        for hf, d in zip(halves, out, strict=True)
    ]


def move_kernel():
    """One thread: src[0] into the counter at the cursor (the last element of `counters`),
    the cursor then advanced."""
    from numba import cuda

    @cuda.jit("void(uint64[::1], uint64[::1])")
    def move(counters, src):
        if cuda.grid(1) == 0:
            c = counters[counters.size - 1]
            if c < counters.size - 1:  # past the last counter: the host refuses the batch
                counters[c] = src[0]
            counters[counters.size - 1] = c + 1

    return move
