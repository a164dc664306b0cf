"""Each op's C++ element function, compiled for the CPU with nvcc (the text the kernels are
made of), against its reference under its rule; the rules and the references themselves; a
user's op in one file (examples/my_ops.py) through `sweeper ops check`."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from sweeper_kernels.ops import OPS, Rule, load_op
from sweeper_kernels.ops.reference import (
    expected,
    from_float64,
    mismatches,
    special_inputs,
    to_float64,
    ulp,
)

ROOT = Path(__file__).parents[2]
needs_nvcc = pytest.mark.needs_tool("nvcc")
PAIRS = [(name, d) for name, op in OPS.items() for d in op.dtypes]

# A plausible slip in each body, and the rule catches it on the special and random inputs.
SLIPS = {
    "relu": ("x > C(0) ? x : C(0)", "x >= C(0) ? x : C(0)"),  # -0 stays -0
    "gelu": ("C(0.044715)", "C(0)"),  # the cube term dropped
    "silu": ("expf(-x)", "expf(x)"),
    "add": ("a + b", "b + b"),
    "mul": ("a * b", "a * a"),
    "silu_and_mul": ("* up", "* gate"),
    "cast_fp32_bf16": ("return x;", "return x * C(1.00001);"),
    "cast_bf16_fp32": ("return x;", "return -x;"),
}


@pytest.fixture(scope="module")
def libs():
    """The built-in ops and one slip of each, in one host library each (two nvcc calls)."""
    from sweeper_kernels.ops.host import host_library

    slipped = tuple(
        replace(op, name=f"{op.name}_slip", body=op.body.replace(*SLIPS[op.name]))
        for op in OPS.values()
    )
    assert all(s.body != OPS[s.name[:-5]].body for s in slipped)
    return host_library(tuple(OPS.values())), host_library(slipped), slipped


@needs_nvcc
@pytest.mark.xdist_group("op-host")  # one worker builds the libraries once
@pytest.mark.parametrize("name, dtype", PAIRS, ids=[f"{o}-{d}" for o, d in PAIRS])
def test_every_ops_body_keeps_its_rule_on_the_host(libs, name, dtype):
    from sweeper_kernels.ops.host import check_on_host

    res = check_on_host(OPS[name], dtype, n_random=1 << 14, lib=libs[0])
    assert res["mismatches"] == 0, res["example"]
    pairs = len(special_inputs(OPS[name], dtype, n_random=0)[0])
    assert res["inputs"] == pairs + (1 << 14)


@needs_nvcc
@pytest.mark.xdist_group("op-host")
@pytest.mark.parametrize("name", list(OPS))
def test_a_slip_in_a_body_breaks_its_rule(libs, name):
    from sweeper_kernels.ops.host import check_on_host

    slip = next(s for s in libs[2] if s.name == f"{name}_slip")
    # relu's slip is the same function on integers (no -0): caught at every float dtype
    dtypes = [d for d in slip.dtypes if (name, d) != ("relu", "int8")]
    caught = [check_on_host(slip, d, n_random=1 << 14, lib=libs[1]) for d in dtypes]
    assert all(r["mismatches"] > 0 for r in caught), (name, caught)
    assert caught[0]["example"].startswith(f"{name}_slip(")


def test_the_references_round_once_to_nearest_even():
    # bf16 ties go to the even significand; NaN stays NaN; overflow is infinity
    v = np.array([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-30, np.nan, 2.0**128, -0.0])
    assert from_float64(v, "bf16").tolist() == [0x3F80, 0x3F82, 0x3F81, 0x7FC0, 0x7F80, 0x8000]
    h = np.array([1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-11 + 2**-40, 65520.0])
    assert from_float64(h, "fp16").tolist() == [1.0, 1 + 2**-9, 1 + 2**-10, np.inf]
    assert from_float64(np.array([130.0, -129.0]), "int8").tolist() == [-126, 127]  # wraps
    bits = np.array([0x3F80, 0xFF80, 0x0001], dtype=np.uint16)
    assert to_float64(bits, "bf16").tolist() == [1.0, -np.inf, 2.0**-133]
    # add at fp32 is float32's own addition, correctly rounded
    a, b = (np.random.default_rng(s).standard_normal(4096).astype(np.float32) for s in (1, 2))
    np.testing.assert_array_equal(expected(OPS["add"], (a, b), "fp32"), a + b)


def test_ulp_is_the_dtypes_spacing_down_to_its_denormals():
    assert ulp(np.array([1.0, 0.75, 0.0, 2.0**-130]), "fp32").tolist() == [
        2.0**-23, 2.0**-24, 2.0**-149, 2.0**-149]  # fmt: skip
    assert ulp(np.array([1.0, 2.0**-20]), "fp16").tolist() == [2.0**-10, 2.0**-24]
    assert ulp(np.array([-3.0]), "bf16").tolist() == [2.0**-6]


def test_each_rule_accepts_and_refuses_what_it_says():
    f32 = np.float32
    nan_a, nan_b = (
        np.array([b], dtype=np.uint32).view(np.float32) for b in (0x7FC00000, 0x7FC00001)
    )
    # "bits": a NaN payload counts; "values": any NaN for a NaN, but -0 is not +0
    relu, add = OPS["relu"], OPS["add"]
    assert mismatches(relu, "fp32", nan_a, nan_b).tolist() == [0]
    assert mismatches(add, "fp32", nan_a, nan_b).tolist() == []
    assert mismatches(add, "fp32", np.array([-0.0], f32), np.array([0.0], f32)).tolist() == [0]
    # "ulps": the bound in ulps plus atol; NaN and infinities exactly
    silu, gelu = OPS["silu"], OPS["gelu"]  # fp32: silu 2 ulps; gelu 4 + 2^-21 absolute
    one = np.array([1.0], f32)
    assert mismatches(silu, "fp32", one + f32(2 * 2**-23), one).tolist() == []
    assert mismatches(silu, "fp32", one + f32(3 * 2**-23), one).tolist() == [0]
    tiny = np.array([1e-7], f32)
    assert mismatches(silu, "fp32", tiny * 2, tiny).tolist() == [0]
    assert mismatches(gelu, "fp32", tiny * 2, tiny).tolist() == []
    inf, big = np.array([np.inf], f32), np.array([np.finfo(f32).max], f32)
    assert mismatches(gelu, "fp32", big, inf).tolist() == [0]
    assert mismatches(gelu, "fp32", nan_a, one).tolist() == [0]
    assert mismatches(gelu, "fp32", one, nan_a).tolist() == [0]
    with pytest.raises(ValueError, match="outputs must be uint16"):
        mismatches(OPS["cast_fp32_bf16"], "fp32", one, one)


def test_a_users_op_file_is_loaded_and_its_mistakes_refused(tmp_path):
    leaky = load_op(f"{ROOT}/examples/my_ops.py:leaky")
    assert leaky.name == "leaky_relu" and leaky.rule.bound("fp32") == (0, 0.0)
    x = np.array([-2.0, 3.0, -0.0, np.nan], dtype=np.float32)
    got = leaky.reference_fn()(x, dtype="fp32", out="fp32")
    assert got[1] == 3.0 and got[0] == np.float32(np.float32(0.01) * np.float64(-2.0))
    assert np.signbit(got[2]) and np.isnan(got[3])
    bad = tmp_path / "bad.py"
    bad.write_text("from sweeper_kernels.ops import RELU\nx = 1\nrelu = RELU\nboom = 1 /\n")
    cases = {
        f"{tmp_path}/nope.py:x": "expected FILE.py:NAME with an existing Python file",
        f"{bad}:x": "SyntaxError",
    }
    for spec, message in cases.items():
        with pytest.raises(ValueError, match=message):
            load_op(spec)
    bad.write_text("from sweeper_kernels.ops import RELU\nx = 1\nrelu = RELU\n")
    with pytest.raises(ValueError, match="'x' is not a sweeper_kernels.ops.Op"):
        load_op(f"{bad}:x")
    with pytest.raises(ValueError, match="op name 'relu' is a built-in op's"):
        load_op(f"{bad}:relu")


def _sweeper(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "sweeper", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


@needs_nvcc
def test_ops_check_passes_the_example_and_fails_a_broken_op_in_one_line(tmp_path):
    r = _sweeper("ops", "check", "examples/my_ops.py:leaky", "--samples", "4096")
    assert r.returncode == 0, r.stderr
    assert [ln.split()[:3] for ln in r.stdout.splitlines()] == [
        ["leaky_relu", d, "->"] for d in ("fp32", "fp16", "bf16")]  # fmt: skip
    assert all(ln.endswith(" ok") for ln in r.stdout.splitlines())
    broken = tmp_path / "broken.py"
    text = (ROOT / "examples/my_ops.py").read_text()
    broken.write_text(text.replace("C(0.01f) * x", "C(0.02f) * x"))
    r = _sweeper("ops", "check", f"{broken}:leaky", "--dtypes", "fp16", "--samples", "256")
    assert r.returncode == 1
    assert "outside the rule" in r.stdout and "e.g. leaky_relu(x=" in r.stdout
    assert r.stderr.strip() == "1 of 1 (op, dtype) pairs break their rule"


@pytest.mark.parametrize(
    "args, message",
    [
        (["nosuch"], "unknown op 'nosuch'"),
        (["relu", "--dtypes", "fp64"], "--dtypes: unknown dtype 'fp64'"),
        (["gelu", "--dtypes", "int8"], "--dtypes int8: no op given takes these dtypes"),
    ],
)
def test_ops_check_refuses_a_wrong_argument_in_one_line(args, message):
    r = _sweeper("ops", "check", *args)
    assert r.returncode != 0 and message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_ops_list_names_every_op_its_bytes_and_its_rule():
    r = _sweeper("ops", "list")
    assert r.returncode == 0, r.stderr
    rows = {ln.split()[0]: ln for ln in r.stdout.splitlines()[2:10]}
    assert set(rows) == set(OPS)
    assert rows["add"].split()[1:9] == ["fp32", "fp16", "bf16", "int8", "12", "6", "6", "3"]
    assert rows["cast_fp32_bf16"].split()[1:4] == ["fp32", "6", "no"]
    for op in OPS.values():
        assert f"  {op.name}: {op.exact}" in r.stdout
    assert f"  relu: {OPS['relu'].differs}" in r.stdout


def test_a_rule_is_data_an_op_carries():
    assert Rule("values").describe() == OPS["add"].exact


@needs_nvcc  # the NVRTC wheel comes with the CUDA wheels the test extra installs
def test_the_device_check_kernels_compile_with_nvrtc_for_sm90():
    from sweeper_kernels.external import _compile, include_dirs
    from sweeper_kernels.ops.host import device_source, device_symbol

    opts = ["--gpu-architecture=compute_90", "-std=c++17"]
    opts += [f"--include-path={d}" for d in include_dirs()]
    code, log = _compile(device_source(tuple(OPS.values())), "ops.cu", opts, "ptx")
    assert code is not None, log
    text = code.decode()
    for name, dtype in PAIRS:
        assert f".entry {device_symbol(OPS[name], dtype)}(" in text
    assert "tanh" in text or "ex2.approx" in text  # gelu's and silu's maths made it in


USER_OP = """\
import numpy as np
from sweeper_kernels.ops import Op, Operand, Rule

