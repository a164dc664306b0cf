"""Cross-check sweeper's cold timer against NVIDIA's nvbench (the `cuda-bench` package) on one
kernel at a few working sets, on a GPU:

    python tools/nvbench_cold.py --sizes 4,8,48,256 --out nvbench_cold.json

nvbench times the kernel cold (its L2 flush, its blocking kernel; "GPU Time" is the mean of
its cold samples). sweeper's Bench times the same launcher on the same buffers in cold mode,
as a run does (time_pair_blocked: the flush queued before each call behind the blocking
kernel). The table gives the mean per-call time of each and their ratio; the JSON holds every
figure. tests/gpu/test_nvbench_gpu.py runs this script and checks the agreement
docs/methodology.md states.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import numpy as np

from sweeper.units import MiB

CONFIG = "v16-u1-ld.def-st.cs-b512-flat"  # 16-byte vectors, default loads, streaming stores


def nvbench_means(launcher, sizes: list[int]) -> dict[int, float]:
    """ws bytes -> nvbench's cold GPU mean in us, fp32."""
    import cuda.bench as bench
    from numba import cuda

    def relu(state):
        ws = state.get_int64("ws")
        n = ws // 8
        x = cuda.to_device(np.linspace(-1, 1, n, dtype=np.float32))
        y = cuda.device_array_like(x)
        state.add_global_memory_reads(n * 4)
        state.add_global_memory_writes(n * 4)
        stream = cuda.external_stream(state.get_stream().addressof())
        launcher(x, y, n, stream)  # compile and load outside any measurement
        cuda.synchronize()
        state.exec(lambda launch: launcher(x, y, n, stream), batched=False)

    bench.register(relu).add_int64_axis("ws", sizes)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "nvbench.json")
        bench.run_all_benchmarks([sys.argv[0], "--json", path, "--devices", "0"])
        with open(path) as f:
            doc = json.load(f)
    out = {}
    for state in doc["benchmarks"][0]["states"]:
        ws = int(next(a["value"] for a in state["axis_values"] if a["name"] == "ws"))
        for s in state["summaries"]:
            if s["tag"] == "nv/cold/time/gpu/mean":
                value = next(d["value"] for d in s["data"] if d["name"] == "value")
                out[ws] = float(value) * 1e6
    return out


def sweeper_means(launcher, sizes: list[int]) -> dict[int, dict]:
    """ws bytes -> sweeper's cold samples of the same launcher (mean and median, us)."""
    from numba import cuda

    from sweeper.run.stats import Stopping
    from sweeper.run.timers import Bench

    b = Bench()
    stop = Stopping(min_samples=64, max_samples=256, rel_tol=0.005, time_cap_s=4.0)
    out = {}
    for ws in sizes:
        n = ws // 8
        x = cuda.to_device(np.linspace(-1, 1, n, dtype=np.float32))
        y = cuda.device_array_like(x)

        def launch(s, x=x, y=y, n=n):
            launcher(x, y, n, s)

        t = b.time_pair_blocked(launch, launch, stop, mode="cold")
        us = np.concatenate([t.a_us, t.b_us])
        out[ws] = {"mean_us": float(us.mean()), "median_us": float(np.median(us)), "n": us.size}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="4,8,48,256", help="working sets in MiB")
    ap.add_argument("--config", default=CONFIG, help="the fp32 grid config timed")
    ap.add_argument("--out", default=None, help="write every figure to this JSON file")
    args = ap.parse_args(argv)
    from sweeper_kernels import Variant, get_launcher

    sizes = [int(float(s) * MiB) for s in args.sizes.split(",")]
    launcher = get_launcher(Variant.parse(f"fp32-{args.config}"))
    ours = sweeper_means(launcher, sizes)
    theirs = nvbench_means(launcher, sizes)
    rows = []
    for ws in sizes:
        nvb = theirs.get(ws)
        rows.append(
            {
                "ws_bytes": ws,
                "nvbench_us": nvb,
                "sweeper_us": ours[ws]["mean_us"],
                "sweeper_median_us": ours[ws]["median_us"],
                "sweeper_samples": ours[ws]["n"],
                "sweeper_vs_nvbench": ours[ws]["mean_us"] / nvb if nvb else None,
            }
        )
    doc = {"config": f"fp32-{args.config}", "stat": "mean of cold samples", "rows": rows}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)
    print(f"{'ws MiB':>8} {'nvbench us':>11} {'sweeper us':>11} {'ratio':>7}")
    for r in rows:
        ratio = r["sweeper_vs_nvbench"]
        print(
            f"{r['ws_bytes'] / MiB:>8g} {r['nvbench_us'] or float('nan'):>11.3f} "
            f"{r['sweeper_us']:>11.3f} {ratio if ratio is not None else float('nan'):>7.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
