"""`sweeper kernels list|ptx` through typer's CliRunner (no GPU)."""

from __future__ import annotations

import re

from sweeper_kernels.variants import compile_keys, default_grid
from typer.testing import CliRunner

from sweeper.cli import app

runner = CliRunner()


def test_list_prints_ids_and_counts():
    res = runner.invoke(app, ["kernels", "list", "--dtypes", "fp16"])
    assert res.exit_code == 0, res.output
    assert default_grid(["fp16"])[0].id in res.output
    grid = default_grid(["fp16"])
    n, keys = len(grid), len(compile_keys(grid))
    assert f"{n} variants (fp16: {n}); {keys} distinct compiles" in res.output
    firsts = [line.split()[0] for line in res.output.splitlines() if line.startswith("fp16-")]
    assert firsts == [v.id for v in grid]  # one line per variant, its id first


def test_list_takes_several_dtypes():
    res = runner.invoke(app, ["kernels", "list", "--dtypes", "fp16,int8"])
    assert res.exit_code == 0, res.output
    n16, n8 = len(default_grid(["fp16"])), len(default_grid(["int8"]))
    assert f"{n16 + n8} variants (fp16: {n16}, int8: {n8})" in res.output


def test_list_extended_counts():
    res = runner.invoke(app, ["kernels", "list", "--grid", "extended", "--dtypes", "int8"])
    assert res.exit_code == 0
    assert "15360 variants (int8: 15360); 3360 distinct compiles" in res.output


def test_unknown_grid_dtype_or_id_is_one_line_exit_1():
    for args in (
        ["kernels", "list", "--grid", "huge"],
        ["kernels", "list", "--dtypes", "fp64"],
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


def test_every_command_has_an_example_that_parses():
    """Each command's --help ends with an example; its command line parses (the example of
    `kernels ptx` names a variant of the default grid)."""
    import shlex

    import typer

    root = typer.main.get_command(app)

    def commands(group, path):
        for name, cmd in group.commands.items():
            if hasattr(cmd, "commands"):  # a group of commands
                yield from commands(cmd, [*path, name])
            else:
                yield [*path, name], cmd

    seen = 0
    for path, cmd in commands(root, []):
        assert cmd.epilog and cmd.epilog.startswith("Example: sweeper "), path
        args = shlex.split(cmd.epilog.removeprefix("Example: sweeper "))
        assert args[: len(path)] == path, (path, args)
        ctx = cmd.make_context(" ".join(path), args[len(path) :], resilient_parsing=True)
        assert ctx.params is not None
        seen += 1
    assert seen >= 14
