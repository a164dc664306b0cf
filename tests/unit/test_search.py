"""The search: survivors by margin with no cap, the climb over one-axis neighbours, and the
screening sizes inside the L2 band."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from sweeper.analyze.store import load_manifest, load_run, read_trials
from sweeper.plan.gpus import lookup
from sweeper.plan.planfile import make_plan
from sweeper.run.replay import ModelExecutor, SimpleVariant
from sweeper.run.runner import RunConfig, start
from sweeper.run.search import (
    BAND_FRACTIONS,
    SCREEN_FRACTIONS,
    SearchParams,
    beyond_l2_only,
    climb_moves,
    climb_sizes,
    for_mode,
    in_scope,
    screen_sizes,
    search_params,
    survivors,
)
from sweeper.units import MiB


def row(n: int, config: str, ratio: float, status: str = "ok") -> dict:
    return {"role": "candidate", "status": status, "n": n, "ws_bytes": 8 * n, "config": config,
            "ratio": ratio}  # fmt: skip


def test_every_config_within_the_margin_survives_however_many():
    rows = [row(1, f"c{i:02d}", 1.0 - i * 0.0005) for i in range(30)]  # all within 1.5%
    rows += [row(1, "far", 0.9)]
    keep, pruned = survivors(rows, SearchParams(margin=0.015))
    assert len(keep) == 30 and "far" not in keep
    assert [p["config"] for p in pruned] == ["far"]
    assert pruned[0]["shortfall"] == pytest.approx(0.1) and pruned[0]["ws_bytes"] == 8


@pytest.mark.parametrize(
    ("behind", "kept"),
    [(0.0149, True), (0.015, True), (0.0151, False)],
    ids=["just-inside", "at-the-margin", "just-outside"],
)
def test_the_margin_is_inclusive(behind, kept):
    rows = [row(1, f"top{i}", 1.2) for i in range(3)] + [row(1, "x", 1.2 * (1 - behind))]
    keep, _ = survivors(rows, SearchParams(margin=0.015))
    assert ("x" in keep) is kept


def test_a_config_near_the_best_at_one_size_survives_and_pruning_says_where_it_came_closest():
    rows = [row(1, "a", 1.3), row(1, "b", 1.0), row(1, "c", 0.95), row(1, "d", 0.90)]
    rows += [row(2, "a", 1.0), row(2, "b", 1.0), row(2, "c", 0.5), row(2, "d", 0.85)]
    keep, pruned = survivors(rows, SearchParams(min_survivors=1))
    assert keep == ["a", "b"]
    by = {p["config"]: p for p in pruned}
    assert by["d"]["ws_bytes"] == 16 and by["d"]["shortfall"] == pytest.approx(0.15)
    assert by["c"]["ws_bytes"] == 8 and by["d"]["sizes"] == 2


def test_a_failed_config_is_screened_out_with_its_status():
    rows = [row(1, "a", 1.0), row(1, "bad", 2.0, status="mismatch")]
    keep, pruned = survivors(rows, SearchParams())
    assert keep == ["a"] and "failed at screening (mismatch" in pruned[0]["reason"]


L2 = lookup("h200").l2_bytes
LINE = {f"k{i}": [f"k{i - 1}", f"k{i + 1}"] for i in range(10)}  # a one-axis chain k0..k9


def neighbours(config: str) -> list[str]:
    return [c for c in LINE[config] if c in LINE]


def test_the_climb_measures_neighbours_of_near_best_configs_only_where_not_yet_measured():
    rows = [row(1, "k3", 1.0), row(1, "k4", 0.99), row(1, "k8", 0.5)]
    rows += [row(2, "k3", 1.0), row(2, "k2", 1.0), row(2, "k8", 0.5)]
    moves = climb_moves(rows, neighbours, SearchParams(margin=0.015, min_survivors=1))
    assert moves == {1: ["k2", "k5"], 2: ["k1", "k4"]}  # k4 (1% behind) is near the best


def test_the_climb_has_converged_when_no_near_best_config_has_an_unmeasured_neighbour():
    rows = [row(1, c, r) for c, r in (("k0", 0.5), ("k1", 1.0), ("k2", 0.9))]
    assert climb_moves(rows, neighbours, SearchParams(min_survivors=1)) == {}


def test_four_screening_sizes_lie_inside_the_band():
    assert len(BAND_FRACTIONS) >= 4 and set(BAND_FRACTIONS) <= set(SCREEN_FRACTIONS)
    for l2 in (40 * MiB, 50 * MiB, 60 * MiB, 72 * MiB, 96 * MiB, 126 * MiB):
        step = 256 * 1024  # a plan dense at L2 / 256 or finer over the band
        entries = [{"n": w // 8, "working_set_bytes": w} for w in range(step, 10 * l2, step)]
        ws = [8 * n for n in screen_sizes(entries, l2)]
        assert sum(l2 / 2 < w <= l2 for w in ws) >= 4
        if l2 >= 54 * MiB:  # 0.6 x L2 > 32 MiB: all four in the seeds' (32 MiB, L2]
            assert sum(32 * MiB < w <= l2 for w in ws) >= 4


class ClimbingModel(ModelExecutor):
    """A model whose seed grid holds only k0; the climb must walk the chain to k7, the best."""

    def variants(self, grid, dtype):
        return [SimpleVariant(dtype, "k0")]

    def neighbours(self, v):
        return [SimpleVariant(v.dtype, c) for c in neighbours(v.config)]


def peak_at_k7(i: int):
    """k_i's bandwidth: highest at k7, falling by 100 GB/s per step along the chain."""
    return lambda ws, l2: 3000.0 + 100 * (7 - abs(i - 7))


