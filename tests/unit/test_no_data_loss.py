"""Nothing a command writes loses data: on copies of the shipped runs, `-o`/`--out` never
replaces a run's measurements, manifest or pruned log, nor any file of another run (--force
or not); a new run never adopts a folder holding an earlier run's files; a run that fails
before its first trial, or a failed replay, leaves no folder behind. Every refusal is one
line and a non-zero exit, and every file that was there before is byte-identical after."""

from __future__ import annotations

import hashlib
import json
import lzma
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweeper import api
from sweeper.analyze.store import load_manifest, read_trials, with_records
from sweeper.cli import app
from sweeper.errors import SweeperError
from sweeper.plan.gpus import lookup
from sweeper.run.replay import ModelExecutor
from sweeper.runfolder import RECORDS, check_output

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "results" / "h200"
RUNS = ("hot-7", "aw-4", "cold-6")
PLAN = REPO / "sweeps" / "h200.json"  # the plan the shipped runs were measured with
REPLAY_CELLS = 400  # the replay source: hot-7's first cells (a replay fails past them)


def hashes(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> Path:
    """A copy of results/h200's three shipped runs: results/h200/{hot-7,aw-4,cold-6}."""
    root = tmp_path_factory.mktemp("shipped") / "results"
    for run in RUNS:
        shutil.copytree(SHIPPED / run, root / "h200" / run)
    return root


@pytest.fixture
def results(shipped, tmp_path) -> Path:
    """A copy of `shipped` this test may write into."""
    shutil.copytree(shipped, tmp_path / "results")
    return tmp_path / "results"


def refused(args: list[str], *folders: Path) -> str:
    """Run the command; assert a non-zero exit, one line of output and no file changed (none
    added, none removed) under `folders`; return the line."""
    before = [hashes(f) for f in folders]
    res = CliRunner().invoke(app, args)
    lines = res.output.strip().splitlines()
    assert res.exit_code != 0, res.output
    assert len(lines) == 1, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    assert [hashes(f) for f in folders] == before
    return lines[0]


# ---- -o / --out: a run's records and other runs' files are refused, --force or not ----------


@pytest.mark.parametrize("force", [[], ["--force"]])
@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("name", ["trials.jsonl.xz", "manifest.json", "pruned.jsonl.xz"])
def test_export_never_writes_over_a_runs_records(results, run, name, force):
    target = results / "h200" / run / name
    policy = results / "h200" / run / "policy.json"
    line = refused(["export", str(policy), "-o", str(target), *force], results)
    assert line.startswith(f"error: -o {target}: that name is a run's ")
    assert "--force or not" in line


@pytest.mark.parametrize("name", ["trials.jsonl", "pruned.jsonl", "trials.jsonl.gz"])
def test_a_record_name_that_is_not_there_yet_is_refused_too(results, name):
    """A header written as hot-7/trials.jsonl would be read as the run's log, ahead of the
    archive: the name is refused whether or not a file of that name is there."""
    run = results / "h200" / "hot-7"
    line = refused(["export", str(run / "policy.json"), "-o", str(run / name), "--force"], results)
    assert line.startswith(f"error: -o {run / name}: that name is a run's ")
    assert not (run / name).exists()


@pytest.mark.parametrize(
    "other", ["cold-6/policy.json", "cold-6/relu_policy.cuh", "aw-4/REPORT.md", "aw-4/plots/x.h"]
)
def test_export_never_writes_into_another_runs_folder(results, other):
    target = results / "h200" / other
    policy = results / "h200" / "hot-7" / "policy.json"
    line = refused(["export", str(policy), "-o", str(target), "--force"], results)
    run = results.resolve() / "h200" / other.split("/")[0]
    assert line == (
        f"error: -o {target}: inside the run folder {run}, which this command does not work "
        "on; sweeper never writes into another run's folder, --force or not"
    )


@pytest.mark.parametrize("name", ["selection.csv", "policy.json", "REPORT.md", "results.csv"])
def test_export_never_writes_over_its_own_runs_files(results, name):
    """Its own run's policy.json is the policy being exported; the other files of the run are
    what other commands make there."""
    run = results / "h200" / "hot-7"
    line = refused(["export", str(run / "policy.json"), "-o", str(run / name), "--force"], results)
    assert line.startswith("error: ") and str(run / name) in line


def test_export_onto_a_folder_is_one_line(results, tmp_path):
    policy = results / "h200" / "hot-7" / "policy.json"
    line = refused(["export", str(policy), "-o", str(tmp_path), "--force"], results)
    assert line == f"error: {tmp_path} is a folder; name the file to write (e.g. {tmp_path}/<name>)"


def test_force_still_replaces_an_ordinary_file_the_user_named(results, tmp_path):
    policy = results / "h200" / "hot-7" / "policy.json"
    out = tmp_path / "mine.cuh"
    out.write_text("an older header\n")
    line = refused(["export", str(policy), "-o", str(out)], results, tmp_path)
    assert line == f"error: {out} exists with other contents; --force overwrites it"
    before = hashes(results)
    res = CliRunner().invoke(app, ["export", str(policy), "-o", str(out), "--force"])
    assert res.exit_code == 0, res.output
    assert out.read_text().startswith("//") and hashes(results) == before
    # and its own default output, next to the policy in its run folder
    header = results / "h200" / "hot-7" / "relu_policy.cuh"
    header.write_text("an older header\n")
    res = CliRunner().invoke(app, ["export", str(policy), "--force"])
    assert res.exit_code == 0, res.output
    assert header.read_text() == out.read_text()


@pytest.mark.parametrize("force", [[], ["--force"]])
@pytest.mark.parametrize(
    "target",
    [
        "cold-6/policy.json",
        "aw-4/policy.json",
        "cold-6/trials.jsonl.xz",
        "hot-7/manifest.json",
        "hot-7/selection.csv",
        "hot-7/pruned.jsonl.xz",
    ],
)
def test_policy_merge_never_writes_over_a_run_file(results, target, force):
    out = results / "h200" / target
    policy = results / "h200" / "hot-7" / "policy.json"
    line = refused(["policy", "merge", str(policy), "-o", str(out), *force], results)
    assert line.startswith(f"error: -o {out}: ") and "--force or not" in line


def test_policy_merge_writes_an_ordinary_file_beside_the_runs(results, tmp_path):
    before = hashes(results)
    out = results / "h200" / "merged.json"  # h200/ is no run folder
    policy = results / "h200" / "hot-7" / "policy.json"
    res = CliRunner().invoke(app, ["policy", "merge", str(policy), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["kind"] == "merged-policy"
    out.unlink()
    assert hashes(results) == before


@pytest.mark.parametrize("force", [[], ["--force"]])
@pytest.mark.parametrize(
    "target",
    ["hot-7/trials.jsonl.xz", "hot-7/manifest.json", "aw-4/pruned.jsonl.xz", "cold-6/plan.json"],
)
def test_plan_never_writes_into_a_run_folder(results, target, force):
    out = results / "h200" / target
    line = refused(["plan", "--gpu", "h200", "-o", str(out), *force], results)
    assert line.startswith(f"error: -o {out}: ") and "--force or not" in line


def test_plan_force_still_replaces_an_ordinary_plan(results, tmp_path):
    out = tmp_path / "h200.json"
    args = ["plan", "--gpu", "h200", "-o", str(out)]
    assert CliRunner().invoke(app, [*args, "--resolution", "64"]).exit_code == 0
    line = refused(args, tmp_path)
    assert line.startswith(f"error: {out} already holds a different plan")
    assert CliRunner().invoke(app, [*args, "--force"]).exit_code == 0
    assert json.loads(out.read_text())["resolution"] == 32


def test_the_rule_sees_through_a_link(results, tmp_path):
    """A link named like an ordinary file that points at a run's trial log is refused: the
    rename would leave the log in place, but the name it resolves to is the record's."""
    link = tmp_path / "out.cuh"
    link.symlink_to(results / "h200" / "hot-7" / "trials.jsonl.xz")
    policy = results / "h200" / "hot-7" / "policy.json"
    line = refused(["export", str(policy), "-o", str(link), "--force"], results)
    assert line.startswith(f"error: -o {link}: that name is a run's measurements")


@pytest.mark.parametrize("name", RECORDS)
def test_check_output_refuses_every_record_name_anywhere(tmp_path, name):
    with pytest.raises(SweeperError, match="--force or not"):
        check_output(tmp_path / name)
    assert check_output(tmp_path / f"my-{name}") == tmp_path / f"my-{name}"


# ---- a new run never adopts an earlier run's folder; a failed one leaves none ---------------


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A replay source made from hot-7: its manifest (recording these logs, not hot-7's), its
    pruned log and its first REPLAY_CELLS trials."""
    run = tmp_path_factory.mktemp("source") / "hot-7"
    run.mkdir()
    shutil.copy2(SHIPPED / "hot-7" / "pruned.jsonl.xz", run / "pruned.jsonl.xz")
    with lzma.open(SHIPPED / "hot-7" / "trials.jsonl.xz", "rt") as f:
        lines = [next(f) for _ in range(REPLAY_CELLS)]
    (run / "trials.jsonl").write_text("".join(lines))
    manifest = json.loads((SHIPPED / "hot-7" / "manifest.json").read_text())
    manifest.pop("records")
    (run / "manifest.json").write_text(json.dumps(with_records(run, manifest), indent=1) + "\n")
    return run


@pytest.mark.parametrize(
    "name",
    [
        "pruned.jsonl",
        "pruned.jsonl.xz",
        "manifest.json",
        "trials.jsonl",
        "results.csv",
        "policy.json",
    ],
)
def test_a_new_run_does_not_adopt_a_folder_holding_an_earlier_run_file(
    shipped, source, tmp_path, name
):
    root = tmp_path / "results"
    orphan = root / "h200" / "x"
    orphan.mkdir(parents=True)
    src = shipped / "h200" / "hot-7"
    if (src / name).exists():
        shutil.copy2(src / name, orphan / name)
    elif (src / f"{name}.xz").exists():  # the unpacked log
        (orphan / name).write_bytes(lzma.decompress((src / f"{name}.xz").read_bytes()))
    else:  # a derived table the shipped runs do not keep
        (orphan / name).write_text("mode,dtype,n\nhot,fp32,1024\n")
    args = ["run", str(PLAN), "--replay", str(source), "--root", str(root), "--run-id", "x"]
    line = refused(args, root, source)
    assert line == (
        f"error: {orphan} already holds {name}; use `sweeper run --resume --run-dir {orphan}` "
        "for a run of its own, or another --run-id"
    )


def test_a_failed_replay_leaves_no_folder(source, tmp_path):
    root = tmp_path / "results"
    args = ["run", str(PLAN), "--replay", str(source), "--root", str(root), "--modes", "cold"]
    line = refused(args, source, tmp_path)
    assert line.startswith("error: replay: cell ('cold', ") and "not in the recorded run" in line
    assert not root.exists()


def test_a_failed_replay_removes_only_what_it_made(shipped, source, tmp_path):
    """The root and an earlier run in it stay as they were, and so does a file that was in
    the new run's folder before (a folder holding no run file may be a run's)."""
    root = tmp_path / "results"
    shutil.copytree(shipped / "h200" / "hot-7", root / "h200" / "hot-7")
    (root / "h200" / "new").mkdir()
    (root / "h200" / "new" / "notes.txt").write_text("kept\n")
    before = hashes(root)
    args = ["run", str(PLAN), "--replay", str(source), "--root", str(root), "--run-id", "new"]
    res = CliRunner().invoke(app, [*args, "--modes", "cold"])
    assert res.exit_code != 0 and len(res.output.strip().splitlines()) == 1, res.output
    assert hashes(root) == before
    assert sorted(p.name for p in (root / "h200").iterdir()) == ["hot-7", "new"]


L2 = lookup("h200").l2_bytes


def _curve(fast, slow):
    return lambda ws, l2: fast if ws < 0.9 * l2 else slow


class Failing(ModelExecutor):
    """A synthetic GPU whose device is lost at its `after`-th measured cell."""

    def __init__(self, after: int):
        super().__init__(
            {"a": _curve(9000.0, 3600.0), "b": _curve(6000.0, 4500.0)},
            l2_bytes=L2,
            baseline=_curve(5000.0, 4300.0),
            copy=_curve(4800.0, 4800.0),
        )
        self.after, self.cells = after, 0

    def _tick(self) -> None:
        self.cells += 1
        if self.cells > self.after:
            raise RuntimeError("device lost")

    def reference(self, mode, dtype, n):
        self._tick()
        return super().reference(mode, dtype, n)

    def measure(self, mode, dtype, n, variant):
        self._tick()
        return super().measure(mode, dtype, n, variant)


@pytest.fixture(scope="module")
def fp32_plan(tmp_path_factory) -> Path:
    return api.plan("h200", out=str(tmp_path_factory.mktemp("plan") / "p.json"), dtypes="fp32").path


def test_a_run_that_fails_before_its_first_trial_leaves_no_folder(fp32_plan, tmp_path):
    root = tmp_path / "results"
    with pytest.raises(RuntimeError, match="device lost"):
        api.run(str(fp32_plan), executor=Failing(0), out_root=str(root), run_id="r")
    assert not root.exists()


def test_a_run_that_fails_after_trials_keeps_them_to_resume(fp32_plan, tmp_path):
    """Measured cells cost GPU time: a new run that fails after some keeps its folder."""
    root = tmp_path / "results"
    with pytest.raises(RuntimeError, match="device lost"):
        api.run(str(fp32_plan), executor=Failing(5), out_root=str(root), run_id="r")
    run = root / "h200" / "r"
    m = load_manifest(run)
    assert m["run_id"] == "r" and m["status"] == "interrupted"  # resumable, not "running"
    assert len(read_trials(run)[0]) > 0


def test_a_replay_that_fails_after_trials_leaves_no_folder(fp32_plan, tmp_path):
    """A replay's cells cost nothing to answer again: one that fails after recording some
    (a plan with a dtype its source lacks) leaves no folder either."""
    from sweeper.run.replay import ReplayExecutor

    recorded = api.run(str(fp32_plan), executor=Failing(10**9), out_root=str(tmp_path / "rec"))
    both = api.plan("h200", out=str(tmp_path / "both.json"), dtypes="fp32,fp16").path
    root = tmp_path / "results"
    ticks = []
    with pytest.raises(SweeperError, match="not in the recorded run"):
        api.run(
            str(both),
            executor=ReplayExecutor(recorded),
            out_root=str(root),
            run_id="again",
            progress=lambda desc, i, n: ticks.append(i),
        )
    assert ticks  # cells were recorded before the failure
    assert not root.exists()


def test_a_spec_file_is_never_written_into_a_run_folder(results):
    from sweeper.plan import gpus

    before = hashes(results)
    target = results / "h200" / "hot-7" / "h200.toml"
    with pytest.raises(SweeperError, match=r"^--save-spec .*inside the run folder"):
        gpus.write_spec_file(gpus.lookup("h200"), target)
    assert hashes(results) == before


def test_a_write_that_fails_leaves_the_file_that_was_there(results, tmp_path, monkeypatch):
    """Writes go to a temp file in the same folder and are renamed into place: one that fails
    before the rename (here: the disk is full at fsync) keeps the old file and leaves no
    temp file behind."""
    import os

    out = tmp_path / "mine.cuh"
    out.write_text("an older header\n")

    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    policy = results / "h200" / "hot-7" / "policy.json"
    with pytest.raises(OSError, match="No space"):
        api.export(str(policy), out=str(out), force=True)
    assert out.read_text() == "an older header\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.cuh", "results"]


def test_the_kernel_cache_write_that_fails_leaves_no_temp_file(tmp_path, monkeypatch):
    import os

    from sweeper_kernels.build import _atomic_write_bytes

    path = tmp_path / "relu_x.py"
    path.write_bytes(b"old\n")

    def fail(src, dst):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="Input/output"):
        _atomic_write_bytes(path, b"new\n")
    assert path.read_bytes() == b"old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["relu_x.py"]
