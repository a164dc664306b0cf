"""`sweeper verify`'s printout through CliRunner, on a report of verify's shape (no GPU):
it lists at most 20 failures per kind, and says how many there are when there are more.
And its timing verdict over repeated passes (`timing_verdict`, a pure function)."""

import pytest
from typer.testing import CliRunner

from sweeper import api
from sweeper.cli import app
from sweeper.errors import SweeperError


def _row(i):
    return {"dtype": "fp32", "ws_bytes": 1000 + i, "n": 250 + i, "vs_numba": 1.0,
            "ratio": 0.95, "ratio_lo": 0.93, "ratio_hi": 0.97, "baseline": "torch"}  # fmt: skip


def test_more_than_20_losses_are_counted_not_silently_cut(monkeypatch):
    losses = [_row(i) for i in range(66)]
    rep = {
        "cases": [{"ok": True}] * 4,
        "failed": [],
        "dispatch_mismatches": [],
        "timing_csv": "x/verify_timing.csv",
        "timing": {
            "sizes": 429,
            "max_parity_dev": 0.047,
            "min_ratio": 0.915,
            "parity_failures": [],
            "baseline_losses": losses,
            "bit_failures": [],
            "ok": False,
        },  # fmt: skip
    }
    monkeypatch.setattr(api, "verify", lambda policy, **kw: rep)
    res = CliRunner().invoke(app, ["verify", "p.json"])
    assert res.exit_code == 1
    assert "66 losses; the first 20 are listed (x/verify_timing.csv)" in res.output
    assert res.output.count("LOSES fp32") == 20
    assert "parity failures;" not in res.output


def test_verify_times_a_cold_only_run_in_cold_mode_and_a_hot_run_in_hot_mode():
    """A cold-only run is verified at its cold sizes (looking for hot sizes there would find
    none), a hot run at its hot sizes: every planned size and the refinement's extra ones."""
    from pathlib import Path

    from sweeper.export.verify import run_sizes
    from sweeper.plan.planfile import load_plan

    root = Path(__file__).resolve().parents[2]
    plan = load_plan(root / "sweeps" / "h200.json")
    mode, sizes = run_sizes(root / "results/h200/cold-6", ("fp32", "fp16"), {})
    assert mode == "cold" and len(sizes["fp32"]) > 20 and len(sizes["fp16"]) > 20
    mode, sizes = run_sizes(root / "results/h200/hot-7", ("fp32", "int8"), {})
    assert mode == "hot"
    assert {e["n"] for e in plan.sizes("int8")} < set(sizes["int8"])
    with pytest.raises(SweeperError, match="no baseline measurement for int8"):
        run_sizes(root / "lab/h200/baseline-v2", ("int8",), {})


def _t(dtype, ws, ratio, hi, vs_numba=1.0, p=1, exact=True):
    return {"pass": p, "dtype": dtype, "ws_bytes": ws, "n": ws // 8, "vs_numba": vs_numba,
            "ratio": ratio, "ratio_lo": ratio - 0.01, "ratio_hi": hi, "baseline": "torch",
            "bit_exact_after_timing": exact}  # fmt: skip


def test_one_pass_verdict_is_the_single_measurement():
    from sweeper.analyze.verdict import timing_verdict

    v = timing_verdict([_t("fp32", 10, 0.98, 0.99), _t("fp32", 20, 1.02, 1.03, vs_numba=1.07)])
    assert v["passes"] == 1 and v["sizes"] == 2 and not v["ok"]
    assert [r["ws_bytes"] for r in v["baseline_losses"]] == [10]
    assert [r["ws_bytes"] for r in v["parity_failures"]] == [20]
    assert v["unrepeated_losses"] == [] and v["pass_spread"] is None
    assert v["max_parity_dev"] == pytest.approx(0.07) and v["min_ratio"] == pytest.approx(0.98)


def test_with_two_passes_only_a_repeated_failure_fails():
    from sweeper.analyze.verdict import timing_verdict

    rows = [
        _t("fp32", 10, 0.98, 0.99, p=1), _t("fp32", 10, 0.985, 0.995, p=2),  # loses twice
        _t("fp32", 20, 0.99, 0.995, p=1), _t("fp32", 20, 1.01, 1.02, p=2),  # loses once
        _t("fp16", 30, 1.1, 1.2, vs_numba=1.06, p=1), _t("fp16", 30, 1.1, 1.2, 1.08, p=2),
        _t("fp16", 40, 1.1, 1.2, vs_numba=1.06, p=1), _t("fp16", 40, 1.1, 1.2, 1.01, p=2),
    ]  # fmt: skip
    v = timing_verdict(rows)
    assert v["passes"] == 2 and v["sizes"] == 4 and not v["ok"]
    assert [(r["dtype"], r["ws_bytes"]) for r in v["baseline_losses"]] == [("fp32", 10)]
    assert [r["ratio"] for r in v["baseline_losses"][0]["passes"]] == [0.98, 0.985]
    assert [r["ws_bytes"] for r in v["unrepeated_losses"]] == [20]
    assert [r["ws_bytes"] for r in v["parity_failures"]] == [30]
    assert [r["ws_bytes"] for r in v["unrepeated_parity_failures"]] == [40]
    sp = v["pass_spread"]  # |0.985/0.98-1|, |1.01/0.99-1|, 0, 0
    assert sp["n"] == 4 and sp["max"] == pytest.approx(1.01 / 0.99 - 1)
    # without the repeated failures the verdict passes, one-pass-only failures notwithstanding
    ok = timing_verdict(rows[2:4] + rows[6:])
    assert ok["ok"] and ok["unrepeated_losses"] and ok["unrepeated_parity_failures"]


