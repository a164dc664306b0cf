"""The classic executor's output guards, run without a GPU.

GpuExecutor._measure decides a candidate cell's status from its guards: the pre-check (output
poisoned, one call, compared), the outputs poisoned after each half's warm-up and compared
after its timed calls, the soak to SOAK_CALLS calls, the fresh-input replay and the
persisting-L2 read-back. Here the same method runs over a simulated executor whose device is
numpy: the buffers are arrays, a kernel is a Python function of (x, y, n, stream), the hot
timer makes its calls in the timer's order (warm-up, prime, then timed calls; the order itself
is pinned by tests/unit/test_hot_timer_order.py) and the fresh-input replay rewrites and checks
the words of the real tables (sweeper.run.fresh.fresh_table). A kernel written to cheat each
guard must be caught by that guard, and by no later one: each test also removes its guard and
sees the cheat pass, so a guard cannot be dropped from _measure unnoticed.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from sweeper_kernels import reference_relu

from sweeper.run import executor as ex_mod
from sweeper.run.executor import POISON, Buffers, GpuExecutor, HostData, half_stopping
from sweeper.run.fresh import fresh_table
from sweeper.run.timers import PhaseClock
from sweeper.stats import HALVES_FIRST, PairTiming, Stopping

N = 4096  # fp32 elements: 4096 words, so the fresh tables hold FRESH_WORDS positions
CALLS = 2  # hot calls per sample: a cell makes far fewer than SOAK_CALLS timed calls
WARM = 1  # warm-up calls before each sample
STOP = Stopping(min_samples=6, max_samples=6)
# the candidate's calls before the soak: the pre-check's, then each half's warm-up and samples
BEFORE_SOAK = 1 + 2 * (WARM + half_stopping(STOP).min_samples * (WARM + CALLS))


class SimBench:
    """The Bench calls _measure makes, on the host."""

    def __init__(self) -> None:
        self.stream = None
        self.clock = PhaseClock()
        self.state = {"limit": 0, "window_bytes": 0, "hit_ratio": 0.0}

    def reset_persisting(self) -> None:
        self.state.update(limit=0, window_bytes=0, hit_ratio=0.0)

    def persisting_state(self) -> dict:
        return dict(self.state)


class SimBuffers(Buffers):
    """executor.Buffers over numpy arrays (side(), outputs() and all_arrays() are its own)."""

    def __init__(self, x: np.ndarray, expected: np.ndarray) -> None:
        self.nbytes, self.words = x.nbytes, x.nbytes // 4
        self.x_a, self.x_b, self.src = x.copy(), x.copy(), x.copy()
        self.y_a, self.y_b = np.zeros_like(x), np.zeros_like(x)
        self.y_a2 = self.y_b2 = None
        self.expected = expected
        self.normalize = None


def words(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint32)


class SimExecutor(GpuExecutor):
    """GpuExecutor whose device is numpy: every guard decision is _measure's own."""

    def __init__(self) -> None:  # GpuExecutor.__init__ opens CUDA; set what _measure reads
        self.bench = SimBench()
        self.stopping = STOP
        self.pattern = "preallocated"
        self.halves_first = HALVES_FIRST
        self.seed = 0
        self._host = HostData(0)
        self._buffers: dict = {}
        self._fresh_cells = 0
        self.warm = WARM

    def buffers(self, dtype: str, n: int) -> Buffers:
        if (dtype, n) not in self._buffers:
            self._buffers[(dtype, n)] = SimBuffers(*(a.copy() for a in self._host.get(dtype, n)))
        return self._buffers[(dtype, n)]

    def baseline_launch(self, dtype: str, b: Buffers, n: int, side: str = "B"):
        x, y, _ = b.side(side)
        return lambda s: np.copyto(y, reference_relu(x, dtype))

    def _poison(self, y) -> None:
        words(y)[:] = POISON

    def _mismatches(self, y, b: Buffers) -> int:
        return int(np.count_nonzero(words(y) != words(b.expected)))

    def _pair(self, mode, a, bl, b, key, stop, prime=None, sides="AB", baseline_b=False,
              first="a"):  # fmt: skip
        """The hot timer's calls in its order: warm-up of both sides, prime, then per sample
        the side's warm-up call and its CALLS timed calls (times: a fixed 1.0 and 1.1 us)."""
        for _ in range(self.warm):
            a(None)
            bl(None)
        if prime is not None:
            prime()
        for _ in range(stop.min_samples):
            for side in (a, bl):
                for _ in range(self.warm + CALLS):
                    side(None)
        k = stop.min_samples
        return PairTiming(np.full(k, 1.0), np.full(k, 1.1), CALLS, "hot", ["A", "B"] * k)

    def _fresh_input(self, mode, launcher, b, n, key):
        """The replay on buffer sets A and B: per call, the table's words written into the
        input, one call, the output compared at those positions; the input restored."""
        expected = self._host.get(key[0], n)[1]
        cell, self._fresh_cells = self._fresh_cells, self._fresh_cells + 1
        stale = checked = 0
        for i, side in enumerate("AB"):
            t = fresh_table(expected, CALLS, seed=(self.seed, cell, i))
            x, y, _ = b.side(side)
            for _ in range(self.warm):
                launcher(x, y, n, None)
            for c in range(t.calls):
                words(x)[t.positions] = t.values[c]
                launcher(x, y, n, None)
                stale += int(np.count_nonzero(words(y)[t.positions] != t.values[c]))
                checked += t.words
            words(x)[t.positions] = words(b.src)[t.positions]
        return stale, checked


