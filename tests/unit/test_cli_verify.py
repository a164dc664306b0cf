"""`sweeper verify`'s printout through CliRunner, on a report of verify's shape (no GPU):
it lists at most 20 failures per kind, and says how many there are when there are more."""

from typer.testing import CliRunner

from sweeper import api
from sweeper.cli import app


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
