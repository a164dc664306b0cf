"""One run measured on several GPUs of one model: each size on one GPU, one writer.

The runner decides every round of the search from the cells of every size, so a run is not
cut into independent parts: it runs in one process, which alone writes the run folder, and
hands each size's cells to the GPU that owns the size. A size stays on its GPU for the whole
run (its baseline and copy cells, every candidate, the confirmation round), so every ratio is
still a paired measurement on one device. The planned sizes of a dtype are dealt to the GPUs
in turn (interleaved, so each GPU covers the whole band); a size the search adds between two
planned sizes goes to the GPU of the planned size below it.

`PoolExecutor` is an executor (sweeper.run.runner.Executor) over `Worker`s: a worker owns one
executor on one GPU and answers calls in order. `LocalWorker` runs its executor on a thread of
this process (a replay, tests); `sweeper.run.fleet.RayWorker` runs it in a Ray actor pinned to
a GPU. A worker that is lost (its actor died) has its sizes measured again by another worker;
the runner records a size only once its cells are back, in the order it asked for them, so a
lost worker costs neither a cell nor a duplicate, and a pooled run records the cells a run on
one GPU records, in the same order.
"""

from __future__ import annotations

import bisect
import concurrent.futures as cf
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from sweeper.errors import SweeperError

# what a worker reports it can do, beyond the executor's required methods (runner.Executor)
OPTIONAL = (
    "neighbours",
    "variant",
    "baseline_shape",
    "ceiling_set",
    "check_external",
    "phase_seconds",
    "clock_summary",
    "replay_graphs",
    "batch_spans",
    "measure_many",
)
# the fields of a device record that make two GPUs the same model for a run
SAME_MODEL = ("name", "cc", "sm_count", "l2_bytes")
ALL_LOST = "every GPU worker of the run was lost; resume the run"


class WorkerLost(Exception):
    """A worker's process or GPU went away: its calls are answered by another worker."""


class Worker(Protocol):
    name: str

    def call(self, method: str, *args: Any) -> cf.Future: ...

    def lost(self, error: BaseException) -> bool: ...

    def close(self) -> None: ...


def serve(ex: Any, method: str, args: tuple) -> Any:
    """What a worker does with a call to its executor `ex` (in its own process or thread)."""
    if method == "capabilities":
        return {
            "optional": [m for m in OPTIONAL if callable(getattr(ex, m, None))],
            "replays": bool(getattr(ex, "replays", False)),
            "manifest": getattr(ex, "manifest", None),
        }
    if method == "compile_stats":
        return dict(getattr(ex, "compile_stats", None) or {})
    if method == "measure_size":
        return measure_size(ex, *args)
    return getattr(ex, method)(*args)


def measure_size(
    ex: Any, mode: str, dtype: str, n: int, need_ref: bool, variants: list, role: str
) -> tuple[list[dict], list[dict]]:
    """One size's cells on this worker's GPU: the reference cells (baseline and copy) when
    `need_ref`, then every variant, timed in `role` ("candidate" or "confirm"); the size's
    buffers are released after. Returns (reference rows, variant rows), recorded by no one
    here: the runner records them."""
    refs = list(ex.reference(mode, dtype, n)) if need_ref else []
    answers_role = hasattr(ex, "role")
    if answers_role:
        ex.role = role
    try:
        many = getattr(ex, "measure_many", None)
        if many is not None:
            rows = list(many(mode, dtype, n, variants))
        else:
            rows = [ex.measure(mode, dtype, n, v) for v in variants]
    finally:
        if answers_role:
            ex.role = "candidate"
    ex.release(dtype, n)
    return refs, rows


class LocalWorker:
    """An executor answering on a thread of this process, one call at a time."""

    def __init__(self, executor: Any, name: str = "local"):
        self.ex = executor
        self.name = name
        self._thread = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    def call(self, method: str, *args: Any) -> cf.Future:
        return self._thread.submit(serve, self.ex, method, args)

    def lost(self, error: BaseException) -> bool:
        return isinstance(error, WorkerLost)

    def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)


