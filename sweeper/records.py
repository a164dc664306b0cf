"""What a finished run recorded of its files (the manifest's "records"), and the files later
commands derive from it.

A finished run's manifest records the line count and sha256 of its trial and pruned logs and
the sha256 of its own other fields (sweeper.analyze.store checks them). The files a command
derives from the trial log and other commands read back (selection.csv, selection.md,
policy.json, verify_timing.csv) are recorded the same way, under records.derived, by the
command that writes them: an edited, swapped or stale file (one
written before a resumed run finished again) is refused by every reader, naming it and the
command that rebuilds it. A manifest written before derived files were recorded has no
records.derived: its derived files are checked against the trial log only.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from sweeper.errors import SchemaError
from sweeper.files import file_bytes, read_json
from sweeper.runfolder import MANIFEST, POLICY, SELECTION_CSV, SELECTION_MD, VERIFY_CSV
from sweeper.schema import check_header, dump

RECORDS = "records"


def file_record(data: bytes) -> dict:
    """The record of a file's text: its line count and sha256."""
    return {"count": data.count(b"\n"), "sha256": hashlib.sha256(data).hexdigest()}


DERIVED = "derived"


def derived_files() -> dict[str, str]:
    """The derived files of a run folder and the command that writes each."""
    return {
        SELECTION_CSV: "sweeper select",
        SELECTION_MD: "sweeper select",
        POLICY: "sweeper policy build",
        VERIFY_CSV: "sweeper verify",
    }


def _raw_manifest(run_dir: Path) -> dict | None:
    """The manifest beside a derived file as written (None without one; every reader of the
    run has loaded and validated it)."""
    if not (run_dir / MANIFEST).is_file():
        return None
    return check_header(read_json(run_dir / MANIFEST), "manifest", run_dir / MANIFEST)


def record_derived(*paths: str | os.PathLike) -> None:
    """After a command wrote `paths` into a finished run's folder: its manifest records their
    line counts and sha256 (records.derived). A file outside a run folder, or in a run still
    going, is not recorded."""
    by_dir: dict[Path, list[Path]] = {}
    for p in map(Path, paths):
        if p.name in derived_files():
            by_dir.setdefault(p.parent, []).append(p)
    for run_dir, files in by_dir.items():
        doc = _raw_manifest(run_dir)
        if doc is None or RECORDS not in doc:
            continue
        derived = dict(doc[RECORDS].get(DERIVED) or {})
        derived.update({p.name: file_record(file_bytes(p)) for p in files})
        doc[RECORDS] = {**doc[RECORDS], DERIVED: dict(sorted(derived.items()))}
        dump("manifest", doc, run_dir / MANIFEST)


def check_derived(path: str | os.PathLike, data: bytes) -> None:
    """The derived file `path` (its bytes `data`) is the one its run's manifest recorded;
    SchemaError naming the file and the command that rebuilds it otherwise."""
    path = Path(path)
    command = derived_files().get(path.name)
    if command is None:
        return
    doc = _raw_manifest(path.parent)
    derived = ((doc or {}).get(RECORDS) or {}).get(DERIVED)
    if derived is None:
        return  # a run finished before manifests recorded derived files
    field = f"{RECORDS}.{DERIVED}.{path.name}"
    rec = derived.get(path.name)
    if rec is None:
        raise SchemaError(
            path, field, f"not recorded by the run's manifest; rebuild it with `{command}`"
        )
    have = file_record(data)
    if have != {"count": rec["count"], "sha256": rec["sha256"]}:
        raise SchemaError(
            path,
            field,
            f"{have['count']} lines (sha256 {have['sha256'][:12]}...), the run recorded "
            f"{rec['count']} (sha256 {rec['sha256'][:12]}...): not the file `{command}` wrote; "
            f"rebuild it with `{command}`",
        )
