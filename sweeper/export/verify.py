"""The checks of `sweeper verify` that need no timing harness: the exported header's output,
bit for bit, on special values and tail sizes (`verify_bits`, on a GPU); that a file on disk
is the policy's export (`check_export`); and which sizes of the policy's run are timed
(`run_sizes`). sweeper.run.verify runs them and times the header.

Only `verify_bits` (inside the function) touches numba.cuda.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sweeper.dtypes import DTYPES, ITEMSIZE, bits_view
from sweeper.errors import NoGPUError, SweeperError
from sweeper.export.native import Launcher, stream_handle

TAIL_NS = (1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 33, 255, 4097, 65537, 1000003)
POISON = 0xA5


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


def check_export(path: Path, text: str, policy_path, fmt: str) -> None:
    """SweeperError in one line unless the file at `path` is `text`, the export of the policy
    at `policy_path` in format `fmt` (the path comment aside, _same_export)."""
    from sweeper.files import read_text

    if not _same_export(read_text(path), text):
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
