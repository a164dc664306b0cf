"""The GPU side of the runner: buffers, launchers, correctness checks, guards, timing.

Per (dtype, n) it allocates SEPARATE buffers for the candidate side and the baseline side
(same input contents), the expected output (computed once on the host by the bit-level
reference and compared on the device), and a pristine input copy for after-write mode.

Per candidate cell:
  1. guards reset: persisting-L2 limit 0, persisting lines reset, stream window cleared;
  2. output poisoned, one call, output checked bit-exactly (pre-check);
  3. output poisoned again, timed ABBA against the baseline;
  4. output checked bit-exactly again (catches drift after N calls and skipped work);
  5. correctness on fresh input (sweeper.run.fresh), untimed: the candidate is replayed as it
     was timed, with FRESH_WORDS input words at random positions rewritten before every call
     and the output there checked on the device after every call (catches a kernel that skips
     its work when its output already looks right, or works on one call in k); the input
     words are restored from the pristine copy afterwards;
  6. persisting state read back (catches a candidate that set a window or raised the limit).

Guards: the output checks of 2 and 4 see what the last call wrote, on the same input every
call; the fresh-input replay of 5 changes the input between calls. Its cost per candidate cell
is extra untimed calls on each buffer set (A and B): in hot mode the warm-up calls of a sample
and one graph of the cell's calls per sample, each call bracketed by a one-block rewrite and check
kernel (2 x (calls + warm-up) candidate calls and 4 x calls one-block kernels, the graph built from
captured units like the timed one); in cold and after-write FRESH_BLOCKED_CALLS calls, each
preceded by the flush or the producer (2 x FRESH_BLOCKED_CALLS candidate calls), launched
one by one. No host sync inside the replay; one at its end to read the stale count. It runs
after the timing and restores the input, so it never changes what is timed.

The runner then compares the cell's throughput with the run's ceilings (sweeper.analyze.ceilings).
"""

from __future__ import annotations

import functools
import platform
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from sweeper.errors import USER_ERRORS, SweeperError
from sweeper.ops import working_set
from sweeper.run.fresh import FRESH_BLOCKED_CALLS, FRESH_WORDS, FreshInput, fresh_table
from sweeper.run.timers import (
    BLOCKED_SAMPLES_PER_HOLD,
    Bench,
    ExecPool,
    Graph,
    as_graph,
    capture,
    check,
    cuda_driver,
    kernel_launches,
)
from sweeper.runfolder import EXTERNAL_GRID
from sweeper.stats import HALVES_FIRST, WARM_RULE, PairTiming, Stopping, warm_rule

POISON = 0xABABABAB
# The baseline when torch is not importable: the plainest 16-byte variant.
REFERENCE_CONFIG = "v16-u1-ld.def-st.def-b256-onepass"
# the share of the device memory free at start that sizes kept between calls may hold
# (GpuExecutor.release), and the arrays of a size counted before it is made: inputs a and b,
# their pristine copy, the two outputs, the canary's output, the reference, and two outputs
# more where the call pattern allocates
KEEP_FRACTION = 0.25
BUFFERS_PER_SIZE = 9


def device_pointer(a) -> int:
    return a.__cuda_array_interface__["data"][0]


class HostData:
    """Random input bit patterns and their reference output, per dtype, generated once at a
    geometrically growing size and sliced: ReLU is elementwise, so reference(x)[:n] equals
    reference(x[:n]). Generating 1 GB of data and its reference per planned size was what
    made large sizes (and `sweeper verify`) slow."""

    def __init__(self, seed: int = 0):
        self.seed = seed
        self._cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        # one dtype's cached input and reference on the device: (dtype, x, expected)
        self._device: tuple | None = None

    def get(self, dtype: str, n: int) -> tuple[np.ndarray, np.ndarray]:
        from sweeper_kernels import reference_relu, storage_dtype

        have = self._cache.get(dtype)
        if have is None or have[0].size < n:
            size = max(n, 2 * have[0].size) if have is not None else n
            st = np.dtype(storage_dtype(dtype))
            rng = np.random.default_rng(self.seed)
            host = rng.integers(0, 256, size=size * st.itemsize, dtype=np.uint8).view(st)
            self._cache[dtype] = (host, reference_relu(host, dtype))
        x, expected = self._cache[dtype]
        return x[:n], expected[:n]

    def on_device(self, cuda, dtype: str, n: int) -> tuple[Any, Any]:
        """`get` as device arrays: views of one upload of the whole host cache, made again
        only when the cache grows or the dtype changes. A size's buffers are copied from them
        on the device: a size's setup took 40 ms per call on an H100 when each size copied
        its input and reference from pageable host memory (docs/timing.md)."""
        self.get(dtype, n)
        x, expected = self._cache[dtype]
        dev = self._device
        if dev is None or dev[0] != dtype or dev[1].size != x.size:
            self._device = None  # the old upload freed before the new one is made
            self._device = dev = (dtype, cuda.to_device(x), cuda.to_device(expected))
        return dev[1][:n], dev[2][:n]


