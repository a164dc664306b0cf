"""Correctness on fresh input, call by call: the tables and device kernels of the replay that
GpuExecutor runs after a candidate cell is timed (sweeper.run.executor).

The timed loop feeds a kernel the same input on every call, so a kernel that skips its work
whenever its output already looks right passes every poison-then-check guard. The replay feeds
it new input: before every call FRESH_WORDS input words at random positions (new per cell and
buffer set, from a seeded generator) are rewritten with new values, and after every call the
output at those positions is compared with them on the device.

The device kernels are in sweeper.run.fresh_kernels (imported on first use: this module needs
no CUDA).

A rewritten word has every byte in [0x30, 0x3F]. Read as any dtype's lanes (one fp32, two fp16
or bf16, four int8) each lane is a positive normal number, so ReLU keeps the word: the right
output word is the written word. Each call's value at a position differs from the previous
call's there and from the position's original output word, so an output left from any earlier
call, or from the timed loop, reads as stale.

The tables are FRESH_WORDS positions and calls x FRESH_WORDS values (a few KiB); the kernels run
one block and touch only those words, so the cell's footprint does not grow. The call index is
a device counter the check kernel advances, which lets the replay graph be built from captured
units, as the timed graph is (sweeper.run.timers.Graph).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

FRESH_WORDS = 64  # input words rewritten before every call of the replay (at most 1024)
FRESH_BLOCKED_CALLS = 16  # replayed calls per buffer set in cold and after-write
FRESH_BASE = 0x30303030  # every byte 0x3?: a positive normal number in every dtype's lanes
FRESH_MASK = 0xF0F0F0F0  # the bits fixed by FRESH_BASE
_CODES = 1 << 16  # four free nibbles per word
MAX_POSITION = 1 << 32  # positions are uint32 word indices


def is_fresh_word(words) -> np.ndarray:
    """True where a uint32 word has every byte in [0x30, 0x3F]."""
    return (np.asarray(words, dtype=np.uint32) & np.uint32(FRESH_MASK)) == np.uint32(FRESH_BASE)


def _word(code: np.ndarray) -> np.ndarray:
    """The fresh word whose low nibbles are the four nibbles of a 16-bit code."""
    c = np.asarray(code, dtype=np.uint32)
    spread = (c & 0xF) | ((c >> 4) & 0xF) << 8 | ((c >> 8) & 0xF) << 16 | ((c >> 12) & 0xF) << 24
    return (spread | np.uint32(FRESH_BASE)).astype(np.uint32)


def _code(word: np.ndarray) -> np.ndarray:
    """The 16-bit code of a fresh word (the inverse of _word)."""
    w = np.asarray(word, dtype=np.uint32)
    return (
        (w & 0xF) | ((w >> 8) & 0xF) << 4 | ((w >> 16) & 0xF) << 8 | ((w >> 24) & 0xF) << 12
    ).astype(np.int64)


@dataclass(frozen=True)
class FreshTable:
    positions: np.ndarray  # uint32[k]: distinct word indices into the input and output
    values: np.ndarray  # uint32[calls, k]: the word written at each position before each call

    @property
    def calls(self) -> int:
        return self.values.shape[0]

    @property
    def words(self) -> int:
        return self.positions.size


def fresh_table(
    expected: np.ndarray, calls: int, k: int = FRESH_WORDS, seed: int | Sequence[int] = 0
) -> FreshTable:
    """Positions and per-call values of the fresh-input replay over an output whose words are
    `expected` (the reference output as uint32 words): min(k, words) distinct positions, and
    for every call a fresh word per position that differs from the previous call's there and
    (for the first call, and every later one) from the expected word there. Deterministic for
    a seed."""
    raw = np.ascontiguousarray(expected).reshape(-1).view(np.uint8)
    expected = raw[: raw.size // 4 * 4].view(np.uint32)  # whole words only
    if calls < 1:
        raise ValueError(f"calls must be >= 1, got {calls}")
    rng = np.random.default_rng(seed)
    population = min(expected.size, MAX_POSITION)
    k = min(k, population)
    positions = np.sort(rng.choice(population, size=k, replace=False)).astype(np.uint32)
    # Codes run over _CODES - 1 values with one left out: the expected word's own code where
    # that word is fresh (the last code otherwise). A step of 1 .. _CODES - 2 modulo
    # _CODES - 1 never returns to the same value, so consecutive calls differ.
    here = expected[positions]
    left_out = np.where(is_fresh_word(here), _code(here), _CODES - 1)
    start = rng.integers(0, _CODES - 1, size=(1, k))
    steps = rng.integers(1, _CODES - 1, size=(calls - 1, k))
    r = np.concatenate([start, start + np.cumsum(steps, axis=0)]) % (_CODES - 1)
    codes = r + (r >= left_out)
    return FreshTable(positions, _word(codes).reshape(calls, k))


# ---- device side (numba imported lazily) -------------------------------------------------------


class FreshInput:
    """Device room for one table of up to `calls` x `words` and the launches that use it, on
    any stream (capturable: no host sync, no allocation after construction). The buffers are
    allocated once and refilled per replay by `set_table` (an asynchronous copy from pinned
    host memory), so a cell's replay allocates and frees nothing. `rewrite(x, s)` and
    `check(y, s)` bracket each call; `reset(s)` zeroes the call counter and the stale count
    before a replay."""

    def __init__(self, cuda, calls: int, words: int = FRESH_WORDS, counters=None):
        """`counters`: two uint32 words of device memory for the call index and the stale
        count (a batched executor passes a view of one array it reads once per batch)."""
        if words > 1024:
            raise ValueError(f"at most 1024 fresh words per call, got {words}")
        self.capacity = (calls, words)
        # one device buffer and one pinned staging for a table: positions, then values, so a
        # table is one copy
        self._table = cuda.device_array(words + calls * words, np.uint32)
        self._staged = cuda.pinned_array(words + calls * words, np.uint32)
        if counters is None:
            counters = cuda.to_device(np.zeros(2, np.uint32))
        self.counters = counters  # call index, stale words
        self.step = self.counters[0:1]
        self.stale = self.counters[1:2]
        self.table: FreshTable | None = None
        self._views: tuple = ((0, 0), None, None)
        from sweeper.run.fresh_kernels import kernels

        self.kernels = kernels()

    def fits(self, table: FreshTable) -> bool:
        return table.calls <= self.capacity[0] and table.words <= self.capacity[1]

    def set_table(self, table: FreshTable, stream) -> None:
        """Queue the copy of `table` into the device buffer on `stream` (one asynchronous copy
        from pinned memory, through the driver). The pinned staging is rewritten here, so the
        previous table's copy must have completed (the executors synchronise after every
        replay, or wait for the batch that used the room before)."""
        from sweeper_kernels.intrinsics import simulator

        from sweeper.run.timers import check, cuda_driver

        self.stage(table)
        if simulator():  # the simulator has no driver
            k, m = table.words, table.calls * table.words
            self._table[: k + m].copy_to_device(self._staged[: k + m], stream=stream)
        else:
            cu = cuda_driver()
            check(cu.cuMemcpyHtoDAsync(*self.copy_args(), cu.CUstream(int(stream.handle))))

    def copy_args(self) -> tuple[int, int, int]:
        """The copy that moves the staged table to the device: (device address, host
        address, bytes)."""
        k, m = self.table.words, self.table.calls * self.table.words
        return _ptr(self._table), self._staged.ctypes.data, 4 * (k + m)

    def stage(self, table: FreshTable) -> None:
        """Write `table` into the pinned staging and make it the room's table, its copy to
        the device left to the caller (copy_args; set_table queues it at once). The same rule
        on the previous table's copy as set_table's."""
        if not self.fits(table):
            raise ValueError(f"a {table.calls} x {table.words} table exceeds {self.capacity}")
        k, m = table.words, table.calls * table.words
        self._staged[:k] = table.positions
        self._staged[k : k + m] = table.values.reshape(-1)
        if self._views[0] != (k, m):  # device views of the table's size, cut once per size
            self._views = ((k, m), self._table[:k], self._table[k : k + m])
        self.pos, self.vals = self._views[1], self._views[2]
        self.threads = max(32, -(-k // 32) * 32)
        self.table = table

    def reset(self, stream) -> None:
        from sweeper.run.timers import check, cuda_driver

        cu = cuda_driver()
        ptr = self.counters.__cuda_array_interface__["data"][0]
        check(cu.cuMemsetD32Async(ptr, 0, 2, cu.CUstream(int(stream.handle))))

    def rewrite(self, x, stream) -> None:
        self.kernels["rewrite"][1, self.threads, stream](_ptr(x), self.pos, self.vals, self.step)

    def check(self, y, stream) -> None:
        self.kernels["check"][1, self.threads, stream](
            _ptr(y), self.pos, self.vals, self.step, self.stale
        )

    def restore(self, x, src, stream) -> None:
        self.kernels["restore"][1, self.threads, stream](_ptr(x), _ptr(src), self.pos)

    def load(self, x, y, src, stream) -> None:
        """Launch each kernel once and undo what they did: a kernel's first launch can load its
        module (CUDA lazy loading), which must not happen while a stream is being captured."""
        self.rewrite(x, stream)
        self.check(y, stream)
        self.restore(x, src, stream)
        self.reset(stream)

    def stale_words(self) -> int:
        """The stale count (synchronises: call after the replay)."""
        return int(self.counters.copy_to_host()[1])


def _ptr(a) -> int:
    return a.__cuda_array_interface__["data"][0]
