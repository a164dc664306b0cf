"""Where a run's cells spend their time: host and GPU milliseconds per cell, by phase.

    python benchmarks/cell_cost.py RUN            # one table per run given
    python benchmarks/cell_cost.py RUN_A RUN_B    # side by side, with the ratio B / A

Host time per phase is the manifest's `timing.cell_phases_s` ("<mode>/<phase>": exclusive wall
time, sweeper.run.timers.PhaseClock) plus the run-level entries of `timing` that lie outside
the cells (`prepare_s`, `ceiling_s`, the climbs' compiling `<mode>/<dtype>/climb_compile_s`);
"rest" is the wall time (`timing.total_s`) outside all of them. GPU time is the kernels' work
from the recorded per-call times and call counts (sweeper.analyze.gpuwork.phase_split): known
per phase for the classic executor, in total for another (`harness.executor`); "-" marks a
phase whose GPU work is not counted. Per-cell figures divide by the candidate cells of the
phase's mode (the totals by all candidate cells). A batched run also records the GPU's time
measured by events (`timing.batch_spans`): in its batches (those of top-up segments only apart)
and between one batch and the next (reference cells, a size's setup, waiting for the host).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence

from sweeper.analyze.gpuwork import SPLIT_PARTS, executor_kind, phase_split
from sweeper.errors import USER_ERRORS, SweeperError
from sweeper.runfolder import BATCH_SPANS, CELL_PHASES

# per-dtype entries of `timing` ("<mode>/<dtype>/<name>") spent outside any cell, summed per
# mode; the others (climb_s, screen_s, sweep_s, refine_s) hold cells
OUTSIDE_CELLS = ("climb_compile_s",)


def run_level(timing: Mapping) -> dict[str, float]:
    """The host seconds of `timing` spent outside the cells: entries without a "/" ending in
    "_s" (total_s aside), and the OUTSIDE_CELLS entries summed per mode ("hot/climb_compile")."""
    out: dict[str, float] = {}
    for key, v in timing.items():
        if isinstance(v, bool) or not isinstance(v, int | float) or key == "total_s":
            continue
        parts = key.split("/")
        if len(parts) == 1 and key.endswith("_s"):
            out[key[:-2]] = out.get(key[:-2], 0.0) + float(v)
        elif len(parts) == 3 and parts[2] in OUTSIDE_CELLS:
            name = f"{parts[0]}/{parts[2][:-2]}"
            out[name] = out.get(name, 0.0) + float(v)
    return out


def cost(manifest: Mapping, trials: Sequence[Mapping]) -> dict:
    """A run's cell cost: {"executor", "wall_s", "cells", "reference", "rows": [{"phase",
    "host_s", "cells" (the divisor), "gpu_s" (None: not counted)}], "gpu_s", "parts"}."""
    timing = manifest.get("timing") or {}
    if "total_s" not in timing:
        raise SweeperError("the manifest has no timing.total_s (a run that did not finish?)")
    phases = timing.get(CELL_PHASES) or {}
    if not isinstance(phases, Mapping):
        raise SweeperError(f"timing.{CELL_PHASES}: expected a table of phase -> seconds")
    split = phase_split(manifest, trials)
    cells = sum(m["cells"] for m in split.values())
    gpu_phase = {k: s for m in split.values() for k, s in m["phases"].items()}
    rows = []
    for phase, s in sorted(phases.items(), key=lambda kv: -float(kv[1])):
        mode = phase.split("/")[0] if "/" in phase else None
        rows.append(
            {
                "phase": phase,
                "host_s": float(s),
                "cells": split.get(mode, {}).get("cells", 0) if mode else cells,
                "gpu_s": gpu_phase.get(phase),
            }
        )
    in_cells = sum(r["host_s"] for r in rows)
    outside = run_level(timing)
    wall = float(timing["total_s"])
    extra = [("cells, all phases", in_cells)] if rows else []
    extra += sorted(outside.items()) + [("rest", wall - in_cells - sum(outside.values()))]
    parts = dict.fromkeys(SPLIT_PARTS, 0.0)
    for m in split.values():
        for part, s in m["parts"].items():
            parts[part] += s
    gpu = sum(parts.values())
    rows += [
        {
            "phase": name,
            "host_s": s,
            "cells": cells,
            "gpu_s": gpu if name == "cells, all phases" else None,
        }
        for name, s in extra
    ]
    return {
        "executor": executor_kind(manifest),
        "wall_s": wall,
        "cells": cells,
        "reference": sum(m["reference"] for m in split.values()),
        "rows": rows,
        "gpu_s": gpu,
        "parts": parts,
        "spans": timing.get(BATCH_SPANS) or None,
    }


def load(run: str) -> dict:
    from sweeper.analyze.store import load_manifest, read_trials

    trials, _ = read_trials(run)
    return cost(load_manifest(run), trials)


def _ms(s: float | None, cells: int) -> str:
    return "-" if s is None or not cells else f"{1e3 * s / cells:.2f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or not a else f"{b / a:.2f}"


def totals(c: dict) -> str:
    """wall s, cells, host ms/cell, GPU ms/cell, wall/GPU."""
    wall_gpu = f"{c['wall_s'] / c['gpu_s']:.1f}" if c["gpu_s"] else "-"
    return (
        f"wall {c['wall_s']:.1f} s, {c['cells']} cells, host {_ms(c['wall_s'], c['cells'])} "
        f"ms/cell, GPU {_ms(c['gpu_s'], c['cells'])} ms/cell, wall/GPU {wall_gpu}"
    )


def parts_line(c: dict) -> str:
    """The GPU work by part, estimates marked (parts the run has none of left out)."""
    parts = [
        f"{p} {s:.1f} s{' (estimate)' if SPLIT_PARTS[p] else ''}"
        for p, s in c["parts"].items()
        if s > 0
    ]
    return "GPU work by part: " + (", ".join(parts) or "none counted")


def spans_line(c: dict) -> list[str]:
    """The GPU's measured time in batches and between them; none for a run without it."""
    sp = c.get("spans")
    if not sp or not sp.get("batches"):
        return []
    line = (
        f"GPU measured: {sp['gpu_s']:.1f} s in {int(sp['batches'])} batches "
        f"({_ms(sp['gpu_s'], c['cells'])} ms/cell), {sp['topup_gpu_s']:.1f} s of it in "
        f"{int(sp['topup_batches'])} of top-up segments only; {sp['between_s']:.1f} s between "
        "batches"
    )
    if "between_calls_s" in sp:  # recorded since the gaps were split
        other = sp["between_s"] - sp["between_calls_s"] - sp["between_topups_s"]
        setups = ""
        if "size_setups" in sp:  # recorded since calls were counted by their setup
            setups = f", {int(sp['size_setups'])} of them setting their size up"
        line += (
            f" ({sp['between_calls_s']:.1f} s before the first batch of {int(sp['calls'])} "
            f"calls, {_ms(sp['between_calls_s'], sp['calls'])} ms per call{setups}; "
            f"{sp['between_topups_s']:.1f} s before top-up batches, {other:.1f} s before the "
            "others)"
        )
    return [line]


