"""The GPU-work floor of a hot run's cells (sweeper.analyze.gpuwork)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper.analyze import gpuwork
from sweeper.analyze.store import with_records
from sweeper.stats import Stopping, calls_per_sample

ROOT = Path(__file__).resolve().parents[2]
STOP = Stopping()


def test_calls_per_sample_is_the_calibrations_rule():
    src = (ROOT / "sweeper/run/timers.py").read_text()
    assert "return calls_per_sample(per_call, stop)" in src  # Bench.calibrate_calls
    assert calls_per_sample(1.0, STOP) == 128  # capped: 150 calls of 1 us
    assert calls_per_sample(0.1, STOP) == 128
    assert calls_per_sample(10.0, STOP) == 15
    assert calls_per_sample(200.0, STOP) == 1


def test_a_cells_work_by_part():
    cell = {"time_us": 8.0, "base_time_us": 10.0, "n_samples": 12}
    w = gpuwork.cell_work(cell, STOP)  # 15 calls per sample
    assert w["timed"] == pytest.approx(12 * 15 * 18 / 1e6)
    assert w["warm-up"] == pytest.approx(12 * 18 / 1e6)
    assert w["fresh"] == pytest.approx((2 * 16 * 8 + 4 * 15 * gpuwork.EMPTY_KERNEL_US) / 1e6)
    assert gpuwork.cell_work(cell, {"target_sample_us": 150.0, "max_calls": 128}) == w


def test_the_warm_up_is_the_runs_own():
    """Four warm-up calls per sample and side from L2 / 4 to L2 of working set in a run that
    records the rule, one in a run made before it; the fresh-input replay warms up the same."""
    from sweeper.errors import SweeperError
    from sweeper.stats import WARM_RULE

    l2 = 60 * 2**20
    ruled = gpuwork.warm_up_calls({"harness": {"hot_warm_calls": WARM_RULE},
                                   "device": {"l2_bytes": l2}})  # fmt: skip
    assert [ruled(ws * 2**20) for ws in (8, 20, 60, 64)] == [1, 4, 4, 1]
    assert gpuwork.warm_up_calls({"harness": {}})(20 * 2**20) == 1
    assert gpuwork.warm_up_calls({})(20 * 2**20) == 1
    assert gpuwork.warm_up_calls({"harness": {"hot_warm_calls": 2}})(20 * 2**20) == 2
    with pytest.raises(SweeperError, match="unknown warm-up rule"):
        gpuwork.warm_up_calls({"harness": {"hot_warm_calls": "ceil(something else)"}})
    cell = {"time_us": 8.0, "base_time_us": 10.0, "n_samples": 12}
    one, four = gpuwork.cell_work(cell, STOP), gpuwork.cell_work(cell, STOP, warm=4)
    assert four["warm-up"] == pytest.approx(4 * one["warm-up"]) and four["timed"] == one["timed"]
    assert four["fresh"] - one["fresh"] == pytest.approx(2 * 3 * 8 / 1e6)
    rows = [{"role": "candidate", "mode": "hot", "status": "ok", **cell, "ws_bytes": ws * 2**20}
            for ws in (8, 20)]  # fmt: skip
    f = gpuwork.floor(rows, STOP, warm=ruled)
    assert f["warm-up"] == pytest.approx(one["warm-up"] + four["warm-up"])


def test_the_floor_counts_only_ok_hot_candidates_and_caps_samples():
    cell = {"role": "candidate", "mode": "hot", "status": "ok", "time_us": 8.0,
            "base_time_us": 10.0, "n_samples": 16, "ws_bytes": 2**20}  # fmt: skip
    others = [{**cell, "mode": "cold"}, {**cell, "status": "mismatch"},
              {**cell, "role": "copy"}, {**cell, "n_samples": float("nan")}]  # fmt: skip
    f = gpuwork.floor([cell, *others], STOP)
    assert f["cells"] == 1 and f["timed"] == pytest.approx(gpuwork.cell_work(cell, STOP)["timed"])
    capped = gpuwork.floor([cell], STOP, max_samples=8)
    assert capped["timed"] == pytest.approx(f["timed"] / 2)
    assert capped["warm-up"] == pytest.approx(f["warm-up"] / 2)
    assert capped["fresh"] == f["fresh"]


def gpu_work(*argv: str):
    """`sweeper gpu-work ARGV`: its exit status, stdout and stderr."""
    from typer.testing import CliRunner

    from sweeper.cli import app

    res = CliRunner().invoke(app, ["gpu-work", *argv])
    return res.exit_code, res.stdout, res.stderr


def test_the_floor_of_a_shipped_run_counts_its_ok_hot_cells():
    from sweeper.analyze.store import load_manifest, read_trials

    run = ROOT / "results/h200/hot-7"
    trials, _ = read_trials(run)
    ok = [t for t in trials if t["role"] == "candidate" and t["status"] == "ok"]
    warm = gpuwork.warm_up_calls(load_manifest(run))  # the rule the run recorded
    status, out, _ = gpu_work(str(run))
    assert status == 0
    last = [x for x in out.splitlines() if x.startswith("| all |")][0]
    cells, *parts, total, per_cell = [float(x) for x in last.strip("|").split("|")[2:]]
    assert cells == len(ok)
    assert total == pytest.approx(sum(parts), abs=0.2)
    want = sum(sum(gpuwork.cell_work(t, STOP, warm=warm(int(t["ws_bytes"]))).values()) for t in ok)
    assert total == pytest.approx(want, abs=0.1)
    one_call = sum(sum(gpuwork.cell_work(t, STOP).values()) for t in ok)
    assert total > one_call + 1  # four calls before a sample in part of the band


def test_bad_input_gets_one_line_and_status_1():
    status, out, err = gpu_work(str(ROOT / "results/h200/aw-4"))
    assert status == 1 and out == "" and err.count("\n") == 1 and "not a hot run" in err
    status, _, err = gpu_work(str(ROOT / "results/h200/hot-7"), "--max-samples", "0")
    assert status == 1 and "--max-samples 0" in err


def test_a_run_without_the_fresh_input_replay_counts_none():
    cell = {"role": "candidate", "mode": "hot", "status": "ok", "time_us": 8.0,
            "base_time_us": 10.0, "n_samples": 16, "ws_bytes": 2**20}  # fmt: skip
    assert gpuwork.floor([cell], STOP, fresh=False)["fresh"] == 0
    assert gpuwork.floor([cell], STOP, fresh=False)["timed"] == gpuwork.floor([cell], STOP)["timed"]
    assert gpuwork.fresh_replayed({"harness": {"fresh_input": {"words": 64}}})
    assert not gpuwork.fresh_replayed({"harness": {}}) and not gpuwork.fresh_replayed({})


def test_the_reports_timing_section_states_the_floor():
    import pandas as pd

    from sweeper.report.report import timing

    cell = {"mode": "hot", "role": "candidate", "status": "ok", "time_us": 8.0,
            "base_time_us": 10.0, "n_samples": 16, "ws_bytes": 2**20}  # fmt: skip
    results = pd.DataFrame([cell, {**cell, "role": "copy"}])
    m = {"modes": ["hot"], "stopping": {"target_sample_us": 150.0, "max_calls": 128},
         "harness": {"fresh_input": {}}, "timing": {"total_s": 1.0}}  # fmt: skip
    w = gpuwork.cell_work(cell, STOP)
    line = [x for x in timing(m, results) if "GPU work" in x]
    assert line == [
        f"The hot cells' GPU work, at least: {sum(w.values()):,.1f} s for 1 candidate cells (timed "
        f"{w['timed']:,.1f} s, warm-up calls {w['warm-up']:,.1f} s, fresh-input replay "
        f"{w['fresh']:,.1f} s; `sweeper gpu-work`), {sum(w.values()):.0%} of the run's "
        "wall time."
    ]
    both = timing({**m, "modes": ["hot", "cold"], "harness": {}}, results)
    line = [x for x in both if "GPU work" in x][0]
    assert "fresh-input" not in line and "wall time" not in line  # other modes share the wall
    assert not [x for x in timing(m, results.assign(mode="cold")) if "GPU work" in x]
    assert not [x for x in timing(m) if "GPU work" in x]


def test_the_current_warm_up_counts_a_one_call_run_as_todays_timer_would(tmp_path):
    """A run that recorded no rule (one call: hot-7 with its rule taken out of the manifest);
    --current-warm-up counts four calls per sample and side from L2 / 4 to L2 of working set,
    and nothing else changes."""
    import json
    import shutil

    from sweeper.analyze.store import load_manifest, read_trials
    from sweeper.stats import WARM_RULE, warm_rule

    run = tmp_path / "hot-7"
    shutil.copytree(ROOT / "results/h200/hot-7", run)
    raw = json.loads((run / "manifest.json").read_text())
    del raw["harness"]["hot_warm_calls"]
    del raw["records"]  # and its records made again for the edited fields
    (run / "manifest.json").write_text(json.dumps(with_records(run, raw)))
    m = load_manifest(run)
    assert "hot_warm_calls" not in m["harness"]
    trials, _ = read_trials(run)
    ok = [t for t in trials if t["role"] == "candidate" and t["status"] == "ok"]
    four = warm_rule(WARM_RULE, m["device"]["l2_bytes"])
    want = [gpuwork.cell_work(t, STOP, warm=four(int(t["ws_bytes"]))) for t in ok]

    def last_row(argv):
        status, out, _ = gpu_work(*argv)
        assert status == 0
        row = [x for x in out.splitlines() if x.startswith("| all |")][0]
        return [float(x) for x in row.strip("|").split("|")[2:]], out

    (cells, timed, warm, fresh, total, _), out = last_row([str(run), "--current-warm-up"])
    (_, timed1, warm1, fresh1, _, _), _ = last_row([str(run)])
    assert cells == len(ok) and timed == timed1
    assert warm == pytest.approx(sum(w["warm-up"] for w in want), abs=0.1) and warm > warm1
    assert fresh == pytest.approx(sum(w["fresh"] for w in want), abs=0.1) and fresh > fresh1
    assert WARM_RULE in out and "The run took" not in out
