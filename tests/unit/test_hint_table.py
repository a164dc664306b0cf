"""Adding a cache hint is one entry in kernels/hints.py: a hint absent from the table, added
as one entry, reaches the variant ids, the PTX checks and a compiling export."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from sweeper_kernels import Variant, extended_grid, hints, ptx
from sweeper_kernels.ptxcheck import check_ptx, global_accesses
from sweeper_kernels.toolkit import find_tool

ROOT = Path(__file__).parents[2]
CA = hints.Hint("load", "ca", "ca", ".ca")  # ld.global.ca: cache at all levels


@pytest.fixture
def ca_hint():
    assert "ca" not in hints.names("load")
    with hints.registered(CA):
        yield CA
    assert "ca" not in hints.names("load")


def test_a_new_hint_reaches_the_variant_id(ca_hint):
    v = Variant("fp32", 16, 2, "ca", "cs", 256, "onepass")
    assert v.config == "v16-u2-ld.ca-st.cs-b256-onepass"
    assert Variant.parse(v.id) == v
    assert any(x.load_hint == "ca" for x in extended_grid("fp32"))


def test_a_new_hint_reaches_the_ptx_and_its_check(ca_hint):
    v = Variant("fp16", 16, 2, "ca", "cs", 256, "onepass")
    text = ptx(v, (9, 0))
    assert check_ptx(v, text) == []
    loads = [a for a in global_accesses(text) if a.op == "ld" and a.qualifiers == ("ca",)]
    assert len(loads) >= 2
    plain = Variant("fp16", 16, 2, "default", "cs", 256, "onepass")
    assert check_ptx(plain, text)  # the check tells the two apart


@pytest.mark.needs_tool("nvcc")
def test_a_new_hint_reaches_a_compiling_export(ca_hint, tmp_path):
    from sweeper.analyze.policy import load_any
    from sweeper.export import render

    doc = load_any(ROOT / "results/h200/hot-7/policy.json")
    name = next(iter(doc["configs"]))
    doc["configs"][name] = {**doc["configs"][name], "load_hint": "ca"}
    header = render(doc, "cuda")
    assert "ld.global.ca.v4.u32" in header
    nvcc = find_tool("nvcc")
    (tmp_path / "relu_policy.cuh").write_text(header)
    (tmp_path / "use.cu").write_text('#include "relu_policy.cuh"\n')
    subprocess.run(
        [nvcc, "-std=c++17", "-arch=sm_90", "-ptx", "use.cu", "-o", "use.ptx"],
        cwd=tmp_path, check=True, capture_output=True,
    )  # fmt: skip
    assert "ld.global.ca.v4.u32" in (tmp_path / "use.ptx").read_text()
