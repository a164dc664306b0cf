"""Cross-check sweeper's cold timer against NVIDIA's nvbench (the `cuda-bench` package) on one
kernel at a few working sets, on a GPU:

    python tools/nvbench_cold.py --sizes 4,8,48,256 --out nvbench_cold.json

nvbench times the kernel cold (its L2 flush, its blocking kernel; "GPU Time" is the mean of
its cold samples). sweeper's Bench times the same launcher on the same buffers (one
allocation per size, shared by every pass) in cold mode, as a run does (time_pair_blocked:
the flush queued before each call behind the blocking kernel), once before nvbench and once
after it. Before anything is timed the GPU runs the
kernel for `--warmup-s` seconds, so no first size meets an idle GPU's clocks: nvbench warms up
each of its states, and a run times its ceiling and then cell after cell. The table gives the
mean per-call time of each and their ratio per sweeper pass; the JSON holds every figure.
tests/gpu/test_nvbench_gpu.py runs this script and checks the agreement docs/methodology.md
states."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import numpy as np

from sweeper.units import MiB

CONFIG = "v16-u1-ld.def-st.cs-b512-flat"  # 16-byte vectors, default loads, streaming stores


def buffers(sizes: list[int]) -> dict[int, tuple]:
    """ws bytes -> (x, y) on the device: fp32 input and output of ws / 2 bytes each."""
    from numba import cuda

    out = {}
    for ws in sizes:
        x = cuda.to_device(np.linspace(-1, 1, ws // 8, dtype=np.float32))
        out[ws] = (x, cuda.device_array_like(x))
    return out


def nvbench_means(launcher, sizes: list[int], bufs: dict | None = None) -> dict[int, float]:
    """ws bytes -> nvbench's cold GPU mean in us, fp32, on `bufs` (allocated here if None)."""
    import cuda.bench as bench
    from numba import cuda

    bufs = bufs or buffers(sizes)

    def relu(state):
        ws = state.get_int64("ws")
        n = ws // 8
        x, y = bufs[ws]
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


def sweeper_means(launcher, sizes: list[int], bufs: dict | None = None) -> dict[int, dict]:
    """ws bytes -> sweeper's cold samples of the same launcher (mean and median, us), on
    `bufs` (allocated here if None)."""
    from sweeper.run.timers import Bench
    from sweeper.stats import Stopping

    b = Bench()
    stop = Stopping(min_samples=64, max_samples=256, rel_tol=0.005, time_cap_s=4.0)
    bufs = bufs or buffers(sizes)
    out = {}
    for ws in sizes:
        n = ws // 8
        x, y = bufs[ws]

        def launch(s, x=x, y=y, n=n):
            launcher(x, y, n, s)

        t = b.time_pair_blocked(launch, launch, stop, mode="cold")
        us = np.concatenate([t.a_us, t.b_us])
        out[ws] = {"mean_us": float(us.mean()), "median_us": float(np.median(us)), "n": us.size}
    return out


def warm_up(launcher, ws: int, seconds: float) -> int:
    """Run the kernel back to back for `seconds` of wall time; the number of calls made."""
    import time

    from numba import cuda

    n = ws // 8
    x = cuda.to_device(np.linspace(-1, 1, n, dtype=np.float32))
    y = cuda.device_array_like(x)
    stream = cuda.default_stream()
    calls = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(64):
            launcher(x, y, n, stream)
        cuda.synchronize()
        calls += 64
    return calls


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="4,8,48,256", help="working sets in MiB")
    ap.add_argument("--config", default=CONFIG, help="the fp32 grid config timed")
    ap.add_argument("--out", default=None, help="write every figure to this JSON file")
    ap.add_argument(
        "--warmup-s", type=float, default=1.0, help="seconds of back-to-back calls first"
    )
    args = ap.parse_args(argv)
    from sweeper_kernels import Variant, get_launcher

    sizes = [int(float(s) * MiB) for s in args.sizes.split(",")]
    launcher = get_launcher(Variant.parse(f"fp32-{args.config}"))
    warm_calls = warm_up(launcher, max(sizes), args.warmup_s) if args.warmup_s > 0 else 0
    # One allocation per size, timed by all three passes: the same kernel measured up to 4%
    # apart on two buffer sets at small sizes (hot; docs/methodology.md, "Guards"), so separate
    # allocations could compare placements as well as timers.
    bufs = buffers(sizes)
    before = sweeper_means(launcher, sizes, bufs)
    theirs = nvbench_means(launcher, sizes, bufs)
    after = sweeper_means(launcher, sizes, bufs)
    rows = []
    for ws in sizes:
        nvb = theirs.get(ws)
        row = {"ws_bytes": ws, "nvbench_us": nvb}
        for tag, ours in (("before", before), ("after", after)):
            row[f"sweeper_{tag}_us"] = ours[ws]["mean_us"]
            row[f"sweeper_{tag}_median_us"] = ours[ws]["median_us"]
            row[f"sweeper_{tag}_samples"] = ours[ws]["n"]
            row[f"sweeper_{tag}_vs_nvbench"] = ours[ws]["mean_us"] / nvb if nvb else None
        rows.append(row)
    doc = {
        "config": f"fp32-{args.config}",
        "stat": "mean of cold samples",
        "warmup": {"seconds": args.warmup_s, "calls": warm_calls, "ws_bytes": max(sizes)},
        "sweeper_passes": ["before", "after"],
        "rows": rows,
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)
    nan = float("nan")
    print(f"{'ws MiB':>8} {'nvbench us':>11} {'sweeper us':>17} {'ratio':>13}")
    print(f"{'':>8} {'':>11} {'before':>8} {'after':>8} {'before':>6} {'after':>6}")
    for r in rows:
        rb, ra = r["sweeper_before_vs_nvbench"], r["sweeper_after_vs_nvbench"]
        print(
            f"{r['ws_bytes'] / MiB:>8g} {r['nvbench_us'] or nan:>11.3f} "
            f"{r['sweeper_before_us']:>8.3f} {r['sweeper_after_us']:>8.3f} "
            f"{rb if rb is not None else nan:>6.3f} {ra if ra is not None else nan:>6.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
