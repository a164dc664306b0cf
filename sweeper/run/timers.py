"""Timers, residency modes, guards and statistics. The only sweeper module that talks to CUDA.

How a time is taken (no host launch overhead in any figure):

* hot (default): the candidate's calls are captured once into a CUDA graph of `calls`
  back-to-back launches; a sample is one replay of that graph between two CUDA events,
  preceded (outside the events) by one warm-up call, so every sample measures the repeated-call
  steady state and never the other side's leftovers. Per-call time = elapsed / calls. Each
  ABBA round of samples is queued behind the blocking kernel and then released, so no slot's
  events can time the host still submitting its graph (the first slot of a round used to).
  The next round is queued behind its own hold while one runs, so the host's queueing
  overlaps the GPU's work.
* cold / after-write: the stream is held by a blocking kernel (as nvbench does) while a
  sample is queued: [flush or producer] [event] [one call] [event]; then released. The host's
  ~26 us per Numba launch is paid while the GPU waits, so it is never timed. cold writes
  2 x L2 bytes before every call; after-write copies the pristine input into the input
  buffer (a producer kernel) just before every call. One sample per hold, as nvbench times
  it (BLOCKED_SAMPLES_PER_HOLD): with eight queued per hold the first three of a hold read
  2-12% slow at 4-48 MiB on the H200 and the mean up to 11% above nvbench's
  (docs/methodology.md, "Cold timing and nvbench"; tests/gpu/test_nvbench_gpu.py).

Candidate and baseline are timed in counterbalanced order (A B B A ..., or B A A B ... with
`first` "B", which the executor uses for a cell's second half) on separate buffers; the
ratio's confidence interval comes from a paired bootstrap over adjacent samples.

Between the slots of a pairing (outside the events, before the warm-up call or the flush),
`between` can demote every line of the cell's buffers to normal L2 priority
(`applypriority.global.L2::evict_normal`, `Bench.normalizer`): an evict_last candidate's input
lines otherwise outlive its turn, shrink the L2 the baseline gets, and inflate the candidate's
ratio (on the H200 torch measured 3-8% slower at 30-44 MiB when paired with evict_last
candidates than with others at the same size), and survive a cold flush. With it the
report's pairing check finds no such slowdown in that range (docs/methodology.md).
The blocked timer launches every piece of a cell once before it holds the stream: a kernel's
first launch can load its module (CUDA lazy loading), which waits for the held stream.

Guards: the persisting-L2 limit is set to 0, persisting lines are reset and the stream's
access-policy window cleared (and read back) before every cell; `persisting_state()` is read
again after the cell so a candidate that changes any of it is caught. The output checks and
the fresh-input replay are the executor's (sweeper.run.executor, sweeper.run.fresh): the
replay runs after the timers return, untimed, and builds its hot graph with `Graph` from
captured units, so the candidate's calls are chained as in the timed graph.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from functools import cache

import numpy as np

from sweeper.errors import NoGPUError, SweeperError
from sweeper.stats import PairTiming, Stopping, calls_per_sample, rel_halfwidth

Launch = Callable[[object], None]  # launch(numba_stream) enqueues one call

# Cold and after-write samples queued per hold of the stream. nvbench holds the stream for one
# sample; queued eight per hold, the first three of a hold read 2-12% above nvbench at 4-48 MiB
# on the H200 and one per hold came within 1.2% (lab/h200/cold-slots).
BLOCKED_SAMPLES_PER_HOLD = 1


class PhaseClock:
    """Host wall time by phase of a cell, exclusive: a phase entered inside another pauses
    it, so the phases sum to the time spent inside any of them. The runner records the sums
    in the manifest (timing.cell_phases_s), which says where a run's cells spent their time
    (docs/methodology.md, "Where a cell's time goes"). Names are prefixed by `prefix` (the
    executor sets the mode)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.prefix = ""
        self._stack: list[str] = []
        self._t = 0.0

    @contextlib.contextmanager
    def __call__(self, name: str):
        now = time.perf_counter()
        if self._stack:
            self._add(self._stack[-1], now - self._t)
        self._stack.append(f"{self.prefix}/{name}" if self.prefix else name)
        self._t = now
        try:
            yield
        finally:
            now = time.perf_counter()
            self._add(self._stack.pop(), now - self._t)
            self._t = now

    def _add(self, key: str, dt: float) -> None:
        self.seconds[key] = self.seconds.get(key, 0.0) + dt

    def take(self) -> dict[str, float]:
        """The sums so far, and start again from zero."""
        out, self.seconds = self.seconds, {}
        return out


