"""The floor on the GPU: the baseline's launch read from its captured graph maps to the grid's
config of the same shape (sweeper.run.executor.GpuExecutor.baseline_shape)."""

from __future__ import annotations

import pytest
from sweeper_kernels.launch import launch_shape
from sweeper_kernels.variants import Variant

from sweeper.run.executor import GpuExecutor


@pytest.fixture(scope="module")
def ex():
    return GpuExecutor()


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16", "int8"])
def test_the_baselines_launch_maps_to_a_grid_config_of_its_shape(ex, dtype):
    n = 1 << 22
    doc = ex.baseline_shape(dtype, n)
    ex.release(dtype, n)
    if ex.torch is None:  # the baseline is a grid config: its own floor
        assert doc["config"] == ex.baseline_name and doc["exact"]
        return
    (k,) = doc["launches"]
    assert k["grid"][1:] == [1, 1] and k["block"][1:] == [1, 1]
    v = Variant.parse(f"{dtype}-{doc['config']}")
    ours = launch_shape(v, n, sm_count=1, max_threads_per_sm=2048)
    assert doc["exact"] == ((ours.blocks, ours.threads) == (k["grid"][0], k["block"][0]))
    assert (v.load_hint, v.store_hint, v.grid) == ("default", "default", "fixed32")
    if dtype == "fp32":  # torch's fp32 elementwise kernel: 128 threads x 2 x 16 B, one pass
        assert doc["config"] == "v16-u2-ld.def-st.def-b128-fixed32" and doc["exact"]
