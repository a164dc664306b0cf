"""Two segments of a hot 4-dtype run on the H200, one per way of releasing the hot timer's
pipelined rounds: where their cells' host time went (the manifests' timing.cell_phases_s),
and how far each cell's figures moved against hot-4 and against each other, by working-set
band. Reads this folder's manifests, cells.csv.xz, hot-4.fp32.csv.xz (hot-4's ok fp32
candidate cells) and hot-5.phases.json (hot-5's timing.cell_phases_s and candidate cell count:
the held segment is hot-5's first, so its resumed segments' host time is hot-5's less the held
segment's); prints summary.txt. Run from the repository root:

    python3 lab/tools/cell_phases_summary.py > lab/h200/cell-phases/summary.txt

hot-4.fp32.csv.xz was written from hot-4's trials (git history: 8a32559) by

    git show 8a32559:results/h200/hot-4/trials.jsonl.xz > /tmp/hot-4.jsonl.xz
    python3 lab/tools/cell_phases_summary.py --hot-4-cells /tmp/hot-4.jsonl.xz

and hot-5.phases.json from hot-5's manifest and trials (git history: 8a32559) by

    git show 8a32559:results/h200/hot-5/manifest.json > /tmp/hot-5.json
    git show 8a32559:results/h200/hot-5/trials.jsonl.xz > /tmp/hot-5.jsonl.xz
    python3 lab/tools/cell_phases_summary.py --hot-5 /tmp/hot-5.json /tmp/hot-5.jsonl.xz
"""

import csv
import io
import json
import lzma
import math
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1] / "h200" / "cell-phases"
BANDS = [(0, 1), (1, 4), (4, 16), (16, 64), (64, 256), (256, None)]
FIELDS = ("ratio", "time_us", "base_time_us")


def segments() -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    with lzma.open(HERE / "cells.csv.xz", "rt") as f:
        for r in csv.DictReader(f):
            out.setdefault(r["segment"], {})[r["cell_key"]] = {
                "ws_bytes": int(r["ws_bytes"]),
                "n_samples": int(r["n_samples"]),
                **{k: float(r[k]) for k in FIELDS},
            }
    return out


def hot4() -> dict[str, dict]:
    out = {}
    with lzma.open(HERE / "hot-4.fp32.csv.xz", "rt") as f:
        for r in csv.DictReader(f):
            out[r["cell_key"]] = {"ws_bytes": int(r["ws_bytes"]), "n_samples": int(r["n_samples"]),
                                  **{k: float(r[k]) for k in FIELDS}}  # fmt: skip
    return out


def table(name: str, x: dict, y: dict) -> list[str]:
    """y against x on their common cells (fp32: the only dtype both segments finished)."""
    keys = [k for k in x if k in y and "|fp32|" in k]
    d_all = 100 * np.log([y[k]["ratio"] / x[k]["ratio"] for k in keys])
    lines = [
        f"{name}: {len(keys)} common fp32 cells, ratio within 3%: "
        f"{np.mean(np.abs(d_all) <= 3) * 100:.1f}%",
        f"  {'ws MiB':>10} {'cells':>6}  " + "  ".join(
            f"{f + ' med/IQR/within3':>28}" for f in FIELDS),
    ]  # fmt: skip
    for lo, hi in BANDS:
        band = [k for k in keys if lo < x[k]["ws_bytes"] / 2**20 <= (hi or np.inf)]
        if not band:
            continue
        cols = []
        for f in FIELDS:
            d = 100 * np.log([y[k][f] / x[k][f] for k in band])
            q1, q3 = np.percentile(d, [25, 75])
            cols.append(
                f"{np.median(d):+6.2f}% {q3 - q1:5.2f}% {np.mean(np.abs(d) <= 3) * 100:6.1f}%"
            )
        label = f"({lo}, {hi if hi else 'inf'}]"
        lines.append(f"  {label:>10} {len(band):>6}  " + "  ".join(f"{c:>28}" for c in cols))
    return lines


def timed_gpu_ms(c: dict) -> float:
    """The GPU time a hot cell timed: samples per side x calls per sample x per-call time of
    both sides. Calls per sample are not recorded; they are estimated as the calibration sets
    them, ceil(150 us / the baseline's per-call time), at most 128 (Stopping)."""
    calls = min(128, max(1, math.ceil(150 / max(c["base_time_us"], 0.5))))
    return c["n_samples"] * calls * (c["time_us"] + c["base_time_us"]) / 1e3


