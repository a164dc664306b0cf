"""Slices of a run (sweeper.slices): what `run --configs/--sizes` and `verify --configs/
--sizes/--dtypes` select, and the one line when nothing is left."""

from __future__ import annotations

import pytest

from sweeper.errors import SweeperError
from sweeper.slices import config_matches, slice_sizes

MiB = 1 << 20
SIZES = {"fp32": [MiB // 8, 5 * MiB // 8, 40 * MiB // 8], "int8": [MiB // 2, 40 * MiB // 2]}


def config_of(dtype: str, n: int) -> str:  # a policy: stride1 from 32 MiB up, flat below
    ws = 2 * n * {"fp32": 4, "int8": 1}[dtype]
    return "v16-u2-ld.def-st.cs-b128-stride1" if ws >= 32 * MiB else "v16-u1-ld.cs-st.cs-b256-flat"


@pytest.mark.parametrize(
    "config, patterns, hit",
    [("v16-u2-ld.def-st.cs-b128-stride1", None, True), ("a", [], True),
     ("v16-u2-ld.def-st.cs-b128-stride1", ["v16-u2-*-stride1"], True),
     ("v16-u2-ld.def-st.cs-b128-stride1", ["V16-*"], False),
     ("v16-u1-ld.cs-st.cs-b256-flat", ["*-stride?", "*-flat"], True)],
)  # fmt: skip
def test_a_pattern_is_a_case_sensitive_wildcard(config, patterns, hit):
    assert config_matches(config, patterns) is hit


def test_no_filter_keeps_every_size():
    assert slice_sizes(SIZES) == SIZES


def test_filters_combine():
    assert slice_sizes(SIZES, dtypes=["fp32"]) == {"fp32": SIZES["fp32"]}
    got = slice_sizes(SIZES, configs=["*-stride1"], config_of=config_of)
    assert got == {"fp32": [40 * MiB // 8], "int8": [40 * MiB // 2]}
    got = slice_sizes(SIZES, dtypes=["int8"], ws_range=(0, 4 * MiB))
    assert got == {"int8": [MiB // 2]}
    # both ends of the range are inclusive, in bytes of working set (2 * n * itemsize)
    assert slice_sizes(SIZES, ws_range=(5 * MiB, 5 * MiB)) == {"fp32": [5 * MiB // 8]}


def test_an_empty_slice_is_one_line_naming_the_filters():
    with pytest.raises(SweeperError) as e:
        slice_sizes(SIZES, dtypes=["bf16"], configs=["*-onepass"], config_of=config_of)
    assert str(e.value) == (
        "--dtypes bf16; --configs *-onepass: the run measured no size in that slice"
    )


def test_verify_refuses_an_unknown_dtype_before_any_gpu_work():
    from typer.testing import CliRunner

    from sweeper.cli import app

    r = CliRunner().invoke(app, ["verify", "no/policy.json", "--dtypes", "fp64"])
    assert r.exit_code == 1
    assert r.output.strip().splitlines() == [
        "error: --dtypes: unknown dtype 'fp64' (known: fp32, fp16, bf16, int8)"
    ]
