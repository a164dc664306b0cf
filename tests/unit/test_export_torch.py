"""The torch export (relu_torch.py): the CUDA header it embeds is `--format cuda`'s byte for
byte, the file is valid, lint-clean Python that imports without compiling anything (and names
`pip install torch` without torch), its .cu source compiles with nvcc, and, where torch, nvcc
and ninja are there, the extension builds without a GPU and the op traces through its fake
implementation (meta tensors, FakeTensorMode, make_fx, torch.compile)."""

from __future__ import annotations

import ast
import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_export import _nvcc, all_hints_policy, needs_nvcc

from sweeper.analyze.policy import load_any, write_policy
from sweeper.export import export, render
from sweeper.export.torch_op import render_cpp

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "results" / "h200" / "hot-7" / "policy.json"
# the module-level constants of relu_torch.py (sources, flags, the extension's name)
CONSTANTS = ("HEADER", "CPP", "CUDA_SOURCE", "NVCC_FLAGS", "CXX_FLAGS", "_SOURCES", "NAME")
# torch.utils.cpp_extension.COMMON_NVCC_FLAGS (torch 2.14): what load_inline adds to nvcc's
# command line, read from torch itself where it is installed
TORCH_NVCC_FLAGS = [
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
    "--expt-relaxed-constexpr",
]


@pytest.fixture(scope="module")
def doc():
    return load_any(POLICY)


@pytest.fixture(scope="module")
def text(doc):
    return render(doc, "torch")


def constants(text: str) -> dict:
    """CONSTANTS as the file defines them, evaluated from its top-level assignments alone
    (the file itself imports torch)."""
    tree = ast.parse(text)
    keep = [
        node
        for node in tree.body
        if isinstance(node, ast.Assign)
        and all(isinstance(t, ast.Name) and t.id in CONSTANTS for t in node.targets)
    ]
    namespace = {"hashlib": hashlib}
    exec(compile(ast.Module(body=keep, type_ignores=[]), "relu_torch.py", "exec"), namespace)
    return {name: namespace[name] for name in CONSTANTS}


def test_the_embedded_header_is_the_cuda_export_byte_for_byte(doc, text):
    c = constants(text)
    header = render(doc, "cuda")
    assert c["HEADER"] == header
    assert c["CUDA_SOURCE"] == "#define SWEEPER_RELU_DEFINE_C_API\n" + header
    assert c["CPP"] == render_cpp()
    assert c["NVCC_FLAGS"] == ["-std=c++17", "-O3"]  # as verify builds the header
    assert c["NAME"].startswith("sweeper_relu_") and len(c["NAME"]) == len("sweeper_relu_") + 12


def test_a_changed_policy_builds_under_another_name(doc, text):
    other = copy.deepcopy(doc)
    dtype = next(iter(other["entries"][0]["dtypes"]))
    bands = other["entries"][0]["dtypes"][dtype]["bands"]
    bands[0]["config"] = bands[-1]["config"]
    assert constants(render(other, "torch"))["NAME"] != constants(text)["NAME"]
    assert constants(render(doc, "torch"))["NAME"] == constants(text)["NAME"]  # deterministic


def test_the_cpp_registers_both_overloads_and_checks_its_inputs():
    cpp = render_cpp()
    assert 'm.def("relu(Tensor x) -> Tensor");' in cpp
    assert 'm.def("relu.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)");' in cpp
    assert "TORCH_LIBRARY_IMPL(sweeper, CUDA, m)" in cpp
    for dt, scalar in (("fp32", "Float"), ("fp16", "Half"), ("bf16", "BFloat16"), ("int8", "Char")):
        assert (
            f"cudaError_t sweeper_launch_relu_{dt}(const void* in, void* out, size_t n, "
            "cudaStream_t s);" in cpp
        )
        assert f"case c10::ScalarType::{scalar}: return sweeper_launch_relu_{dt};" in cpp
    assert "float32, float16, bfloat16 or int8" in cpp
    assert "c10::cuda::CUDAGuard" in cpp and "getCurrentCUDAStream" in cpp
    assert "at::get_overlap_status(x, out) == at::MemOverlapStatus::No" in cpp
    assert "cudaGetErrorString(err)" in cpp and "if (x.numel() == 0) return;" in cpp


