"""Hot mode's order effect, measured with one kernel on both sides, on a GPU:

    python lab/tools/hot_slots.py --out hot_slots.json

A hot pairing times A B B A rounds (Bench.time_pair_hot; B A A B in a cell's second half since
harness.halves_first_side), each sample an untimed warm-up replay
of its own side followed by the timed graph; the two sides have their own buffers. With
`--sides numba` or `torch` both sides run the same kernel (a Numba config, or torch), so every
ratio should read 1 and every slot the same; `mixed` times the Numba config (A) against torch
(B), as a run's cell does, to show how the warm-up moves a real ratio. With `--export HEADER`
(an exported relu_policy.cuh, built with nvcc as `sweeper verify` builds it) the sides `export`
(its fp32 `launch_relu` against itself), `export-numba` and `numba-export` (it against the
Numba config, each way round) tell a difference between the header's kernel and its Numba twin
from the order of the sides, and `export-torch` times it against torch as verify does;
`--config` must then be the config the header dispatches to at those sizes (`--bytes` takes a
plan's exact working sets, as verify times them). Per working set and number of warm-up calls
(`--warm`; `auto` is the default rule, sweeper.stats.warm_calls) it makes `--reps`
buffer-swapped pairings of 16 samples per side (`--adaptive`: the run's stopping rule, 6-16) as
a cell does (GpuExecutor.pair_swapped; `--check`: side A's outputs poisoned after the warm-up
and checked after each half, as a cell's candidate and verify's export are), and prints the
median over them of:

  ratio   the pairing's ratio (side B's time over side A's, as a cell's ratio to the baseline);
  A0/A3   side A's median time in slot 0 (after its own slot, except a half's first round)
          over slot 3 (after side B's slot 2);
  B1/B2   side B's median in slot 1 (after side A) over slot 2 (after itself).

and, per row, the spread of the ratio (5-95% over the pairings). In a B A A B half the same
places are slots 2, 1, 3 and 0 (`halves`); the figures pool them by place.

    python lab/tools/hot_slots.py --recorded results/h200/hot-7

reads a recorded hot run's samples back into their slots instead (no GPU): per range of
working set, the median over the ok candidate cells of the candidate's slot 3 (after the
baseline) over its slot 0 (after itself, but in a half's first round, which follows the
baseline's warm-up), the baseline's slot 1 (after the candidate) over its slot 2 (after
itself), and the cell's ratio as each side's samples after itself alone give it (slot 0 but
the first round's, slot 2) over the ratio recorded; in a run whose second halves put the
baseline first (harness.halves_first_side), those halves' samples are read by place the same
way.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sweeper.units import MiB  # noqa: E402

# fp32 at 38-53 MiB in hot-7's policy, and in hot-6's (commit f96b83b)
CONFIG = "v16-u8-ld.nc-st.cs-b128-flat"


def dumps(doc: dict) -> str:
    """The JSON of a result: its fields one per line, each row of `rows` on a line of its own
    (a diff shows the rows that moved)."""
    head = {k: v for k, v in doc.items() if k != "rows"}
    lines = [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    rows = ",\n".join(f"  {json.dumps(r)}" for r in doc.get("rows", []))
    return "{\n" + "\n".join(lines) + '\n "rows": [\n' + rows + "\n ]\n}\n"


def halves(a_us, b_us, parts, firsts=("a", "a")):
    """Per buffer-swapped half, (A, B, A0, A3, B1, B2): both sides' samples, which are in round
    order, and each side's samples by its place: A0 side A's after itself, A3 after side B,
    B1 side B's after side A, B2 after itself. In a half whose rounds are A B B A (`firsts`,
    harness.halves_first_side: "a") those are slots 0, 3, 1 and 2; in a B A A B half ("b")
    slots 2, 1, 3 and 0."""
    a_us, b_us = np.asarray(a_us, dtype=float), np.asarray(b_us, dtype=float)
    i = 0
    for p, first in zip(parts or (len(a_us),), firsts, strict=False):
        a, b = a_us[i : i + p], b_us[i : i + p]
        i += p
        if first == "a":
            yield a, b, a[0::2], a[1::2], b[0::2], b[1::2]
        else:
            yield a, b, a[1::2], a[0::2], b[1::2], b[0::2]


def slot_ratios(
    a_us: np.ndarray, b_us: np.ndarray, parts, firsts=("a", "a")
) -> tuple[float, float]:
    """(A0/A3, B1/B2), each place's samples pooled over the halves."""
    per_half = [h[2:] for h in halves(a_us, b_us, parts, firsts)]
    a0, a3, b1, b2 = (np.concatenate(x) for x in zip(*per_half, strict=True))
    return float(np.median(a0) / np.median(a3)), float(np.median(b1) / np.median(b2))


