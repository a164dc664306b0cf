"""Verify an exported policy on a GPU: build the CUDA header, check it bit-exact, time it.

`build_exported_launchers(header)` compiles the header (through its extern "C" API) into a
shared library with nvcc, cached by content hash, and returns one callable per dtype,
`launch(x_ptr, y_ptr, n, stream_handle)`, that only enqueues work (no sync, no allocation),
so it can be captured into a CUDA graph. This exercises the real `launch_relu` dispatch,
device-property cache and alignment fallback of the header, not a re-implementation.

Only this module (and only inside functions) touches numba.cuda.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from sweeper_kernels.toolkit import find_tool

from sweeper.dtypes import DTYPES, ITEMSIZE, bits_view
from sweeper.errors import NoGPUError, SweeperError
from sweeper.export.verdict import timing_verdict
from sweeper.slices import slice_sizes

Launcher = Callable[[int, int, int, int], None]
TAIL_NS = (1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 33, 255, 4097, 65537, 1000003)
POISON = 0xA5
# Before timing pass p (p = 1, 2, ...) verify holds p * SPACER_BYTES of device memory, so most
# of that pass's buffers land at other addresses than the previous pass's (not all: the
# allocator may put the spacer in a hole; on the H200, 479 of 522 sizes moved).
SPACER_BYTES = 7 * 2**20


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


def nvcc_flags(arch: str, *output: str) -> list[str]:
    """nvcc's flags for the header as verify builds it (language, optimisation, target), with
    `output`'s flags (what to build) in between; sweeper.export.sass builds its cubin so."""
    return ["-std=c++17", "-O3", *output, "-gencode", f"arch=compute_{arch},code=sm_{arch}"]


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


def exported_on(fn: Launcher, b, n: int) -> Callable:
    """side -> a launch on a stream of the exported `fn` on buffer set `side` ("A" or "B") of
    `b` (GpuExecutor's buffers), as verify times it."""
    from sweeper.run.executor import _ptr

    def on(side: str):
        x, y, _ = b.side(side)
        xp, yp = _ptr(x), _ptr(y)
        return lambda s: fn(xp, yp, n, int(s.handle))

    return on


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


# ---- bit-exactness ---------------------------------------------------------------------------


def special_bits(dtype: str) -> np.ndarray:
    """Signed zeros, denormals, normals, infinities, NaNs (both signs, quiet and signalling)."""
    if dtype == "fp32":
        v = [0, 0x80000000, 1, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00800000, 0x3F800000,
             0xBF800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7F800001,
             0x7FC00000, 0xFFC00000, 0x7FFFFFFF, 0xFFFFFFFF]  # fmt: skip
    elif dtype == "fp16":
        v = [0, 0x8000, 1, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF, 0x7C00,
             0xFC00, 0x7C01, 0x7E00, 0xFE00, 0x7FFF, 0xFFFF]  # fmt: skip
    elif dtype == "bf16":
        v = [0, 0x8000, 1, 0x8001, 0x007F, 0x0080, 0x3F80, 0xBF80, 0x7F7F, 0xFF7F, 0x7F80,
             0xFF80, 0x7F81, 0x7FC0, 0xFFC0, 0x7FFF, 0xFFFF]  # fmt: skip
    else:
        v = [0, 1, 0x7F, 0x80, 0x81, 0xFF, 0x40, 0xC0]
    return np.array(v, dtype=bits_view(dtype))


def independent_reference(dtype: str, bits: np.ndarray) -> np.ndarray:
    """out = x > 0 ? x : +0 on decoded values (NaN -> +0, -0 -> +0), bit patterns in/out."""
    if dtype == "int8":
        x = bits.view(np.int8)
        return np.where(x > 0, x, 0).astype(np.int8).view(np.uint8)
    if dtype == "fp32":
        pos = bits.view(np.float32) > 0
    elif dtype == "fp16":
        pos = bits.view(np.float16) > 0
    else:
        pos = (bits.astype(np.uint32) << 16).view(np.float32) > 0
    return np.where(pos, bits, 0).astype(bits_view(dtype))


def kernels_reference(dtype: str, bits: np.ndarray) -> np.ndarray | None:
    """sweeper_kernels.reference_relu on the same bit patterns, when that package has it."""
    try:
        from sweeper_kernels import reference_relu, storage_dtype
    except ImportError:
        return None
    out = reference_relu(bits.view(storage_dtype(dtype)), dtype)
    return np.asarray(out).view(bits_view(dtype))


