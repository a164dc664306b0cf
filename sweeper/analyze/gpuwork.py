"""A lower bound on the GPU work of a run's hot candidate cells, from their recorded figures.

    sweeper gpu-work results/h200/hot-7 [--max-samples 8] [--current-warm-up]

prints it per dtype and search phase (screen, sweep, refine) as a table (`table`);
`--max-samples K` counts every cell at no more than K samples per side: the floor of the same
cells under a stopping rule capped there; `--current-warm-up` counts the warm-up calls by
today's rule (sweeper.stats.WARM_RULE) rather than the one the run recorded: the floor of the
same cells timed now. The report's Timing section prints the run's total.

Per cell, the kernels alone must take:

* timed: samples per side x calls per sample x (candidate + baseline time per call);
* warm-up: the warm-up calls of each side before every sample (sweeper.run.timers; how many
  the run's harness records, `hot_warm_calls`: one before the field);
* fresh: the fresh-input replay (sweeper.run.fresh): 2 x (calls + warm-up) candidate calls
  and 4 x calls one-block kernels, each counted at an empty kernel's time in a hot graph.

Calls per sample are those the calibration sets (sweeper.stats.calls_per_sample) from the
baseline's time per call. Pre-checks, calibration, the L2 normalizer, the output checks and the
reference cells are left out, so a run cannot take less than the sum: the floor a faster host
loop alone can reach for its cells.

`phase_split` counts those too, per mode and by the host phase each part runs in
(timing.cell_phases_s), for benchmarks/cell_cost.py; SPLIT_PARTS says which parts are
estimates.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence

from sweeper.errors import SweeperError
from sweeper.stats import WARM_RULE, Stopping, calls_per_sample, warm_rule

EMPTY_KERNEL_US = 0.52  # an empty kernel's time per call in a hot graph (docs/methodology.md)
PARTS = ("timed", "warm-up", "fresh")


def fresh_replayed(manifest: Mapping) -> bool:
    """Whether the run replayed its cells on fresh input (its harness records the replay)."""
    return "fresh_input" in (manifest.get("harness") or {})


def warm_up_calls(manifest: Mapping) -> Callable[[int], int]:
    """A run's hot warm-up calls per sample and side, by working set in bytes, as its harness
    records them (`hot_warm_calls`: sweeper.stats.WARM_RULE or a number; one in a run
    made before the field)."""
    rule = (manifest.get("harness") or {}).get("hot_warm_calls", 1)
    l2 = int(manifest["device"]["l2_bytes"]) if rule == WARM_RULE else 0
    try:
        return warm_rule(rule, l2)
    except ValueError as e:
        raise SweeperError(f"harness.hot_warm_calls: {e}") from None


def cell_work(
    cell: Mapping, stopping: Mapping | Stopping, fresh: bool = True, warm: int = 1
) -> dict[str, float]:
    """Seconds of GPU work of one hot candidate cell, by part (`fresh`: 0 for a run without
    the fresh-input replay; `warm`: warm-up calls per sample and side)."""
    stop = stopping if isinstance(stopping, Stopping) else Stopping(**stopping)
    calls = calls_per_sample(float(cell["base_time_us"]), stop)
    a, b, k = float(cell["time_us"]), float(cell["base_time_us"]), int(cell["n_samples"])
    replay = (2 * (calls + warm) * a + 4 * calls * EMPTY_KERNEL_US) / 1e6
    return {
        "timed": k * calls * (a + b) / 1e6,
        "warm-up": k * warm * (a + b) / 1e6,
        "fresh": replay if fresh else 0.0,
    }


def hot_cells(rows: Iterable[Mapping]) -> list[Mapping]:
    """The ok hot candidate cells with the figures cell_work needs."""
    need = ("time_us", "base_time_us", "n_samples", "ws_bytes")
    return [
        r
        for r in rows
        if r.get("role") == "candidate"
        and r.get("mode") == "hot"
        and r.get("status") == "ok"
        and all(r.get(k) is not None and r.get(k) == r.get(k) for k in need)  # not NaN
    ]


def floor(
    rows: Iterable[Mapping],
    stopping: Mapping | Stopping,
    max_samples: int | None = None,
    fresh: bool = True,
    warm: Callable[[int], int] = lambda ws: 1,
) -> dict[str, float]:
    """The summed GPU work of the ok hot candidate cells among `rows` ("cells": their count),
    each counted at no more than `max_samples` samples per side if given (`fresh`: whether the
    run replayed them on fresh input, fresh_replayed; `warm`: the run's warm-up calls by
    working set, warm_up_calls)."""
    out = {"cells": 0.0, **dict.fromkeys(PARTS, 0.0)}
    for r in hot_cells(rows):
        if max_samples is not None:
            r = {**r, "n_samples": min(int(r["n_samples"]), max_samples)}
        out["cells"] += 1
        for part, s in cell_work(r, stopping, fresh, warm(int(r["ws_bytes"]))).items():
            out[part] += s
    return out


def gpu_work(
    run: str, max_samples: int | None = None, current_warm_up: bool = False
) -> tuple[dict, dict, bool]:
    """((dtype, phase) -> {"cells": n, part: seconds}, the manifest's timing, whether hot is
    the run's only mode). `current_warm_up`: warm-up calls counted by today's rule
    (stats.WARM_RULE), not the run's own."""
    from sweeper.analyze.store import load_manifest, read_trials

    m = load_manifest(run)
    if "hot" not in m.get("modes", []):
        raise SweeperError(
            f"{run}: not a hot run (modes {m.get('modes')}); the bound is hot mode's"
        )
    trials, _ = read_trials(run)
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for t in trials:
        groups[(t["dtype"], t.get("phase", "?"))].append(t)
    fresh = fresh_replayed(m)
    if current_warm_up:
        warm = warm_rule(WARM_RULE, int(m["device"]["l2_bytes"]))
    else:
        warm = warm_up_calls(m)
    out = {k: floor(rows, m["stopping"], max_samples, fresh, warm) for k, rows in groups.items()}
    only_hot = list(m.get("modes", [])) == ["hot"]
    return {k: v for k, v in out.items() if v["cells"]}, m.get("timing", {}), only_hot


def _row(dtype: str, phase: str, row: dict) -> str:
    """One table line: the cells, each part, their sum and the sum per cell."""
    total = sum(row[p] for p in PARTS)
    return (
        f"| {dtype} | {phase} | {int(row['cells'])} | "
        + " | ".join(f"{row[p]:.1f}" for p in PARTS)
        + f" | {total:.1f} | {1e3 * total / max(row['cells'], 1):.2f} |"
    )


def table(run: str, max_samples: int | None = None, current_warm_up: bool = False) -> list[str]:
    work, timing, only_hot = gpu_work(run, max_samples, current_warm_up)
    lines = [
        "| dtype | phase | cells | "
        + " | ".join(f"{p} s" for p in PARTS)
        + " | floor s | ms per cell |",
        "|---|---|---:|" + "---:|" * (len(PARTS) + 2),
    ]
    total = dict.fromkeys(("cells", *PARTS), 0.0)
    for (dtype, phase), row in sorted(work.items()):
        lines.append(_row(dtype, phase, row))
        for k in total:
            total[k] += row[k]
    lines.append(_row("all", "all", total))
    work_s = sum(total[p] for p in PARTS)
    if current_warm_up:
        lines.append(f"\nWarm-up calls counted by today's rule: {WARM_RULE}.")
    if max_samples is not None:
        lines.append(f"\nEvery cell counted at no more than {max_samples} samples per side.")
    # the run's wall time, beside the floor of its own cells as timed (other modes share it)
    elif timing.get("total_s") and only_hot and not current_warm_up:
        lines.append(
            f"\nThe run took {timing['total_s']:.1f} s: the GPU work above is "
            f"{work_s / timing['total_s']:.0%} of it."
        )
    return lines


# ---------------------------------------------------------------------------------------------
# The GPU work of every kind of cell, split by the host phase it runs in
# (timers.PhaseClock, timing.cell_phases_s): benchmarks/cell_cost.py prints it beside the host
# time per phase.

# part -> whether it is an estimate (True) or follows from the recorded per-call times and the
# call counts the harness makes (False)
SPLIT_PARTS = {
    "timed": False,  # candidate and baseline calls of the timed samples
    "warm-up": False,  # hot: the warm-up calls before every sample
    "reference": False,  # copy and baseline timed against each other at a new size
    "flush/producer": True,  # cold: the L2 flush, after-write: the producer, before a call
    "checks": True,  # pre-check call, poison memsets and compares, the untimed soak
    "fresh": True,  # the fresh-input replay (its one-block kernels at EMPTY_KERNEL_US)
}
# part -> the host phase the classic executor (GpuExecutor) runs its kernels in: the reference
# cells' timed rounds are booked as "rounds" (PhaseClock is exclusive)
PART_PHASE = {
    "timed": "rounds",
    "warm-up": "rounds",
    "reference": "rounds",
    "flush/producer": "rounds",
    "checks": "checks",
    "fresh": "fresh",
}
# where a run's harness does not record them: candidate calls a cell makes at least, topped
# up untimed (executor.SOAK_CALLS, `harness.soak_calls`), and fresh-input calls per buffer set
# in cold and after-write (fresh.FRESH_BLOCKED_CALLS, `harness.fresh_input.blocked_calls`)
SOAK = 64
BLOCKED_FRESH_CALLS = 16


def executor_kind(manifest: Mapping) -> str:
    """The executor that made a run: `harness.executor`, "classic" where absent."""
    return str((manifest.get("harness") or {}).get("executor", "classic"))


def outputs_per_side(manifest: Mapping) -> int:
    """Output buffers per buffer set: two with the allocating pattern, else one."""
    return 2 if manifest.get("pattern") == "allocating" else 1


def _check_s(ws: int, copy_gbps: float, outputs: int) -> float:
    """One poison memset (ws / 2 bytes written) and one compare (ws bytes read) per output,
    estimated at the copy kernel's throughput at that size."""
    return outputs * 1.5 * ws / (copy_gbps * 1e9)


def split_cell(
    cell: Mapping,
    mode: str,
    stopping: Stopping,
    warm: int = 1,
    fresh: bool = True,
    outputs: int = 1,
    soak: int = SOAK,
    fresh_calls: int = BLOCKED_FRESH_CALLS,
    before_s: float = 0.0,
) -> dict[str, float]:
    """Seconds of GPU work of one ok candidate cell, by SPLIT_PARTS part. Hot: timed, warm-up
    and fresh as cell_work counts them. Cold and after-write: one call per sample, each
    after the flush or the producer (`before_s` seconds each: "flush/producer", and in the
    replay "fresh"). Checks: the pre-check (one candidate
    call, one poison and compare) and one poison and compare per output of each half, at
    the copy's throughput; a cell that made fewer than SOAK candidate calls (hot: a sample's
    graph and its warm-up call; blocked: one per sample) adds the soak and its check."""
    a, b, k = float(cell["time_us"]), float(cell["base_time_us"]), int(cell["n_samples"])
    ws = int(cell["ws_bytes"])
    copy = float(cell.get("copy_gbps") or 0) or ws / (a * 1e3)  # else its own throughput
    checks = a / 1e6 + _check_s(ws, copy, 1 + 2 * outputs)
    if mode == "hot":
        w = cell_work(cell, stopping, fresh, warm)
        made = k * (calls_per_sample(b, stopping) + 1)
        parts = {"timed": w["timed"], "warm-up": w["warm-up"], "fresh": w["fresh"]}
    else:
        made = k
        replay = 2 * fresh_calls * ((a + 2 * EMPTY_KERNEL_US) / 1e6 + before_s)
        parts = {"timed": k * (a + b) / 1e6, "warm-up": 0.0, "fresh": replay if fresh else 0.0}
    if made < soak:  # at the cell's per-call time, though its soak calls follow no flush
        checks += (soak - made) * a / 1e6 + _check_s(ws, copy, outputs)
    return {**parts, "checks": checks, "reference": 0.0, "flush/producer": 2 * k * before_s}


def split_reference(copy_row: Mapping, mode: str, stopping: Stopping, warm: int = 1) -> float:
    """Seconds of GPU work of one reference cell: the copy kernel timed against the baseline
    (its `time_us` the copy's, `base_time_us` the baseline's), warm-up calls included in hot
    (cold and after-write: the flush or producer before each call is "flush/producer")."""
    a, b, k = (
        float(copy_row["time_us"]),
        float(copy_row["base_time_us"]),
        int(copy_row["n_samples"]),
    )
    if mode != "hot":
        return k * (a + b) / 1e6
    calls = calls_per_sample(b, stopping)
    return k * (calls + warm) * (a + b) / 1e6


def _figures(r: Mapping) -> bool:
    need = ("time_us", "base_time_us", "n_samples", "ws_bytes")
    return all(r.get(k) is not None and r.get(k) == r.get(k) for k in need)  # not NaN


def _dram_gbps(trials: Sequence[Mapping]) -> dict[str, float]:
    """Per mode, the copy kernel's throughput at the run's largest size: the rate the cold
    flush (a memset of 2 x L2 bytes) is estimated at."""
    best: dict[str, tuple[int, float]] = {}
    for r in trials:
        if r.get("role") == "copy" and r.get("status") == "ok" and r.get("copy_gbps"):
            ws, mode = int(r["ws_bytes"]), r.get("mode", "?")
            if ws > best.get(mode, (-1, 0.0))[0]:
                best[mode] = (ws, float(r["copy_gbps"]))
    return {mode: g for mode, (_, g) in best.items()}


def _before_s(r: Mapping, mode: str, l2: int, dram_gbps: float | None) -> float:
    """Seconds of the work before one call of a cell: cold's flush (2 x L2 bytes at the
    copy's rate at the largest size), after-write's producer (the input rewritten: the cell's
    bytes at the copy's rate at its size); 0 in hot mode or without the figures."""
    if mode == "cold" and dram_gbps:
        return 2 * l2 / (dram_gbps * 1e9)
    if mode == "after-write" and r.get("copy_gbps"):
        return int(r["ws_bytes"]) / (float(r["copy_gbps"]) * 1e9)
    return 0.0


def phase_split(manifest: Mapping, trials: Iterable[Mapping]) -> dict[str, dict]:
    """Per mode: {"cells": candidate cells of any status, "ok": those with figures,
    "reference": reference cells, "parts": {part: seconds}, "phases": {"<mode>/<phase>":
    seconds}}. "phases" is filled only for the classic executor, whose phase names PART_PHASE
    knows; another executor's GPU work is known in total, not per phase."""
    stop = manifest["stopping"]
    stop = stop if isinstance(stop, Stopping) else Stopping(**stop)
    fresh, outputs = fresh_replayed(manifest), outputs_per_side(manifest)
    harness = manifest.get("harness") or {}
    soak = int(harness.get("soak_calls", SOAK))
    fresh_calls = int((harness.get("fresh_input") or {}).get("blocked_calls", BLOCKED_FRESH_CALLS))
    warm = warm_up_calls(manifest)
    trials = list(trials)
    l2 = int((manifest.get("device") or {}).get("l2_bytes") or 0)
    dram = _dram_gbps(trials)
    out: dict[str, dict] = {}
    for r in trials:
        mode = r.get("mode", "?")
        m = out.setdefault(
            mode, {"cells": 0, "ok": 0, "reference": 0, "parts": dict.fromkeys(SPLIT_PARTS, 0.0)}
        )
        role = r.get("role")
        if role == "candidate":
            m["cells"] += 1
        if role not in ("candidate", "copy") or r.get("status") != "ok" or not _figures(r):
            continue
        w, before = warm(int(r["ws_bytes"])), _before_s(r, mode, l2, dram.get(mode))
        if role == "candidate":
            m["ok"] += 1
            cell = split_cell(r, mode, stop, w, fresh, outputs, soak, fresh_calls, before)
            for part, sec in cell.items():
                m["parts"][part] += sec
        else:
            m["reference"] += 1
            m["parts"]["reference"] += split_reference(r, mode, stop, w)
            m["parts"]["flush/producer"] += 2 * int(r["n_samples"]) * before
    classic = executor_kind(manifest) == "classic"
    for mode, m in out.items():
        m["phases"] = {}
        if classic:
            for part, s in m["parts"].items():
                key = f"{mode}/{PART_PHASE[part]}"
                m["phases"][key] = m["phases"].get(key, 0.0) + s
    return out
