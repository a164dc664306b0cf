"""The report's first screen (everything above its first section): what to ship, how much
faster than the baseline, where, and the verdict on the user's targets.

On the shipped hot-7 run (copied to a temporary folder) every number is derived here again
from the run's own files with pandas; on the synthetic run of test_report_summary the cases
hot-7 does not have: nothing loses, not verified, a verify of another policy.
"""

from __future__ import annotations

import json
import lzma
import re
import shutil
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from sweeper.analyze.policy import load_policy
from sweeper.analyze.store import load_run
from sweeper.analyze.targets import load_targets
from sweeper.analyze.verdict import load_verify, timing_verdict
from sweeper.cli import app
from sweeper.report.report import build_report
from sweeper.units import MiB, fmt_bytes

try:
    from tests.unit.test_report_summary import (
        PLOTS,
        known_manifest,
        known_policy,
        known_results,
        known_verify,
    )
except ImportError:  # tests/ is not a package: pytest put tests/unit on sys.path
    from test_report_summary import (
        PLOTS,
        known_manifest,
        known_policy,
        known_results,
        known_verify,
    )

# its tests share the module fixtures (a report of hot-7 each): one worker builds them once
pytestmark = pytest.mark.xdist_group("first-screen")
ROOT = Path(__file__).resolve().parents[2]
HOT7 = ROOT / "results" / "h200" / "hot-7"
# the ranges the README states hot-7's speedup over, in MiB, [lo, hi)
README_RANGES = [(0, 8), (8, 36), (36, 52), (52, 240), (240, float("inf"))]
DTYPE_NAMES = "fp32|fp16|bf16|int8"


def first_screen(text: str) -> str:
    return text.split("\n## ")[0]


def verdict_line(text: str) -> str:
    (line,) = [ln for ln in first_screen(text).splitlines() if ln.startswith("**Verdict:")]
    return line


@pytest.fixture(scope="module")
def hot7(tmp_path_factory):
    """A copy of the shipped hot-7 folder, its REPORT.md written by `sweeper report`."""
    d = tmp_path_factory.mktemp("h200") / "hot-7"
    shutil.copytree(HOT7, d, copy_function=shutil.copy2)
    (d / "REPORT.md").unlink()
    result = CliRunner().invoke(app, ["report", str(d)])
    assert result.exit_code == 0, result.output
    return d, (d / "REPORT.md").read_text()


@pytest.fixture(scope="module")
def hot7_inputs(hot7):
    d, _ = hot7
    run = load_run(d)
    return d, run.manifest, run.results, load_policy(d / "policy.json"), load_verify(d)


def test_hot7_first_screen_names_the_files_to_ship_and_the_bands_per_dtype(hot7):
    d, text = hot7
    first = first_screen(text)
    for name in ("relu_policy.cuh", "relu_policy.py", "policy.json"):
        assert f"[`{name}`]({name})" in first, name
    doc = json.loads((d / "policy.json").read_text())
    for dtype, entry in doc["dtypes"].items():
        assert f"{len(entry['bands'])} for {dtype}" in first, dtype
    assert "not this policy's export" not in first  # the shipped files are its export
    assert len(first.splitlines()) <= 20  # one screen


def test_hot7_an_edited_header_is_named_as_not_the_policys_export(hot7_inputs, tmp_path):
    d, manifest, results, doc, vt = hot7_inputs
    run = tmp_path / "hot-7"
    run.mkdir()
    for name in ("relu_policy.cuh", "relu_policy.py"):
        shutil.copy2(d / name, run / name)
    header = run / "relu_policy.cuh"
    header.write_text(header.read_text().replace("launch_relu", "launch_relu2", 1))
    first = first_screen(build_report(run, manifest, results, [], None, doc, vt))
    assert "**`relu_policy.cuh` is not this policy's export** (edited, or of another policy)" in (
        first
    )
    assert "`relu_policy.py` is not" not in first