# ---------------------------------------------------------------------------------------------
# CUDA plumbing (imported lazily)


@cache
def cuda_driver():
    from cuda.bindings import driver

    return driver


def check(result):
    """Unpack a cuda-bindings (err, *values) tuple; raise on error."""
    err = result[0]
    if err:  # CUresult is an int; CUDA_SUCCESS is 0
        cu = cuda_driver()
        _, name = cu.cuGetErrorName(err)
        raise SweeperError(f"CUDA driver error {name.decode() if name else err}")
    rest = result[1:]
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else rest


def require_gpu():
    """Import numba.cuda and make sure a GPU is usable; NoGPUError otherwise."""
    try:
        from numba import cuda
    except Exception as e:  # pragma: no cover - depends on the install
        raise NoGPUError(f"numba-cuda is not importable ({e}); see README: Install") from None
    try:
        if not cuda.is_available():
            from sweeper.devices import chosen_device

            asked = chosen_device()
            where = f"device {asked} is not present: " if asked not in (None, "0") else ""
            raise NoGPUError(
                f"{where}no CUDA GPU is usable here (numba.cuda.is_available() is False)"
            )
        cuda.current_context()
    except NoGPUError:
        raise
    except Exception as e:
        raise NoGPUError(f"no CUDA GPU is usable here ({e})") from None
    return cuda


@cache
def _globaltimer():
    """An intrinsic that reads %globaltimer (ns)."""
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def globaltimer(typingctx):
        sig = types.uint64()

        def codegen(context, builder, signature, args):
            fnty = ir.FunctionType(ir.IntType(64), [])
            asm = ir.InlineAsm(fnty, "mov.u64 $0, %globaltimer;", "=l", side_effect=True)
            return builder.call(asm, [])

        return sig, codegen

    return globaltimer


@cache
def _helpers():
    """Small kernels the timer needs: a blocking kernel, a spin kernel, an empty kernel."""
    from llvmlite import ir
    from numba import cuda, types
    from numba.cuda.extending import intrinsic

    globaltimer = _globaltimer()

    @intrinsic
    def load_volatile_i32(typingctx, ptr):
        sig = types.int32(types.uint64)

        def codegen(context, builder, signature, args):
            fnty = ir.FunctionType(ir.IntType(32), [ir.IntType(64)])
            asm = ir.InlineAsm(fnty, "ld.volatile.global.u32 $0, [$1];", "=r,l", side_effect=True)
            return builder.call(asm, args)

        return sig, codegen

    @cuda.jit("void(uint64, uint64, int32[:])")
    def blocker(flag_ptr, timeout_ns, timed_out):
        start = globaltimer()
        while load_volatile_i32(flag_ptr) == 0:
            if globaltimer() - start > timeout_ns:
                timed_out[0] = 1
                return

    @cuda.jit("void(uint64)")
    def spin(ns):
        start = globaltimer()
        while globaltimer() - start < ns:
            pass

    @cuda.jit("void()")
    def empty():
        pass

    return blocker, spin, empty


@cache
def _ticks_kernel():
    """A kernel that records the steps %globaltimer advances by (Bench.timer_step_ns)."""
    from numba import cuda

    globaltimer = _globaltimer()

    @cuda.jit("void(uint64[:])")
    def ticks(out):
        # the steps %globaltimer advances by: each entry the change between two readings
        # that differ, so each is a whole number of the timer's updates
        last = globaltimer()
        i = 0
        while i < out.size:
            t = globaltimer()
            if t != last:
                out[i] = t - last
                last = t
                i += 1

    return ticks


@cache
def _normalizer_kernel():
    from numba import cuda

    return cuda.jit(NORMALIZE_SIGNATURE)(normalize_function())


