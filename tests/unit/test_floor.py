"""The floor and the confirmation round (sweeper.analyze.select, "The floor"), on the CPU.

The floor's launch-shape match is pure integer maths; the rule is tested on hand-made
measurements; the runner's part through the real runner with a synthetic GPU
(sweeper.run.replay.ModelExecutor) and a replay of its run.
"""

from __future__ import annotations

import pytest
from sweeper_kernels.launch import closest_to_launch

from sweeper.analyze.select import DEFAULT_TOLERANCE, confirmed_set, pass_noise, select
from sweeper.analyze.store import load_manifest, load_run, read_trials, trials_to_frame
from sweeper.plan.gpus import lookup
from sweeper.plan.planfile import make_plan
from sweeper.run.replay import ModelExecutor, ReplayExecutor
from sweeper.run.runner import RunConfig, start
from sweeper.run.search import SearchParams, confirm_set, search_params
from sweeper.stats import Stopping

L2 = lookup("h200").l2_bytes
CROSS = 0.9 * L2


# ---- the floor's launch shape ----------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype, n, blocks, threads, config, exact",
    [
        # torch's fp32 elementwise kernel: 128 threads, 2 x 16 B per thread, one pass
        ("fp32", 1 << 24, (1 << 24) // (128 * 8), 128, "v16-u2-ld.def-st.def-b128-flat32", True),
        ("fp32", 1_000_003, 977, 128, "v16-u2-ld.def-st.def-b128-flat32", True),
        ("fp16", 1 << 24, (1 << 24) // (128 * 16), 128, "v16-u2-ld.def-st.def-b128-flat32", True),
        ("bf16", 1 << 20, (1 << 20) // (256 * 8), 256, "v16-u1-ld.def-st.def-b256-flat32", True),
        # 4 bytes per thread: one 4-byte vector
        ("fp32", 1 << 20, (1 << 20) // 256, 256, "v4-u1-ld.def-st.def-b256-flat32", True),
        # a block size the grid lacks: the closest in log2, and not exact
        ("int8", 1 << 20, 1024, 64, "v16-u1-ld.def-st.def-b128-flat32", False),
        # a grid-stride launch (few blocks): the widest loop-free config, not exact
        ("fp32", 1 << 24, 264, 1024, "v16-u8-ld.def-st.def-b1024-flat32", False),
    ],
)
def test_the_floor_is_the_grids_config_closest_to_the_baselines_launch(
    dtype, n, blocks, threads, config, exact
):
    v, got_exact = closest_to_launch(dtype, n, blocks, threads)
    assert (v.config, got_exact) == (config, exact)


def test_a_launch_past_32_bit_indices_maps_to_the_64_bit_form():
    n = 5 << 31  # fp32: 2**31 * 5 elements, more 16-byte slots than int32 holds at 1 per thread
    v, _ = closest_to_launch("fp32", n, -(-n // (4 * 128)), 128)
    assert v.grid == "flat"


def test_an_empty_launch_is_refused():
    from sweeper_kernels.errors import KernelError

    with pytest.raises(KernelError, match=">= 1"):
        closest_to_launch("fp32", 1024, 0, 128)


# ---- the rule on hand-made measurements --------------------------------------------------------


def _row(config, ratio, ws=1 << 24, role="candidate", floor=False):
    base_us = 10.0
    t = base_us / ratio
    return {
        "run_id": "r", "mode": "hot", "pattern": "preallocated", "dtype": "fp32",
        "n": ws // 8, "ws_bytes": ws, "role": role, "config": config, "status": "ok",
        "time_us": t, "time_lo_us": t * 0.999, "time_hi_us": t * 1.001,
        "gbps": ws / t / 1e3, "base_time_us": base_us, "ratio": ratio,
        "ratio_lo": ratio * 0.995, "ratio_hi": ratio * 1.005, "n_samples": 10,
        "floor": 1 if floor else None,
    }  # fmt: skip


def test_a_config_that_ties_the_floor_in_either_measurement_does_not_beat_it():
    first = [_row("a", 1.012), _row("b", 1.010), _row("flr", 1.0, floor=True)]
    second = {"a": _row("a", 0.985, role="confirm"), "b": _row("b", 1.02, role="confirm"),
              "flr": _row("flr", 1.0, role="confirm", floor=True)}  # fmt: skip
    got, how = confirmed_set(first, second, "flr", DEFAULT_TOLERANCE, noise=0.005)
    # a led by 1.2% and then lost by 1.5%; b led by 1.0% and 2.0%: only b beats the floor
    assert how == "confirmed" and [r["config"] for r in got] == ["b"]
    got, how = confirmed_set(first, second, "flr", DEFAULT_TOLERANCE, noise=0.015)
    assert how == "floor" and [r["config"] for r in got] == ["flr"]


def test_without_both_measurements_of_the_floor_the_one_measurement_rule_applies():
    first = [_row("a", 1.01), _row("flr", 1.0, floor=True)]
    assert confirmed_set(first, {"a": _row("a", 1.0, role="confirm")}, "flr", 0.02, 0.0) is None
    assert confirmed_set(first, {}, None, 0.02, 0.0) is None


def test_the_pass_to_pass_noise_is_the_p95_per_range_of_working_set():
    small, large = 1 << 20, 1 << 30  # (0, 1] MiB and (256 MiB, inf)
    first, second = {}, {}
    for i in range(20):
        for ws, dev in ((small + 8 * i, 0.03), (large + 8 * i, 0.002)):
            first[ws] = {"a": _row("a", 1.0, ws=ws)}
            second[ws] = {"a": _row("a", 1.0 + dev, ws=ws, role="confirm")}
    noise = dict(pass_noise(first, second))
    assert noise[1 << 20] == pytest.approx(0.03)
    assert noise[None] == pytest.approx(0.002)
    # ranges without enough values take the p95 over all
    assert noise[4 << 20] == pytest.approx(0.03)
    # fewer than ten values in all: the default tolerance
    assert dict(pass_noise({}, {}))[None] == DEFAULT_TOLERANCE


def test_six_configs_that_tie_the_baseline_make_no_band_the_floor_serves_them():
    """The issue's fp32 8-15 MiB band: six configs each tie torch in the sweep and lose to it by
    1-3% when measured again; the floor (torch's shape) is chosen at every size."""
    rows = []
    sizes = [(8 << 20) + k * (1 << 19) for k in range(14)]
    for i, ws in enumerate(sizes):
        lead = ["c1", "c2", "c3", "c4", "c5", "c6"][i % 6]
        for c in ("c1", "c2", "c3", "c4", "c5", "c6"):
            first = 1.006 if c == lead else 0.998
            rows.append(_row(c, first, ws=ws))
            rows.append(_row(c, first - 0.02, ws=ws, role="confirm"))
        rows.append(_row("flr", 1.0, ws=ws, floor=True))
        rows.append(_row("flr", 1.0, ws=ws, role="confirm", floor=True))
    sel = select(trials_to_frame(rows))
    assert set(sel["config"]) == {"flr"}
    assert sel["reason"].str.startswith("floor").all()
    # the same measurements without the second one: the leader of each size is chosen
    once = select(trials_to_frame([r for r in rows if r["role"] == "candidate"]))
    assert set(once["config"]) != {"flr"}


def test_the_round_times_the_tied_configs_fastest_first_and_the_floor():
    rows = [_row(c, r) for c, r in (("a", 1.3), ("b", 1.29), ("c", 1.28), ("d", 1.0))]
    rows.append(_row("flr", 0.95, floor=True))
    assert confirm_set(rows, "flr", 2, 0.02) == ["a", "b", "flr"]
    assert confirm_set(rows, None, 4, 0.02) == ["a", "b", "c"]
    assert confirm_set([], "flr", 4, 0.02) == []


# ---- the runner --------------------------------------------------------------------------------


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
