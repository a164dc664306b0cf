"""What the GPU probe scripts (probe_ideas, probe_bias, probe_layouts) share: a buffer set's
data pointers, the exported launch_relu as a pairing side, and the CSV they write."""

from __future__ import annotations

import csv
from pathlib import Path


def side_ptrs(b, side: str) -> tuple[int, int]:
    """(x, y) device pointers of buffer set `side` ("A" or "B") of an executor _Buffers."""
    x, y, _ = b.side(side)
    return tuple(t.__cuda_array_interface__["data"][0] for t in (x, y))


def export_on(exported: dict, dtype: str, b, n: int):
    """side -> launch(stream) of the exported launch_relu for `dtype` on that buffer set."""

    def on(side):
        xp, yp = side_ptrs(b, side)
        return lambda s: exported[dtype](xp, yp, n, int(s.handle))

    return on


def c_side(b, call, what: str):
    """side -> launch(stream) that calls `call(x_ptr, y_ptr, stream_handle)` (a ctypes
    function returning a cudaError) on that buffer set, raising on a non-zero error."""

    def on(side):
        xp, yp = side_ptrs(b, side)

        def launch(s):
            rc = call(xp, yp, int(s.handle))
            if rc:
                raise RuntimeError(f"{what} failed: cudaError {rc}")

        return launch

    return on


def write_csv(rows: list[dict], path: Path) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {path}")
