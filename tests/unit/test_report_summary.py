"""The report's summary and its budget, on a four-dtype run built with known answers.

The run: hot mode, fp32/fp16/bf16/int8, 130 sizes each (1..128 MiB in 1 MiB steps, 256 and
512 MiB), L2 64 MiB. The baseline runs at 1000 GB/s everywhere; config A (the policy's, in
nine bands per dtype) at 1400 GB/s (ratio 1.4), except fp32 at 10 and 13 MiB, where it runs
at 970 GB/s (ratio 0.97, CI [0.96, 0.98]); config B at 900 GB/s, and 25 of B's cells are
mismatches. The copy kernel and the L2-resident ceiling run at 1400 GB/s. Verify (2 passes)
repeats the fp32 loss at 13 MiB in both passes, at 10 MiB in pass 1 only, and has 30 fp16
sizes that lose in pass 2 only. Timing: 462 s of phases in a 500 s run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from sweeper.analyze import select
from sweeper.analyze.store import coerce, load_run, write_run
from sweeper.analyze.targets import load_targets
from sweeper.cli import app
from sweeper.report.report import SECTIONS, build_report, timing
from sweeper.units import MiB

try:
    from tests.unit.test_plots import synthetic_manifest
except ImportError:  # tests/ is not a package: pytest put tests/unit on sys.path
    from test_plots import synthetic_manifest

DTYPES = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1}
SIZES = [m * MiB for m in range(1, 129)] + [256 * MiB, 512 * MiB]
LOSSES = (10 * MiB, 13 * MiB)  # fp32: config A at ratio 0.97 in the run
BAD = 25  # mismatching cells of config B (fp16, the 25 smallest sizes)
PHASES = {"screen_s": 10.0, "climb_s": 4.0, "climb_compile_s": 2.0, "sweep_s": 100.0,
          "refine_s": 5.0, "refine_points": 3, "bracket_points": 1}  # fmt: skip
TOTAL_S = 500.0
PHASE_SUM = 1.5 + 0.5 + 4 * (10.0 + 100.0 + 5.0)  # prepare, ceiling; climb is inside screen

runner = CliRunner()


def known_results() -> pd.DataFrame:
    rows = []
    for dtype, itemsize in DTYPES.items():
        for i, ws in enumerate(SIZES):
            base = dict(run_id="k1", gpu="testgpu", mode="hot", pattern="preallocated",
                        dtype=dtype, n=ws // (2 * itemsize), ws_bytes=ws, phase="sweep",
                        status="ok", status_detail="", n_samples=30, grid="g", variant_id="")  # fmt: skip
            t_base = ws / 1000.0 / 1e3
            rows.append({**base, "role": "baseline", "config": "torch", "gbps": 1000.0,
                         "time_us": t_base, "copy_gbps": 1400.0})  # fmt: skip
            rows.append({**base, "role": "copy", "config": "copy", "gbps": 1400.0,
                         "time_us": ws / 1400.0 / 1e3, "copy_gbps": 1400.0})  # fmt: skip
            for config, gbps in (("A", 1400.0), ("B", 900.0)):
                if config == "A" and dtype == "fp32" and ws in LOSSES:
                    gbps = 970.0
                t = ws / gbps / 1e3
                ratio = gbps / 1000.0
                row = {**base, "role": "candidate", "config": config, "gbps": gbps,
                       "time_us": t, "time_lo_us": t * 0.99, "time_hi_us": t * 1.01,
                       "base_time_us": t_base, "ratio": ratio, "ratio_lo": ratio - 0.01,
                       "ratio_hi": ratio + 0.01, "copy_gbps": 1400.0, "vec_bytes": 16,
                       "unroll": 1, "block": 256, "load_hint": "default", "store_hint": "default",
                       "variant_id": f"{dtype}-{config}"}  # fmt: skip
                if config == "B" and dtype == "fp16" and i < BAD:
                    row.update(status="mismatch", status_detail=f"max abs err 1.0 at index {i}")
                rows.append(row)
    return coerce(pd.DataFrame(rows))


def known_manifest() -> dict:
    m = synthetic_manifest(("hot",), run_id="k1")
    m["ceiling"] = {"gbps": 1400.0}
    m["baseline"] = "torch"
    m["guards"] = []
    m["pruned"] = [
        {"mode": "hot", "dtype": d, "config": f"c{i}", "reason": "behind", "ws_bytes": 8 * MiB,
         "shortfall": 0.01 + i / 1e4, "sizes": 1}
        for d in DTYPES for i in range(750)
    ]  # fmt: skip
    m["climb"] = {f"hot/{d}": {"rounds": 1, "cells": 10, "configs": 752, "converged": True}
                  for d in DTYPES}  # fmt: skip
    timing = {"prepare_s": 1.5, "ceiling_s": 0.5}
    for d in DTYPES:
        timing.update({f"hot/{d}/{k}": v for k, v in PHASES.items()})
    m["timing"] = {**timing, "total_s": TOTAL_S}
    return m


def known_policy() -> dict:
    edges = [0, *(k * 16 * MiB for k in range(1, 9)), None]  # nine bands per dtype, all A
    bands = [
        {"lo_bytes": lo, "hi_bytes": hi, "config": "A", "first_measured": lo or MiB,
         "last_measured": (hi or 513 * MiB) - MiB, "n_sizes": 16, "bracket_below": None,
         "worst_frac_of_best": 1.0}
        for lo, hi in zip(edges, edges[1:], strict=False)
    ]  # fmt: skip
    return {
        "l2_bytes": 64 * MiB,
        "provenance": {
            "mode": "hot",
            "pattern": "preallocated",
            "tolerance": 0.02,
            "resolution": 8,
        },  # fmt: skip
        "dtypes": {d: {"bands": bands} for d in DTYPES},
    }


def known_verify() -> pd.DataFrame:
    rows = []
    fp16_losses = SIZES[40:70]  # 30 sizes losing in pass 2 only
    for p in (1, 2):
        for dtype in DTYPES:
            for ws in SIZES:
                ratio = 1.4
                if dtype == "fp32" and (ws == 13 * MiB or (ws == 10 * MiB and p == 1)):
                    ratio = 0.97
                if dtype == "fp16" and ws in fp16_losses and p == 2:
                    ratio = 0.95
                rows.append(
                    {"pass": p, "mode": "hot", "dtype": dtype, "n": ws // 8, "ws_bytes": ws,
                     "config": "A", "time_us": 1.0, "gbps": 1000.0 * ratio,
                     "numba_time_us": 1.0, "vs_numba": 1.0, "vs_numba_lo": 0.99,
                     "vs_numba_hi": 1.01, "baseline": "torch", "ratio": ratio,
                     "ratio_lo": ratio - 0.01, "ratio_hi": ratio + 0.01,
                     "bit_exact_after_timing": True, "x_addr": 1 << 32}
                )  # fmt: skip
    return pd.DataFrame(rows)


PLOTS = [Path("plots") / f"{n}.png" for n in (
    "bandwidth_hot", "ratio_hot", "policy", "verify_parity", "verify_ratio",
    *(f"heatmap_hot_{d}" for d in DTYPES))]  # fmt: skip


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    """The run folder (trials and manifest) and its results as every reader loads them."""
    d = write_run(tmp_path_factory.mktemp("k") / "k1", known_manifest(), known_results())
    run = load_run(d)
    return d, run.manifest, run.results, select.select(run.results)


def _report(known, **kw) -> str:
    d, manifest, results, sel = known
    args = dict(plot_files=[d / p for p in PLOTS], selection_table=sel,
                policy_doc=known_policy(), verify_table=known_verify())  # fmt: skip
    args.update(kw)
    return build_report(d, manifest, results, **args)


def _sections(text: str) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def _row(text: str, first: str) -> str:
    (row,) = [ln for ln in text.splitlines() if ln.startswith(f"| {first} |")]
    return row


def test_a_four_dtype_report_fits_300_lines_with_the_summary_first(known):
    text = _report(known)
    lines = text.splitlines()
    assert len(lines) <= 300, len(lines)
    verdict = next(i for i, ln in enumerate(lines) if ln.startswith("**Verdict:"))
    assert verdict < lines.index("## Summary") <= 20  # the first screen: ship, speedup, verdict
    assert lines.index("## Environment") < 40  # the summary follows it
    assert list(_sections(text)) == list(SECTIONS)
    assert "<details>" not in text  # per-size tables are selection.md / selection.csv


def test_the_project_targets_and_the_summary_of_a_known_run(known):
    sections = _sections(_report(known))
    summary, sec = sections["Summary"], sections["Project targets"]
    assert (
        "**Project targets: fail.** 2 of 19 target checks fail on the run's measurements; 4 of "
        "15 fail on verify's timing; verify fails (1 size(s) lose to the baseline in every pass)."
    ) in sec
    assert "Targets:" not in summary and "target checks" not in summary
    assert "defaults from `sweeper/analyze/targets.py`" in sec
    never = _row(sec, "never below the baseline (CI)")
    assert never.endswith("| **no**: fp32 at 10, 13 MiB | **no**: fp32 at 13 MiB |")
    assert "ratio CI upper end >= 1, every size, fp32/fp16/bf16/int8" in never
    assert _row(sec, "no loss over 1%").endswith(
        "| **no**: fp32 at 10, 13 MiB | **no**: fp32 at 13 MiB |"
    )
    # "at least" targets hold in every verify pass: fp16's pass-2 losses at 41-70 MiB fail
    # the band and the ceiling, where the loss targets count only losses in every pass
    band = _row(sec, "1.3x in [42, 52] MiB")
    assert band.endswith(
        "| ratio >= 1.3, [42, 52] MiB, fp32/fp16/bf16 | met | **no**: fp16 at 42, 43, 44, 45, "
        "46, 47, ... (11 sizes) MiB |"
    )
    assert _row(sec, ">= 97% of the L2 ceiling in (32, 48] MiB").endswith(
        "| met | **no**: fp16 at 41, 42, 43, 44, 45, 46, ... (8 sizes) MiB |"
    )
    assert _row(sec, "int8 1.2x at >= 8 MiB").endswith(
        "| ratio >= 1.2, >= 8 MiB, int8 | met | met |"
    )
    copy = _row(sec, ">= 97% of copy at >= 4 x L2")
    assert copy.endswith(
        "| % of the copy kernel >= 97, >= 256 MiB, fp32/fp16/bf16/int8 | met | n/a |"
    )
    assert (
        "Not applicable to this run's mode and dtypes: after-write 1.05x in (36 MiB, 2 x L2]."
        in sec
    )
    # what failed and where: verify's repeated and one-pass losses, guards
    assert (
        "- Verify, losses to the baseline in every pass (1): fp32 13 MiB (0.970x / 0.970x)."
    ) in summary
    one_pass = next(ln for ln in summary.splitlines() if "losses in some passes only" in ln)
    assert one_pass.startswith(
        "- Verify, losses in some passes only (31): fp32 10 MiB (0.970x / 1.400x);"
    )
    assert one_pass.endswith(", ... (31 in all).")
    # fp32's losses at 10 and 13 MiB: no config of the run is faster there (A 0.97x, B 0.9x),
    # where fp16's band and ceiling failures on verify were within the run's reach (A 1.4x)
    assert (
        "- Out of the run's reach (4): failing sizes where no config the run measured meets the "
        "floor either, so no policy built from this run could; the best measured value in "
        "brackets: never below the baseline (CI), fp32 at 10 MiB (0.980), 13 MiB (0.980); "
        "no loss over 1%, fp32 at 10 MiB (0.970), 13 MiB (0.970)."
    ) in sec
    n = 4 * len(SIZES) * 4  # per dtype and size: a baseline, a copy and two candidate cells
    assert (
        f"- Guards: {BAD} of {n} cells not ok ({BAD} mismatch); 0 guard-log finding(s); "
    ) in summary
    assert f"wall time {TOTAL_S:,.1f} s (0:08:20)" in summary
    cells = f"{n} cells ({n // 2} candidate, {n // 4} baseline, {n // 4} copy kernel)"
    assert "130 sizes per dtype" in summary and cells in summary
    assert "![ratio_hot](plots/ratio_hot.png)" in summary


def test_every_number_of_the_detail_sections_of_a_known_run(known):
    sec = _sections(_report(known))
    # selection: one row per dtype, ratio ranges per range of working set (L2 = 64 MiB)
    sel = sec["Selection"]
    assert "[selection.md](selection.md)" in sel and "[selection.csv](selection.csv)" in sel
    assert (
        "| hot | fp32 | 130 | 1 | 0 | 1.40-1.40 | 0.97-1.40 | 1.40-1.40 | 1.40-1.40 | 1.40-1.40 "
        "| 0.970 @ 10 | 2 |"
    ) in sel
    assert (
        "| hot | int8 | 130 | 1 | 0 | 1.40-1.40 | 1.40-1.40 | 1.40-1.40 | 1.40-1.40 | 1.40-1.40 "
        "| 1.400 @ 1 | 0 |"
    ) in sel
    # targets: 19 rows, the run's and verify's columns side by side (copy: n/a on verify)
    tg = sec["Targets"]
    assert len([ln for ln in tg.splitlines() if ln.startswith("| ") and "| hot" not in ln]) == 20
    assert (
        "| no loss over 1% | fp32 | 130 | 0.970 | 0.99 | **no** | 0.970 [0.960, 0.980] @ 10.0 "
        "| 10.0, 13.0 | 130 | 0.970 | **no** | 13.0 |"
    ) in tg
    assert (
        "| >= 97% of copy at >= 4 x L2 | int8 | 2 | 100.000 | 97.0 | yes |  |  | 0 | - | n/a |  |"
        in tg
    )
    assert (
        "| 1.3x in [42, 52] MiB | fp16 | 11 | 1.400 | 1.3 | yes | 1.400 [1.390, 1.410] @ 42.0 |  "
        "| 11 | 0.950 | **no** | 42.0, 43.0, 44.0, 45.0, 46.0, 47.0, 48.0, 49.0, 50.0, 51.0, 52.0 |"
    ) in tg  # the lowest pass: pass 2's 0.95
    # fp32's two loss targets, run and verify, and fp16's band and ceiling on verify
    assert tg.count("| **no** |") == 6 and tg.count("| n/a |") == 4
    # verify
    v = sec["Verify"]
    assert f"{4 * len(SIZES)} sizes x 2 passes, hot mode" in v
    assert "| sizes losing to the baseline in every pass | 1 |" in v
    assert "| sizes losing in some passes only | 31 |" in v
    assert "| lowest ratio to the baseline (any pass) | 0.950 |" in v
    assert "The first 10 of 31; every one: verify_timing.csv." in v
    # guards: the non-ok cells, cut at 10 rows
    g = sec["Guards"]
    assert g.strip().startswith(
        f"{BAD} of {4 * len(SIZES) * 4} cells (rows of the trial log) are not ok"
    )
    assert len([ln for ln in g.splitlines() if "| mismatch |" in ln]) == 10
    assert f"The first 10 of {BAD}; every one: the trial log" in g
    # pruned: counts per dtype, the 10 closest misses, the full list in the manifest
    p = sec["Pruned"]
    assert p.strip().startswith("3000 config(s) screened out before the full sweep")
    assert "| hot | fp32 | 752 | 750 | 0 | 1 | yes |" in p
    assert [p.count(f"| {x} |") for x in ("1.00%", "1.01%", "1.02%")] == [4, 4, 2]
    assert "[manifest.json](manifest.json)" in p
    # plots: every figure but the headline one, which is in the summary
    assert "ratio_hot.png" not in sec["Plots"] and "heatmap_hot_int8.png" in sec["Plots"]


def test_the_timing_total_is_the_manifest_total_and_phases_are_not_double_counted(known):
    t = _sections(_report(known))["Timing"]
    assert "Before the sweeps: prepare 1.5 s, ceiling 0.5 s." in t
    assert "| hot/fp32 | 10.0 s | 4.0 s | 2.0 s | 100.0 s | 5.0 s | 3 | 1 |" in t
    assert (
        f"**Total: {TOTAL_S:,.1f} s (0:08:20)**, the run's wall time (`total_s`); the phases "
        f"above add up to {PHASE_SUM:,.1f} s."
    ) in t
    # without total_s: the sum of the phases, never the climb (inside screen), its compile
    # (inside the climb) or a count of sizes
    no_total = "\n".join(timing({"timing": {"prepare_s": 1.0, "m/d/screen_s": 5.0,
                                            "m/d/climb_s": 4.0, "m/d/climb_compile_s": 3.0,
                                            "m/d/sweep_s": 2.0, "m/d/refine_points": 7}}))  # fmt: skip
    assert "**Total: 8.0 s (0:00:08)**, the sum of the phases" in no_total


def test_the_project_verdict_without_verify_or_policy_and_when_everything_passes(known):
    d, manifest, results, sel = known
    text = _report(known, verify_table=None)
    assert (
        "**Project targets: fail.** 2 of 19 target checks fail on the run's measurements; not "
        "verified"
    ) in text
    text = _report(known, verify_table=None, policy_doc=None)
    assert "**Project targets: incomplete.** No policy, so no target is checked" in text
    assert "Not built yet: policy (run `sweeper policy`)." in text
    good = results.copy()
    hit = (good.config == "A") & good.ratio.lt(1)
    good.loc[hit, ["gbps", "ratio", "ratio_lo", "ratio_hi"]] = [1400.0, 1.4, 1.39, 1.41]
    text = build_report(d, manifest, good, [], sel, known_policy(), known_verify())
    assert (
        "**Project targets: fail.** All 19 target checks are met on the run's measurements; 4 of "
        "15 fail on verify's timing; verify fails (1 size(s) lose to the baseline in every pass)."
    ) in text
    vt = known_verify()
    vt.loc[vt.ratio < 1, ["ratio", "ratio_lo", "ratio_hi", "gbps"]] = [1.4, 1.39, 1.41, 1400.0]
    text = build_report(d, manifest, good, [d / p for p in PLOTS], sel, known_policy(), vt)
    assert (
        "**Project targets: pass.** All 19 target checks are met on the run's measurements; all "
        "15 are met on verify's timing; verify passes."
    ) in text
    interrupted = {**manifest, "status": "interrupted"}
    text = build_report(d, interrupted, good, [], sel, known_policy(), vt)
    assert "**Project targets: incomplete.**" in text and "the run is interrupted." in text
    assert "**Verdict: incomplete.**" in text.split("\n## ")[0]


def _targets_file(tmp_path, doc) -> Path:
    path = tmp_path / "targets.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def test_a_targets_file_replaces_the_users_targets_and_the_report_names_it(known, tmp_path):
    d, manifest, results, sel = known
    path = _targets_file(tmp_path, {"targets": [
        {"name": "1.5x from 8 MiB", "metric": "ratio", "floor": 1.5, "from_mib": 8,
         "dtypes": ["fp32"]},
        {"name": "no loss", "metric": "ratio", "floor": 0.99, "above_mib": 10, "to_mib": 13},
        {"name": "copy", "metric": "pct_copy", "floor": 97, "from_mib": 256},
        {"name": "aw", "metric": "ratio", "floor": 1, "modes": ["after-write"]},
    ]})  # fmt: skip
    chosen = load_targets(path)
    assert [t.sizes_text() for t in chosen] == [">= 8 MiB", "(10, 13] MiB", ">= 256 MiB",
                                                "every size"]  # fmt: skip
    text = _report(known, targets=chosen, targets_source=f"from `{path}`, 4 targets")
    first = text.split("\n## ")[0]
    # 1.5x fails at every fp32 size from 8 MiB; (10, 13] holds 11, 12, 13 MiB, which loses in
    # every pass; verify times no copy kernel, so that target is graded on the run (1400 GB/s,
    # the copy's own speed); no after-write cell
    assert (
        f"**Verdict: fail.** 2 of 9 checks of your targets fail (from `{path}`, 4 targets), "
        "graded on verify's timing of the exported header and, where verify has no value, on "
        "the run's."
    ) in first
    big = [m for m in range(8, 129)] + [256, 512]
    assert _row(first, "1.5x from 8 MiB") == (
        "| 1.5x from 8 MiB | ratio >= 1.5, >= 8 MiB, fp32 | **no**: fp32 at 8, 9, 10, 11, 12, "
        f"13, ... ({len(big)} sizes) MiB | verify (2 passes) |"
    )
    assert _row(first, "no loss").endswith("| **no**: fp32 at 13 MiB | verify (2 passes) |")
    assert _row(first, "copy").endswith("| met | the run |")
    assert "Not applicable to this run's mode and dtypes: aw." in first
    assert "never slower than" not in first.lower()  # the default target is replaced
    # the project's targets are checked as without the file
    assert _sections(text)["Project targets"] == _sections(_report(known))["Project targets"]
    # a file the run meets passes where the default target fails (fp32 13 MiB loses)
    easy = _targets_file(tmp_path, {"targets": [
        {"name": "0.9x", "metric": "ratio", "floor": 0.9, "verify_passes": "any"}]})  # fmt: skip
    text = _report(known, targets=load_targets(easy), targets_source="from `easy.json`")
    assert (
        text.startswith("# Run report: testgpu · k1\n\n**What to ship.**")
        and "**Verdict: pass.** All 4 checks of your targets are met (from `easy.json`)" in text
    )
    assert "**Verdict: fail.** Slower than torch beyond noise" in _report(known)


def test_the_cli_reads_a_targets_file(tmp_path):
    try:
        from tests.unit.test_plots import write_synthetic_run
    except ImportError:
        from test_plots import write_synthetic_run
    from sweeper.analyze import policy

    d = write_synthetic_run(tmp_path / "results" / "testgpu" / "r1", modes=("hot",))
    run = load_run(d)
    policy.write_policy(d / "policy.json", policy.build_policy(run.results, run.manifest))
    path = _targets_file(tmp_path, {"targets": [
        {"name": "1.2x", "metric": "ratio", "floor": 1.2, "modes": ["hot"]}]})  # fmt: skip
    result = runner.invoke(app, ["report", str(d), "--targets", str(path)])
    assert result.exit_code == 0, result.output
    text = (d / "REPORT.md").read_text()
    assert f"checks of your targets fail (from `{path.as_posix()}`, 1 target), graded on" in text
    assert re.search(
        r"^\| 1\.2x \| ratio >= 1\.2, every size, fp32/fp16 \| \*\*no\*\*: .* \| the run \|$",
        text,
        re.M,
    )


BAD_FILES = [
    ("{", None, "not valid JSON (line 1"),
    ([], "targets", 'expected a JSON object {"targets": [...]}'),
    ({"targets": []}, "targets", "expected a non-empty list of targets"),
    ({"targets": [], "x": 1}, "x", 'unknown field; the file holds only "targets"'),
    ({"targets": [{"name": "a", "metric": "speed", "floor": 1}]}, "targets[0].metric",
     "expected one of ratio, ratio_hi, pct_ceiling, pct_copy, found 'speed'"),
    ({"targets": [{"name": "a", "metric": "ratio", "floor": "1.3"}]}, "targets[0].floor",
     "expected a finite number, found '1.3'"),
    ('{"targets": [{"name": "a", "metric": "ratio", "floor": NaN}]}', "targets[0].floor",
     "expected a finite number, found nan"),
    ({"targets": [{"name": "a", "metric": "ratio"}]}, "targets[0].floor", "missing"),
    ({"targets": [{"name": "a", "metric": "ratio", "floor": 1, "dtypes": ["fp64"]}]},
     "targets[0].dtypes", "unknown 'fp64'; known: fp32, fp16, bf16, int8"),
    ({"targets": [{"name": "a", "metric": "ratio", "floor": 1, "modes": ["warm"]}]},
     "targets[0].modes", "unknown 'warm'; known: hot, cold, after-write"),
    ({"targets": [{"name": "a", "metric": "ratio", "floor": 1, "from_mib": 52, "to_mib": 42}]},
     "targets[0].to_mib", "no size lies in 52 .. 42 MiB"),
    ({"targets": [{"name": "a", "metric": "ratio", "floor": 1, "from_mib": 1, "above_mib": 2}]},
     "targets[0].above_mib", "give from_mib or above_mib, not both"),
    ({"targets": [{"name": "a", "metric": "ratio", "floor": 1, "min_mib": 1}]},
     "targets[0].min_mib", "unknown field; known: above_mib, dtypes, floor, from_mib, "
     "metric, modes, name, to_mib"),
    ({"targets": [{"name": "a", "metric": "ratio", "floor": 1},
                  {"name": "a", "metric": "ratio", "floor": 2}]},
     "targets[1].name", "'a' is used by an earlier target"),
]  # fmt: skip


@pytest.mark.parametrize("doc, field, message", BAD_FILES)
def test_a_bad_targets_file_is_one_line_exit_1_and_nothing_written(
    known, tmp_path, doc, field, message
):
    d = known[0]
    path = _targets_file(tmp_path, doc)
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in d.rglob("*") if p.is_file()}
    result = runner.invoke(app, ["report", str(d), "--targets", str(path)])
    assert result.exit_code == 1
    where = f"{path}: field '{field}'" if field else str(path)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {where}: {message}"), lines
    after = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in d.rglob("*") if p.is_file()}
    assert after == before


def test_a_missing_targets_file_is_one_line(known, tmp_path):
    result = runner.invoke(app, ["report", str(known[0]), "--targets", str(tmp_path / "no.json")])
    assert result.exit_code == 1
    assert result.output.strip() == f"error: {tmp_path / 'no.json'}: file not found"


def test_the_cells_host_time_by_phase_is_one_line_per_mode_largest_first():
    t = "\n".join(timing({"timing": {"prepare_s": 1.0, "total_s": 60.0, "cell_phases_s": {
        "hot/rounds": 30.0, "hot/graphs": 10.0, "hot/cell": 2.0, "cold/rounds": 8.0},
        "replay_graphs": {"updated": 1200, "instantiated": 4}}}))  # fmt: skip
    assert (
        "Where the hot cells' time went (host wall time, 42.0 s): timed rounds 30.0 s (71%), "
        "graph builds 10.0 s (24%), the rest 2.0 s (5%)."
    ) in t
    assert (
        "Where the cold cells' time went (host wall time, 8.0 s): timed rounds 8.0 s (100%)." in t
    )
    assert "The fresh-input replay updated 1,200 graphs in place and instantiated 4." in t
    assert "cell_phases" not in t and "replay_graphs" not in t  # never shown as raw entries
    assert "the phases above add up to 1.0 s" in t  # nor added to the run's phases


def test_a_batched_runs_cell_graphs_are_counted_set_and_built():
    t = "\n".join(timing({"timing": {"total_s": 60.0, "replay_graphs": {
        "updated": 68, "instantiated": 4, "batch_updated": 0, "batch_instantiated": 0,
        "batch_set": 52624, "batch_built": 7275}}}))  # fmt: skip
    assert (
        "The batches' cell graphs: 52,624 set in place and 7,275 built, 0 updated and 0 "
        "instantiated (docs/timing.md)."
    ) in t
    plain = "\n".join(timing({"timing": {"total_s": 1.0, "replay_graphs": {"updated": 1}}}))
    assert "cell graphs" not in plain  # a classic run's line stays as it was
