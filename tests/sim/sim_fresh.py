"""The fresh-input replay's kernels (sweeper.run.fresh) and the cheating fixtures it exists to
catch (sweeper_kernels.adversarial: skipright, onein2, onein4), run in the CUDA simulator.

Runs only in the child process started by test_simulator.py (see conftest.py). The replay loop
here is the executor's: rewrite, call, check per call, then restore, with the kernels given
arrays where the GPU gets addresses (the intrinsics' simulator fallbacks index arrays).
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda
from sweeper_kernels.adversarial import PROBE_HEAD, WORK_EVERY, helper_functions
from sweeper_kernels.launchers import get_launcher
from sweeper_kernels.reference import random_bits, reference_relu
from sweeper_kernels.variants import Variant

from sweeper.run.fresh import fresh_table
from sweeper.run.fresh_kernels import kernels

pytestmark = pytest.mark.sim

N = 4099  # fp16 elements: 2049 whole words and one tail element
CALLS = 6
K = 16


def _words(a: np.ndarray) -> np.ndarray:
    """The whole 32-bit words of an array (a view)."""
    raw = a.view(np.uint8)
    return raw[: raw.size // 4 * 4].view(np.uint32)


@pytest.fixture(scope="module")
def helpers():
    return {name: cuda.jit(sig)(fn) for name, (fn, sig) in helper_functions("fp16").items()}


class Replay:
    """rewrite, call, check per call, then restore, as GpuExecutor._fresh_input runs them."""

    def __init__(self, x: np.ndarray, seed: int = 0):
        self.host_x = x
        self.expected = reference_relu(x, "fp16")
        self.table = fresh_table(self.expected, CALLS, k=K, seed=seed)
        self.x, self.src = cuda.to_device(x), cuda.to_device(x)
        self.y = cuda.to_device(self.expected)
        self.pos = cuda.to_device(self.table.positions)
        self.vals = cuda.to_device(self.table.values.reshape(-1))
        self.step = cuda.to_device(np.zeros(1, np.uint32))
        self.stale = cuda.to_device(np.zeros(1, np.uint32))
        self.k = kernels()

    def run(self, call) -> int:
        for _ in range(CALLS):
            self.k["rewrite"][1, 32](self.x, self.pos, self.vals, self.step)
            call(self.x, self.y)
            self.k["check"][1, 32](self.y, self.pos, self.vals, self.step, self.stale)
        self.k["restore"][1, 32](self.x, self.src, self.pos)
        assert int(self.step.copy_to_host()[0]) == CALLS  # the check advanced the call index
        return int(self.stale.copy_to_host()[0])


def _honest(x, y):
    get_launcher(Variant("fp16", 16, 2, "cs", "cs", 128, "stride1"), sm_count=1)(
        x, y, N, cuda.stream()
    )


def test_an_honest_kernel_has_no_stale_word_and_the_input_is_restored():
    x = random_bits(N, "fp16", seed=1)
    r = Replay(x)
    assert r.run(_honest) == 0
    assert np.array_equal(r.x.copy_to_host().view(np.uint16), x.view(np.uint16))
    # the output holds the last call's values at the positions, the reference elsewhere
    got = _words(r.y.copy_to_host())
    want = _words(r.expected).copy()
    want[r.table.positions] = r.table.values[-1]
    assert np.array_equal(got, want)


def test_a_kernel_that_does_nothing_is_stale_at_every_checked_word():
    r = Replay(random_bits(N, "fp16", seed=2))
    assert r.run(lambda x, y: None) == CALLS * K


def test_a_kernel_that_works_on_every_other_call_is_stale_on_the_others():
    calls = {"i": 0}

    def every_other(x, y):
        calls["i"] += 1
        if calls["i"] % 2:
            _honest(x, y)

    r = Replay(random_bits(N, "fp16", seed=3))
    assert r.run(every_other) == CALLS // 2 * K


def test_skippable_does_the_whole_relu_unless_its_flag_is_set(helpers):
    x = random_bits(N, "fp16", seed=4)
    dx = cuda.to_device(x)
    poison = np.full(N, 0xABAB, np.uint16).view(np.float16)
    dy = cuda.to_device(poison)
    flag = cuda.to_device(np.ones(1, np.uint32))
    helpers["skippable"][4, 64](dx, dy, N, flag)
    assert np.array_equal(dy.copy_to_host().view(np.uint16), poison.view(np.uint16))
    flag.copy_to_device(np.zeros(1, np.uint32))
    helpers["skippable"][4, 64](dx, dy, N, flag)
    want = reference_relu(x, "fp16")
    assert np.array_equal(dy.copy_to_host().view(np.uint16), want.view(np.uint16))


def test_probe_skips_only_when_the_probed_words_are_right(helpers):
    x = random_bits(N, "fp16", seed=5)
    want = reference_relu(x, "fp16")
    words = N * 2 // 4
    dx, flag = cuda.to_device(x), cuda.to_device(np.full(1, 7, np.uint32))
    dy = cuda.to_device(want)
    helpers["probe"][1, 1](dx, dy, words, flag)
    assert flag.copy_to_host()[0] == 1  # right output: skip
    for w in (0, PROBE_HEAD - 1, words - 1):  # each probed word is read
        bad = want.copy()
        _words(bad)[w] ^= 0x00010001
        dy = cuda.to_device(bad)
        helpers["probe"][1, 1](dx, dy, words, flag)
        assert flag.copy_to_host()[0] == 0, w
    bad = want.copy()
    _words(bad)[PROBE_HEAD + 1] ^= 0x00010001  # not probed: still skipped
    helpers["probe"][1, 1](dx, cuda.to_device(bad), words, flag)
    assert flag.copy_to_host()[0] == 1


@pytest.mark.parametrize("kind", sorted(WORK_EVERY))
def test_every_counts_calls_and_clears_the_flag_on_one_call_in_k(helpers, kind):
    k = WORK_EVERY[kind]
    counter, flag = cuda.to_device(np.zeros(1, np.uint32)), cuda.to_device(np.zeros(1, np.uint32))
    flags = []
    for _ in range(2 * k):
        helpers["every"][1, 1](counter, k, flag)
        flags.append(int(flag.copy_to_host()[0]))
    assert flags == ([0] + [1] * (k - 1)) * 2
    assert int(counter.copy_to_host()[0]) == 2 * k


def test_the_skip_when_right_cheat_passes_a_poison_check_and_fails_the_replay(helpers):
    x = random_bits(N, "fp16", seed=6)
    words = N * 2 // 4
    flag = cuda.to_device(np.zeros(1, np.uint32))

    def cheat(dx, dy):
        helpers["probe"][1, 1](dx, dy, words, flag)
        helpers["skippable"][4, 64](dx, dy, N, flag)

    # poisoned output: the probe fails, the work is done, the output is right
    dx = cuda.to_device(x)
    dy = cuda.to_device(np.full(N, 0xABAB, np.uint16).view(np.float16))
    cheat(dx, dy)
    want = reference_relu(x, "fp16")
    assert np.array_equal(dy.copy_to_host().view(np.uint16), want.view(np.uint16))
    r = Replay(x, seed=7)
    assert not set(r.table.positions.tolist()) & {*range(PROBE_HEAD), words - 1}
    assert r.run(cheat) == CALLS * K


def test_the_device_tables_are_refilled_in_place_for_each_replay():
    """FreshInput keeps its device room and refills it per replay (set_table): a smaller
    table after a larger one leaves views of exactly its size and values; one that does not
    fit is refused."""
    from sweeper.run.fresh import FreshInput

    f = FreshInput(cuda, calls=CALLS, words=K)
    s = cuda.stream()
    big = fresh_table(reference_relu(random_bits(N, "fp16", seed=3), "fp16"), CALLS, k=K, seed=1)
    small = fresh_table(np.arange(5, dtype=np.uint32), 2, k=K, seed=2)  # 5 words: k = 5
    for t in (big, small):
        f.set_table(t, s)
        s.synchronize()
        assert np.array_equal(f.pos.copy_to_host(), t.positions)
        assert np.array_equal(f.vals.copy_to_host(), t.values.reshape(-1))
        assert f.threads == 32 and f.table is t
    assert f.pos.size == 5 and f.vals.size == 10
    with pytest.raises(ValueError, match="exceeds"):
        f.set_table(fresh_table(np.arange(64, dtype=np.uint32), CALLS + 1, k=K, seed=4), s)
