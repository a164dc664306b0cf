#!/usr/bin/env python3
"""Archive a finished run folder for shipping: its logs compressed, its manifest current.

    python tools/archive_run.py results/h200/hot-7 [more run folders]

A manifest of schema version 1 holds its list of pruned configs itself (over a megabyte in a
four-dtype run); it is written again at the current version, which keeps the list in
pruned.jsonl beside it and changes no other field. trials.jsonl and pruned.jsonl are then
compressed with `xz -9e` (what sweeper reads as the run's archive; `unxz` both to resume the
run). The figures are drawn from the manifest and the pruned list, so `sweeper plot` the
folder again afterwards. A manifest without "records" (a run finished before manifests
recorded their files) gains them: the count and sha256 of its logs as they are, and of its
own other fields; no other byte of it changes. The files later commands derived from the run
(selection, policy, verify timing) are recorded too (records.derived), each after it is read
back against the trial log as every reader does. A folder whose manifest or a derived file
does not load is left as it is.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from sweeper.analyze.store import (
    load_manifest,
    load_run,
    read_selection,
    with_records,
    write_manifest,
)
from sweeper.errors import SweeperError
from sweeper.records import DERIVED, RECORDS, derived_files, record_derived
from sweeper.runfolder import MANIFEST, POLICY, PRUNED, TRIALS
from sweeper.schema import VERSIONS, dump


def archive(run: Path) -> list[str]:
    """What was done to the folder, one line each."""
    import json

    done = []
    # refuses a damaged folder before anything is written; one without records gains them
    manifest = load_manifest(run, unrecorded=True)
    raw = json.loads((run / MANIFEST).read_text(encoding="utf-8"))
    if raw.get("schema_version") != VERSIONS["manifest"]:
        write_manifest(run, manifest, finished=True)
        done.append(f"{MANIFEST}: version {raw.get('schema_version')} -> {VERSIONS['manifest']}")
    elif RECORDS not in raw:
        dump("manifest", with_records(run, raw), run / MANIFEST)
        done.append(f"{MANIFEST}: {RECORDS} of its logs and itself added")
    derived = checked_derived(run)
    if derived:
        record_derived(*derived)
        done.append(f"{MANIFEST}: {RECORDS}.{DERIVED} of {', '.join(p.name for p in derived)}")
    for log in (TRIALS, PRUNED):
        if (run / log).exists():
            subprocess.run(["xz", "-9e", "-f", str(run / log)], check=True)
            done.append(f"{log} -> {log}.xz")
    return done


def checked_derived(run: Path) -> list[Path]:
    """The derived files in `run` that its manifest does not record yet, each read back as
    its readers do (a damaged one raises SweeperError before anything is recorded)."""
    import json

    from sweeper.analyze.policy import load_policy
    from sweeper.analyze.verdict import load_verify

    raw = json.loads((run / MANIFEST).read_text(encoding="utf-8"))
    recorded = (raw.get(RECORDS) or {}).get(DERIVED) or {}
    paths = [
        run / name for name in derived_files() if (run / name).is_file() and name not in recorded
    ]
    if not paths:
        return []
    read_selection(run, load_run(run).results)
    if (run / POLICY).is_file():
        load_policy(run / POLICY)
    load_verify(run)
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    args = ap.parse_args(argv)
    for run in args.runs:
        try:
            done = archive(run)
        except SweeperError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"{run}: {'; '.join(done) or 'already archived'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
