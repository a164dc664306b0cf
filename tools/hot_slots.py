"""Hot mode's order effect, measured with one kernel on both sides, on a GPU:

    python tools/hot_slots.py --out hot_slots.json

A hot pairing times A B B A rounds (Bench.time_pair_hot), each sample an untimed warm-up
replay of its own side followed by the timed graph; the two sides have their own buffers.
With `--sides numba` or `torch` both sides run the same kernel (a Numba config, or torch), so
every ratio should read 1 and every slot the same; `mixed` times the Numba config (A) against
torch (B), as a run's cell does, to show how the warm-up moves a real ratio. Per working set and number of warm-up calls (`--warm`; `auto` is
the default rule, sweeper.run.stats.warm_calls) it makes `--reps` buffer-swapped pairings of
16 samples per side, as a cell does (GpuExecutor._pair_swapped), and prints the median over
them of:

  ratio   the pairing's ratio (side B's time over side A's, as a cell's ratio to the baseline);
  A0/A3   side A's median time in slot 0 (after its own slot, except a half's first round)
          over slot 3 (after side B's slot 2);
  B1/B2   side B's median in slot 1 (after side A) over slot 2 (after itself).

and, per row, the spread of the ratio (5-95% over the pairings).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sweeper.units import MiB  # noqa: E402

CONFIG = "v16-u8-ld.nc-st.cs-b128-flat"  # fp32's band config in hot-6's policy


def slot_ratios(a_us: np.ndarray, b_us: np.ndarray, parts) -> tuple[float, float]:
    """(A0/A3, B1/B2) over the halves: each half's samples are in round order, side A's
    taken in slots 0 and 3 of a round, side B's in slots 1 and 2."""
    a0, a3, b1, b2 = [], [], [], []
    i = 0
    for p in parts or (len(a_us),):
        a, b = a_us[i : i + p], b_us[i : i + p]
        i += p
        a0 += list(a[0::2])
        a3 += list(a[1::2])
        b1 += list(b[0::2])
        b2 += list(b[1::2])
    return float(np.median(a0) / np.median(a3)), float(np.median(b1) / np.median(b2))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="4,8,12,16,20,24,32,40,48,56,64", help="MiB")
    ap.add_argument("--warm", default="1,2,4,8,auto", help="warm-up calls per sample")
    ap.add_argument("--reps", type=int, default=8, help="pairings per size and warm-up")
    ap.add_argument("--sides", default="numba,torch,mixed", help="numba, torch and/or mixed")
    ap.add_argument("--out", default=None, help="write every pairing to this JSON file")
    args = ap.parse_args(argv)

    from sweeper_kernels import Variant, get_launcher

    from sweeper.run.executor import GpuExecutor
    from sweeper.run.stats import Stopping

    stop = Stopping(min_samples=16, max_samples=16, rel_tol=0.0, time_cap_s=30.0)
    ex = GpuExecutor(stopping=stop, baseline="torch" if "torch" in args.sides else "auto")
    launcher = get_launcher(Variant.parse(f"fp32-{CONFIG}"))
    warms = [None if w == "auto" else int(w) for w in args.warm.split(",")]
    rows = []
    for mib in (float(s) for s in args.sizes.split(",")):
        n = int(mib * MiB) // 8 // 64 * 64  # fp32: 8 bytes of working set per element
        b = ex._bufs("fp32", n)
        key = ("fp32", n)
        numba = lambda side, b=b, n=n: ex._candidate_launch(launcher, b, n, side)  # noqa: E731
        torch = lambda side, b=b, n=n: ex._baseline_launch("fp32", b, n, side)  # noqa: E731
        pairs = {"numba": (numba, numba), "torch": (torch, torch), "mixed": (numba, torch)}
        for name in args.sides.split(","):
            a_on, b_on = pairs[name]
            for w in warms:
                ex.hot_warm_calls = w
                for rep in range(args.reps):
                    t = ex._pair_swapped("hot", a_on, b_on, b, key, stop).timing
                    a0a3, b1b2 = slot_ratios(t.a_us, t.b_us, t.parts)
                    rows.append(
                        {
                            "side": name,
                            "ws_mib": mib,
                            "warm": "auto" if w is None else w,
                            "warm_calls": ex._warm_calls(key),
                            "calls": t.calls,
                            "rep": rep,
                            "ratio": float(t.summary()["ratio"]),
                            "a0_a3": a0a3,
                            "b1_b2": b1b2,
                        }
                    )
        ex.release("fp32", n)
    doc = {"config": f"fp32-{CONFIG}", "reps": args.reps, "samples_per_side": 16, "rows": rows}
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=1))
    print(f"{'side':>5} {'ws MiB':>6} {'warm':>4} {'calls':>5} {'ratio':>6} {'5-95%':>13} "
          f"{'A0/A3':>6} {'B1/B2':>6}")  # fmt: skip
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["side"], r["ws_mib"], r["warm"]), []).append(r)
    for (side, mib, w), g in groups.items():
        ratio = np.array([r["ratio"] for r in g])
        lo, hi = np.quantile(ratio, [0.05, 0.95])
        print(
            f"{side:>5} {mib:6.1f} {g[0]['warm_calls']:>4} {g[0]['calls']:>5} "
            f"{np.median(ratio):6.3f} [{lo:5.3f},{hi:5.3f}] "
            f"{np.median([r['a0_a3'] for r in g]):6.3f} {np.median([r['b1_b2'] for r in g]):6.3f}"
            + ("  (auto)" if w == "auto" else "")
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
