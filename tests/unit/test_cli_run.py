"""`sweeper run` through typer's CliRunner: replay of a recorded run, and no-GPU errors."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from sweeper import api
from sweeper.analyze.store import load_manifest, read_trials
from sweeper.cli import app
from sweeper.plan.gpus import lookup
from sweeper.run.replay import ModelExecutor

L2 = lookup("h200").l2_bytes


def _curve(fast, slow):
    return lambda ws, l2: fast if ws < 0.9 * l2 else slow


@pytest.fixture()
def recorded(tmp_path):
    plan = api.plan("h200", out=str(tmp_path / "plan.json"), dtypes="fp32")
    ex = ModelExecutor(
        {"a": _curve(9000.0, 3600.0), "b": _curve(6000.0, 4500.0)},
        l2_bytes=L2,
        baseline=_curve(5000.0, 4300.0),
        copy=_curve(4800.0, 4800.0),
    )
    run_dir = api.run(str(plan.path), executor=ex, out_root=str(tmp_path / "res"), run_id="rec")
    return plan.path, run_dir


def test_run_replays_a_recorded_run_and_prints_a_summary(recorded, tmp_path):
    plan_path, run_dir = recorded
    res = CliRunner().invoke(
        app,
        [
            "run",
            str(plan_path),
            "--replay",
            str(run_dir),
            "--root",
            str(tmp_path / "re"),
            "--run-id",
            "again",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "fp32" in res.output and "best/base" in res.output
    again = tmp_path / "re" / "h200" / "again"
    assert load_manifest(again)["status"] == "complete"
    a = {t["cell_key"] for t in read_trials(run_dir)[0]}
    b = {t["cell_key"] for t in read_trials(again)[0]}
    assert a == b


def test_run_without_a_gpu_is_one_clear_line(monkeypatch, tmp_path):
    from sweeper.errors import NoGPUError
    from sweeper.plan import gpus

    def no_gpu(*a, **k):
        raise NoGPUError("no CUDA driver found")

    monkeypatch.setattr(gpus, "detect", no_gpu)
    res = CliRunner().invoke(app, ["run"])
    assert res.exit_code == 1
    assert res.output.strip().splitlines()[-1].startswith("error: no CUDA driver")


def test_run_rejects_an_unknown_mode(recorded):
    plan_path, run_dir = recorded
    res = CliRunner().invoke(
        app, ["run", str(plan_path), "--modes", "warm", "--replay", str(run_dir)]
    )
    assert res.exit_code == 1
    assert "unknown mode 'warm'" in res.output


def test_replay_of_a_cell_not_recorded_is_an_error(recorded, tmp_path):
    plan_path, run_dir = recorded
    res = CliRunner().invoke(
        app,
        [
            "run",
            str(plan_path),
            "--replay",
            str(run_dir),
            "--modes",
            "cold",
            "--root",
            str(tmp_path / "x"),
        ],
    )
    assert res.exit_code == 1
    assert "not in the recorded run" in res.output


def test_run_and_compare_print_their_summaries_as_json(recorded, tmp_path):
    import json

    plan_path, run_dir = recorded
    args = ["run", str(plan_path), "--replay", str(run_dir), "--root", str(tmp_path / "re")]
    res = CliRunner().invoke(app, [*args, "--run-id", "j", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    again = tmp_path / "re" / "h200" / "j"
    assert doc["run"] == str(again) and "best/base min" in doc["columns"]
    assert [r[1] for r in doc["rows"]] == ["fp32"]
    res = CliRunner().invoke(app, ["compare", str(run_dir), str(again), "--json"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    # a replay answers every cell with the recorded times: all agree exactly
    assert rep["common_cells"] == len(read_trials(run_dir)[0])
    assert rep["ratio"]["within"] == 1.0 and rep["ratio"]["p95_dev"] == 0.0
    text = CliRunner().invoke(app, ["compare", str(run_dir), str(again)]).output
    ranges = [x for x in text.splitlines() if x.strip().startswith("ws (")]
    assert ranges and all("within 3%: time_us 100.0%, ratio 100.0%" in x for x in ranges)


def test_an_unknown_grid_is_one_line_and_writes_nothing(recorded, tmp_path):
    plan_path, run_dir = recorded
    root = tmp_path / "none"
    res = CliRunner().invoke(
        app,
        ["run", str(plan_path), "--replay", str(run_dir), "--root", str(root), "--grid", "nope"],
    )
    assert res.exit_code == 1
    assert res.output.strip().splitlines() == [
        "error: --grid 'nope': known grids are default, extended"
    ]
    assert not root.exists()


def test_a_command_without_a_run_names_the_newest_complete_one(recorded, tmp_path, monkeypatch):
    plan_path, run_dir = recorded
    root = run_dir.parent.parent  # .../res, holding h200/rec
    monkeypatch.chdir(root.parent)
    (root.parent / "results").symlink_to(root)
    res = CliRunner().invoke(app, ["select"])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[0] == "run: results/h200/rec (the newest complete run)"
