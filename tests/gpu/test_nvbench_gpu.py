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


@pytest.mark.parametrize("mib", SIZES_MIB)
def test_the_cold_timer_agrees_with_nvbench_within_3_percent(cross_check, mib):
    """Both of sweeper's passes, the one before nvbench and the one after it, at the default
    of one sample per hold (sweeper.run.timers.BLOCKED_SAMPLES_PER_HOLD)."""
    rows = {r["ws_bytes"] >> 20: r for r in cross_check["rows"]}
    assert sorted(rows) == sorted(SIZES_MIB)
    assert cross_check["warmup"]["calls"] > 0
    r = rows[mib]
    assert r["nvbench_us"] and r["nvbench_us"] > 0, r
    for tag in cross_check["sweeper_passes"]:
        assert abs(r[f"sweeper_{tag}_vs_nvbench"] - 1) <= 0.03, (tag, r)