def chain_model(cls=None, speed=peak_at_k7, **kw):
    curves = {c: speed(int(c[1:])) for c in LINE}
    return (cls or ClimbingModel)(curves, l2_bytes=L2, baseline=lambda ws, l2: 3000.0,
                                  copy=lambda ws, l2: 4000.0, noise=0.0, **kw)  # fmt: skip


def run_config(tmp_path, run_id="r1", rounds=10):
    plan = make_plan(lookup("h200"), dtypes=["fp32"])
    return RunConfig(plan=plan, plan_path="p.json", dtypes=("fp32",), out_root=str(tmp_path),
                     run_id=run_id, search=SearchParams(max_climb_rounds=rounds))  # fmt: skip


def test_the_runner_climbs_from_the_seed_to_the_best_config_and_sweeps_it(tmp_path):
    run_dir = start(run_config(tmp_path), chain_model())
    climb = load_manifest(run_dir)["climb"]["hot/fp32"]
    assert climb["converged"] and climb["rounds"] >= 7
    df = load_run(run_dir).results
    sweep = df[(df.role == "candidate") & (df.phase == "sweep")]
    # k7 is the best; the top 3 always survive. At 8 x L2 there is no climb, and the seed's
    # k0, the only config measured there, is swept at the sizes beyond the L2 only
    assert set(sweep.config) == {"k0", "k6", "k7", "k8"}
    assert load_manifest(run_dir)["beyond_l2_only"] == {"hot/fp32": ["k0"]}
    assert (sweep[sweep.config == "k0"].ws_bytes > L2).all()
    for c in ("k6", "k7", "k8"):
        assert set(sweep[sweep.config == c].n) == set(sweep.n)


def test_a_climb_stopped_by_its_round_limit_says_it_did_not_converge(tmp_path):
    ex = chain_model(speed=lambda i: lambda ws, l2: 3000.0 + 100 * i)
    climb = load_manifest(start(run_config(tmp_path, rounds=2), ex))["climb"]["hot/fp32"]
    assert climb == {**climb, "rounds": 2, "converged": False}


class InterruptedClimb(ClimbingModel):
    def __init__(self, *a, after: int, **kw):
        super().__init__(*a, **kw)
        self.left = after

    def measure(self, *a):
        if self.left == 0:
            raise KeyboardInterrupt
        self.left -= 1
        return super().measure(*a)


