"""Run folders: manifest, append-only trial records, and the tidy results table.

    results/<gpu>/<run-id>/
        manifest.json   kind "manifest": plan hash, device, versions, git commit, grid, guards
        trials.jsonl    kind "trial", one line per measured cell, flushed as written
        results.csv     the tidy table (sweeper.analyze.columns.COLUMNS), rebuilt from trials.jsonl

A crash loses at most the trial in flight: a truncated last line is ignored on read (and
reported), any other bad line is an error naming the file and line.
"""

from __future__ import annotations

import io
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeper.analyze.columns import COLUMNS, MODES, ROLES, STATUSES
from sweeper.errors import FieldError, SchemaError, SweeperError
from sweeper.runfolder import MANIFEST, RESULTS, TRIALS, TRIALS_GZ
from sweeper.schema import atomic_write_text, check_header, dump, load, require, stamp

if TYPE_CHECKING:
    import pandas as pd


# Fields of a trial line beyond the table columns (raw data, kept for audits).
TRIAL_EXTRA = ("samples_us", "base_samples_us", "sample_parts", "cell_key")


@dataclass
class RunData:
    path: Path
    manifest: dict
    results: pd.DataFrame


def validate_manifest(doc: dict) -> None:
    require(doc, "run_id", str)
    require(doc, "gpu", str)
    device = require(doc, "device", dict)
    for f in ("l2_bytes", "sm_count"):
        require(device, f, int, "device.")
    plan = require(doc, "plan", dict)
    require(plan, "plan_hash", str, "plan.")
    require(doc, "modes", list)
    for m in doc["modes"]:
        if m not in MODES:
            raise FieldError("modes", f"unknown mode {m!r} (known: {', '.join(MODES)})")
    harness = doc.get("harness") or {}
    if "ceiling_check" in harness:  # the physical-limit check's parameters (sweeper.run.ceilings)
        check = require(harness, "ceiling_check", dict, "harness.")
        for f in ("margin", "copy_from_x_l2"):
            v = require(check, f, (int, float), "harness.ceiling_check.")
            if not v > 0:
                raise FieldError(f"harness.ceiling_check.{f}", f"must be positive, found {v}")


def write_manifest(run_dir: str | os.PathLike, manifest: dict) -> Path:
    validate_manifest(stamp("manifest", manifest))
    return dump("manifest", manifest, Path(run_dir) / MANIFEST)


def load_manifest(run_dir: str | os.PathLike) -> dict:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise SweeperError(f"{run_dir}: no such run folder")
    return load(run_dir / MANIFEST, "manifest", validate_manifest)


def validate_trial(doc: dict) -> None:
    for f in ("run_id", "mode", "dtype", "role", "config", "status"):
        require(doc, f, str)
    for f in ("n", "ws_bytes"):
        require(doc, f, int)
    if doc["role"] not in ROLES:
        raise FieldError("role", f"unknown role {doc['role']!r}")
    if doc["status"] not in STATUSES:
        raise FieldError("status", f"unknown status {doc['status']!r}")
    if doc["mode"] not in MODES:
        raise FieldError("mode", f"unknown mode {doc['mode']!r}")


class TrialWriter:
    """Append one JSON line per trial. Every line is flushed to the OS at once, so a killed
    or crashed sweeper loses none; the file is fsync'ed at most every FSYNC_S seconds and on
    close, so a machine that loses power loses at most that much (an fsync per cell cost more
    than the cell's GPU time on small sizes)."""

    FSYNC_S = 2.0

    def __init__(self, run_dir: str | os.PathLike):
        self.path = Path(run_dir) / TRIALS
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (kept open on purpose)
        self._synced = time.monotonic()

    def append(self, trial: dict[str, Any]) -> None:
        doc = stamp("trial", trial)
        validate_trial(doc)
        self._f.write(json.dumps(doc, allow_nan=True, separators=(",", ":")) + "\n")
        self._f.flush()
        if time.monotonic() - self._synced >= self.FSYNC_S:
            os.fsync(self._f.fileno())
            self._synced = time.monotonic()

    def close(self) -> None:
        if not self._f.closed:
            self._f.flush()
            os.fsync(self._f.fileno())
        self._f.close()

    def __enter__(self) -> TrialWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_trials(run_dir: str | os.PathLike) -> tuple[list[dict], bool]:
    """All trial records, and whether a truncated last line (a crash mid-write) was dropped."""
    path = Path(run_dir) / TRIALS
    if not path.exists():
        gz = Path(run_dir) / TRIALS_GZ
        if not gz.exists():
            return [], False
        import gzip

        path, text = gz, gzip.decompress(gz.read_bytes()).decode("utf-8")
    else:
        text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    truncated = False
    if lines and lines[-1] == "":
        lines.pop()
    elif lines:
        # No trailing newline: the last write did not complete.
        lines.pop()
        truncated = True
    out = []
    for i, line in enumerate(lines, 1):
        where = f"{path}:{i}"
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as e:
            raise SchemaError(where, None, f"not valid JSON ({e.msg})") from None
        doc = check_header(doc, "trial", where)
        try:
            validate_trial(doc)
        except FieldError as e:
            raise SchemaError(where, e.field, str(e)) from None
        out.append(doc)
    return out, truncated


