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
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping

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
