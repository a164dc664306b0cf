"""`sweeper kernels list|ptx` through typer's CliRunner (no GPU)."""

from __future__ import annotations

import re

from sweeper_kernels.variants import compile_keys, default_grid
from typer.testing import CliRunner

from sweeper.cli import app

runner = CliRunner()


def test_list_prints_ids_and_counts():
    res = runner.invoke(app, ["kernels", "list", "--dtype", "fp16"])
    assert res.exit_code == 0, res.output
    assert default_grid(["fp16"])[0].id in res.output
    grid = default_grid(["fp16"])
    n, keys = len(grid), len(compile_keys(grid))
    assert f"{n} variants (fp16: {n}); {keys} distinct compiles" in res.output


def test_list_extended_counts():
    res = runner.invoke(app, ["kernels", "list", "--grid", "extended", "--dtype", "int8"])
    assert res.exit_code == 0
    assert "13440 variants (int8: 13440); 1440 distinct compiles" in res.output


def test_unknown_grid_dtype_or_id_is_one_line_exit_1():
    for args in (
        ["kernels", "list", "--grid", "huge"],
        ["kernels", "list", "--dtype", "fp64"],
        ["kernels", "ptx", "fp32-nope"],
        ["kernels", "ptx", default_grid(["fp32"])[0].id[:-8] + "00000000"],  # stale hash
    ):
        res = runner.invoke(app, args)
        assert res.exit_code == 1, args
        assert res.output.strip().count("\n") == 0 and res.output.startswith("error:"), res.output


def test_ptx_prints_the_variants_ptx():
    v = default_grid(["int8"])[50]
    res = runner.invoke(app, ["kernels", "ptx", v.id, "--cc", "89"])
    assert res.exit_code == 0, res.output
    assert ".target sm_89" in res.output
    assert len(re.findall(r"ld\.global[.\w:]*\.u32\s", res.output)) == v.unroll + 1
