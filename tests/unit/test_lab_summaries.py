"""The lab's CPU summaries reproduce what their folders hold, from the files kept there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_cell_phases_summary_reproduces_its_summary_txt():
    out = subprocess.run(
        [sys.executable, "lab/tools/cell_phases_summary.py"],
        capture_output=True, text=True, cwd=ROOT, check=True,
    ).stdout  # fmt: skip
    assert out == (ROOT / "lab" / "h200" / "cell-phases" / "summary.txt").read_text()