EDGES_MIB = (4.0, 8.0, 16.0, 24.0, 32.0, 40.0, 48.0, 64.0, 128.0)


def recorded(run: str, edges: tuple[float, ...] = EDGES_MIB) -> list[dict]:
    """One row per range of working set (MiB, right-closed; the last has no upper end) of a
    recorded hot run's ok candidate cells whose halves hold two rounds or more."""
    from sweeper.analyze.store import load_manifest, read_trials

    firsts = (load_manifest(run).get("harness") or {}).get("halves_first_side", ["a", "a"])
    bounds = (0.0, *edges, float("inf"))
    acc: dict[int, list[tuple[float, float, float]]] = {}
    for t in read_trials(run)[0]:
        if t.get("role") != "candidate" or t.get("status") != "ok" or t.get("mode") != "hot":
            continue
        a, b = t.get("samples_us"), t.get("base_samples_us")
        parts = t.get("sample_parts") or ([len(a)] if a else [])
        if not a or not b or len(a) != len(b) or sum(parts) != len(a) or min(parts) < 4:
            continue
        own, rec, a3a0, b1b2 = [], [], [], []
        for (ha, hb, a0, a3, b1, b2), first in zip(
            halves(a, b, parts, firsts), firsts, strict=False
        ):
            a3a0.append(np.median(a3) / np.median(a0))
            b1b2.append(np.median(b1) / np.median(b2))
            # speed ratio from each side's samples after itself, as a cell's; the half's
            # first sample follows the hold, not its own side
            a_own, b_own = (a0[1:], b2) if first == "a" else (a0, b2[1:])
            own.append(np.median(b_own) / np.median(a_own))
            rec.append(np.median(hb) / np.median(ha))
        mib = t["ws_bytes"] / MiB
        k = next(j for j in range(len(bounds) - 1) if bounds[j] < mib <= bounds[j + 1])
        gm = lambda x: float(np.exp(np.mean(np.log(x))))  # noqa: E731 - over the halves
        acc.setdefault(k, []).append((gm(a3a0), gm(b1b2), gm(own) / gm(rec)))
    rows = []
    for k, v in sorted(acc.items()):
        m = np.median(np.array(v), axis=0)
        rows.append(
            {"lo_mib": bounds[k], "hi_mib": bounds[k + 1] if k + 2 < len(bounds) else None,
             "cells": len(v), "a3_over_a0": round(float(m[0]), 4),
             "b1_over_b2": round(float(m[1]), 4), "own_over_recorded": round(float(m[2]), 4)}
        )  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="4,8,12,16,20,24,32,40,48,56,64",
                    help="MiB, each rounded down to a whole 256 bytes of input")  # fmt: skip
    ap.add_argument("--bytes", default=None,
                    help="exact working sets in bytes (a plan's sizes) instead of --sizes")  # fmt: skip
    ap.add_argument("--warm", default="1,2,4,8,auto", help="warm-up calls per sample")
    ap.add_argument("--reps", type=int, default=8, help="pairings per size and warm-up")
    ap.add_argument(
        "--sides",
        default="numba,torch,mixed",
        help="numba, torch, mixed; with --export also export, export-numba, numba-export, "
        "export-torch",
    )
    ap.add_argument("--config", default=CONFIG, help="the fp32 Numba config")
    ap.add_argument("--export", default=None, help="an exported relu_policy.cuh")
    ap.add_argument("--out", default=None, help="write every pairing to this JSON file")
    ap.add_argument("--recorded", default=None, help="a hot run folder: its slots, no GPU")
    ap.add_argument(
        "--check",
        action="store_true",
        help="poison side A's outputs after the warm-up and check them after each "
        "half, as a run's cell and verify do",
    )
    ap.add_argument("--adaptive", action="store_true",
                    help="the default stopping rule (6-16 samples per side) instead of 16")  # fmt: skip
    args = ap.parse_args(argv)
    if args.recorded:
        rows = recorded(args.recorded)
        print(f"{'working set':>16} {'cells':>6} {'A3/A0':>6} {'B1/B2':>6} {'own/recorded':>12}")
        for r in rows:
            hi = "" if r["hi_mib"] is None else f"{r['hi_mib']:g}"
            ws = f"({r['lo_mib']:g}, {hi}]" if hi else f"> {r['lo_mib']:g}"
            print(f"{ws + ' MiB':>16} {r['cells']:>6} {r['a3_over_a0']:6.3f} "
                  f"{r['b1_over_b2']:6.3f} {r['own_over_recorded']:12.3f}")  # fmt: skip
        if args.out:
            Path(args.out).write_text(dumps({"run": args.recorded, "rows": rows}))
        return 0

    from sweeper_kernels import Variant, get_launcher

    from sweeper.run.executor import GpuExecutor
    from sweeper.stats import Stopping

    stop = Stopping() if args.adaptive else Stopping(16, 16, rel_tol=0.0, time_cap_s=30.0)
    ex = GpuExecutor(stopping=stop, baseline="torch" if "torch" in args.sides else "auto")
    launcher = get_launcher(Variant.parse(f"fp32-{args.config}"))
    export = None
    if args.export:
        from sweeper.export.native import build_exported_launchers
        from sweeper.run.verify import exported_on

        export = build_exported_launchers(args.export)["fp32"]
    warms = [None if w == "auto" else int(w) for w in args.warm.split(",")]
    rows = []
    if args.bytes:
        counts = [int(s) // 8 for s in args.bytes.split(",")]  # fp32: 8 B of working set each
    else:
        counts = [int(float(s) * MiB) // 8 // 64 * 64 for s in args.sizes.split(",")]
    for n in counts:
        mib = 8 * n / MiB
        b = ex.buffers("fp32", n)
        key = ("fp32", n)
        numba = lambda side, b=b, n=n: ex.candidate_launch(launcher, b, n, side)  # noqa: E731
        torch = lambda side, b=b, n=n: ex.baseline_launch("fp32", b, n, side)  # noqa: E731
        pairs = {"numba": (numba, numba), "torch": (torch, torch), "mixed": (numba, torch)}
        if export is not None:
            exported = exported_on(export, b, n)
            pairs.update(export=(exported, exported), **{"export-numba": (exported, numba),
                         "numba-export": (numba, exported), "export-torch": (exported, torch)})  # fmt: skip
        for name in args.sides.split(","):
            a_on, b_on = pairs[name]
            for w in warms:
                ex.hot_warm_calls = w
                for rep in range(args.reps):
                    res = ex.pair_swapped("hot", a_on, b_on, b, key, stop, check=args.check)
                    if res.bad:
                        raise SystemExit(f"side A's output differs from the reference ({name})")
                    t = res.timing
                    a0a3, b1b2 = slot_ratios(t.a_us, t.b_us, t.parts, ex.halves_first)
                    rows.append(
                        {
                            "side": name,
                            "ws_mib": mib,
                            "ws_bytes": 8 * n,
                            "warm": "auto" if w is None else w,
                            "warm_calls": ex.warm_calls(key),
                            "calls": t.calls,
                            "rep": rep,
                            "samples_per_side": int(t.a_us.size),
                            "ratio": float(t.summary()["ratio"]),
                            "a0_a3": a0a3,
                            "b1_b2": b1b2,
                        }
                    )
        ex.release("fp32", n)
    doc = {"config": f"fp32-{args.config}", "export": args.export, "reps": args.reps,
           "check": args.check, "adaptive": args.adaptive, "rows": rows}  # fmt: skip
    if args.out:
        Path(args.out).write_text(dumps(doc))
    print(f"{'side':>12} {'ws MiB':>7} {'warm':>4} {'calls':>5} {'ratio':>6} {'5-95%':>13} "
          f"{'A0/A3':>6} {'B1/B2':>6}")  # fmt: skip
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["side"], r["ws_mib"], r["warm"]), []).append(r)
    for (side, mib, w), g in groups.items():
        ratio = np.array([r["ratio"] for r in g])
        lo, hi = np.quantile(ratio, [0.05, 0.95])
        print(
            f"{side:>12} {mib:7.3f} {g[0]['warm_calls']:>4} {g[0]['calls']:>5} "
            f"{np.median(ratio):6.3f} [{lo:5.3f},{hi:5.3f}] "
            f"{np.median([r['a0_a3'] for r in g]):6.3f} {np.median([r['b1_b2'] for r in g]):6.3f}"
            + ("  (auto)" if w == "auto" else "")
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