def test_input(dtype: str, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed + n)
    sp = special_bits(dtype)
    info = np.iinfo(bits_view(dtype))
    rnd = rng.integers(0, int(info.max) + 1, size=n, dtype=np.uint64).astype(bits_view(dtype))
    rnd[: min(n, sp.size)] = sp[: min(n, sp.size)]
    return rnd


def stream_handle(stream) -> int:
    """The CUstream of a numba stream as an int (ctypes c_void_p or cuda-python CUstream)."""
    h = stream.handle
    v = getattr(h, "value", None)
    return int(v) if v is not None else int(h)


def verify_bits(
    launchers: dict[str, Launcher],
    dtypes: tuple[str, ...] = DTYPES,
    sizes: tuple[int, ...] = TAIL_NS,
    offsets: tuple[int, ...] = (0, 1),
) -> list[dict]:
    """Run each launcher on special values + random bit patterns at tail sizes, aligned and
    offset by one element (the scalar fallback); poisoned outputs with guard elements on both
    sides. Returns one dict per case with 'ok' and, when not ok, where it first differs."""
    from numba import cuda

    if not cuda.is_available():
        raise NoGPUError("no CUDA GPU: verify needs one (the export itself does not)")
    stream = cuda.stream()
    guard = 64
    results = []
    for dt in dtypes:
        st = np.dtype(bits_view(dt))
        for n in sizes:
            x = test_input(dt, n)
            want = independent_reference(dt, x)
            alt = kernels_reference(dt, x)
            for off in offsets:
                total = guard + off + n + guard
                poisoned = np.frombuffer(bytes([POISON]) * (total * x.itemsize), dtype=st)
                host_in = poisoned.copy()
                host_in[guard + off : guard + off + n] = x
                d_in = cuda.to_device(host_in, stream=stream)
                d_out = cuda.to_device(poisoned.copy(), stream=stream)
                start = (guard + off) * ITEMSIZE[dt]
                launchers[dt](
                    d_in.device_ctypes_pointer.value + start,
                    d_out.device_ctypes_pointer.value + start,
                    n,
                    stream_handle(stream),
                )
                got_all = d_out.copy_to_host(stream=stream)
                stream.synchronize()
                got = got_all[guard + off : guard + off + n]
                poison = poisoned[0]
                outside = np.concatenate([got_all[: guard + off], got_all[guard + off + n :]])
                case = {"dtype": dt, "n": n, "offset": off, "ok": True, "detail": ""}
                bad = np.flatnonzero(got != want)
                if bad.size:
                    i = int(bad[0])
                    case.update(
                        ok=False,
                        detail=f"element {i}: in {int(x[i]):#x} got {int(got[i]):#x} "
                        f"want {int(want[i]):#x} ({bad.size} differ)",
                    )
                elif np.any(outside != poison):
                    case.update(ok=False, detail="wrote outside [0, n)")
                elif alt is not None and not np.array_equal(alt, want):
                    case.update(
                        ok=False, detail="sweeper_kernels.reference_relu disagrees with numpy"
                    )
                results.append(case)
    return results


# ---- timing (for the lead to wire to sweeper.run.timers) ------------------------------------------


def verify_timing(
    launchers: dict[str, Launcher],
    select_config,
    sizes: dict[str, list[int]],
    cc: tuple[int, int],
    l2_bytes: int,
    *,
    mode: str = "hot",
    on_row=None,
    passes: int = 1,
) -> list[dict]:
    """Time each exported launcher with the run's harness (sweeper.run.timers), per size:

    * against the Numba variant it dispatches to (ABBA, separate buffers): the export must
      reproduce the Numba measurement (`vs_numba` ratio with CI, 1.0 = identical);
    * against the baseline (torch, or the reference config), as `sweeper run` does;
    and re-check the exported output bit-exactly after the timed loop.
    With `passes` > 1 every size is timed again in each further pass, after all sizes of the
    pass before, with fresh buffers (a spacer of SPACER_BYTES per pass is held first, so most
    land elsewhere): a repeat measurement, for `timing_verdict`. Rows carry their `pass`
    (1..) and `x_addr`, the address of the pass's input buffer.
    `on_row(rows)` is called after every size (verify uses it to keep a partial CSV on disk,
    so an interrupted verify still leaves what it measured).
    """
    from sweeper.run.executor import GpuExecutor

    if passes < 1:
        raise SweeperError(f"passes must be at least 1, got {passes}")
    ex = GpuExecutor(stopping=None)
    rows: list[dict] = []
    for p in range(passes):
        spacer = ex.cuda.device_array(p * SPACER_BYTES, dtype=np.uint8) if p else None
        _time_pass(ex, launchers, select_config, sizes, cc, l2_bytes, mode, p + 1, rows, on_row)
        del spacer
    return rows


