"""The fresh-input replay's device kernels (sweeper.run.fresh); PTX-checkable on the CPU and
runnable in the CUDA simulator (numba.cuda is a module global, which the simulator swaps).

x, y and src are data addresses (any dtype: the kernels move whole 32-bit words); pos and vals
are a FreshTable (vals flattened, one row per call), step the call index, stale the count of
stale words. Each runs as one block of at least len(pos) threads.
"""

from __future__ import annotations

import functools

from numba import cuda
from sweeper_kernels.intrinsics import element_load, element_store, to_global

_ld, _st = element_load(32, "default"), element_store(32, "default")
_glob = to_global()


def rewrite(x, pos, vals, step):
    """This call's value into the input at each position."""
    t = cuda.threadIdx.x
    k = pos.size
    if t < k:
        _st(_glob(x), pos[t], vals[step[0] * k + t])


def check(y, pos, vals, step, stale):
    """Count the positions whose output is not this call's value; then the next call."""
    t = cuda.threadIdx.x
    k = pos.size
    s = step[0]
    if t < k and _ld(_glob(y), pos[t]) != vals[s * k + t]:
        cuda.atomic.add(stale, 0, 1)
    cuda.syncthreads()  # every thread has read the call index
    if t == 0:
        step[0] = s + 1


def restore(x, src, pos):
    """The pristine input back at each position."""
    t = cuda.threadIdx.x
    if t < pos.size:
        _st(_glob(x), pos[t], _ld(_glob(src), pos[t]))


_TABLE = "uint32[::1], uint32[::1], uint32[::1]"
SIGNATURES = {
    "rewrite": f"void(int64, {_TABLE})",
    "check": f"void(int64, {_TABLE}, uint32[::1])",
    "restore": "void(int64, int64, uint32[::1])",
}
FUNCTIONS = {"rewrite": rewrite, "check": check, "restore": restore}


@functools.cache
def kernels() -> dict:
    """name -> compiled kernel (compiled once per process)."""
    return {name: cuda.jit(SIGNATURES[name])(fn) for name, fn in FUNCTIONS.items()}
