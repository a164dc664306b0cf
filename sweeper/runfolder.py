"""A run folder, results/<gpu>/<run-id>/: the name of every file in it, and which run a
command works on when none is named."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from sweeper.errors import SweeperError
from sweeper.files import file_to_write

MANIFEST = "manifest.json"  # the run: device, versions, plan, grid, modes, status
TRIALS = "trials.jsonl"  # one line per measured cell, appended as the run goes
TRIALS_XZ = "trials.jsonl.xz"  # a shipped, archived run: read-only (unxz it to resume)
TRIALS_GZ = "trials.jsonl.gz"  # an archive made with gzip: read the same way
ARCHIVES = (TRIALS_XZ, TRIALS_GZ)  # xz -9e: a third smaller than gzip -9 on a trial log
UNPACK = {".xz": "unxz", ".gz": "gunzip"}  # the command that restores a log from its archive
PRUNED = "pruned.jsonl"  # the configs screening left out, one line each (manifest "pruned")
RESULTS = "results.csv"  # the tidy table, rebuilt from the trials when absent
SELECTION_CSV = "selection.csv"  # sweeper select
SELECTION_MD = "selection.md"
POLICY = "policy.json"  # sweeper policy build
VERIFY_CSV = "verify_timing.csv"  # sweeper verify
PLOTS = "plots"  # sweeper plot: the figures' folder
REPORT = "REPORT.md"  # sweeper report
# manifest timing entries that are not seconds of a stage
CELL_PHASES = "cell_phases_s"  # host time by cell phase, "mode/phase" -> s (PhaseClock)
REPLAY_GRAPHS = "replay_graphs"  # the fresh-input replay's graphs: updated / instantiated
BATCH_SPANS = "batch_spans"  # the batched executor's GPU time in and between batches
# manifest field: "mode/dtype" -> the survivors swept beyond the L2 only (search.beyond_l2_only)
BEYOND_L2 = "beyond_l2_only"


def log_archive(run_dir: str | os.PathLike, log: str) -> Path | None:
    """The archive (xz or gzip) of the log file `log` (TRIALS, PRUNED) in a run folder, or
    None; a folder holding two archives of one log is refused (which one is the run's would be
    a guess)."""
    names = (f"{log}.xz", f"{log}.gz")
    found = [Path(run_dir) / a for a in names if (Path(run_dir) / a).exists()]
    if len(found) > 1:
        raise SweeperError(
            f"{run_dir} holds both {found[0].name} and {found[1].name}; keep the one that is "
            f"the run's {log}"
        )
    return found[0] if found else None


def read_log(run_dir: str | os.PathLike, log: str) -> tuple[Path, bytes] | None:
    """A run folder's log `log` (TRIALS, PRUNED) as it is on disk, else its archive: the file
    read and its (decompressed) bytes; None when neither is there."""
    from sweeper.files import file_bytes

    path = Path(run_dir) / log
    if path.exists():
        return path, file_bytes(path)
    archive = log_archive(run_dir, log)
    return None if archive is None else (archive, read_archive(archive))


def read_archive(path: Path) -> bytes:
    """The decompressed bytes of an archived log (xz or gzip, by its name)."""
    from sweeper.files import unpack

    return unpack(path)


# what a run measured and how: the only copy, never written over by any command but the run's
RECORDS = (MANIFEST, TRIALS, *ARCHIVES, PRUNED, f"{PRUNED}.xz", f"{PRUNED}.gz")
# every file a run folder holds: what the run wrote, and what the commands on it derive
RUN_FILES = (*RECORDS, RESULTS, SELECTION_CSV, SELECTION_MD, POLICY, VERIFY_CSV, PLOTS, REPORT)
_RECORD_WHAT = {MANIFEST: "manifest", PRUNED: "pruned log"}


def held_run_files(folder: str | os.PathLike) -> list[str]:
    """The names of RUN_FILES that `folder` holds (in RUN_FILES order)."""
    return [n for n in RUN_FILES if os.path.lexists(Path(folder) / n)]


def run_folder_of(path: str | os.PathLike) -> Path | None:
    """The run folder that holds `path` (the nearest folder above it with a manifest or a trial
    log), resolved; None when no folder above it is a run's."""
    here = Path(path).resolve().parent
    for folder in (here, *here.parents):
        if any((folder / n).is_file() for n in (MANIFEST, TRIALS, *ARCHIVES)):
            return folder
    return None


