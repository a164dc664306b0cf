"""GPU: the torch export of the shipped hot-7 policy (relu_torch.py), built with load_inline, as
torch.ops.sweeper.relu: bit-exact against sweeper_kernels.reference for every dtype (special
values and random bit patterns, sizes 0 to a 48 MiB working set, a misaligned start), relu.out
leaving the elements around out alone, the checks that refuse what the kernels cannot take,
autograd, torch.compile, capture into a CUDA graph on torch's stream, and its time beside
torch.relu's at a 48 MiB working set (printed; only the results are asserted)."""

from __future__ import annotations

import os
import shutil
import statistics
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sweeper_kernels.reference import (  # noqa: E402
    bits_view,
    itemsize,
    random_bits,
    reference_relu,
    special_values,
    storage_dtype,
)

from sweeper.export import export  # noqa: E402

pytestmark = pytest.mark.needs_tool("nvcc")

ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20
TORCH = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "int8": torch.int8}
WS48 = 48 * MiB  # working set (input + output): inside the H100's and the H200's L2
SIZES = (0, 1, 7, 4096 + 3)


def _path_with_this_python() -> str:
    """PATH with this Python's bin folder first (where pip puts ninja): torch runs the ninja
    on PATH."""
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


@pytest.fixture(scope="module")
def relu_torch(tmp_path_factory):
    """relu_torch.py of results/h200/hot-7/policy.json, imported and loaded (built once)."""
    import importlib.util

    path = _path_with_this_python()
    if shutil.which("ninja", path=path) is None:
        pytest.skip("ninja not found: torch's load_inline builds with it (pip install ninja)")
    out = tmp_path_factory.mktemp("torch_op") / "relu_torch.py"
    export(ROOT / "results/h200/hot-7/policy.json", "torch", out)
    spec = importlib.util.spec_from_file_location("relu_torch", out)
    module = importlib.util.module_from_spec(spec)
    # importable by name, as from a folder on sys.path: torch.compile imports a traced
    # function's module by its name
    sys.modules["relu_torch"] = module
    spec.loader.exec_module(module)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", path)  # torch runs the ninja on PATH: this Python's too
        module.load()
    return module


def _to_torch(x: np.ndarray, dtype: str):
    """A CUDA tensor with the bit patterns of `x` (storage dtype; bf16 held as uint16)."""
    signed = np.dtype(f"int{8 * x.itemsize}")
    return torch.from_numpy(x.view(signed).copy()).view(TORCH[dtype]).cuda()


def _bits(t, dtype: str) -> np.ndarray:
    ints = {1: torch.int8, 2: torch.int16, 4: torch.int32}[t.element_size()]
    return bits_view(t.view(ints).cpu().numpy(), dtype)


def _inputs(n: int, dtype: str) -> np.ndarray:
    x = random_bits(n, dtype, seed=n)
    sv = special_values(dtype)
    x[: min(n, sv.size)] = sv[: min(n, sv.size)]
    return x


