"""lab/tools/pruning_proof.py on a model GPU: the exhaustive runs' sizes, their top configs, and the
verdict of the two passes against a policy's dispatch (a config beats it, or none does, or a
pass lacks a cell)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from sweeper import api
from sweeper.api import parse_ws_range
from sweeper.plan.gpus import lookup
from sweeper.plan.planfile import load_plan
from sweeper.run.replay import ModelExecutor

ROOT = Path(__file__).resolve().parents[2]
L2 = lookup("h200").l2_bytes
_spec = importlib.util.spec_from_file_location("pruning_proof", ROOT / "lab/tools/pruning_proof.py")
proof = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(proof)

# GB/s per config, flat over the band: A fastest, then B, C, D
SPEED = {"A": 6000.0, "B": 5900.0, "C": 5800.0, "D": 4000.0}


def model(extra: dict | None = None) -> ModelExecutor:
    curves = {c: (lambda ws, l2, g=g: g) for c, g in SPEED.items()}
    for c, g in (extra or {}).items():
        curves[c] = lambda ws, l2, g=g: g
    return ModelExecutor(curves, l2_bytes=L2, baseline=lambda ws, l2: 4500.0,
                         copy=lambda ws, l2: 6000.0, noise=0.0)  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("proof")
    plan = api.plan("h200", out=str(tmp / "plan.json"), dtypes="fp32,bf16").path
    root = tmp / "res"
    ranges = proof.size_ranges(str(plan), ["fp32", "bf16"])
    ex = [
        api.run(
            str(plan), dtypes=ds, sizes=rng, executor=model(), out_root=str(root), run_id=f"ex-{i}"
        )  # fmt: skip
        for i, (rng, ds) in enumerate(ranges)
    ]
    return plan, root, ranges, [str(p) for p in ex]


def _passes(runs, speed_of_policy: float, ids=("p1", "p2"), extra=None):
    plan, root, _, _ = runs
    out = []
    for i in ids:
        m = model({"policy-x": speed_of_policy, **(extra or {})})
        out.append(str(api.run(str(plan), sizes="35:59", executor=m, out_root=str(root),
                               run_id=f"{i}-{speed_of_policy:g}")))  # fmt: skip
    return out


def test_the_sizes_are_the_four_band_screening_sizes_one_per_range(runs):
    plan_path, _, ranges, _ = runs
    plan = load_plan(plan_path)
    assert [r for r, _ in ranges] == [
        "35.620:35.630", "43.120:43.130", "50.620:50.630", "58.120:58.130"
    ]  # fmt: skip
    for rng, ds in ranges:
        assert ds == ["fp32", "bf16"]
        lo, hi = parse_ws_range(rng)
        for d in ds:
            inside = [e for e in plan.sizes(d) if lo <= e["working_set_bytes"] <= hi]
            assert len(inside) == 1 and L2 / 2 < inside[0]["working_set_bytes"] <= L2


def test_top_ranks_every_size_and_dtype_and_prints_the_passes(runs, capsys):
    plan, _, _, ex = runs
    top = proof.top_configs(ex, 2)
    assert len(top) == 4 * 2 * 2  # sizes x dtypes x k
    assert set(top["config"]) == {"A", "B"}
    assert all(cs == ["A", "B"] for cs in top.groupby(["dtype", "n"])["config"].apply(list))
    assert proof.main(["top", *ex, "--k", "2", "--policy", "P.json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        f"sweeper run {plan} --grid extended --dtypes bf16,fp32 --modes hot --sizes "
        f"35.620:58.130 --configs 'A,B,policy-*' --policy P.json --run-id proof-p{i}"
        for i in (1, 2)
    ]


def test_a_policy_as_fast_as_the_best_config_holds(runs, capsys):
    _, _, _, ex = runs
    passes = _passes(runs, SPEED["A"])
    table, missing = proof.check(ex, passes, 3, 0.02, None)
    assert not missing and len(table) == 4 * 2 * 3
    assert not table["faster_in_every_pass"].any()
    assert table["vs_policy_1"].max() == pytest.approx(1.0, abs=1e-9)
    rc = proof.main(["check", *ex, "--passes", ",".join(passes), "--top", "3"])
    assert rc == 0
    assert "24 top configs (3 per dtype and size) against policy-x: 0 more than 2%" in (
        capsys.readouterr().out
    )


def test_a_config_faster_than_the_policy_in_every_pass_fails_the_proof(runs, tmp_path):
    _, _, _, ex = runs
    passes = _passes(runs, 5700.0)  # A, B and C are 1.8-5.3% faster
    table, _ = proof.check(ex, passes, 3, 0.02, None)
    beaten = set(table[table["faster_in_every_pass"]]["config"])
    assert beaten == {"A", "B"}  # C is 1.75% faster: within the margin
    out = tmp_path / "proof.md"
    rc = proof.main(["check", *ex, "--passes", ",".join(passes), "--top", "3", "--out", str(out)])
    assert rc == 1
    assert "| fp32 | 43.12 MiB | `A` | 1.333x | 1.053x | 1.053x | **yes** |" in out.read_text()
    assert out.with_suffix(".json").exists()


def test_a_pass_without_a_top_config_is_reported_not_passed(runs, capsys):
    plan, root, _, ex = runs
    m = model({"policy-x": 6000.0})
    del m.curves["A"]
    short = api.run(str(plan), sizes="35:59", executor=m, out_root=str(root), run_id="short")
    rc = proof.main(["check", *ex, "--passes", str(short), "--top", "2"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "no cell of A" in err and err.count("missing:") == 8


def test_a_pass_timed_in_two_runs_joins_their_folders_with_plus(runs, capsys):
    """A pass whose sizes were timed by two runs (e.g. the band's low sizes, then one more)
    reads both folders; either alone lacks the other's cells."""
    plan, root, _, ex = runs
    halves = []
    for i, rng in enumerate(("35:51", "57:59")):
        m = model({"policy-x": 5700.0})
        halves.append(str(api.run(str(plan), sizes=rng, executor=m, out_root=str(root),
                                  run_id=f"half-{i}")))  # fmt: skip
    joined = "+".join(halves)
    table, missing = proof.check(ex, [joined, joined], 3, 0.02, None)
    assert not missing and len(table) == 4 * 2 * 3
    assert set(table[table["faster_in_every_pass"]]["config"]) == {"A", "B"}
    assert proof.main(["check", *ex, "--passes", f"{joined},{joined}", "--top", "3"]) == 1
    _, missing = proof.check(ex, [halves[0], halves[0]], 3, 0.02, None)
    assert missing and all("n=" in m for m in missing)
    capsys.readouterr()


def test_the_table_holds_every_cell_the_proof_reads(runs, tmp_path, capsys):
    _, _, _, ex = runs
    out = tmp_path / "cells.csv.xz"
    assert proof.main(["table", *ex, "--out", str(out)]) == 0
    from_runs = proof._candidates(ex).sort_values(["dtype", "n", "config"])
    from_table = proof._candidates([str(out)]).sort_values(["dtype", "n", "config"])
    keys = ["mode", "dtype", "n", "ws_bytes", "config"]
    assert from_table[keys].values.tolist() == from_runs[keys].values.tolist()
    assert from_table["ratio"].to_numpy() == pytest.approx(from_runs["ratio"].to_numpy(), rel=1e-6)
    top_t, top_r = proof.top_configs([str(out)], 2), proof.top_configs(ex, 2)
    assert top_t[keys].values.tolist() == top_r[keys].values.tolist()
    with pytest.raises(SystemExit, match="name a .csv.xz file"):
        proof.main(["table", *ex, "--out", str(tmp_path / "cells.csv")])


SHIPPED = ROOT / "lab/h200/pruning-proof"


def test_the_climb_replayed_on_the_h200_cells_needs_the_trades_for_fp32_at_35_6_mib():
    """lab/h200/pruning-proof/replay.md, recomputed: with one-axis moves the climb stops
    1.3% short of the exhaustive best at 35.6 MiB (fp32); the trades reach it. With the band's
    flat peak in the seed (sweeper_kernels.variants.default_grid), the climb with trades finds
    the exhaustive best at every size and dtype."""
    cells = [str(SHIPPED / "exhaustive/cells.csv.xz")]
    params = proof.SearchParams()
    one = proof.replay_climb(cells, params, trades=False)
    both = proof.replay_climb(cells, params, trades=True)
    at = {(r.dtype, round(r.ws_mib, 2)): i for i, r in enumerate(one.itertuples())}
    i = at[("fp32", 35.62)]
    assert one.loc[i, "shortfall"] > 0.01 and one.loc[i, "found"] != one.loc[i, "best"]
    assert both.loc[i, "shortfall"] == 0 and both.loc[i, "found"] == "v8-u4-ld.nc-st.cs-b128-flat"
    assert (both["shortfall"] <= one["shortfall"] + 1e-12).all()
    assert (both["shortfall"] == 0).all() and len(both) == 8
    assert (both["cells"] >= one["cells"]).all()
    assert (
        proof.replay_markdown({"one-axis moves": one, "with trades": both})
        == (SHIPPED / "replay.md").read_text()
    )


def test_drift_is_a_configs_move_relative_to_the_others_across_runs_and_between_passes(runs):
    plan, root, _, _ = runs
    p1, p2 = _passes(runs, 5000.0, ids=("d1", "d2"))
    ref = str(api.run(str(plan), sizes="35:59", executor=model({"B": 5900.0 * 1.03}),
                      out_root=str(root), run_id="drift-ref"))  # fmt: skip
    doc = proof.drift(ref, [p1, p2])
    assert doc["configs_sizes"] > 0
    assert doc["between_passes"] == {"median": 0.0, "p95": 0.0, "max": 0.0}
    # B 3% faster in the reference: against the mean of four configs it moves by 3/4 of that
    moved = math.expm1(0.75 * math.log(1.03))
    assert doc["across_runs"]["max"] == pytest.approx(moved, rel=1e-3)
    with pytest.raises(SystemExit, match="exactly two passes"):
        proof.drift(ref, [p1])


def test_leave_out_shows_what_a_screening_size_contributes(tmp_path, capsys):
    """B is near the best only at the 8 x L2 screening size, and far ahead at 1.1-1.3 x L2,
    where no screening size lies: without 8 x L2 it is screened out and those sizes lose."""

    def b_speed(ws, l2):
        if 1.1 * l2 <= ws <= 1.3 * l2:
            return 8000.0
        return 7000.0 if ws >= 4 * l2 else 5000.0

    curves = {f"A{i}": (lambda ws, l2, g=6000.0 - 10 * i: g) for i in range(3)}
    curves["B"] = b_speed
    ex = ModelExecutor(curves, l2_bytes=L2, baseline=lambda ws, l2: 4500.0,
                       copy=lambda ws, l2: 6000.0, noise=0.0)  # fmt: skip
    plan = api.plan("h200", out=str(tmp_path / "plan.json"), dtypes="fp32").path
    run = str(api.run(str(plan), dtypes=["fp32"], executor=ex, out_root=str(tmp_path), run_id="r"))
    (row,) = proof.leave_out(run, 8.0).to_dict("records")
    from sweeper.run.search import screen_sizes

    entries = load_plan(plan).sizes("fp32")
    (n,) = screen_sizes(entries, L2, (8.0,))
    assert row["left_out_mib"] * 2**20 == next(
        e["working_set_bytes"] for e in entries if e["n"] == n
    )
    assert (row["survivors"], row["survivors_without"]) == (4, 3)
    swept_b = sum(1 for _ in load_run_candidates(run, "B"))
    assert row["cells_saved"] == swept_b > 0
    assert 1.1 * L2 <= row["worst_ws_mib"] * 2**20 <= 1.3 * L2
    assert row["short"] == pytest.approx(1 - 6000 / 8000, abs=0.01)
    # a size whose survivors all survive elsewhere too costs nothing
    (row,) = proof.leave_out(run, 0.5).to_dict("records")
    assert row["cells_saved"] == 0 and row["short"] == 0
    assert proof.main(["leave-out", run, "--fraction", "8"]) == 0
    assert "| hot | fp32 |" in capsys.readouterr().out


def load_run_candidates(run: str, config: str):
    from sweeper.analyze.store import read_trials

    trials, _ = read_trials(run)
    return [t for t in trials if t["config"] == config and t.get("phase") in ("sweep", "refine")]


def test_prove_times_the_two_passes_that_top_prints_then_checks_them(runs, monkeypatch, tmp_path):
    """`prove` runs exactly the passes `top` prints (here on the model GPU, where the
    policy's dispatch is the config policy-x) and gives `check`'s table and exit status."""
    plan, _, _, ex = runs
    real, calls = api.run, []

    def on_the_model_gpu(plan_path, *, out_root, **kw):
        calls.append({"plan_path": plan_path, **kw})
        m = model({"policy-x": 5700.0})  # A and B lead it by 5.3% and 3.5%, C by 1.75%
        return real(plan_path, sizes=kw["sizes"], executor=m, out_root=out_root,
                    run_id=kw["run_id"])  # fmt: skip

    monkeypatch.setattr(api, "run", on_the_model_gpu)
    out, root = tmp_path / "proof.md", tmp_path / "passes"
    argv = ["prove", *ex, "--policy", "P.json", "--root", str(root), "--k", "3", "--top", "3"]
    assert proof.main([*argv, "--out", str(out)]) == 1
    assert calls == proof.pass_runs(ex, 3, "P.json", "unused: the runs name their plan")
    assert [c["run_id"] for c in calls] == ["proof-p1", "proof-p2"]
    assert calls[0]["configs"] == ["A", "B", "C", "policy-*"] and calls[0]["grid"] == "extended"
    text = out.read_text()
    assert "| fp32 | 43.12 MiB | `A` | 1.333x | 1.053x | 1.053x | **yes** |" in text
    assert "| fp32 | 43.12 MiB | `C` |" in text and text.count("**yes**") == 2 * 4 * 2
    assert (root / "h200" / "proof-p2" / "manifest.json").exists()


def test_prove_with_a_policy_that_is_not_there_is_one_line_and_times_nothing(runs, tmp_path):
    _, _, _, ex = runs
    root = tmp_path / "passes"
    with pytest.raises(SystemExit) as e:
        proof.main(["prove", *ex, "--policy", str(tmp_path / "none.json"), "--root", str(root)])
    assert str(e.value).startswith("prove: ") and "\n" not in str(e.value)
    assert not root.exists()