def same(x, dtype, out):
    return x.copy()

def short(x, dtype, out):
    return x[:3].copy()

def boom(x, dtype, out):
    raise RuntimeError("no reference here")

def op(name, body, reference):
    return Op(name=name, summary="y = x", operands=(Operand("x", "in"), Operand("y", "out")),
              reference=reference, baseline="y.copy_(x)", dtypes=("fp32",), body=body,
              rule=Rule("values"))

typo = op("typo", "return x +;", same)
short = op("short", "return x;", short)
raising = op("raising", "return x;", boom)
"""


@needs_nvcc
@pytest.mark.parametrize(
    "name, message",
    [
        ("typo", "typo: the C++ does not compile: expected an expression at `return x +;`"),
        (
            "short",
            "short fp32: its reference failed: ValueError: short: output shape (81945,), "
            "reference (3,)",
        ),  # fmt: skip
        ("raising", "raising fp32: its reference failed: RuntimeError: no reference here"),
    ],
)
def test_a_users_broken_op_is_refused_in_one_line(tmp_path, name, message):
    (tmp_path / "mine.py").write_text(USER_OP)
    r = _sweeper("ops", "check", f"{tmp_path}/mine.py:{name}")
    assert r.returncode != 0 and r.stdout == ""
    assert r.stderr.strip() == f"error: {message}"


def test_ops_source_prints_the_cxx_that_ops_check_compiles():
    from sweeper_kernels.ops.host import device_source, host_source

    r = _sweeper("ops", "source", "examples/my_ops.py:leaky")
    leaky = load_op(f"{ROOT}/examples/my_ops.py:leaky")
    assert r.returncode == 0 and r.stdout == host_source((leaky,))
    assert "return x > C(0) ? x : C(0.01f) * x;" in r.stdout
    r = _sweeper("ops", "source", "gelu", "--device")
    assert r.returncode == 0 and r.stdout == device_source((OPS["gelu"],))
    assert r.stdout.count('extern "C" __global__') == 3
