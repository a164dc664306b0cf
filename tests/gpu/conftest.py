"""GPU tests: marked `gpu`. They skip only where there is no GPU: no NVIDIA driver library, or
a driver that reports no device. Anything else that stops them (a broken CUDA install, numba
unable to use a GPU the driver sees) is an error, so it fails instead of hiding as a skip."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest


@functools.cache
def no_gpu_reason() -> str | None:
    """Why there is no GPU here, or None when there is one that numba can use."""
    import cuda.bindings.driver as drv  # an ImportError here is a broken install: it raises
    from cuda.pathfinder import DynamicLibNotFoundError

    try:
        (err,) = drv.cuInit(0)
    except DynamicLibNotFoundError as e:
        return f"no CUDA GPU: no NVIDIA driver library ({e})"
    if err == drv.CUresult.CUDA_ERROR_NO_DEVICE:
        return "no CUDA GPU: the driver reports no device"
    if err != drv.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuInit failed with {err.name}: the driver is there but unusable")
    from numba import cuda

    if not cuda.is_available():
        raise RuntimeError("the driver sees a GPU but numba.cuda.is_available() is False")
    return None


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.gpu)
            # under pytest-xdist (scripts/test.sh: -n auto --dist loadgroup) every GPU test
            # runs in one worker, one at a time, so no two share the GPU
            item.add_marker(pytest.mark.xdist_group("gpu"))
            reason = no_gpu_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
