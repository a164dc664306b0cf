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

from sweeper.analyze.store import (
    load_manifest,
    read_trials,
    trials_to_frame,
    with_records,
    write_manifest,
    write_results,
)
from sweeper.cli import app

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "results" / "h200" / "hot-7"
PLAN = REPO / "sweeps" / "h200.json"  # the plan hot-7 was measured with (its manifest's plan.path)
DTYPE = "fp32"


@pytest.fixture(scope="module")
def base(tmp_path_factory, cut_hot7) -> Path:
    """hot-7 as an fp32-only run, built once (conftest.one_dtype_of_hot7), with the shipped PNGs (the
    plot case checks that they are kept)."""
    root = tmp_path_factory.mktemp("base") / "results"
    run = cut_hot7(root, DTYPE)
    (run / "plots").mkdir()
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
    _rerecord(run)
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
    _rerecord(run)
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
    _rerecord(run)
    line = refused(["select", str(run)], run)
    assert line.startswith(
        f"error: {run / 'manifest.json'}: field 'kernel_source': 000000000000... is not the "
        "kernel source "
    )
    assert line.endswith("in trials.jsonl.xz was measured with; restore the run's manifest")


@pytest.mark.parametrize("resolution", [1, 16])
def test_a_manifest_resolution_edited_away_from_its_plan_is_refused(run, resolution):
    edit_json(run / "manifest.json", lambda d: d["plan"].__setitem__("resolution", resolution))
    _rerecord(run)
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


# ---- a derived file is the one its command wrote (records.derived) ---------------------------


def _another_tie(run: Path) -> Path:
    """selection.csv with one size's pick replaced by another config measured ok there, with
    that config's own GB/s and ratio: a file the trial log alone cannot tell from the real one."""
    import pandas as pd

    from sweeper.analyze.select import ok_candidates
    from sweeper.analyze.store import load_run

    csv = run / "selection.csv"
    sel = pd.read_csv(csv)
    ok = ok_candidates(load_run(run).results)
    key = ["mode", "pattern", "dtype", "n"]
    for i, row in sel.iterrows():
        here = ok[(ok[key] == row[key]).all(axis=1) & (ok["config"] != row["config"])]
        if len(here):
            o = here.iloc[0]
            sel.loc[i, ["config", "gbps", "ratio"]] = [o["config"], o["gbps"], o["ratio"]]
            break
    else:
        pytest.fail("no size has a second ok config")
    sel.to_csv(csv, index=False)
    return csv


def test_a_selection_csv_naming_another_measured_config_is_refused(run):
    csv = _another_tie(run)
    line = refused(["report", str(run)], run)
    assert line.startswith(f"error: {csv}: field 'records.derived.selection.csv': ")
    assert line.endswith("not the file `sweeper select` wrote; rebuild it with `sweeper select`")


def _another_config(doc: dict) -> None:
    """The first band dispatched to a config of the policy's table that no neighbour uses."""
    used = {band(doc, 0)["config"], band(doc, 1)["config"]}
    band(doc, 0)["config"] = next(c for c in doc["configs"] if c not in used)


@pytest.mark.parametrize("command", ["export", "show", "report"])
def test_a_policy_dispatching_a_band_elsewhere_is_refused(run, tmp_path, command):
    policy = run / "policy.json"
    edit_json(policy, _another_config)
    args = {
        "export": ["export", str(policy), "-o", str(tmp_path / "out" / "relu_policy.cuh")],
        "show": ["policy", "show", str(policy)],
        "report": ["report", str(run)],
    }[command]
    line = refused(args, tmp_path)
    assert line.startswith(f"error: {policy}: field 'records.derived.policy.json': ")
    assert "rebuild it with `sweeper policy build`" in line
    assert not (tmp_path / "out").exists()


def test_a_verify_timing_csv_of_another_run_is_refused(run):
    shutil.copy2(SHIPPED / "verify_timing.csv", run / "verify_timing.csv")
    line = refused(["policy", "build", str(run), "--tolerance", "verify"], run)
    assert line == (
        f"error: {run / 'verify_timing.csv'}: field 'records.derived.verify_timing.csv': not "
        "recorded by the run's manifest; rebuild it with `sweeper verify`"
    )


