"""The batched executor decides a half's stopping as the classic timer does (CPU)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from sweeper.run.batched import _Half, _halves_done
from sweeper.run.executor import half_stopping
from sweeper.run.timers import Bench, PhaseClock
from sweeper.stats import Stopping


def _classic_done(a, b, stop) -> bool:
    bench = Bench.__new__(Bench)
    bench.clock = PhaseClock()
    return bench._done(list(a), list(b), stop, time.perf_counter() + 3600)


@pytest.mark.parametrize("seed", range(40))
def test_the_batched_stopping_rule_is_the_classic_one(seed):
    rng = np.random.default_rng(seed)
    stop = half_stopping(Stopping())
    spread = rng.choice([0.001, 0.01, 0.05])
    halves, want = [], []
    for n in range(1, stop.max_samples + 2):
        a = 10 * (1 + spread * rng.standard_normal(n))
        b = 11 * (1 + spread * rng.standard_normal(n))
        halves.append(_Half("A", "B", "A", stop, list(a), list(b)))
        want.append(_classic_done(a, b, stop))
    assert _halves_done(halves) == want  # decided together, as a batch decides them
    assert [_halves_done([hf])[0] for hf in halves] == want  # and one by one
    assert len(set(want)) == 2  # both answers occur


def _half_done(hf):
    return _halves_done([hf])[0]


def test_a_half_never_stops_below_its_minimum_and_always_at_its_cap():
    stop = half_stopping(Stopping())
    flat = [10.0] * stop.max_samples
    assert not _half_done(_Half("A", "B", "A", stop, flat[:1], flat[:1]))
    assert _half_done(_Half("A", "B", "A", stop, flat, flat))
    noisy = list(np.linspace(1, 100, stop.max_samples))
    assert _half_done(_Half("A", "B", "A", stop, noisy, noisy))


def test_only_a_grid_kernel_skips_its_uncaptured_first_call_once_launched():
    """A grid variant's kernel is compiled and loaded once per process, so its id names it for
    the run; an adversarial or a user's kernel has no such name, and every cell of it makes its
    first call outside any capture."""
    from types import SimpleNamespace

    from sweeper_kernels.variants import Variant

    from sweeper.run.batched import _kernel_key

    v = Variant.from_id("fp32-v16-u2-ld.def-st.cs-b128-flat32")
    assert _kernel_key(v) == v.id
    assert _kernel_key(v.id) == v.id
    assert _kernel_key("adv-lazy-fp32-v16-u1-ld.def-st.def-b256-flat") is None
    assert _kernel_key(SimpleNamespace(launcher=lambda: None)) is None


def test_a_call_loads_each_new_grid_kernel_once_before_its_first_batch(monkeypatch):
    """measure_many's first step: one uncaptured call of each grid kernel the run has not
    launched yet (duplicates once), none for an adversarial kernel or one already launched,
    and a kernel whose launcher fails is left to its cell (not marked launched)."""
    from contextlib import nullcontext
    from types import SimpleNamespace

    from sweeper_kernels.errors import KernelError
    from sweeper_kernels.variants import Variant

    from sweeper.run.batched import BatchedExecutor

    ex = BatchedExecutor.__new__(BatchedExecutor)
    calls, sizes = [], []
    ex._launched = {"fp32-v4-u1-ld.def-st.def-b256-flat"}
    ex.bench = SimpleNamespace(clock=lambda name: nullcontext(), stream="s")
    ex.buffers = lambda dtype, n: sizes.append((dtype, n)) or "bufs"

    def candidate_launch(launcher, b, n, side):
        assert (b, n, side) == ("bufs", 1024, "A")
        return lambda stream: calls.append((launcher, stream))

    ex.candidate_launch = candidate_launch
    good = Variant.from_id("fp32-v16-u2-ld.def-st.cs-b128-flat32")

    def broken():
        raise KernelError("no launcher")

    bad = SimpleNamespace(launcher=broken)
    import sweeper.run.batched as batched

    key = batched._kernel_key
    monkeypatch.setattr(batched, "_kernel_key", lambda v: "bad" if v is bad else key(v))
    ex._load_kernels(
        "fp32",
        1024,
        [
            good,
            good.id,
            "fp32-v4-u1-ld.def-st.def-b256-flat",
            "adv-lazy-fp32-v16-u1-ld.def-st.def-b256-flat",
            bad,
        ],
    )
    assert [c[0].variant.id for c in calls] == [good.id]
    assert calls[0][1] == "s"
    assert ex._launched == {"fp32-v4-u1-ld.def-st.def-b256-flat", good.id}
    calls.clear(), sizes.clear()
    ex._load_kernels("fp32", 1024, [good, "adv-lazy-fp32-v16-u1-ld.def-st.def-b256-flat"])
    assert calls == [] and sizes == []  # nothing new: no buffers asked for
