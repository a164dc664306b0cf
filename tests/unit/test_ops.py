"""An op is data (sweeper_kernels.ops): its bytes per element make the working set of n
elements and the elements of a working set, and every stage takes them from there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sweeper_kernels.dtypes import DTYPES, ITEMSIZE
from sweeper_kernels.ops import OPS, RELU, Op, Operand, get_op
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
    cast = Op("cast_fp32_bf16", "y = bf16(x)", (Operand("x", "in", "fp32"), Operand("y", "out", "bf16")),
              "bit-exact", "m:f", "x.to(torch.bfloat16)")  # fmt: skip
    add = Op("add", "z = x + y", (Operand("x", "in"), Operand("y", "in"), Operand("z", "out")),
             "bit-exact", "m:f", "torch.add(x, y, out=z)")  # fmt: skip
    assert (cast.reads("fp32"), cast.writes("fp32"), cast.bytes_per_element("fp32")) == (4, 2, 6)
    assert add.bytes_per_element("fp16") == 6
    assert add.elements(6 * 1000, "fp16") == 1000
    assert cast.working_set(1000, "fp32") == 6000


def test_the_reference_is_resolved_where_it_is_called_and_unknown_ops_are_refused():
    assert RELU.reference_fn() is reference_relu
    assert get_op() is RELU and set(OPS) == {"relu"}
    with pytest.raises(ValueError, match="unknown op 'gelu'"):
        get_op("gelu")
    assert "NaN" in RELU.differs  # where relu deliberately differs from torch.relu, said


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