def test_hot7_speedup_table_is_verifys_lower_pass_per_range(hot7):
    d, text = hot7
    vt = pd.read_csv(d / "verify_timing.csv")
    assert sorted(vt["pass"].unique()) == [1, 2]
    lower = vt.groupby(["dtype", "ws_bytes"])["ratio"].min().reset_index()
    first = first_screen(text)
    assert "the lower of its 2 passes at each size" in first
    assert "| dtype | < 8 MiB | 8-36 MiB | 36-52 MiB | 52-240 MiB | >= 240 MiB (4 x L2) |" in first
    for dtype in ("fp32", "fp16", "bf16", "int8"):
        s = lower[lower["dtype"] == dtype]
        cells = []
        for lo, hi in README_RANGES:
            r = s[(s["ws_bytes"] >= lo * MiB) & (s["ws_bytes"] < hi * MiB)]["ratio"]
            assert len(r), (dtype, lo)
            cells.append(f"{r.min():.2f}-{r.max():.2f}")
        assert f"| {dtype} | " + " | ".join(cells) + " |" in first.splitlines(), dtype
    # fp32 8-36 MiB: the range where it loses, below 1 at its lowest
    assert "| fp32 | 1.03-1.26 | 0.98-1.14 |" in first


def test_hot7_verdict_lists_exactly_the_sizes_that_lose_in_every_pass(hot7):
    d, text = hot7
    vt = pd.read_csv(d / "verify_timing.csv").sort_values("pass")
    every = {
        key: g
        for key, g in vt.groupby(["dtype", "ws_bytes"])
        if (g["ratio_hi"] < 1).all()  # the whole CI below 1, in each pass
    }
    assert len(every) == 2  # fp32 12.24 and 13.23 MiB
    # the rule `sweeper verify` applies
    losses = timing_verdict(vt.to_dict("records"))["baseline_losses"]
    assert {(r["dtype"], r["ws_bytes"]) for r in losses} == set(every)
    line = verdict_line(text)
    sizes = vt.groupby(["dtype", "ws_bytes"]).ngroups
    assert line.startswith(
        f"**Verdict: fail.** Slower than torch beyond noise at {len(every)} of {sizes} sizes"
    )
    for (dtype, ws), g in every.items():
        passes = "; ".join(
            f"{r:.3f}x [{lo:.3f}, {hi:.3f}]"
            for r, lo, hi in zip(g["ratio"], g["ratio_lo"], g["ratio_hi"], strict=True)
        )
        assert f"{dtype} {fmt_bytes(ws)} ({passes})" in line
    named = re.findall(rf"\b({DTYPE_NAMES}) (\d[\d.]* (?:B|KiB|MiB|GiB)) \(", line)
    assert sorted(named) == sorted((dt, fmt_bytes(ws)) for dt, ws in every)
    some = sum(
        1 for _, g in vt.groupby(["dtype", "ws_bytes"]) if 0 < (g["ratio_hi"] < 1).sum() < len(g)
    )
    assert f"{some} more sizes lose in one pass only" in line
    # both losses are ties within verify's pass-to-pass noise (timing_verdict's label)
    assert all(r["within_noise"] for r in losses)
    assert (
        "2 of the sizes verify lists as losses are within its pass-to-pass noise: a tie with "
        "torch read below 1 in both of verify's passes ([Verify](#verify))" in line
    )
    assert "[Project targets](#project-targets)" in line
    # the project's scorecard is a later section now, its content unchanged
    assert "**Project targets: fail.** 2 of 19 target checks fail" in text
    assert text.index("## Project targets") < text.index("## Targets")


def test_hot7_cells_are_counted_by_role_of_the_trial_log(hot7):
    d, text = hot7
    with lzma.open(d / "trials.jsonl.xz", "rt") as f:
        roles = Counter(json.loads(line)["role"] for line in f)
    total = sum(roles.values())
    assert (
        f"{total} cells ({roles['candidate']} candidate, {roles['baseline']} baseline, "
        f"{roles['copy']} copy kernel), a cell being one row of the trial log"
    ) in text
    assert "measured cells" not in text