def normalize_function():
    """The L2 normalizer's Python function (NORMALIZE_SIGNATURE): for up to NORMALIZE_SPANS
    (base, lines) pairs, every 128-byte line of [base, base + 128 * lines) back to normal
    eviction priority, in one launch (a Numba launch costs ~26 us of host time, and this runs
    before every slot). PTX-checkable on the CPU."""
    from llvmlite import ir
    from numba import cuda, types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def evict_normal(typingctx, addr):
        if not isinstance(addr, types.Integer):
            return None
        sig = types.void(types.int64)

        def codegen(context, builder, signature, args):
            fnty = ir.FunctionType(ir.VoidType(), [ir.IntType(64)])
            asm = ir.InlineAsm(fnty, NORMALIZE_ASM, "l,~{memory}", side_effect=True)
            builder.call(asm, args)
            return context.get_dummy_value()

        return sig, codegen

    @cuda.jit(device=True, inline="always")
    def span(base, lines, i, step):
        while i < lines:
            evict_normal(base + i * 128)
            i += step

    def normalize(b0, n0, b1, n1, b2, n2, b3, n3, b4, n4, b5, n5, b6, n6, b7, n7):
        # up to NORMALIZE_SPANS buffers in one launch; an unused slot has 0 lines
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        span(b0, n0, i, step)
        span(b1, n1, i, step)
        span(b2, n2, i, step)
        span(b3, n3, i, step)
        span(b4, n4, i, step)
        span(b5, n5, i, step)
        span(b6, n6, i, step)
        span(b7, n7, i, step)

    return normalize


NORMALIZE_SPANS = 8
NORMALIZE_SIGNATURE = "void(" + ", ".join(["int64"] * (2 * NORMALIZE_SPANS)) + ")"
# One 128-byte L2 line back to normal eviction priority (sm_80+; `a` 128-byte aligned).
NORMALIZE_ASM = (
    "{\n.reg .b64 g;\ncvta.to.global.u64 g, $0;\napplypriority.global.L2::evict_normal [g], 128;\n}"
)


class ExecPool:
    """Instantiated graphs kept for reuse: a new graph of the same shape updates one
    (cuGraphExecUpdate: same topology, new kernels and arguments) instead of instantiating
    its own, which costs the host time proportional to its nodes. An update the driver
    refuses (another topology) falls back to instantiating. The classic executor's
    fresh-input replay and the batched executor's cell graphs use it."""

    def __init__(self) -> None:
        self._free: dict[tuple, list] = {}
        # instantiated graph -> (the graph it was instantiated from, that graph's named
        # nodes), for graphs taken with take_addressed; the pool owns those graphs
        self._origin: dict[int, tuple] = {}
        self.updated = self.instantiated = 0

    def take(self, key: tuple, graph):
        cu = cuda_driver()
        free = self._free.get(key) or []
        while free:
            ex = free.pop()
            if cu.cuGraphExecUpdate(ex, graph)[0] == cu.CUresult.CUDA_SUCCESS:
                self.updated += 1
                return ex
            cu.cuGraphExecDestroy(ex)
            origin = self._origin.pop(int(ex), None)
            if origin is not None:
                cu.cuGraphDestroy(origin[0])
        self.instantiated += 1
        return check(cu.cuGraphInstantiate(graph, 0))

    def take_addressed(self, key: tuple, graph, nodes: tuple):
        """As take, for a graph some of whose nodes are set on the instantiated graph later
        (cuGraphExec*SetParams, cuGraphExecEventRecordNodeSetEvent). CUDA names such a node by
        the graph the instantiated one was made from, not by a graph it was later updated
        from, so an instantiation keeps its first graph and that graph's `nodes` (the same
        nodes of a graph of the same shape). Returns (instantiated graph, the nodes to
        address it by, whether the pool took `graph` over: then the caller must not destroy
        it)."""
        ex = self.take(key, graph)
        origin = self._origin.get(int(ex))
        if origin is not None:
            return ex, origin[1], False
        self._origin[int(ex)] = (graph, nodes)
        return ex, nodes, True

    def give(self, key: tuple, ex) -> None:
        """Back for reuse (launches already queued are not affected by a later update)."""
        self._free.setdefault(key, []).append(ex)

    def take_counts(self) -> dict[str, int]:
        """Graphs updated in place and instantiated so far, and start again from zero."""
        out = {"updated": self.updated, "instantiated": self.instantiated}
        self.updated = self.instantiated = 0
        return out


