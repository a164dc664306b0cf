"""The device formula (bitmath.relu_words) and the reference, exhaustively where possible."""

from __future__ import annotations

import numpy as np
import pytest
from sweeper_kernels.bitmath import relu_words
from sweeper_kernels.errors import KernelError
from sweeper_kernels.reference import (
    random_bits,
    reference_relu,
    special_values,
    storage_dtype,
)


def _words_of(x: np.ndarray) -> np.ndarray:
    raw = x.view(np.uint8)
    pad = (-raw.size) % 4
    return np.concatenate([raw, np.zeros(pad, np.uint8)]).view(np.uint32)


def _check_formula(x: np.ndarray, dtype: str) -> None:
    got = relu_words(dtype, _words_of(x)).view(np.uint8)[: x.nbytes]
    want = reference_relu(x, dtype).view(np.uint8)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, f"{dtype}: first mismatch at byte {bad[:5]}"


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_swar_16bit_exhaustive_in_both_lanes(dtype):
    every = np.arange(1 << 16, dtype=np.uint16)
    rolled = np.roll(every, 12345)  # every value meets another one in the other lane
    pairs = np.stack([every, rolled], axis=1).reshape(-1).view(storage_dtype(dtype))
    _check_formula(pairs, dtype)


def test_swar_int8_exhaustive_in_every_lane():
    every = np.arange(256, dtype=np.uint8)
    lanes = np.stack([np.roll(every, k * 37) for k in range(4)], axis=1).reshape(-1)
    _check_formula(lanes.view(np.int8), "int8")


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16", "int8"])
def test_formula_on_special_and_random_bits(dtype):
    _check_formula(special_values(dtype), dtype)
    _check_formula(random_bits(100_003, dtype, seed=7), dtype)


def test_fp32_formula_on_every_exponent_and_sign_edge():
    edges = np.array(
        [0, 1, 0x7F7FFFFF, 0x7F800000, 0x7F800001, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF],
        dtype=np.uint32,
    )
    _check_formula(edges.view(np.float32), "fp32")


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_reference_matches_float_definition(dtype):
    x = np.concatenate([special_values(dtype), random_bits(50_000, dtype, seed=3)])
    with np.errstate(invalid="ignore"):
        want = np.where(x > 0, x, np.zeros_like(x))  # NaN > 0 is False -> +0; -0 -> +0
    assert np.array_equal(reference_relu(x, dtype).view(np.uint8), want.view(np.uint8))


def test_reference_semantics_spelled_out():
    f = reference_relu(special_values("fp32"), "fp32").view(np.uint32)
    s = special_values("fp32").view(np.uint32)
    table = dict(zip(s.tolist(), f.tolist(), strict=True))
    assert table[0x7FC00000] == 0 and table[0xFFC00000] == 0  # NaN of either sign -> +0
    assert table[0x80000000] == 0  # -0 -> +0
    assert table[0x7F800000] == 0x7F800000 and table[0xFF800000] == 0  # +-inf
    assert table[0x00000001] == 1 and table[0x80000001] == 0  # denormals kept (positive)
    i8 = reference_relu(special_values("int8"), "int8")
    assert i8[special_values("int8") == -128] == 0
    assert np.array_equal(i8, np.maximum(special_values("int8"), 0))


def test_special_values_cover_the_classes():
    for dtype in ("fp32", "fp16"):
        x = special_values(dtype)
        assert np.isnan(x).sum() >= 6 and (np.signbit(x) & np.isnan(x)).any()
        assert np.isposinf(x).any() and np.isneginf(x).any()
        assert ((x == 0) & np.signbit(x)).any()
        tiny = np.finfo(x.dtype).smallest_normal
        assert ((np.abs(x) < tiny) & (x != 0)).sum() >= 4  # denormals, both signs
    assert special_values("bf16").dtype == np.uint16
    assert set(special_values("int8").tolist()) >= {-128, 127, 0, 1, -1}


def test_reference_rejects_wrong_storage():
    with pytest.raises(KernelError, match="fp32 data must be float32, got float64"):
        reference_relu(np.zeros(3, np.float64), "fp32")
    with pytest.raises(KernelError, match="unknown dtype 'fp64'"):
        reference_relu(np.zeros(3, np.float32), "fp64")
