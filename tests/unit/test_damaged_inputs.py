"""Damaged and misdirected inputs on a copy of the shipped run hot-7, cut to its fp32 cells:
every command refuses in one line that names the file and the field, exits 1 and changes no
file."""

from __future__ import annotations

import hashlib
import json
import lzma
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweeper import api
from sweeper.analyze.store import (
    load_manifest,
    read_trials,
    trials_to_frame,
    write_manifest,
    write_results,
)
from sweeper.cli import app

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "results" / "h200" / "hot-7"
PLAN = REPO / "sweeps" / "h200.json"  # the plan hot-7 was measured with (its manifest's plan.path)
DTYPE = "fp32"


def _of_dtype(key: str) -> bool:
    """A manifest key of `climb` or `timing` that names a dtype other than DTYPE is left out
    ('hot/fp16/screen_s'); run-wide keys ('prepare_s') are kept."""
    parts = key.split("/")
    return len(parts) < 2 or parts[1] == DTYPE


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """hot-7 as an fp32-only run, built once: its fp32 trials, its manifest narrowed to fp32
    (dtypes, pruned, climb, timing), the selection and policy that `sweeper select` and
    `sweeper policy build` make from them, and the shipped PNGs (the plot case checks that
    they are kept). The whole run has 51020 cells; its fp32 part has 15514."""
    root = tmp_path_factory.mktemp("base") / "results"
    run = root / "h200" / "hot-7"
    (run / "plots").mkdir(parents=True)
    with lzma.open(SHIPPED / "trials.jsonl.xz", "rt") as src:
        lines = [line for line in src if json.loads(line)["dtype"] == DTYPE]
    with lzma.open(run / "trials.jsonl.xz", "wt", preset=0) as dst:
        dst.writelines(lines)
    m = load_manifest(SHIPPED)
    m["dtypes"] = [DTYPE]
    m["pruned"] = [p for p in m["pruned"] if p["dtype"] == DTYPE]
    m["climb"] = {k: v for k, v in m["climb"].items() if _of_dtype(k)}
    m["timing"] = {k: v for k, v in m["timing"].items() if _of_dtype(k)}
    write_manifest(run, m)
    api.select(str(run))
    api.policy_build(str(run))
    for png in sorted((SHIPPED / "plots").glob("*.png")):
        shutil.copy2(png, run / "plots" / png.name)
    return root


@pytest.fixture
def run(base, tmp_path) -> Path:
    shutil.copytree(base, tmp_path / "results")
    return tmp_path / "results" / "h200" / "hot-7"


def hashes(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def refused(args: list[str], folder: Path) -> str:
    """Run the command; assert exit 1, one line of output and no file changed under
    `folder`; return the line."""
    before = hashes(folder)
    res = CliRunner().invoke(app, args)
    lines = res.output.strip().splitlines()
    assert res.exit_code == 1, res.output
    assert len(lines) == 1, res.output
    assert hashes(folder) == before
    return lines[0]


def edit_json(path: Path, fn) -> None:
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc, indent=1))


def band(doc: dict, k: int, dtype: str = "fp32") -> dict:
    return doc["dtypes"][dtype]["bands"][k]


# ---- a policy edited by hand is refused by every command that reads it -------------------


def _swap_hi_rel(doc):
    band(doc, 0)["hi_rel"], band(doc, 1)["hi_rel"] = band(doc, 1)["hi_rel"], band(doc, 0)["hi_rel"]


def _nan_hi_rel(doc):
    band(doc, 0)["hi_rel"] = float("nan")


def _widen_bracket(doc):
    """A boundary whose bracket reaches 20 MB further down than the plan resolution allows."""
    band(doc, 1)["bracket_below"][0] -= 20_000_000


def _coarser_resolution(doc):
    """A resolution of L2 itself: every bracket would pass for narrow enough."""
    doc["provenance"]["resolution"] = 1
    doc["resolution_bytes"] = doc["l2_bytes"]