class PoolExecutor:
    """An executor over workers on GPUs of one model; see the module's docstring."""

    def __init__(self, workers: Sequence[Worker], planned: dict[str, Sequence[int]]):
        """`planned`: per dtype, the element counts of the plan's sizes (the owners' deal)."""
        if not workers:
            raise SweeperError("a pooled run needs at least one GPU worker")
        self.workers = list(workers)
        self.alive = [True] * len(self.workers)
        self._planned = {d: sorted(set(ns)) for d, ns in planned.items()}
        caps = self.workers[0].call("capabilities").result()
        self._optional = set(caps["optional"])
        self.replays = caps["replays"]
        if caps["manifest"] is not None:
            self.manifest = caps["manifest"]
        described = [w.call("describe").result() for w in self.workers]
        first = described[0]["device"]
        for w, d in zip(self.workers[1:], described[1:], strict=True):
            other = d["device"]
            for f in SAME_MODEL:
                if other.get(f) != first.get(f):
                    raise SweeperError(
                        f"{w.name}: {f} {other.get(f)!r}, {self.workers[0].name} has "
                        f"{first.get(f)!r}: one run measures one GPU model; run each model "
                        "as its own run (`sweeper fleet run` does) and merge their policies"
                    )
        self._described = {**described[0], "devices": [d["device"] for d in described]}

    # -- which worker ----------------------------------------------------------------------
    def owner(self, dtype: str, n: int) -> int:
        """The index of the worker that measures size `n` of `dtype` (among those alive)."""
        live = [i for i, a in enumerate(self.alive) if a]
        if not live:
            raise SweeperError(ALL_LOST)
        planned = self._planned.get(dtype) or [n]
        k = max(0, bisect.bisect_right(planned, n) - 1)
        return live[k % len(live)]

    def _answer(self, i: int, fut: cf.Future, method: str, args: tuple) -> tuple[int, Any]:
        """The answer to a call sent to worker `i` (`fut`), and the worker that gave it: when
        `i` is lost, the call is sent again to the next worker alive."""
        while True:
            try:
                return i, fut.result()
            except Exception as e:
                if not self.workers[i].lost(e):
                    raise
                self.alive[i] = False
                i = self._next_alive(i)
                fut = self.workers[i].call(method, *args)

    def _call(self, i: int, method: str, *args: Any) -> Any:
        """A call answered by worker `i`, or by the next one alive when `i` is lost."""
        return self._answer(i, self.workers[i].call(method, *args), method, args)[1]

    def _next_alive(self, i: int) -> int:
        for k in range(1, len(self.workers) + 1):
            j = (i + k) % len(self.workers)
            if self.alive[j]:
                return j
        raise SweeperError(ALL_LOST)

    def _first(self) -> int:
        """The first worker alive (what calls that no size owns go to)."""
        return 0 if self.alive[0] else self._next_alive(0)

    # -- the executor -----------------------------------------------------------------------
    def describe(self) -> dict:
        return self._described

    def variants(self, grid: str, dtype: str) -> list[Any]:
        return self._call(self._first(), "variants", grid, dtype)

    def prepare(self, variants: list[Any]) -> None:
        """Every worker compiles and loads the variants (any of them may measure any size)."""
        calls = [
            (i, w.call("prepare", variants)) for i, w in enumerate(self.workers) if self.alive[i]
        ]
        for i, fut in calls:
            try:
                fut.result()
            except Exception as e:
                if not self.workers[i].lost(e):
                    raise
                self.alive[i] = False

    def reference(self, mode: str, dtype: str, n: int) -> list[dict]:
        return self._tag(self._call(self.owner(dtype, n), "reference", mode, dtype, n), dtype, n)

    def measure(self, mode: str, dtype: str, n: int, variant: Any) -> dict:
        i = self.owner(dtype, n)
        return self._tag([self._call(i, "measure", mode, dtype, n, variant)], dtype, n)[0]

    def release(self, dtype: str, n: int) -> None:
        self._call(self.owner(dtype, n), "release", dtype, n)

    def _tag(self, rows: list[dict], dtype: str, n: int, i: int | None = None) -> list[dict]:
        """Each row names the device that measured it (an index into the manifest's
        `devices`)."""
        i = self.owner(dtype, n) if i is None else i
        return [{**r, "device": i} for r in rows]

    def measure_sizes(
        self, mode: str, dtype: str, jobs: Sequence[tuple[int, bool, list]], role: str
    ) -> Iterator[tuple[list[dict], list[dict]]]:
        """Every job (n, need_ref, variants) sent to its size's worker at once; their rows
        yielded in the jobs' order as each comes back (measure_size). A lost worker's jobs
        are sent again to the next worker alive."""
        sent = []
        for n, need_ref, variants in jobs:
            i = self.owner(dtype, n)
            args = (mode, dtype, n, need_ref, variants, role)
            sent.append((n, i, self.workers[i].call("measure_size", *args), args))
        for n, i, fut, args in sent:
            i, (refs, rows) = self._answer(i, fut, "measure_size", args)
            yield self._tag(refs, dtype, n, i), self._tag(rows, dtype, n, i)

    @property
    def compile_stats(self) -> dict:
        """Every worker's compile stats, summed (each compiles every variant)."""
        return {k: round(v, 2) for k, v in self._summed("compile_stats").items()}

    def _summed(self, method: str) -> dict:
        """The dicts of numbers the workers alive answer `method` with, summed by key."""
        total: dict[str, float] = {}
        for i, w in enumerate(self.workers):
            if self.alive[i]:
                for k, v in w.call(method).result().items():
                    total[k] = total.get(k, 0) + v
        return total

    def __getattr__(self, name: str) -> Any:
        # the optional methods the workers' executor has (the runner asks with getattr)
        if name.startswith("_") or name not in self.__dict__.get("_optional", ()):
            raise AttributeError(name)
        if name in ("phase_seconds", "replay_graphs", "batch_spans"):
            return lambda: self._summed(name)
        if name == "measure_many":
            raise AttributeError(name)  # sizes go through measure_sizes
        if name == "baseline_shape":
            return lambda dtype, n: self._call(self.owner(dtype, n), name, dtype, n)
        return lambda *args: self._call(self._first(), name, *args)

    def close(self) -> None:
        for w in self.workers:
            w.close()