class Buffers:
    def __init__(self, cuda, dtype: str, n: int, host: HostData, allocating: bool):
        from sweeper_kernels import storage_dtype

        st = np.dtype(storage_dtype(dtype))
        self.nbytes = n * st.itemsize
        # every array a fresh allocation of its own, filled device to device from the input
        # and reference kept on the device (HostData.on_device)
        x, expected = host.on_device(cuda, dtype, n)
        self.x_a = cuda.device_array_like(x)
        self.x_a.copy_to_device(x)
        self.x_b = cuda.device_array_like(x)
        self.x_b.copy_to_device(x)
        self.src = cuda.device_array_like(x)
        self.src.copy_to_device(x)
        self.y_a = cuda.device_array(n, dtype=st)
        self.y_b = cuda.device_array(n, dtype=st)
        # The allocating call pattern keeps the previous output alive, so a caching
        # allocator alternates two output blocks: reproduce that footprint on both sides.
        self.y_a2 = cuda.device_array(n, dtype=st) if allocating else None
        self.y_b2 = cuda.device_array(n, dtype=st) if allocating else None
        self.y_c = None  # the canary's output (BatchedExecutor.measure_many)
        self.expected = cuda.device_array_like(expected)
        self.expected.copy_to_device(expected)
        cuda.synchronize()  # a device-to-device copy returns before it completes
        self.words = self.nbytes // 4
        self.normalize = None  # Bench.normalizer over all_arrays(), set by GpuExecutor.buffers
        self.epoch = 0  # which setup of a size these are (GpuExecutor.buffers)

    def all_arrays(self) -> list:
        """Every buffer the cell's kernels touch (what the L2 normalizer demotes)."""
        xs = [self.x_a, self.x_b, self.y_a, self.y_b, self.y_a2, self.y_b2, self.y_c, self.src]
        return [a for a in xs if a is not None]

    def output(self, name: str):
        """The output y of buffer set "A" or "B", or the canary's ("C")."""
        return self.y_c if name == "C" else self.side(name)[1]

    def side(self, name: str):
        """(x, y, y2) of buffer set "A" or "B" (y2 is None unless the pattern allocates)."""
        return (self.x_a, self.y_a, self.y_a2) if name == "A" else (self.x_b, self.y_b, self.y_b2)

    def outputs(self, name: str) -> list:
        return [y for y in self.side(name)[1:] if y is not None]