def _time_pass(ex, launchers, select_config, sizes, cc, l2_bytes, mode, pass_no, rows, on_row):
    """One timing pass of `verify_timing` over every size, appending to `rows`."""
    from sweeper_kernels import Variant, get_launcher

    from sweeper.run.executor import _ptr

    for dtype, ns in sizes.items():
        for n in ns:
            config, _ = select_config(dtype, n, cc, l2_bytes)
            variant = Variant.parse(f"{dtype}-{config}")
            b = ex._bufs(dtype, n)
            numba_launcher = get_launcher(variant)
            exported = exported_on(launchers[dtype], b, n)

            def numba_side(side, b=b, n=n, launch=numba_launcher):
                x, y, _ = b.side(side)
                return lambda s: launch(x, y, n, s)

            def base_side(side, b=b, n=n, dtype=dtype):
                return ex._baseline_launch(dtype, b, n, side)

            key = (dtype, n)
            ex.bench.reset_persisting()
            vs_numba = ex._pair_swapped(mode, exported, numba_side, b, key, ex.stopping, check=True)
            vs_base = ex._pair_swapped(mode, exported, base_side, b, key, ex.stopping, check=True)
            bad = vs_numba.bad + vs_base.bad
            vs_numba, vs_base = vs_numba.timing.summary(), vs_base.timing.summary()
            ws = 2 * n * ITEMSIZE[dtype]
            rows.append(
                {
                    "pass": pass_no,
                    "mode": mode,
                    "dtype": dtype,
                    "n": n,
                    "ws_bytes": ws,
                    "config": config,
                    "time_us": vs_base["time_us"],
                    "gbps": ws / vs_base["time_us"] / 1e3,
                    "numba_time_us": vs_numba["base_time_us"],
                    "vs_numba": 1 / vs_numba["ratio"],
                    "vs_numba_lo": 1 / vs_numba["ratio_hi"],
                    "vs_numba_hi": 1 / vs_numba["ratio_lo"],
                    "baseline": ex.baseline_name,
                    "ratio": vs_base["ratio"],
                    "ratio_lo": vs_base["ratio_lo"],
                    "ratio_hi": vs_base["ratio_hi"],
                    "bit_exact_after_timing": bad == 0,
                    "x_addr": _ptr(b.x_a),  # where this pass's buffers landed
                }
            )
            if on_row is not None:
                on_row(rows)
            ex.release(dtype, n)


