"""x"""

from __future__ import annotations

import os
from pathlib import Path


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
