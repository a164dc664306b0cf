"""An op's element function in CUDA C++, and that very text compiled for the CPU.

`element_function(op)` is the one C++ form of an op's body: a `__host__ __device__` template
over the compute type. `host_library(ops)` compiles it with nvcc (host code, no GPU) into a
shared library with one entry per op and dtype, `sweeper_host_<op>_<dtype>`, that loads each input
from its storage dtype, calls the function and rounds the result to the output's storage dtype
(to nearest even); `run_on_host` calls it through ctypes. This checks the formula, the
conversions and the special values on any machine; the device's own `tanhf` and `expf` differ
from the host C library's by an ulp or two, which the op's rule allows for.
`device_source(ops)` is the same element loop as one CUDA kernel per op and dtype (one element
per thread), for NVRTC: what tests/gpu/test_ops_gpu.py runs on the device beside torch.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import subprocess

import numpy as np
from sweeper_kernels.build import cache_root
from sweeper_kernels.errors import KernelError
from sweeper_kernels.ops.core import Op, compute_type
from sweeper_kernels.reference import storage_dtype
from sweeper_kernels.toolkit import find_tool, how_to_get

# storage type, load to the compute type, store from it (round to nearest even; int8 wraps)
CONVERT = {
    "fp32": ("float", "v", "v"),
    "fp16": ("__half", "__half2float(v)", "__float2half_rn(v)"),
    "bf16": ("__nv_bfloat16", "__bfloat162float(v)", "__float2bfloat16_rn(v)"),
    "int8": ("int8_t", "int(v)", "int8_t(v)"),
}

PRELUDE = """\
#include <cstdint>
#include <cmath>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
"""
DEVICE_PRELUDE = """\
typedef long long int64_t;
typedef signed char int8_t;
#include <cuda_fp16.h>
#include <cuda_bf16.h>
"""


def function_name(op: Op) -> str:
    return f"sweeper_op_{op.name}"


def element_function(op: Op) -> str:
    """The op's element function: `template <class C> C sweeper_op_<name>(C in...)`, C the
    compute type (float, or int at int8)."""
    params = ", ".join(f"C {o.name}" for o in op.inputs)
    body = "\n".join(f"  {line}" for line in op.body.strip().splitlines())
    return (
        f"// {op.name}: {op.summary}\n"
        f"template <class C>\n__host__ __device__ __forceinline__ C {function_name(op)}({params}) {{\n"
        f"{body}\n}}\n"
    )


def _element(op: Op, dtype: str) -> tuple[list[str], list[str]]:
    """(the entry's input parameters, the statements that do element k): each input loaded
    and converted to the compute type, the element function called, the result rounded to
    the output's storage."""
    c = compute_type(dtype)
    args, lines = [], []
    for i, o in enumerate(op.inputs):
        st, load, _ = CONVERT[o.dtype_at(dtype)]
        args.append(f"const void* p{i}")
        lines.append(
            f"const {c} {o.name} = [](const {st} v) {{ return {c}({load}); }}"
            f"(static_cast<const {st}*>(p{i})[k]);"
        )
    out_st, _, store = CONVERT[op.out_dtype(dtype)]
    call = ", ".join(o.name for o in op.inputs)
    lines += [f"const {c} v = {function_name(op)}<{c}>({call});",
              f"static_cast<{out_st}*>(y)[k] = {store};"]  # fmt: skip
    return args, lines


def _entry(op: Op, dtype: str) -> str:
    args, lines = _element(op, dtype)
    return (
        f'extern "C" void sweeper_host_{op.name}_{dtype}({", ".join(args)}, void* y, int64_t n) {{\n'
        f"  for (int64_t k = 0; k < n; ++k) {{\n"
        + "".join(f"    {ln}\n" for ln in lines)
        + "  }\n}\n"
    )


def device_symbol(op: Op, dtype: str) -> str:
    return f"sweeper_dev_{op.name}_{dtype}"


def device_source(ops: tuple[Op, ...]) -> str:
    """The same element loop as a CUDA kernel per op and dtype, one element per thread,
    `sweeper_dev_<op>_<dtype>(inputs..., y, n)`, for NVRTC: the op's function checked on the
    device itself (a check kernel, not a tuned one)."""
    parts = [DEVICE_PRELUDE]
    for op in ops:
        parts.append(element_function(op))
        for d in op.dtypes:
            args, lines = _element(op, d)
            parts.append(
                f'extern "C" __global__ void {device_symbol(op, d)}({", ".join(args)}, void* y, '
                "int64_t n) {\n"
                "  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;\n"
                "  if (k < n) {\n" + "".join(f"    {ln}\n" for ln in lines) + "  }\n}\n"
            )
    return "\n".join(parts)


def host_source(ops: tuple[Op, ...]) -> str:
    """The C++ file `host_library` compiles: each op's element function and one entry per
    dtype it takes."""
    parts = [PRELUDE]
    for op in ops:
        parts += [element_function(op), *(_entry(op, d) for d in op.dtypes)]
    return "\n".join(parts)


def host_library(ops: tuple[Op, ...]) -> ctypes.CDLL:
    """One host library of `ops` (one nvcc call, however many ops), built on first use and
    cached by its source's hash."""
    from sweeper_kernels.external import include_dirs

    names = [op.name for op in ops]
    if len(set(names)) != len(names):
        raise KernelError(f"two ops of one name in one library: {', '.join(names)}")
    source = host_source(ops)
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    d = cache_root() / "ops-host"
    lib = d / f"ops-{digest}.so"
    if not lib.exists():
        nvcc = find_tool("nvcc")
        if not nvcc:
            raise KernelError(how_to_get("nvcc"))
        d.mkdir(parents=True, exist_ok=True)
        src = d / f"ops-{digest}.cu"
        src.write_text(source)
        tmp = lib.with_suffix(f".{os.getpid()}.tmp")
        cmd = [nvcc, "-std=c++17", "-O2", "-shared", "-Xcompiler", "-fPIC"]
        cmd += [f"-I{p}" for p in include_dirs()] + [str(src), "-o", str(tmp)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise KernelError(f"{', '.join(names)}: {_first_error(r.stderr + r.stdout, source)}")
        os.replace(tmp, lib)
    return ctypes.CDLL(str(lib))


def _first_error(log: str, source: str) -> str:
    """nvcc's first error in one line, with the source line it names."""
    lines = source.splitlines()
    for line in log.splitlines():
        m = re.search(r"\((\d+)\): (?:catastrophic )?error: (.*)", line)
        if m:
            at = int(m.group(1))
            code = lines[at - 1].strip() if 0 < at <= len(lines) else ""
            return f"the C++ does not compile: {m.group(2).strip()}" + (
                f" at `{code}`" if code else ""
            )
    last = [ln for ln in log.splitlines() if ln.strip()][-1:] or ["no output"]
    return f"nvcc could not build the host library: {last[0].strip()}"


def run_on_host(
    op: Op, dtype: str, inputs: tuple[np.ndarray, ...], lib: ctypes.CDLL | None = None
) -> np.ndarray:
    """The op's C++ element function applied on the CPU to `inputs` (storage dtypes), as
    storage data of the output dtype; `lib`: a host library holding the op (else its own)."""
    if dtype not in op.dtypes:
        raise KernelError(f"{op.name} takes {', '.join(op.dtypes)}, not {dtype}")
    if len(inputs) != len(op.inputs):
        raise KernelError(f"{op.name} takes {len(op.inputs)} inputs, got {len(inputs)}")
    arrays = []
    for o, x in zip(op.inputs, inputs, strict=True):
        want = storage_dtype(o.dtype_at(dtype))
        x = np.ascontiguousarray(x)
        if x.dtype != want or x.shape != inputs[0].shape:
            raise KernelError(f"{op.name} {dtype}: input {o.name} must be {want} of one shape")
        arrays.append(x)
    y = np.empty(arrays[0].shape, dtype=storage_dtype(op.out_dtype(dtype)))
    fn = getattr(lib or host_library((op,)), f"sweeper_host_{op.name}_{dtype}")
    fn.restype = None
    ptrs = [ctypes.c_void_p(a.ctypes.data) for a in arrays]
    fn(*ptrs, ctypes.c_void_p(y.ctypes.data), ctypes.c_int64(y.size))
    return y


def check_on_host(
    op: Op, dtype: str, n_random: int = 1 << 16, seed: int = 0, lib: ctypes.CDLL | None = None
) -> dict:
    """The op's element function on the CPU against its reference, under its rule, at `dtype`
    (sweeper_kernels.ops.reference.special_inputs): {"inputs": n, "mismatches": k,
    "example": the first mismatch in words, or "", "worst": the largest error where output
    and reference are finite (reference.errors)}."""
    from sweeper_kernels.ops.reference import (
        errors,
        expected,
        mismatches,
        special_inputs,
        to_float64,
    )

    ins = special_inputs(op, dtype, n_random=n_random, seed=seed)
    got = run_on_host(op, dtype, ins, lib)
    try:
        want_all = expected(op, ins, dtype)
        bad = mismatches(op, dtype, got, np.asarray(want_all))
    except Exception as e:  # noqa: BLE001 (a user's reference: its failure, in one line)
        raise KernelError(
            f"{op.name} {dtype}: its reference failed: {type(e).__name__}: {e}"
        ) from None
    example = ""
    if len(bad):
        i, out = int(bad[0]), op.out_dtype(dtype)
        args = ", ".join(
            f"{o.name}={to_float64(x[i : i + 1], o.dtype_at(dtype))[0]!r}"
            for o, x in zip(op.inputs, ins, strict=True)
        )
        example = (
            f"{op.name}({args}) = {to_float64(got[i : i + 1], out)[0]!r}, "
            f"reference {to_float64(np.asarray(want_all)[i : i + 1], out)[0]!r}"
        )
    return {"inputs": int(got.size), "mismatches": int(len(bad)), "example": example,
            "worst": errors(op, dtype, got, want_all)}  # fmt: skip