def phases(seg: dict[str, dict[str, dict]]) -> list[str]:
    """Host time per candidate cell by phase, ms (every dtype each segment timed)."""
    out = ["Host time per candidate cell by phase (ms), from each manifest's timing.cell_phases_s:"]
    for tag, cells in seg.items():
        with lzma.open(HERE / f"{tag}.manifest.json.xz", "rt") as f:
            m = json.load(f)
        ph, n = m["timing"]["cell_phases_s"], len(cells)
        parts = ", ".join(
            f"{k.split('/')[-1]} {v / n * 1e3:.2f}" for k, v in sorted(ph.items(), key=lambda kv: -kv[1])
        )  # fmt: skip
        graphs = m["timing"].get("replay_graphs")
        out.append(
            f"  {tag} (at {m.get('git_commit', '?')}, {n} cells): {sum(ph.values()) / n * 1e3:.2f}"
            f" = {parts}" + (f"; replay graphs {graphs}" if graphs else "")
        )
        gpu = sum(timed_gpu_ms(c) for c in cells.values())
        out.append(f"    timed GPU work (estimated): {gpu / 1e3:.1f} s, {gpu / n:.2f} ms per cell")
    return out


def write_hot4(trials: str) -> None:
    """hot-4.fp32.csv.xz from hot-4's trials.jsonl.xz: its ok fp32 candidate cells."""
    cols = ["cell_key", "ws_bytes", "n_samples", *FIELDS]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(cols)
    with lzma.open(trials, "rt") as f:
        for r in map(json.loads, f):
            if (r.get("role"), r.get("status"), r.get("dtype")) == ("candidate", "ok", "fp32"):
                w.writerow(
                    [r["cell_key"], r["ws_bytes"], r["n_samples"], *(repr(r[k]) for k in FIELDS)]
                )
    data = lzma.compress(buf.getvalue().encode(), preset=9 | lzma.PRESET_EXTREME)
    (HERE / "hot-4.fp32.csv.xz").write_bytes(data)


def write_hot5(manifest: str, trials: str) -> None:
    """hot-5.phases.json: hot-5's timing.cell_phases_s and how many candidate cells it has."""
    m = json.loads(Path(manifest).read_text())
    with lzma.open(trials, "rt") as f:
        cells = sum(1 for r in map(json.loads, f) if r.get("role") == "candidate")
    out = {"run_id": "hot-5", "candidate_cells": cells,
           "cell_phases_s": m["timing"]["cell_phases_s"]}  # fmt: skip
    (HERE / "hot-5.phases.json").write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")


def hot5_resumed(held_cells: int) -> list[str]:
    """hot-5's resumed segments (its first segment is `held`): the run's timing.cell_phases_s
    less the held segment's, per candidate cell the resumes measured."""
    hot5 = json.loads((HERE / "hot-5.phases.json").read_text())
    with lzma.open(HERE / "held.manifest.json.xz", "rt") as f:
        held = json.load(f)["timing"]["cell_phases_s"]
    n = hot5["candidate_cells"] - held_cells
    ph = {k: v - held.get(k, 0) for k, v in hot5["cell_phases_s"].items()}
    parts = ", ".join(
        f"{k.split('/')[-1]} {v / n * 1e3:.2f}" for k, v in sorted(ph.items(), key=lambda kv: -kv[1])
    )  # fmt: skip
    return [
        f"  hot-5's resumed segments (hot-5 less held, {n} cells): {sum(ph.values()) / n * 1e3:.2f} = {parts}"
    ]


def main() -> None:
    if sys.argv[1:2] == ["--hot-4-cells"]:
        write_hot4(sys.argv[2])
        return
    if sys.argv[1:2] == ["--hot-5"]:
        write_hot5(sys.argv[2], sys.argv[3])
        return
    seg, ref = segments(), hot4()
    out = phases(seg) + hot5_resumed(len(seg["held"])) + [""]
    out += [
        "y / x per cell, as a log difference in %: median, interquartile range, share within 3%",
        "",
    ]
    out += table("held vs hot-4", ref, seg["held"]) + [""]
    out += table("release-ahead vs hot-4", ref, seg["release-ahead"]) + [""]
    out += table("release-ahead vs held", seg["held"], seg["release-ahead"])
    print("\n".join(out))


if __name__ == "__main__":
    main()
