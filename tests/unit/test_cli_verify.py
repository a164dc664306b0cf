"""`sweeper verify`'s printout through CliRunner, on a report of verify's shape (no GPU):
it lists at most 20 failures per kind, and says how many there are when there are more."""

import pytest
from typer.testing import CliRunner

from sweeper import api
from sweeper.cli import app
from sweeper.errors import SweeperError


def _row(i):
    return {"dtype": "fp32", "ws_bytes": 1000 + i, "n": 250 + i, "vs_numba": 1.0,
            "ratio": 0.95, "ratio_lo": 0.93, "ratio_hi": 0.97, "baseline": "torch"}  # fmt: skip


def test_more_than_20_losses_are_counted_not_silently_cut(monkeypatch):
    losses = [_row(i) for i in range(66)]
    rep = {
        "cases": [{"ok": True}] * 4,
        "failed": [],
        "dispatch_mismatches": [],
        "timing_csv": "x/verify_timing.csv",
        "timing": {
            "sizes": 429,
            "max_parity_dev": 0.047,
            "min_ratio": 0.915,
            "parity_failures": [],
            "baseline_losses": losses,
            "bit_failures": [],
            "ok": False,
        },  # fmt: skip
    }
    monkeypatch.setattr(api, "verify", lambda policy, timing=True: rep)
    res = CliRunner().invoke(app, ["verify", "p.json"])
    assert res.exit_code == 1
    assert "66 losses; the first 20 are listed (x/verify_timing.csv)" in res.output
    assert res.output.count("LOSES fp32") == 20
    assert "parity failures;" not in res.output


def test_verify_times_a_cold_only_run_in_cold_mode_and_a_hot_run_in_hot_mode():
    """sweep.sh on a cold-only run (cold-4) crashed in verify: it looked for hot sizes only."""
    from pathlib import Path

    from sweeper.verify import run_sizes

    root = Path(__file__).resolve().parents[2] / "results" / "h200"
    mode, sizes = run_sizes(root / "cold-4", ("fp32", "fp16"), {})
    assert mode == "cold" and len(sizes["fp32"]) > 20 and len(sizes["fp16"]) > 20
    mode, sizes = run_sizes(root / "hot-9", ("fp32", "int8"), {})
    assert mode == "hot" and len(sizes["int8"]) == 115
    with pytest.raises(SweeperError, match="no baseline measurement"):
        run_sizes(root / "cold-4", ("int8",), {})