def repair_trials(run_dir: str | os.PathLike) -> int:
    """Drop a truncated last line in place (before resuming); return bytes dropped."""
    path = Path(run_dir) / TRIALS
    if not path.exists():
        return 0
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return 0
    keep = data[: data.rfind(b"\n") + 1]
    atomic_write_text(path, keep.decode("utf-8"))
    return len(data) - len(keep)


def trials_to_frame(trials: list[dict]) -> pd.DataFrame:
    import pandas as pd

    rows = [{c: t.get(c) for c in COLUMNS} for t in trials]
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    return coerce(df)


def coerce(df: pd.DataFrame) -> pd.DataFrame:
    """Give the table its declared dtypes (and all declared columns, in order)."""
    import pandas as pd

    df = df.copy()
    for col, (typ, _) in COLUMNS.items():
        if col not in df:
            df[col] = pd.NA
        if typ == "str":
            df[col] = df[col].astype("object").where(df[col].notna(), "")
            df[col] = df[col].astype(str)
        elif typ in ("int64", "Int64"):
            df[col] = pd.to_numeric(df[col], errors="coerce").astype("Int64")
        else:
            df[col] = pd.to_numeric(df[col], errors="coerce").astype("float64")
    return df[list(COLUMNS)]


def write_results(run_dir: str | os.PathLike, df: pd.DataFrame) -> Path:
    buf = io.StringIO()
    coerce(df).to_csv(buf, index=False)
    return atomic_write_text(Path(run_dir) / RESULTS, buf.getvalue())


def read_table(path: str | os.PathLike) -> pd.DataFrame | None:
    """A CSV a later stage left in a run folder (selection.csv, verify_timing.csv), or None
    when the stage has not run; SchemaError when it is there but unreadable."""
    import pandas as pd

    path = Path(path)
    if not path.exists():
        return None
    try:
        return pd.read_csv(path)
    except (OSError, ValueError) as e:
        raise SchemaError(path, None, f"cannot read: {e}") from None


def read_results(run_dir: str | os.PathLike) -> pd.DataFrame:
    import pandas as pd

    path = Path(run_dir) / RESULTS
    try:
        df = pd.read_csv(path, keep_default_na=False, na_values=[""])
    except (OSError, ValueError) as e:
        raise SchemaError(path, None, f"cannot read results table: {e}") from None
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise SchemaError(path, missing[0], "column missing from the results table")
    return coerce(df)


def load_run(path: str | os.PathLike) -> RunData:
    """Manifest + tidy results of a run folder (results.csv, else rebuilt from trials)."""
    path = Path(path)
    manifest = load_manifest(path)
    if (path / RESULTS).exists():
        results = read_results(path)
    else:
        trials, _ = read_trials(path)
        results = trials_to_frame(trials)
    return RunData(path=path, manifest=manifest, results=results)


def write_run(path: str | os.PathLike, manifest: dict, results: pd.DataFrame) -> Path:
    """Write a complete run folder from a manifest and a results table (tests, imports)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    write_manifest(path, manifest)
    df = coerce(results)
    trials_path = path / TRIALS
    lines = []
    for row in df.to_dict(orient="records"):
        trial = {k: (None if isna(v) else _plain(v)) for k, v in row.items()}
        doc = stamp("trial", trial)
        validate_trial(doc)
        lines.append(json.dumps(doc, separators=(",", ":")))
    atomic_write_text(trials_path, "".join(line + "\n" for line in lines))
    write_results(path, df)
    return path


def isna(v: Any) -> bool:
    try:
        import pandas as pd

        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _plain(v: Any) -> Any:
    if hasattr(v, "item"):
        return v.item()
    return v