def test_a_wrong_output_in_any_pass_fails():
    from sweeper.analyze.verdict import timing_verdict

    v = timing_verdict([_t("int8", 10, 1.2, 1.3, p=1), _t("int8", 10, 1.2, 1.3, p=2, exact=False)])
    assert not v["ok"] and [r["pass"] for r in v["bit_failures"]] == [2]


def test_cli_prints_every_pass_of_a_repeated_loss_and_the_pass_spread(monkeypatch):
    from sweeper.analyze.verdict import timing_verdict

    rows = [_t("fp32", 13874720, 0.983, 0.989, p=1), _t("fp32", 13874720, 0.988, 0.993, p=2),
            _t("fp32", 8879840, 1.014, 1.016, p=1), _t("fp32", 8879840, 0.982, 0.984, p=2)]  # fmt: skip
    rep = {"cases": [{"ok": True}], "failed": [], "dispatch_mismatches": [],
           "timing_csv": "x/verify_timing.csv", "timing": timing_verdict(rows)}  # fmt: skip
    seen = {}

    def fake(policy, timing=True, passes=2, sizes=None, configs=None, dtypes=None):
        seen.update(passes=passes, sizes=sizes, configs=configs, dtypes=dtypes)
        return rep

    monkeypatch.setattr(api, "verify", fake)
    res = CliRunner().invoke(
        app,
        ["verify", "p.json", "--passes", "3", "--sizes", "36:52", "--configs", "*-stride1",
         "--dtypes", "fp32"],
    )  # fmt: skip
    assert res.exit_code == 1 and seen == {
        "passes": 3, "sizes": "36:52", "configs": "*-stride1", "dtypes": "fp32"
    }  # fmt: skip
    assert "2 sizes x 2 passes" in res.output
    assert (
        "LOSES fp32 13874720 B: 0.983x [0.973, 0.989]; 0.988x [0.978, 0.993] vs torch (within "
        "the pass-to-pass noise, p95 3.02%)" in res.output
    )
    assert "lost once fp32 8879840 B: 1.014x [1.004, 1.016]; 0.982x [0.972, 0.984]" in res.output
    assert "pass to pass, the ratio to the baseline moved by a median" in res.output


def test_zero_passes_is_a_one_line_error_before_any_gpu_work(tmp_path):
    bad = CliRunner().invoke(app, ["verify", str(tmp_path / "p.json"), "--passes", "0"])
    assert bad.exit_code == 1
    assert bad.output.strip().splitlines() == ["error: --passes must be at least 1, got 0"]


def test_verify_refuses_bad_sizes_in_one_line_before_writing_anything(tmp_path):
    import shutil
    from pathlib import Path

    run = tmp_path / "run"
    shutil.copytree(Path(__file__).resolve().parents[2] / "results/h200/cold-6", run)
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    res = CliRunner().invoke(app, ["verify", str(run / "policy.json"), "--sizes", "52:36"])
    assert res.exit_code == 1
    assert res.output.strip().splitlines() == [
        "error: --sizes '52:36': LO must be at least 0 and at most HI"
    ]
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before


def test_verify_without_a_gpu_says_so_in_one_line_and_writes_nothing(tmp_path):
    import shutil
    from pathlib import Path

    from sweeper.run.timers import require_gpu

    try:
        require_gpu()
        pytest.skip("a GPU is usable here: this checks the machine without one")
    except Exception:  # noqa: BLE001 - no GPU, the case under test
        pass
    root = Path(__file__).resolve().parents[2]
    run = tmp_path / "results" / "h200" / "hot-7"
    run.mkdir(parents=True)
    shutil.copy(root / "results/h200/hot-7/policy.json", run / "policy.json")
    res = CliRunner().invoke(app, ["verify", str(run / "policy.json")])
    assert res.exit_code != 0 and res.output.count("\n") == 1, res.output
    assert "GPU" in res.output
    assert sorted(p.name for p in run.iterdir()) == ["policy.json"]


def test_verify_refuses_a_header_that_is_not_its_policys_export_and_writes_nothing(tmp_path):
    """verify builds and times the export of the policy it is given; a header beside it that
    differs (edited by hand, or another policy's) is named in one line and left alone, before
    any GPU work."""
    import shutil
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    run = tmp_path / "results" / "h200" / "hot-7"
    run.mkdir(parents=True)
    shutil.copy(root / "results/h200/hot-7/policy.json", run / "policy.json")
    shutil.copy(root / "results/h200/aw-4/relu_policy.cuh", run / "relu_policy.cuh")
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    res = CliRunner().invoke(app, ["verify", str(run / "policy.json")])
    assert res.exit_code == 1
    assert res.output.strip().splitlines() == [
        f"error: {run / 'relu_policy.cuh'} is not the export of {run / 'policy.json'} (edited, "
        f"or of another policy); `sweeper export {run / 'policy.json'} --format cuda -o "
        f"{run / 'relu_policy.cuh'} --force` rewrites it"
    ]
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before


def test_the_export_check_ignores_how_the_policy_path_was_spelled():
    from sweeper.export.verify import _same_export

    a = "x\n// entry 0: h200 ... tolerance 0.02, file results/h200/hot-7/policy.json\ny\n"
    b = "x\n// entry 0: h200 ... tolerance 0.02, file /abs/results/h200/hot-7/policy.json\ny\n"
    assert _same_export(a, b)
    assert not _same_export(a, b.replace("tolerance 0.02", "tolerance 0.03"))
    assert not _same_export(a, a.replace("y\n", "z\n"))
