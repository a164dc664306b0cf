"""`Launcher(variant)(x, y, n, stream)`: a Numba variant's launch, graph-capture safe.

After the first call a launch does only host-side integer maths and one kernel launch: no
allocation, no memcpy, no synchronisation, no device or attribute query (the SM count and
threads per SM are read once, on the first call, and kept). n == 0 launches nothing.

Grid shapes ("tile" = unroll * block vectors, E = elements per vector):
  * onepass: one block per tile, ceil(ceil(n / E) / tile) blocks;
  * flat: one slot per vector and per tail element, `unroll` slots per thread and no loop,
    ceil((n // E + n % E) / tile) blocks; flat32 and fixed32 the same, refused when the
    launch's slot indices would not fit in a signed 32-bit integer (2**31 slots: 32 GiB per
    buffer with 16-byte vectors);
  * strideW: grid-stride over W waves, where a wave is every SM full of resident blocks by
    thread count: W * sm_count * (max_threads_per_sm // block) blocks, or fewer if onepass
    needs fewer. (Register-limited residency can be lower; W > 1 absorbs that.)
"""

from __future__ import annotations

from dataclasses import dataclass

from sweeper_kernels.errors import KernelError
from sweeper_kernels.reference import itemsize, storage_dtype
from sweeper_kernels.variants import Variant

INDEX32_MAX = 2**31 - 1  # a flat32 or fixed32 kernel's slot indices are signed 32-bit


@dataclass(frozen=True)
class LaunchShape:
    blocks: int
    threads: int
    nvec: int  # whole vectors
    ntiles: int  # whole tiles (unroll * threads vectors)
    shift: int  # ntiles % blocks: rotates who does the leftovers


