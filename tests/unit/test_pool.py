"""A run measured on several GPUs (sweeper.run.pool) records what the run on one GPU records.

The run: a replay of results/h200/aw-4's fp16 part (a climbing run with refinement, bracket
and confirmation rounds), measured once by one replay and once by a pool of replays standing
for GPUs; the pooled run's trial log is the one-GPU run's, line for line, but for the device
each line names. A worker lost part way has its sizes measured by another, with no cell lost
or measured twice.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
from pathlib import Path

import pytest
from test_resume_exact import config, recorded  # noqa: F401 (a fixture)

from sweeper.analyze.store import load_manifest, read_trials
from sweeper.api import planned_sizes
from sweeper.errors import SweeperError
from sweeper.run.pool import LocalWorker, PoolExecutor, WorkerLost
from sweeper.run.replay import ReplayExecutor
from sweeper.run.runner import start


def lines(run_dir: Path) -> list[dict]:
    """The trial log without what differs between any two runs of it (device, run id)."""
    return [
        {k: v for k, v in t.items() if k not in ("device", "run_id")}
        for t in read_trials(run_dir)[0]
    ]


def figures(run_dir: Path) -> list[tuple]:
    """Each cell of a run and what it measured."""
    return [
        (t["cell_key"], t["status"], t["gbps"], t["ratio"], t["ratio_lo"], t["ratio_hi"])
        for t in read_trials(run_dir)[0]
    ]


@pytest.fixture(scope="module")
def one_gpu(recorded, tmp_path_factory) -> Path:  # noqa: F811
    root = tmp_path_factory.mktemp("one")
    return start(config(root, "one"), recorded)


class Dropping(LocalWorker):
    """A worker whose GPU goes away at its `lose_at`-th size (every call after fails)."""

    def __init__(self, ex, name, lose_at: int | None):
        super().__init__(ex, name)
        self.lose_at, self.sizes, self.gone = lose_at, 0, False

    def call(self, method, *args):
        if method == "measure_size":
            self.sizes += 1
            self.gone = self.gone or self.sizes == self.lose_at
        if self.gone:
            fut = cf.Future()
            fut.set_exception(WorkerLost(self.name))
            return fut
        return super().call(method, *args)


@pytest.mark.parametrize("gpus", [2, 3])
def test_a_pooled_run_records_what_one_gpu_records(recorded, one_gpu, tmp_path, gpus):  # noqa: F811
    cfg = config(tmp_path, "pooled")
    pool = PoolExecutor([LocalWorker(recorded, f"gpu{i}") for i in range(gpus)], planned_sizes(cfg))
    run_dir = start(cfg, pool)
    assert lines(run_dir) == lines(one_gpu)
    trials = read_trials(run_dir)[0]
    used = {t["device"] for t in trials}
    assert used == set(range(gpus))  # every GPU measured a share
    by_size: dict[int, set] = {}
    for t in trials:
        by_size.setdefault(t["n"], set()).add(t["device"])
    assert all(len(d) == 1 for d in by_size.values())  # a size stays on one GPU
    m = load_manifest(run_dir)
    assert m["status"] == "complete" and len(m["devices"]) == gpus


def test_a_lost_worker_costs_no_cell_and_no_duplicate(recorded, one_gpu, tmp_path):  # noqa: F811
    cfg = config(tmp_path, "lost")
    workers = [Dropping(recorded, "gpu0", None), Dropping(recorded, "gpu1", 25)]
    pool = PoolExecutor(workers, planned_sizes(cfg))
    run_dir = start(cfg, pool)
    assert lines(run_dir) == lines(one_gpu)
    assert pool.alive == [True, False]
    trials = read_trials(run_dir)[0]
    assert len({t["cell_key"] for t in trials}) == len(trials)


def test_every_worker_lost_stops_the_run_and_it_resumes_exactly(recorded, one_gpu, tmp_path):  # noqa: F811
    cfg = config(tmp_path, "gone")
    pool = PoolExecutor([Dropping(recorded, "gpu0", 40)], planned_sizes(cfg))
    pool.replays = False  # as GPUs: the cells measured before are kept
    with pytest.raises(SweeperError, match="every GPU worker of the run was lost"):
        start(cfg, pool)
    run_dir = tmp_path / "h200" / "gone"
    m = json.loads((run_dir / "manifest.json").read_text())
    assert m["status"] == "interrupted"
    kept = len(read_trials(run_dir)[0])
    assert kept > 0
    again = PoolExecutor(
        [LocalWorker(recorded, "gpu0"), LocalWorker(recorded, "gpu1")], planned_sizes(cfg)
    )
    start(cfg, again, resume=run_dir)
    assert lines(run_dir) == lines(one_gpu)


def test_gpus_of_two_models_are_not_one_run(recorded, tmp_path):  # noqa: F811
    class Other(ReplayExecutor):
        def __init__(self, source):
            self.__dict__.update(source.__dict__)

        def describe(self):
            d = super().describe()
            return {**d, "device": {**d["device"], "name": "NVIDIA H100 80GB HBM3"}}

    cfg = config(tmp_path, "mixed")
    with pytest.raises(SweeperError, match="one run measures one GPU model"):
        PoolExecutor(
            [LocalWorker(recorded, "a"), LocalWorker(Other(recorded), "b")], planned_sizes(cfg)
        )


def test_the_planned_sizes_are_dealt_in_turn_and_added_ones_follow_the_size_below():
    pool = PoolExecutor.__new__(PoolExecutor)
    pool.alive = [True, True, True]
    pool._planned = {"fp32": [10, 20, 30, 40]}
    assert [pool.owner("fp32", n) for n in (10, 20, 30, 40)] == [0, 1, 2, 0]
    assert [pool.owner("fp32", n) for n in (5, 15, 35, 99)] == [0, 0, 2, 0]
    pool.alive[1] = False
    assert [pool.owner("fp32", n) for n in (10, 20, 30, 40)] == [0, 2, 0, 2]


def test_a_gpu_reading_the_baseline_slower_shows_in_the_spread(recorded, one_gpu, tmp_path):  # noqa: F811
    from sweeper.analyze.spread import baseline_spread, spread_lines

    cfg = config(tmp_path, "spread")
    run_dir = start(
        cfg, PoolExecutor([LocalWorker(recorded, f"gpu{i}") for i in range(2)], planned_sizes(cfg))
    )
    trials = read_trials(run_dir)[0]
    manifest = load_manifest(run_dir)
    even = baseline_spread(trials, manifest)
    assert [r["device"] for r in even] == [0, 1]
    assert all(r["cells"] > 50 and abs(r["median"] - 1) < 0.02 for r in even)
    slow = [
        {**t, "gbps": t["gbps"] * 0.95} if t["role"] == "baseline" and t["device"] == 1 else t
        for t in trials
    ]
    by_dev = {r["device"]: r for r in baseline_spread(slow, manifest)}
    assert by_dev[1]["median"] == pytest.approx(0.95 * even[1]["median"], rel=0.02)
    assert by_dev[0]["median"] == pytest.approx(even[0]["median"] / 0.95, rel=0.02)
    assert (
        spread_lines(trials, manifest)[3]
        == "| GPU | device | baseline cells | median | p10 - p90 |"
    )
    assert baseline_spread(read_trials(one_gpu)[0], load_manifest(one_gpu)) is None


def test_the_example_campaign_reads():
    from sweeper.run.campaign import load_campaign

    root = Path(__file__).resolve().parents[2]
    c = load_campaign(root / "examples" / "fleet.toml")
    assert c.name == "relu-fleet" and [r.gpus for r in c.runs] == [2, 1]
    assert all(r.plan.is_file() for r in c.runs)
    assert c.results.resolve() == (root / "results").resolve()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--devices", "0,x"], "--devices '0,x': expected 'all' or distinct GPU ordinals"),
        (["--devices", "0,0"], "--devices '0,0': expected 'all' or distinct GPU ordinals"),
        (["--devices", "0", "--replay", "R"], "--replay answers from a recorded run"),
    ],
)
def test_a_bad_devices_option_is_one_line(tmp_path, args, message):
    from typer.testing import CliRunner

    from sweeper.cli import app

    root = Path(__file__).resolve().parents[2]
    res = CliRunner().invoke(
        app, ["run", str(root / "sweeps" / "h200.json"), "--root", str(tmp_path), *args]
    )
    assert res.exit_code == 1, res.output
    lines_out = res.stderr.strip().splitlines()
    assert len(lines_out) == 1 and message in lines_out[0], res.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_pooled_run_times_each_confirmation_round_as_the_run_did(tmp_path):
    """A run with confirmation rounds (a synthetic GPU whose confirmation cells draw their own
    noise), replayed on one worker and on two: each round's cells are answered as confirmation
    cells, never as the candidate cells of their size."""
    from sweeper import api
    from sweeper.plan.gpus import lookup
    from sweeper.run.replay import ModelExecutor

    plan = api.plan("h200", out=str(tmp_path / "h200.json"), dtypes="fp32")
    curve = lambda fast, slow: lambda ws, _l2: fast if ws < 0.9 * _l2 else slow  # noqa: E731
    model = ModelExecutor(
        {"a": curve(9000.0, 3600.0), "b": curve(8950.0, 3610.0)},
        l2_bytes=lookup("h200").l2_bytes,
        baseline=curve(5000.0, 4300.0),
        copy=curve(4800.0, 4800.0),
    )
    rec = api.run(str(plan.path), executor=model, out_root=str(tmp_path / "rec"), run_id="rec")
    assert any(t["role"] == "confirm" for t in read_trials(rec)[0])
    runs = {}
    for name, pooled in (("one", False), ("two", True)):
        req = api.RunRequest(plan_path=str(plan.path), out_root=str(tmp_path / name), run_id=name)
        replay = ReplayExecutor(rec)
        m = api._measure(req, replay, detect=False)
        cfg = api._run_config(req, m)
        ex = replay
        if pooled:
            ex = PoolExecutor(
                [LocalWorker(ReplayExecutor(rec), f"gpu{i}") for i in range(2)],
                api.planned_sizes(cfg),
            )
        runs[name] = start(cfg, ex)

    assert figures(runs["two"]) == figures(runs["one"]) == figures(rec)


def test_the_report_of_a_pooled_run_shows_each_gpus_baseline(recorded, tmp_path):  # noqa: F811
    from sweeper import api

    cfg = config(tmp_path, "report")
    run_dir = start(
        cfg, PoolExecutor([LocalWorker(recorded, f"gpu{i}") for i in range(2)], planned_sizes(cfg))
    )
    text = api.report(str(run_dir)).read_text()
    env = text.split("## Environment", 1)[1].split("\n## ", 1)[0]
    assert "Measured on 2 GPUs, each size on one of them" in env
    assert "| 0 | NVIDIA H200 |" in env and "| 1 | NVIDIA H200 |" in env
