"""Runs on Ray (sweeper.run.fleet): a local Ray instance with GPUs it is told it has, actors
answering from recorded runs. A run over Ray actors records what one GPU records; an actor
killed part way costs no cell and no duplicate; a campaign of two GPU models gives one run per
model, a policy each and one fleet policy with its header; a campaign's mistakes are one line
before any actor starts."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest
from typer.testing import CliRunner

ray = pytest.importorskip("ray", reason="the ray install extra (CI installs it)")

from test_pool import figures, lines  # noqa: E402

from sweeper import api  # noqa: E402
from sweeper.analyze.store import load_manifest, read_trials  # noqa: E402
from sweeper.api import planned_sizes  # noqa: E402
from sweeper.cli import app  # noqa: E402
from sweeper.plan.gpus import lookup  # noqa: E402
from sweeper.plan.planfile import load_plan  # noqa: E402
from sweeper.run.fleet import RayWorker, actors  # noqa: E402
from sweeper.run.pool import PoolExecutor  # noqa: E402
from sweeper.run.replay import ModelExecutor, ReplayExecutor  # noqa: E402
from sweeper.run.runner import RunConfig, start  # noqa: E402
from sweeper.run.search import search_params  # noqa: E402

FAKE = "FAKE-4090"  # the accelerator type the second model's GPUs are told they are

pytestmark = pytest.mark.xdist_group("ray")  # one Ray instance: its tests in one worker


@pytest.fixture(scope="module", autouse=True)
def cluster():
    """A Ray instance of 4 GPUs: 3 of type H200, 1 of type FAKE-4090 (labels only: the actors
    answer from recorded runs)."""
    ray.init(
        num_cpus=2,
        num_gpus=4,
        resources={"accelerator_type:H200": 1, f"accelerator_type:{FAKE}": 1},
        include_dashboard=False,
        log_to_driver=False,
    )
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> ReplayExecutor:
    """A run of a synthetic H200 (fp32, hot, on the h200 plan), the actors' answers: the pooled
    run itself (its sizes dealt to GPUs, a lost one's redone, confirmation rounds) is tested on
    the shipped aw-4 in test_pool.py; here it is Ray that carries it."""
    base = tmp_path_factory.mktemp("model")
    plan = api.plan("h200", out=str(base / "h200.json"), dtypes="fp32")
    run = api.run(
        str(plan.path), executor=_modelled(), out_root=str(base / "recorded"), run_id="rec"
    )
    return ReplayExecutor(run)


def config(root: Path, run_id: str, recorded: ReplayExecutor) -> RunConfig:
    m = recorded.manifest
    return RunConfig(
        plan=load_plan(m["plan"]["path"]),
        plan_path=m["plan"]["path"],
        dtypes=("fp32",),
        search=search_params(m["search"]),
        out_root=str(root),
        run_id=run_id,
    )


@pytest.fixture(scope="module")
def one_gpu(recorded, tmp_path_factory) -> Path:
    return start(config(tmp_path_factory.mktemp("one"), "one", recorded), recorded)


class Killing(RayWorker):
    """An actor killed (ray.kill: its process ends) when it is sent its `at`-th size."""

    def __init__(self, worker: RayWorker, at: int):
        super().__init__(worker.actor, worker.name)
        self.at, self.sizes = at, 0

    def call(self, method, *args):
        if method == "measure_size":
            self.sizes += 1
            if self.sizes == self.at:
                ray.kill(self.actor)
        return super().call(method, *args)


def test_a_run_on_ray_actors_records_what_one_gpu_records(recorded, one_gpu, tmp_path):
    cfg = config(tmp_path, "ray", recorded)
    workers = actors(partial(ReplayExecutor, recorded.run_dir), 2, "H200")
    pool = PoolExecutor(workers, planned_sizes(cfg))
    try:
        run_dir = start(cfg, pool)
    finally:
        pool.close()
    assert lines(run_dir) == lines(one_gpu)
    assert {t["device"] for t in read_trials(run_dir)[0]} == {0, 1}


def test_a_killed_actor_costs_no_cell_and_no_duplicate(recorded, one_gpu, tmp_path):
    cfg = config(tmp_path, "killed", recorded)
    a, b = actors(partial(ReplayExecutor, recorded.run_dir), 2)
    pool = PoolExecutor([a, Killing(b, at=30)], planned_sizes(cfg))
    try:
        run_dir = start(cfg, pool)
    finally:
        pool.close()
    assert pool.alive == [True, False]
    assert lines(run_dir) == lines(one_gpu)
    trials = read_trials(run_dir)[0]
    assert len({t["cell_key"] for t in trials}) == len(trials)


def test_a_run_asking_for_more_gpus_than_the_cluster_has_is_refused(recorded, monkeypatch):
    monkeypatch.setenv("SWEEPER_ACTOR_START_S", "3")
    # the model the cluster has one GPU of: one actor starts before the refusal, not three
    with pytest.raises(Exception, match=rf"Ray placed \d of 9 GPU workers \(9 GPUs of type {FAKE}"):
        actors(partial(ReplayExecutor, recorded.run_dir), 9, FAKE)


def _curve(fast, slow):
    return lambda ws, l2: fast if ws < 0.9 * l2 else slow


class Modelled(ModelExecutor):
    """A synthetic GPU that describes itself as the catalog's `gpu`."""

    def __init__(self, gpu: str, **kwargs):
        self.spec = lookup(gpu)
        super().__init__(l2_bytes=self.spec.l2_bytes, device_name=self.spec.name, **kwargs)

    def describe(self) -> dict:
        d = super().describe()
        s = self.spec
        return {**d, "device": {**d["device"], "cc": list(s.cc), "sm_count": s.sm_count}}


def _modelled(gpu: str = "h200") -> Modelled:
    """A synthetic `gpu` with two configs, a and b, each fastest in part of the plan."""
    return Modelled(
        gpu,
        curves={"a": _curve(9000.0, 3600.0), "b": _curve(6000.0, 4500.0)},
        baseline=_curve(5000.0, 4300.0),
        copy=_curve(4800.0, 4800.0),
    )


@pytest.fixture(scope="module")
def two_models(tmp_path_factory) -> Path:
    """Runs of two GPU models (synthetic GPUs on the h200 and 4090 plans, fp32, hot) and a
    campaign that measures both again, on Ray actors answering from them."""
    base = tmp_path_factory.mktemp("fleet")
    for gpu in ("h200", "4090"):
        plan = api.plan(gpu, out=str(base / f"{gpu}.json"), dtypes="fp32")
        api.run(
            str(plan.path), executor=_modelled(gpu), out_root=str(base / "recorded"), run_id="rec"
        )
    (base / "fleet.toml").write_text(
        'name = "two"\nresults = "results"\n'
        '[[gpu]]\nplan = "h200.json"\naccelerator_type = "H200"\ngpus = 2\n'
        'replay = "recorded/h200/rec"\n'
        f'[[gpu]]\nplan = "4090.json"\naccelerator_type = "{FAKE}"\n'
        'replay = "recorded/4090/rec"\n'
    )
    return base


def test_a_campaign_of_two_models_gives_one_fleet_policy(two_models):
    res = CliRunner().invoke(app, ["fleet", "run", str(two_models / "fleet.toml")])
    assert res.exit_code == 0, res.output
    results = two_models / "results"
    for gpu in ("h200", "4090"):
        run_dir = results / gpu / f"two-{gpu}"
        assert load_manifest(run_dir)["status"] == "complete"
        assert figures(run_dir) == figures(two_models / "recorded" / gpu / "rec")
        assert (run_dir / "policy.json").is_file()
    h200 = load_manifest(results / "h200" / "two-h200")
    assert len(h200["devices"]) == 2
    merged = json.loads((results / "fleet" / "two" / "policy.json").read_text())
    assert merged["kind"] == "merged-policy"
    assert len(merged["entries"]) == 2
    header = (results / "fleet" / "two" / "relu_policy.cuh").read_text()
    assert "sweeper_launch_relu_fp32" in header
    # run again: both runs are complete and kept, the fleet's files come out the same
    before = {p: p.read_bytes() for p in (results / "fleet" / "two").iterdir()}
    res = CliRunner().invoke(app, ["fleet", "run", str(two_models / "fleet.toml")])
    assert res.exit_code == 0, res.output
    assert {p: p.read_bytes() for p in (results / "fleet" / "two").iterdir()} == before


CAMPAIGN_ERRORS = {
    "no name": ('[[gpu]]\nplan = "p.json"\n', "field 'name': expected a folder name"),
    "unknown field": ('name = "x"\nspeed = 1\n[[gpu]]\nplan = "p.json"\n', "field 'speed'"),
    "no gpu": ('name = "x"\n', "field 'gpu': expected one [[gpu]] table or more"),
    "zero gpus": (
        'name = "x"\n[[gpu]]\nplan = "p.json"\ngpus = 0\n',
        "field 'gpu[0].gpus': expected a positive count, found 0",
    ),
    "unknown op": (
        'name = "x"\n[[gpu]]\nplan = "p.json"\nops = ["leaky"]\n',
        "field 'gpu[0].ops': unknown op 'leaky' (known: add, cast_bf16_fp32, cast_fp32_bf16, "
        "gelu, mul, relu, silu, silu_and_mul)",
    ),
    "op not swept": (
        'name = "x"\n[[gpu]]\nplan = "p.json"\nops = ["gelu"]\n',
        "field 'gpu[0].ops': op 'gelu' is not swept yet (swept: relu)",
    ),
    "unknown dtype": (
        'name = "x"\n[[gpu]]\nplan = "p.json"\ndtypes = ["fp64"]\n',
        "field 'gpu[0].dtypes': unknown dtype 'fp64'",
    ),
    "not toml": ("name = \n", "not valid TOML"),
    "name outside the results": ('name = "../x"\n[[gpu]]\nplan = "p.json"\n', "field 'name'"),
    "a run id sweeper run refuses": (
        'name = "x"\n[[gpu]]\nplan = "p.json"\nrun_id = "-x"\n',
        "field 'gpu[0].run_id': expected a folder name, found '-x'",
    ),
    "two tables of one model": (
        'name = "x"\n[[gpu]]\nplan = "h200.json"\n[[gpu]]\nplan = "h200.json"\n',
        "gpu[0] and gpu[1] both plan for 'h200'",
    ),
}


@pytest.mark.parametrize("case", list(CAMPAIGN_ERRORS))
def test_a_campaigns_mistake_is_one_line_before_any_actor_starts(two_models, tmp_path, case):
    text, message = CAMPAIGN_ERRORS[case]
    (tmp_path / "h200.json").write_bytes((two_models / "h200.json").read_bytes())
    path = tmp_path / "c.toml"
    path.write_text(text)
    res = CliRunner().invoke(app, ["fleet", "run", str(path)])
    assert res.exit_code == 1, res.output
    lines_out = res.stderr.strip().splitlines()
    assert len(lines_out) == 1 and lines_out[0].startswith("error: "), res.stderr
    assert message in lines_out[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml", "h200.json"]


def test_the_gpu_executors_recipe_travels_to_an_actor(tmp_path):
    """`sweeper run --devices` resolves the run where no GPU is needed and sends each actor
    the recipe of its GPU executor: it must survive Ray's pickling whole."""
    root = Path(__file__).resolve().parents[2]
    req = api.RunRequest(
        plan_path=str(root / "sweeps" / "h200.json"), dtypes=("fp32",), out_root=str(tmp_path),
        run_id="x", devices="all",
    )  # fmt: skip
    m = api._measure(req, None, detect=False)
    cfg = api._run_config(req, m)
    make = partial(api._gpu_executor, req, m, cfg)
    back = ray.cloudpickle.loads(ray.cloudpickle.dumps(make))
    assert back.func is api._gpu_executor
    assert back.args[0] == req and back.args[1].stopping == m.stopping
    assert back.args[2].plan.plan_hash == cfg.plan.plan_hash and back.args[2].dtypes == ("fp32",)
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_a_campaign_takes_the_run_ids_and_ops_sweeper_run_takes(tmp_path):
    """One rule for a run id (sweeper.runfolder.plain_run_id) and one list of ops
    (sweeper.ops): a name with a space is a folder name sweeper run accepts, so a campaign
    does too."""
    from sweeper.ops import SWEPT
    from sweeper.run.campaign import load_campaign
    from sweeper.runfolder import plain_run_id

    path = tmp_path / "c.toml"
    path.write_text('name = "relu fleet"\n[[gpu]]\nplan = "p.json"\nrun_id = "h200 run 2"\n')
    (g,) = load_campaign(path).runs
    assert g.run_id == "h200 run 2" and plain_run_id(g.run_id)
    assert g.ops == ("relu",) and set(g.ops) <= set(SWEPT)