def test_files_derived_before_a_run_finished_again_are_rebuilt_not_read(run):
    """A resumed run that finishes again has new trials: the selection and policy made before
    are refused until `sweeper select` and `sweeper policy build` write them again."""
    write_manifest(run, load_manifest(run), finished=True)
    line = refused(["report", str(run)], run)
    assert line == (
        f"error: {run / 'selection.csv'}: field 'records.derived.selection.csv': not recorded "
        "by the run's manifest; rebuild it with `sweeper select`"
    )
    for args in (["select", str(run)], ["policy", "build", str(run)], ["report", str(run)]):
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 0, res.output
    recorded = json.loads((run / "manifest.json").read_text())["records"]["derived"]
    assert sorted(recorded) == ["policy.json", "selection.csv", "selection.md"]


def test_a_derived_record_that_names_no_derived_file_is_refused(run):
    edit_json(
        run / "manifest.json",
        lambda d: d["records"]["derived"].__setitem__("trials.jsonl", d["records"]["trials.jsonl"]),
    )
    line = refused(["select", str(run)], run)
    assert line == (
        f"error: {run / 'manifest.json'}: field 'records.derived.trials.jsonl': not a file a "
        "command derives from the run"
    )


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


# ---- unreadable bytes, cut archives, paths of the wrong kind: one line, never a traceback ---
#
# Each probe damages one file of a copy of a shipped run (hot-7, aw-4, cold-6, whole; a probe's
# cases take the three in turn, `rotated`), runs one command and checks: exit 1, nothing on
# stdout, exactly one line on stderr that names the damaged file, no traceback (the only
# exception is typer's exit), and every file under the copy byte-identical afterwards.

RUNS = ("hot-7", "aw-4", "cold-6")


def rotated(cases: list[tuple]) -> list[tuple]:
    """Each case on one shipped run, the runs taken in turn: every run meets a share of a
    probe's cases (what is refused depends on the damage and the command, not on the run)."""
    return [(RUNS[k % len(RUNS)], *case) for k, case in enumerate(cases)]


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> Path:
    """A results root holding copies of the three shipped runs, made once."""
    root = tmp_path_factory.mktemp("shipped") / "results"
    for name in RUNS:
        shutil.copytree(REPO / "results" / "h200" / name, root / "h200" / name)
    return root


def _copy(shipped: Path, tmp_path: Path, name: str) -> Path:
    run = tmp_path / "results" / "h200" / name
    shutil.copytree(shipped / "h200" / name, run)
    return run


def one_line(args: list[str], folder: Path, names: Path | str) -> str:
    """Run the command; assert exit 1, one line on stderr naming `names`, no text on stdout,
    no traceback and no file changed (or added, or removed) under `folder`; return the line."""
    before = hashes(folder)
    res = CliRunner().invoke(app, [str(a) for a in args])
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 1, res.output
    assert res.stdout.strip() == "", res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr
    assert lines[0].startswith("error: ")
    assert str(names) in lines[0], lines[0]
    assert hashes(folder) == before
    return lines[0]


def _with_bad_byte(data: bytes, at: bytes) -> bytes:
    """`data` with the byte 0xff put just after the first `at` (inside a JSON string, so the
    text is broken only as UTF-8)."""
    i = data.index(at) + len(at)
    return data[:i] + b"\xff" + data[i:]


def _rewrite_log(path: Path, fn) -> None:
    """Apply fn to the decompressed bytes of an xz log and store the result back as xz."""
    path.write_bytes(lzma.compress(fn(lzma.decompress(path.read_bytes())), preset=0))


def _rerecord(run: Path) -> None:
    """Record the run's files as they are now: a damage the records cannot see (its records
    rewritten to match it), so that the checks beneath them are what refuses it."""
    path = run / "manifest.json"
    doc = json.loads(path.read_text())
    derived = (doc.get("records") or {}).get("derived")
    doc = with_records(run, doc)
    if derived is not None:
        doc["records"]["derived"] = derived
    path.write_text(json.dumps(doc, indent=1))


# -- bytes that are not UTF-8 ------------------------------------------------------------------

