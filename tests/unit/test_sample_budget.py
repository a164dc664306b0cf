"""lab/tools/sample_budget.py: a run's ratios from fewer samples per half, against another run."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from sweeper.analyze.store import TrialWriter

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("sample_budget", ROOT / "lab/tools/sample_budget.py")
sb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sb)


def cell(config: str, a: list[float], b: list[float], parts: list[int] | None, ratio: float):
    return {"run_id": "r", "mode": "hot", "dtype": "fp32", "n": 1024, "ws_bytes": 8192,
            "role": "candidate", "config": config, "status": "ok", "ratio": ratio,
            "n_samples": len(a), "samples_us": a, "base_samples_us": b,
            "sample_parts": parts}  # fmt: skip


def write(folder: Path, cells: list[dict]) -> str:
    w = TrialWriter(folder)
    for c in cells:
        w.append(c)
    w.close()
    return str(folder)


def test_a_cell_is_summarised_again_from_its_first_pairs_per_half():
    # each half: two calls at 1 us, then two at 3 us; the baseline 1 us throughout
    c = cell("x", [1, 1, 3, 3, 1, 1, 3, 3], [1.0] * 8, [4, 4], 0.5)
    assert sb.truncated_ratio(c, 2) == pytest.approx(1.0)
    assert sb.truncated_ratio(c, 4) == pytest.approx(0.5)
    assert sb.truncated_ratio(c, 9) == pytest.approx(0.5)
    assert sb.truncated_ratio({**c, "sample_parts": [8]}, 2) is None


def test_agreement_with_the_other_run_by_samples_kept(tmp_path, capsys):
    slow_tail = [1, 1, 3, 3, 1, 1, 3, 3]
    mine = [cell("x", slow_tail, [1.0] * 8, [4, 4], 0.5), cell("y", [1.0] * 8, [1.0] * 8, [4, 4], 1.0),
            cell("z", [1.0] * 4, [1.0] * 4, [4], 1.0)]  # fmt: skip
    theirs = [cell(c, [1.0] * 4, [1.0] * 4, [2, 2], 1.0) for c in "xyz"]
    a, b = write(tmp_path / "a", mine), write(tmp_path / "b", theirs)
    rows = {r["per_half"]: r for r in sb.budget(a, b, [4, 2])}
    assert rows[4]["cells"] == rows[2]["cells"] == 2  # z has one half: left out
    assert rows[4]["within"] == 0.5 and rows[2]["within"] == 1.0
    assert rows[2]["capped"] == pytest.approx(2 / 3) and rows[4]["capped"] == 0
    assert sb.main([a, b, "--per-half", "4,2"]) == 0
    assert "| 2 | 66.7% | 100.0% |" in capsys.readouterr().out


def test_bad_input_gets_one_line_and_status_2(tmp_path, capsys):
    a = write(tmp_path / "a", [cell("x", [1.0] * 4, [1.0] * 4, [2, 2], 1.0)])
    b = write(tmp_path / "b", [cell("y", [1.0] * 4, [1.0] * 4, [2, 2], 1.0)])
    for args in ([a, b], [a, a, "--per-half", "0"], [a, a, "--per-half", "x"]):
        assert sb.main(args) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1
        assert "--per-half" in err or "in common" in err
