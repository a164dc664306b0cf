"""REPORT.md and the `plot` / `report` commands on a synthetic run folder."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pytest
from typer.testing import CliRunner

from sweeper import api
from sweeper.analyze.store import load_run
from sweeper.cli import app
from sweeper.records import record_derived
from sweeper.report.report import SECTIONS, largest_gaps

try:
    from tests.unit.test_plots import (
        BAD_CELL,
        CONFIGS,
        PRUNED,
        STREAMING,
        synthetic_manifest,
        synthetic_results,
        write_synthetic_run,
    )
except ImportError:  # tests/ is not a package: pytest put tests/unit on sys.path
    from test_plots import (
        BAD_CELL,
        CONFIGS,
        PRUNED,
        STREAMING,
        synthetic_manifest,
        synthetic_results,
        write_synthetic_run,
    )

runner = CliRunner()


@pytest.fixture(scope="module")
def plotted_run(tmp_path_factory) -> Path:
    """A synthetic run with its plots rendered once (rendering is the slow part)."""
    d = write_synthetic_run(tmp_path_factory.mktemp("plotted") / "results" / "testgpu" / "r1")
    api.plot(str(d))
    return d


@pytest.fixture
def run_dir(plotted_run, tmp_path) -> Path:
    """A private copy (mtimes kept, so the plots stay newer than results.csv)."""
    d = tmp_path / "results" / "testgpu" / "r1"
    shutil.copytree(plotted_run, d, copy_function=shutil.copy2)
    return d


def _sections(text: str) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def test_report_without_selection_or_policy_says_so(run_dir):
    path = api.report(str(run_dir))
    assert path == run_dir / "REPORT.md"
    text = path.read_text()
    sec = _sections(text)
    assert list(sec) == list(SECTIONS)
    assert "No selection built yet" in sec["Selection"]
    assert "No policy built yet" in sec["Policy"]
    assert "Not built yet: selection" in sec["Summary"]
    first = text.split("\n## ")[0]  # the first screen: above the first section
    assert "**Verdict: incomplete.** No policy yet, so nothing to ship or grade" in first
    assert (
        "**Project targets: incomplete.** No policy, so no target is checked"
        in (sec["Project targets"])
    )
    # environment
    for needle in ("Test GPU 64MB", "575.51", "deadbeef", "numba_cuda", "abc123", "64 MiB"):
        assert needle in sec["Environment"], needle
    # the fallback summary of the fastest config per size: two configs either side of the
    # cliff at L2, one change between them, per range of working set the ratio's lowest-highest
    # (L2 = 64 MiB: streaming loads lose to torch in (32, 64] MiB and win above L2)
    from sweeper.report.tables import best_per_size

    best = best_per_size(load_run(run_dir).results)
    for mode in ("hot", "cold"):
        r = best[(best.dtype == "fp32") & (best["mode"] == mode)]
        cells = [
            r[(r.ws_bytes > lo * 64 * 2**20) & (r.ws_bytes <= hi * 64 * 2**20)].ratio
            for lo, hi in ((0, 1 / 8), (1 / 8, 1 / 2), (1 / 2, 1), (1, 4), (4, float("inf")))
        ]
        ranges = " | ".join(f"{c.min():.2f}-{c.max():.2f}" if len(c) else "-" for c in cells)
        low = r.loc[r.ratio.idxmin()]
        row = (
            f"| {mode} | fp32 | {len(r)} | {r.config.nunique()} | "
            f"{int((r.config != r.config.shift()).sum()) - 1} | {ranges} | "
            f"{low.ratio:.3f} @ {low.ws_bytes / 2**20:g} | {int((r.ratio < 1).sum())} |"
        )
        assert row in sec["Selection"], row
    hot = best[(best.dtype == "fp32") & (best["mode"] == "hot")]
    assert set(hot.config) == {CONFIGS[1], STREAMING}  # two configs, one change at the cliff
    assert "| hot | fp32 | 23 | 2 | 1 |" in sec["Selection"]
    # hot before cold, fp32 before fp16
    order = re.findall(r"^\| (hot|cold) \| (fp32|fp16) \|", sec["Selection"], flags=re.M)
    assert order == [(m, d) for m in ("hot", "cold") for d in ("fp32", "fp16")]
    assert "<details>" not in text


def test_report_guards_pruned_timing(run_dir):
    sec = _sections(api.report(str(run_dir)).read_text())
    mode, dtype, ws, config = BAD_CELL
    guard_rows = [ln for ln in sec["Guards"].splitlines() if "mismatch" in ln]
    assert any(f"`{config}`" in ln and "| 40 |" in ln and mode in ln for ln in guard_rows)
    assert "max abs err 3.0 at index 17" in sec["Guards"]
    assert sec["Guards"].strip().startswith("1 of 552 cells (rows of the trial log) are not ok")
    pruned = sec["Pruned"]
    assert "| hot | fp16 | 57 | 1 | 0 | 3 | yes |" in pruned  # screened, out, failed, climb
    assert f"| `{PRUNED['config']}` | hot | fp16 | 40 | 3.12% |" in pruned  # where, how much
    timing = sec["Timing"]
    # the climb runs inside screen and the refine count is of sizes: neither is added
    assert "Before the sweeps: prepare 0.5 s." in timing
    assert "| hot/fp32 | 120.0 s | 40.0 s | 3,000.0 s | 12 |" in timing
    assert (
        "**Total: 3,125.0 s (0:52:05)**, the run's wall time (`total_s`); the phases above "
        "add up to 3,120.5 s."
    ) in timing
    assert "wall time 3,125.0 s (0:52:05)" in sec["Summary"]


def test_report_links_to_existing_plots(run_dir):
    text = api.report(str(run_dir)).read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert "plots/bandwidth_hot.png" in links and "plots/bandwidth_cold.png" in links
    assert "plots/modes.png" in links
    for link in links:
        assert not Path(link).is_absolute()
        assert (run_dir / link).stat().st_size > 1000, link
    assert not re.findall(r"\]\([^)]+\.svg\)", text)  # SVGs are regenerated, never linked
    assert f"sweeper plot {run_dir} --format svg" in text


def test_report_coverage_shows_gaps_and_l2_bracket(run_dir):
    sec = _sections(api.report(str(run_dir)).read_text())
    cov = sec["Plan coverage"]
    # widest by ratio: 1 -> 4 and 4 -> 16 (×4), then 256 -> 512 (×2)
    assert "1 → 4 MiB (×4.00); 4 → 16 MiB (×4.00); 256 → 512 MiB (×2.00)" in cov
    # dense band 24..160 MiB in 8 MiB steps, the plan's target (L2/8): no warning
    assert "| 18 | 8 MiB (24 → 32) |" in cov and "⚠" not in cov
    assert "64 .. 72" in cov  # L2 (64 MiB) bracketed by the sampled 64 and 72 MiB


def test_largest_gaps_orders_by_ratio():
    assert largest_gaps([1, 2, 3, 12, 13], k=2) == [(3, 12), (1, 2)]


def test_report_with_selection_and_policy(run_dir):
    from sweeper.analyze import policy, select
    from sweeper.analyze.store import load_run

    run = load_run(run_dir)
    sel = select.select(run.results)
    select.write_selection(run_dir, sel, run.manifest["device"]["l2_bytes"], "test", "torch")
    doc = policy.build_policy(run.results, run.manifest)
    policy.write_policy(run_dir / "policy.json", doc)
    text = api.report(str(run_dir)).read_text()
    sec = _sections(text)
    assert "Every stage built." in sec["Summary"]
    assert "selection.md" in sec["Selection"] and "No selection" not in sec["Selection"]
    assert "No policy" not in sec["Policy"]
    # the policy boundary sits between the measured 64 and 72 MiB, and is shown bracketed
    assert re.search(rf"\| fp16 \| \[68, ∞\) \| `{STREAMING}` \|.*\| 64 \.\. 72 \|", sec["Policy"])
    # policy.json is newer than the plots: the report re-rendered them with the policy figure
    assert "plots/policy.png" in sec["Plots"] and (run_dir / "plots/policy.png").exists()


def test_cli_plot_writes_png_and_svg(run_dir):
    result = runner.invoke(app, ["plot", str(run_dir), "--format", "png,svg"])
    assert result.exit_code == 0, result.output
    paths = [Path(p) for p in result.output.split()]
    assert {p.suffix for p in paths} == {".png", ".svg"}
    assert all(p.parent == run_dir / "plots" and p.stat().st_size > 1000 for p in paths)
    # one bandwidth + ratio figure per mode, heatmaps per mode and dtype, modes compared
    stems = {p.stem for p in paths}
    assert {"bandwidth_hot", "bandwidth_cold", "ratio_hot", "modes", "heatmap_cold_fp16"} <= stems


def test_cli_plot_defaults_to_newest_run(run_dir, monkeypatch):
    monkeypatch.chdir(run_dir.parents[2])
    result = runner.invoke(app, ["plot", "--format", "svg"])
    assert result.exit_code == 0, result.output
    first, *paths = result.output.splitlines()
    assert first.startswith("run: ") and first.endswith(" (the newest complete run)")
    assert paths and all(p.endswith(".svg") for p in paths)


def test_cli_report(run_dir):
    result = runner.invoke(app, ["report", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == str(run_dir / "REPORT.md")
    assert (run_dir / "plots" / "bandwidth_hot.png").exists()


@pytest.mark.parametrize("cmd", ["plot", "report"])
def test_cli_missing_run_is_one_line_exit_1(tmp_path, cmd):
    result = runner.invoke(app, [cmd, str(tmp_path / "nope")])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "nope" in lines[0]
    assert "Traceback" not in result.output


def test_cli_plot_rejects_unknown_format(run_dir):
    result = runner.invoke(app, ["plot", str(run_dir), "--format", "gif"])
    assert result.exit_code == 1 and "gif" in result.output


def test_report_on_a_hot_only_run_has_no_modes_figure(tmp_path):
    from sweeper.analyze.store import write_run

    d = write_run(tmp_path / "r", synthetic_manifest(("hot",)), synthetic_results(("hot",)))
    text = api.report(str(d)).read_text()
    assert "plots/modes.png" not in text and "plots/bandwidth_hot.png" in text


def test_coverage_flags_a_dense_band_hole(tmp_path):
    from sweeper.analyze.store import write_run
    from sweeper.report.plots import MiB

    df = synthetic_results(("hot",))
    df = df[~df["ws_bytes"].isin([80 * MiB, 88 * MiB])]  # a 24 MiB hole above L2
    d = write_run(tmp_path / "r", synthetic_manifest(("hot",)), df)
    from sweeper.analyze.store import load_run
    from sweeper.report.report import coverage

    run = load_run(d)
    text = "\n".join(coverage(run.results, run.manifest))
    assert "24 MiB (72 → 96) ⚠ wider than L2/8" in text


def test_report_verify_section_lists_repeated_and_one_pass_losses(run_dir):
    try:
        from tests.unit.test_plots import SIZES, synthetic_verify
    except ImportError:
        from test_plots import SIZES, synthetic_verify

    sec = _sections(api.report(str(run_dir)).read_text())
    assert "Not verified yet" in sec["Verify"]
    synthetic_verify().to_csv(run_dir / "verify_timing.csv", index=False)
    record_derived(run_dir / "verify_timing.csv")  # as `sweeper verify` records what it wrote
    (run_dir / "verify.txt").write_text("printout\n")
    path = api.report(str(run_dir))  # the CSV is newer than the plots: they are re-rendered
    sec = _sections(path.read_text())["Verify"]
    assert f"{2 * len(SIZES)} sizes x 2 passes" in sec  # fp32 and fp16
    assert "| sizes losing to the baseline in every pass | 1 |" in sec
    assert "| sizes losing in some passes only | 1 |" in sec
    assert "| verdict | **fail** |" in sec
    assert "[verify.txt](verify.txt)" in sec
    assert "| fp32 | 16 MiB |" in sec and "0.970x [0.960, 0.980]; 0.970x [0.960, 0.980]" in sec
    assert "| fp32 | 4 MiB |" in sec and "0.970x [0.960, 0.980]; 1.100x [1.090, 1.110]" in sec
    # each failure beside the run's own ratio of that config at that size
    from sweeper.units import MiB

    cells = load_run(run_dir).results
    at = cells[(cells.dtype == "fp32") & (cells.config == CONFIGS[1]) & (cells.role == "candidate")]
    at16 = float(at[at.ws_bytes == 16 * MiB].ratio.iloc[0])
    assert f"0.970x [0.960, 0.980] | {at16:.3f}x |" in sec
    ok = cells[(cells.role == "candidate") & (cells.status == "ok")]
    measured = set(zip(ok["mode"], ok.dtype, ok.ws_bytes, ok.config, strict=True))
    vt = synthetic_verify()
    n = sum(k in measured for k in zip(vt["mode"], vt.dtype, vt.ws_bytes, vt.config, strict=True))
    assert 0 < n < len(vt)  # a cell the run did not measure ok (fp16 40 MiB hot) is left out
    assert "| ratio over the run's ratio of the same config and size | median " in sec
    assert f"({n} of {len(vt)} size-passes) |" in sec
    assert (run_dir / "plots" / "verify_ratio.png").exists()
    assert "![verify_ratio](plots/verify_ratio.png)" in _sections(path.read_text())["Plots"]


def test_verify_against_run_divides_each_size_pass_by_the_runs_ratio_of_its_config():
    from sweeper.report.report import verify_against_run

    run = {("hot", "fp32", 1 << 20, "A"): 1.0, ("hot", "fp32", 2 << 20, "A"): 1.1}
    rows = [
        {"mode": "hot", "dtype": "fp32", "ws_bytes": 1 << 20, "config": "A", "ratio": 0.95},
        {"mode": "hot", "dtype": "fp32", "ws_bytes": 1 << 20, "config": "A", "ratio": 1.05},
        {"mode": "hot", "dtype": "fp32", "ws_bytes": 2 << 20, "config": "A", "ratio": 1.1},
        {"mode": "hot", "dtype": "fp32", "ws_bytes": 2 << 20, "config": "B", "ratio": 2.0},
        {"mode": "cold", "dtype": "fp32", "ws_bytes": 1 << 20, "config": "A", "ratio": 2.0},
    ]  # the last two: a config or a mode the run did not measure
    got = verify_against_run(rows, run)
    assert (got["n"], got["of"]) == (3, 5)
    assert got["median"] == pytest.approx(1.0)
    # numpy's linear percentiles of 0.95, 1.05 and 1.0
    assert got["p5"] == pytest.approx(0.955) and got["p95"] == pytest.approx(1.045)
    assert verify_against_run(rows[3:], run) is None


def test_a_command_without_a_run_reads_the_newest_complete_one(tmp_path):
    import json

    from sweeper.errors import SweeperError
    from sweeper.runfolder import newest_run, resolve_run

    def make(run_id, started, status):
        d = tmp_path / "h200" / run_id
        d.mkdir(parents=True)
        (d / "manifest.json").write_text(json.dumps({"started": started, "status": status}))
        return d

    older = make("a", "2026-01-01T00:00:00Z", "complete")
    newer = make("b", "2026-01-02T00:00:00Z", "interrupted")
    assert resolve_run(None, tmp_path) == older  # what select, policy, plot and report read
    assert newest_run(tmp_path) == newer  # what --resume continues
    (older / "manifest.json").write_text(json.dumps({"started": "x", "status": "interrupted"}))
    with pytest.raises(SweeperError, match="no complete run"):
        resolve_run(None, tmp_path)


def test_guards_list_above_ceiling_cells_with_the_check_that_refused_them():
    from sweeper.report.report import guards
    from sweeper.units import MiB

    df = synthetic_results()
    detail = "13500 GB/s is 2.25x the L2-resident ceiling (6000 GB/s); the limit is 1.2x"
    hit = (df["mode"] == "hot") & (df["dtype"] == "fp32") & (df["ws_bytes"] == 40 * MiB)
    hit &= df["config"] == CONFIGS[0]
    df.loc[hit, ["status", "status_detail"]] = ["above-ceiling", detail]
    m = synthetic_manifest()
    text = "\n".join(guards(df, m))
    assert "**Physical limits.** This run was recorded without the physical-limit check." in text
    m["harness"] = {"ceiling_check": {"margin": 1.2, "copy_from_x_l2": 2}}
    m["ceiling"] = {"gbps": 6000.0}
    text = "\n".join(guards(df, m))
    row = next(ln for ln in text.splitlines() if "above-ceiling |" in ln)
    assert f"`{CONFIGS[0]}`" in row and "| 40 |" in row and detail in row
    assert (
        "**Physical limits.** A candidate above 1.2x the L2-resident ceiling (6000 GB/s) at any "
        "size, or from 2 x L2 on above 1.2x the copy kernel at its size or the DRAM peak "
        "(1008 GB/s), is `above-ceiling`: 1 cell(s) in this run."
    ) in text


GOOD_VERIFY = (
    "pass,mode,dtype,n,ws_bytes,config,gbps,vs_numba,ratio,ratio_lo,ratio_hi\n"
    "1,hot,fp32,8192,65536,a,55.7,0.995,1.077,1.076,1.078\n"
    "2,hot,fp32,8192,65536,a,55.9,0.998,1.071,1.070,1.072\n"
)


@pytest.mark.parametrize(
    "text, field",
    [
        (GOOD_VERIFY.replace(",ratio_hi\n", "\n").replace(",1.078\n", "\n").replace(",1.072\n", "\n"),
         "field 'ratio_hi': column missing"),
        (GOOD_VERIFY[: GOOD_VERIFY.rindex(",1.070")] + "\n", "field 'ratio_lo': a value is missing"),
        (GOOD_VERIFY.replace("1,hot,fp32,8192,65536,a,55.7", "1,hot,fp32,8192,65536,a,nan"),
         "field 'gbps': a value is missing or not a positive number"),
        (GOOD_VERIFY.replace("2,hot,fp32", "1,hot,fp32"), "field 'ws_bytes': a size is listed twice"),
        (GOOD_VERIFY.replace("65536", "65537"), "field 'ws_bytes': not n x the op's bytes per element"),
        (GOOD_VERIFY.replace("fp32", "fp64"), "field 'dtype': an unknown dtype"),
    ],
    ids=["column-gone", "cut", "nan", "duplicate", "edited-size", "unknown-dtype"],
)  # fmt: skip
def test_a_damaged_verify_table_is_refused_in_one_line_and_nothing_changes(run_dir, text, field):
    from sweeper.runfolder import VERIFY_CSV

    (run_dir / VERIFY_CSV).write_text(text)
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    result = runner.invoke(app, ["report", str(run_dir)])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {run_dir / VERIFY_CSV}: "), lines
    assert field in lines[0]
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize(
    ("search", "climb", "says"),
    [
        (
            {"margin": 0.005},
            {"hot/fp32": {"rounds": 2}},
            "The climb's moves: one-axis changes only.",
        ),
        ({"climb_trades": True}, {"hot/fp32": {"rounds": 2}}, "and trades at the same bytes"),
        ({"climb_trades": True}, {}, None),
    ],
)
def test_the_pruned_section_names_the_climbs_moves(search, climb, says):
    from sweeper.report.report import pruned

    item = {"mode": "hot", "dtype": "fp32", "config": "c", "reason": "r", "shortfall": 0.01,
            "ws_bytes": 1 << 20}  # fmt: skip
    text = "\n".join(pruned({"pruned": [item], "search": search, "climb": climb}))
    if says is None:
        assert "The climb's moves" not in text
    else:
        assert says in text


def test_the_pruned_section_counts_the_survivors_swept_beyond_the_l2_only():
    from sweeper.report.report import pruned

    item = {"mode": "hot", "dtype": "fp32", "config": "c", "reason": "r", "shortfall": 0.01,
            "ws_bytes": 1 << 20}  # fmt: skip
    doc = {"pruned": [item], "beyond_l2_only": {"hot/fp32": ["a", "b"], "hot/fp16": []}}
    assert pruned(doc)[-1] == (
        "Survivors swept beyond the L2 only (within the margin of the best at no screening "
        "size that fits it): hot/fp32 2; `beyond_l2_only` in [manifest.json](manifest.json) "
        "names them."
    )
    assert not any("beyond the L2" in x for x in pruned({"pruned": [item]}))


# ---- Batch position and clocks ----------------------------------------------------------

CLOCKS = {
    "available": True, "device": "PCI 0000:3b:00.0", "batches": 40,
    "sm_mhz": {"min": 1950, "median": 1965, "max": 1980},
    "mem_mhz": {"min": 3201, "median": 3201, "max": 3201},
    "throttled": 2, "repeated": 2, "kept_throttled": 0,
    "reasons": {"gpu_idle": 40, "hw_thermal_slowdown": 2}, "violation_ms": {"thermal": 1.5},
}  # fmt: skip


def _batched_run(path: Path, ramp: float, clocks) -> Path:
    """The synthetic run as the batched executor would write it: each (mode, dtype, size) one
    batch of its candidate cells in a shuffled order; ratio times (1 + ramp) over the batch."""
    import numpy as np

    from sweeper.analyze.store import write_run

    df = synthetic_results()
    rng = np.random.default_rng(3)
    cand = df[df["role"] == "candidate"]
    for b, (_, idx) in enumerate(cand.groupby(["mode", "dtype", "ws_bytes"]).groups.items()):
        pos = rng.permutation(len(idx))
        df.loc[idx, "batch"] = b
        df.loc[idx, "batch_pos"] = pos
        df.loc[idx, "batch_cells"] = len(idx)
        df.loc[idx, "sm_mhz"] = 1965
        df.loc[idx, "ratio"] *= 1 + ramp * pos / (len(idx) - 1)
    manifest = synthetic_manifest()
    manifest.setdefault("harness", {})["executor"] = "batched"
    if clocks is not None:
        manifest.setdefault("timing", {})["clocks"] = clocks
    return write_run(path, manifest, df)


def test_a_classic_run_says_its_cells_were_timed_one_at_a_time(run_dir):
    sec = _sections(api.report(str(run_dir)).read_text())["Batch position and clocks"]
    first, slots = sec.strip().split("\n\n")
    assert first == (
        "This run timed its cells one at a time (classic executor): there are no batch "
        "positions to test, and the clocks were not recorded."
    )
    # the slot test needs per-sample times, which the synthetic rows do not carry
    assert slots.startswith("**Slot order: not measured.**")


def test_a_batched_run_reports_the_position_test_and_its_clocks(tmp_path):
    # the synthetic ratios vary with config and size together (4 cells a batch), so the ramp
    # is large here; what a small ramp needs is in test_position.py
    d = _batched_run(tmp_path / "results" / "testgpu" / "r1", 0.15, CLOCKS)
    assert load_run(d).results["batch_pos"].notna().sum() > 0  # read back from the trial log
    sec = _sections(api.report(str(d)).read_text())["Batch position and clocks"]
    assert "**Batch position: position effect.** From a batch's first cell to its last" in sec
    effect, lo = re.search(r"moves \+(\d+\.\d\d)% \(95% CI \+(\d+\.\d\d)%", sec).groups()
    assert 10 < float(effect) < 20 and float(lo) > 0, sec
    assert (
        "**Clocks.** SM clock 1950 / 1965 / 1980 MHz (min / median / max at the end of 40 "
        "batches), memory clock 3201 / 3201 / 3201 MHz. 2 batch(es) throttled: 2 repeated, "
        "0 kept after the last repeat"
    ) in sec
    assert "`hw_thermal_slowdown` 2" in sec


def test_a_batched_run_without_a_position_effect_or_nvml_says_so(tmp_path):
    clocks = {"available": False, "why": "pynvml is not installed (pip install nvidia-ml-py)"}
    d = _batched_run(tmp_path / "results" / "testgpu" / "r1", 0.0, clocks)
    sec = _sections(api.report(str(d)).read_text())["Batch position and clocks"]
    assert "**Batch position: none found.**" in sec
    assert "**Clocks: not recorded.** pynvml is not installed (pip install nvidia-ml-py)." in sec


def test_a_results_table_written_before_the_batch_columns_still_loads(run_dir):
    import pandas as pd

    from sweeper.analyze.columns import ADDED_COLUMNS

    csv = run_dir / "results.csv"
    old = pd.read_csv(csv).drop(columns=list(ADDED_COLUMNS))
    old.to_csv(csv, index=False)
    results = load_run(run_dir).results
    assert results[list(ADDED_COLUMNS)].isna().all().all()


def test_the_slot_test_reads_the_samples_of_the_trial_log(planted_run):
    """The results table holds no per-sample times; the report's slot test reads them from the
    trial records, so a run whose trials carry them gets a measured slot test."""
    run = planted_run("hot-7", lambda t: t, cells=200)
    assert "samples_us" not in load_run(run).results.columns
    sec = _sections(api.report(str(run)).read_text())["Batch position and clocks"]
    assert "Slot order: not measured" not in sec
    assert re.search(
        r"\*\*Slot order: (none found|slot effect)\.\*\* A round's first candidate sample against "
        r"its second: [+-]\d+\.\d\d% \(95% CI [+-]\d+\.\d\d% to [+-]\d+\.\d\d%, bootstrap over "
        r"200 cells",
        sec,
    ), sec


def test_the_guards_count_the_canary_calls_and_the_cells_they_caught():
    import pandas as pd

    from sweeper.report.report import canary_lines

    rows = pd.DataFrame({
        "canaries": pd.array([2, 3, pd.NA, 2], dtype="Int64"),
        "status_detail": ["", "canary: 12 words differ from the reference after 3 canary calls",
                          "", None],
    })  # fmt: skip
    (line, blank) = canary_lines(rows)
    assert "7 canary calls" in line and "in 3 cells; 1 cell(s) failed it" in line and blank == ""
    assert canary_lines(rows.assign(canaries=pd.array([pd.NA] * 4, dtype="Int64"))) == []
    assert canary_lines(rows.drop(columns="canaries")) == []