def test_hot7_a_targets_file_changes_the_verdict(hot7_inputs, tmp_path):
    d, manifest, results, doc, vt = hot7_inputs
    path = tmp_path / "targets.json"
    path.write_text(json.dumps({"targets": [
        {"name": "within 3% of torch", "metric": "ratio", "floor": 0.97, "verify_passes": "any"},
    ]}))  # fmt: skip
    chosen = load_targets(path)
    text = build_report(d, manifest, results, [], None, doc, vt, chosen, "from `targets.json`")
    line = verdict_line(text)
    assert line.startswith(
        "**Verdict: pass.** All 4 checks of your targets are met (from `targets.json`), graded "
        "on verify's timing of the exported header."
    )
    assert "| within 3% of torch | ratio >= 0.97, every size, fp32/fp16/bf16/int8 | met |" in text


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    from sweeper.analyze import select
    from sweeper.analyze.store import write_run

    d = write_run(tmp_path_factory.mktemp("k") / "k1", known_manifest(), known_results())
    run = load_run(d)
    return d, run.manifest, run.results, select.select(run.results)


def _no_losses(vt: pd.DataFrame) -> pd.DataFrame:
    vt = vt.copy()
    vt.loc[vt.ratio < 1, ["ratio", "ratio_lo", "ratio_hi", "gbps"]] = [1.4, 1.39, 1.41, 1400.0]
    return vt


def test_a_run_where_nothing_loses_says_never_slower_than_torch(known):
    d, manifest, results, sel = known
    plots = [d / p for p in PLOTS]
    text = build_report(
        d, manifest, results, plots, sel, known_policy(), _no_losses(known_verify())
    )
    # the run's own fp32 losses at 10 and 13 MiB do not count where verify timed the header
    assert verdict_line(text).startswith(
        "**Verdict: pass.** Never slower than torch beyond noise: none of 520 sizes loses (the "
        "whole 95% CI of the ratio below 1 in both of verify's passes). The speedup above is "
        "stated, not graded."
    )
    assert "| fp32 | 1.40-1.40 | 1.40-1.40 |" in first_screen(text)


def test_without_verify_the_run_is_graded_and_the_verdict_says_so(known):
    d, manifest, results, sel = known
    text = build_report(d, manifest, results, [], sel, known_policy(), None)
    line = verdict_line(text)
    assert line.startswith(
        "**Verdict: fail.** Slower than torch beyond noise at 2 of 520 sizes, each a loss (the "
        "whole 95% CI of the ratio below 1 in the run's own measurement): fp32 10 MiB (0.970x "
        "[0.960, 0.980]); fp32 13 MiB (0.970x [0.960, 0.980])."
    )
    assert f"Not verified: `sweeper verify {d.as_posix()}/policy.json` on a GPU" in line
    assert "not verified: the run's own ratio to torch of the policy's config" in text
    good = results.copy()
    hit = (good.config == "A") & good.ratio.lt(1)
    good.loc[hit, ["gbps", "ratio", "ratio_lo", "ratio_hi"]] = [1400.0, 1.4, 1.39, 1.41]
    line = verdict_line(build_report(d, manifest, good, [], sel, known_policy(), None))
    assert line.startswith(
        "**Verdict: incomplete.** Never slower than torch beyond noise: none of 520 sizes loses"
    )


def test_a_verify_of_another_policy_is_not_taken_for_this_one(known):
    d, manifest, results, sel = known
    vt = known_verify()
    other = (vt["dtype"] == "int8") & (vt["ws_bytes"] == 5 * MiB)
    vt.loc[other, "config"] = "B"
    text = build_report(d, manifest, results, [], sel, known_policy(), vt)
    line = verdict_line(text)
    assert "`verify_timing.csv` is of another policy (2 size-passes timed another config)" in line
    assert "in the run's own measurement" in line  # graded on the run instead
    assert "| fp32 | 1.40-1.40 | 0.97-1.40 |" in first_screen(text)  # the run's ratios
