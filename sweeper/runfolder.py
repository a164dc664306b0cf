"""A run folder, results/<gpu>/<run-id>/: the name of every file in it, and which run a
command works on when none is named."""

from __future__ import annotations

import os
from pathlib import Path

MANIFEST = "manifest.json"  # the run: device, versions, plan, grid, modes, status
TRIALS = "trials.jsonl"  # one line per measured cell, appended as the run goes
TRIALS_GZ = "trials.jsonl.gz"  # a shipped, archived run: read-only (gunzip it to resume)
RESULTS = "results.csv"  # the tidy table, rebuilt from the trials when absent
SELECTION_CSV = "selection.csv"  # sweeper select
SELECTION_MD = "selection.md"
POLICY = "policy.json"  # sweeper policy build
VERIFY_CSV = "verify_timing.csv"  # sweeper verify
PLOTS = "plots"  # sweeper plot: the figures' folder
REPORT = "REPORT.md"  # sweeper report


def resolve_run(run: str | os.PathLike | None, root: str | os.PathLike = "results") -> Path:
    """The run folder to work on: `run`, or the newest under `root` when None."""
    from sweeper.analyze.store import MANIFEST, newest_run
    from sweeper.errors import SweeperError

    if run is None:
        return newest_run(root)
    path = Path(run)
    if not path.is_dir():
        raise SweeperError(f"{path}: no such run folder (pass results/<gpu>/<run-id>)")
    if not (path / MANIFEST).is_file():
        raise SweeperError(f"{path}: not a run folder (no {MANIFEST}); pass results/<gpu>/<run-id>")
    return path