def test_the_docstring_states_provenance_the_nan_rule_and_the_limits(doc, text):
    from sweeper.ops import get_op

    first = ast.get_docstring(ast.parse(text))
    assert "h200: cc 9.0, L2 62914560 bytes; runs hot-7; plan c3e620e4ee88" in first
    assert f"Differs from torch.relu: {get_op('relu').differs}." in first
    assert "NaN of either sign maps to +0" in first and "torch.relu keeps the NaN" in first
    assert "No in-place form" in first and "contiguous only" in first
    assert "float32, float16, bfloat16 and int8" in first
    nc = sum(c["load_hint"] == "nc" for c in doc["configs"].values())
    assert nc > 0 and f"{nc} of the policy's {len(doc['configs'])} configs" in first
    assert "ld.global.nc" in first


def _path_with_this_python() -> str:
    """PATH with this Python's bin folder first (where pip puts ruff and ninja)."""
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


def test_the_file_is_valid_python_that_ruff_accepts(text, tmp_path):
    compile(text, "relu_torch.py", "exec")
    ruff = shutil.which("ruff", path=_path_with_this_python())
    if ruff is None:
        pytest.skip("ruff not found (the test extra installs it)")
    path = tmp_path / "relu_torch.py"
    path.write_text(text)
    config = str(ROOT / "pyproject.toml")
    for cmd in (["check"], ["format", "--check"]):
        r = subprocess.run([ruff, *cmd, "--config", config, str(path)], capture_output=True)
        assert r.returncode == 0, (r.stdout + r.stderr).decode()


