"""sweeper's cold timer against NVIDIA's nvbench (`cuda-bench`) on one kernel at small,
in-band and DRAM working sets (tools/nvbench_cold.py). docs/methodology.md ("Cold timing and
nvbench") states what each cold flush measures; this checks the figure it gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SIZES_MIB = (4, 8, 48, 256)


@pytest.fixture(scope="module")
def cross_check(tmp_path_factory):
    pytest.importorskip(
        "cuda.bench", reason="nvbench's Python package (cuda-bench) is not installed"
    )
    out = tmp_path_factory.mktemp("nvbench") / "nvbench_cold.json"
    r = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "nvbench_cold.py"), "--sizes",
         ",".join(map(str, SIZES_MIB)), "--out", str(out)],
        capture_output=True, text=True, timeout=480, env={**os.environ},
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    print(r.stdout)  # the table, in the suite's log
    return json.loads(out.read_text())


# At 4 and 8 MiB (5-6 us calls) the agreement depends on the H200 instance and on how many
# cold samples share a held round: docs/methodology.md ("Cold timing and nvbench") has the
# figures. Not met there yet; reported as xfailed, never as passed.
SMALL = pytest.mark.xfail(
    strict=False, reason="cold timer vs nvbench at 4-8 MiB: 0.95-1.11 across instances (open)"
)


@pytest.mark.parametrize("mib", [pytest.param(m, marks=SMALL) if m <= 8 else m for m in SIZES_MIB])
def test_the_cold_timer_agrees_with_nvbench_within_3_percent(cross_check, mib):
    """Both of sweeper's passes, the one before nvbench and the one after it."""
    rows = {r["ws_bytes"] >> 20: r for r in cross_check["rows"]}
    assert sorted(rows) == sorted(SIZES_MIB)
    assert cross_check["warmup"]["calls"] > 0
    r = rows[mib]
    assert r["nvbench_us"] and r["nvbench_us"] > 0, r
    for tag in cross_check["sweeper_passes"]:
        assert abs(r[f"sweeper_{tag}_vs_nvbench"] - 1) <= 0.03, (tag, r)
