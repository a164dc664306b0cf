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
own other fields; no other byte of it changes. A folder whose manifest does not load is left
as it is.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from sweeper.analyze.store import RECORDS, load_manifest, with_records, write_manifest
from sweeper.errors import SweeperError
from sweeper.runfolder import MANIFEST, PRUNED, TRIALS
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
    for log in (TRIALS, PRUNED):
        if (run / log).exists():
            subprocess.run(["xz", "-9e", "-f", str(run / log)], check=True)
            done.append(f"{log} -> {log}.xz")
    return done


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