def verify(
    policy_path: str | os.PathLike,
    out_dir: str | os.PathLike | None = None,
    timing: bool = True,
    passes: int = 2,
    ws_range: tuple[int, int] | None = None,
    configs: list[str] | None = None,
    dtypes_only: list[str] | None = None,
) -> dict:
    """Export the policy's header, build it, check bit-exactness on every dtype it covers and
    that the header's dispatch picks what the Python export picks on this device; with
    `timing`, time it at every size of the policy's run in `passes` passes (timing_verdict).
    `ws_range` (bytes of working set), `configs` (patterns of the config the policy dispatches
    to) and `dtypes_only` time only that slice of the sizes, into verify_timing_slice.csv (the
    run's verify_timing.csv stays as it is)."""
    import importlib.util

    from sweeper.analyze.policy import load_any
    from sweeper.export import render

    if passes < 1:
        raise SweeperError(f"--passes must be at least 1, got {passes}")
    doc = load_any(policy_path)
    from sweeper.run.timers import require_gpu

    out_dir = Path(out_dir) if out_dir else Path(policy_path).parent
    header = out_dir / "relu_policy.cuh"
    pyfile = out_dir / "relu_policy.py"
    formats = {header: "cuda", pyfile: "python"}
    texts = {path: render(doc, fmt) for path, fmt in formats.items()}
    for path, text in texts.items():
        if path.exists():  # verify checks this policy's export, never another file
            check_export(path, text, policy_path, formats[path])
    require_gpu()  # before anything is written
    from sweeper.schema import atomic_write_text

    for path, text in texts.items():
        if not path.exists():
            atomic_write_text(path, text)
    launchers = build_exported_launchers(header)
    dtypes = tuple(dt for dt in DTYPES if any(dt in e["dtypes"] for e in doc["entries"]))
    cases = verify_bits(launchers, dtypes)

    from numba import cuda

    dev = cuda.get_current_device()
    cc = dev.compute_capability
    l2 = int(dev.L2_CACHE_SIZE)
    sms = int(dev.MULTIPROCESSOR_COUNT)
    spec = importlib.util.spec_from_file_location("relu_policy_verify", pyfile)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]

    def select_config(dtype: str, n: int, cc, l2_bytes: int):  # this device's SM count
        return mod.select_config(dtype, n, cc, l2_bytes, sms)

    choices = exported_choices(header)
    dispatch = []
    for dt in dtypes:
        for k in range(1, 257):
            n = max(1, int(k / 64 * l2 / (2 * ITEMSIZE[dt])))
            want, _ = select_config(dt, n, cc, l2)
            got = choices[dt](n)
            if got != want:
                dispatch.append({"dtype": dt, "n": n, "header": got, "python": want})
    result = {
        "header": str(header),
        "cases": cases,
        "failed": [c for c in cases if not c["ok"]],
        "dispatch_mismatches": dispatch,
        "device": {"cc": list(cc), "l2_bytes": l2, "sm_count": sms},
        "nvcc": nvcc_version(),
    }
    if timing:
        mode, sizes = run_sizes(Path(policy_path).parent, dtypes, doc)
        name = "verify_timing.csv"
        if ws_range is not None or configs or dtypes_only:
            sizes = slice_sizes(
                sizes,
                dtypes=dtypes_only,
                configs=configs,
                ws_range=ws_range,
                config_of=lambda dt, n: select_config(dt, n, cc, l2)[0],
            )
            name = "verify_timing_slice.csv"
        result["timing_mode"] = mode
        csv_path = out_dir / name
        total = passes * sum(len(v) for v in sizes.values())

        def progress(rows: list[dict]) -> None:
            _write_csv(csv_path, rows)
            if len(rows) % 25 == 0 or len(rows) == total:
                r = rows[-1]
                print(
                    f"verify timing: {len(rows)}/{total} sizes x passes "
                    f"(pass {r['pass']}, {r['dtype']} n={r['n']})",
                    file=sys.stderr,
                    flush=True,
                )

        rows = verify_timing(
            launchers, select_config, sizes, tuple(cc), l2, mode=mode, on_row=progress,
            passes=passes,
        )  # fmt: skip
        result["timing"] = timing_verdict(rows)
        result["timing_csv"] = str(csv_path)
    return result


def check_export(path: Path, text: str, policy_path, fmt: str) -> None:
    """SweeperError in one line unless the file at `path` is `text`, the export of the policy
    at `policy_path` in format `fmt` (the path comment aside, _same_export)."""
    if not _same_export(path.read_text(), text):
        raise SweeperError(
            f"{path} is not the export of {policy_path} (edited, or of another policy); "
            f"`sweeper export {policy_path} --format {fmt} -o {path} --force` rewrites it"
        )


def _same_export(a: str, b: str) -> bool:
    """Two renderings of one policy: equal but for the policy file's path in the header's
    entry comments, which follows how the path was spelled (relative, absolute, ./)."""
    import re

    strip = re.compile(r"(, file ).*$", flags=re.M)
    return strip.sub(r"\1", a) == strip.sub(r"\1", b)


def run_sizes(run_dir: Path, dtypes, doc: dict) -> tuple[str, dict[str, list[int]]]:
    """The mode and the sizes, per dtype, that verify times: those the policy's run measured,
    in hot mode if the run has it, else in the run's first mode (a cold-only run is verified
    cold). Raises when the run measured none of the policy's dtypes."""
    from sweeper.analyze.store import load_run

    try:
        df = load_run(run_dir).results
    except SweeperError as e:  # a merged policy lives outside a run folder
        raise SweeperError(
            f"{run_dir}: timing needs the policy's run folder next to it ({e}); "
            "use --no-timing for a bit-exactness check only"
        ) from None
    base = df[(df.role == "baseline") & df.dtype.isin(list(dtypes))]
    modes = list(dict.fromkeys(base["mode"]))
    if not modes:
        raise SweeperError(
            f"{run_dir}: the run has no baseline measurement for {', '.join(dtypes)}; "
            "use --no-timing for a bit-exactness check only"
        )
    mode = "hot" if "hot" in modes else modes[0]
    base = base[base["mode"] == mode]
    return mode, {dt: sorted(int(n) for n in base[base.dtype == dt].n.unique()) for dt in dtypes}


def _write_csv(path: Path, rows: list[dict]) -> None:
    import csv
    import io

    from sweeper.schema import atomic_write_text

    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    atomic_write_text(path, buf.getvalue())
