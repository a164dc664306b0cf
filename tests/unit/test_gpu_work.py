"""tools/gpu_work.py: the GPU-work floor of a hot run's cells, from its recorded samples."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from sweeper.run.stats import Stopping

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gpu_work", ROOT / "tools/gpu_work.py")
gw = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gw)
STOP = {"target_sample_us": Stopping().target_sample_us, "max_calls": Stopping().max_calls}


def test_calls_per_sample_is_the_calibrations_rule():
    src = (ROOT / "sweeper/run/timers.py").read_text()
    assert (
        "min(stop.max_calls, max(1, math.ceil(stop.target_sample_us / max(per_call, 0.5))))" in src
    )
    assert gw.calls_per_sample(1.0, STOP) == 128  # capped: 150 calls of 1 us
    assert gw.calls_per_sample(0.1, STOP) == 128
    assert gw.calls_per_sample(10.0, STOP) == 15
    assert gw.calls_per_sample(200.0, STOP) == 1


def test_a_cells_work_by_part():
    cell = {"time_us": 8.0, "base_time_us": 10.0, "n_samples": 12}
    w = gw.cell_work(cell, STOP)  # 15 calls per sample
    assert w["timed"] == pytest.approx(12 * 15 * 18 / 1e6)
    assert w["warm-up"] == pytest.approx(12 * 18 / 1e6)
    assert w["fresh"] == pytest.approx((2 * 16 * 8 + 4 * 15 * gw.EMPTY_KERNEL_US) / 1e6)


def test_the_floor_of_a_shipped_run_counts_its_ok_hot_cells(capsys):
    from sweeper.analyze.store import read_trials

    run = ROOT / "results/h200/hot-5"
    trials, _ = read_trials(run)
    ok = [t for t in trials if t["role"] == "candidate" and t["status"] == "ok"]
    assert gw.main([str(run)]) == 0
    last = [x for x in capsys.readouterr().out.splitlines() if x.startswith("| all |")][0]
    cells, *parts, floor, per_cell = [float(x) for x in last.strip("|").split("|")[2:]]
    assert cells == len(ok)
    assert floor == pytest.approx(sum(parts), abs=0.2)
    assert floor == pytest.approx(sum(sum(gw.cell_work(t, STOP).values()) for t in ok), abs=0.1)


def test_a_run_without_hot_mode_is_refused_in_one_line(capsys):
    assert gw.main([str(ROOT / "results/h200/aw-3")]) == 2
    err = capsys.readouterr()
    assert err.out == "" and err.err.count("\n") == 1 and "not a hot run" in err.err


def test_capping_the_samples_lowers_only_the_parts_that_scale_with_them():
    cell = {"time_us": 8.0, "base_time_us": 10.0, "n_samples": 16}
    full, capped = gw.cell_work(cell, STOP), gw.cell_work({**cell, "n_samples": 8}, STOP)
    assert capped["timed"] == pytest.approx(full["timed"] / 2)
    assert capped["warm-up"] == pytest.approx(full["warm-up"] / 2)
    assert capped["fresh"] == full["fresh"]


def test_max_samples_must_be_positive(capsys):
    assert gw.main([str(ROOT / "results/h200/hot-5"), "--max-samples", "0"]) == 2
    assert "--max-samples 0" in capsys.readouterr().err
