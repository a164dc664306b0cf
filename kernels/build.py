"""The one kernel factory: compile key -> generated module -> PTX (no GPU) or launchable kernel.

Caches, all keyed by the kernel source fingerprint (see source.source_fingerprint):
  * the generated module file: <cache>/kernels/src/relu_<slug>_<fp12>.py, written once
    (atomically, never rewritten: Numba's disk cache is invalidated by the file's mtime);
  * Numba's own on-disk cache of the compiled kernel (cubin per compute capability), in the
    `__pycache__` next to that file; one file per compile key, so a process pool can fill it
    in parallel without racing on a shared index;
  * PTX text: <cache>/kernels/ptx/<slug>_<fp12>_cc<XY>_nc<numba-cuda version>.ptx.
<cache> is $SWEEPER_CACHE, else ~/.cache/sweeper.
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import os
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path
from types import ModuleType

from sweeper_kernels.source import CompileKey, kernel_source, source_fingerprint
from sweeper_kernels.variants import Variant


def cache_root() -> Path:
    """sweeper's cache folder: $SWEEPER_CACHE, else ~/.cache/sweeper."""
    return Path(os.environ.get("SWEEPER_CACHE") or os.path.join(Path.home(), ".cache", "sweeper"))


def cache_dir() -> Path:
    return cache_root() / "kernels"


def _atomic_write(path: Path, text: str) -> None:
    _atomic_write_bytes(path, text.encode())


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write beside `path` and rename into place (the kernels' own: this layer never imports
    sweeper, whose writes go through sweeper.schema.atomic_write_text); a failed write leaves
    the file that was there and no temp file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _as_key(v: Variant | CompileKey) -> CompileKey:
    return v.compile_key if isinstance(v, Variant) else v


def _stem(key: CompileKey) -> str:
    return f"relu_{key.slug}_{source_fingerprint()[:12]}"


def module_path(key: Variant | CompileKey) -> Path:
    """Path of the generated module for `key`, written if missing."""
    key = _as_key(key)
    path = cache_dir() / "src" / f"{_stem(key)}.py"
    text = kernel_source(key)
    if not path.exists() or path.read_text() != text:
        _atomic_write(path, text)
    return path


@functools.cache
def load_module(key: CompileKey) -> ModuleType:
    """Import the generated module (simulator-aware: its numba.cuda is whatever this process has)."""
    path = module_path(key)
    name = f"sweeper_kernels_generated.{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@functools.cache
def _kernel(key: CompileKey):
    return load_module(key).build()


def get_kernel(v: Variant | CompileKey):
    """The launchable Numba kernel for a variant's compile key (compiled or loaded once)."""
    return _kernel(_as_key(v))


def _cc_tag(cc: tuple[int, int]) -> str:
    return f"{cc[0]}{cc[1]}"


def ptx_path(key: Variant | CompileKey, cc: tuple[int, int]) -> Path:
    nc = version("numba-cuda")
    return cache_dir() / "ptx" / f"{_stem(_as_key(key))}_cc{_cc_tag(cc)}_nc{nc}.ptx"


@functools.cache
def _ptx(key: CompileKey, cc: tuple[int, int]) -> str:
    path = ptx_path(key, cc)
    if path.exists():
        return path.read_text()
    from numba import cuda

    module = load_module(key)
    text, _ = cuda.compile_ptx(
        module.relu_kernel, module.SIGNATURE, cc=cc, launch_bounds=module.LAUNCH_BOUNDS
    )
    _atomic_write(path, text)
    return text


def ptx(variant: Variant | CompileKey, cc: tuple[int, int] = (9, 0)) -> str:
    """PTX of a variant's kernel for compute capability `cc`. Needs no GPU; cached on disk."""
    return _ptx(_as_key(variant), tuple(cc))


def ptx_many(keys, ccs=((9, 0),), workers: int | None = None) -> dict:
    """PTX for every (compile key, cc), compiling the missing ones in a process pool."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    jobs = list(dict.fromkeys((_as_key(k), tuple(cc)) for k in keys for cc in ccs))
    missing = [j for j in jobs if not ptx_path(*j).exists()]
    workers = workers or os.cpu_count() or 1
    if len(missing) > 1 and workers > 1:
        # spawn, not fork: the parent may already hold LLVM/NVVM state and threads.
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(min(workers, len(missing)), mp_context=ctx) as pool:
            list(pool.map(_ptx_job, missing, chunksize=1))
    return {j: ptx(*j) for j in jobs}


def _ptx_job(job) -> None:
    ptx(*job)


def built_marker(key: CompileKey, cc: tuple[int, int]) -> Path:
    """Written once a worker has compiled `key` for `cc` into Numba's disk cache."""
    nc = version("numba-cuda")
    return cache_dir() / "built" / f"{_stem(key)}_cc{_cc_tag(cc)}_nc{nc}.ok"


def _kernel_job(key: CompileKey) -> tuple[str, bool, float]:
    import time

    from numba import cuda

    t0 = time.perf_counter()
    stats = get_kernel(key).stats
    cc = tuple(cuda.get_current_device().compute_capability)
    _atomic_write(built_marker(key, cc), "")
    return key.slug, sum(stats.cache_misses.values()) > 0, time.perf_counter() - t0


_POOL: list = []  # [(the compile pool, its workers)] while one is open


def compile_pool(workers: int):
    """The process's compile pool: spawned processes (one CUDA context each once they have
    compiled), made on first use and kept, so every later call (a search's every round)
    finds its workers started and their imports done; a call for more workers than it has
    replaces it. Processes start on demand, up to `workers`."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if _POOL and _POOL[0][1] >= workers:
        return _POOL[0][0]
    close_compile_pool()
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
    _POOL.append((pool, workers))
    return pool


@atexit.register
def close_compile_pool() -> None:
    """Shut the compile pool down (its processes exit; the next call starts a new one)."""
    while _POOL:
        _POOL.pop()[0].shutdown()


def warm_kernels(keys, workers: int | None = None) -> list[tuple[str, bool, float]]:
    """GPU: compile every key's kernel that is not yet in Numba's disk cache in the compile
    pool (compile_pool), then load them all in this process.
    Returns (slug, compiled?, seconds) per key."""
    from concurrent.futures.process import BrokenProcessPool

    from numba import cuda

    keys = list(dict.fromkeys(_as_key(k) for k in keys))
    cc = tuple(cuda.get_current_device().compute_capability)
    missing = [k for k in keys if not built_marker(k, cc).exists()]
    done: dict[CompileKey, tuple[str, bool, float]] = {}
    if missing:
        pool = compile_pool(max(1, workers or os.cpu_count() or 1))
        try:
            done.update(zip(missing, pool.map(_kernel_job, missing, chunksize=1), strict=True))
        except BrokenProcessPool:  # a worker died: the next call starts a new pool
            close_compile_pool()
            raise
    out = []
    for k in keys:
        slug, _, secs = _kernel_job(k)  # loads from the disk cache filled above
        out.append(done.get(k, (slug, False, secs)))
    return out
