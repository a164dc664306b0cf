"""Cheating variants: fixtures for the runner's anti-gaming guards. GPU only.

Each wraps a normal Variant and has the same launcher interface `launcher(x, y, n, stream)`:

  * persisting_window ("adv-persist-<base id>"): before each launch, on the host, raises the
    context's persisting-L2 limit to the device maximum (once) and sets the stream's
    access-policy window over the input (hitRatio 1, hits PERSISTING, misses STREAMING). The
    kernel is honest; the cache state it leaves behind is not, and it outlives the variant.
  * drift_after_10 ("adv-drift10-<base id>"): correct for 10 launches, then out[0] is garbage.
    A device-global counter is bumped by one thread of a 1-thread kernel queued after the real
    one, so the count is kept by the GPU and works under CUDA-graph replay.
  * half_work_after_warmup ("adv-half3-<base id>"): from its 4th launch on, only the first
    half of the output is written. A 1-thread kernel bumps a device counter; the real kernel
    does the first half; a gated element-wise kernel does the second half only while the
    counter is <= 3.
  * skip_when_right ("adv-skipright-<base id>"): a 1-thread probe kernel compares the output's
    first PROBE_HEAD words and its last word with ReLU of the input's; when all match it sets a
    device flag, and the work kernel (a grid-stride ReLU over the whole buffer) reads the flag
    and exits at once. Skipping costs two near-empty launches. A poisoned output always fails
    the probe, so every poison-then-check guard sees correct output; only input that changes
    outside the probed words shows the skip.
  * one_call_in_2, one_call_in_4 ("adv-onein2-<base id>", "adv-onein4-<base id>"): a 1-thread
    kernel bumps a device counter and sets the flag unless the count before it was a multiple
    of k; the same gated work kernel then does the whole ReLU on one call in k and nothing on
    the others (the output keeps what an earlier call wrote).
No host sync or allocation after the first call (the counter and flag are allocated then), so
every kind is capturable in a CUDA graph and keeps its count under replay.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numba import cuda  # a module global, so the CUDA simulator can run the helper kernels
from sweeper_kernels.bitmath import DTYPE_LANES
from sweeper_kernels.errors import KernelError
from sweeper_kernels.launch import Launcher, check_io, elems_per_vector
from sweeper_kernels.variants import ADVERSARIAL_PREFIX, Variant

KINDS = {
    "persist": "persisting_window",
    "drift10": "drift_after_10",
    "half3": "half_work_after_warmup",
    "skipright": "skip_when_right",
    "onein2": "one_call_in_2",
    "onein4": "one_call_in_4",
}
DRIFT_AFTER = 10
HALF_AFTER = 3
PROBE_HEAD = 4  # skip_when_right compares these first output words and the last one
WORK_EVERY = {"onein2": 2, "onein4": 4}  # one_call_in_k: k per kind
GATED_BLOCKS = 1024  # grid of the gated work kernel (grid-stride)


@dataclass(frozen=True)
class AdversarialVariant:
    kind: str  # a key of KINDS
    base: Variant

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise KernelError(f"unknown adversarial kind '{self.kind}'; use {sorted(KINDS)}")

    @property
    def id(self) -> str:
        return f"{ADVERSARIAL_PREFIX}{self.kind}-{self.base.id}"

    @property
    def dtype(self) -> str:
        return self.base.dtype

    @property
    def config(self) -> str:
        return f"{ADVERSARIAL_PREFIX}{self.kind}-{self.base.config}"

    # The runner records a variant's fields; an adversarial variant reports its base's.
    vec_bytes = property(lambda self: self.base.vec_bytes)
    unroll = property(lambda self: self.base.unroll)
    load_hint = property(lambda self: self.base.load_hint)
    store_hint = property(lambda self: self.base.store_hint)
    block = property(lambda self: self.base.block)
    grid = property(lambda self: self.base.grid)

    @classmethod
    def from_id(cls, text: str) -> AdversarialVariant:
        parts = text.split("-", 2)
        if len(parts) != 3 or parts[0] != "adv":
            raise KernelError(f"'{text}' is not an adversarial id (adv-<kind>-<variant id>)")
        return cls(parts[1], Variant.from_id(parts[2]))


def persisting_window(base: Variant) -> AdversarialVariant:
    return AdversarialVariant("persist", base)


def drift_after_10(base: Variant) -> AdversarialVariant:
    return AdversarialVariant("drift10", base)


def half_work_after_warmup(base: Variant) -> AdversarialVariant:
    return AdversarialVariant("half3", base)


def skip_when_right(base: Variant) -> AdversarialVariant:
    return AdversarialVariant("skipright", base)


def one_call_in_2(base: Variant) -> AdversarialVariant:
    return AdversarialVariant("onein2", base)


def one_call_in_4(base: Variant) -> AdversarialVariant:
    return AdversarialVariant("onein4", base)


# ---- helper kernels (int64 addresses, our intrinsics; compiled on first use) -------------------


def helper_functions(dtype: str) -> dict:
    """name -> (python function, signature) of the helper kernels; PTX-checkable on the CPU."""
    from sweeper_kernels.intrinsics import (
        element_load,
        element_store,
        relu_word,
        to_global,
    )

    bits = DTYPE_LANES[dtype][0]
    elem_bytes = bits // 8
    ldw, stw = element_load(32, "default"), element_store(32, "default")
    lde, ste, rw = element_load(bits, "default"), element_store(bits, "default"), relu_word(dtype)
    ld32, st32 = element_load(32, "cg"), element_store(32, "default")
    ld8, st8 = element_load(8, "default"), element_store(8, "default")
    glob = to_global()

    def drift(counter, y):
        c = glob(counter)
        k = ld32(c, 0) + 1
        st32(c, 0, k)
        if k > DRIFT_AFTER:
            ya = glob(y)
            st8(ya, 0, ld8(ya, 0) ^ 0x5A)  # flips bits: never equal to the right answer

    def tick(counter):
        c = glob(counter)
        st32(c, 0, ld32(c, 0) + 1)

    def gated(x, y, lo, n, counter):
        if ld32(glob(counter), 0) > HALF_AFTER:
            return
        xa, ya = glob(x), glob(y)
        i = lo + cuda.grid(1)
        while i < n:
            ste(ya, i, rw(lde(xa, i)))
            i += cuda.gridsize(1)

    def probe(x, y, nwords, flag):
        # flag = 1 (skip the work) when the first PROBE_HEAD words and the last word of y
        # already hold ReLU of x's
        xa, ya = glob(x), glob(y)
        wrong = 0 if nwords > 0 else 1
        j = 0
        while j < nwords and j <= PROBE_HEAD:
            w = j if j < PROBE_HEAD else nwords - 1
            if ldw(ya, w) != rw(ldw(xa, w)):
                wrong += 1
            j += 1
        st32(glob(flag), 0, 1 if wrong == 0 else 0)

    def every(counter, k, flag):
        # flag = 1 (skip the work) unless the calls counted before this one are a multiple of k
        c = glob(counter)
        seen = ld32(c, 0)
        st32(c, 0, seen + 1)
        st32(glob(flag), 0, 0 if seen % k == 0 else 1)

    def skippable(x, y, n, flag):
        # the whole ReLU, grid-stride: whole 32-bit words, then the elements after the last
        if ld32(glob(flag), 0) != 0:
            return
        xa, ya = glob(x), glob(y)
        nwords = n * elem_bytes // 4
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        j = i
        while j < nwords:
            stw(ya, j, rw(ldw(xa, j)))
            j += step
        j = nwords * 4 // elem_bytes + i
        while j < n:
            ste(ya, j, rw(lde(xa, j)))
            j += step

    return {
        "drift": (drift, "void(int64, int64)"),
        "tick": (tick, "void(int64)"),
        "gated": (gated, "void(int64, int64, int64, int64, int64)"),
        "probe": (probe, "void(int64, int64, int64, int64)"),
        "every": (every, "void(int64, int64, int64)"),
        "skippable": (skippable, "void(int64, int64, int64, int64)"),
    }


@functools.cache
def _helper(name: str, dtype: str):
    fn, sig = helper_functions(dtype)[name]
    return cuda.jit(sig)(fn)


def _check(result, what: str):
    from cuda.bindings import driver as cu

    err = result[0]
    if err != cu.CUresult.CUDA_SUCCESS:
        raise KernelError(f"{what} failed: {err}")
    return result[1:]


class AdversarialLauncher:
    def __init__(self, adv: AdversarialVariant, **overrides):
        self.variant = adv
        self.base = Launcher(adv.base, **overrides)
        self._counter = None  # device uint32[2]: the call counter, then the skip flag
        self._counter_ptr = 0
        self._flag_ptr = 0
        self._limit_set = False
        self._max_window = 0

    # -- test helpers (they synchronise: never call them in a timed region) --
    def launches_seen(self) -> int:
        """The device counter (0 for persist, which has none)."""
        return 0 if self._counter is None else int(self._counter.copy_to_host()[0])

    def _first_call(self) -> None:
        self._counter = cuda.to_device(np.zeros(2, np.uint32))
        self._counter_ptr = self._counter.device_ctypes_pointer.value
        self._flag_ptr = self._counter_ptr + 4
        kind = self.variant.kind
        if kind == "drift10":
            _helper("drift", self.variant.dtype)
        elif kind == "half3":
            _helper("tick", self.variant.dtype)
            _helper("gated", self.variant.dtype)
        elif kind == "skipright":
            _helper("probe", self.variant.dtype)
            _helper("skippable", self.variant.dtype)
        elif kind in WORK_EVERY:
            _helper("every", self.variant.dtype)
            _helper("skippable", self.variant.dtype)
        elif kind == "persist":
            from cuda.bindings import driver as cu

            (dev,) = _check(cu.cuCtxGetDevice(), "cuCtxGetDevice")
            attr = cu.CUdevice_attribute
            (max_persist,) = _check(
                cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, dev),
                "max persisting L2 size",
            )
            (self._max_window,) = _check(
                cu.cuDeviceGetAttribute(
                    attr.CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, dev
                ),
                "max access policy window",
            )
            _check(
                cu.cuCtxSetLimit(cu.CUlimit.CU_LIMIT_PERSISTING_L2_CACHE_SIZE, max_persist),
                "cuCtxSetLimit(PERSISTING_L2_CACHE_SIZE)",
            )

    def _set_window(self, x, n: int, stream) -> None:
        from cuda.bindings import driver as cu

        handle = int(stream.handle) if hasattr(stream, "handle") else int(stream or 0)
        if not handle:
            raise KernelError("persisting_window needs a non-default stream")
        value = cu.CUstreamAttrValue()
        w = value.accessPolicyWindow
        w.base_ptr = x.device_ctypes_pointer.value
        w.num_bytes = min(n * x.dtype.itemsize, self._max_window)
        w.hitRatio = 1.0
        w.hitProp = cu.CUaccessProperty.CU_ACCESS_PROPERTY_PERSISTING
        w.missProp = cu.CUaccessProperty.CU_ACCESS_PROPERTY_STREAMING
        _check(
            cu.cuStreamSetAttribute(
                cu.CUstream(handle),
                cu.CUstreamAttrID.CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW,
                value,
            ),
            "cuStreamSetAttribute(ACCESS_POLICY_WINDOW)",
        )

    def __call__(self, x, y, n: int, stream=0) -> None:
        n = int(n)
        if n == 0:
            return
        if self._counter is None:
            self._first_call()
        kind = self.variant.kind
        if kind == "persist":
            self._set_window(x, n, stream)
            self.base(x, y, n, stream)
        elif kind == "drift10":
            self.base(x, y, n, stream)
            _helper("drift", self.variant.dtype)[1, 1, stream](
                self._counter_ptr, y.device_ctypes_pointer.value
            )
        elif kind in ("skipright", *WORK_EVERY):
            check_io(x, y, self.variant.dtype, n)
            px, py = x.device_ctypes_pointer.value, y.device_ctypes_pointer.value
            if kind == "skipright":
                nwords = n * x.dtype.itemsize // 4
                _helper("probe", self.variant.dtype)[1, 1, stream](px, py, nwords, self._flag_ptr)
            else:
                _helper("every", self.variant.dtype)[1, 1, stream](
                    self._counter_ptr, WORK_EVERY[kind], self._flag_ptr
                )
            blocks = max(1, min(GATED_BLOCKS, -(-n // 256)))
            _helper("skippable", self.variant.dtype)[blocks, 256, stream](px, py, n, self._flag_ptr)
        else:  # half3
            e = elems_per_vector(self.variant.base)
            lo = (n // 2) - (n // 2) % e
            _helper("tick", self.variant.dtype)[1, 1, stream](self._counter_ptr)
            if lo:
                self.base(x, y, lo, stream)
            self.base._pointer(x, "x")  # same alignment rule as the honest variant
            px, py = x.device_ctypes_pointer.value, y.device_ctypes_pointer.value
            blocks = min(1024, -(-(n - lo) // 256))
            _helper("gated", self.variant.dtype)[blocks, 256, stream](
                px, py, lo, n, self._counter_ptr
            )


def get_adversarial_launcher(adv: AdversarialVariant | str, **overrides) -> AdversarialLauncher:
    if isinstance(adv, str):
        adv = AdversarialVariant.from_id(adv)
    return AdversarialLauncher(adv, **overrides)


def stream_window(stream) -> tuple[int, int, float]:
    """(base_ptr, num_bytes, hitRatio) of a stream's access-policy window (for tests and guards)."""
    from cuda.bindings import driver as cu

    (value,) = _check(
        cu.cuStreamGetAttribute(
            cu.CUstream(int(stream.handle)),
            cu.CUstreamAttrID.CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW,
        ),
        "cuStreamGetAttribute(ACCESS_POLICY_WINDOW)",
    )
    w = value.accessPolicyWindow
    return int(w.base_ptr), int(w.num_bytes), float(w.hitRatio)
