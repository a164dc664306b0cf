"""Cold sample time by its slot in a held round, on a GPU:

    python lab/tools/cold_slots.py --out cold_slots.json

Bench.time_pair_blocked queues each [flush][event][call][event] sample alone behind the
blocking kernel (BLOCKED_SAMPLES_PER_HOLD; before aaa7632 eight per hold). This times one fp32
kernel (tools/nvbench_cold.py's) in holds of 8, 2 and 1 samples at 4, 8 and 48 MiB, 512 samples each, and prints the mean of
each slot beside nvbench's cold mean of the same launcher, so a slot's position effect can be
read directly. The GPU runs the kernel for a second first (nvbench_cold.warm_up).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import nvbench_cold  # noqa: E402

from sweeper.units import MiB  # noqa: E402


def slot_means(bench, launch, per_round: int, samples: int = 512) -> list[float]:
    from numba import cuda

    slots: list[list[float]] = [[] for _ in range(per_round)]
    for _ in range(samples // per_round):
        with bench.held(2 * per_round):
            for i in range(per_round):
                bench.flush(bench.stream)
                bench.event(2 * i).record(bench.stream)
                launch(bench.stream)
                bench.event(2 * i + 1).record(bench.stream)
        for i in range(per_round):
            ms = cuda.event_elapsed_time(bench.event(2 * i), bench.event(2 * i + 1))
            slots[i].append(ms * 1e3)
    return [float(np.mean(s)) for s in slots]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="4,8,48", help="working sets in MiB")
    ap.add_argument("--out", default=None, help="write every figure to this JSON file")
    args = ap.parse_args(argv)
    from sweeper_kernels import Variant, get_launcher

    from sweeper.run.timers import Bench

    sizes = [int(float(s) * MiB) for s in args.sizes.split(",")]
    launcher = get_launcher(Variant.parse(f"fp32-{nvbench_cold.CONFIG}"))
    nvbench_cold.warm_up(launcher, 256 * MiB, 1.0)
    bench = Bench()
    bufs = nvbench_cold.buffers(sizes)
    rows = []
    for ws in sizes:
        n = ws // 8
        x, y = bufs[ws]

        def launch(s, x=x, y=y, n=n):
            launcher(x, y, n, s)

        launch(bench.stream)
        bench.sync()
        for k in (8, 2, 1):
            rows.append(
                {"ws_bytes": ws, "per_round": k, "slot_mean_us": slot_means(bench, launch, k)}
            )
    theirs = nvbench_cold.nvbench_means(launcher, sizes)
    for r in rows:
        r["nvbench_us"] = theirs.get(r["ws_bytes"])
    doc = {"config": f"fp32-{nvbench_cold.CONFIG}", "samples": 512, "rows": rows}
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=1))
    print(f"{'ws MiB':>6} {'round':>5} {'nvbench':>8}  slot means (us)")
    for r in rows:
        slots = " ".join(f"{t:6.3f}" for t in r["slot_mean_us"])
        print(
            f"{r['ws_bytes'] / MiB:>6g} {r['per_round']:>5} {r['nvbench_us'] or 0:>8.3f}  {slots}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
