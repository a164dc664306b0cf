"""The floor and the confirmation round through the real runner with a synthetic GPU
(sweeper.run.replay.ModelExecutor) and a replay of its run (the rule itself:
tests/unit/test_floor.py)."""

from __future__ import annotations

import pytest

from sweeper.analyze.select import select
from sweeper.analyze.store import load_manifest, load_run, read_trials
from sweeper.plan.gpus import lookup
from sweeper.plan.planfile import make_plan
from sweeper.run.replay import ModelExecutor, ReplayExecutor
from sweeper.run.runner import RunConfig, start
from sweeper.run.search import SearchParams, search_params
from sweeper.stats import Stopping

L2 = lookup("h200").l2_bytes
CROSS = 0.9 * L2


def baseline(ws, l2):
    return 5000.0 if ws < CROSS else 4300.0


CURVES = {
    "flr": baseline,  # the baseline's own shape
    "big": lambda ws, l2: baseline(ws, l2) * (1.5 if ws < CROSS else 0.8),
    "tie_a": lambda ws, l2: baseline(ws, l2) * 1.002,
    "tie_b": lambda ws, l2: baseline(ws, l2) * 0.999,
    "slow": lambda ws, l2: 1500.0,
}


@pytest.fixture(scope="module")
def plan():
    return make_plan(lookup("h200"), dtypes=["fp32"])


def _cfg(plan, tmp, run_id="f1", search=None):
    return RunConfig(plan=plan, plan_path="sweeps/h200.json", dtypes=("fp32",),
                     stopping=Stopping(), search=search or SearchParams(), out_root=str(tmp),
                     run_id=run_id)  # fmt: skip


def _model(**kw):
    return ModelExecutor(CURVES, l2_bytes=L2, baseline=baseline, copy=lambda ws, l2: 4800.0,
                         floor="flr", **kw)  # fmt: skip


@pytest.fixture(scope="module")
def floored(plan, tmp_path_factory):
    return start(_cfg(plan, tmp_path_factory.mktemp("floor")), _model())


def test_the_floor_is_recorded_kept_and_measured_at_every_size(floored):
    manifest = load_manifest(floored)
    assert manifest["floor"]["fp32"]["config"] == "flr"
    assert search_params(manifest["search"]).floor
    df = load_run(floored).results
    cand = df[df.role == "candidate"]
    sizes = set(cand["ws_bytes"])
    assert set(cand[cand.config == "flr"]["ws_bytes"]) == sizes
    assert (cand[cand.config == "flr"]["floor"] == 1).all()
    assert cand[cand.config != "flr"]["floor"].isna().all()
    assert "flr" not in {p["config"] for p in manifest["pruned"]}


def test_every_size_is_confirmed_with_the_floor_in_another_order(floored):
    trials = read_trials(floored)[0]
    conf = [t for t in trials if t["role"] == "confirm"]
    cand = [t for t in trials if t["role"] == "candidate"]
    assert {t["ws_bytes"] for t in conf} == {t["ws_bytes"] for t in cand}
    assert all(t["phase"] == "confirm" for t in conf)
    floor_sizes = {t["ws_bytes"] for t in conf if t["config"] == "flr"}
    assert floor_sizes == {t["ws_bytes"] for t in cand}
    manifest = load_manifest(floored)
    assert manifest["timing"]["hot/fp32/confirm_cells"] == len(conf)
    # at most `confirm` tied configs and the floor per size
    per_size = {}
    for t in conf:
        per_size[t["ws_bytes"]] = per_size.get(t["ws_bytes"], 0) + 1
    assert max(per_size.values()) <= SearchParams().confirm + 1


def test_the_policy_takes_the_floor_where_nothing_beats_it(floored):
    from sweeper.analyze.policy import build_policy

    data = load_run(floored)
    sel = select(data.results)
    above = sel[sel.ws_bytes > CROSS * 1.05]
    below = sel[sel.ws_bytes < CROSS * 0.95]
    assert set(above["config"]) == {"flr"}
    assert set(below["config"]) == {"big"}
    bands = build_policy(data.results, data.manifest)["dtypes"]["fp32"]["bands"]
    assert [b["config"] for b in bands] == ["big", "flr"]


def test_a_replay_of_a_floored_run_measures_the_same_cells(floored, plan, tmp_path):
    again = start(_cfg(plan, tmp_path, "replay"), ReplayExecutor(floored))
    a = {t["cell_key"]: t["phase"] for t in read_trials(floored)[0]}
    b = {t["cell_key"]: t["phase"] for t in read_trials(again)[0]}
    assert a == b
    assert load_manifest(again)["floor"] == load_manifest(floored)["floor"]


@pytest.mark.parametrize("part", [0.3, 0.9])
def test_an_interrupted_floored_run_resumes_to_the_same_cells(floored, plan, tmp_path, part):
    measured = [t for t in read_trials(floored)[0] if t["role"] in ("candidate", "confirm")]
    with pytest.raises(KeyboardInterrupt):
        start(_cfg(plan, tmp_path, "cut"), _model(interrupt_after=int(part * len(measured))))
    run_dir = tmp_path / "h200" / "cut"
    start(_cfg(plan, tmp_path, "cut"), _model(), resume=run_dir)
    a = sorted(t["cell_key"] for t in read_trials(floored)[0])
    b = sorted(t["cell_key"] for t in read_trials(run_dir)[0])
    assert a == b


def test_a_run_recorded_before_the_floor_resumes_without_one():
    doc = {k: v for k, v in SearchParams().__dict__.items() if k not in ("floor", "confirm")}
    params = search_params(doc)
    assert (params.floor, params.confirm) == (False, 0)


def test_an_executor_without_a_launch_shape_runs_without_a_floor(plan, tmp_path):
    ex = ModelExecutor(CURVES, l2_bytes=L2, baseline=baseline, copy=lambda ws, l2: 4800.0)
    run_dir = start(_cfg(plan, tmp_path, "nofloor"), ex)
    manifest = load_manifest(run_dir)
    assert manifest["floor"]["fp32"]["config"] is None
    assert "launch shape" in manifest["floor"]["fp32"]["why"]
    assert load_run(run_dir).results["floor"].isna().all()