def test_a_run_interrupted_mid_climb_resumes_with_the_configs_it_had_climbed_to(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        start(run_config(tmp_path), chain_model(InterruptedClimb, after=40))
    run_dir = next(tmp_path.glob("*/r1"))
    resumed = start(run_config(tmp_path), chain_model(), resume=run_dir)
    full = start(run_config(tmp_path, "r2"), chain_model())
    sweep = [
        set(load_run(d).results.query("phase == 'sweep' and role == 'candidate'").config)
        for d in (resumed, full)
    ]
    assert sweep[0] == sweep[1] == {"k0", "k6", "k7", "k8"}


def screened(run_dir) -> set[tuple[int, str, int]]:
    """(n, config, climb round) of every candidate cell the screening and the climb measured."""
    trials, _ = read_trials(run_dir)
    return {
        (t["n"], t["config"], t.get("climb_round", 0))
        for t in trials
        if t["role"] == "candidate" and t["phase"] == "screen"
    }


@pytest.mark.parametrize("after", [3, 40, 75])
def test_a_climb_interrupted_in_any_round_resumes_as_one_run_in_one_go(tmp_path, after):
    """The round budget is the run's: a resume takes up the interrupted round and climbs the
    rounds left, measuring exactly the cells (and rounds) of an uninterrupted run."""
    with pytest.raises(KeyboardInterrupt):
        start(run_config(tmp_path, rounds=4), chain_model(InterruptedClimb, after=after))
    run_dir = next(tmp_path.glob("*/r1"))
    assert 0 < len(screened(run_dir)) < after + 10  # stopped inside the screening or the climb
    resumed = start(run_config(tmp_path, rounds=4), chain_model(), resume=run_dir)
    full = start(run_config(tmp_path, "r2", rounds=4), chain_model())
    assert screened(resumed) == screened(full)
    assert max(k for _, _, k in screened(full)) == 4
    climb = [load_manifest(d)["climb"]["hot/fp32"] for d in (resumed, full)]
    assert climb[0] == climb[1] == {**climb[1], "rounds": 4, "converged": False}


def test_a_climb_stopped_by_its_round_limit_climbs_no_further_on_resume(tmp_path):
    ex = chain_model(speed=lambda i: lambda ws, l2: 3000.0 + 100 * i)
    run_dir = start(run_config(tmp_path, rounds=2), ex)
    before = screened(run_dir)
    start(
        run_config(tmp_path, rounds=2),
        chain_model(speed=lambda i: lambda ws, l2: 3000.0 + 100 * i),
        resume=run_dir,
    )
    assert screened(run_dir) == before
    climb = load_manifest(run_dir)["climb"]["hot/fp32"]
    assert climb == {**climb, "rounds": 2, "converged": False}
    assert climb["cells"] == sum(1 for _, _, k in before if k > 0)


def test_a_climb_recorded_without_rounds_per_cell_goes_on_from_the_manifests_count(tmp_path):
    """Trials written before cells carried their climb round: a resume neither climbs past
    the recorded round limit nor forgets the recorded rounds and cells."""
    import json

    speed = lambda i: lambda ws, l2: 3000.0 + 100 * i  # noqa: E731
    run_dir = start(run_config(tmp_path, rounds=2), chain_model(speed=speed))
    path = run_dir / "trials.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({k: v for k, v in t.items() if k != "climb_round"}) + "\n"
                            for t in lines))  # fmt: skip
    before = load_manifest(run_dir)["climb"]["hot/fp32"]
    start(run_config(tmp_path, rounds=2), chain_model(speed=speed), resume=run_dir)
    assert load_manifest(run_dir)["climb"]["hot/fp32"] == before
    assert len(read_trials(run_dir)[0]) == len(lines)


def test_a_band_on_one_measured_size_gets_samples_beside_it():
    from sweeper.run.search import single_size_band_points

    mib = 2**20

    def r(ws_mib, config, gbps):
        ws = int(ws_mib * mib)
        return {"mode": "hot", "dtype": "fp32", "n": ws // 8, "ws_bytes": ws, "pattern": "p",
                "role": "candidate", "config": config, "status": "ok", "gbps": gbps,
                "time_us": ws / gbps / 1e3, "run_id": "r"}  # fmt: skip

    sizes = [8, 10, 12, 14, 16]
    rows = [r(s, "a", 1000.0) for s in sizes] + [r(s, "b", 900.0) for s in sizes]
    rows = [x for x in rows if x["ws_bytes"] != 12 * mib]
    rows += [r(12, "a", 800.0), r(12, "b", 1000.0)]  # b wins at 12 MiB only
    points = single_size_band_points(rows, 60 * mib, 32, 4)
    assert [8 * n / mib for n in points] == [11.0, 13.0]
    # neighbours closer than both L2/divisor and 1/64 of the size: nothing to add
    near = [x for x in rows if x["ws_bytes"] not in (10 * mib, 14 * mib)]
    near += [r(s, c, 1000.0 if c == "a" else 900.0) for s in (11.9, 12.1) for c in "ab"]
    assert single_size_band_points(near, 60 * mib, 32, 4) == []
    # closer than L2/divisor yet more than 1/64 of the size apart: sampled
    assert [8 * n / mib for n in single_size_band_points(rows, 60 * mib, 32, 4, divisor=16)] == [
        11.0,
        13.0,
    ]
    # no single-size band: nothing to add
    rows = [x for x in rows if x["ws_bytes"] != 12 * mib]
    assert single_size_band_points(rows, 60 * mib, 32, 4) == []


