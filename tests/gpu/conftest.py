"""GPU tests: marked `gpu`, skipped with a reason where no CUDA GPU is usable."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest


@functools.cache
def _no_gpu_reason() -> str | None:
    from sweeper.errors import SweeperError
    from sweeper.plan.gpus import detect

    try:
        detect()
    except SweeperError as e:
        return f"no CUDA GPU: {e}"
    return None


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.gpu)
            reason = _no_gpu_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