class GpuExecutor:
    def __init__(
        self,
        *,
        baseline: str = "auto",
        pattern: str = "preallocated",
        stopping: Stopping | None = None,
        dram_peak_gbps: float | None = None,
        seed: int = 0,
        workers: int | None = None,
        producer: str = "sm",
        kernels=(),
        baseline_kernel=None,
        dispatch=(),
    ):
        """`kernels`: users' kernels (sweeper_kernels.external.ExternalKernel) timed as one
        more config each; `baseline_kernel`: a user's kernel every candidate is timed
        against instead of `baseline` (labelled by its config name); `dispatch`: shipped
        policies (sweeper.run.dispatch.PolicyDispatch) timed as one more config each, in
        their own mode."""
        if producer not in PRODUCERS:
            raise SweeperError(f"unknown producer {producer!r}; use one of {', '.join(PRODUCERS)}")
        self.producer = producer
        self.bench = Bench()
        self.cuda = self.bench.cuda
        self.stopping = stopping or Stopping()
        self.pattern = pattern
        self.dram_peak_gbps = dram_peak_gbps
        self.seed = seed
        self.workers = workers
        # the sizes kept between calls (buffers, release)
        self._buffers: dict[tuple[str, int], Buffers] = {}
        self._allocations = 0  # sizes set up so far: a Buffers' `epoch`
        # device bytes the kept sizes' buffers may hold: KEEP_FRACTION of the memory free
        # when the executor starts; 0 frees a size as soon as a call is done with it
        free = self.cuda.current_context().get_memory_info()[0]
        self.keep_bytes = int(KEEP_FRACTION * free)
        self._host = HostData(seed)
        self._base_graphs: dict[tuple, Any] = {}  # (dtype, n, side, warm) -> baseline graphs
        self._base_calls: dict[tuple, int] = {}  # (dtype, n) -> hot calls per sample
        # hot mode's warm-up calls per sample: None follows stats.warm_calls; a number fixes
        # it (lab/tools/hot_slots.py compares them)
        self.hot_warm_calls: int | None = None
        # the side that takes the first and last slots of each round, per buffer-swapped half
        # (a: the timed side, b: the one it is timed against); ("a", "a") reproduces the
        # timer of runs made before harness.halves_first_side (lab/tools/export_gap.py compares)
        self.halves_first: tuple[str, str] = HALVES_FIRST
        self.torch = None
        self.kernels = tuple(kernels)
        self.dispatch = tuple(dispatch)
        self.baseline_kernel = baseline_kernel
        self._ext_baselines: dict[str, Any] = {}  # dtype -> launcher of the baseline kernel
        self._ext_checked: set[tuple[str, int]] = set()  # (dtype, n) whose baseline output passed
        if baseline_kernel is not None:
            self.baseline_name = baseline_kernel.config
        elif baseline in ("auto", "torch"):
            try:
                import torch

                if not torch.cuda.is_available():
                    raise ImportError("torch has no CUDA")
                self.torch = torch
                self.torch_stream = torch.cuda.ExternalStream(int(self.bench.stream.handle))
                self.baseline_name = "torch"
            except ImportError as e:
                if baseline == "torch":
                    raise SweeperError(f"--baseline torch asked for, but {e}") from None
        if self.torch is None and baseline_kernel is None:
            self.baseline_name = baseline if baseline not in ("auto", "torch") else REFERENCE_CONFIG
            if baseline == "auto":
                import sys

                print(
                    f"sweeper: torch is not importable, so --baseline auto times every "
                    f"candidate against sweeper's own {REFERENCE_CONFIG}, not torch (the "
                    "manifest, plots and report name it); pip install -e '.[torch]' for torch",
                    file=sys.stderr,
                )
        self._mismatch = _mismatch_kernel()
        self._count = self.cuda.device_array(1, dtype=np.uint64)
        self._fresh_cells = 0  # candidate cells replayed on fresh input (seeds their tables)
        self._fresh_loaded = False  # the replay's kernels launched once outside any capture
        self._fresh: dict[int, FreshInput] = {}  # per buffer set: the replay's device tables
        self._exec_pool = ExecPool()  # the replay's instantiated graphs, updated cell to cell

    # -- Executor protocol ------------------------------------------------------------------
    def describe(self) -> dict:
        from sweeper.plan.gpus import detect

        info = detect()
        versions = {"python": platform.python_version()}
        for mod in ("numba", "numba_cuda", "numpy", "torch", "llvmlite"):
            try:
                m = __import__(mod)
                versions[mod] = getattr(m, "__version__", "?")
            except ImportError:
                versions[mod] = None
        dev = {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(info).items()}
        if self.dram_peak_gbps is not None:
            dev.setdefault("dram_peak_gbps", self.dram_peak_gbps)
        # the thread count of a wave, for the launch rules of users' kernels (cliff report)
        dev.setdefault(
            "max_threads_per_sm", self.cuda.get_current_device().MAX_THREADS_PER_MULTIPROCESSOR
        )
        harness = {
            "buffer_swap": True,  # pair_swapped: each side on both buffer sets
            "l2_normalize_between_slots": bool(self.bench.can_normalize),
            "l2_normalize_error": self.bench.normalize_error,
            "soak_calls": SOAK_CALLS,
            # sweeper.run.fresh: input words rewritten per call, blocked-mode calls per side
            "fresh_input": {"words": FRESH_WORDS, "blocked_calls": FRESH_BLOCKED_CALLS},
            "after_write_producer": self.producer,
            # hot ABBA rounds are queued behind the blocking kernel; a cell's figures are
            # geometric means over its buffer-swapped halves
            "hot_rounds_held": True,
            # round r + 1 is queued behind its own hold while round r runs (Bench.time_pair_hot)
            "hot_rounds_pipelined": True,
            # untimed warm-up calls of a side before each of its hot samples (stats.warm_calls;
            # runs without this field made one)
            "hot_warm_calls": self._warm_rule,
            # which side takes each round's first and last slots, per buffer-swapped half
            # (runs without this field: side a in both)
            "halves_first_side": list(self.halves_first),
            # cold and after-write samples queued per hold of the stream (nvbench: one)
            "blocked_samples_per_hold": BLOCKED_SAMPLES_PER_HOLD,
            "halves": "geometric mean",
        }
        from sweeper_kernels.source import source_fingerprint

        external = {}
        if self.kernels:
            external["external"] = [k.describe() for k in self.kernels]
        if self.baseline_kernel is not None:
            external["baseline_kernel"] = self.baseline_kernel.describe()
        if self.dispatch:
            external["dispatch"] = [d.describe() for d in self.dispatch]
        return {
            **external,
            "device": dev,
            "versions": versions,
            "baseline": self.baseline_name,
            "harness": harness,
            "kernel_source": source_fingerprint(),
        }

    def ceiling_set(self, dtype: str) -> list[Any]:
        """The configs of the L2-resident ceiling's reference set (sweeper.run.runner), beside
        the copy kernel: resident-band shapes of the extended grid, grid-stride over one wave
        included."""
        from sweeper_kernels import Variant

        from sweeper.analyze.ceilings import CEILING_CONFIGS

        return [Variant.parse(f"{dtype}-{c}") for c in CEILING_CONFIGS]

    def variant(self, dtype: str, config: str) -> Any:
        from sweeper_kernels import Variant

        for k in (*self.kernels, *self.dispatch):
            if k.config == config:
                return k.variant(dtype)
        return Variant.parse(f"{dtype}-{config}")

    def neighbours(self, variant: Any) -> list[Any]:
        """The search's climb moves: every extended-grid variant one axis away."""
        return variant.neighbours()

    def baseline_shape(self, dtype: str, n: int) -> dict:
        """The floor of a search (sweeper.run.runner): the grid's config closest to the
        baseline's own launch at n elements. A baseline that is a grid config is its own
        floor; otherwise one baseline call is captured and its graph's kernel nodes read
        (grid and block dimensions, the kernel's name): one kernel launch on a 1-D grid maps
        to `sweeper_kernels.launch.closest_to_launch`. {"config": None, "why": ...} where the
        baseline has no single launch shape to match (several kernels, a 2-D grid)."""
        from sweeper_kernels import Variant
        from sweeper_kernels.launch import closest_to_launch

        if self.torch is None and self.baseline_kernel is None:
            Variant.parse(f"{dtype}-{self.baseline_name}")  # a grid config by construction
            return {"config": self.baseline_name, "exact": True,
                    "source": "the baseline is this config"}  # fmt: skip
        b = self.buffers(dtype, n)
        graph = capture(self.baseline_launch(dtype, b, n, "B"), 1, self.bench.stream, self.bench.h)
        try:
            launches = kernel_launches(graph)
        finally:
            cuda_driver().cuGraphDestroy(graph)
        doc = {"n": n, "launches": launches, "source": "the baseline's captured launch"}
        if len(launches) != 1:
            return {**doc, "config": None,
                    "why": f"the baseline launches {len(launches)} kernels per call"}  # fmt: skip
        k = launches[0]
        if k["grid"][1:] != [1, 1] or k["block"][1:] != [1, 1]:
            return {**doc, "config": None,
                    "why": f"the baseline's launch is not 1-D ({k['grid']} x {k['block']})"}  # fmt: skip
        v, exact = closest_to_launch(dtype, n, k["grid"][0], k["block"][0])
        return {**doc, "config": v.config, "exact": exact}

    def variants(self, grid: str, dtype: str) -> list[Any]:
        """The grid's variants, the users' kernels and the policies' dispatch (for the dtypes
        each covers); grid "external" (sweeper audit): the users' kernels and the policies."""
        from sweeper_kernels import GRIDS

        external = [k.variant(dtype) for k in self.kernels]
        external += [d.variant(dtype) for d in self.dispatch if dtype in d.dtypes]
        if grid == EXTERNAL_GRID:
            return external
        if grid not in GRIDS:
            raise SweeperError(f"unknown grid {grid!r}; known: {', '.join(GRIDS)}")
        return list(GRIDS[grid]([dtype])) + external

    def check_external(self, dtypes) -> None:
        """Compile, load and check every user's kernel (candidates and baseline) for this
        device before anything is written: KernelError with one line on the first problem."""
        from sweeper_kernels.external import ExternalLauncher

        for k in (*self.kernels, *([self.baseline_kernel] if self.baseline_kernel else [])):
            for d in dtypes:
                ExternalLauncher(k.variant(d)).prepare()

    def prepare(self, variants: list[Any]) -> None:
        """Compile every distinct kernel in a process pool (filling Numba's disk cache), then
        load them here, so no compile happens inside a timed cell."""
        import time

        import sweeper_kernels
        from sweeper_kernels.build import warm_kernels
        from sweeper_kernels.external import ExternalVariant

        from sweeper.run.dispatch import DispatchVariant

        t0 = time.perf_counter()
        external = [v for v in variants if isinstance(v, ExternalVariant)]
        for v in [v for v in variants if isinstance(v, DispatchVariant)]:
            v.launcher()  # nvcc builds the policy's header (cached)
        variants = [v for v in variants if not isinstance(v, (ExternalVariant, DispatchVariant))]
        for v in external:
            sweeper_kernels.get_launcher(v).prepare()
        keys = sweeper_kernels.compile_keys(variants)
        results = warm_kernels(keys, workers=self.workers)
        for v in variants:
            sweeper_kernels.get_launcher(v)
        # summed over every prepare of the run (the climb prepares each round's new configs)
        before = getattr(self, "compile_stats", None) or {}
        self.compile_stats = {
            "compile_keys": before.get("compile_keys", 0) + len(keys),
            "compiled": before.get("compiled", 0)
            + sum(1 for _, compiled, _ in results if compiled),
            "seconds": round(before.get("seconds", 0) + time.perf_counter() - t0, 2),
        }

    def phase_seconds(self) -> dict[str, float]:
        """Host wall time by cell phase since the last call ("hot/rounds": ...), exclusive
        (timers.PhaseClock); the runner adds it to the manifest's timing.cell_phases_s."""
        return self.bench.clock.take()

    def replay_graphs(self) -> dict[str, int]:
        """The fresh-input replay's graphs since the last call: updated in place or
        instantiated (timers.ExecPool); the runner adds them to timing.replay_graphs."""
        return self._exec_pool.take_counts()

    def release(self, dtype: str, n: int) -> None:
        """A call is done with this size. Its buffers, its baseline's graphs and its calls
        per sample stay for the next call at the size (a climb round, the confirmation
        round) while the kept sizes fit in `keep_bytes`; `buffers` frees the largest ones
        to make room (a run visits its sizes in turn, so the least recently used would be
        the next one needed; a small size's setup costs as much host time as a large
        one's). A size's setup took 105 ms per call on an H100 when every call made it
        anew (docs/timing.md)."""
        if self.keep_bytes <= 0:
            self.drop(dtype, n)

    def drop(self, dtype: str, n: int) -> None:
        """Free a size: its buffers, its baseline's graphs and its calls per sample."""
        self._buffers.pop((dtype, n), None)
        self._base_calls.pop((dtype, n), None)
        for k in [k for k in self._base_graphs if k[:2] == (dtype, n)]:
            for g in self._base_graphs.pop(k):
                g.close()

    def drop_all(self) -> None:
        for size in {*self._buffers, *self._base_calls, *(k[:2] for k in self._base_graphs)}:
            self.drop(*size)

    def buffers(self, dtype: str, n: int) -> Buffers:
        key = (dtype, n)
        b = self._buffers.get(key)
        if b is None:
            from sweeper_kernels import storage_dtype

            need = BUFFERS_PER_SIZE * n * np.dtype(storage_dtype(dtype)).itemsize
            # what holds no buffers (graphs or calls per sample only), then the largest
            # kept sizes, until this one fits
            for size in {*self._base_calls, *(k[:2] for k in self._base_graphs)}:
                if size not in self._buffers:
                    self.drop(*size)
            while self._buffers and self._kept_bytes() + need > self.keep_bytes:
                self.drop(*max(self._buffers, key=lambda k: self._buffers[k].nbytes))
            with self.bench.clock("size-buffers"):
                try:
                    b = self._new_buffers(dtype, n)
                except Exception as e:  # out of memory: keep nothing, then try again
                    if "OUT_OF_MEMORY" not in str(e) or not self._buffers:
                        raise
                    self.drop_all()
                    b = self._new_buffers(dtype, n)
            self._allocations += 1
            b.epoch = self._allocations
            self._buffers[key] = b
        return b

    def _new_buffers(self, dtype: str, n: int) -> Buffers:
        b = Buffers(self.cuda, dtype, n, self._host, self.pattern == "allocating")
        b.normalize = self.bench.normalizer(b.all_arrays())
        return b

    def _kept_bytes(self) -> int:
        return sum(a.nbytes for b in self._buffers.values() for a in (*b.all_arrays(), b.expected))

    # -- launches -------------------------------------------------------------------------
    def _alternating(self, launch_into, y, y2):
        if y2 is None:
            return lambda s: launch_into(y, s)
        state = {"i": 0}

        def launch(s):
            state["i"] ^= 1
            launch_into(y if state["i"] else y2, s)

        return launch

    def candidate_launch(self, launcher, b: Buffers, n: int, side: str = "A"):
        """`launcher` is made once per cell, so a kernel that counts its calls (the
        adversarial ones) counts every call of the cell, on either buffer set."""
        x, y, y2 = b.side(side)
        return self._alternating(lambda y, s: launcher(x, y, n, s), y, y2)

    def baseline_launch(self, dtype: str, b: Buffers, n: int, side: str = "B"):
        x, y1, y2 = b.side(side)
        if self.torch is not None:
            torch = self.torch
            tx = _as_torch(torch, x, dtype)
            ty = {id(y): _as_torch(torch, y, dtype) for y in (y1, y2) if y is not None}

            def into(y, s):
                with torch.cuda.stream(self.torch_stream):
                    torch.clamp_min(tx, 0, out=ty[id(y)])

            return self._alternating(into, y1, y2)
        from sweeper_kernels import Variant, get_launcher

        if self.baseline_kernel is not None:
            launcher = self._ext_baselines.get(dtype)
            if launcher is None:
                launcher = get_launcher(self.baseline_kernel.variant(dtype))
                self._ext_baselines[dtype] = launcher
            return self._alternating(lambda y, s: launcher(x, y, n, s), y1, y2)
        ref = Variant.parse(f"{dtype}-{self.baseline_name}")
        launcher = get_launcher(ref)
        return self._alternating(lambda y, s: launcher(x, y, n, s), y1, y2)

    def _copy_launch(self, b: Buffers, side: str = "A"):
        """The copy roofline: an SM kernel moving 16-byte vectors (a driver memcpy can run on
        the copy engines, which on the H200 measured ~2.7 TB/s at large sizes: not a ceiling)."""
        x, y, _ = b.side(side)
        return _sm_copy(device_pointer(x), device_pointer(y), b.nbytes // 16)

    def _producer(self, b: Buffers, x):
        """After-write's producer, run just before each timed call: it rewrites the input from
        the pristine copy. "sm" (the default) is an SM kernel writing the input front to back
        in 16-byte vectors, as a preceding layer's epilogue does; "memcpy" is the driver's
        device-to-device copy, which can run on a copy engine and leave L2 in another state
        (docs/methodology.md)."""
        if self.producer == "memcpy":
            return self.bench.copy(x, b.src, b.nbytes)
        src, dst = device_pointer(b.src), device_pointer(x)
        nvec, tail = divmod(b.nbytes, 16)
        vectors = as_graph(_sm_copy(src, dst, nvec), self.bench.stream) if nvec else None
        cu = cuda_driver()

        def launch(s):
            if nvec:
                vectors(s)
            if tail:  # planned sizes are whole vectors; odd test sizes copy their last bytes
                check(
                    cu.cuMemcpyDtoDAsync(
                        dst + 16 * nvec, src + 16 * nvec, tail, cu.CUstream(int(s.handle))
                    )
                )

        return launch

    # -- checks ---------------------------------------------------------------------------
    def _poison(self, y) -> None:
        cu = cuda_driver()
        check(cu.cuMemsetD32Async(device_pointer(y), POISON, y.nbytes // 4, self.bench.h))

    def _poison_all(self, ys) -> None:
        for y in ys:
            self._poison(y)

    def _mismatches_all(self, ys, b: Buffers) -> int:
        return sum(self._mismatches(y, b) for y in ys)

    def count_mismatches(self, y, b: Buffers, counter, stream) -> None:
        """Queue the count of y's 32-bit words that differ from the reference into `counter`
        (a uint64 device array of one element, added to), on `stream`; no sync."""
        blocks = min(4096, (b.words + 255) // 256)
        self._mismatch[blocks, 256, stream](y.view(np.uint32), b.expected.view(np.uint32), counter)

    def _mismatches(self, y, b: Buffers) -> int:
        cu = cuda_driver()
        check(cu.cuMemsetD32Async(device_pointer(self._count), 0, 2, self.bench.h))  # one uint64
        self.count_mismatches(y, b, self._count, self.bench.stream)
        self.bench.sync()
        return int(self._count.copy_to_host()[0])

    def _fresh_input(self, mode: str, launcher, b: Buffers, n: int, key: tuple) -> tuple:
        """Replay the candidate untimed, as it was timed, on input that changes before every
        call (sweeper.run.fresh), on buffer sets A and B in turn: `launcher` is the cell's
        own, so a call counter in it continues; the calls alternate the side's output
        buffers; hot mode replays a sample's warm-up calls and a graph of the cell's calls per
        sample, cold and after-write FRESH_BLOCKED_CALLS calls each preceded by the flush or
        the producer. Returns (stale words, checked words); the input words are restored
        from the pristine copy."""
        words = b.nbytes // 4
        if not words:
            return 0, 0
        expected = self._host.get(key[0], n)[1]
        calls = self._base_calls.get(key, 1) if mode == "hot" else FRESH_BLOCKED_CALLS
        s = self.bench.stream
        cell = self._fresh_cells
        self._fresh_cells += 1
        # two tables, one per buffer set, into device room kept for the executor's lifetime
        tables = [fresh_table(expected, calls, seed=(self.seed, cell, i)) for i in range(2)]
        replays = []
        for i, t in enumerate(tables):
            fresh = self._fresh.get(i)
            if fresh is None or not fresh.fits(t):
                room = max(calls, FRESH_BLOCKED_CALLS, self.stopping.max_calls)
                fresh = self._fresh[i] = FreshInput(self.cuda, room)
            fresh.set_table(t, s)
            replays.append(fresh)
        for side, fresh in zip("AB", replays, strict=True):
            x, y, y2 = b.side(side)
            outs = [o for o in (y, y2) if o is not None]
            state = {"i": 0}

            def call(s, x=x, outs=outs, state=state):
                out = outs[state["i"] % len(outs)]
                state["i"] += 1
                launcher(x, out, n, s)
                return out

            def unit(s, x=x, fresh=fresh, call=call):
                fresh.rewrite(x, s)
                fresh.check(call(s), s)

            if mode == "hot":
                if not self._fresh_loaded:
                    fresh.load(x, y, b.src, s)
                    self._fresh_loaded = True
                # captured first, so the warm-up calls write the first output buffers
                warm = Graph(call, self.warm_calls(key), s, self._exec_pool, ("fresh-warm",))
                graph = Graph(unit, calls, s, self._exec_pool, ("fresh",))
                fresh.reset(s)
                try:
                    warm.launch()
                    graph.launch()
                finally:
                    self.bench.sync()
                    warm.close()
                    graph.close()
            else:
                before = self._producer(b, x) if mode == "after-write" else self.bench.flush
                fresh.reset(s)
                for _ in range(calls):
                    before(s)
                    unit(s)
            fresh.restore(x, b.src, s)
        self.bench.sync()
        stale = sum(f.stale_words() for f in replays)
        return stale, sum(f.table.calls * f.table.words for f in replays)

    # -- cells ----------------------------------------------------------------------------
    def _pair(
        self,
        mode: str,
        a,
        bl,
        b: Buffers,
        key: tuple,
        stop: Stopping,
        prime=None,
        sides="AB",
        baseline_b: bool = False,
        first: str = "a",
    ):
        """Time a against bl. `baseline_b`: bl is this size's baseline, so hot mode replays
        its graphs from the cache (_baseline_graphs); any other side b is captured afresh.
        `first`: the side ("a" or "b") that takes each round's first and last slots."""
        between = b.normalize
        first = first.upper()
        if mode == "hot":
            calls, graphs = None, None
            if baseline_b:
                calls, graphs = self._baseline_graphs(bl, key, sides[1], stop)
            return self.bench.time_pair_hot(
                a, bl, stop, calls=calls, b_graphs=graphs, prime=prime, between=between,
                warm_calls=self.warm_calls(key), first=first,
            )  # fmt: skip
        if mode == "cold":
            return self.bench.time_pair_blocked(
                a, bl, stop, mode="cold", prime=prime, between=between, first=first
            )
        if mode == "after-write":
            return self.bench.time_pair_blocked(
                a,
                bl,
                stop,
                before_a=self._producer(b, b.side(sides[0])[0]),
                before_b=self._producer(b, b.side(sides[1])[0]),
                mode="after-write",
                prime=prime,
                between=between,
                first=first,
            )
        raise SweeperError(f"unknown mode {mode!r}")

    def _baseline_graphs(self, bl, key: tuple, side: str, stop: Stopping):
        """Hot mode's calls per sample at this size, and the baseline's graphs on buffer set
        `side`: calibrated and captured on the first cell of a size, replayed by every later
        cell there (released with the size). Calls per sample follow from the baseline's time,
        so every cell at a size times the same number of calls per sample."""
        if key not in self._base_calls:
            with self.bench.clock("size-calibrate"):
                self._base_calls[key] = self.bench.calibrate_calls(bl, stop)
        calls = self._base_calls[key]
        warm = self.warm_calls(key)
        gkey = (*key, side, warm)
        if gkey not in self._base_graphs:
            s = self.bench.stream
            with self.bench.clock("size-baseline"):
                self._base_graphs[gkey] = (Graph(bl, calls, s), Graph(bl, warm, s))
        return calls, self._base_graphs[gkey]

    @property
    def _warm_rule(self):
        """The hot warm-up rule in force, as the manifest records it (harness.hot_warm_calls)."""
        return WARM_RULE if self.hot_warm_calls is None else self.hot_warm_calls

    def hot_calls(self, dtype: str, n: int) -> int | None:
        """Hot mode's timed calls per sample at this size (None before it was calibrated)."""
        return self._base_calls.get((dtype, n))

    def warm_calls(self, key: tuple) -> int:
        """Hot mode's warm-up calls per sample at (dtype, n)."""
        dtype, n = key[:2]
        return warm_rule(self._warm_rule, self.bench.l2_bytes)(working_set(n, dtype))

    def pair_swapped(
        self,
        mode: str,
        a_on,
        b_on,
        b: Buffers,
        key: tuple,
        stop: Stopping,
        check: bool = False,
        baseline_b: bool = False,
    ) -> SwappedTiming:
        """Time side a against side b in two halves, the buffer sets swapped between them
        (a on A and b on B, then a on B and b on A), each half with half the samples, in
        rounds of a b b a in the first and b a a b in the second (halves_first): neither side
        keeps the faster buffers (placement was worth up to 4% at small sizes on the H200)
        nor the faster slots (on the H200, at a size a second executor had timed in the same
        process, the first and last slots of a hot round read 2% slow; docs/methodology.md). With
        `check`, a's outputs are poisoned after each half's warm-up and compared with the
        reference after it."""
        half = half_stopping(stop)
        parts, bad, made = [], 0, 0
        for (sa, sb), first in zip((("A", "B"), ("B", "A")), self.halves_first, strict=True):
            outs = b.outputs(sa) if check else []

            def prime(outs=outs) -> None:  # after warm-up: only calls from here on fill y
                self._poison_all(outs)

            t = self._pair(
                mode, a_on(sa), b_on(sb), b, key, half, prime=prime, sides=sa + sb,
                baseline_b=baseline_b, first=first,
            )  # fmt: skip
            parts.append(t)
            made += timed_calls(t)
            with self.bench.clock("checks"):
                bad += self._mismatches_all(outs, b)
        return SwappedTiming(merge_timings(parts), bad, made)

    def reference(self, mode: str, dtype: str, n: int) -> list[dict]:
        """Copy roofline and baseline at this size, timed against each other (ABBA)."""
        self.bench.clock.prefix = mode
        with self.bench.clock("reference"):
            return self._reference(mode, dtype, n)

    def _reference(self, mode: str, dtype: str, n: int) -> list[dict]:
        b = self.buffers(dtype, n)
        ws = working_set(n, dtype)
        self.bench.reset_persisting()
        if self.baseline_kernel is not None and (dtype, n) not in self._ext_checked:
            self._check_baseline(dtype, b, n)
        res = self.pair_swapped(
            mode,
            lambda side: self._copy_launch(b, side),
            lambda side: self.baseline_launch(dtype, b, n, side),
            b,
            (dtype, n),
            self.stopping,
            baseline_b=True,
        ).timing.summary()
        common = {"mode": mode, "dtype": dtype, "n": n, "ws_bytes": ws, "status": "ok"}
        copy_gbps = ws / res["time_us"] / 1e3
        copy_row = {
            **common,
            "role": "copy",
            "config": "copy",
            "variant_id": "",
            **{k: res[k] for k in ("time_us", "time_lo_us", "time_hi_us", "n_samples")},
            "gbps": copy_gbps,
            "base_time_us": res["base_time_us"],
            "ratio": res["ratio"],
            "ratio_lo": res["ratio_lo"],
            "ratio_hi": res["ratio_hi"],
            "copy_gbps": copy_gbps,
        }
        base_row = {
            **common,
            "role": "baseline",
            "config": self.baseline_name,
            "variant_id": "",
            "time_us": res["base_time_us"],
            "time_lo_us": res["base_time_lo_us"],
            "time_hi_us": res["base_time_hi_us"],
            "gbps": ws / res["base_time_us"] / 1e3,
            "base_time_us": res["base_time_us"],
            "ratio": 1.0,
            "ratio_lo": 1.0,
            "ratio_hi": 1.0,
            "copy_gbps": copy_gbps,
            "n_samples": res["n_samples"],
        }
        self._copy_gbps = (dtype, n, copy_gbps)
        return [copy_row, base_row]

    def _check_baseline(self, dtype: str, b: Buffers, n: int) -> None:
        """A user's baseline kernel must compute ReLU: its output at this size is checked
        bit-exactly once before it is timed; every ratio would be meaningless otherwise."""
        launch = self.baseline_launch(dtype, b, n, "B")
        self._poison(b.y_b)
        launch(self.bench.stream)
        bad = self._mismatches(b.y_b, b)
        if bad:
            raise SweeperError(
                f"the baseline {self.baseline_name} ({dtype}, n={n}) wrote {bad} 32-bit words "
                "that differ from the reference ReLU; fix the kernel or pick another baseline"
            )
        self._ext_checked.add((dtype, n))

    def measure(self, mode: str, dtype: str, n: int, variant: Any) -> dict:
        """One candidate cell (see the class docstring); its host time is booked by phase on
        the bench's clock."""
        self.bench.clock.prefix = mode
        with self.bench.clock("cell"):
            return self._measure(mode, dtype, n, variant)

    def measure_many(self, mode: str, dtype: str, n: int, variants: list[Any]):
        """The rows of the candidate cells of `variants` at one size, one after another (a
        batched executor yields them as its batches complete)."""
        for v in variants:
            yield self.measure(mode, dtype, n, v)

    def _candidate_row(self, mode: str, dtype: str, n: int, variant: Any) -> dict:
        """A candidate cell's row before it is measured: what it is, status ok."""
        row: dict[str, Any] = {
            "mode": mode,
            "dtype": dtype,
            "n": n,
            "ws_bytes": working_set(n, dtype),
            "role": "candidate",
            "config": variant.config,
            "variant_id": variant.id,
            "vec_bytes": variant.vec_bytes,
            "unroll": variant.unroll,
            "load_hint": variant.load_hint,
            "store_hint": variant.store_hint,
            "block": variant.block,
            "grid": variant.grid,
            "status": "ok",
            "status_detail": "",
        }
        cg = getattr(self, "_copy_gbps", None)
        if cg and cg[:2] == (dtype, n):
            row["copy_gbps"] = cg[2]
        return row

    def _measure(self, mode: str, dtype: str, n: int, variant: Any) -> dict:
        b = self.buffers(dtype, n)
        row = self._candidate_row(mode, dtype, n, variant)
        ws = row["ws_bytes"]
        try:
            self.bench.reset_persisting()
            from sweeper_kernels import get_launcher

            launcher = variant.launcher() if hasattr(variant, "launcher") else get_launcher(variant)
            cand = self.candidate_launch(launcher, b, n, "A")
            with self.bench.clock("checks"):
                self._poison(b.y_a)
                cand(self.bench.stream)
                bad = self._mismatches(b.y_a, b)
            if bad:
                return {**row, "status": "mismatch", "status_detail": f"pre-check: {bad} words"}
            res = self.pair_swapped(
                mode,
                lambda side: self.candidate_launch(launcher, b, n, side),
                lambda side: self.baseline_launch(dtype, b, n, side),
                b,
                (dtype, n),
                self.stopping,
                check=True,
                baseline_b=True,
            )
            timing, bad = res.timing, res.bad
            with self.bench.clock("summary"):
                summary = timing.summary()
            where = "after the timed loop"
            if not bad and res.calls < SOAK_CALLS:
                # Too few calls to reach an after-N-calls change (cold mode makes one call per
                # sample): call on, untimed, then check again.
                outputs = b.outputs("B")
                soak = self.candidate_launch(launcher, b, n, "B")
                with self.bench.clock("checks"):
                    self._poison_all(outputs)
                    for _ in range(SOAK_CALLS - res.calls):
                        soak(self.bench.stream)
                    bad = self._mismatches_all(outputs, b)
                where = f"after {SOAK_CALLS} calls (timed loop + untimed soak)"
            stale = checked = 0
            if not bad:
                with self.bench.clock("fresh"):
                    stale, checked = self._fresh_input(mode, launcher, b, n, (dtype, n))
            state = self.bench.persisting_state()
        except USER_ERRORS as e:
            return {**row, "status": "error", "status_detail": str(e)}
        row.update(summary)
        row["gbps"] = ws / summary["time_us"] / 1e3
        row["samples_us"] = [float(f"{t:.4g}") for t in timing.a_us]
        row["base_samples_us"] = [float(f"{t:.4g}") for t in timing.b_us]
        row["sample_parts"] = list(timing.parts)  # samples per buffer-swapped half
        if bad:
            row["status"] = "mismatch"
            row["status_detail"] = f"{where}: {bad} words differ from the reference"
        elif stale:
            row["status"] = "mismatch"
            row["status_detail"] = (
                f"fresh input: {stale} of {checked} checked words were stale (input rewritten "
                "at random positions before every call, output checked after every call)"
            )
        elif state["limit"] != 0 or state["window_bytes"] != 0:
            row["status"] = "guard"
            row["status_detail"] = (
                f"persisting-L2 state changed during the cell: limit {state['limit']} B, "
                f"stream window {state['window_bytes']} B"
            )
            self.bench.reset_persisting()
        return row


# Every candidate is called at least this many times after warm-up before its output's last
# check, so a kernel that changes behaviour after N < SOAK_CALLS calls is caught in every mode.
SOAK_CALLS = 64
PRODUCERS = ("sm", "memcpy")  # after-write's producer (GpuExecutor._producer)


@dataclass
class SwappedTiming:
    timing: PairTiming  # both halves, samples concatenated (pairs stay adjacent)
    bad: int  # output words that differed from the reference after the halves
    calls: int  # calls of side a made after its outputs were poisoned


def half_stopping(stop: Stopping) -> Stopping:
    """The stopping rule of one of the two buffer-swapped halves of a cell."""
    return replace(
        stop,
        min_samples=max(2, -(-stop.min_samples // 2)),
        max_samples=max(2, -(-stop.max_samples // 2)),
        time_cap_s=stop.time_cap_s / 2,
    )


def merge_timings(parts: list[PairTiming]) -> PairTiming:
    """The halves of a buffer-swapped cell as one PairTiming whose summary weighs each half
    equally (pairs trimmed to whole a/b pairs per half)."""
    k = [min(p.a_us.size, p.b_us.size) for p in parts]
    return PairTiming(
        np.concatenate([p.a_us[:n] for p, n in zip(parts, k, strict=True)]),
        np.concatenate([p.b_us[:n] for p, n in zip(parts, k, strict=True)]),
        parts[0].calls,
        parts[0].mode,
        [o for p in parts for o in p.order],
        tuple(k),
    )


def timed_calls(timing) -> int:
    """Candidate calls made after `prime` in a PairTiming: hot mode replays a graph of
    `calls` calls plus one warm call per A sample; blocked modes make one call per sample."""
    per_sample = timing.calls + 1 if timing.mode == "hot" else 1
    return len(timing.a_us) * per_sample


def _as_torch(torch, arr, dtype: str):
    t = torch.as_tensor(arr, device="cuda")
    if dtype == "bf16":
        t = t.view(torch.bfloat16)
    return t


def _sm_copy(src: int, dst: int, nvec: int):
    """A launch of the SM copy kernel over `nvec` 16-byte vectors, src -> dst (addresses)."""
    kernel = _copy_kernel()
    blocks = max(1, min((nvec + 255) // 256, 2**31 - 1))

    def launch(s):
        kernel[blocks, 256, s](src, dst, nvec)

    return launch


@functools.cache
def _copy_kernel():
    from numba import cuda
    from sweeper_kernels.intrinsics import to_global, vector_load, vector_store

    ld, st, tg = vector_load(4, "default"), vector_store(4, "default"), to_global()

    @cuda.jit("void(int64, int64, int64)")
    def copy16(x, y, nvec):
        xa = tg(x)
        ya = tg(y)
        i = cuda.grid(1)
        if i < nvec:
            w = ld(xa, i)
            st(ya, i, w[0], w[1], w[2], w[3])

    return copy16


def _mismatch_kernel():
    from numba import cuda

    @cuda.jit("void(uint32[::1], uint32[::1], uint64[::1])")
    def mismatches(y, e, count):
        i = cuda.grid(1)
        stride = cuda.gridsize(1)
        local = 0
        while i < y.size:
            if y[i] != e[i]:
                local += 1
            i += stride
        if local:
            cuda.atomic.add(count, 0, local)

    return mismatches
