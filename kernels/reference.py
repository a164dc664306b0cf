"""Storage dtypes, the numpy reference ReLU and the special values every variant must survive.

The reference is written independently of the device formula (bitmath.py): it compares the
signed integer view of each element with 0 and with +inf's bit pattern, which is the
definition `out = x > 0 ? x : 0` restated on bits (NaN of either sign -> +0, -0 -> +0,
+inf -> +inf, -inf -> 0, denormals kept, int8 -128 -> 0).
"""

from __future__ import annotations

import numpy as np
from sweeper_kernels.dtypes import DTYPES, STORAGE, bits_view
from sweeper_kernels.errors import KernelError

_STORAGE = {d: np.dtype(STORAGE[d]) for d in DTYPES}
_SIGNED_VIEW = {d: np.dtype(bits_view(d, signed=True)) for d in DTYPES}
_UNSIGNED_VIEW = {d: np.dtype(bits_view(d)) for d in DTYPES}
_POS_INF_BITS = {"fp32": 0x7F800000, "fp16": 0x7C00, "bf16": 0x7F80, "int8": None}


def _check(dtype: str) -> None:
    if dtype not in _STORAGE:
        raise KernelError(f"unknown dtype '{dtype}'; use one of {list(DTYPES)}")


def storage_dtype(dtype: str) -> np.dtype:
    """The numpy dtype that holds `dtype` on the host and in device arrays."""
    _check(dtype)
    return _STORAGE[dtype]


def itemsize(dtype: str) -> int:
    _check(dtype)
    return _STORAGE[dtype].itemsize


def bits_view(x: np.ndarray, dtype: str) -> np.ndarray:
    """The unsigned-integer bit patterns of `x` (a view, no copy)."""
    return np.asarray(x).view(_UNSIGNED_VIEW[dtype])


def reference_relu(x: np.ndarray, dtype: str) -> np.ndarray:
    """`x > 0 ? x : 0`, bit-exact, in the storage dtype of `dtype`."""
    _check(dtype)
    x = np.asarray(x)
    if x.dtype != _STORAGE[dtype]:
        raise KernelError(f"reference_relu: {dtype} data must be {_STORAGE[dtype]}, got {x.dtype}")
    b = x.view(_SIGNED_VIEW[dtype])
    keep = b > 0
    if _POS_INF_BITS[dtype] is not None:
        keep &= b <= _POS_INF_BITS[dtype]
    return np.where(keep, b, b.dtype.type(0)).view(_STORAGE[dtype])


_SPECIAL_BITS = {
    "fp32": [
        0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF, 0x7FFFFFFF, 0xFF800001, 0xFFFFFFFF,
        0x7FC00123, 0xFFA5A5A5,  # NaNs, both signs, quiet/signalling, with payloads
        0x00000000, 0x80000000, 0x7F800000, 0xFF800000,  # +-0, +-inf
        0x00000001, 0x007FFFFF, 0x80000001, 0x807FFFFF, 0x00400000,  # denormals
        0x00800000, 0x80800000, 0x7F7FFFFF, 0xFF7FFFFF,  # min / max normal
        0x3F800000, 0xBF800000, 0x3F7FFFFF,  # +-1, 1-ulp
    ],
    "fp16": [
        0x7E00, 0xFE00, 0x7C01, 0x7DFF, 0x7FFF, 0xFC01, 0xFFFF, 0x7E55, 0xFD23,
        0x0000, 0x8000, 0x7C00, 0xFC00,
        0x0001, 0x03FF, 0x8001, 0x83FF, 0x0200,
        0x0400, 0x8400, 0x7BFF, 0xFBFF,
        0x3C00, 0xBC00, 0x3BFF,
    ],
    "bf16": [
        0x7FC0, 0xFFC0, 0x7F81, 0x7FBF, 0x7FFF, 0xFF81, 0xFFFF, 0x7FD5, 0xFFA3,
        0x0000, 0x8000, 0x7F80, 0xFF80,
        0x0001, 0x007F, 0x8001, 0x807F, 0x0040,
        0x0080, 0x8080, 0x7F7F, 0xFF7F,
        0x3F80, 0xBF80, 0x3F7F,
    ],
}  # fmt: skip


def special_values(dtype: str) -> np.ndarray:
    """NaNs of both signs (with payloads), +-0, +-inf, denormals of both signs, min/max normal,
    +-1; for int8: -128, -127, -1, 0, 1, 2, 126, 127. In the storage dtype."""
    _check(dtype)
    if dtype == "int8":
        return np.array([-128, -127, -2, -1, 0, 1, 2, 126, 127], dtype=np.int8)
    return np.array(_SPECIAL_BITS[dtype], dtype=_UNSIGNED_VIEW[dtype]).view(_STORAGE[dtype])


def random_bits(n: int, dtype: str, seed: int = 0) -> np.ndarray:
    """`n` uniformly random BIT PATTERNS (so NaNs, infs and denormals occur), storage dtype."""
    _check(dtype)
    raw = np.random.default_rng(seed).integers(0, 256, size=n * itemsize(dtype), dtype=np.uint8)
    return raw.view(_STORAGE[dtype])