class Graph:
    """`calls` back-to-back launches in one CUDA graph, replayed on a stream.

    Up to CAPTURE_CALLS calls are captured as they are. More are built from captured units:
    two calls (so a launch that alternates its output buffers keeps alternating) chained as
    child-graph nodes, plus one more call when `calls` is odd. The replay is the same sequence
    of kernels as a full capture, without paying the host's launch cost (28-45 us per Numba
    launch on the H200 machine) once per call: chaining 64 one-call graphs took 0.6-0.7 ms
    where capturing 64 calls took 2.3-3.2 ms, and both replays timed 11.67-11.70 us per call at
    45 MiB (docs/methodology.md, "Where a cell's time goes")."""

    def __init__(self, launch: Launch, calls: int, stream, pool: ExecPool | None = None,
                 key: tuple = ()):  # fmt: skip
        cu = cuda_driver()
        self.calls = calls
        self.pool, self.key = pool, (*key, calls)
        self.h = cu.CUstream(int(stream.handle))
        self.graph = self.exec = None
        if calls <= CAPTURE_CALLS:
            self.graph = capture(launch, calls, stream, self.h)
        else:
            pair = capture(launch, 2, stream, self.h)
            single = capture(launch, 1, stream, self.h) if calls % 2 else None
            try:
                self.graph = check(cu.cuGraphCreate(0))
                prev = None
                for child in [pair] * (calls // 2) + ([single] if single else []):
                    deps = [prev] if prev is not None else None
                    prev = check(
                        cu.cuGraphAddChildGraphNode(self.graph, deps, len(deps or ()), child)
                    )
            finally:
                for g in (pair, single):
                    if g is not None:
                        cu.cuGraphDestroy(g)
        if pool is not None:
            self.exec = pool.take(self.key, self.graph)
        else:
            self.exec = check(cu.cuGraphInstantiate(self.graph, 0))

    def launch(self) -> None:
        check(cuda_driver().cuGraphLaunch(self.exec, self.h))

    def close(self) -> None:
        cu = cuda_driver()
        if self.exec is not None:
            if self.pool is not None:
                self.pool.give(self.key, self.exec)
            else:
                cu.cuGraphExecDestroy(self.exec)
            self.exec = None
        if self.graph is not None:
            cu.cuGraphDestroy(self.graph)
            self.graph = None

    def __del__(self):  # pragma: no cover - best effort
        with contextlib.suppress(Exception):
            self.close()


CAPTURE_CALLS = 3  # Graph captures up to this many calls directly, chains units above


def capture(launch: Launch, calls: int, stream, h):
    """A CUDA graph (not instantiated) of `calls` launches captured on `stream`."""
    cu = cuda_driver()
    from numba import cuda

    mode = cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
    # No deferred cuMemFree may run while the stream is being captured.
    with cuda.defer_cleanup():
        check(cu.cuStreamBeginCapture(h, mode))
        try:
            for _ in range(calls):
                launch(stream)
        finally:
            graph = check(cu.cuStreamEndCapture(h))
    return graph


def kernel_launches(graph) -> list[dict]:
    """The kernel launches a graph (not instantiated) holds, child graphs opened, in node
    order: {"kernel": its name (empty where the driver gives none), "grid": [x, y, z],
    "block": [x, y, z]}."""
    cu = cuda_driver()
    count = check(cu.cuGraphGetNodes(graph, 0))[1]
    nodes = check(cu.cuGraphGetNodes(graph, count))[0] if count else []
    types = cu.CUgraphNodeType
    out: list[dict] = []
    for node in nodes:
        kind = check(cu.cuGraphNodeGetType(node))
        if kind == types.CU_GRAPH_NODE_TYPE_GRAPH:
            out += kernel_launches(check(cu.cuGraphChildGraphNodeGetGraph(node)))
        elif kind == types.CU_GRAPH_NODE_TYPE_KERNEL:
            p = check(cu.cuGraphKernelNodeGetParams(node))
            err, name = cu.cuFuncGetName(p.func)
            out.append({
                "kernel": name.decode(errors="replace")[:200] if not err and name else "",
                "grid": [int(p.gridDimX), int(p.gridDimY), int(p.gridDimZ)],
                "block": [int(p.blockDimX), int(p.blockDimY), int(p.blockDimZ)],
            })  # fmt: skip
    return out


def as_graph(launch: Launch, stream) -> Launch:
    """`launch` captured once as a one-call graph: the same kernel at the cost of a graph
    launch (a few us on the host) instead of a Numba launch. For untimed helpers (the L2
    normalizer, after-write's producer) that run before every sample."""
    g = Graph(launch, 1, stream)

    def replay(_stream) -> None:
        g.launch()

    replay.graph = g  # keeps the graph alive as long as the launch
    return replay


def round_slots(first: str) -> str:
    """The sides' order in one round: A B B A, or B A A B where side b goes first."""
    if first not in ("A", "B"):
        raise ValueError(f"first must be 'A' or 'B', not {first!r}")
    return "ABBA" if first == "A" else "BAAB"


class Bench:
    """One GPU, one stream, the flush buffer and the guards. Create once per run."""

    def __init__(self, l2_bytes: int | None = None, block_timeout_s: float = 20.0):
        cuda = require_gpu()
        self.cuda = cuda
        cu = cuda_driver()
        self.stream = cuda.stream()
        self.h = cu.CUstream(int(self.stream.handle))
        dev = check(cu.cuCtxGetDevice())
        attr = cu.CUdevice_attribute
        self.l2_bytes = l2_bytes or check(
            cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev)
        )
        self.persisting_max = check(
            cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, dev)
        )
        # Flush buffer: 2 x L2 bytes, written (memset) before every cold call.
        self.flush_words = 2 * self.l2_bytes // 4
        self.flush_buf = cuda.device_array(self.flush_words, dtype=np.uint32)
        self.flag = cuda.mapped_array(2, dtype=np.int32)  # two holds: hot rounds are pipelined
        self.timed_out = cuda.to_device(np.zeros(1, dtype=np.int32))  # device_array is not zeroed
        self.block_timeout_ns = int(block_timeout_s * 1e9)
        self._events: list = []
        self.clock = PhaseClock()
        self.blocker, self.spin_kernel, self.empty_kernel = _helpers()
        major = check(
            cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
        )
        # The L2 normalizer (applypriority is sm_80+). If it cannot be built, the timers still
        # work without it, and the manifest (executor.describe) says so and why.
        self._normalize = None
        self.normalize_error = "applypriority needs sm_80+" if major < 8 else ""
        if major >= 8:
            try:
                self._normalize = _normalizer_kernel()
            except Exception as e:  # noqa: BLE001 - recorded, not hidden
                self.normalize_error = f"{type(e).__name__}: {e}"
        self.can_normalize = self._normalize is not None
        self.sm_count = check(
            cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev)
        )

    # -- guards ---------------------------------------------------------------------------
    def reset_persisting(self) -> None:
        """Persisting-L2 limit 0, persisting lines reset, stream window cleared (read back)."""
        cu = cuda_driver()
        check(cu.cuCtxSetLimit(cu.CUlimit.CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 0))
        check(cu.cuCtxResetPersistingL2Cache())
        v = cu.CUstreamAttrValue()
        v.accessPolicyWindow.base_ptr = 0
        v.accessPolicyWindow.num_bytes = 0
        v.accessPolicyWindow.hitRatio = 0.0
        v.accessPolicyWindow.hitProp = cu.CUaccessProperty.CU_ACCESS_PROPERTY_NORMAL
        v.accessPolicyWindow.missProp = cu.CUaccessProperty.CU_ACCESS_PROPERTY_NORMAL
        attr = cu.CUstreamAttrID.CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW
        check(cu.cuStreamSetAttribute(self.h, attr, v))
        state = self.persisting_state()
        if state["limit"] != 0 or state["window_bytes"] != 0:
            raise SweeperError(f"could not clear persisting-L2 state: {state}")

    def persisting_state(self) -> dict:
        cu = cuda_driver()
        limit = check(cu.cuCtxGetLimit(cu.CUlimit.CU_LIMIT_PERSISTING_L2_CACHE_SIZE))
        attr = cu.CUstreamAttrID.CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW
        v = check(cu.cuStreamGetAttribute(self.h, attr))
        return {
            "limit": int(limit),
            "window_bytes": int(v.accessPolicyWindow.num_bytes),
            "hit_ratio": float(v.accessPolicyWindow.hitRatio),
        }

    # -- building blocks -------------------------------------------------------------------
    def event(self, i: int):
        while len(self._events) <= i:
            self._events.append(self.cuda.event(timing=True))
        return self._events[i]

    def flush(self, stream=None) -> None:
        cu = cuda_driver()
        h = self.h if stream is None else cu.CUstream(int(stream.handle))
        ptr = self.flush_buf.__cuda_array_interface__["data"][0]
        check(cu.cuMemsetD32Async(ptr, 0x5A5A5A5A, self.flush_words, h))

    def copy(self, dst, src, nbytes: int) -> Launch:
        """A launch that copies nbytes device-to-device (the copy roofline / producer)."""
        cu = cuda_driver()
        d = dst.__cuda_array_interface__["data"][0]
        s = src.__cuda_array_interface__["data"][0]

        def launch(stream):
            check(cu.cuMemcpyDtoDAsync(d, s, nbytes, cu.CUstream(int(stream.handle))))

        return launch

    def normalizer(self, arrays) -> Launch | None:
        """A launch that demotes every L2 line of `arrays` (device arrays) to normal eviction
        priority: what sits in L2 stays, but no side's evict_last lines outlive its turn.
        None where the GPU has no applypriority (before sm_80)."""
        if not self.can_normalize:
            return None
        spans = [
            (a.__cuda_array_interface__["data"][0], a.nbytes // 128) for a in arrays if a.nbytes
        ]
        if len(spans) > NORMALIZE_SPANS:
            raise SweeperError(f"the L2 normalizer takes at most {NORMALIZE_SPANS} buffers")
        args = [v for sp in spans for v in sp] + [0, 0] * (NORMALIZE_SPANS - len(spans))
        most = max((lines for _, lines in spans), default=0)
        blocks = max(1, min(8 * self.sm_count, -(-most // 256)))
        kernel = self._normalize

        def launch(stream):
            kernel[blocks, 256, stream](*args)

        return as_graph(launch, self.stream)

    def sync(self) -> None:
        self.stream.synchronize()

    def hold(self, k: int = 0) -> None:
        """Launch the blocking kernel on flag k (0 or 1): the stream waits from there until
        _release_flag(k)."""
        self.flag[k] = 0
        ptr = self.flag.__cuda_array_interface__["data"][0] + 4 * k
        self.blocker[1, 1, self.stream](ptr, self.block_timeout_ns, self.timed_out)

    @contextlib.contextmanager
    def held(self, events: int):
        """Queue the block's work behind the blocking kernel; it runs once the block ends.
        Creates the `events` timing events first; while the stream is held nothing on the
        host may wait for the GPU: Numba's deferred cuMemFree would (it synchronises), so
        cleanup is deferred."""
        self.event(events - 1)
        with self.cuda.defer_cleanup():
            self.hold()
            yield
            self.release_hold()

    def release_flag(self, k: int) -> None:
        self.flag[k] = 1

    def _wait(self, event) -> None:
        event.synchronize()

    def _check_timeout(self) -> None:
        if int(self.timed_out.copy_to_host()[0]):
            self.timed_out[0] = 0
            raise SweeperError(
                "the blocking kernel timed out before the queued work was released; "
                "the measurement was discarded (queue fewer calls per batch)"
            )

    def release_hold(self) -> None:
        self.release_flag(0)
        self.sync()
        self._check_timeout()

    # -- timers ------------------------------------------------------------------------------
    def calibrate_calls(self, launch: Launch, stop: Stopping) -> int:
        """Calls per hot graph so one sample is about stop.target_sample_us of GPU time."""
        g = Graph(launch, 4, self.stream)
        try:
            g.launch()
            e0, e1 = self.event(0), self.event(1)
            e0.record(self.stream)
            g.launch()
            e1.record(self.stream)
            e1.synchronize()
            per_call = self.cuda.event_elapsed_time(e0, e1) * 1e3 / 4
        finally:
            g.close()
        return calls_per_sample(per_call, stop)

    def time_pair_hot(
        self,
        a: Launch,
        b: Launch,
        stop: Stopping,
        *,
        calls: int | None = None,
        b_graphs: tuple[Graph, Graph] | None = None,
        prime: Callable[[], None] | None = None,
        between: Launch | None = None,
        warm_calls: int = 1,
        first: str = "A",
    ) -> PairTiming:
        """Hot mode, ABBA over graph replays (BAAB with `first` "B": side b takes a round's
        first and last slots; a cell's buffer-swapped halves take one each, pair_swapped).
        b_graphs lets a baseline graph be reused.
        Every sample is preceded, untimed, by a warm-up replay of `warm_calls` calls of its
        own side (b_graphs' second graph must have as many).
        `prime()` runs after the warm-up calls (calibration) and before the first sample: the
        executor poisons the outputs there, so only calls made after warm-up can fill them.

        Each ABBA round is queued while the blocking kernel holds the stream, then released,
        so the GPU runs the round back to back. Without the hold the round's first slot,
        always A, would start on an idle GPU right after the host's sync, while the host is
        still submitting its timed graph when its start event is recorded, and that latency
        is timed as A's: on the H200 that read 5-7% against side a (an int8 export/Numba pair
        timed both ways round: the export 5.6% slower than its twin as a, 2% faster as b)."""
        with self.clock("graphs"):
            calls = calls or self.calibrate_calls(a, stop)
            ga, wa = Graph(a, calls, self.stream), Graph(a, warm_calls, self.stream)
            own_b = b_graphs is None
            gb, wb = b_graphs or (
                Graph(b, calls, self.stream), Graph(b, warm_calls, self.stream)
            )  # fmt: skip
        if gb.calls != calls or wb.calls != warm_calls:
            raise ValueError("baseline graphs were captured with a different number of calls")
        # a first launch may load a module (lazy loading): never under the hold
        if between is not None:
            between(self.stream)
        wa.launch()
        wb.launch()
        self.sync()
        if prime is not None:
            prime()
        sides = {"A": (wa, ga), "B": (wb, gb)}
        a_us: list[float] = []
        b_us: list[float] = []
        order: list[str] = []
        slots = round_slots(first)
        t_end = time.perf_counter() + stop.time_cap_s

        def queue(r: int) -> None:
            """Round r behind a hold on flag r % 2, its events in set r % 2."""
            base = 2 * len(slots) * (r % 2)
            self.event(base + 2 * len(slots) - 1)
            self.hold(r % 2)
            for i, s in enumerate(slots):
                warm, timed = sides[s]
                if between is not None:
                    between(self.stream)
                warm.launch()
                self.event(base + 2 * i).record(self.stream)
                timed.launch()
                self.event(base + 2 * i + 1).record(self.stream)

        def read(r: int) -> None:
            base = 2 * len(slots) * (r % 2)
            self._wait(self.event(base + 2 * len(slots) - 1))
            for i, s in enumerate(slots):
                e0, e1 = self.event(base + 2 * i), self.event(base + 2 * i + 1)
                us = self.cuda.event_elapsed_time(e0, e1)
                (a_us if s == "A" else b_us).append(us * 1e3 / calls)
            order.extend(slots)

        # Rounds are pipelined: round r + 1 is queued behind its own hold while round r runs,
        # and released once round r's samples are read and the stopping rule asks for more, so
        # the host's queueing overlaps the GPU's work instead of adding to it. A round queued
        # ahead and then not needed is released and run, its samples dropped. Releasing each
        # round as soon as it was queued cut the rounds' host time from 6.3 to 5.2 ms per cell
        # but widened the spread of ratios against another run at <= 16 MiB on the H200
        # (lab/h200/cell-phases, docs/methodology.md "Where a cell's time goes").
        per_round = len(slots) // 2  # samples per side
        try:
            with self.clock("rounds"), self.cuda.defer_cleanup():
                queue(0)
                self.release_flag(0)
                r = 0
                while True:
                    ahead = per_round * (r + 1) < stop.max_samples
                    if ahead:
                        queue(r + 1)
                    read(r)
                    done = self._done(a_us, b_us, stop, t_end)
                    if ahead:
                        self.release_flag((r + 1) % 2)
                    if done or not ahead:
                        break
                    r += 1
                self.sync()
                self._check_timeout()
        finally:
            self.release_flag(0)  # never leave the stream held (an error mid-round)
            self.release_flag(1)
            ga.close()
            wa.close()
            if own_b:
                gb.close()
                wb.close()
        return PairTiming(np.array(a_us), np.array(b_us), calls, "hot", order)

    def time_pair_blocked(
        self,
        a: Launch,
        b: Launch,
        stop: Stopping,
        *,
        before_a: Launch | None = None,
        before_b: Launch | None = None,
        mode: str = "cold",
        prime: Callable[[], None] | None = None,
        between: Launch | None = None,
        per_hold: int = BLOCKED_SAMPLES_PER_HOLD,
        first: str = "A",
    ) -> PairTiming:
        """One call per sample, queued behind a blocking kernel; `before_*` runs untimed
        before every call (cold: the L2 flush; after-write: the producer). `prime()` runs
        after the warm-up calls, before the first sample (see time_pair_hot). Samples are
        taken in A B B A A B B A order (B A A B B A A B with `first` "B"), `per_hold` of them
        queued per hold of the stream; the stopping rule is checked after every eight."""
        if mode == "cold":
            before_a = before_b = lambda s: self.flush(s)
        a_us: list[float] = []
        b_us: list[float] = []
        order: list[str] = []
        t_end = time.perf_counter() + stop.time_cap_s
        # Warm the code paths (module load, first-launch costs) outside any sample, and
        # outside the hold: with CUDA's lazy module loading a kernel's first launch loads its
        # module, which waits for the held stream, so the blocking kernel would time out
        # (found on the H200: a cold run whose first cell was cold, with the L2 normalizer).
        for warm in (before_a, before_b, between, a, b):
            if warm is not None:
                warm(self.stream)
        self.sync()
        if prime is not None:
            prime()
        slots = round_slots(first) * 2
        if per_hold < 1 or len(slots) % per_hold:
            raise ValueError(f"per_hold must divide {len(slots)}, not {per_hold}")
        with self.clock("rounds"):
            while True:
                for start in range(0, len(slots), per_hold):
                    held = slots[start : start + per_hold]
                    with self.held(2 * len(held)):
                        for i, s in enumerate(held):
                            before, launch = (before_a, a) if s == "A" else (before_b, b)
                            if between is not None:
                                between(self.stream)
                            if before is not None:
                                before(self.stream)
                            self.event(2 * i).record(self.stream)
                            launch(self.stream)
                            self.event(2 * i + 1).record(self.stream)
                    for i, s in enumerate(held):
                        us = self.cuda.event_elapsed_time(self.event(2 * i), self.event(2 * i + 1))
                        (a_us if s == "A" else b_us).append(us * 1e3)
                order.extend(slots)
                if self._done(a_us, b_us, stop, t_end):
                    break
        return PairTiming(np.array(a_us), np.array(b_us), 1, mode, order)

    def _done(self, a_us: list, b_us: list, stop: Stopping, t_end: float) -> bool:
        """The stopping rule (its time booked as "stopping" on the clock)."""
        n = min(len(a_us), len(b_us))
        if n < stop.min_samples:
            return False
        if n >= stop.max_samples or time.perf_counter() > t_end:
            return True
        with self.clock("stopping"):
            return max(rel_halfwidth(np.array(a_us)), rel_halfwidth(np.array(b_us))) <= stop.rel_tol

    def time_hot(self, launch: Launch, stop: Stopping, calls: int | None = None) -> np.ndarray:
        """Per-call times of one launch in hot mode (used by the timer self-checks)."""
        res = self.time_pair_hot(launch, launch, stop, calls=calls)
        return np.concatenate([res.a_us, res.b_us])

    def time_single_blocked(self, launch: Launch, samples: int = 20) -> np.ndarray:
        """Events around single launches queued behind a blocking kernel (cold-style timer)."""
        stop = Stopping(min_samples=samples // 2, max_samples=samples // 2, rel_tol=0.0)
        res = self.time_pair_blocked(launch, launch, stop, mode="none")
        return np.concatenate([res.a_us, res.b_us])

    # -- timer self-check kernels -------------------------------------------------------------
    def spin_launch(self, ns: int) -> Launch:
        def launch(stream):
            self.spin_kernel[1, 1, stream](ns)

        return launch

    def timer_step_ns(self, steps: int = 65) -> int:
        """The %globaltimer's update step in ns: the median of `steps` changes between
        successive readings. A spin kernel of T ns (spin_launch) ends at its first reading T
        past its start's, so it spins between T minus one step and T."""
        out = self.cuda.device_array(steps, np.uint64)
        _ticks_kernel()[1, 1, self.stream](out)
        self.stream.synchronize()
        return int(np.median(out.copy_to_host()))

    def empty_launch(self) -> Launch:
        def launch(stream):
            self.empty_kernel[1, 1, stream]()

        return launch