@pytest.mark.parametrize("dtype", list(TORCH))
def test_bit_exact_against_the_reference(relu_torch, dtype):
    for n in (*SIZES, WS48 // (2 * itemsize(dtype))):
        x = _inputs(n + 1, dtype)
        want = bits_view(reference_relu(x, dtype), dtype)
        xt = _to_torch(x, dtype)
        for start in (0, 1):  # 1: a pointer off the vector width (the scalar kernel)
            src = xt[start : start + n]
            got = _bits(relu_torch.relu(src), dtype)
            np.testing.assert_array_equal(got, want[start : start + n], err_msg=f"{dtype} n={n}")
        if dtype != "int8" and n:  # torch.relu's values, but NaN -> +0 and -0 -> +0
            t = xt[:n]
            alike = torch.where(t > 0, t, torch.zeros_like(t))
            np.testing.assert_array_equal(_bits(alike, dtype), want[:n])


@pytest.mark.parametrize("dtype", list(TORCH))
def test_relu_out_writes_out_and_nothing_around_it(relu_torch, dtype):
    for n in SIZES:
        x = _inputs(n, dtype)
        poison = np.full(n + 2, 0x55, dtype=f"uint{8 * itemsize(dtype)}")
        around = _to_torch(poison.view(storage_dtype(dtype)), dtype)
        out = around[1 : n + 1]
        assert relu_torch.relu_out(_to_torch(x, dtype), out) is out
        assert torch.ops.sweeper.relu.out(_to_torch(x, dtype), out=out) is out
        got = _bits(around, dtype)
        np.testing.assert_array_equal(got[1 : n + 1], bits_view(reference_relu(x, dtype), dtype))
        assert got[0] == got[-1] == 0x55, dtype


REFUSALS = r"""
import re, sys
sys.path.insert(0, sys.argv[1])
import relu_torch, torch
relu_torch.load()
x = torch.randn(64, 64, device="cuda")
buf = torch.randn(4097, device="cuda")
cases = [
    ("x must be contiguous", lambda: relu_torch.relu(x.t())),
    ("x must be float32, float16, bfloat16 or int8", lambda: relu_torch.relu(x.double())),
    ("x must be a CUDA tensor", lambda: relu_torch.relu(x.cpu())),
    ("out overlaps x; there is no in-place form", lambda: relu_torch.relu_out(buf, buf)),
    ("out overlaps x", lambda: relu_torch.relu_out(buf[:4096], buf[1:])),
    ("out must have x's dtype", lambda: relu_torch.relu_out(x, torch.empty_like(x, dtype=torch.float16))),
    ("out must have x's shape \\[64, 64\\], got \\[64, 65\\]", lambda: relu_torch.relu_out(x, torch.empty(64, 65, device="cuda"))),
    ("out must be contiguous", lambda: relu_torch.relu_out(x, torch.empty_like(x).t())),
    ("out must be on x's device", lambda: relu_torch.relu_out(x, torch.empty_like(x, device="cpu"))),
]
for want, call in cases:
    print("case", want, flush=True)
    try:
        call()
        print("not refused", flush=True)
    except RuntimeError as e:
        print("ok" if re.search(want, str(e)) else "other: " + str(e).splitlines()[0], flush=True)
"""


def test_what_the_kernels_cannot_take_is_refused(relu_torch):
    """Each refusal raises with its message. In a process of its own (the build is torch's
    cached one): a crash in one fails this test, naming the case, not the suite."""
    import subprocess

    path = _path_with_this_python()
    folder = str(Path(relu_torch.__file__).parent)
    cmd = [sys.executable, "-c", REFUSALS, folder]
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PATH": path})
    lines = r.stdout.splitlines()
    cases = [ln.removeprefix("case ") for ln in lines if ln.startswith("case ")]
    outcomes = [ln for ln in lines if not ln.startswith("case ")]
    assert r.returncode == 0, (r.returncode, cases[-1:], r.stderr[-2000:])
    assert len(cases) == 9 and outcomes == ["ok"] * 9, list(zip(cases, outcomes, strict=False))


def test_autograd_gives_torch_relus_gradient(relu_torch):
    x = torch.randn(4099, device="cuda", requires_grad=True)
    x.data[:3] = torch.tensor([0.0, -0.0, 1.0])
    g = torch.randn(4099, device="cuda")
    relu_torch.relu(x).backward(g)
    ours = x.grad.clone()
    x.grad = None
    torch.relu(x).backward(g)
    assert torch.equal(ours, x.grad)
    assert torch.equal(ours, torch.where(x.detach() > 0, g, 0))


def test_torch_compile_runs_the_op(relu_torch):
    f = torch.compile(lambda x: relu_torch.relu(x) * 2, fullgraph=True)
    x = torch.randn(4099, device="cuda")
    assert torch.equal(f(x), torch.relu(x) * 2)


def _median_us(fn, x, calls=20, rounds=15) -> float:
    """Median time of one call, from CUDA graphs of `calls` back-to-back calls (no launch cost)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn(x)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn(x)
    graph.replay()
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    return statistics.median(times)


def test_time_beside_torch_relu_at_48_mib(relu_torch):
    """fp32, 48 MiB working set, the same input again and again (hot): each side timed as a
    CUDA graph, which also checks that the op launches on torch's current stream (a launch on
    any other stream breaks the capture). The ratio is printed, not asserted."""
    x = torch.randn(WS48 // 8, device="cuda")
    ours, theirs = [], []
    for _ in range(3):  # alternate, so drift hits both sides alike
        ours.append(_median_us(relu_torch.relu, x))
        theirs.append(_median_us(torch.relu, x))
    us, ut = statistics.median(ours), statistics.median(theirs)
    props = torch.cuda.get_device_properties(0)
    print(
        f"\nrelu_torch on {props.name} (L2 {props.L2_cache_size // MiB} MiB), fp32, 48 MiB "
        f"working set: {us:.2f} us against torch.relu's {ut:.2f} us, {ut / us:.3f}x"
    )
    y = relu_torch.relu(x)
    assert torch.equal(y, torch.relu(x))  # randn: no NaN, no -0 to tell them apart
