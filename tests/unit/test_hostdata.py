"""The executor's host-side data cache (pure numpy; no GPU)."""

from __future__ import annotations

import numpy as np
import pytest
from sweeper_kernels import reference_relu

from sweeper.run.executor import HostData


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16", "int8"])
def test_slices_are_the_reference_of_their_input(dtype):
    h = HostData(seed=1)
    for n in (16, 1000, 48, 5000, 4096):
        x, e = h.get(dtype, n)
        assert x.size == e.size == n
        assert np.array_equal(e.view(np.uint8), reference_relu(x.copy(), dtype).view(np.uint8))


def test_grows_geometrically_and_reuses_for_smaller_sizes():
    h = HostData()
    x1, _ = h.get("fp32", 1000)
    x2, _ = h.get("fp32", 1500)  # grows to max(1500, 2 * 1000)
    assert h._cache["fp32"][0].size == 2000
    x3, _ = h.get("fp32", 1800)  # no regeneration
    assert np.shares_memory(x2, x3)
    assert x1.size == 1000 and x3.size == 1800
    # the data are random bit patterns, not zeros (zeros would hide unwritten outputs)
    assert np.count_nonzero(x3.view(np.uint32)) > 1700
