"""The L2 normalizer the timers run between the slots of a pairing (sweeper.run.timers): its PTX
demotes one 128-byte line per iteration with applypriority, and ptxas accepts it."""

import re

import pytest

from sweeper.run.timers import NORMALIZE_SIGNATURE, normalize_function


@pytest.fixture(scope="module")
def ptx_text():
    from numba import cuda

    return cuda.compile_ptx(normalize_function(), NORMALIZE_SIGNATURE, cc=(9, 0))[0]


def test_one_applypriority_per_line_in_a_grid_stride_loop_per_buffer(ptx_text):
    from sweeper.run.timers import NORMALIZE_SPANS

    lines = ptx_text.splitlines()
    hits = [i for i, t in enumerate(lines) if "applypriority.global.L2::evict_normal" in t]
    assert len(hits) == NORMALIZE_SPANS  # one inlined loop per (base, lines) slot
    for i in hits:
        assert re.search(r"applypriority\.global\.L2::evict_normal \[\w+\], 128;", lines[i])
    assert ptx_text.count(".param .u64") == 2 * NORMALIZE_SPANS
    assert "cvta.to.global.u64" in ptx_text
    assert re.search(r"\bbra\b", ptx_text)  # the grid-stride loop
    assert not re.search(r"\b(ld|st)\.global", ptx_text)  # it moves no data


@pytest.mark.needs_tool("ptxas")
def test_ptxas_assembles_it_for_sm90(ptx_text):
    from sweeper_kernels.ptxcheck import assemble

    assert assemble(ptx_text, "sm_90") is None