def relu_into(x, y):
    np.copyto(y, reference_relu(x, "fp32"))


def honest():
    return lambda x, y, n, s: relu_into(x, y)


def never_writes():
    return lambda x, y, n, s: None


def writes_once():
    """Computes its first call only: the output it left stays right until poisoned."""
    calls = [0]

    def k(x, y, n, s):
        calls[0] += 1
        if calls[0] == 1:
            relu_into(x, y)

    return k


def stops_after(limit: int):
    """Honest for `limit` calls, then writes nothing: more calls than a cell times."""
    calls = [0]

    def k(x, y, n, s):
        calls[0] += 1
        if calls[0] <= limit:
            relu_into(x, y)

    return k


def skips_when_output_looks_right():
    """Skips the work when the output's first and last words already hold ReLU of the
    input's: a poisoned output is recomputed, a repeated call is not."""

    def k(x, y, n, s):
        ends = np.array([0, x.size - 1])
        if np.array_equal(words(y)[ends], words(reference_relu(x[ends], "fp32"))):
            return
        relu_into(x, y)

    return k


def sets_a_persisting_window(bench: SimBench):
    def k(x, y, n, s):
        bench.state["window_bytes"] = 1 << 20
        relu_into(x, y)

    return k


def cell(ex: SimExecutor, make) -> dict:
    v = SimpleNamespace(config="sim", id="fp32-sim-0", vec_bytes=16, unroll=1, load_hint="def",
                        store_hint="def", block=256, grid="flat", launcher=make)  # fmt: skip
    return ex.measure("hot", "fp32", N, v)


def remove_pre_check_poison(monkeypatch):
    """The first poison of the next cell (its pre-check's) does nothing."""
    poisons = []
    real = SimExecutor._poison

    def poison(self, y):
        if poisons:
            real(self, y)
        poisons.append(1)

    monkeypatch.setattr(SimExecutor, "_poison", poison)


def remove_poison(monkeypatch):
    monkeypatch.setattr(SimExecutor, "_poison", lambda self, y: None)


def remove_soak(monkeypatch):
    monkeypatch.setattr(ex_mod, "SOAK_CALLS", 0)


def remove_fresh_input(monkeypatch):
    monkeypatch.setattr(SimExecutor, "_fresh_input", lambda self, *a: (0, 0))


def remove_read_back(monkeypatch):
    monkeypatch.setattr(SimBench, "persisting_state", lambda self: {"limit": 0, "window_bytes": 0})


def output_left_right(ex: SimExecutor) -> None:
    """The size's output A holds the right answer, as any earlier kernel can leave it."""
    b = ex.buffers("fp32", N)
    np.copyto(b.y_a, b.expected)


# (kernel, what the executor's buffers hold before the cell, the guard that catches it: the
# start of its detail, the guard removed)
CHEATS = {
    "writes nothing": (never_writes, output_left_right, "pre-check", remove_pre_check_poison),
    "computes its first call only": (writes_once, None, "after the timed loop", remove_poison),
    "stops after the timed calls": (
        lambda: stops_after(BEFORE_SOAK),
        None,
        f"after {ex_mod.SOAK_CALLS} calls",
        remove_soak,
    ),
    "skips when its output looks right": (
        skips_when_output_looks_right,
        None,
        "fresh input",
        remove_fresh_input,
    ),
}


@pytest.fixture
def ex() -> SimExecutor:
    return SimExecutor()


def test_an_honest_kernel_passes_every_guard(ex):
    row = cell(ex, honest)
    assert row["status"] == "ok", row["status_detail"]
    assert row["time_us"] == pytest.approx(1.0) and row["ratio"] == pytest.approx(1.1)


@pytest.mark.parametrize("name", CHEATS)
def test_each_cheat_is_caught_by_its_guard(ex, name):
    make, before, caught_by, _ = CHEATS[name]
    if before is not None:
        before(ex)
    row = cell(ex, make)
    assert row["status"] == "mismatch" and row["status_detail"].startswith(caught_by), row


@pytest.mark.parametrize("name", CHEATS)
def test_without_its_guard_the_cheat_gets_past_it(ex, monkeypatch, name):
    """Each guard is what catches its cheat: removed from the executor, the cell is decided
    otherwise (by a later guard, or not at all)."""
    make, before, caught_by, remove = CHEATS[name]
    if before is not None:
        before(ex)
    remove(monkeypatch)
    assert not cell(ex, make)["status_detail"].startswith(caught_by)


def test_with_every_output_guard_removed_the_cheats_pass(ex, monkeypatch):
    for remove in (remove_poison, remove_soak, remove_fresh_input):
        remove(monkeypatch)
    for make, before, _, _ in CHEATS.values():
        if before is not None:
            before(ex)
        assert cell(ex, make)["status"] == "ok"


def test_a_kernel_that_sets_a_persisting_window_is_refused_and_the_window_reset(ex):
    row = cell(ex, lambda: sets_a_persisting_window(ex.bench))
    assert row["status"] == "guard" and "stream window 1048576 B" in row["status_detail"]
    assert ex.bench.state["window_bytes"] == 0


def test_without_the_read_back_it_passes(ex, monkeypatch):
    remove_read_back(monkeypatch)
    assert cell(ex, lambda: sets_a_persisting_window(ex.bench))["status"] == "ok"
