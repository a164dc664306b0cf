"""The exported header's kernels against the Numba kernels they mirror, at the SASS level
(the header built by nvcc as `sweeper verify` builds it, the Numba kernels assembled by
nvJitLink, both disassembled by nvdisasm; no GPU).

The header widens thread and block indices as Numba does (sign extension): with unsigned
widening the 2-vector flat export measured 2-8% slower than its Numba twin on the H200 while
the two kernels' SASS differed only in that arithmetic. These tests hold the header to the
Numba kernels on every config of the shipped hot-7 policy:
  * flat, 1 vector per thread: the whole kernel is the same instruction stream;
  * flat, 2-4 vectors per thread: the same index maths up to the first branch, and the same
    global loads and stores in the same order (the one-block slow path may differ);
  * flat, 8 vectors per thread: the same instructions up to the first branch and the same
    global loads and stores, the loads in the same order and the stores in the same order;
    ptxas may schedule them differently (in fp32 v16-u8-ld.nc-st.cs-b128-flat two index
    instructions, and one load and one store of the check-free path, trade places). On the H200 that export read a median 1.004-1.015x its
    Numba kernel's time per dtype over its sizes and passes (results/h200/hot-7/verify_timing.csv,
    column vs_numba);
  * tiled (onepass / strideW), flat32 and fixed32: the same global loads and stores in the
    same order (their index maths may be encoded apart: nvcc's IMAD or VIADD where
    nvJitLink gives LEA or IADD3 for the same arithmetic).
The "flat32" and "fixed32" kernels (32-bit index maths) are held to that standard on a
synthetic policy that uses each of their shapes (hot-7's policy may or may not use one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sweeper_kernels import Variant
from sweeper_kernels.toolkit import find_tool

from sweeper.analyze.policy import load_any
from sweeper.export import render
from sweeper.export.sass import (
    header_kernel,
    header_sass,
    memory_ops,
    numba_sass,
    numba_sass_many,
    prologue,
)

POLICY = Path(__file__).resolve().parents[2] / "results" / "h200" / "hot-7" / "policy.json"
NVCC, NVDISASM = find_tool("nvcc"), find_tool("nvdisasm")

pytestmark = pytest.mark.needs_tool("nvcc", "nvdisasm")


def _configs() -> list[Variant]:
    doc = json.loads(POLICY.read_text())
    names = sorted({(dt, b["config"]) for dt, d in doc["dtypes"].items() for b in d["bands"]})
    return [Variant.parse(f"{dt}-{c}") for dt, c in names]


@pytest.fixture(scope="module")
def header_fns(tmp_path_factory):
    header = tmp_path_factory.mktemp("sass") / "relu_policy.cuh"
    header.write_text(render(load_any(POLICY), "cuda"))
    return header_sass(header, "90", NVCC, NVDISASM)


def _shape(v: Variant) -> str:
    if v.grid == "flat":
        if v.unroll > 4:
            return "flat, 8 vectors per thread"
        return "flat, 1 vector per thread" if v.unroll == 1 else "flat, 2-4 vectors per thread"
    return v.grid if v.grid in ("flat32", "fixed32") else "tiled"


def test_the_policy_and_the_flat32_set_cover_every_kernel_shape():
    shapes = {_shape(v) for v in _configs()} | {_shape(v) for v in FLAT32}
    assert {_shape(v) for v in FLAT32} == {"flat32", "fixed32"}
    assert shapes == {
        "flat, 1 vector per thread",
        "flat, 2-4 vectors per thread",
        "flat, 8 vectors per thread",
        "flat32",
        "fixed32",
        "tiled",
    }


@pytest.fixture(scope="module")
def numba_fns():
    """Every Numba kernel these tests compare, from one cubin (numba_sass_many)."""
    return numba_sass_many([*_configs(), *FLAT32], "90", NVDISASM)


def test_one_cubin_of_the_kernels_gives_each_kernel_as_its_own_cubin(numba_fns):
    """A kernel's SASS does not depend on the kernels assembled beside it."""
    for v in (_configs()[0], FLAT32[-1]):
        assert numba_fns[v.id] == numba_sass(v, "90", NVDISASM)


def _mirrors(v, fns, numba_fns):
    ours = numba_fns[v.id]
    theirs = header_kernel(fns, v)
    assert memory_ops(ours)
    if v.grid == "flat" and v.unroll > 4:  # the same instructions; ptxas may order them apart
        assert sorted(prologue(theirs)) == sorted(prologue(ours))
        for kind in ("LDG", "STG"):
            assert [i for i in memory_ops(theirs) if kind in i] == [
                i for i in memory_ops(ours) if kind in i
            ]
        return
    assert memory_ops(theirs) == memory_ops(ours)
    if v.grid == "flat":
        assert prologue(theirs) == prologue(ours)
        if v.unroll == 1:
            assert theirs == ours


@pytest.mark.parametrize("v", _configs(), ids=lambda v: f"{v.dtype}-{v.config}")
def test_exported_kernel_mirrors_the_numba_kernel(v, header_fns, numba_fns):
    _mirrors(v, header_fns, numba_fns)


FLAT32 = [
    Variant(dt, vec, u, ld, st, block, grid)
    for dt in ("fp32", "fp16", "int8")
    for vec, u, ld, st, block, grid in (
        (16, 2, "default", "cs", 128, "flat32"),
        (8, 1, "default", "default", 256, "flat32"),
        (16, 2, "default", "default", 128, "fixed32"),
        (8, 1, "default", "cs", 256, "fixed32"),
    )
]


@pytest.fixture(scope="module")
def flat32_fns(tmp_path_factory):
    try:
        from tests.unit.test_export import all_hints_policy
    except ImportError:  # tests/ is not a package: pytest put tests/unit on sys.path
        from test_export import all_hints_policy
    from sweeper.analyze.policy import merge_docs

    header = tmp_path_factory.mktemp("sass32") / "relu_policy.cuh"
    header.write_text(render(merge_docs([all_hints_policy()], ["synthetic"]), "cuda"))
    return header_sass(header, "90", NVCC, NVDISASM)


@pytest.mark.parametrize("v", FLAT32, ids=lambda v: f"{v.dtype}-{v.config}")
def test_exported_flat32_kernel_mirrors_the_numba_kernel(v, flat32_fns, numba_fns):
    _mirrors(v, flat32_fns, numba_fns)