POLICY_EDITS = {
    "hi_rel swapped": (
        _swap_hi_rel,
        "dtypes.fp32.bands[0].hi_rel",
        "{} is not hi_bytes / l2_bytes ({})",
    ),
    "hi_rel NaN": (_nan_hi_rel, "dtypes.fp32.bands[0].hi_rel", "nan is not hi_bytes"),
    "bracket wider than the resolution": (
        _widen_bracket,
        "dtypes.fp32.bands[1].bracket_below",
        "is wider than the plan resolution (1966080 bytes): a boundary there is not "
        "bracketed; rebuild the policy with `sweeper policy build`",
    ),
    "resolution edited to 1": (
        _coarser_resolution,
        "provenance.resolution",
        "1 is not the run's (32 in ",
    ),
}


@pytest.mark.parametrize("case", list(POLICY_EDITS))
@pytest.mark.parametrize("command", ["export", "show", "plot"])
def test_an_edited_policy_is_refused(run, tmp_path, case, command):
    edit, field, text = POLICY_EDITS[case]
    policy = run / "policy.json"
    edit_json(policy, edit)
    if case == "hi_rel swapped":
        doc = json.loads(policy.read_text())
        b = band(doc, 0)
        text = text.format(b["hi_rel"], b["hi_bytes"] / doc["l2_bytes"])
    args = {
        "export": ["export", str(policy), "-o", str(tmp_path / "out" / "relu_policy.cuh")],
        "show": ["policy", "show", str(policy)],
        "plot": ["plot", str(run), "--format", "png"],
    }[command]
    line = refused(args, tmp_path)
    assert line.startswith(f"error: {policy}: field '{field}': ")
    assert text in line
    assert not (tmp_path / "out").exists()


# ---- the trial log is the record -----------------------------------------------------------