def test_a_resumed_run_keeps_the_survivors_its_screening_chose(tmp_path):
    """Survivors come from the screening and climb rows only. A config the climb reached at
    one screening size but never measured at another is swept there too; its sweep row at
    that screening size must not re-decide, on resume, who survived the screening."""
    plan = make_plan(lookup("h200"), dtypes=["fp32"])
    last = max(screen_sizes(plan.sizes("fp32"), plan.l2_bytes))
    b_ws = 2 * last * 4

    def speed(i: int):
        def curve(ws, l2):
            if ws != b_ws:
                return 3000.0 + 100 * (7 - abs(i - 7))  # the climb walks k0 -> k7
            # at the last screening size k0 is a local peak the climb stops at, and k7, which
            # it never reaches there, is far faster
            return 4700.0 if i == 7 else 3000.0 - 100 * i  # below 1.2x the copy (4000)

        return curve

    run_dir = start(run_config(tmp_path), chain_model(speed=speed))
    m = load_manifest(run_dir)
    df = load_run(run_dir).results
    at_b = df[(df.n == last) & (df.role == "candidate")]
    assert set(at_b[at_b.phase == "sweep"].config) >= {"k7"}  # swept there, not screened
    start(run_config(tmp_path), chain_model(speed=speed), resume=run_dir)
    assert load_manifest(run_dir)["pruned"] == m["pruned"]


TRADE = ("v16-u2-ld.nc-st.cs-b128-flat", "v8-u2-ld.nc-st.cs-b128-flat",
         "v16-u4-ld.nc-st.cs-b128-flat", "v8-u4-ld.nc-st.cs-b128-flat")  # fmt: skip


class TradeModel(ModelExecutor):
    """Seed v16 x u2; its one-axis moves to v8 x u2 and v16 x u4 lose 9%; the trade to v8 x u4
    at the same 32 bytes in flight per thread wins (fp32 at 35.6 MiB on the H200, in shape)."""

    def variants(self, grid, dtype):
        return [self._v(dtype, TRADE[0])]

    @staticmethod
    def _v(dtype, config):
        from sweeper_kernels import Variant

        v = Variant.parse(f"{dtype}-{config}")
        return SimpleVariant(dtype, config, v.vec_bytes, v.unroll, v.load_hint, v.store_hint,
                             v.block, v.grid)  # fmt: skip

    def neighbours(self, v):
        from sweeper_kernels import Variant

        moves = Variant.parse(f"{v.dtype}-{v.config}").neighbours()
        return [self._v(v.dtype, m.config) for m in moves if m.config in TRADE]


@pytest.mark.parametrize("trades", [True, False])
def test_the_climb_reaches_a_bytes_in_flight_trade_only_with_trade_moves(tmp_path, trades):
    speed = dict(zip(TRADE, (3300.0, 3000.0, 3000.0, 3500.0), strict=True))
    ex = TradeModel({c: (lambda ws, l2, g=g: g) for c, g in speed.items()},
                    l2_bytes=L2, baseline=lambda ws, l2: 3000.0,
                    copy=lambda ws, l2: 4000.0, noise=0.0)  # fmt: skip
    plan = make_plan(lookup("h200"), dtypes=["fp32"])
    cfg = RunConfig(plan=plan, plan_path="p.json", dtypes=("fp32",), out_root=str(tmp_path),
                    run_id="t", search=SearchParams(climb_trades=trades, min_survivors=1))  # fmt: skip
    run_dir = start(cfg, ex)
    assert load_manifest(run_dir)["search"]["climb_trades"] is trades
    df = load_run(run_dir).results
    screened = set(df[(df.role == "candidate") & (df.phase == "screen")].config)
    assert screened == (set(TRADE) if trades else set(TRADE[:3]))
    swept = set(df[(df.role == "candidate") & (df.phase == "sweep")].config)
    assert (TRADE[3] in swept) is trades


def test_a_manifest_without_climb_trades_climbed_one_axis_moves_only():
    from sweeper.run.search import one_axis, search_params

    assert search_params({"margin": 0.005}).climb_trades is False
    assert search_params({"climb_trades": True}).climb_trades is True
    assert SearchParams().climb_trades is True
    a, b, c = (TradeModel._v("fp32", x) for x in (TRADE[0], TRADE[1], TRADE[3]))
    assert one_axis(a, b) and not one_axis(a, c) and not one_axis(a, a)


