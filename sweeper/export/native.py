"""The exported CUDA header as native code: nvcc builds its extern "C" API into a shared library
(cached by content hash) and ctypes loads it.

`build_exported_launchers(header)` returns one callable per dtype,
`launch(x_ptr, y_ptr, n, stream_handle)`, that only enqueues work (no sync, no allocation),
so it can be captured into a CUDA graph. This exercises the real `launch_relu` dispatch,
device-property cache and alignment fallback of the header, not a re-implementation.
numba.cuda is imported inside `device_arch` only.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from sweeper_kernels.toolkit import find_tool

from sweeper.dtypes import DTYPES
from sweeper.errors import SweeperError

Launcher = Callable[[int, int, int, int], None]


def cache_dir() -> Path:
    root = os.environ.get("SWEEPER_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "sweeper"
    )
    return Path(root) / "export"


def device_arch() -> str:
    """'90' for the current device (numba), else '90'."""
    try:
        from numba import cuda

        major, minor = cuda.get_current_device().compute_capability
        return f"{major}{minor}"
    except Exception:  # noqa: BLE001 - no GPU: build for H100/H200
        return "90"


@functools.cache
def _nvcc_version_text(nvcc: str) -> str:
    """`nvcc --version`'s output (run once per nvcc: the library cache key and the report)."""
    return subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout


def nvcc_version(nvcc: str | None = None) -> str:
    """nvcc's "release X.Y, VX.Y.Z" line ("" when there is no nvcc)."""
    nvcc = nvcc or find_tool("nvcc")
    if not nvcc:
        return ""
    out = _nvcc_version_text(nvcc)
    return next((ln.split("tools, ", 1)[-1] for ln in out.splitlines() if "release" in ln), "")


# nvcc's language and optimisation flags for the header, wherever it is built (verify's
# library, the SASS check's cubin, the torch op's extension)
NVCC_FLAGS = ("-std=c++17", "-O3")


def nvcc_flags(arch: str, *output: str) -> list[str]:
    """nvcc's flags for the header as verify builds it (language, optimisation, target), with
    `output`'s flags (what to build) in between; sweeper.export.sass builds its cubin so."""
    return [*NVCC_FLAGS, *output, "-gencode", f"arch=compute_{arch},code=sm_{arch}"]


def build_library(header_path: str | os.PathLike, arch: str | None = None) -> Path:
    """nvcc -shared the header's C API into a cached .so; returns its path."""
    nvcc = find_tool("nvcc")
    if nvcc is None:
        from sweeper_kernels.toolkit import how_to_get

        raise SweeperError(f"{how_to_get('nvcc')}; it builds the exported header")
    header = Path(header_path).resolve()
    arch = arch or device_arch()
    flags = nvcc_flags(arch, "-shared", "-Xcompiler", "-fPIC")
    version = _nvcc_version_text(nvcc)
    key = hashlib.sha256(
        "\0".join([header.read_text(), " ".join(flags), version]).encode()
    ).hexdigest()[:16]
    out = cache_dir() / f"relu_policy_{key}.so"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        src = Path(tmp) / "relu_policy_capi.cu"
        src.write_text(f'#define SWEEPER_RELU_DEFINE_C_API\n#include "{header}"\n')
        lib = Path(tmp) / out.name
        r = subprocess.run(
            [nvcc, *flags, "-o", str(lib), str(src)], capture_output=True, text=True, timeout=900
        )
        if r.returncode != 0:
            raise SweeperError(f"nvcc failed building {header}:\n{r.stderr[-3000:]}")
        os.replace(lib, out)
    return out


def _library(header_path: str | os.PathLike, arch: str | None = None) -> ctypes.CDLL:
    return ctypes.CDLL(str(build_library(header_path, arch)))


def build_exported_launchers(
    header_path: str | os.PathLike, arch: str | None = None
) -> dict[str, Launcher]:
    """dtype -> launch(x_ptr, y_ptr, n, stream_handle): the header's launch_relu for that dtype.

    Raises SweeperError when the launch returns a CUDA error (e.g. cudaErrorNotSupported for
    a dtype the policy has no bands for)."""
    lib = _library(header_path, arch)
    out: dict[str, Launcher] = {}
    for dt in DTYPES:
        fn = getattr(lib, f"sweeper_launch_relu_{dt}")
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        fn.restype = ctypes.c_int

        def launch(x_ptr: int, y_ptr: int, n: int, stream: int, fn=fn, dt=dt) -> None:
            rc = fn(x_ptr, y_ptr, n, stream)
            if rc != 0:
                raise SweeperError(f"exported launch_relu ({dt}, n={n}) returned cudaError {rc}")

        out[dt] = launch
    return out


def exported_choices(header_path: str | os.PathLike, arch: str | None = None) -> dict:
    """dtype -> choice(n) -> config name the header's dispatch picks on the current device."""
    lib = _library(header_path, arch)
    out = {}
    for dt in DTYPES:
        fn = getattr(lib, f"sweeper_relu_choice_{dt}")
        fn.argtypes = [ctypes.c_size_t]
        fn.restype = ctypes.c_char_p
        out[dt] = lambda n, fn=fn: fn(n).decode()
    return out


def stream_handle(stream) -> int:
    """The CUstream of a numba stream as an int (ctypes c_void_p or cuda-python CUstream)."""
    h = stream.handle
    v = getattr(h, "value", None)
    return int(v) if v is not None else int(h)
