"""Tests that need a CUDA command-line tool (nvcc, ptxas, nvdisasm) carry
`@pytest.mark.needs_tool("nvcc", ...)`. Where a tool is missing they skip with a reason that
names it, unless SWEEPER_REQUIRE_TOOLS=1 (scripts/test.sh, and so CI, sets it): then they fail.
The test extra installs the tools from NVIDIA's pip wheels, so CI runs these tests.

Tests of what sweeper does on a machine without a GPU carry `@pytest.mark.no_gpu`: they skip
where a GPU is found."""

from __future__ import annotations

import functools
import os

import pytest
from sweeper_kernels.toolkit import find_tool, how_to_get

REQUIRE_TOOLS = os.environ.get("SWEEPER_REQUIRE_TOOLS") == "1"


@functools.cache
def _has_gpu() -> bool:
    try:
        from sweeper.plan.gpus import detect

        detect()
        return True
    except Exception:  # noqa: BLE001 (no driver, no device: what this machine lacks)
        return False


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("no_gpu") is not None and _has_gpu():
        pytest.skip("checks what happens without a GPU; this machine has one")
    for mark in item.iter_markers("needs_tool"):
        missing = [name for name in mark.args if find_tool(name) is None]
        if not missing:
            continue
        why = "; ".join(how_to_get(name) for name in missing)
        if REQUIRE_TOOLS:
            pytest.fail(f"SWEEPER_REQUIRE_TOOLS=1 and {why}", pytrace=False)
        pytest.skip(why)
