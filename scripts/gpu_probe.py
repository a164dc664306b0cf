"""First look at the harness on a real GPU: guards, graph capture, timer checks, torch interop.

Run on the GPU machine (see scripts/device.sh):  python3 scripts/gpu_probe.py --out $OUT
Prints a short table last and writes probe.json under --out.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    from numba import cuda

    from sweeper.measure import Bench, Stopping

    out: dict = {}
    t0 = time.perf_counter()
    bench = Bench()
    out["l2_bytes"] = bench.l2_bytes
    out["persisting_max"] = bench.persisting_max
    bench.reset_persisting()
    out["persisting_after_reset"] = bench.persisting_state()
    stop = Stopping(min_samples=8, max_samples=16, rel_tol=0.005)

    rows = []
    # Timer self-checks.
    empty = bench.empty_launch()
    e_hot = bench.time_hot(empty, stop, calls=100)
    e_blk = bench.time_single_blocked(empty, 20)
    rows.append(("empty", "hot-graph", float(np.median(e_hot))))
    rows.append(("empty", "blocked", float(np.median(e_blk))))
    for us in (2, 10, 100):
        sp = bench.spin_launch(us * 1000)
        h = bench.time_hot(sp, stop, calls=max(2, 2000 // us))
        b = bench.time_single_blocked(sp, 20)
        rows.append((f"spin{us}us", "hot-graph", float(np.median(h))))
        rows.append((f"spin{us}us", "blocked", float(np.median(b))))

    # A plain Numba ReLU vs torch, hot and cold, at a few sizes.
    @cuda.jit
    def relu(x, y):
        i = cuda.grid(1)
        s = cuda.gridsize(1)
        while i < x.size:
            v = x[i]
            y[i] = v if v > 0 else np.float32(0)
            i += s

    import torch

    ts = torch.cuda.ExternalStream(int(bench.stream.handle))
    for ws_mib in (8, 40, 48, 60, 120, 960):
        n = ws_mib * 2**20 // 8
        xa = cuda.to_device(np.random.default_rng(0).standard_normal(n, dtype=np.float32))
        ya = cuda.device_array_like(xa)
        xb = cuda.device_array_like(xa)
        xb.copy_to_device(xa)
        yb = cuda.device_array_like(xa)
        tx, ty = torch.as_tensor(xb, device="cuda"), torch.as_tensor(yb, device="cuda")

        def cand(stream, xa=xa, ya=ya):
            relu[132 * 4, 256, stream](xa, ya)

        def base(stream, tx=tx, ty=ty):
            with torch.cuda.stream(ts):
                torch.clamp_min(tx, 0, out=ty)

        copy_launch = bench.copy(ya, xa, n * 4)

        bench.reset_persisting()
        hot = bench.time_pair_hot(cand, base, stop).summary()
        cold = bench.time_pair_blocked(cand, base, stop, mode="cold").summary()
        cp = bench.time_pair_hot(copy_launch, base, stop).summary()
        ok = np.array_equal(ya.copy_to_host(), np.maximum(xa.copy_to_host(), 0))
        tb = ty.cpu().numpy()
        rows.append((f"relu{ws_mib}MiB", "hot", hot["time_us"], hot["base_time_us"], hot["ratio"]))
        rows.append(
            (f"relu{ws_mib}MiB", "cold", cold["time_us"], cold["base_time_us"], cold["ratio"])
        )
        gb = lambda t, ws=ws_mib: ws * 2**20 / t / 1e3  # noqa: E731
        rows.append((f"copy{ws_mib}MiB", "hot", cp["time_us"], gb(cp["time_us"]), ok))
        out[f"relu{ws_mib}"] = {"hot": hot, "cold": cold, "copy": cp, "ok": bool(ok)}
        del tb
    out["persisting_end"] = bench.persisting_state()
    out["rows"] = rows
    out["wall_s"] = time.perf_counter() - t0
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "probe.json").write_text(json.dumps(out, indent=1, default=str))
    for r in rows:
        print(" | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in r))
    print(f"wall {out['wall_s']:.1f}s")


if __name__ == "__main__":
    main()