def test_without_torch_the_import_says_how_to_get_it(text, tmp_path):
    path = tmp_path / "relu_torch.py"
    path.write_text(text)
    code = (
        "import runpy, sys; sys.modules['torch'] = None\n"  # import torch raises ImportError
        "try:\n    runpy.run_path(sys.argv[1])\n"
        "except ImportError as e:\n    print(e)\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "pip install torch" in r.stdout


def test_importing_compiles_nothing(text, tmp_path):
    pytest.importorskip("torch", reason="torch is not installed (CI has none)")
    (tmp_path / "relu_torch.py").write_text(text)
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import relu_torch\n"
        "print(callable(relu_torch.relu), callable(relu_torch.relu_out), relu_torch._op)"
    )
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext")}
    cmd = [sys.executable, "-c", code, str(tmp_path)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True", "None"]
    assert not (tmp_path / "ext").exists()


@needs_nvcc
def test_the_cuda_source_compiles_with_the_flags_load_inline_adds(text, tmp_path):
    c = constants(text)
    try:
        from torch.utils.cpp_extension import COMMON_NVCC_FLAGS as torch_flags
    except ImportError:
        torch_flags = TORCH_NVCC_FLAGS
    (tmp_path / "cuda.cu").write_text(c["CUDA_SOURCE"])
    gencode = ["-gencode", "arch=compute_90,code=sm_90"]
    _nvcc(*torch_flags, *c["NVCC_FLAGS"], *gencode, "-c", "cuda.cu", "-o", "cuda.o", cwd=tmp_path)
    nm = shutil.which("nm")
    if nm:
        symbols = subprocess.run([nm, "cuda.o"], cwd=tmp_path, capture_output=True, text=True)
        for dt in ("fp32", "fp16", "bf16", "int8"):
            assert f" T sweeper_launch_relu_{dt}\n" in symbols.stdout, dt


BUILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import relu_torch, torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

out = {"op": str(relu_torch.load()), "again": relu_torch.load() is relu_torch.load()}
out["overloads"] = sorted(torch.ops.sweeper.relu.overloads())
dtypes = (torch.float32, torch.float16, torch.bfloat16, torch.int8)
with FakeTensorMode():
    for dt in dtypes:
        x = torch.empty(3, 5, dtype=dt, device="cuda")
        y = torch.ops.sweeper.relu(x)
        o = torch.empty_like(x)
        out[f"fake {dt}"] = [list(y.shape), str(y.dtype), str(y.device),
                             torch.ops.sweeper.relu.out(x, out=o) is o]
x = torch.empty(7, device="meta", requires_grad=True)
relu_torch.relu(x).sum().backward()
out["meta grad"] = [list(x.grad.shape), str(x.grad.device)]
torch.library.opcheck(torch.ops.sweeper.relu.default, (torch.empty(9, device="meta"),))
out["opcheck meta"] = True
f = lambda x: torch.ops.sweeper.relu(x) * 2
out["make_fx"] = "torch.ops.sweeper.relu.default" in make_fx(f, tracing_mode="symbolic")(
    torch.empty(8)).code
y = torch.compile(f, fullgraph=True, backend="aot_eager")(torch.empty(4, 2, device="meta"))
out["compile"] = [list(y.shape), str(y.device)]
try:
    relu_torch.relu(torch.ones(3))
except RuntimeError as e:
    out["cpu"] = str(e).splitlines()[0]
print(json.dumps(out))
"""


def _cuda_home() -> str | None:
    """A CUDA folder with the runtime's headers for torch's build: CUDA_HOME, torch's own
    guess, or the folder above nvcc's."""
    from sweeper_kernels.toolkit import find_tool
    from torch.utils import cpp_extension

    nvcc = find_tool("nvcc")
    guesses = [os.environ.get("CUDA_HOME"), cpp_extension.CUDA_HOME]
    guesses.append(str(Path(nvcc).resolve().parents[1]) if nvcc else None)
    return next((g for g in guesses if g and Path(g, "include", "cuda_runtime.h").exists()), None)


@needs_nvcc
def test_the_op_builds_and_traces_without_a_gpu(text, tmp_path):
    pytest.importorskip("torch", reason="torch is not installed (CI has none)")
    path = _path_with_this_python()
    if shutil.which("ninja", path=path) is None:
        pytest.skip("ninja not found: torch's load_inline builds with it (pip install ninja)")
    home = _cuda_home()
    if home is None:
        pytest.skip("no CUDA folder with include/cuda_runtime.h: set CUDA_HOME")
    (tmp_path / "relu_torch.py").write_text(text)
    env = {
        **os.environ,
        "PATH": path,
        "CUDA_HOME": home,
        "TORCH_CUDA_ARCH_LIST": "9.0",
        "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext"),
    }
    # its own process: a process defines the `sweeper` op library once
    cmd = [sys.executable, "-c", BUILD, str(tmp_path)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    out = json.loads(r.stdout.splitlines()[-1])
    assert out["op"] == "sweeper.relu" and out["again"]
    assert out["overloads"] == ["default", "out"]
    for dt in ("float32", "float16", "bfloat16", "int8"):
        assert out[f"fake torch.{dt}"] == [[3, 5], f"torch.{dt}", "cuda:0", True], dt
    assert out["meta grad"] == [[7], "meta"]
    assert out["opcheck meta"] and out["make_fx"]
    assert out["compile"] == [[4, 2], "meta"]
    assert out["cpu"] == "sweeper::relu: x must be a CUDA tensor, got one on cpu"


def test_cli_writes_the_file_and_keeps_a_different_one_unless_forced(tmp_path):
    from typer.testing import CliRunner

    from sweeper.cli import app

    ppath = write_policy(tmp_path / "policy.json", all_hints_policy())
    cli = CliRunner()
    target = tmp_path / "relu_torch.py"
    r = cli.invoke(app, ["export", str(ppath), "--format", "torch"])
    assert r.exit_code == 0, r.output
    assert r.output.strip() == str(target)  # the default name, next to the policy
    first = target.read_bytes()
    assert first.decode() == render(load_any(ppath), "torch")
    out = tmp_path / "mine.py"
    args = ["export", str(ppath), "--format", "torch", "-o", str(out)]
    assert cli.invoke(app, args).exit_code == 0
    assert out.read_bytes() == first
    assert cli.invoke(app, args).exit_code == 0  # the same contents: fine
    out.write_text("# my edits\n")
    r = cli.invoke(app, args)
    assert r.exit_code == 1 and "--force" in r.output and r.output.count("\n") == 1
    assert out.read_text() == "# my edits\n"
    r = cli.invoke(app, [*args, "--force"])
    assert r.exit_code == 0 and out.read_bytes() == first


def test_the_api_export_names_the_file_relu_torch(tmp_path):
    ppath = write_policy(tmp_path / "policy.json", all_hints_policy())
    assert export(ppath, "torch").name == "relu_torch.py"