def one(run: str, c: dict) -> list[str]:
    lines = [
        f"## {run} (executor {c['executor']}, {c['cells']} candidate cells, "
        f"{c['reference']} reference cells)",
        "",
        "| phase | host s | host ms/cell | GPU s | GPU ms/cell |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in c["rows"]:
        gpu = "-" if r["gpu_s"] is None else f"{r['gpu_s']:.1f}"
        lines.append(
            f"| {r['phase']} | {r['host_s']:.1f} | {_ms(r['host_s'], r['cells'])} | {gpu} | "
            f"{_ms(r['gpu_s'], r['cells'])} |"
        )
    return [*lines, "", totals(c), parts_line(c), *spans_line(c)]


def side_by_side(runs: Sequence[str], costs: Sequence[dict]) -> list[str]:
    (ra, rb), (a, b) = runs, costs
    lines = [
        f"A: {ra} (executor {a['executor']}), B: {rb} (executor {b['executor']})",
        "",
        "| phase | A host ms/cell | B host ms/cell | B/A | A GPU ms/cell | B GPU ms/cell | B/A |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    by = [{r["phase"]: r for r in c["rows"]} for c in (a, b)]
    names = list(by[0]) + [p for p in by[1] if p not in by[0]]
    for p in names:
        ra_, rb_ = by[0].get(p), by[1].get(p)

        def per(r, key):
            return None if r is None or r[key] is None or not r["cells"] else r[key] / r["cells"]

        ha, hb, ga, gb = (
            per(ra_, "host_s"),
            per(rb_, "host_s"),
            per(ra_, "gpu_s"),
            per(rb_, "gpu_s"),
        )
        lines.append(
            f"| {p} | {_ms(ha, 1)} | {_ms(hb, 1)} | {_ratio(ha, hb)} | {_ms(ga, 1)} | "
            f"{_ms(gb, 1)} | {_ratio(ga, gb)} |"
        )
    wall = [c["wall_s"] / c["cells"] if c["cells"] else None for c in (a, b)]
    gpu = [c["gpu_s"] / c["cells"] if c["cells"] else None for c in (a, b)]
    lines.append(
        f"| total | {_ms(wall[0], 1)} | {_ms(wall[1], 1)} | {_ratio(*wall)} | "
        f"{_ms(gpu[0], 1)} | {_ms(gpu[1], 1)} | {_ratio(*gpu)} |"
    )
    lines += [
        "",
        f"A: {totals(a)}",
        f"B: {totals(b)}",
        f"A: {parts_line(a)}",
        f"B: {parts_line(b)}",
        *(f"{k}: {line}" for k, c in (("A", a), ("B", b)) for line in spans_line(c)),
    ]
    wa, wb = a["wall_s"], b["wall_s"]
    lines.append(f"wall B/A: {_ratio(wa, wb)}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="cell_cost.py",
        description="Host and GPU milliseconds per cell, by phase, of one or two run folders "
        "(two: side by side with the ratio B / A).",
    )
    ap.add_argument("runs", nargs="+", metavar="RUN", help="run folder (results/<gpu>/<run>)")
    ap.add_argument(
        "--side-by-side",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with two runs, one table with the ratio (default) or one table each",
    )
    args = ap.parse_args(argv)
    try:
        costs = [load(r) for r in args.runs]
    except USER_ERRORS as e:
        print(f"cell_cost.py: {e}", file=sys.stderr)
        return 1
    if len(costs) == 2 and args.side_by_side:
        out = side_by_side(args.runs, costs)
    else:
        out = [ln for r, c in zip(args.runs, costs, strict=True) for ln in [*one(r, c), ""]][:-1]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
