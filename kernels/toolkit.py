"""Where the CUDA command-line tools are: nvcc, ptxas, nvdisasm.

Looked up in this order: the environment variable SWEEPER_<TOOL> (e.g. SWEEPER_NVCC), then
PATH, then NVIDIA's pip wheels in this Python (`nvidia-cuda-nvcc`, `nvidia-cuda-nvdisasm`, which
install under the `nvidia.cu13` package). No GPU is needed for any of them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

TOOLS = ("nvcc", "ptxas", "nvdisasm")


def wheel_bin_dirs() -> list[Path]:
    """The bin/ folders of NVIDIA's CUDA wheels installed in this Python."""
    try:
        import nvidia.cu13 as cu13  # type: ignore[import-not-found]
    except ImportError:
        return []
    return [Path(p) / "bin" for p in cu13.__path__]


def find_tool(name: str) -> str | None:
    """The path of CUDA tool `name`, or None when neither the environment, PATH nor a wheel
    has it."""
    env = os.environ.get(f"SWEEPER_{name.upper()}")
    if env:
        return env
    found = shutil.which(name)
    if found:
        return found
    for d in wheel_bin_dirs():
        if (d / name).is_file() and os.access(d / name, os.X_OK):
            return str(d / name)
    return None


def how_to_get(name: str) -> str:
    """One line on how to make `name` available."""
    wheel = {"nvdisasm": "nvidia-cuda-nvdisasm"}.get(name, "nvidia-cuda-nvcc nvidia-cuda-crt")
    return (
        f"{name} not found (SWEEPER_{name.upper()}, PATH, NVIDIA's pip wheels): "
        f"`pip install {wheel}` or install the CUDA toolkit"
    )
