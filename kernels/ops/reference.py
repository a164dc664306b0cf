"""The built-in ops' references on the host, their special inputs, and the comparison of an
output with its reference under the op's rule (sweeper_kernels.ops.core.Rule).

A reference computes in float64 and rounds once to the output dtype, to nearest even, written
independently of the C++ bodies. For add and mul that is the correctly rounded result (the exact
sum or product of two fp32, fp16 or bf16 values rounded to float64 and then to the dtype is
rounded once: double rounding through a format of at least 2p + 2 bits is innocuous); for
gelu and silu it is the formula in float64, whose error is far below an ulp of any output
dtype. bf16 is held as its raw bits (uint16), as everywhere in sweeper_kernels.
"""

from __future__ import annotations

import numpy as np
from sweeper_kernels.ops.core import Op
from sweeper_kernels.reference import (
    bits_view,
    random_bits,
    reference_relu,
    special_values,
    storage_dtype,
)

# (significand bits with the hidden one, smallest normal exponent) per float dtype
_FORMAT = {"fp32": (24, -126), "fp16": (11, -14), "bf16": (8, -126)}
_FLT_MAX = float(np.finfo(np.float32).max)


def to_float64(x: np.ndarray, dtype: str) -> np.ndarray:
    """The values of storage-dtype data `x` as float64 (int8 as its integers)."""
    x = np.asarray(x)
    with np.errstate(invalid="ignore"):  # NaNs stay NaN
        if dtype == "bf16":
            return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        return x.astype(np.float64)


def from_float64(v: np.ndarray, dtype: str) -> np.ndarray:
    """Round float64 values to `dtype`'s storage, to nearest even (int8: wrap, as C++ and
    torch do)."""
    v = np.asarray(v, dtype=np.float64)
    if dtype == "int8":
        return v.astype(np.int64).astype(np.int8)
    if dtype == "fp16":
        with np.errstate(over="ignore"):
            return v.astype(np.float16)
    with np.errstate(over="ignore"):
        f32 = v.astype(np.float32)
    if dtype == "fp32":
        return f32
    # to float32 rounding to odd (toward zero, then the last bit set where inexact), then to
    # bf16 to nearest even: one rounding in effect, as float32 has 16 more bits than bf16
    with np.errstate(over="ignore", invalid="ignore"):
        toward_zero = np.where(np.abs(f32) > np.abs(v), np.nextafter(f32, np.float32(0)), f32)
        bits = toward_zero.view(np.uint32).astype(np.uint64)
        bits |= (toward_zero != v) & ~np.isnan(v)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # round to nearest even
    out = np.where(np.isnan(v), 0x7FC0 | ((bits >> 16) & 0x8000), rounded)
    return out.astype(np.uint16)


