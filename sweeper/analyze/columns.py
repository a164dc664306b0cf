"""The tidy results table: one row per measured cell (mode, dtype, n, config).

This is the hand-off between the runner (store.py writes it) and everything downstream
(select, policy, plots, report), which must work from this table alone, without a GPU.
"""

from __future__ import annotations

# column -> (dtype, meaning)
COLUMNS: dict[str, tuple[str, str]] = {
    "run_id": ("str", "run folder name"),
    "gpu": ("str", "GPU key from the spec table, e.g. 'h200'"),
    "mode": ("str", "residency mode: hot | cold | after-write"),
    "pattern": ("str", "call pattern: preallocated | allocating"),
    "dtype": ("str", "fp32 | fp16 | bf16 | int8"),
    "n": ("int64", "elements"),
    "ws_bytes": ("int64", "working set = input + output bytes = 2 * n * itemsize"),
    "role": ("str", "candidate | confirm (a candidate's second measurement) | baseline | copy"),
    "config": ("str", "dtype-free readable config name; 'torch' / 'copy' for those roles"),
    "variant_id": ("str", "full stable id (dtype, config, kernel-source hash); '' for others"),
    "vec_bytes": ("Int64", "bytes per access (candidates only)"),
    "unroll": ("Int64", "independent accesses in flight per thread"),
    "load_hint": ("str", "load cache operator, e.g. 'default', 'cs', 'L2::evict_last'"),
    "store_hint": ("str", "store cache operator, e.g. 'default', 'cs'"),
    "block": ("Int64", "threads per block"),
    "grid": ("str", "grid shape, e.g. 'stride4' (4 waves/SM, grid-stride) or 'onepass'"),
    "phase": ("str", "screen | sweep | refine | confirm"),
    "status": ("str", "ok | mismatch | guard | above-ceiling | error (above-peak: older files)"),
    "status_detail": ("str", "why, when status != ok"),
    "time_us": ("float64", "median time per call, microseconds"),
    "time_lo_us": ("float64", "95% CI of the median, low"),
    "time_hi_us": ("float64", "95% CI of the median, high"),
    "gbps": ("float64", "ws_bytes / time_us / 1e3 (GB/s, 1 GB = 1e9 bytes)"),
    "base_time_us": ("float64", "baseline median time from the paired (ABBA) samples"),
    "ratio": ("float64", "base_time_us / time_us: speedup over the baseline (>1 = faster)"),
    "ratio_lo": ("float64", "95% CI of the ratio, low"),
    "ratio_hi": ("float64", "95% CI of the ratio, high"),
    "copy_gbps": ("float64", "device-to-device copy bandwidth at this ws_bytes, same run"),
    "n_samples": ("int64", "timed samples behind time_us"),
    # the batched executor's candidate rows (sweeper.analyze.position); empty for the classic one
    "batch": ("Int64", "run-wide index of the batch (one hold of the stream) that timed the cell"),
    "batch_pos": ("Int64", "0-based position of the cell in its batch"),
    "batch_cells": ("Int64", "cells in that batch"),
    "sm_mhz": ("Int64", "SM clock (NVML) when the batch ended; empty without NVML"),
    "clock_throttled": ("Int64", "1 where its batch throttled on every repeat and was kept"),
    "canaries": (
        "Int64",
        "canary calls checked in the cell's untimed back-to-back replays (sweeper.run.batched)",
    ),
    # the floor of the search (sweeper.analyze.select, "The floor")
    "floor": (
        "Int64",
        "1 on the rows of the floor config: the grid's closest to the baseline's launch",
    ),
}
# columns a results table written before them lacks: read as empty
ADDED_COLUMNS = ("batch", "batch_pos", "batch_cells", "sm_mhz", "clock_throttled", "canaries",
                 "floor")  # fmt: skip

# above-ceiling: above a ceiling of the run (sweeper.analyze.ceilings); above-peak (cold above the
# DRAM peak) is read from trial files written before that check replaced it
STATUSES = ("ok", "mismatch", "guard", "above-ceiling", "above-peak", "error")
ROLES = ("candidate", "confirm", "baseline", "copy")
MEASURED = ("candidate", "confirm")  # the roles of a config's cells
MODES = ("hot", "cold", "after-write")


# ---- metrics derived from the table, as targets are checked on them ------------------------


def with_pct_copy(rows, results, mode: str):
    """`rows` (of `results`, in `mode`) with `copy_gbps` and `pct_copy`: their GB/s against
    the copy kernel the run timed at the same dtype and n in that mode (the run's own copy
    rows, not a cached column)."""
    import pandas as pd

    copy = results[(results["role"] == "copy") & (results["mode"] == mode)]
    copy = copy.set_index(["dtype", "n"])["gbps"]
    idx = pd.MultiIndex.from_arrays([rows["dtype"], rows["n"]])
    rows = rows.assign(copy_gbps=copy.reindex(idx).to_numpy())
    return rows.assign(pct_copy=100 * rows["gbps"] / rows["copy_gbps"])


def with_pct_ceiling(rows, ceiling_gbps: float | None):
    """`rows` with `pct_ceiling`: their GB/s against the run's L2-resident ceiling (NaN
    without one)."""
    return rows.assign(
        pct_ceiling=100 * rows["gbps"] / ceiling_gbps if ceiling_gbps else float("nan")
    )
