"""The physical-limit check: a candidate faster than a ceiling measured in the same run is
refused, whatever its output looks like.

A kernel that skips work when its output already looks right passes every output check, yet
reads faster than the memory system can move its bytes. Its throughput (the row's `gbps`:
bytes read + written / time) is compared with

* the L2-resident ceiling (`manifest["ceiling"]`, measured at the start of every run), at
  every size and in every mode: no working set moves faster than one resident in L2;
* from `COPY_FROM_X_L2` x L2 up, the copy kernel timed at the same size and mode, and the
  device's DRAM peak (`manifest["device"]["dram_peak_gbps"]`, where the spec has one). Inside
  the L2 band honest kernels beat the copy kernel by up to a third, so the copy bound starts
  where the working set is mostly outside L2.

A cell more than `CEILING_MARGIN` times a ceiling gets status `above-ceiling` and is never
selected. docs/methodology.md gives the reason for the margin's value and the highest honest
ratios recorded on the H200.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ABOVE_CEILING = "above-ceiling"
# the reference set beside the copy kernel (GpuExecutor.ceiling_set builds these variants):
# resident-band shapes of the extended grid, grid-stride over one and two waves included
CEILING_CONFIGS = (
    "v16-u2-ld.def-st.cs-b128-stride1",
    "v16-u2-ld.def-st.cs-b256-stride1",
    "v16-u2-ld.def-st.cs-b128-stride2",
    "v16-u1-ld.def-st.cs-b256-flat",
    "v16-u2-ld.def-st.cs-b128-flat",
    "v16-u4-ld.L2el-st.cs-b256-stride4",
)
# a cell above this multiple of any ceiling is refused (docs/methodology.md, "Physical limits")
CEILING_MARGIN = 1.2
# the copy kernel and the DRAM peak bound cells from this many x L2 up
COPY_FROM_X_L2 = 2

L2_RESIDENT = "L2-resident ceiling"
COPY = "copy kernel at this size"
DRAM_PEAK = "DRAM peak"


@dataclass(frozen=True)
class Ceilings:
    """The ceilings of one run; a ceiling the run lacks is None and bounds nothing."""

    l2_bytes: int
    l2_resident_gbps: float | None = None
    dram_peak_gbps: float | None = None
    margin: float = CEILING_MARGIN
    copy_from_x_l2: float = COPY_FROM_X_L2


def harness_doc() -> dict[str, float]:
    """The check's parameters as a run's manifest records them (`harness.ceiling_check`)."""
    return {"margin": CEILING_MARGIN, "copy_from_x_l2": COPY_FROM_X_L2}


def ceilings_of(manifest: Mapping[str, Any]) -> Ceilings:
    """A run's ceilings and the check's parameters, as its manifest records them."""
    params = (manifest.get("harness") or {}).get("ceiling_check") or harness_doc()
    device = manifest.get("device") or {}
    return Ceilings(
        l2_bytes=int((manifest.get("plan") or {}).get("l2_bytes") or device["l2_bytes"]),
        l2_resident_gbps=_positive((manifest.get("ceiling") or {}).get("gbps")),
        dram_peak_gbps=_positive(device.get("dram_peak_gbps")),
        margin=float(params["margin"]),
        copy_from_x_l2=float(params["copy_from_x_l2"]),
    )


def _positive(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) and f > 0 else None


def ratios(
    row: Mapping[str, Any], ceilings: Ceilings, copy_gbps: float | None
) -> list[tuple[str, float, float]]:
    """(ceiling name, its GB/s, the row's GB/s over it) for every ceiling that bounds the row's
    size; empty where the row has no positive GB/s (an infinite one is above every ceiling)."""
    try:
        gbps = float(row.get("gbps"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return []
    if not gbps > 0:  # NaN too
        return []
    bounds = [(L2_RESIDENT, ceilings.l2_resident_gbps)]
    if int(row["ws_bytes"]) >= ceilings.copy_from_x_l2 * ceilings.l2_bytes:
        bounds += [(COPY, _positive(copy_gbps)), (DRAM_PEAK, ceilings.dram_peak_gbps)]
    return [(name, v, gbps / v) for name, v in bounds if v is not None]


def check(row: Mapping[str, Any], ceilings: Ceilings, copy_gbps: float | None) -> tuple[str, str]:
    """The row's (status, status_detail) after the physical-limit check: `above-ceiling`, naming
    the ceiling it exceeds most, where an ok row is above `margin` x any ceiling; else the
    row's own. A row that already failed another check keeps that status."""
    status, detail = row.get("status", "ok"), row.get("status_detail", "") or ""
    if status != "ok":
        return status, detail
    over = [r for r in ratios(row, ceilings, copy_gbps) if r[2] > ceilings.margin]
    if not over:
        return status, detail
    name, value, ratio = max(over, key=lambda r: r[2])
    return ABOVE_CEILING, (
        f"{float(row['gbps']):.0f} GB/s is {ratio:.2f}x the {name} ({value:.0f} GB/s); "
        f"the limit is {ceilings.margin:g}x"
    )