def _rounded(fn, *inputs: np.ndarray, dtype: str, out: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        return from_float64(fn(*(to_float64(x, dtype) for x in inputs)), out)


def relu(x: np.ndarray, dtype: str, out: str) -> np.ndarray:
    return reference_relu(x, dtype)


def gelu(x: np.ndarray, dtype: str, out: str) -> np.ndarray:
    k = np.sqrt(2.0 / np.pi)
    return _rounded(lambda v: 0.5 * v * (1.0 + np.tanh(k * (v + 0.044715 * v**3))), x, dtype=dtype, out=out)  # fmt: skip


def _exp(v: np.ndarray) -> np.ndarray:
    """exp in float64 over float's range: +inf past float's largest value, as the baselines'
    `expf` overflows (silu(-90) is -0 in float, not -6e-38)."""
    e = np.exp(v)
    return np.where(e > _FLT_MAX, np.inf, e)


def _silu(v: np.ndarray) -> np.ndarray:
    return v / (1.0 + _exp(-v))


def silu(x: np.ndarray, dtype: str, out: str) -> np.ndarray:
    return _rounded(_silu, x, dtype=dtype, out=out)


def add(a: np.ndarray, b: np.ndarray, dtype: str, out: str) -> np.ndarray:
    return _rounded(np.add, a, b, dtype=dtype, out=out)


def mul(a: np.ndarray, b: np.ndarray, dtype: str, out: str) -> np.ndarray:
    return _rounded(np.multiply, a, b, dtype=dtype, out=out)


def silu_and_mul(gate: np.ndarray, up: np.ndarray, dtype: str, out: str) -> np.ndarray:
    """silu(gate) held in float, as every implementation holds it (a silu below float's
    smallest denormal is 0, and 0 * inf is NaN, as torch's), times up, rounded once."""
    return _rounded(lambda g, u: _silu(g).astype(np.float32) * u, gate, up, dtype=dtype, out=out)


def cast(x: np.ndarray, dtype: str, out: str) -> np.ndarray:
    return _rounded(lambda v: v, x, dtype=dtype, out=out)


def expected(op: Op, inputs: tuple[np.ndarray, ...], dtype: str) -> np.ndarray:
    """The op's reference output for `inputs` (storage dtypes) when timed at `dtype`."""
    return op.reference_fn()(*inputs, dtype=dtype, out=op.out_dtype(dtype))


def special_inputs(op: Op, dtype: str, n_random: int = 1 << 16, seed: int = 0) -> tuple:
    """Inputs every implementation of `op` must get right at `dtype`: each input's special
    values (NaNs, signed zeros, infinities, denormals, extremes; int8 edges), every pair of
    them for a two-input op, an even sweep of [-16, 16] (SWEEP points; every int8 value), then
    `n_random` random bit patterns per input."""
    ins = op.inputs
    specials = [special_values(o.dtype_at(dtype)) for o in ins]
    if len(ins) == 1:
        base = (specials[0],)
    else:
        a, b = np.meshgrid(np.arange(len(specials[0])), np.arange(len(specials[1])))
        base = (specials[0][a.ravel()], specials[1][b.ravel()])
    sweep = tuple(_sweep(o.dtype_at(dtype), i) for i, o in enumerate(ins))
    rand = tuple(random_bits(n_random, o.dtype_at(dtype), seed + i) for i, o in enumerate(ins))
    return tuple(np.concatenate(parts) for parts in zip(base, sweep, rand, strict=True))


SWEEP = 1 << 14


def _sweep(dtype: str, i: int) -> np.ndarray:
    """SWEEP points evenly over [-16, 16] in `dtype` (input i of an op runs backwards from the
    first, so a pair meets every sign); int8: every value."""
    if dtype == "int8":
        v = np.resize(np.arange(-128, 128), SWEEP)
    else:
        v = np.linspace(-16.0, 16.0, SWEEP)
    return from_float64(v if i % 2 == 0 else v[::-1], dtype)


def errors(op: Op, dtype: str, got: np.ndarray, want: np.ndarray) -> dict:
    """The largest error of a float output against its reference where both are finite:
    {"ulps": in ulps of the reference, "abs": absolute}; {} for an int8 output."""
    out = op.out_dtype(dtype)
    if out == "int8":
        return {}
    g, w = to_float64(got, out), to_float64(want, out)
    fin = np.isfinite(g) & np.isfinite(w)
    if not fin.any():
        return {"ulps": 0.0, "abs": 0.0}
    err = np.abs(g[fin] - w[fin])
    return {"ulps": float((err / ulp(w[fin], out)).max()), "abs": float(err.max())}


def ulp(v: np.ndarray, dtype: str) -> np.ndarray:
    """The spacing of float dtype `dtype` at |v| (float64; the denormal spacing below the
    smallest normal)."""
    p, emin = _FORMAT[dtype]
    a = np.abs(np.asarray(v, dtype=np.float64))
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    e = np.maximum(np.where(a > 0, e, emin), emin)
    return np.ldexp(1.0, (e - (p - 1)).astype(np.int64))


def mismatches(op: Op, dtype: str, got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Indices where output `got` breaks the op's rule against reference `want` (both in the
    output dtype's storage)."""
    out = op.out_dtype(dtype)
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        raise ValueError(f"{op.name}: output shape {got.shape}, reference {want.shape}")
    store = storage_dtype(out)
    if got.dtype != store or want.dtype != store:
        raise ValueError(f"{op.name} {out}: outputs must be {store}, got {got.dtype}, {want.dtype}")
    same_bits = bits_view(got, out) == bits_view(want, out)
    if op.rule.kind == "bits" or out == "int8":
        return np.flatnonzero(~same_bits)
    g, w = to_float64(got, out), to_float64(want, out)
    nan_g, nan_w = np.isnan(g), np.isnan(w)
    if op.rule.kind == "values":
        return np.flatnonzero(~np.where(nan_w, nan_g, same_bits))
    ulps, atol = op.rule.bound(out)
    with np.errstate(invalid="ignore"):
        inf = np.isinf(g) | np.isinf(w)
        close = np.abs(g - w) <= ulps * ulp(w, out) + atol
    ok = np.where(nan_w | nan_g, nan_w & nan_g, np.where(inf, g == w, close))
    return np.flatnonzero(~ok)
