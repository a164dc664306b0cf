"""Each op's C++ element function on the GPU (sweeper_kernels.ops.host.device_source, built with
NVRTC), against the op's reference under its rule, and beside its torch baseline on the same
inputs: the bit-exact ops give torch's values (relu but for the NaN it documents), and where the
rule is an ulp bound, the body's largest error is no larger than torch's own."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

torch = pytest.importorskip("torch")


_TORCH = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "int8": torch.int8}


def _to_torch(x: np.ndarray, dtype: str):
    if dtype == "bf16":
        return torch.from_numpy(x.view(np.int16).copy()).view(torch.bfloat16).cuda()
    return torch.from_numpy(x.copy()).cuda()


def _to_numpy(t, dtype: str) -> np.ndarray:
    if dtype == "bf16":
        return t.view(torch.int16).cpu().numpy().view(np.uint16)
    return t.cpu().numpy()


@pytest.fixture(scope="module")
def device_ops():
    """The built-in ops' check kernels, built once with NVRTC (in its child process) and loaded
    into torch's context."""
    from cuda.bindings import driver as cu
    from sweeper_kernels.external import _compile, _drv, include_dirs
    from sweeper_kernels.ops import OPS
    from sweeper_kernels.ops.host import device_source

    torch.zeros(1, device="cuda")  # torch's primary context, current on this thread
    major, minor = torch.cuda.get_device_capability()
    opts = [f"--gpu-architecture=sm_{major}{minor}", "-std=c++17"]
    opts += [f"--include-path={d}" for d in include_dirs()]
    cubin, log = _compile(device_source(tuple(OPS.values())), "ops.cu", opts, "cubin")
    assert cubin is not None, log
    module = _drv(cu.cuModuleLoadData(cubin), "cuModuleLoadData")
    return module


def _run(module, op, dtype: str, ins: tuple[np.ndarray, ...]) -> np.ndarray:
    from cuda.bindings import driver as cu
    from sweeper_kernels.external import _drv
    from sweeper_kernels.ops.host import device_symbol

    fn = _drv(cu.cuModuleGetFunction(module, device_symbol(op, dtype).encode()), "function")
    xs = [_to_torch(x, o.dtype_at(dtype)) for x, o in zip(ins, op.inputs, strict=True)]
    out = op.out_dtype(dtype)
    y = torch.empty(len(ins[0]), dtype=_TORCH[out], device="cuda")
    vals = [ctypes.c_uint64(t.data_ptr()) for t in (*xs, y)] + [ctypes.c_int64(len(ins[0]))]
    argv = (ctypes.c_void_p * len(vals))(*(ctypes.addressof(v) for v in vals))
    stream = torch.cuda.current_stream().cuda_stream
    blocks = (len(ins[0]) + 255) // 256
    _drv(cu.cuLaunchKernel(fn, blocks, 1, 1, 256, 1, 1, 0, cu.CUstream(stream),
                           ctypes.addressof(argv), 0), "launch")  # fmt: skip
    torch.cuda.synchronize()
    return _to_numpy(y, out), [xs]


def _pairs():
    from sweeper_kernels.ops import OPS

    return [(name, d) for name, op in OPS.items() for d in op.dtypes]


@pytest.fixture(scope="module")
def outputs(device_ops):
    """(op, dtype) -> (inputs, the body's output on the GPU, torch's, the reference)."""
    from sweeper_kernels.ops import OPS
    from sweeper_kernels.ops.reference import expected, special_inputs

    out = {}
    for name, dtype in _pairs():
        op = OPS[name]
        ins = special_inputs(op, dtype, n_random=1 << 18)
        got, (xs,) = _run(device_ops, op, dtype, ins)
        base = _to_numpy(op.torch_fn()(*xs), op.out_dtype(dtype))
        out[name, dtype] = (ins, got, base, expected(op, ins, dtype))
    return out


@pytest.mark.parametrize("name, dtype", _pairs(), ids=[f"{o}-{d}" for o, d in _pairs()])
def test_an_ops_body_on_the_gpu_keeps_its_rule_and_torchs_values(outputs, name, dtype):
    from sweeper_kernels.ops import OPS
    from sweeper_kernels.ops.reference import mismatches, to_float64
    from sweeper_kernels.reference import bits_view

    op = OPS[name]
    ins, got, base, want = outputs[name, dtype]
    bad = mismatches(op, dtype, got, want)
    assert len(bad) == 0, (name, dtype, len(bad), [x[bad[:3]] for x in ins], got[bad[:3]])
    if op.rule.kind != "ulps":
        # torch's values, a NaN for a NaN; relu: but for the NaN inputs torch keeps (documented)
        differ = mismatches(op, dtype, got, base) if name != "relu" else np.flatnonzero(
            (bits_view(got, dtype) != bits_view(base, dtype))
            & ~np.isnan(to_float64(ins[0], dtype))
        )  # fmt: skip
        assert len(differ) == 0, (name, dtype, len(differ), [x[differ[:3]] for x in ins],
                                  got[differ[:3]], base[differ[:3]])  # fmt: skip


def _largest_errors(y, w, out: str, atol: float) -> tuple[float, float]:
    """(largest error in ulps of the reference where an ulp is above atol, largest absolute
    error where it is not), over the finite outputs."""
    from sweeper_kernels.ops.reference import to_float64, ulp

    g, r = to_float64(y, out), to_float64(w, out)
    fin = np.isfinite(g) & np.isfinite(r)
    err, u = np.abs(g - r)[fin], ulp(r[fin], out)
    by_ulp = u > atol
    return (float((err[by_ulp] / u[by_ulp]).max(initial=0.0)),
            float(err[~by_ulp].max(initial=0.0)))  # fmt: skip


def test_an_ulp_bound_is_no_looser_than_torchs_own_error(outputs):
    """Where the rule is an ulp bound, torch's own output needs it: its largest error in ulps
    (where an ulp is above the rule's atol) rounds up to the bound, and where the atol governs
    torch's largest absolute error reaches it."""
    from sweeper_kernels.ops import OPS

    rows, loose = [], []
    for (name, dtype), (_, got, base, want) in outputs.items():
        op = OPS[name]
        if op.rule.kind != "ulps":
            continue
        out = op.out_dtype(dtype)
        bound, atol = op.rule.bound(out)
        ours, theirs = (_largest_errors(y, want, out, atol) for y in (got, base))
        rows.append(f"{name:<13} {dtype:<5} rule {bound} ulp + {atol:.3g}: body {ours[0]:.3g} ulp "
                    f"{ours[1]:.3g} abs; torch {theirs[0]:.3g} ulp {theirs[1]:.3g} abs")  # fmt: skip
        if bound > np.ceil(theirs[0]) or atol > theirs[1]:
            loose.append(rows[-1])
    print("\n" + "\n".join(rows))
    assert loose == [], loose
