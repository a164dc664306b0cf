"""ReLU on 32-bit words of bit patterns: the formula shared by the device code and its checks.

The math works on integer bit patterns, one uint32 word at a time, so it is bit-exact by
construction and immune to flush-to-zero (no float instruction ever touches the data):

  * fp32 (one lane per word): keep w iff 1 <= w <= 0x7F800000 as unsigned, i.e. sign clear,
    not zero, at most +inf: `w if w - 1 < 0x7F800000 else 0` (one add, compare, select).
  * fp16 / bf16 (2 lanes of L=16 bits) and int8 (4 lanes of L=8), SWAR. S = a lane's sign bit,
    T = the largest magnitude kept (+inf: 0x7C00 fp16, 0x7F80 bf16; no limit for int8):
        m    = w & MAGS                 lane magnitudes (sign bits cleared)
        nz   = m + (S-1 per lane)       lane sign bit set <=> m >= 1   (never carries out)
        big  = m + (S-1-T per lane)     lane sign bit set <=> m >  T   (NaN; never carries out)
        keep = nz & ~big & ~w & SIGNS   sign clear, non-zero, not NaN
        out  = w & ((keep >> (L-1)) * LANE_ONES)
    7 integer ops per word for int8 (16 lanes per 16 bytes), 9 for fp16/bf16; no branches and
    no lane extraction. -0 / -x / -inf / -NaN have the sign bit set -> 0; +NaN is "big" -> 0;
    +0 stays 0; denormals are ordinary non-zero magnitudes -> kept; int8 -128 = 0x80 -> 0.

No numba here: intrinsics.py emits these constants as LLVM IR, `relu_words` is the numpy
version (the simulator's fallback and the unit tests' subject).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# dtype -> (element bits, largest magnitude kept or None)
DTYPE_LANES: dict[str, tuple[int, int | None]] = {
    "fp32": (32, 0x7F800000),
    "fp16": (16, 0x7C00),
    "bf16": (16, 0x7F80),
    "int8": (8, None),
}


@dataclass(frozen=True)
class SwarConstants:
    bits: int  # lane width L
    mags: int  # S-1 in every lane (also the magnitude mask)
    big_add: int | None  # S-1-T in every lane, or None (int8: nothing is "big")
    signs: int  # S in every lane
    lane_ones: int  # 2**L - 1


def swar_constants(dtype: str) -> SwarConstants:
    bits, tmax = DTYPE_LANES[dtype]
    lanes = 32 // bits
    sign = 1 << (bits - 1)
    signs = sum(sign << (bits * k) for k in range(lanes))
    big = None if tmax is None else sum((sign - 1 - tmax) << (bits * k) for k in range(lanes))
    return SwarConstants(bits, 0xFFFFFFFF ^ signs, big, signs, (1 << bits) - 1)


FP32_INF_BITS = 0x7F800000


def relu_words(dtype: str, w):
    """ReLU of uint32 word(s) `w` (scalar or array), exactly the device formula, in numpy."""
    w = np.asarray(w, dtype=np.uint32)
    with np.errstate(over="ignore"):
        if DTYPE_LANES[dtype][0] == 32:
            return np.where((w - np.uint32(1)) < np.uint32(FP32_INF_BITS), w, np.uint32(0))
        c = swar_constants(dtype)
        m = w & np.uint32(c.mags)
        keep = (m + np.uint32(c.mags)) & ~w
        if c.big_add is not None:
            keep &= ~(m + np.uint32(c.big_add))
        keep &= np.uint32(c.signs)
        return w & ((keep >> np.uint32(c.bits - 1)) * np.uint32(c.lane_ones))
