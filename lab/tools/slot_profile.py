"""Where in a held round a recorded cold or after-write sample was taken, and what that did:

    python lab/tools/slot_profile.py RUN [RUN...] --out slot_profile.md

RUN: a run folder recorded eight samples per hold (lab/h200/slot-profile/provenance.json
names the runs it read and where they are kept).

Runs recorded before cold and after-write samples were taken one per hold (a manifest
without `harness.blocked_samples_per_hold`) queued them eight per held round in the order
A B B A A B B A (Bench.time_pair_blocked): the candidate (A) took slots 0, 3, 4 and 7, the
baseline (B) slots 1, 2, 5 and 6, and a cell's trial keeps each side's samples in that order
(`samples_us`, `base_samples_us`, per buffer-swapped half in `sample_parts`). Per mode, dtype
and range of working set this gives, over the ok candidate cells, the median of each side's
mean time in a slot relative to its last slot (A: slots 0, 3, 4 over slot 7; B: slots 1, 2,
5 over slot 6): a side whose early slots read slower than its late ones. Since the two sides
never share a slot, it says how each side's own time depends on its position, not how the
two compare in one slot (lab/tools/cold_slots.py times one kernel in every slot). A run whose
samples were held fewer than eight at a time has no such slots and is refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from sweeper.analyze.store import load_manifest, read_trials
from sweeper.units import MiB

ROUND = "ABBA" * 2  # Bench.time_pair_blocked's sample order, once held as one round
A_SLOTS = tuple(i for i, s in enumerate(ROUND) if s == "A")  # (0, 3, 4, 7)
B_SLOTS = tuple(i for i, s in enumerate(ROUND) if s == "B")  # (1, 2, 5, 6)
EDGES_MIB = (8.0, 36.0, 120.0)  # on the H200: small, below the band, the band to 2 x L2, DRAM


def slot_means(samples: list[float], parts: list[int] | None) -> np.ndarray | None:
    """A side's mean time in each of its 4 slots of a round (None when a half does not hold
    whole rounds)."""
    x = np.asarray(samples, dtype=float)
    parts = list(parts or [len(x)])
    if sum(parts) != len(x) or any(k % 4 for k in parts):
        return None
    pos = np.concatenate([np.arange(k) % 4 for k in parts])
    return np.array([x[pos == j].mean() for j in range(4)])


def profile(runs: list[str], edges: tuple[float, ...] = EDGES_MIB) -> list[dict]:
    """One row per mode, dtype and range of working set (MiB, right-closed; the last range
    has no upper end: hi_mib None)."""
    bounds = (0.0, *edges, float("inf"))
    acc: dict[tuple, list[tuple[np.ndarray, np.ndarray]]] = {}
    for run in runs:
        held = load_manifest(run).get("harness", {}).get("blocked_samples_per_hold", len(ROUND))
        if held != len(ROUND):
            raise SystemExit(f"{run}: samples were held {held} at a time, not in rounds of 8")
        trials, _ = read_trials(run)
        for t in trials:
            if (
                t.get("role") != "candidate"
                or t.get("status") != "ok"
                or t.get("mode") not in ("cold", "after-write")
                or not t.get("samples_us")
            ):
                continue
            a = slot_means(t["samples_us"], t.get("sample_parts"))
            b = slot_means(t["base_samples_us"], t.get("sample_parts"))
            if a is None or b is None:
                continue
            mib = t["ws_bytes"] / MiB
            k = next(i for i in range(len(bounds) - 1) if bounds[i] < mib <= bounds[i + 1])
            acc.setdefault((t["mode"], t["dtype"], k), []).append((a / a[3], b / b[3]))
    rows = []
    for (mode, dtype, k), v in sorted(acc.items()):
        a = np.median([x[0] for x in v], axis=0)
        b = np.median([x[1] for x in v], axis=0)
        rows.append(
            {"mode": mode, "dtype": dtype, "lo_mib": bounds[k],
             "hi_mib": bounds[k + 1] if k + 2 < len(bounds) else None,
             "cells": len(v),
             "a_vs_last": {f"slot{A_SLOTS[j]}": round(float(a[j]), 4) for j in range(3)},
             "b_vs_last": {f"slot{B_SLOTS[j]}": round(float(b[j]), 4) for j in range(3)}}
        )  # fmt: skip
    return rows


def markdown(rows: list[dict]) -> str:
    head = ("| mode | dtype | working set | cells | candidate: slots 0, 3, 4 / slot 7 "
            "| baseline: slots 1, 2, 5 / slot 6 |\n|---|---|---|---:|---|---|\n")  # fmt: skip
    lines = []
    for r in rows:
        ws = (
            f"> {r['lo_mib']:g} MiB"
            if r["hi_mib"] is None
            else f"({r['lo_mib']:g}, {r['hi_mib']:g}] MiB"
        )
        a = " ".join(f"{v:.3f}" for v in r["a_vs_last"].values())
        b = " ".join(f"{v:.3f}" for v in r["b_vs_last"].values())
        lines.append(f"| {r['mode']} | {r['dtype']} | {ws} | {r['cells']} | {a} | {b} |")
    return head + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="run folders")
    ap.add_argument("--edges", default=",".join(f"{e:g}" for e in EDGES_MIB),
                    help="range edges in MiB of working set")  # fmt: skip
    ap.add_argument("--out", default=None, help="write the table (.md) and its JSON beside it")
    a = ap.parse_args(argv)
    rows = profile(a.runs, tuple(float(e) for e in a.edges.split(",")))
    text = markdown(rows)
    print(text, end="")
    if a.out:
        Path(a.out).write_text(text)
        Path(a.out).with_suffix(".json").write_text(
            json.dumps({"runs": a.runs, "rows": rows}, indent=1) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