NOT_UTF8 = {
    # file damaged -> commands that read it (the run folder is given as R, the file as F)
    "manifest.json": (["select", "R"], ["report", "R"], ["policy", "build", "R"], ["plot", "R"]),
    "policy.json": (["policy", "show", "F"], ["export", "F", "-o", "OUT"], ["report", "R"]),
    "trials.jsonl.xz": (["select", "R"], ["policy", "build", "R"]),
    "pruned.jsonl.xz": (["select", "R"], ["policy", "build", "R"]),
    "selection.csv": (["report", "R"],),
}
NOT_UTF8_CASES = rotated([(name, i) for name, cmds in NOT_UTF8.items() for i in range(len(cmds))])


def _args(template: list[str], run: Path, path: Path, out: Path) -> list[str]:
    return [{"R": str(run), "F": str(path), "OUT": str(out)}.get(a, a) for a in template]


@pytest.mark.parametrize(("run_name", "name", "i"), NOT_UTF8_CASES)
def test_bytes_that_are_not_utf8_are_refused_in_one_line(shipped, tmp_path, run_name, name, i):
    run = _copy(shipped, tmp_path, run_name)
    path = run / name
    if name.endswith(".xz"):
        _rewrite_log(path, lambda b: _with_bad_byte(b, b'"config":"'))
        _rerecord(run)
    else:
        path.write_bytes(
            _with_bad_byte(path.read_bytes(), b'"' if name != "selection.csv" else b",")
        )
    out = tmp_path / "out" / "relu_policy.cuh"
    line = one_line(_args(NOT_UTF8[name][i], run, path, out), tmp_path, path)
    assert "not UTF-8 text (byte 0xff at offset " in line
    assert not out.parent.exists()


