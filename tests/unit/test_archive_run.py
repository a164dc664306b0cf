"""tools/archive_run.py: a run folder made ready to ship, its manifest current, its logs xz'd."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from sweeper.analyze.store import load_manifest, read_trials

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("archive_run", ROOT / "tools/archive_run.py")
ar = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ar)


@pytest.fixture
def v1_run(tmp_path) -> Path:
    """aw-4's manifest written back as version 1 (the pruned list inside it) beside a
    slice of its trials, as the run was recorded."""
    import lzma

    run = tmp_path / "h200" / "aw"
    run.mkdir(parents=True)
    src = ROOT / "results/h200/aw-4"
    m = load_manifest(src)
    raw = json.loads((src / "manifest.json").read_text())
    raw["schema_version"], raw["pruned"] = 1, m["pruned"]
    del raw["records"]  # a version 1 manifest predates them
    (run / "manifest.json").write_text(json.dumps(raw, indent=1) + "\n")
    with lzma.open(src / "trials.jsonl.xz", "rt") as f:
        (run / "trials.jsonl").write_text("".join(next(f) for _ in range(50)))
    return run


def test_a_version_1_folder_is_archived_at_the_current_version_and_reads_the_same(v1_run):
    before = load_manifest(v1_run)
    trials = read_trials(v1_run)[0]
    raw = json.loads((v1_run / "manifest.json").read_text())
    assert ar.main([str(v1_run)]) == 0
    assert sorted(p.name for p in v1_run.iterdir()) == [
        "manifest.json",
        "pruned.jsonl.xz",
        "trials.jsonl.xz",
    ]
    after = load_manifest(v1_run)
    assert {k: v for k, v in after.items() if k != "records"} == before
    assert len(before["pruned"]) == 7937
    assert read_trials(v1_run, after)[0] == trials  # the log the manifest now records
    now = json.loads((v1_run / "manifest.json").read_text())
    assert now["schema_version"] == 2 and now["pruned"] == "pruned.jsonl"
    assert now["records"]["trials.jsonl"]["count"] == 50
    assert now["records"]["pruned.jsonl"]["count"] == 7937
    assert {k: v for k, v in now.items() if k not in ("schema_version", "pruned", "records")} == {
        k: v for k, v in raw.items() if k not in ("schema_version", "pruned")
    }
    assert ar.main([str(v1_run)]) == 0  # a second time finds nothing to do
    assert load_manifest(v1_run) == after


def test_a_folder_whose_manifest_does_not_load_is_left_as_it_is(v1_run, tmp_path, capsys):
    raw = json.loads((v1_run / "manifest.json").read_text())
    raw["device"]["l2_bytes"] = 0
    (v1_run / "manifest.json").write_text(json.dumps(raw))
    copy = shutil.copytree(v1_run, tmp_path / "copy")
    assert ar.main([str(v1_run)]) == 2
    assert "device.l2_bytes" in capsys.readouterr().err
    for p in copy.iterdir():
        assert (v1_run / p.name).read_bytes() == p.read_bytes()


DERIVED = ["policy.json", "selection.csv", "selection.md", "verify_timing.csv"]


@pytest.fixture
def unrecorded(tmp_path) -> Path:
    """hot-7 as shipped, its manifest without records.derived (as one written before
    derived files were recorded)."""
    run = tmp_path / "h200" / "hot-7"
    shutil.copytree(ROOT / "results/h200/hot-7", run)
    raw = json.loads((run / "manifest.json").read_text())
    raw["records"].pop("derived", None)
    (run / "manifest.json").write_text(json.dumps(raw, indent=1) + "\n")
    return run


def test_derived_files_are_recorded_once_read_back(unrecorded):
    from sweeper.analyze.policy import load_policy
    from sweeper.errors import SchemaError

    done = ar.archive(unrecorded)
    names = "selection.csv, selection.md, policy.json, verify_timing.csv"
    assert done == [f"manifest.json: records.derived of {names}"]
    raw = json.loads((unrecorded / "manifest.json").read_text())
    assert sorted(raw["records"]["derived"]) == DERIVED
    load_manifest(unrecorded)  # the manifest's own record still holds
    load_policy(unrecorded / "policy.json")
    assert ar.archive(unrecorded) == []  # nothing left to record
    policy = unrecorded / "policy.json"
    policy.write_text(policy.read_text().replace('"kind"', '"kind" ', 1))
    with pytest.raises(SchemaError, match="records.derived.policy.json"):
        load_policy(policy)


def test_a_damaged_derived_file_is_not_recorded(unrecorded):
    from sweeper.errors import SweeperError

    csv = unrecorded / "selection.csv"
    lines = csv.read_text().splitlines(keepends=True)
    csv.write_text("".join(lines[: len(lines) // 2]))
    before = (unrecorded / "manifest.json").read_bytes()
    with pytest.raises(SweeperError, match="selection.csv"):
        ar.archive(unrecorded)
    assert (unrecorded / "manifest.json").read_bytes() == before
