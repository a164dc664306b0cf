"""An op is data (sweeper_kernels.ops): its bytes per element make the working set of n
elements and the elements of a working set, and every stage takes them from there."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from sweeper_kernels.dtypes import DTYPES, ITEMSIZE
from sweeper_kernels.ops import OPS, RELU, SWEPT, Op, Operand, get_op
from sweeper_kernels.reference import reference_relu

from sweeper.ops import bytes_per_element, elements, working_set

ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize("dtype", DTYPES)
def test_relu_reads_and_writes_one_element_of_its_dtype(dtype):
    assert RELU.reads(dtype) == RELU.writes(dtype) == ITEMSIZE[dtype]
    assert bytes_per_element(dtype) == 2 * ITEMSIZE[dtype]
    for n in (1, 7, 4096, 2**27 + 3):
        ws = working_set(n, dtype)
        assert ws == 2 * n * ITEMSIZE[dtype]
        assert elements(ws, dtype) == n


@pytest.mark.parametrize("dtype", [d for d in DTYPES if ITEMSIZE[d] > 1])
def test_a_working_set_that_is_not_whole_elements_is_refused(dtype):
    ws = working_set(1000, dtype) + 1
    with pytest.raises(ValueError, match="not a whole number of relu"):
        elements(ws, dtype)


def test_an_ops_operands_set_its_bytes_per_element():
    """A cast reads 4 bytes and writes 2, an add reads two inputs: their cliffs sit at other
    element counts of the same byte plan."""
    cast = Op("c", "y = bf16(x)", (Operand("x", "in", "fp32"), Operand("y", "out", "bf16")),
              "m:f", "x.to(torch.bfloat16)")  # fmt: skip
    add = Op("a", "z = x + y", (Operand("x", "in"), Operand("y", "in"), Operand("z", "out")),
             "m:f", "torch.add(x, y, out=z)")  # fmt: skip
    assert (cast.reads("fp32"), cast.writes("fp32"), cast.bytes_per_element("fp32")) == (4, 2, 6)
    assert add.bytes_per_element("fp16") == 6
    assert add.elements(6 * 1000, "fp16") == 1000
    assert cast.working_set(1000, "fp32") == 6000


def test_the_reference_is_resolved_where_it_is_called_and_unknown_ops_are_refused():
    from sweeper_kernels.ops import reference

    assert RELU.reference_fn() is reference.relu
    x = np.array([-1.0, 0.0, 2.5, np.nan], dtype=np.float32)
    np.testing.assert_array_equal(reference.relu(x, "fp32", "fp32"), reference_relu(x, "fp32"))
    assert get_op() is RELU and SWEPT == ("relu",)
    assert set(OPS) == {"relu", "gelu", "silu", "add", "mul", "silu_and_mul",
                        "cast_fp32_bf16", "cast_bf16_fp32"}  # fmt: skip
    with pytest.raises(ValueError, match="unknown op 'leaky'"):
        get_op("leaky")
    assert "NaN" in RELU.differs  # where relu deliberately differs from torch.relu, said


def test_each_op_moves_the_bytes_of_its_operands():
    """A cast reads one dtype and writes another; add, mul and silu_and_mul read two inputs
    (silu_and_mul's two halves of one [.., 2d] tensor) and write one."""
    assert [(OPS[o].reads(d), OPS[o].writes(d)) for o, d in [
        ("gelu", "bf16"), ("add", "fp32"), ("mul", "int8"), ("silu_and_mul", "fp16"),
        ("cast_fp32_bf16", "fp32"), ("cast_bf16_fp32", "bf16")]] == [
        (2, 2), (8, 4), (2, 1), (4, 2), (4, 2), (2, 4)]  # fmt: skip
    assert OPS["silu_and_mul"].layout == "gated"
    assert OPS["cast_fp32_bf16"].out_dtype("fp32") == "bf16"
    for op in OPS.values():
        assert op.body.rstrip().endswith(";") and "return" in op.body
        assert all(op.rule.bound(d)[0] >= 0 for d in op.dtypes)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"name": "Leaky"}, "lower case letters"),
        ({"layout": "rows"}, "layout 'rows'"),
        ({"operands": (Operand("x", "in"),)}, "exactly one output"),
        (
            {"operands": (Operand("x", "in"), Operand("y", "out"), Operand("z", "out"))},
            "exactly one output",
        ),  # fmt: skip
        ({"layout": "gated"}, "two halves of one tensor"),
        ({"dtypes": ("fp64",)}, "dtypes \\['fp64'\\]"),
        ({"dtypes": ()}, "dtypes \\(\\)"),
        ({"operands": (Operand("x", "read"), Operand("y", "out"))}, "operand 'x'"),
        ({"operands": (Operand("x", "in", "fp8"), Operand("y", "out"))}, "operand 'x'"),
    ],
)
def test_an_op_that_cannot_be_is_refused_where_it_is_defined(kwargs, message):
    from dataclasses import replace

    with pytest.raises(ValueError, match=message):
        replace(RELU, **kwargs)


def test_a_rule_names_its_bounds_exactly_when_it_is_an_ulps_rule():
    from sweeper_kernels.ops import Rule

    with pytest.raises(ValueError, match="names its bound per dtype"):
        Rule("ulps")
    with pytest.raises(ValueError, match="names its bound per dtype"):
        Rule("values", atol=(("fp32", 1e-6),))
    with pytest.raises(ValueError, match="unknown exactness rule 'close'"):
        Rule("close")
    r = Rule("ulps", ulps=(("fp32", 4), ("fp16", 1)), atol=(("fp32", 2**-20),))
    assert r.bound("fp32") == (4, 2**-20) and r.bound("fp16") == (1, 0.0)
    assert "fp32 4 ulps + 9.54e-07, fp16 1 ulp" in r.describe()


# Where a working set is still written as two elements of the dtype (one read, one write):
# the planner's ladder, and two descriptions of the ws_bytes column. Any other stage takes it
# from the op.
STILL_READ_WRITE = {
    "sweeper/plan/ladder.py",  # named anchors (2 x 1024^2 x itemsize) and the 32-byte grain
    "sweeper/analyze/columns.py",  # the ws_bytes column's description
    "sweeper/export/python.py",  # the exported policy's description of its bands
}


def test_the_working_set_has_one_home():
    pattern = re.compile(r"2 \* n \*|\* 2 \* itemsize|\(2 \* item(size)?\)|2 \* doc\[")
    found = {
        str(p.relative_to(ROOT))
        for p in (ROOT / "sweeper").rglob("*.py")
        if pattern.search(p.read_text())
    }
    assert found == STILL_READ_WRITE


def test_the_exports_say_where_relu_differs_from_torch(tmp_path):
    from sweeper.analyze.policy import load_any
    from sweeper.export.cuda import render_cuda
    from sweeper.export.python import render_python

    doc = load_any(ROOT / "results/h200/hot-7/policy.json")
    line = f"Differs from torch.relu: {RELU.differs}."
    assert f"// {line}" in render_cuda(doc).splitlines()
    assert line in render_python(doc).splitlines()


def test_each_ops_torch_values_are_an_expression_of_its_inputs():
    """`Op.torch` (torch's values, compared with the op's on the GPU) names only the op's
    inputs, torch and F; it is evaluated with them and nothing else."""
    import ast

    for op in OPS.values():
        tree = ast.parse(op.torch, mode="eval")
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        assert names <= {o.name for o in op.inputs} | {"torch", "F"}, (op.name, names)
        assert names & {o.name for o in op.inputs}, op.name
