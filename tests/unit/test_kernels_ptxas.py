"""Every default-grid kernel, and every load x store hint pair, assembles with ptxas.

The PTX text checks cannot see an instruction form that ptxas rejects (this caught
`ld.global.L2::evict_last.v4.u32`, valid text but only allowed on 256-bit loads).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from itertools import product

import pytest
from sweeper_kernels import hints
from sweeper_kernels.build import ptx, ptx_many
from sweeper_kernels.ptxcheck import assemble
from sweeper_kernels.toolkit import find_tool
from sweeper_kernels.variants import Variant, compile_keys, default_grid

PTXAS = find_tool("ptxas")
pytestmark = pytest.mark.needs_tool("ptxas")


def _failures(keys, ccs):
    """(key, cc), ptxas's error for each PTX it rejects: the PTX compiled in a process pool
    (Numba's compiler holds the GIL), assembled in threads (ptxas is a process of its own)."""
    texts = ptx_many(keys, ccs, workers=os.cpu_count())

    def one(job):
        key, cc = job
        return job, assemble(texts[job], f"sm_{cc[0]}{cc[1]}", PTXAS)

    with ThreadPoolExecutor(4) as pool:
        return [(j, err) for j, err in pool.map(one, texts) if err is not None]


def test_every_default_grid_kernel_assembles_for_sm90():
    assert _failures(compile_keys(default_grid()), [(9, 0)]) == []


def test_every_hint_pair_assembles_for_sm89_and_sm90():
    keys = [
        Variant(dtype, vec, 2, ld, st).compile_key
        for dtype, vec, ld, st in product(
            ("fp16", "int8"), (4, 16), hints.names("load"), hints.names("store")
        )
    ]
    assert _failures(keys, [(8, 9), (9, 0)]) == []


def test_assemble_reports_a_rejected_instruction():
    bad = ptx(Variant("fp32", 16, 1, "cs", "cs"), (9, 0)).replace(
        "ld.global.cs.v4.u32", "ld.global.L2::evict_last.v4.u32", 1
    )
    err = assemble(bad, "sm_90", PTXAS)
    assert err is not None and "evict_last" in err
