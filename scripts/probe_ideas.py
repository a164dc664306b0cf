"""GPU probe: do the ideas in scripts/probe_ideas.cu move the two unmet H200 targets?

    python3 scripts/probe_ideas.py --policy results/h200/hot-4/policy.json --out $OUT

Each probe kernel is timed against torch (hot mode, the run's harness: ABBA, buffer sets
swapped between halves, output poisoned after warm-up and checked bit-exactly after), and
so is the policy's exported launch_relu at the same size, in the same process. Writes
probe_ideas.csv; prints one line per pair.
"""

from __future__ import annotations

import argparse
import ctypes
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import probe_common  # noqa: E402
from probe_common import c_side, write_csv  # noqa: E402

MiB = 1 << 20
ITEM = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1}
DT = {"fp32": 0, "fp16": 1, "bf16": 2, "int8": 3}
KERNELS = {
    0: "lean v16 b128 ld.def st.def (32-bit index, no loop)",
    1: "lean v16 b128 ld.L2el st.cs (32-bit index, no loop)",
    2: "stride4 u4 b256 ld.L2el st.cs",
    3: "stride4 u4 b256 ld.L2el st.L2el(1.0)",
    4: "stride4 u4 b256 ld.L2el st.L2el(0.5)/L2ef",
    5: "stride4 u4 b256 ld.L2el st.L2el(0.25)/L2ef",
    6: "stride4 u4 b256 ld.L2el st.L2ef(1.0)",
    7: "stride4 u4 b256 ld.L2el(0.75)/L2ef st.cs",
}


def build(header_dir: Path, out: Path) -> Path:
    from sweeper.verify import device_arch, find_nvcc

    arch = device_arch()
    lib = out / "probe_ideas.so"
    cmd = [find_nvcc(), "-std=c++17", "-O3", "-shared", "-Xcompiler", "-fPIC",
           "-gencode", f"arch=compute_{arch},code=sm_{arch}", "-I", str(header_dir),
           str(Path(__file__).with_suffix(".cu")), "-o", str(lib)]  # fmt: skip
    subprocess.run(cmd, check=True)
    return lib


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", required=True)
    ap.add_argument("--out", default=".")
    a = ap.parse_args()
    from numba import cuda

    from sweeper.executor import GpuExecutor
    from sweeper.verify import build_exported_launchers

    out = Path(a.out)
    header_dir = Path(a.policy).parent
    lib = ctypes.CDLL(str(build(header_dir, Path("/tmp"))))
    lib.probe_launch.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64,
                                 ctypes.c_longlong, ctypes.c_int, ctypes.c_void_p]  # fmt: skip
    lib.probe_launch.restype = ctypes.c_int
    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    exported = build_exported_launchers(header_dir / "relu_policy.cuh")
    ex = GpuExecutor(stopping=None)
    rows = []

    def probe_on(which, dtype, b, n):
        return c_side(
            b, lambda xp, yp, h: lib.probe_launch(which, DT[dtype], xp, yp, n, sms, h),
            f"probe kernel {which}",
        )  # fmt: skip

    def export_on(dtype, b, n):
        return probe_common.export_on(exported, dtype, b, n)

    def run(dtype, ws_mib, cases):
        n = int(ws_mib * MiB / (2 * ITEM[dtype])) // 64 * 64
        b = ex._bufs(dtype, n)
        for name, on in [("policy export", export_on(dtype, b, n))] + [
            (KERNELS[w], probe_on(w, dtype, b, n)) for w in cases
        ]:
            ex.bench.reset_persisting()
            res = ex._pair_swapped(
                "hot", on, lambda side: ex._baseline_launch(dtype, b, n, side), b, (dtype, n),
                ex.stopping, check=True,
            )  # fmt: skip
            r = res.timing.summary()
            row = {"dtype": dtype, "ws_mib": round(2 * n * ITEM[dtype] / MiB, 3), "kernel": name,
                   "time_us": r["time_us"], "torch_us": r["base_time_us"], "ratio": r["ratio"],
                   "ratio_lo": r["ratio_lo"], "ratio_hi": r["ratio_hi"],
                   "bit_exact": res.bad == 0}  # fmt: skip
            rows.append(row)
            print(f"{dtype} {row['ws_mib']:8.3f} MiB  {name:52s} {r['time_us']:8.3f} us  "
                  f"vs torch {r['ratio']:.3f}x [{r['ratio_lo']:.3f}, {r['ratio_hi']:.3f}]"
                  f"{'' if res.bad == 0 else '  WRONG'}", flush=True)  # fmt: skip
        ex.release(dtype, n)

    for dtype, ws in [("fp32", 0.0625), ("fp32", 0.5), ("fp32", 2.0), ("fp32", 4.34),
                      ("fp16", 1.78), ("int8", 0.9)]:  # fmt: skip
        run(dtype, ws, [0, 1])
    for dtype in ("fp32", "fp16"):
        for ws in (37.5, 41.25, 45.0, 48.75, 52.5):
            run(dtype, ws, [2, 3, 4, 5, 6, 7])
    write_csv(rows, out / "probe_ideas.csv")


if __name__ == "__main__":
    main()