def test_a_results_csv_cut_in_half_is_refused_not_built_into_a_policy(run):
    write_results(run, trials_to_frame(read_trials(run)[0]))
    csv = run / "results.csv"
    lines = csv.read_text().splitlines(keepends=True)
    csv.write_text("".join(lines[: len(lines) // 2]))
    line = refused(["policy", "build", str(run)], run)
    assert line == (
        f"error: {csv}: {len(lines) // 2 - 1} rows, the trial log has {len(lines) - 1} cells; "
        "delete it: it is rebuilt from trials.jsonl.xz"
    )


def test_an_intact_results_csv_is_read_beside_its_trials(run):
    write_results(run, trials_to_frame(read_trials(run)[0]))
    before = (run / "policy.json").read_bytes()
    res = CliRunner().invoke(app, ["policy", "build", str(run)])
    assert res.exit_code == 0, res.output
    assert (run / "policy.json").read_bytes() == before  # the same policy, from the trials


def test_a_policy_is_not_built_from_a_run_that_stopped(run):
    edit_json(run / "manifest.json", lambda d: d.__setitem__("status", "interrupted"))
    line = refused(["policy", "build", str(run)], run)
    assert line == (
        f"error: {run / 'manifest.json'}: field 'status': the run is interrupted, not "
        f"complete; `sweeper run --resume --run-dir {run}` finishes it"
    )


def _unpack(run: Path) -> list[str]:
    text = lzma.decompress((run / "trials.jsonl.xz").read_bytes()).decode()
    (run / "trials.jsonl.xz").unlink()
    return text.splitlines(keepends=True)


@pytest.mark.parametrize("command", ["select", "report"])
def test_a_duplicated_trial_record_is_refused(run, command):
    lines = _unpack(run)
    (run / "trials.jsonl").write_text("".join(lines + [lines[100]]))
    line = refused([command, str(run)], run)
    assert line.startswith(
        f"error: {run / 'trials.jsonl'}:{len(lines) + 1}: field 'cell_key': the cell "
    )
    assert line.endswith(
        "is already recorded on line 101; a trial log holds one record per cell: remove the "
        "duplicate line"
    )


def test_a_changed_kernel_source_fingerprint_is_noticed(run):
    edit_json(run / "manifest.json", lambda d: d.__setitem__("kernel_source", "0" * 64))
    line = refused(["select", str(run)], run)
    assert line.startswith(
        f"error: {run / 'manifest.json'}: field 'kernel_source': 000000000000... is not the "
        "kernel source "
    )
    assert line.endswith("in trials.jsonl.xz was measured with; restore the run's manifest")


@pytest.mark.parametrize("resolution", [1, 16])
def test_a_manifest_resolution_edited_away_from_its_plan_is_refused(run, resolution):
    edit_json(run / "manifest.json", lambda d: d["plan"].__setitem__("resolution", resolution))
    line = refused(["policy", "build", str(run)], run)
    assert line.startswith(
        f"error: {run / 'manifest.json'}: field 'plan.resolution': {resolution} is not the "
        "plan's (32 in "
    )


def test_a_selection_csv_that_disagrees_with_the_trials_is_refused(run):
    csv = run / "selection.csv"
    lines = csv.read_text().splitlines(keepends=True)
    csv.write_text("".join(lines[: len(lines) // 2]))
    line = refused(["report", str(run)], run)
    assert line.startswith(f"error: {csv}: field 'n': ")
    assert line.endswith("run `sweeper select` to rebuild it from the trial log")


# ---- no command writes onto its input, outside the results root, or into another run ------


def test_merge_does_not_write_onto_a_policy_it_merges(run):
    policy = run / "policy.json"
    line = refused(["policy", "merge", str(policy), "-o", str(policy)], run)
    assert line == f"error: {policy} is a policy being merged; write the merge elsewhere"


def test_export_does_not_write_onto_its_policy(run):
    policy = run / "policy.json"
    line = refused(["export", str(policy), "-o", str(policy), "--force"], run)
    assert line == f"error: {policy} is the policy being exported; write the export elsewhere"


def test_plot_in_one_format_keeps_the_files_of_the_others(run):
    pngs = hashes(run / "plots")
    res = CliRunner().invoke(app, ["plot", str(run), "--format", "pdf"])
    assert res.exit_code == 0, res.output
    after = hashes(run / "plots")
    assert {k: after.get(k) for k in pngs} == pngs
    assert any(k.endswith(".pdf") for k in after)


@pytest.mark.parametrize("run_id", ["../../x", "a/b", ".", ""])
def test_a_run_id_that_is_not_a_folder_name_is_refused(run, tmp_path, run_id):
    root = tmp_path / "results"
    line = refused(
        ["run", str(PLAN), "--replay", str(run), "--root", str(root), "--run-id", run_id],
        tmp_path,
    )
    assert line == (
        f"error: --run-id {run_id!r}: a plain folder name (letters, digits, '-', '_'); the "
        f"run goes into {root / 'h200'}/<run-id>"
    )


def test_a_new_run_is_not_appended_to_a_folder_holding_trials(run, tmp_path):
    root = tmp_path / "results"
    orphan = root / "h200" / "x"
    orphan.mkdir()
    shutil.copy2(run / "trials.jsonl.xz", orphan / "trials.jsonl.xz")
    line = refused(
        ["run", str(PLAN), "--replay", str(run), "--root", str(root), "--run-id", "x"], tmp_path
    )
    assert line == (
        f"error: {orphan} already holds trials.jsonl.xz; use `sweeper run --resume --run-dir "
        f"{orphan}` for a run of its own, or another --run-id"
    )


# ---- nonsense options, and --debug --------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["select", "{R}", "--tolerance", "nan"], "--tolerance nan: a relative GB/s difference"),
        (["policy", "build", "{R}", "--tolerance", "-0.5"], "--tolerance -0.5: a relative"),
        (["plot", "{R}", "--top", "-1"], "--top -1: the number of configs drawn, 0 or more"),
        (["plot", "{R}", "--heatmap-top", "0"], "--heatmap-top 0: config rows per heatmap"),
        (["compare", "{R}", "{R}", "--tolerance", "-1"], "--tolerance -1: a relative difference"),
    ],
)
def test_a_nonsense_option_value_is_refused(run, args, message):
    line = refused([a.replace("{R}", str(run)) for a in args], run)
    assert line.startswith(f"error: {message}")


def test_debug_shows_the_traceback(run):
    edit_json(run / "policy.json", _nan_hi_rel)
    res = CliRunner().invoke(app, ["--debug", "policy", "show", str(run / "policy.json")])
    assert res.exit_code == 1
    assert type(res.exception).__name__ == "SchemaError"
    assert "hi_rel" in str(res.exception)