def test_a_plan_that_is_not_utf8_is_refused_in_one_line(base, tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_bytes(_with_bad_byte(PLAN.read_bytes(), b'"gpu": "'))
    run = base / "h200" / "hot-7"
    line = one_line(["run", plan, "--replay", run, "--root", tmp_path / "new"], tmp_path, plan)
    assert line.startswith(f"error: {plan}: not UTF-8 text (byte 0xff at offset ")
    assert not (tmp_path / "new").exists()


# -- archives cut short or corrupt -------------------------------------------------------------


def _half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _garbage(path: Path) -> None:
    path.write_bytes(b"this is not an archive\n")


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _one_byte_flipped(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _no_last_byte(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-1])


DAMAGES = {
    "cut in half": _half,
    "not an archive": _garbage,
    "empty": _empty,
    "one byte flipped": _one_byte_flipped,
    "last byte missing": _no_last_byte,
}
ARCHIVE_CMDS = {"select": ["select", "R"], "policy build": ["policy", "build", "R"]}


@pytest.mark.parametrize(
    ("run_name", "log", "damage", "command"),
    rotated(
        [
            (log, damage, command)
            for log in ("trials.jsonl.xz", "pruned.jsonl.xz")
            for damage in DAMAGES
            for command in ARCHIVE_CMDS
        ]
    ),
)
def test_a_damaged_xz_archive_is_refused_in_one_line(
    shipped, tmp_path, run_name, log, damage, command
):
    run = _copy(shipped, tmp_path, run_name)
    DAMAGES[damage](run / log)
    line = one_line(_args(ARCHIVE_CMDS[command], run, run / log, tmp_path), tmp_path, run / log)
    assert line.startswith(f"error: {run / log}: not a complete xz archive (")
    assert line.endswith("); restore the file")


@pytest.mark.parametrize("damage", ["cut in half", "not an archive", "empty", "last byte missing"])
def test_a_damaged_gzip_archive_is_refused_in_one_line(shipped, tmp_path, damage):
    import gzip

    run = _copy(shipped, tmp_path, "hot-7")
    xz = run / "trials.jsonl.xz"
    gz = run / "trials.jsonl.gz"
    gz.write_bytes(gzip.compress(lzma.decompress(xz.read_bytes()), mtime=0))
    xz.unlink()
    DAMAGES[damage](gz)
    line = one_line(["select", run], tmp_path, gz)
    assert line.startswith(f"error: {gz}: not a complete gzip archive (")


# -- a path of the wrong kind: a folder where a file is read or written, and the reverse ------


def _into_folder(path: Path) -> None:
    """Replace the file `path` by a folder of that name (holding one file, so that the check
    of unchanged files sees it)."""
    if path.exists():
        path.unlink()
    path.mkdir()
    (path / "keep").write_text("x\n")


def _into_file(path: Path) -> None:
    shutil.rmtree(path)
    path.write_text("not a folder\n")


FOLDER_FOR_FILE = {
    # file replaced by a folder -> commands, expected words of the line
    "trials.jsonl": (["select", "R"], "is a folder, not a file"),
    "trials.jsonl.xz": (["policy", "build", "R"], "is a folder, not a file"),
    "pruned.jsonl.xz": (["select", "R"], "is a folder, not a file"),
    "policy.json": (["policy", "show", "F"], "is a folder, not a file"),
    "selection.csv": (["report", "R"], "is a folder, not a file"),
    "REPORT.md": (["report", "R"], "is a folder; name the file to write"),
}


@pytest.mark.parametrize(("run_name", "name"), rotated([(name,) for name in FOLDER_FOR_FILE]))
def test_a_folder_where_a_file_belongs_is_refused_in_one_line(shipped, tmp_path, run_name, name):
    run = _copy(shipped, tmp_path, run_name)
    _into_folder(run / name)
    template, words = FOLDER_FOR_FILE[name]
    line = one_line(_args(template, run, run / name, tmp_path), tmp_path, run / name)
    assert words in line


@pytest.mark.parametrize("command", [["plot", "R", "--format", "png"], ["report", "R"]])
def test_plots_that_is_a_file_is_refused_in_one_line(shipped, tmp_path, command):
    run = _copy(shipped, tmp_path, "hot-7")
    _into_file(run / "plots")
    line = one_line(_args(command, run, run, tmp_path), tmp_path, run / "plots")
    assert line == (
        f"error: {run / 'plots'}: the figures' folder to write into is not a folder; name a folder"
    )


@pytest.mark.parametrize("fmt", ["cuda", "python"])
def test_export_into_a_folder_is_refused_in_one_line(shipped, tmp_path, fmt):
    run = _copy(shipped, tmp_path, "cold-6")
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep").write_text("x\n")
    line = one_line(["export", run / "policy.json", "--format", fmt, "-o", out], tmp_path, out)
    assert line == f"error: {out} is a folder; name the file to write (e.g. {out}/<name>)"


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_export_under_a_file_is_refused_in_one_line(shipped, tmp_path, force):
    run = _copy(shipped, tmp_path, "aw-4")
    blocker = tmp_path / "blocker"
    blocker.write_text("a file\n")
    out = blocker / "sub" / "relu_policy.cuh"
    line = one_line(["export", run / "policy.json", "-o", out, *force], tmp_path, blocker)
    assert line == (
        f"error: {out.parent}: the folder to write into is not a folder ({blocker} is a file); "
        "name a folder"
    )


def test_a_results_root_that_is_a_file_is_refused_in_one_line(base, tmp_path):
    root = tmp_path / "root"
    root.write_text("a file\n")
    run = base / "h200" / "hot-7"
    line = one_line(["run", PLAN, "--replay", run, "--root", root], tmp_path, root)
    assert line == f"error: {root}: the results root to write into is not a folder; name a folder"


# -- a file of another kind where a policy is expected ----------------------------------------

NOT_A_POLICY = {
    "trials.jsonl.xz": "not UTF-8 text",
    "pruned.jsonl.xz": "not UTF-8 text",
    "plots/heatmap_hot_fp32.png": "not UTF-8 text",
    "manifest.json": "field 'kind': expected 'policy', found 'manifest'",
    "selection.csv": "not valid JSON",
    "REPORT.md": "not valid JSON",
    "relu_policy.cuh": "not valid JSON",
}


@pytest.mark.parametrize("command", ["show", "export"])
@pytest.mark.parametrize("name", list(NOT_A_POLICY))
def test_a_file_that_is_not_a_policy_is_refused_in_one_line(shipped, tmp_path, name, command):
    run = _copy(shipped, tmp_path, "hot-7")
    path = run / name
    assert path.is_file()
    out = tmp_path / "out" / "x.cuh"
    args = ["policy", "show", path] if command == "show" else ["export", path, "-o", out]
    line = one_line(args, tmp_path, path)
    assert line.startswith(f"error: {path}: ")
    assert NOT_A_POLICY[name] in line
    assert not out.parent.exists()


# -- a plan for another GPU replayed, and a trial's integer field that is not an integer ------


def test_a_replay_with_a_plan_for_another_gpu_is_refused_in_one_line(base, tmp_path):
    plan = REPO / "sweeps" / "4090.json"
    run = base / "h200" / "hot-7"
    new = tmp_path / "new"
    line = one_line(["run", plan, "--replay", run, "--root", new], tmp_path, plan)
    assert line.startswith(f"error: {plan}: field 'l2_bytes': planned for '4090' around an L2 ")
    assert "but the device measured (" in line
    assert not new.exists()


@pytest.mark.parametrize("value", [2.5, 30.0, "30", True])
@pytest.mark.parametrize("field", ["n_samples", "block", "vec_bytes", "n"])
def test_an_integer_field_of_a_trial_that_is_not_an_integer_is_refused(run, tmp_path, field, value):
    log = run / "trials.jsonl.xz"

    def edit(data: bytes) -> bytes:
        lines = data.decode().splitlines(keepends=True)
        k = next(i for i, line in enumerate(lines) if '"role":"candidate"' in line)
        doc = json.loads(lines[k])
        doc[field] = value
        lines[k] = json.dumps(doc, separators=(",", ":")) + "\n"
        return "".join(lines).encode()

    _rewrite_log(log, edit)
    _rerecord(run)
    line = one_line(["select", run], tmp_path, log)
    assert f"field '{field}': expected " in line


@pytest.mark.parametrize("damage", ["not UTF-8", "a folder"])
def test_a_resume_refuses_an_unreadable_trial_log_before_repairing_it(tmp_path, damage):
    """repair_trials (the first thing a resume does to the log) reads it through the same
    reader: a log it cannot read is refused and left as it is."""
    from sweeper.analyze.store import repair_trials
    from sweeper.errors import SchemaError

    log = tmp_path / "trials.jsonl"
    if damage == "a folder":
        _into_folder(log)
    else:
        log.write_bytes(b'{"config":"a\xffb"}\n{"config":"cut')
    before = hashes(tmp_path)
    with pytest.raises(SchemaError) as e:
        repair_trials(tmp_path)
    assert str(e.value).startswith(f"{log}: ")
    assert ("not UTF-8 text" if damage == "not UTF-8" else "is a folder, not a file") in str(
        e.value
    )
    assert hashes(tmp_path) == before


# ---- every record checked against its run ---------------------------------------------------
#
# The trial log and the manifest of a copy of a shipped run, changed after the run: each is
# refused in one line naming the file, before anything is written (policy build would replace
# policy.json). The trial-level probes change a record of the fp32 cut (`run`) as a run could
# have written it, and are refused by the validation of the trial on read.


def _trial_lines(path: Path) -> list[str]:
    return lzma.decompress(path.read_bytes()).decode().splitlines(keepends=True)


def _log_of_half(data: bytes) -> bytes:
    lines = data.splitlines(keepends=True)
    return b"".join(lines[: len(lines) // 2])


def _log_cut_mid_line(data: bytes) -> bytes:
    return data[: len(data) * 3 // 7]  # at a byte inside a line, as a killed copy leaves it


def _log_emptied(data: bytes) -> bytes:
    return b""


def _log_one_trial_less(data: bytes) -> bytes:
    lines = data.splitlines(keepends=True)
    return b"".join(lines[:100] + lines[101:])


TRUNCATIONS = {
    "cut to its first half": _log_of_half,
    "cut at a byte inside a line": _log_cut_mid_line,
    "emptied": _log_emptied,
    "one trial removed": _log_one_trial_less,
}


@pytest.mark.parametrize("cut", list(TRUNCATIONS))
def test_a_trial_log_cut_short_in_a_complete_run_is_refused(shipped, tmp_path, cut):
    run = _copy(shipped, tmp_path, "hot-7")
    log = run / "trials.jsonl.xz"
    _rewrite_log(log, TRUNCATIONS[cut])
    line = one_line(["policy", "build", run], tmp_path, log)
    assert "field 'records.trials.jsonl'" in line
    assert line.endswith("restore the file")


def test_a_complete_run_without_its_trial_log_is_refused(shipped, tmp_path):
    run = _copy(shipped, tmp_path, "cold-6")
    (run / "trials.jsonl.xz").unlink()
    line = one_line(["policy", "build", run], tmp_path, run / "manifest.json")
    assert "field 'records.trials.jsonl': " in line
    assert "which is not in the run folder" in line


@pytest.mark.parametrize("cut", ["cut to its first half", "one trial removed"])
def test_a_partial_trials_jsonl_beside_the_full_archive_is_refused(shipped, tmp_path, cut):
    run = _copy(shipped, tmp_path, "aw-4")
    partial = run / "trials.jsonl"
    partial.write_bytes(TRUNCATIONS[cut](lzma.decompress((run / "trials.jsonl.xz").read_bytes())))
    line = one_line(["select", run], tmp_path, partial)
    assert "field 'records.trials.jsonl'" in line


def test_an_unpacked_trial_log_beside_its_archive_is_read(shipped, tmp_path):
    """The same log in both forms (unxz -k) is the run's: nothing to refuse."""
    run = _copy(shipped, tmp_path, "aw-4")
    (run / "trials.jsonl").write_bytes(lzma.decompress((run / "trials.jsonl.xz").read_bytes()))
    assert read_trials(run)[0]
    load_manifest(run)


def test_a_pruned_log_cut_short_is_refused(shipped, tmp_path):
    run = _copy(shipped, tmp_path, "hot-7")
    log = run / "pruned.jsonl.xz"
    _rewrite_log(log, _log_of_half)
    line = one_line(["select", run], tmp_path, log)
    assert "field 'records.pruned.jsonl'" in line


MANIFEST_EDITS = {
    "gpu": lambda d: d.__setitem__("gpu", "4090"),
    "run_id": lambda d: d.__setitem__("run_id", "hot-8"),
    "baseline": lambda d: d.__setitem__("baseline", "cupy"),
    "plan.plan_hash": lambda d: d["plan"].__setitem__("plan_hash", "000000000000"),
    "plan.resolution": lambda d: d["plan"].__setitem__("resolution", 1),
    "modes": lambda d: d.__setitem__("modes", ["hot", "cold"]),
    "dtypes": lambda d: d.__setitem__("dtypes", ["fp32"]),
    "status": lambda d: d.pop("status"),
    "device.sm_count": lambda d: d["device"].__setitem__("sm_count", 114),
}


@pytest.mark.parametrize("field", list(MANIFEST_EDITS))
def test_a_manifest_edited_after_its_run_is_refused(shipped, tmp_path, monkeypatch, field):
    """Not even where the plan file the manifest names is not at hand (run from elsewhere)."""
    run = _copy(shipped, tmp_path, "hot-7")
    manifest = run / "manifest.json"
    edit_json(manifest, MANIFEST_EDITS[field])
    monkeypatch.chdir(tmp_path)
    line = one_line(["policy", "build", run], tmp_path, manifest)
    assert "field 'records.manifest.json'" in line
    assert "restore the run's manifest" in line


UNRECORDED_EDITS = {"none": lambda d: None, **MANIFEST_EDITS}


@pytest.mark.parametrize(("run_name", "field"), rotated([(field,) for field in UNRECORDED_EDITS]))
def test_a_complete_runs_manifest_without_its_records_is_refused(
    shipped, tmp_path, monkeypatch, run_name, field
):
    """Removing the records does not let an edit through: a complete run's manifest (or one
    whose status was removed) must carry them, whatever else was changed with them."""
    run = _copy(shipped, tmp_path, run_name)
    manifest = run / "manifest.json"

    def edit(d):
        d.pop("records")
        UNRECORDED_EDITS[field](d)

    edit_json(manifest, edit)
    monkeypatch.chdir(tmp_path)
    for cmd in (["policy", "build", run], ["select", run]):
        line = one_line(cmd, tmp_path, manifest)
        assert "field 'records'" in line and "restore the run's manifest" in line


def test_a_manifest_rewritten_with_other_whitespace_is_read(shipped, tmp_path):
    """The record is of the manifest's contents, not of its layout."""
    run = _copy(shipped, tmp_path, "hot-7")
    manifest = run / "manifest.json"
    manifest.write_text(json.dumps(json.loads(manifest.read_text()), indent=4))
    assert load_manifest(run)["run_id"] == "hot-7"


def test_a_coarser_resolution_than_the_plans_is_refused_before_writing(shipped, tmp_path):
    run = _copy(shipped, tmp_path, "hot-7")
    line = one_line(["policy", "build", run, "--resolution", "1"], tmp_path, "--resolution 1")
    assert "the run's plan has resolution 32" in line


# -- the policy of a run names that run's GPU ---------------------------------------------------


def _other_gpu(doc):
    doc["provenance"]["gpu"] = "4090"


def _other_cc(doc):
    doc["cc"] = [8, 9]


def _other_device(doc):
    doc["provenance"]["device"]["name"] = "NVIDIA GeForce RTX 4090"
    doc["provenance"]["device"]["sm_count"] = 128


GPU_CLAIMS = {
    "provenance.gpu": _other_gpu,
    "cc": _other_cc,
    "provenance.device": _other_device,
}


@pytest.mark.parametrize("field", list(GPU_CLAIMS))
@pytest.mark.parametrize("command", ["export", "show"])
def test_a_policy_that_claims_another_gpu_is_refused(run, tmp_path, field, command):
    policy = run / "policy.json"
    edit_json(policy, GPU_CLAIMS[field])
    out = tmp_path / "out" / "relu_policy.cuh"
    args = ["export", policy, "-o", out] if command == "export" else ["policy", "show", policy]
    line = one_line(args, tmp_path, policy)
    # refused by the run's record, or first by the catalog's record of the GPU it now names
    assert "is not the run's" in line or "it was measured on another GPU" in line
    assert not out.parent.exists()


# -- trial records a run could not have measured -------------------------------------------------


def _edit_trial(run: Path, pick, change) -> int:
    """Apply `change` to the first trial line `pick` accepts (its dict); return its line."""
    log = run / "trials.jsonl.xz"
    lines = _trial_lines(log)
    k = next(i for i, line in enumerate(lines) if pick(json.loads(line)))
    doc = json.loads(lines[k])
    change(doc)
    lines[k] = json.dumps(doc, separators=(",", ":")) + "\n"
    log.write_bytes(lzma.compress("".join(lines).encode(), preset=0))
    _rerecord(run)
    return k + 1


def _candidate(doc) -> bool:
    return doc["role"] == "candidate" and doc["status"] == "ok"


def _set(field, value):
    return lambda d: d.__setitem__(field, value)


def _at_rate(gbps):
    """A rate with a time that agrees with it (bytes / time), as a timer would report it."""

    def change(d):
        d["gbps"] = gbps
        d["time_us"] = d["ws_bytes"] / gbps / 1e3

    return change


def _another_run(d):
    d["run_id"] = "hot-6"


def _another_gpu(d):
    d["gpu"] = "4090"


def _another_mode(d):
    d["mode"] = "cold"
    d["cell_key"] = d["cell_key"].replace("hot|", "cold|", 1)


def _ratio_lo_above_hi(d):
    d["ratio_lo"], d["ratio_hi"] = d["ratio_hi"] * 1.5, d["ratio_lo"]


def _time_lo_above_hi(d):
    d["time_lo_us"], d["time_hi_us"] = d["time_hi_us"] * 2, d["time_lo_us"]


def _no_grid_config(d):
    d["config"] = d["config"].replace("v16-", "v32-", 1).replace("v8-", "v32-", 1)
    d["variant_id"] = f"{d['dtype']}-{d['config']}-{d['variant_id'][-8:]}"


def _block_not_the_names(d):
    d["block"] = 1024 if d["block"] != 1024 else 128


def _hint_not_the_names(d):
    d["store_hint"] = "default" if d["store_hint"] != "default" else "cs"


IMPOSSIBLE = {
    # change -> the field the refusal names
    "gbps 1e12": (_set("gbps", 1e12), "gbps"),
    "gbps NaN": (_set("gbps", float("nan")), "gbps"),
    "gbps inf": (_set("gbps", float("inf")), "gbps"),
    "gbps -inf": (_set("gbps", float("-inf")), "gbps"),
    "gbps 0": (_set("gbps", 0.0), "gbps"),
    "gbps negative": (_set("gbps", -1070.5), "gbps"),
    "time_us NaN": (_set("time_us", float("nan")), "time_us"),
    "time_us 0": (_set("time_us", 0.0), "time_us"),
    "ratio inf": (_set("ratio", float("inf")), "ratio"),
    "ratio negative": (_set("ratio", -0.9), "ratio"),
    "above the L2 ceiling": (_at_rate(20_000.0), "gbps"),
    "ratio_lo > ratio_hi": (_ratio_lo_above_hi, "ratio_lo"),
    "time_lo_us > time_hi_us": (_time_lo_above_hi, "time_lo_us"),
    "n_samples 0": (_set("n_samples", 0), "n_samples"),
    "a config no grid has": (_no_grid_config, "config"),
    "block not the name's": (_block_not_the_names, "block"),
    "store_hint not the name's": (_hint_not_the_names, "store_hint"),
    "another run's trial": (_another_run, "run_id"),
    "another mode's trial": (_another_mode, "mode"),
    "another GPU's trial": (_another_gpu, "gpu"),
}


@pytest.mark.parametrize("case", list(IMPOSSIBLE))
def test_a_trial_a_run_could_not_have_measured_is_refused(run, tmp_path, case):
    change, field = IMPOSSIBLE[case]
    k = _edit_trial(run, _candidate, change)
    log = run / "trials.jsonl.xz"
    line = one_line(["policy", "build", run], tmp_path, f"{log}:{k}")
    assert f"field '{field}': " in line


def test_a_baseline_faster_than_the_l2_ceiling_is_refused(run, tmp_path):
    k = _edit_trial(run, lambda d: d["role"] == "baseline", _at_rate(50_000.0))
    line = one_line(["select", run], tmp_path, f"{run / 'trials.jsonl.xz'}:{k}")
    assert "field 'gbps': " in line
    assert "L2-resident ceiling" in line


OTHER_GPUS = ("4090", "h100-sxm", "a100-40gb", "5090")


@pytest.mark.parametrize("run_name", RUNS)
@pytest.mark.parametrize("gpu", OTHER_GPUS)
@pytest.mark.parametrize("command", ["export", "show"])
def test_a_policy_relabelled_for_another_gpu_is_refused_outside_its_run(
    shipped, tmp_path, run_name, gpu, command
):
    """Copied out of its run folder (no manifest to compare with), a shipped policy whose GPU,
    compute capability and device record were edited to another GPU of the catalog is refused:
    its L2 size (or SM count) is not that GPU's."""
    from sweeper.plan.gpus import lookup

    spec = lookup(gpu)
    policy = tmp_path / "copied" / "policy.json"
    policy.parent.mkdir()
    shutil.copy(shipped / "h200" / run_name / "policy.json", policy)

    def relabel(d):
        d["provenance"]["gpu"] = spec.key
        d["cc"] = d["provenance"]["device"]["cc"] = list(spec.cc)
        d["provenance"]["device"]["name"] = spec.name

    edit_json(policy, relabel)
    out = tmp_path / "out" / "relu_policy.cuh"
    args = {"export": ["export", policy, "-o", out], "show": ["policy", "show", policy]}[command]
    line = one_line(args, tmp_path, policy)
    assert "it was measured on another GPU" in line
    assert "field 'l2_bytes'" in line or "field 'provenance.device.sm_count'" in line
    assert not out.exists()


@pytest.mark.parametrize("run_name", RUNS)
def test_a_shipped_policy_copied_out_of_its_run_is_read(shipped, tmp_path, run_name):
    policy = tmp_path / "policy.json"
    shutil.copy(shipped / "h200" / run_name / "policy.json", policy)
    res = CliRunner().invoke(app, ["policy", "show", str(policy)])
    assert res.exit_code == 0, res.output