def wave_blocks(waves: int, block: int, sm_count: int, max_threads_per_sm: int) -> int:
    """Blocks in W waves: every SM full of resident blocks by thread count, W times."""
    return waves * sm_count * max(1, max_threads_per_sm // block)


def elems_per_vector(variant: Variant) -> int:
    return variant.vec_bytes // itemsize(variant.dtype)


def launch_shape(variant: Variant, n: int, sm_count: int, max_threads_per_sm: int) -> LaunchShape:
    """The kernel launch for `n` elements (n >= 1). Pure integer maths, tested on the CPU."""
    e = elems_per_vector(variant)
    nvec = n // e
    if variant.flat:
        slots = nvec + n % e  # one per vector and per tail element
        tile = variant.unroll * variant.block
        blocks = max(1, -(-slots // tile))
        if variant.grid in ("flat32", "fixed32") and blocks * tile > INDEX32_MAX:
            raise KernelError(
                f"{variant.config}: n={n} needs {blocks * tile} slot indices, more than "
                f"32-bit index maths can hold ({INDEX32_MAX}); use the same config with grid "
                "'flat' (64-bit indices)"
            )
        return LaunchShape(blocks, variant.block, nvec, 0, 0)
    units = nvec + (1 if n % e else 0)  # the tail elements ride in one extra "vector" slot
    tile = variant.unroll * variant.block
    blocks = -(-units // tile)
    if variant.waves is not None:
        blocks = min(
            blocks, wave_blocks(variant.waves, variant.block, sm_count, max_threads_per_sm)
        )
    blocks = max(1, blocks)
    ntiles = nvec // tile
    return LaunchShape(blocks, variant.block, nvec, ntiles, ntiles % blocks)


def element_count(n) -> int:
    """A launch's element count as an int; KernelError when negative (0 launches nothing)."""
    n = int(n)
    if n < 0:
        raise KernelError(f"n must be >= 0, got {n}")
    return n


def check_io(x, y, dtype: str, n: int) -> None:
    """The input and output a launcher is given: 1-D contiguous arrays of the dtype's storage
    type holding at least n elements (KernelError naming the one that is not)."""
    _check_array(x, "x", dtype, n)
    _check_array(y, "y", dtype, n)


def _check_array(a, name: str, dtype: str, n: int) -> None:
    want = storage_dtype(dtype)
    if a.dtype != want:
        raise KernelError(f"{name} has dtype {a.dtype}; {dtype} data must be {want}")
    if a.ndim != 1:
        raise KernelError(f"{name} must be 1-D, got {a.ndim}-D")
    if a.size > 1 and a.strides[0] != want.itemsize:
        raise KernelError(f"{name} must be contiguous (stride {a.strides[0]} bytes)")
    if a.size < n:
        raise KernelError(f"{name} has {a.size} elements, fewer than n={n}")


class Launcher:
    """Launches one variant. `sm_count` / `max_threads_per_sm` override the device's (tests)."""

    def __init__(
        self,
        variant: Variant,
        sm_count: int | None = None,
        max_threads_per_sm: int | None = None,
    ):
        self.variant = variant
        self._sm_count = sm_count
        self._max_threads = max_threads_per_sm
        self._kernel = None
        self._simulator: bool | None = None

    def _first_call(self) -> None:
        from sweeper_kernels import intrinsics
        from sweeper_kernels.build import get_kernel

        self._simulator = intrinsics.simulator()
        if self._sm_count is None or self._max_threads is None:
            if self._simulator:
                sms, threads = 1, 2048
            else:
                from numba import cuda

                dev = cuda.get_current_device()
                sms = dev.MULTIPROCESSOR_COUNT
                threads = dev.MAX_THREADS_PER_MULTIPROCESSOR
            self._sm_count = self._sm_count or sms
            self._max_threads = self._max_threads or threads
        self._kernel = get_kernel(self.variant)

    def _pointer(self, a, name: str) -> int:
        ptr = a.ctypes.data if self._simulator else a.device_ctypes_pointer.value or 0
        if ptr % self.variant.vec_bytes:
            raise KernelError(
                f"{name} data pointer {ptr:#x} is not {self.variant.vec_bytes}-byte aligned "
                f"(an offset view?); variant {self.variant.config} needs aligned buffers: use "
                "a fresh allocation or a variant with a smaller vec_bytes"
            )
        return ptr

    def shape(self, n: int) -> LaunchShape:
        if self._kernel is None:
            self._first_call()
        return launch_shape(self.variant, n, self._sm_count, self._max_threads)

    def __call__(self, x, y, n: int, stream=0) -> None:
        n = element_count(n)
        if n == 0:
            return
        if self._kernel is None:
            self._first_call()
        check_io(x, y, self.variant.dtype, n)
        px = self._pointer(x, "x")
        py = self._pointer(y, "y")
        s = launch_shape(self.variant, n, self._sm_count, self._max_threads)
        if self._simulator:  # the simulator's kernels index arrays, not addresses
            px, py = x, y
        self._kernel[s.blocks, s.threads, stream](px, py, n, s.nvec, s.ntiles, s.shift)


def closest_to_launch(dtype: str, n: int, blocks: int, threads: int) -> tuple[Variant, bool]:
    """The grid's config closest to a kernel launch of `blocks` x `threads` on `n` elements
    (a baseline's, read from its captured graph), and whether its own launch for `n` has that
    very shape (same blocks, same threads).

    The bytes per thread are n x itemsize / (blocks x threads), rounded up to a power of two;
    the vector is the widest those bytes allow (16 B at most, as a vectorised elementwise
    kernel loads where the pointers are aligned), unrolled to cover them (at most 8); the
    block size the grid's closest (in log2) to `threads`; the shape loop-free with 32-bit
    indices and that block size compiled in (`fixed32`, a grid covering n in one pass, as
    torch's vectorized elementwise kernel is), default cache hints. A launch whose
    grid does not cover n in one pass at 8 vectors per thread is a grid-stride kernel, which
    the closest loop-free config only approximates (not exact)."""
    from sweeper_kernels.variants import BLOCKS, UNROLLS, VEC_BYTES

    if n < 1 or blocks < 1 or threads < 1:
        raise KernelError(f"launch shape {blocks} x {threads} on n={n}: all must be >= 1")
    per_thread = -(-n * itemsize(dtype) // (blocks * threads))
    nbytes = 1 << max(0, (per_thread - 1).bit_length())  # the next power of two
    vec = min(max(VEC_BYTES), max(min(VEC_BYTES), nbytes))
    unroll = min(max(UNROLLS), max(min(UNROLLS), nbytes // vec))
    block = min(BLOCKS, key=lambda b: (abs((b.bit_length() - 1) - (threads.bit_length() - 1)), b))
    v = Variant(dtype=dtype, vec_bytes=vec, unroll=unroll, block=block, grid="fixed32")
    try:
        ours = launch_shape(v, n, sm_count=1, max_threads_per_sm=2048)
    except KernelError:  # more slots than 32-bit indices hold: the 64-bit form
        v = Variant(dtype=dtype, vec_bytes=vec, unroll=unroll, block=block, grid="flat")
        ours = launch_shape(v, n, sm_count=1, max_threads_per_sm=2048)
    return v, (ours.blocks, ours.threads) == (blocks, threads)
