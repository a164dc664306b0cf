"""A run folder, results/<gpu>/<run-id>/: the name of every file in it, and which run a
command works on when none is named."""

from __future__ import annotations

import json
import os
from pathlib import Path

from sweeper.errors import SweeperError

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
    if run is None:
        return newest_run(root)
    path = Path(run)
    if not path.is_dir():
        raise SweeperError(f"{path}: no such run folder (pass results/<gpu>/<run-id>)")
    if not (path / MANIFEST).is_file():
        raise SweeperError(f"{path}: not a run folder (no {MANIFEST}); pass results/<gpu>/<run-id>")
    return path


def newest_run(root: str | os.PathLike = "results", gpu: str | None = None) -> Path:
    """The most recently started run folder under root (optionally for one GPU)."""
    root = Path(root)
    pattern = f"{gpu}/*/{MANIFEST}" if gpu else f"*/*/{MANIFEST}"
    runs = [p.parent for p in root.glob(pattern)]
    if not runs:
        where = f"{root}/{gpu}" if gpu else str(root)
        raise SweeperError(f"no runs under {where}/; run `sweeper run` first or name a run folder")

    def started(p: Path) -> str:
        try:
            return str(json.loads((p / MANIFEST).read_text()).get("started", ""))
        except (OSError, ValueError):
            return ""

    return max(runs, key=lambda p: (started(p), p.name))
