"""The fresh-input replay (sweeper.run.fresh): its value and position tables, and the PTX of
its device kernels (their logic runs in the simulator: tests/sim/sim_fresh.py)."""

from __future__ import annotations

import numpy as np
import pytest
from sweeper_kernels.bitmath import DTYPE_LANES, relu_words

from sweeper.run.fresh import FRESH_WORDS, fresh_table, is_fresh_word


def _random_words(size: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**32, size=size, dtype=np.uint32)


def test_every_byte_of_every_value_is_in_0x30_0x3f():
    t = fresh_table(_random_words(1 << 16), calls=128, seed=1)
    assert t.values.shape == (128, FRESH_WORDS) and t.values.dtype == np.uint32
    b = t.values.view(np.uint8)
    assert b.min() >= 0x30 and b.max() <= 0x3F
    assert is_fresh_word(t.values).all()
    assert len(np.unique(b)) == 16  # all sixteen low nibbles are used


@pytest.mark.parametrize("dtype", sorted(DTYPE_LANES))
def test_relu_keeps_every_value_in_every_dtype(dtype):
    v = fresh_table(_random_words(4096), calls=64, seed=2).values
    assert np.array_equal(relu_words(dtype, v), v)


def test_consecutive_calls_differ_and_none_equals_the_expected_word():
    # every expected word is itself fresh, and 8 x 65536 draws from 65536 codes: without the
    # rules about 8 collisions of each kind would be expected
    expected = fresh_table(_random_words(64), calls=1, k=64, seed=3).values[0]
    t = fresh_table(expected, calls=1 << 16, k=8, seed=4)
    assert is_fresh_word(expected).all()
    assert (t.values[1:] != t.values[:-1]).all()
    assert (t.values != expected[t.positions]).all()


def test_positions_are_distinct_whole_words_inside_the_buffer():
    t = fresh_table(_random_words(1000), calls=4, seed=6)
    assert t.positions.dtype == np.uint32 and t.positions.size == FRESH_WORDS
    assert len(set(t.positions.tolist())) == FRESH_WORDS
    assert t.positions.max() < 1000
    # a buffer of 4099 fp16 elements holds 2049 whole words; the tail element is never rewritten
    t = fresh_table(np.zeros(4099, np.float16), calls=2, k=4000, seed=7)
    assert t.words == 2049 and sorted(t.positions.tolist()) == list(range(2049))


def test_deterministic_for_a_seed_and_new_for_another():
    e = _random_words(1 << 20)
    a, b = fresh_table(e, 16, seed=(0, 5, 1)), fresh_table(e, 16, seed=(0, 5, 1))
    assert np.array_equal(a.positions, b.positions) and np.array_equal(a.values, b.values)
    c = fresh_table(e, 16, seed=(0, 6, 1))
    assert not np.array_equal(a.positions, c.positions)


def test_calls_must_be_positive():
    with pytest.raises(ValueError, match="calls must be >= 1"):
        fresh_table(_random_words(8), calls=0)


@pytest.fixture(scope="module")
def ptx_texts():
    from numba import cuda

    from sweeper.run.fresh_kernels import FUNCTIONS, SIGNATURES

    return {n: cuda.compile_ptx(FUNCTIONS[n], SIGNATURES[n], cc=(9, 0))[0] for n in FUNCTIONS}


def test_the_kernels_move_single_words_and_count_atomically(ptx_texts):
    assert "st.global.b32" in ptx_texts["rewrite"]
    assert "ld.global.b32" not in ptx_texts["rewrite"].split("cvta.to.global")[-1]
    check = ptx_texts["check"]
    assert "ld.global.b32" in check and "bar.sync" in check
    assert "atom.global.add" in check or "red.global.add" in check
    assert "st.global.b32" not in check  # it reads the output, never writes it
    assert "ld.global.b32" in ptx_texts["restore"] and "st.global.b32" in ptx_texts["restore"]


@pytest.mark.needs_tool("ptxas")
def test_ptxas_assembles_them_for_sm90(ptx_texts):
    from sweeper_kernels.ptxcheck import assemble

    for text in ptx_texts.values():
        assert assemble(text, "sm_90") is None
