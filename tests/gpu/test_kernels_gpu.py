"""The ReLU variants on a real GPU: bit-exact, bounded, aligned, 128-bit, cheaters caught.

Needs a CUDA GPU (marker `gpu`; skipped otherwise). The default grid's compiles are built
in a spawned process pool into Numba's disk cache first (tools/compile_bench.py does the same),
so a warm run is mostly the checks themselves.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
from numba import cuda
from sweeper_kernels.errors import KernelError

pytestmark = pytest.mark.gpu  # skipped by conftest.py only where there is no GPU

from sweeper_kernels.launchers import get_launcher  # noqa: E402
from sweeper_kernels.reference import (  # noqa: E402
    itemsize,
    random_bits,
    reference_relu,
    special_values,
    storage_dtype,
)
from sweeper_kernels.variants import DTYPES, Variant, compile_keys, default_grid  # noqa: E402

SIZES = (1, 3, 15, 16, 17, 4097, 1_000_003)
PAD = 64  # elements after n that must stay poisoned
POISON = 0xAB


@pytest.fixture(scope="module", autouse=True)
def warm_cache():
    from sweeper_kernels.build import warm_kernels

    warm_kernels(compile_keys(default_grid()), workers=os.cpu_count())


def _poison(n: int, dtype: str) -> np.ndarray:
    return np.full(n * itemsize(dtype), POISON, np.uint8).view(storage_dtype(dtype))


def _first_bad(got: np.ndarray, want: np.ndarray) -> str:
    bad = np.flatnonzero(got.view(np.uint8) != want.view(np.uint8)) // want.itemsize
    return "" if bad.size == 0 else f"{np.unique(bad).size} wrong elements, first {bad[:5]}"


def _inputs(dtype: str):
    out = {}
    for n in SIZES:
        x = random_bits(n + PAD, dtype, seed=n)
        sv = special_values(dtype)
        x[: min(n, sv.size)] = sv[: min(n, sv.size)]
        want = reference_relu(x[:n], dtype)
        out[n] = (cuda.to_device(x), want)
    return out


@pytest.mark.parametrize("dtype", DTYPES)
def test_default_grid_bit_exact(dtype):
    """Every default-grid variant x sizes 1..1,000,003: random bit patterns (so NaNs, infs and
    denormals occur) with the special values spliced in front; output poisoned before each
    launch, and the PAD elements past n must stay poisoned."""
    stream = cuda.stream()
    inputs = _inputs(dtype)
    dy = cuda.device_array(max(SIZES) + PAD, storage_dtype(dtype))
    poison = _poison(max(SIZES) + PAD, dtype)
    failures = []
    for v in default_grid([dtype]):
        launch = get_launcher(v)
        for n, (dx, want) in inputs.items():
            view = dy[: n + PAD]  # poison and read back only what matters: n + PAD elements
            view.copy_to_device(poison[: n + PAD], stream=stream)
            launch(dx, dy, n, stream)
            got = view.copy_to_host(stream=stream)
            stream.synchronize()
            msg = _first_bad(got[:n], want) or _first_bad(got[n : n + PAD], poison[:PAD])
            if msg:
                failures.append(f"{v.id} n={n}: {msg}")
    assert not failures, "\n".join(failures[:30])


@pytest.mark.parametrize("dtype", DTYPES)
def test_special_values_tiled(dtype):
    x = np.tile(special_values(dtype), 1001)  # not a multiple of any vector width
    want = reference_relu(x, dtype)
    dx, dy = cuda.to_device(x), cuda.device_array(x.size, storage_dtype(dtype))
    for v in default_grid([dtype])[::7]:
        dy.copy_to_device(_poison(x.size, dtype))
        get_launcher(v)(dx, dy, x.size, 0)
        assert not _first_bad(dy.copy_to_host(), want), v.id


def test_n_zero_launches_nothing():
    dy = cuda.to_device(_poison(16, "fp32"))
    get_launcher(default_grid(["fp32"])[0])(cuda.to_device(np.ones(16, np.float32)), dy, 0, 0)
    assert (dy.copy_to_host().view(np.uint8) == POISON).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_misaligned_view_rejected_or_correct(dtype):
    n = 4097
    x = random_bits(n + 1, dtype, seed=5)
    dx = cuda.to_device(x)
    for vec in (4, 8, 16):
        v = Variant(dtype, vec, 2, "cs", "cs", 256, "onepass")
        dy = cuda.to_device(_poison(n + 1, dtype))
        try:
            get_launcher(v)(dx[1:], dy[1:], n, 0)
        except KernelError as e:
            assert "aligned" in str(e)
            assert (dy.copy_to_host().view(np.uint8) == POISON).all(), "written before rejecting"
            assert vec > itemsize(dtype)
        else:  # accepted only where one element is one vector word (fp32, vec 4)
            assert not _first_bad(dy.copy_to_host()[1:], reference_relu(x[1:], dtype)), v.id


def _sass_accesses(v: Variant) -> list[list[str]]:
    from sweeper_kernels.build import get_kernel

    sass = get_kernel(v).inspect_sass()  # needs nvdisasm: the test is marked needs_tool
    if isinstance(sass, dict):
        sass = "\n".join(sass.values())
    return [m.group(0).split(".") for m in re.finditer(r"\b(?:LDG|STG)(?:\.[A-Z0-9_]+)+", sass)]


@pytest.mark.parametrize(
    "v",
    [v for v in default_grid(["fp32", "int8"]) if v.vec_bytes == 16 and v.block == 256][
        ::2
    ],  # fmt: skip
    ids=lambda v: v.id,
)
@pytest.mark.needs_tool("nvdisasm")
def test_sass_128bit_and_evict_first(v):
    acc = _sass_accesses(v)
    loads = [a for a in acc if a[0] == "LDG" and "128" in a]
    stores = [a for a in acc if a[0] == "STG" and "128" in a]
    assert loads and stores, f"no LDG/STG .128 in SASS: {acc}"
    if v.load_hint == "cs":
        assert all("EF" in a for a in loads), loads
    if v.store_hint == "cs":
        assert all("EF" in a for a in stores), stores
    if v.load_hint == "default":
        assert not any("EF" in a for a in loads), loads


# ---- CUDA graph capture: the launch path does nothing a capture forbids ----------------------


def _capture(stream, fn):
    from cuda.bindings import driver as cu

    h = cu.CUstream(int(stream.handle))
    (err,) = cu.cuStreamBeginCapture(h, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL)
    assert err == cu.CUresult.CUDA_SUCCESS, err
    try:
        fn()
    finally:
        err, graph = cu.cuStreamEndCapture(h)
    assert err == cu.CUresult.CUDA_SUCCESS, err
    err, gexec = cu.cuGraphInstantiate(graph, 0)
    assert err == cu.CUresult.CUDA_SUCCESS, err

    def replay():
        (e,) = cu.cuGraphLaunch(gexec, h)
        assert e == cu.CUresult.CUDA_SUCCESS, e

    return replay


def test_launcher_is_graph_capturable():
    v = Variant("bf16", 16, 4, "L2::evict_last", "cs", 256, "stride4")
    n = 1_000_003
    x = random_bits(n, "bf16", seed=9)
    dx, dy = cuda.to_device(x), cuda.device_array(n, np.uint16)
    stream = cuda.stream()
    launch = get_launcher(v)
    launch(dx, dy, n, stream)  # first call: compile/load, device query
    stream.synchronize()
    dy.copy_to_device(_poison(n, "bf16"))
    replay = _capture(stream, lambda: launch(dx, dy, n, stream))
    replay()
    stream.synchronize()
    assert not _first_bad(dy.copy_to_host(), reference_relu(x, "bf16"))


# ---- adversarial variants are observably wrong / cheating ------------------------------------


def _adv(kind: str, base: Variant):

    return get_launcher(f"adv-{kind}-{base.id}")  # through the id, as the runner would


def test_drift_after_10_corrupts_out0_on_the_11th_launch_also_under_graph_replay():
    base = Variant("fp32", 16, 2, "default", "cs", 256, "onepass")
    x = random_bits(10_000, "fp32", seed=2)
    want = reference_relu(x, "fp32")
    dx, dy = cuda.to_device(x), cuda.device_array(x.size, np.float32)
    launch = _adv("drift10", base)
    for _ in range(10):
        launch(dx, dy, x.size, 0)
    cuda.synchronize()
    assert not _first_bad(dy.copy_to_host(), want), "wrong before its 11th launch"
    launch(dx, dy, x.size, 0)
    got = dy.copy_to_host()
    assert got.view(np.uint32)[0] != want.view(np.uint32)[0]
    assert not _first_bad(got[1:], want[1:])
    # a fresh one, replayed from a graph: the counter lives on the device
    launch = _adv("drift10", base)
    stream = cuda.stream()
    launch(dx, dy, x.size, stream)  # 1st launch (allocates the counter, compiles)
    replay = _capture(stream, lambda: launch(dx, dy, x.size, stream))
    for _ in range(9):
        replay()  # launches 2..10
    stream.synchronize()
    assert not _first_bad(dy.copy_to_host(), want)
    replay()  # 11th
    stream.synchronize()
    assert dy.copy_to_host().view(np.uint32)[0] != want.view(np.uint32)[0]


def test_half_work_after_warmup_leaves_second_half_unwritten_on_4th_launch():
    base = Variant("fp16", 16, 4, "cs", "cs", 256, "stride4")
    n = 1_000_003
    x = random_bits(n, "fp16", seed=3)
    want = reference_relu(x, "fp16")
    dx, dy = cuda.to_device(x), cuda.device_array(n, np.float16)
    launch = _adv("half3", base)
    for _ in range(3):
        dy.copy_to_device(_poison(n, "fp16"))
        launch(dx, dy, n, 0)
        assert not _first_bad(dy.copy_to_host(), want), "wrong during warm-up"
    dy.copy_to_device(_poison(n, "fp16"))
    launch(dx, dy, n, 0)
    got = dy.copy_to_host()
    half = n // 2 - (n // 2) % 8
    assert not _first_bad(got[:half], want[:half])
    assert (got[half:].view(np.uint8) == POISON).all(), "second half was written"


def test_persisting_window_sets_the_stream_attribute():
    from cuda.bindings import driver as cu
    from sweeper_kernels.adversarial import stream_window

    base = Variant("int8", 16, 2, "default", "default", 256, "onepass")
    n = 8 << 20
    x = random_bits(n, "int8", seed=4)
    dx, dy = cuda.to_device(x), cuda.device_array(n, np.int8)
    stream = cuda.stream()
    assert stream_window(stream)[1] == 0  # a fresh stream has no window
    try:
        _adv("persist", base)(dx, dy, n, stream)
        stream.synchronize()
        ptr, nbytes, hit = stream_window(stream)
        assert ptr == dx.device_ctypes_pointer.value and nbytes == n and hit == 1.0
        assert not _first_bad(dy.copy_to_host(), reference_relu(x, "int8"))
        err, limit = cu.cuCtxGetLimit(cu.CUlimit.CU_LIMIT_PERSISTING_L2_CACHE_SIZE)
        assert err == cu.CUresult.CUDA_SUCCESS and limit > 0
    finally:  # leave no persisting state for later tests
        cu.cuCtxResetPersistingL2Cache()
        cu.cuCtxSetLimit(cu.CUlimit.CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 0)


@pytest.mark.parametrize("kind, k", [("onein2", 2), ("onein4", 4)])
def test_one_call_in_k_works_only_on_every_kth_launch_also_under_graph_replay(kind, k):
    base = Variant("fp32", 16, 2, "default", "cs", 256, "onepass")
    x = random_bits(10_003, "fp32", seed=5)
    want = reference_relu(x, "fp32")
    dx, dy = cuda.to_device(x), cuda.to_device(_poison(x.size, "fp32"))
    launch = _adv(kind, base)
    stream = cuda.stream()
    launch(dx, dy, x.size, stream)  # 1st launch: works (allocates the counter, compiles)
    stream.synchronize()
    assert not _first_bad(dy.copy_to_host(), want)
    replay = _capture(stream, lambda: launch(dx, dy, x.size, stream))
    for i in range(1, 2 * k + 1):
        dy.copy_to_device(_poison(x.size, "fp32"))
        replay()
        stream.synchronize()
        got = dy.copy_to_host()
        if i % k == 0:
            assert not _first_bad(got, want), i
        else:
            assert (got.view(np.uint8) == POISON).all(), f"launch {i + 1} wrote its output"
    assert launch.launches_seen() == 2 * k + 1


def test_skip_when_right_skips_while_the_probed_words_are_right_also_under_graph_replay():
    base = Variant("fp16", 16, 4, "cs", "cs", 256, "stride4")
    n = 100_001
    x = random_bits(n, "fp16", seed=6)
    dx, dy = cuda.to_device(x), cuda.to_device(_poison(n, "fp16"))
    launch = _adv("skipright", base)
    stream = cuda.stream()
    launch(dx, dy, n, stream)  # poisoned output: the probe fails and the work is done
    stream.synchronize()
    assert not _first_bad(dy.copy_to_host(), reference_relu(x, "fp16"))
    replay = _capture(stream, lambda: launch(dx, dy, n, stream))
    x2 = x.copy()
    x2[1000:1010] = np.float16(1.5)  # away from the probed words: skipped, output stale
    dx.copy_to_device(x2)
    replay()
    stream.synchronize()
    got = dy.copy_to_host()
    assert not _first_bad(got, reference_relu(x, "fp16")), "the work was done"
    x2[0] = np.float16(2.5)  # a probed word: the work is done
    dx.copy_to_device(x2)
    replay()
    stream.synchronize()
    assert not _first_bad(dy.copy_to_host(), reference_relu(x2, "fp16"))


def test_fixed32_max_relu_is_the_integer_relu_on_every_fp32_word():
    """The fp32 "fixed32" kernels compute ReLU as max.f32 (CompileKey.relu_form): over all 2**32
    bit patterns the floor config's output equals, bit for bit, that of its flat32 twin, which
    computes the integer formula (NaN and -0 to +0, denormals and +inf kept)."""
    from numba import uint32

    n = 1 << 32
    fixed = Variant.parse("fp32-v16-u2-ld.def-st.def-b128-fixed32")
    bits = Variant.parse("fp32-v16-u2-ld.def-st.def-b128-flat32")
    assert fixed.compile_key.relu_form == "max" and bits.compile_key.relu_form == "bits"

    @cuda.jit
    def every_word(x):
        i = cuda.grid(1)
        while i < n:
            x[i] = uint32(i)
            i += cuda.gridsize(1)

    @cuda.jit
    def differ(a, b, out):
        i = cuda.grid(1)
        while i < n:
            if a[i] != b[i]:
                cuda.atomic.add(out, 0, 1)
            i += cuda.gridsize(1)

    words = storage_dtype("fp32")
    x, a, b = (cuda.device_array(n, words) for _ in range(3))
    every_word[4096, 256](x.view(np.uint32))
    get_launcher(fixed)(x, a, n, 0)
    get_launcher(bits)(x, b, n, 0)
    count = cuda.to_device(np.zeros(1, np.int64))
    differ[4096, 256](a.view(np.uint32), b.view(np.uint32), count)
    words_at = a.view(np.uint32)
    probes = {0x80000000: 0, 0x7FC00000: 0, 0xFFC00000: 0, 1: 1, 0x7F800000: 0x7F800000, 0: 0}
    got = {w: int(words_at[w : w + 1].copy_to_host()[0]) for w in probes}
    assert int(count.copy_to_host()[0]) == 0
    assert got == probes
    del x, a, b
