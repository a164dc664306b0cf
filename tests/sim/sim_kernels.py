"""Index, tail and grid-stride logic of the generated kernels in the CUDA simulator.

Runs only in the child process started by test_simulator.py (NUMBA_ENABLE_CUDASIM=1). The
simulator runs the very same generated kernel source; only the loads/stores (plain numpy
instead of inline PTX) and relu_word (numpy SWAR) differ. Sizes are tiny: timings mean nothing.
Device shape is forced small (1 SM, 128 or 256 threads per SM) so strideW grids really loop.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda
from sweeper_kernels.errors import KernelError
from sweeper_kernels.launchers import get_launcher
from sweeper_kernels.reference import (
    itemsize,
    random_bits,
    reference_relu,
    special_values,
    storage_dtype,
)
from sweeper_kernels.variants import DTYPES, Variant

pytestmark = pytest.mark.sim

SIZES = (0, 1, 3, 15, 16, 17, 33, 4097)
# each vector width, each unroll, onepass, flat, flat32, fixed32 and grid-stride, a few hints (fallbacks are
# shared)
SHAPES = [
    (4, 1, "default", "default", 128, "onepass"),
    (4, 8, "nc", "wt", 128, "stride1"),
    (8, 2, "cs", "cs", 128, "stride2"),
    (8, 4, "L2::evict_last", "cs", 256, "onepass"),
    (16, 1, "cg", "cg", 128, "stride1"),
    (16, 2, "cs", "default", 128, "onepass"),
    (16, 4, "L1::no_allocate", "cs", 128, "stride4"),
    (16, 8, "default", "cs", 128, "stride1"),
    (16, 2, "L2::evict_last:0.75", "cs", 128, "stride4"),
    (16, 1, "L2::evict_last", "cs", 128, "flat"),
    (8, 1, "default", "default", 256, "flat"),
    (4, 1, "cs", "cs", 128, "flat"),
    (16, 2, "default", "cs", 128, "flat"),
    (8, 4, "L2::evict_last", "cs", 128, "flat"),
    (4, 8, "cs", "default", 128, "flat"),
    (16, 1, "default", "default", 128, "flat32"),
    (8, 2, "default", "cs", 128, "flat32"),
    (4, 4, "L2::evict_last", "cs", 256, "flat32"),
    (16, 2, "default", "default", 128, "fixed32"),
    (16, 1, "default", "cs", 256, "fixed32"),
    (8, 4, "L2::evict_last", "cs", 128, "fixed32"),
]
CASES = [Variant(d, *s) for d in DTYPES for s in SHAPES]


def _poisoned(n: int, dtype: str):
    raw = np.full(max(n, 1) * itemsize(dtype), 0xAB, dtype=np.uint8)
    return cuda.to_device(
        raw.view(storage_dtype(dtype))[:n] if n else raw.view(storage_dtype(dtype))[:0]
    )


def _run(v: Variant, x: np.ndarray, n: int | None = None):
    n = x.size if n is None else n
    dx = cuda.to_device(x)
    dy = _poisoned(x.size, v.dtype)
    get_launcher(v, sm_count=1, max_threads_per_sm=256)(dx, dy, n, cuda.stream())
    return dy.copy_to_host()


def _assert_bits_equal(got: np.ndarray, want: np.ndarray, what: str) -> None:
    g, w = got.view(np.uint8), want.view(np.uint8)
    bad = np.flatnonzero(g != w) // want.itemsize
    assert bad.size == 0, f"{what}: {bad.size} wrong bytes, first elements {np.unique(bad)[:8]}"


@pytest.mark.parametrize("v", CASES, ids=lambda v: v.id)
def test_sizes_tails_and_grid_stride(v):
    for n in SIZES:
        x = random_bits(n, v.dtype, seed=n)
        _assert_bits_equal(_run(v, x), reference_relu(x, v.dtype), f"{v.config} n={n}")


@pytest.mark.parametrize("v", CASES[:: len(SHAPES) // 2], ids=lambda v: v.id)
def test_special_values(v):
    x = np.tile(special_values(v.dtype), 7)  # 7 copies: not a multiple of any vector width
    _assert_bits_equal(_run(v, x), reference_relu(x, v.dtype), v.config)


def test_partial_n_leaves_the_rest_untouched():
    v = Variant("fp16", 16, 2, "cs", "cs", 128, "stride1")
    x = random_bits(100, "fp16", seed=1)
    out = _run(v, x, n=37)
    _assert_bits_equal(out[:37], reference_relu(x[:37], "fp16"), "first 37")
    assert (out[37:].view(np.uint8) == 0xAB).all()


def test_n_zero_launches_nothing():
    v = Variant("int8", 16, 1, "default", "default", 128, "onepass")
    dy = _poisoned(8, "int8")
    get_launcher(v)(cuda.to_device(np.ones(8, np.int8)), dy, 0, cuda.stream())
    assert (dy.copy_to_host().view(np.uint8) == 0xAB).all()


def test_misaligned_view_is_rejected_not_written():
    v = Variant("fp32", 16, 1, "default", "default", 128, "onepass")
    dx = cuda.to_device(random_bits(65, "fp32"))
    dy = _poisoned(65, "fp32")
    with pytest.raises(KernelError, match="16-byte aligned"):
        get_launcher(v)(dx[1:], dy[1:], 64, cuda.stream())
    assert (dy.copy_to_host().view(np.uint8) == 0xAB).all()
    # a 4-byte variant takes the same offset view
    v4 = Variant("fp32", 4, 2, "default", "default", 128, "onepass")
    x = dx.copy_to_host()
    get_launcher(v4)(dx[1:], dy[1:], 64, cuda.stream())
    _assert_bits_equal(dy.copy_to_host()[1:], reference_relu(x[1:], "fp32"), "offset view")


def test_wrong_arrays_are_rejected():
    v = Variant("bf16", 8, 1, "default", "default", 128, "onepass")
    launch = get_launcher(v)
    good = cuda.to_device(np.zeros(8, np.uint16))
    with pytest.raises(KernelError, match="dtype"):
        launch(cuda.to_device(np.zeros(8, np.float16)), good, 8, cuda.stream())
    with pytest.raises(KernelError, match="fewer than n"):
        launch(good, good, 9, cuda.stream())