def test_a_manifest_with_parameters_this_search_lacks_is_not_resumed_by_it_but_still_read():
    """A run of an earlier search recorded a survivor cap and a tolerance this search does not have: a resume by it is
    refused in one clear error, while a replay and the report read what they need (whether the
    climb traded) from any manifest."""
    from sweeper.errors import SweeperError
    from sweeper.run.search import climb_trades, search_params

    recorded = {  # that manifest's "search", as written
        "tolerance": 0.03,
        "min_survivors": 3,
        "max_survivors": 12,
        "refine_divisor": 256,
        "max_refine_rounds": 6,
        "max_refine_points": 48,
        "max_bracket_rounds": 6,
        "policy_tolerance": 0.02,
    }
    with pytest.raises(SweeperError, match=r"max_survivors, tolerance\); resume it with"):
        search_params(recorded)
    assert climb_trades(recorded) is False
    assert climb_trades({"climb_trades": True}) is True


# -- the scoped climb and sweep (SearchParams.climb_max_l2, beyond_l2_scope, scope_modes) ----


def test_the_climb_runs_at_screening_sizes_up_to_climb_max_l2_times_the_l2():
    entries = [{"n": n, "working_set_bytes": 8 * n} for n in (10, 20, 30, 40)]
    l2 = 8 * 15  # the sizes at 0.67, 1.33, 2.0 and 2.67 x L2
    assert climb_sizes(entries, [10, 20, 30, 40], l2, SearchParams()) == {10, 20, 30}
    assert climb_sizes(entries, [10, 40], l2, SearchParams(climb_max_l2=1.0)) == {10}
    assert climb_sizes(entries, [10, 40], l2, SearchParams(climb_max_l2=None)) == {10, 40}


def test_a_config_near_the_best_only_beyond_the_l2_is_a_survivor_of_those_sizes_only():
    l2 = 8 * 100  # n 50 fits the L2, n 200 does not
    rows = [row(50, "band", 1.30), row(50, "both", 1.299), row(50, "dram", 1.10),
            row(200, "band", 0.90), row(200, "both", 1.01), row(200, "dram", 1.012),
            row(50, "other", 1.0), row(200, "other", 0.95)]  # fmt: skip
    params = SearchParams(min_survivors=1)
    assert survivors(rows, params)[0] == ["band", "both", "dram"]
    assert beyond_l2_only(rows, l2, params) == {"dram"}
    assert beyond_l2_only(rows, l2, SearchParams(min_survivors=1, beyond_l2_scope=False)) == set()
    # at the L2 itself a config is inside it
    edge = [row(100, "a", 1.0), row(101, "b", 1.0)]
    assert beyond_l2_only(edge, l2, params) == {"b"}
    assert in_scope("dram", 8 * 101, l2, {"dram"}) and not in_scope("dram", l2, l2, {"dram"})
    assert in_scope("band", l2, l2, {"dram"})


def test_the_scoped_search_applies_in_its_modes_only_and_a_run_recorded_without_it_keeps_none():
    params = SearchParams()
    assert for_mode(params, "hot") == params
    cold = for_mode(params, "cold")
    assert cold.climb_max_l2 is None and not cold.beyond_l2_scope
    old = {k: v for k, v in asdict(params).items()
           if k not in ("climb_max_l2", "beyond_l2_scope", "scope_modes")}  # fmt: skip
    recorded = search_params(old)
    assert recorded.climb_max_l2 is None and not recorded.beyond_l2_scope
    assert recorded.scope_modes == ()
    # as a manifest records it (a list) and reads it back
    assert search_params(json.loads(json.dumps(asdict(params)))) == params


def test_selection_leaves_out_a_beyond_l2_survivor_within_the_l2():
    import pandas as pd

    from sweeper.analyze.select import searched

    l2 = 1000
    df = pd.DataFrame([
        {"mode": m, "dtype": "fp32", "config": c, "role": role, "ws_bytes": ws}
        for m in ("hot", "cold") for c, role in (("dram", "candidate"), ("band", "candidate"),
                                                 ("copy", "copy"))
        for ws in (500, 1000, 2000)
    ])  # fmt: skip
    manifest = {"plan": {"l2_bytes": l2}, "beyond_l2_only": {"hot/fp32": ["dram"]}}
    kept = searched(df, manifest)
    gone = df.merge(kept, how="left", indicator=True).query("_merge == 'left_only'")
    assert sorted(zip(gone["mode"], gone["config"], gone["ws_bytes"], strict=True)) == [
        ("hot", "dram", 500),
        ("hot", "dram", 1000),
    ]
