"""GPU probe (session 4): fp32 flat-kernel layouts at 8-15 MiB, torch's own launch shape,
and the int8 export-vs-Numba parity gap, in one process on the H200.

    python3 scripts/probe_layouts.py --policy results/h200/hot-8/policy.json --out $OUT

1. Writes nvcc's version, torch's version and torch's clamp_min kernel (name, grid, block,
   registers; from torch.profiler) per dtype at three sizes to $OUT/torch_kernels.txt.
2. Times, at hot-8's fp32 sizes in [8, 15] MiB, each probe kernel of probe_layouts.cu, three
   Numba variants, the policy's export, and torch itself against torch (the run's hot
   harness: ABBA, buffer sets swapped between halves, outputs poisoned and checked
   bit-exactly). Torch against torch is the null: its ratio is what "no difference" reads as.
3. Parity: the export and the Numba variant it dispatches to, int8 at 28-32 MiB, timed against
   each other with each in the a role once; plus the device's SASS of both kernels
   ($OUT/sass_*.txt, cuobjdump).
Writes probe_layouts.csv; prints one line per pair.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import probe_common  # noqa: E402
from probe_common import c_side, write_csv  # noqa: E402

DT = {"fp32": 0, "fp16": 1, "bf16": 2, "int8": 3}
ITEM = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1}
# which -> description; keep in step with launch() in probe_layouts.cu
KERNELS = {
    0: "cu u1 b128 strided i32",
    1: "cu u1 b128 strided i64",
    2: "cu u2 b128 strided i32",
    3: "cu u2 b128 strided i64",
    4: "cu u2 b128 adjacent i32",
    5: "cu u1 b256 i32",
    6: "cu u1 b512 i32",
    7: "cu u1 b1024 i32",
    8: "cu u4 b128 strided i32",
    9: "cu u2 b256 strided i32",
    10: "cu u1 b64 i32",
    11: "cu u4 b128 adjacent i32",
}
NUMBA = ["v16-u1-ld.def-st.def-b128-flat", "v16-u1-ld.def-st.def-b256-flat",
         "v16-u2-ld.def-st.def-b128-flat", "v16-u4-ld.def-st.def-b128-flat"]  # fmt: skip
FP32_NS = [1048576, 1109980, 1248724, 1387472, 1734340, 1966080]  # hot-8's 8.0 .. 15.0 MiB
INT8_NS = [14745600, 15728640, 16654336]  # 28.1, 30.0, 31.8 MiB
PARITY_CONFIG = "v16-u2-ld.def-st.cs-b128-flat"


def sh(cmd: list[str]) -> str:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        return r.stdout + r.stderr
    except (OSError, subprocess.SubprocessError) as e:
        return f"{cmd[0]}: {e}"


def torch_kernels(ex, out: Path) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from sweeper.verify import find_nvcc

    lines = [sh([find_nvcc() or "nvcc", "--version"]).strip(), f"torch {torch.__version__}"]
    sizes = {"8.47MiB": 8.47, "13.23MiB": 13.23, "37.5MiB": 37.5}
    for dt, tdt in [("fp32", torch.float32), ("fp16", torch.float16),
                    ("bf16", torch.bfloat16), ("int8", torch.int8)]:  # fmt: skip
        for label, mib in sizes.items():
            n = int(mib * 2**20 / (2 * ITEM[dt])) // 64 * 64
            x = torch.randn(n, device="cuda").to(tdt) if dt != "int8" else torch.randint(
                -100, 100, (n,), device="cuda", dtype=tdt)  # fmt: skip
            y = torch.empty_like(x)
            torch.clamp_min(x, 0, out=y)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                torch.clamp_min(x, 0, out=y)
                torch.cuda.synchronize()
            trace = out / f"trace_{dt}_{label}.json"
            prof.export_chrome_trace(str(trace))
            ev = [e for e in json.loads(trace.read_text())["traceEvents"]
                  if e.get("cat") == "kernel"]  # fmt: skip
            for e in ev:
                a = e.get("args", {})
                lines.append(f"{dt} {label} n={n}: grid {a.get('grid')} block {a.get('block')} "
                             f"regs {a.get('registers per thread')} {e['dur']} us  {e['name'][:240]}")  # fmt: skip
            trace.unlink()
    (out / "torch_kernels.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


def sass(ex, header_dir: Path, out: Path) -> None:
    """The device's SASS of the Numba kernel and of the exported header's library."""
    from sweeper_kernels import Variant
    from sweeper_kernels.build import get_kernel

    from sweeper.verify import build_library, find_nvcc

    k = get_kernel(Variant.parse(f"int8-{PARITY_CONFIG}"))
    ov = next(iter(k.overloads.values()))
    cubin = out / "numba_int8_parity.cubin"
    code = ov.library.get_cubin()
    cubin.write_bytes(getattr(code, "code", code))  # cuda.core ObjectCode or bytes
    cuobjdump = str(Path(find_nvcc() or "nvcc").with_name("cuobjdump"))
    (out / "sass_numba.txt").write_text(sh([cuobjdump, "-sass", str(cubin)]))
    lib = build_library(header_dir / "relu_policy.cuh")
    (out / "sass_export.txt").write_text(sh([cuobjdump, "-sass", str(lib)]))
    print(f"SASS written ({cuobjdump})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", required=True)
    ap.add_argument("--out", default=".")
    ap.add_argument("--parity-only", action="store_true",
                    help="only the export/Numba u2 parity pairs (hot-9's parity failures)")  # fmt: skip
    a = ap.parse_args()
    from sweeper_kernels import Variant, get_launcher

    from sweeper.executor import GpuExecutor
    from sweeper.verify import build_exported_launchers, device_arch, find_nvcc

    out = Path(a.out)
    header_dir = Path(a.policy).parent
    ex = GpuExecutor(stopping=None)
    for step in () if a.parity_only else (torch_kernels, sass):
        try:
            step(ex, out) if step is torch_kernels else step(ex, header_dir, out)
        except Exception as e:  # the timing below must still run
            print(f"{step.__name__} failed: {e!r}", flush=True)

    lib_path = Path("/tmp/probe_layouts.so")
    subprocess.run([find_nvcc(), "-std=c++17", "-O3", "-shared", "-Xcompiler", "-fPIC",
                    "-gencode", f"arch=compute_{device_arch()},code=sm_{device_arch()}",
                    "-I", str(header_dir), str(Path(__file__).with_suffix(".cu")),
                    "-o", str(lib_path)], check=True)  # fmt: skip
    lib = ctypes.CDLL(str(lib_path))
    lib.probe_launch.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64,
                                 ctypes.c_longlong, ctypes.c_void_p]  # fmt: skip
    lib.probe_launch.restype = ctypes.c_int
    exported = build_exported_launchers(header_dir / "relu_policy.cuh")
    rows = []

    def probe_on(which, dtype, b, n):
        nvec = n * ITEM[dtype] // 16
        return c_side(
            b, lambda xp, yp, h: lib.probe_launch(which, DT[dtype], xp, yp, nvec, h),
            f"probe kernel {which}",
        )  # fmt: skip

    def export_on(dtype, b, n):
        return probe_common.export_on(exported, dtype, b, n)

    def numba_on(config, dtype, b, n):
        launcher = get_launcher(Variant.parse(f"{dtype}-{config}"))
        return lambda side: ex._candidate_launch(launcher, b, n, side)

    def torch_on(dtype, b, n):
        return lambda side: ex._baseline_launch(dtype, b, n, side)

    def pair(dtype, n, name, a_on, b_on, b_name="torch"):
        b = ex._bufs(dtype, n)
        ex.bench.reset_persisting()
        res = ex._pair_swapped("hot", a_on, b_on, b, (dtype, n), ex.stopping, check=True)
        r = res.timing.summary()
        row = {"dtype": dtype, "n": n, "ws_mib": round(2 * n * ITEM[dtype] / 2**20, 3),
               "a": name, "b": b_name, "a_us": r["time_us"], "b_us": r["base_time_us"],
               "b_over_a": r["ratio"], "lo": r["ratio_lo"], "hi": r["ratio_hi"],
               "bit_exact": res.bad == 0}  # fmt: skip
        rows.append(row)
        print(f"{dtype} {row['ws_mib']:7.2f} MiB {name:34s} vs {b_name:14s} {r['time_us']:7.3f} us "
              f"{r['ratio']:.3f}x [{r['ratio_lo']:.3f}, {r['ratio_hi']:.3f}]"
              f"{'' if res.bad == 0 else '  WRONG'}", flush=True)  # fmt: skip

    if a.parity_only:
        # hot-9 verify: the u2 flat export 5-8% slower than its Numba twin (fp16/bf16 19-25 MiB,
        # int8 11-18 MiB); every U=1 config within 1%. Both roles, plus torch's shape in CUDA C.
        for dtype, n in [("fp16", 5406720), ("fp16", 5898240), ("bf16", 5898240),
                         ("int8", 8847360)]:  # fmt: skip
            b = ex._bufs(dtype, n)
            e_on, n_on = export_on(dtype, b, n), numba_on(PARITY_CONFIG, dtype, b, n)
            pair(dtype, n, "export", e_on, n_on, "numba")
            pair(dtype, n, "numba", n_on, e_on, "export")
            pair(dtype, n, "cu u2 b128 strided i32", probe_on(2, dtype, b, n), n_on, "numba")
            pair(dtype, n, "cu u2 b128 strided i64", probe_on(3, dtype, b, n), n_on, "numba")
            ex.release(dtype, n)
        write_csv(rows, out / "probe_layouts.csv")
        return

    # Phase 0: the side-a bias. Null pairings (a kernel against itself) and the int8 parity
    # pair in both roles, with the hot timer's hold (the fix) and without it (the old timer).
    from sweeper.measure import Bench

    def use_hold(hold: bool) -> None:
        ex.bench.time_pair_hot = lambda *p, **k: Bench.time_pair_hot(ex.bench, *p, hold=hold, **k)

    for hold in (False, True):
        use_hold(hold)
        tag = "hold" if hold else "nohold"
        for n in FP32_NS:
            b = ex._bufs("fp32", n)
            c = NUMBA[2]
            pair("fp32", n, f"[{tag}] torch", torch_on("fp32", b, n), torch_on("fp32", b, n))
            pair("fp32", n, f"[{tag}] numba u2 b128", numba_on(c, "fp32", b, n),
                 numba_on(c, "fp32", b, n), f"[{tag}] itself")  # fmt: skip
            ex.release("fp32", n)
        for n in INT8_NS:
            b = ex._bufs("int8", n)
            e_on, n_on = export_on("int8", b, n), numba_on(PARITY_CONFIG, "int8", b, n)
            pair("int8", n, f"[{tag}] export", e_on, n_on, "numba")
            pair("int8", n, f"[{tag}] numba", n_on, e_on, "export")
            ex.release("int8", n)
    use_hold(True)

    for n in FP32_NS:
        b = ex._bufs("fp32", n)
        pair("fp32", n, "torch (null)", torch_on("fp32", b, n), torch_on("fp32", b, n))
        pair("fp32", n, "policy export", export_on("fp32", b, n), torch_on("fp32", b, n))
        for c in NUMBA:
            pair("fp32", n, "numba " + c, numba_on(c, "fp32", b, n), torch_on("fp32", b, n))
        for w, name in KERNELS.items():
            pair("fp32", n, name, probe_on(w, "fp32", b, n), torch_on("fp32", b, n))
        ex.release("fp32", n)
    for n in INT8_NS:
        b = ex._bufs("int8", n)
        e_on, n_on = export_on("int8", b, n), numba_on(PARITY_CONFIG, "int8", b, n)
        pair("int8", n, "export", e_on, torch_on("int8", b, n))
        pair("int8", n, "numba", n_on, torch_on("int8", b, n))
        pair("int8", n, "cu u2 b128 strided i32", probe_on(2, "int8", b, n), n_on, "numba")
        ex.release("int8", n)
    write_csv(rows, out / "probe_layouts.csv")


if __name__ == "__main__":
    main()
