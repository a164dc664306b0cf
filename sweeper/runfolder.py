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


def baseline_of(manifest) -> str:
    """The name of what a run timed every candidate against (manifest "baseline"; torch for
    a manifest that does not say)."""
    return str(manifest.get("baseline") or "torch")


def resolve_run(run: str | os.PathLike | None, root: str | os.PathLike = "results") -> Path:
    """The run folder to work on: `run`, or the newest complete one under `root` when None."""
    if run is None:
        return newest_run(root, complete=True)
    path = Path(run)
    if not path.is_dir():
        raise SweeperError(f"{path}: no such run folder (pass results/<gpu>/<run-id>)")
    if not (path / MANIFEST).is_file():
        raise SweeperError(f"{path}: not a run folder (no {MANIFEST}); pass results/<gpu>/<run-id>")
    return path


def newest_run(
    root: str | os.PathLike = "results", gpu: str | None = None, complete: bool = False
) -> Path:
    """The most recently started run folder under root (optionally for one GPU); with
    `complete`, the most recent whose manifest says it completed (what a command that reads
    a run should default to; resuming wants the newest of any status)."""
    root = Path(root)
    pattern = f"{gpu}/*/{MANIFEST}" if gpu else f"*/*/{MANIFEST}"
    runs = [p.parent for p in root.glob(pattern)]
    where = f"{root}/{gpu}" if gpu else str(root)
    if not runs:
        raise SweeperError(f"no runs under {where}/; run `sweeper run` first or name a run folder")

    def manifest(p: Path) -> dict:
        try:
            doc = json.loads((p / MANIFEST).read_text())
        except (OSError, ValueError):
            return {}
        return doc if isinstance(doc, dict) else {}

    docs = {p: manifest(p) for p in runs}
    if complete:
        runs = [p for p in runs if docs[p].get("status") == "complete"]
        if not runs:
            raise SweeperError(
                f"no complete run under {where}/; name a run folder, or finish one with "
                "`sweeper run --resume`"
            )
    return max(runs, key=lambda p: (str(docs[p].get("started", "")), p.name))