def check_output(
    path: str | os.PathLike, works_on: tuple[str | os.PathLike, ...] = (), option: str = "-o"
) -> Path:
    """Refuse `path` as the file a command writes (its `option`), --force or not: a run's
    records (RECORDS: its measurements, manifest, pruned log), a folder, a file inside a run
    folder other than the ones the command works on (`works_on`: run folders or files in
    them), and a run's own files (RUN_FILES) there. Whether an ordinary file already there
    may be replaced (--force) is the writer's to decide. Returns the path."""
    path = Path(path)
    for name in dict.fromkeys((path.name, path.resolve().name)):
        if name in RECORDS:
            what = _RECORD_WHAT.get(name.removesuffix(".xz").removesuffix(".gz"), "measurements")
            raise SweeperError(
                f"{option} {path}: that name is a run's {what} ({name}); sweeper never writes "
                "over it, --force or not: name another file"
            )
    file_to_write(path)  # a folder, or under a file: refused (sweeper.files)
    run = run_folder_of(path)
    if run is None:
        return path
    mine = {p.resolve() if p.is_dir() else run_folder_of(p) for p in map(Path, works_on)}
    if run not in mine:
        raise SweeperError(
            f"{option} {path}: inside the run folder {run}, which this command does not work "
            "on; sweeper never writes into another run's folder, --force or not"
        )
    rel = path.resolve().relative_to(run).parts
    if rel and rel[0] in RUN_FILES:
        raise SweeperError(
            f"{option} {path}: the run's own {rel[0]}; sweeper never writes over it from "
            f"{option}, --force or not: name another file"
        )
    return path


EXTERNAL_GRID = "external"  # the grid of `sweeper audit` runs: no grid configs
POLICY_PREFIX = "policy-"  # config name of a shipped policy's dispatch in an audit: policy-<run id>


def baseline_of(manifest) -> str:
    """The name of what a run timed every candidate against (manifest "baseline"; torch for
    a manifest that does not say)."""
    return str(manifest.get("baseline") or "torch")


def is_audit(manifest) -> bool:
    """A `sweeper audit` run: the user's kernel and the shipped policies' dispatch alone."""
    return manifest.get("grid") == EXTERNAL_GRID


def user_configs(manifest) -> tuple[str, ...]:
    """The config names of the users' kernels a run timed as candidates (manifest
    "external")."""
    return tuple(k["config"] for k in manifest.get("external") or [])


def dispatch_configs(manifest) -> tuple[str, ...]:
    """The config names of the shipped policies' dispatch a run timed (manifest "dispatch")."""
    return tuple(d["config"] for d in manifest.get("dispatch") or [])


def plain_run_id(run_id: str) -> bool:
    """Whether a run id is a plain folder name: one path part, not hidden, not an option."""
    return not (
        not run_id.strip()
        or run_id in (".", "..")
        or run_id != Path(run_id).name
        or "\\" in run_id
        or run_id.startswith(("-", "."))
    )


def new_run_dir(root: str | os.PathLike, gpu: str, run_id: str | None) -> None:
    """Refuse a new run's folder, root/gpu/run_id, that `sweeper run` must not write into: a
    run id that is not a plain folder name (it would land outside root/gpu), or a folder
    that already holds any run file (RUN_FILES: a pruned log alone included; a second run
    would be appended to them or replace them)."""
    if run_id is None:
        return
    if not plain_run_id(run_id):
        raise SweeperError(
            f"--run-id {run_id!r}: a plain folder name (letters, digits, '-', '_'); the run "
            f"goes into {Path(root) / gpu}/<run-id>"
        )
    path = Path(root) / gpu / run_id
    held = held_run_files(path)
    if held:
        raise SweeperError(
            f"{path} already holds {held[0]}; use `sweeper run --resume --run-dir {path}` for "
            "a run of its own, or another --run-id"
        )


def undo_new(folder: str | os.PathLike) -> Callable[[], None]:
    """Call before a command creates `folder` and writes into it: returns what removes the
    entries it then adds to the folder, and the folder and the parents it made, when they
    are empty; nothing that was there before is touched."""
    folder = Path(folder)
    made = []
    d = folder
    while not os.path.lexists(d):
        made.append(d)
        d = d.parent
    before = set(os.listdir(folder)) if not made and folder.is_dir() else set()

    def undo() -> None:
        if folder.is_dir():
            for name in set(os.listdir(folder)) - before:
                entry = folder / name
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
        for d in made:  # deepest first; a folder something else wrote into stays
            with contextlib.suppress(OSError):
                d.rmdir()

    return undo


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
