"""GPU probe: is a side's speed tied to its buffers? And do other launch shapes help at small sizes?

    python3 scripts/probe_bias.py --policy results/h200/hot-2/policy.json --out $OUT

1. Self-pairs: the same kernel on the A buffers vs on the B buffers (ABBA, hot). A ratio away
   from 1.0 beyond its CI means buffer placement, not the kernel, moves the number.
2. Export vs Numba both ways round (export on A vs Numba on B, then swapped): verify's parity
   check uses one orientation only.
3. Small sizes: torch vs torch (A vs B), and extended-grid launch shapes vs torch.
Writes probe_bias.csv; prints a table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import probe_common  # noqa: E402
from probe_common import write_csv  # noqa: E402

MiB = 1 << 20
ITEM = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1}


def n_for(dtype: str, ws_mib: float) -> int:
    e = ITEM[dtype]
    return int(ws_mib * MiB / (2 * e)) // 16 * 16


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", required=True)
    ap.add_argument("--out", default=".")
    a = ap.parse_args()

    from sweeper_kernels import Variant, get_launcher

    from sweeper.executor import GpuExecutor
    from sweeper.verify import build_exported_launchers

    ex = GpuExecutor(stopping=None)
    header = Path(a.policy).parent / "relu_policy.cuh"
    exported = build_exported_launchers(header)
    rows = []

    def numba_on(variant, b, n, side):
        launch = get_launcher(variant)
        x, y = (b.x_a, b.y_a) if side == "A" else (b.x_b, b.y_b)
        return lambda s: launch(x, y, n, s)

    def export_on(dtype, b, n, side):
        return probe_common.export_on(exported, dtype, b, n)(side)

    def torch_on(dtype, b, n, side):
        from sweeper.executor import _as_torch

        torch = ex.torch
        x, y = (b.x_a, b.y_a) if side == "A" else (b.x_b, b.y_b)
        tx, ty = _as_torch(torch, x, dtype), _as_torch(torch, y, dtype)

        def launch(s):
            with torch.cuda.stream(ex.torch_stream):
                torch.clamp_min(tx, 0, out=ty)

        return launch

    def pair(what, dtype, n, config, a_launch, b_launch):
        b = ex._bufs(dtype, n)
        ex.bench.reset_persisting()
        r = ex._pair("hot", a_launch, b_launch, b, (dtype, n), ex.stopping).summary()
        row = {
            "what": what,
            "dtype": dtype,
            "ws_mib": round(2 * n * ITEM[dtype] / MiB, 3),
            "config": config,
            "a_us": r["time_us"],
            "b_us": r["base_time_us"],
            "b_over_a": r["ratio"],
            "lo": r["ratio_lo"],
            "hi": r["ratio_hi"],
        }
        rows.append(row)
        print(
            f"{what:28s} {dtype} {row['ws_mib']:8.3f} MiB {config:36s} "
            f"{r['time_us']:8.3f} {r['base_time_us']:8.3f}  B/A {r['ratio']:.3f} "
            f"[{r['ratio_lo']:.3f}, {r['ratio_hi']:.3f}]",
            flush=True,
        )

    big = [
        ("fp32", "v16-u8-ld.L2el-st.cs-b256-onepass", 22.5),
        ("fp32", "v16-u8-ld.L2el-st.cs-b256-onepass", 24.375),
        ("int8", "v8-u4-ld.def-st.def-b128-onepass", 20.625),
        ("fp32", "v16-u4-ld.L2el-st.cs-b256-stride4", 45.0),
        ("fp16", "v16-u2-ld.L2el-st.cs-b128-stride4", 22.5),
    ]
    for dtype, config, ws in big:
        n = n_for(dtype, ws)
        v = Variant.parse(f"{dtype}-{config}")
        b = ex._bufs(dtype, n)
        pair("numba A vs numba B", dtype, n, config, numba_on(v, b, n, "A"), numba_on(v, b, n, "B"))
        pair(
            "export A vs numba B",
            dtype,
            n,
            config,
            export_on(dtype, b, n, "A"),
            numba_on(v, b, n, "B"),
        )
        pair(
            "numba A vs export B",
            dtype,
            n,
            config,
            numba_on(v, b, n, "A"),
            export_on(dtype, b, n, "B"),
        )
        ex.release(dtype, n)

    small = [("fp32", 0.0625), ("fp32", 2.0), ("fp16", 1.78), ("int8", 0.9)]
    shapes = [
        (16, 1, "L2::evict_last", "cs", 256, "onepass"),
        (16, 1, "default", "default", 128, "onepass"),
        (16, 1, "default", "default", 1024, "onepass"),
        (16, 2, "default", "default", 256, "stride1"),
        (16, 1, "default", "default", 256, "stride2"),
        (8, 1, "default", "default", 128, "onepass"),
        (16, 4, "default", "default", 128, "onepass"),
        (4, 1, "default", "default", 256, "onepass"),
    ]
    for dtype, ws in small:
        n = n_for(dtype, ws)
        b = ex._bufs(dtype, n)
        pair(
            "torch A vs torch B",
            dtype,
            n,
            "torch",
            torch_on(dtype, b, n, "A"),
            torch_on(dtype, b, n, "B"),
        )
        for vec, u, ld, st, block, grid in shapes:
            v = Variant(dtype, vec, u, ld, st, block, grid)
            pair(
                "numba A vs torch B",
                dtype,
                n,
                v.config,
                numba_on(v, b, n, "A"),
                torch_on(dtype, b, n, "B"),
            )
        ex.release(dtype, n)

    write_csv(rows, Path(a.out) / "probe_bias.csv")


if __name__ == "__main__":
    main()
