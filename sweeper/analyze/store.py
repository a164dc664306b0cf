"""Run folders: manifest, append-only trial records, and the tidy results table.

    results/<gpu>/<run-id>/
        manifest.json   kind "manifest": plan hash, device, versions, git commit, grid, guards
        pruned.jsonl    kind "pruned", one line per config screening left out (per mode, dtype)
        trials.jsonl    kind "trial", one line per measured cell, flushed as written
        results.csv     the tidy table (sweeper.analyze.columns.COLUMNS), rebuilt from trials.jsonl

A crash loses at most the trial in flight: a truncated last line is ignored on read (and
reported), any other bad line is an error naming the file and line.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import io
import json
import marshal
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeper.analyze.columns import ADDED_COLUMNS, COLUMNS, MEASURED, MODES, ROLES, STATUSES
from sweeper.errors import FieldError, SchemaError, SweeperError
from sweeper.files import file_bytes, read_text, text_of
from sweeper.records import DERIVED, RECORDS, check_derived, derived_files, file_record
from sweeper.runfolder import (
    MANIFEST,
    PRUNED,
    RESULTS,
    TRIALS,
    log_archive,
    read_log,
)
from sweeper.schema import (
    atomic_write_text,
    canonical_json,
    check_header,
    dump,
    load,
    require,
    stamp,
)

if TYPE_CHECKING:
    import pandas as pd


# Fields of a trial line beyond the table columns (raw data, kept for audits).
TRIAL_EXTRA = ("samples_us", "base_samples_us", "sample_parts", "cell_key")
# The table's numeric columns: a trial line holds a number or null there.
NUMERIC = tuple(c for c, (typ, _) in COLUMNS.items() if typ not in ("str",))
INTEGER = frozenset(c for c, (typ, _) in COLUMNS.items() if typ in ("int64", "Int64"))


@dataclass
class RunData:
    path: Path
    manifest: dict
    results: pd.DataFrame
    trials: Sequence[dict] = ()  # the trial records the table was built from


def validate_manifest(doc: dict) -> None:
    """Raise FieldError naming the first field of a manifest that later stages cannot use:
    the plan resolution and L2 size a policy's brackets are checked against, the device, the
    modes, and the kernel-source fingerprint the trials' variant ids were made with."""
    require(doc, "run_id", str)
    require(doc, "gpu", str)
    device = require(doc, "device", dict)
    for f in ("l2_bytes", "sm_count"):
        if require(device, f, int, "device.") <= 0:
            raise FieldError(f"device.{f}", f"must be positive, found {device[f]}")
    cc = device.get("cc")
    if cc is not None and not (
        isinstance(cc, list) and len(cc) == 2 and all(_is_int(x) and x >= 0 for x in cc)
    ):
        raise FieldError("device.cc", f"expected [major, minor], found {cc!r}")
    plan = require(doc, "plan", dict)
    require(plan, "plan_hash", str, "plan.")
    res = plan.get("resolution")
    if res is not None and not (_is_int(res) and res > 0):
        raise FieldError("plan.resolution", f"expected a positive integer, found {res!r}")
    l2 = plan.get("l2_bytes")
    if l2 is not None and l2 != device["l2_bytes"]:
        raise FieldError(
            "plan.l2_bytes",
            f"{l2!r} is not the device's L2 size (device.l2_bytes {device['l2_bytes']})",
        )
    require(doc, "modes", list)
    for m in doc["modes"]:
        if m not in MODES:
            raise FieldError("modes", f"unknown mode {m!r} (known: {', '.join(MODES)})")
    harness = doc.get("harness") or {}
    # the physical-limit check's parameters (sweeper.analyze.ceilings)
    if "ceiling_check" in harness:
        check = require(harness, "ceiling_check", dict, "harness.")
        for f in ("margin", "copy_from_x_l2"):
            v = require(check, f, (int, float), "harness.ceiling_check.")
            if not v > 0:
                raise FieldError(f"harness.ceiling_check.{f}", f"must be positive, found {v}")
    for f, typ in (
        ("status", str),
        ("kernel_source", str),
        ("timing", dict),
        ("pruned", (list, str)),
    ):
        if f in doc and doc[f] is not None:
            require(doc, f, typ)
    if RECORDS in doc:
        records = require(doc, RECORDS, dict)
        for name in (TRIALS, PRUNED, MANIFEST):
            rec = require(records, name, dict, f"{RECORDS}.")
            _validate_record(rec, f"{RECORDS}.{name}", counted=name != MANIFEST)
        derived = records.get(DERIVED, {})
        if not isinstance(derived, dict):
            raise FieldError(f"{RECORDS}.{DERIVED}", f"expected an object, found {derived!r}")
        for name, rec in derived.items():
            where = f"{RECORDS}.{DERIVED}.{name}"
            if name not in derived_files():
                raise FieldError(where, "not a file a command derives from the run")
            if not isinstance(rec, dict):
                raise FieldError(where, f"expected an object, found {rec!r}")
            _validate_record(rec, where, counted=True)


def _validate_record(rec: dict, where: str, counted: bool) -> None:
    """A file's record (sweeper.records.file_record): its sha256, and its line count when
    `counted`."""
    digest = require(rec, "sha256", str, f"{where}.")
    if not re.fullmatch("[0-9a-f]{64}", digest):
        raise FieldError(f"{where}.sha256", f"not a sha256: {digest!r}")
    if counted and not (_is_int(rec.get("count")) and rec["count"] >= 0):
        raise FieldError(f"{where}.count", f"expected a line count, found {rec.get('count')!r}")


# ---- what a finished run recorded of its files ----------------------------------------------
#
# A finished run's manifest ends with "records": the line count and sha256 of its trial log and
# pruned log (their text, whether on disk as is or archived), and the sha256 of the manifest's
# other fields (canonical JSON, so its layout may change, not its contents). Every reader
# checks them: a log cut short, replaced or mixed with another and a manifest edited after its
# run are refused, naming the file. Only a run still going or stopped (status "running",
# "interrupted") or written by version 1 has none; a complete run's manifest without them is
# refused.


def manifest_sha256(doc: dict) -> str:
    """The sha256 of a manifest's fields other than its records (canonical JSON; a NaN an
    edit put there hashes, as text, to what no run wrote)."""
    fields = {k: v for k, v in doc.items() if k != RECORDS}
    return hashlib.sha256(canonical_json(fields, allow_nan=True).encode()).hexdigest()


def with_records(run_dir: str | os.PathLike, doc: dict) -> dict:
    """The manifest `doc` (as written: "pruned" names its file) with the records of the trial
    and pruned logs of `run_dir` as they are now, and of its own other fields, last."""
    out = {k: v for k, v in stamp("manifest", doc).items() if k != RECORDS}
    records = {}
    for log in (TRIALS, PRUNED):
        got = read_log(run_dir, log)
        records[log] = file_record(got[1] if got is not None else b"")
    records[MANIFEST] = {"sha256": manifest_sha256(out)}
    records[DERIVED] = {}  # each is recorded by the command that writes it (record_derived)
    return {**out, RECORDS: records}


def check_manifest_record(run_dir: Path, doc: dict, unrecorded: bool = False) -> None:
    """The manifest's fields are the ones its run recorded (records.manifest.json). A
    complete run's manifest without records is refused unless `unrecorded` (the archiving
    tool, which adds them to a run finished before manifests recorded their files)."""
    rec = doc.get(RECORDS)
    if rec is None:
        # a manifest of version 1 (its pruned list inside it) was written before records
        complete = doc.get("status") in (None, "complete")
        if complete and not unrecorded and not isinstance(doc.get("pruned"), list):
            raise SchemaError(
                run_dir / MANIFEST,
                RECORDS,
                "missing: a complete run's manifest records its trial and pruned logs and "
                "itself; restore the run's manifest (a run finished before manifests recorded "
                "them: `python tools/archive_run.py RUN` adds them)",
            )
        return
    want, have = rec[MANIFEST]["sha256"], manifest_sha256(doc)
    if have != want:
        raise SchemaError(
            run_dir / MANIFEST,
            f"{RECORDS}.{MANIFEST}",
            f"its fields hash to {have[:12]}..., the run recorded {want[:12]}...: the manifest "
            "was changed after its run; restore the run's manifest",
        )


def check_log_record(run_dir: Path, log: str, rec: dict | None, got) -> None:
    """The log `log` as read (`got`: read_log's answer) is the one the run recorded (`rec`,
    the manifest's records entry; None: nothing recorded)."""
    if rec is None:
        return
    field = f"{RECORDS}.{log}"
    if got is None:
        raise SchemaError(
            run_dir / MANIFEST,
            field,
            f"the run recorded {rec['count']} lines of {log}, which is not in the run folder; "
            "restore it",
        )
    have = file_record(got[1])
    if have != {"count": rec["count"], "sha256": rec["sha256"]}:
        raise SchemaError(
            got[0],
            field,
            f"{have['count']} lines (sha256 {have['sha256'][:12]}...), the run recorded "
            f"{rec['count']} (sha256 {rec['sha256'][:12]}...): not the log the run wrote; "
            "restore the file",
        )


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def write_manifest(run_dir: str | os.PathLike, manifest: dict, finished: bool = False) -> Path:
    """Write the manifest; its list of pruned configs goes to pruned.jsonl beside it (one line
    each, written first), which the manifest's "pruned" names. With `finished` (the run's last
    write), the manifest records its logs and itself (RECORDS); without, it drops a record it
    had (a resumed run appends to its logs). Nothing is written when the manifest is not
    valid."""
    run_dir = Path(run_dir)
    pruned = [stamp("pruned", p) for p in manifest.get("pruned") or []]
    doc = {k: v for k, v in manifest.items() if k != RECORDS}
    doc["pruned"] = PRUNED
    validate_manifest(stamp("manifest", doc))
    for i, p in enumerate(pruned):
        try:
            validate_pruned(p)
        except FieldError as e:
            raise SchemaError(run_dir / PRUNED, e.field, f"entry {i + 1}: {e}") from None
    lines = (json.dumps(p, allow_nan=False, separators=(",", ":")) for p in pruned)
    atomic_write_text(run_dir / PRUNED, "".join(f"{line}\n" for line in lines))
    if finished:
        doc = with_records(run_dir, doc)
    return dump("manifest", doc, run_dir / MANIFEST)


def load_manifest(run_dir: str | os.PathLike, unrecorded: bool = False) -> dict:
    """The manifest of a run folder, its "pruned" the list of pruned configs (read from the
    file it names; a manifest of schema version 1 holds the list itself). `unrecorded`:
    a complete run's manifest may lack its records (check_manifest_record)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise SweeperError(f"{run_dir}: no such run folder")
    doc = load(run_dir / MANIFEST, "manifest", validate_manifest)
    check_manifest_record(run_dir, doc, unrecorded)
    check_plan_record(run_dir, doc)
    if isinstance(doc.get("pruned"), str):
        doc["pruned"] = read_pruned(run_dir, doc["pruned"], (doc.get(RECORDS) or {}).get(PRUNED))
    return doc


def validate_pruned(doc: dict) -> None:
    """Raise FieldError naming the first field of a pruned-config record later stages
    cannot use (the report, the selection's pruned list, a resume's seed)."""
    for f in ("mode", "dtype", "config"):
        require(doc, f, str)
    if doc["mode"] not in MODES:
        raise FieldError("mode", f"unknown mode {doc['mode']!r}")
    for f, typ in (("ws_bytes", int), ("sizes", int), ("shortfall", (int, float)), ("reason", str)):
        if doc.get(f) is not None:
            require(doc, f, typ)


def read_pruned(run_dir: Path, name: str, record: dict | None = None) -> list[dict]:
    """The pruned configs of a run folder: the lines of `name` (as the manifest names it),
    else of its archive; SchemaError naming the file and line of a bad line, or the manifest
    when neither file is there; the log must be the one the run recorded (`record`)."""
    if name != PRUNED:
        raise SchemaError(run_dir / MANIFEST, "pruned", f"expected {PRUNED!r}, found {name!r}")
    got = read_log(run_dir, name)
    check_log_record(run_dir, PRUNED, record, got)
    if got is None:
        raise SchemaError(
            run_dir / MANIFEST, "pruned", f"names {name}, which is not in the run folder"
        )
    path, text = got[0], text_of(got[0], got[1])
    out = []
    lines = text.split("\n")
    if lines[-1] != "":
        raise SchemaError(f"{path}:{len(lines)}", None, "the last line is incomplete")
    for i, line in enumerate(lines[:-1], 1):
        where = f"{path}:{i}"
        try:
            doc = check_header(json.loads(line), "pruned", where)
            validate_pruned(doc)
        except json.JSONDecodeError as e:
            raise SchemaError(where, None, f"not valid JSON ({e.msg})") from None
        except FieldError as e:
            raise SchemaError(where, e.field, str(e)) from None
        out.append({k: v for k, v in doc.items() if k not in ("kind", "schema_version")})
    return out


def check_plan_record(run_dir: Path, manifest: dict) -> None:
    """The manifest's copy of the plan's resolution and L2 size (what a policy's brackets
    are checked against) must be the plan's own, where the plan file it names is at hand
    (its path as recorded, from the working folder or the checkout holding results/) and
    still has the recorded hash."""
    from sweeper.plan.planfile import load_plan

    rec = manifest["plan"]
    name = rec.get("path")
    if not isinstance(name, str) or not name:
        return
    places = [Path(name)]
    if not Path(name).is_absolute() and len(run_dir.resolve().parents) > 2:
        places.append(run_dir.resolve().parents[2] / name)
    for place in places:
        if not place.is_file():
            continue
        try:
            plan = load_plan(place)
        except SchemaError:
            continue
        if plan.plan_hash != rec["plan_hash"]:
            continue
        for field, want in (("resolution", plan.resolution), ("l2_bytes", plan.l2_bytes)):
            if field in rec and rec[field] != want:
                raise SchemaError(
                    run_dir / MANIFEST,
                    f"plan.{field}",
                    f"{rec[field]!r} is not the plan's ({want!r} in {place}, hash "
                    f"{plan.plan_hash}); restore the run's manifest",
                )
        return


def validate_trial(doc: dict) -> None:
    from sweeper.dtypes import ITEMSIZE
    from sweeper.ops import working_set

    for f in ("run_id", "mode", "dtype", "role", "config", "status"):
        require(doc, f, str)
    for f in ("n", "ws_bytes"):
        require(doc, f, int)
    if doc["dtype"] not in ITEMSIZE:
        raise FieldError("dtype", f"unknown dtype {doc['dtype']!r}")
    if doc["n"] <= 0 or doc["ws_bytes"] != working_set(doc["n"], doc["dtype"]):
        raise FieldError(
            "ws_bytes", f"{doc['ws_bytes']} is not n * bytes per element of {doc['dtype']}"
        )
    for f in NUMERIC:
        v = doc.get(f)
        if v is None or type(v) is int or (type(v) is float and f not in INTEGER):
            continue  # what JSON decodes a valid field to, told apart without isinstance
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise FieldError(f, f"expected a number or null, found {v!r}")
        if f in INTEGER and not isinstance(v, int):
            raise FieldError(f, f"expected an integer or null, found {v!r}")
    if doc["role"] not in ROLES:
        raise FieldError("role", f"unknown role {doc['role']!r}")
    if doc["status"] not in STATUSES:
        raise FieldError("status", f"unknown status {doc['status']!r}")
    if doc["mode"] not in MODES:
        raise FieldError("mode", f"unknown mode {doc['mode']!r}")
    if doc["status"] == "ok":
        _check_measured(doc)


def _finite_positive(doc: dict, f: str) -> Any:
    v = doc[f]
    if not (v > 0 and v != float("inf")):  # False for NaN
        raise FieldError(f, f"{v!r} is not a time or rate a cell can measure (finite, > 0)")
    return v


def _check_measured(doc: dict) -> None:
    """A cell measured ok has a finite positive time and rate, which agree (GB/s = working set
    bytes / time) where it has both, confidence intervals low <= high, a finite positive ratio
    to the baseline and at least one sample."""
    for f in ("time_us", "gbps", "time_lo_us", "time_hi_us", "base_time_us", "ratio"):
        if doc.get(f) is not None:
            _finite_positive(doc, f)
    for f in ("ratio_lo", "ratio_hi"):
        if doc.get(f) is not None and not (doc[f] >= 0 and doc[f] != float("inf")):
            raise FieldError(f, f"{doc[f]!r} is not a ratio (finite, >= 0)")
    if doc.get("time_us") is not None and doc.get("gbps") is not None:
        want = doc["ws_bytes"] / doc["time_us"] / 1e3
        if abs(doc["gbps"] / want - 1) > 1e-4:
            raise FieldError("gbps", f"{doc['gbps']!r} is not ws_bytes / time_us ({want:.7g} GB/s)")
    for lo, hi in (("time_lo_us", "time_hi_us"), ("ratio_lo", "ratio_hi")):
        if doc.get(lo) is not None and doc.get(hi) is not None and doc[lo] > doc[hi]:
            raise FieldError(lo, f"{doc[lo]!r} is above {hi} ({doc[hi]!r})")
    if doc.get("n_samples") is not None and doc["n_samples"] < 1:
        raise FieldError("n_samples", f"{doc['n_samples']} samples behind a measured time")


def _check_config_name(doc: dict) -> None:
    """A candidate of sweeper's kernels names a config of them, and its variant fields are
    the ones its name says (a user's kernel, "ext-...", or a policy's dispatch, "policy-...",
    has no such name)."""
    from sweeper_kernels.external import PREFIX

    from sweeper.runfolder import POLICY_PREFIX

    if doc["config"].startswith((PREFIX, POLICY_PREFIX)):
        return
    fields = _config_fields(doc["dtype"], doc["config"])
    if isinstance(fields, str):
        raise FieldError("config", fields)
    for f, want in fields.items():
        if doc.get(f) is not None and doc[f] != want:
            raise FieldError(f, f"{doc[f]!r} is not the {f} its config {doc['config']} names "
                             f"({want!r})")  # fmt: skip


@functools.lru_cache(maxsize=4096)
def _config_fields(dtype: str, config: str) -> dict | str:
    """The variant fields a config name stands for; the reason, when it names none."""
    from sweeper_kernels import Variant
    from sweeper_kernels.errors import KernelError
    from sweeper_kernels.variants import AXIS_NAMES

    try:
        v = Variant.parse(f"{dtype}-{config}")
    except KernelError as e:
        return f"{config!r} is not a config of sweeper's kernels ({e})"
    return {f: getattr(v, f) for f in AXIS_NAMES}


def check_trial_in_run(doc: dict, manifest: dict) -> None:
    """A trial of a run folder is of that run: its run id, one of its modes and dtypes, and
    in a run of sweeper's kernels (its manifest names their source) a candidate's config one
    of them."""
    if doc["run_id"] != manifest["run_id"]:
        raise FieldError("run_id", f"{doc['run_id']!r} is not the run's ({manifest['run_id']!r})")
    if doc.get("gpu") is not None and manifest.get("gpu") and doc["gpu"] != manifest["gpu"]:
        raise FieldError("gpu", f"{doc['gpu']!r} is not the run's GPU ({manifest['gpu']!r})")
    if doc["mode"] not in manifest["modes"]:
        raise FieldError("mode", f"{doc['mode']!r} is not one of the run's modes "
                         f"({', '.join(manifest['modes'])})")  # fmt: skip
    dtypes = manifest.get("dtypes")
    if isinstance(dtypes, list) and doc["dtype"] not in dtypes:
        raise FieldError("dtype", f"{doc['dtype']!r} is not one of the run's dtypes "
                         f"({', '.join(map(str, dtypes))})")  # fmt: skip
    if doc["role"] in MEASURED and manifest.get("kernel_source"):  # sweeper's kernels
        _check_config_name(doc)


def check_ceilings(path: Path, trials: list[dict], manifest: dict) -> None:
    """No cell measured ok is above a ceiling its run measured (sweeper.analyze.ceilings: the
    L2-resident ceiling, and the copy kernel at the cell's size from COPY_FROM_X_L2 x L2 up,
    as the run checked each cell it recorded): SchemaError naming the line otherwise. The
    device spec's DRAM peak, a figure the run did not measure, is left to the run's check."""
    import dataclasses

    from sweeper.analyze import ceilings

    bounds = dataclasses.replace(ceilings.ceilings_of(manifest), dram_peak_gbps=None)
    copy = {
        (t["mode"], t["dtype"], t["n"]): t["gbps"]
        for t in trials
        if t["role"] == "copy" and t["status"] == "ok"
    }
    for i, t in enumerate(trials, 1):
        if t["status"] != "ok":
            continue
        status, detail = ceilings.check(t, bounds, copy.get((t["mode"], t["dtype"], t["n"])))
        if status != "ok":
            raise SchemaError(
                f"{path}:{i}", "gbps", f"{detail}: a run records such a cell as {status}"
            )


# Significant digits a trial's figures keep (times, rates, ratios, samples): a relative 1e-7,
# far below any spread a cell measures, where a float's 17 digits are mostly noise that xz
# cannot compress (docs/reading-a-report.md, the run folder).
TRIAL_DIGITS = 7


def rounded(value: Any) -> Any:
    """A trial record's value with every float (in lists and dicts too) kept to TRIAL_DIGITS
    significant digits; other values as they are."""
    if isinstance(value, float):
        return float(f"{value:.{TRIAL_DIGITS}g}")
    if isinstance(value, list):
        return [rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    return value


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


def read_trials(
    run_dir: str | os.PathLike, manifest: dict | None = None
) -> tuple[list[dict], bool]:
    """All trial records, and whether a truncated last line (a crash mid-write) was dropped.
    With the run's `manifest`: the log must be the one it recorded, every trial of that run
    (check_trial_in_run) and below its ceilings (check_ceilings), and a run whose manifest
    says it is complete holds trials and no truncated line."""
    run_dir = Path(run_dir)
    got = read_log(run_dir, TRIALS)
    if manifest is not None:
        check_log_record(run_dir, TRIALS, (manifest.get(RECORDS) or {}).get(TRIALS), got)
    complete = manifest is not None and manifest.get("status") == "complete"
    if got is None or not got[1]:
        if complete:
            what = "no trial log" if got is None else f"an empty {got[0].name}"
            raise SchemaError(
                run_dir / MANIFEST,
                "status",
                f"the run is complete but its folder holds {what}; restore the run's trials",
            )
        return [], False
    read = _read_key(got[1], manifest)
    if read not in _READ:  # checked by another process (sweeper.analyze.store._disk_get)?
        kept = _disk_get(read)
        try:
            records = None if kept is None else marshal.loads(kept[0])
        except (ValueError, EOFError, TypeError):  # not what a reading wrote: a miss
            records = None
        if isinstance(records, list):
            _READ[read] = kept
            while len(_READ) > READ_KEEP:
                _READ.popitem(last=False)
            return records, kept[1]
    if read in _READ:  # these bytes were decoded and checked against this manifest before
        _READ.move_to_end(read)
        records, truncated = _READ[read]
        return marshal.loads(records), truncated
    path, text = got[0], text_of(got[0], got[1])
    lines = text.split("\n")
    truncated = False
    if lines and lines[-1] == "":
        lines.pop()
    elif lines:
        # No trailing newline: the last write did not complete.
        if complete:
            raise SchemaError(
                f"{path}:{len(lines)}",
                None,
                "the last line is incomplete, in a run its manifest says is complete; "
                "restore the file",
            )
        lines.pop()
        truncated = True
    out = []
    seen: dict[tuple, int] = {}
    for i, line in enumerate(lines, 1):
        where = f"{path}:{i}"
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as e:
            raise SchemaError(where, None, f"not valid JSON ({e.msg})") from None
        doc = check_header(doc, "trial", where)
        try:
            validate_trial(doc)
            if manifest is not None:
                check_trial_in_run(doc, manifest)
        except FieldError as e:
            raise SchemaError(where, e.field, str(e)) from None
        key = trial_key(doc)
        if key in seen:
            raise SchemaError(
                where,
                "cell_key",
                f"the cell {'|'.join(map(str, key))} is already recorded on line {seen[key]}; "
                "a trial log holds one record per cell: remove the duplicate line",
            )
        seen[key] = i
        out.append(doc)
    if manifest is not None:
        check_ceilings(path, out, manifest)
    _READ[read] = (marshal.dumps(out), truncated)
    while len(_READ) > READ_KEEP:
        _READ.popitem(last=False)
    if len(got[1]) >= DISK_MIN_BYTES:
        _disk_put(read, _READ[read])
    return out, truncated


# Trial logs read and checked in this process, by what their reading depended on: the log's
# bytes, the manifest they were checked against and the kernel source their configs were
# parsed with, each kept as its checked records in marshal's bytes (JSON's values round-trip
# exactly; writing them costs a tenth of copying the records). A report, a notebook or a test
# suite reads the same run many times; each reader gets records of its own. The READ_KEEP
# last read are kept.
READ_KEEP = 3
_READ: collections.OrderedDict[tuple, tuple[bytes, bool]] = collections.OrderedDict()


# The same, across processes: a trial log of at least DISK_MIN_BYTES once read and checked is
# kept in <cache>/trials ($SWEEPER_CACHE, else ~/.cache/sweeper), zlib-compressed marshal
# bytes named by the hash of what the reading depended on (as in memory) and of sweeper's own
# code (every module of sweeper and sweeper_kernels, so a changed check reads every log again),
# the Python version (marshal's format) and MUTANT_UNDER_TEST (a mutation-testing run's mutant
# reads with its own code). A report, a plot, a notebook or `sweeper compare` after a first
# reading decode the log without checking it again, in about a third of the time. The
# DISK_KEEP files used last are kept; a file that cannot be read is a miss.
DISK_MIN_BYTES = 1 << 20
DISK_KEEP = 8


def _disk_path(read: tuple) -> Path:
    import sys

    from sweeper_kernels.build import cache_root

    what = json.dumps([list(read), _code_fingerprint(), sys.version,
                       os.environ.get("MUTANT_UNDER_TEST", "")])  # fmt: skip
    return cache_root() / "trials" / f"{hashlib.sha256(what.encode()).hexdigest()[:32]}.marshal.z"


@functools.cache
def _code_fingerprint() -> str:
    import sweeper_kernels

    import sweeper

    h = hashlib.sha256()
    for pkg in (sweeper, sweeper_kernels):
        base = Path(pkg.__file__).resolve().parent
        for f in sorted(base.rglob("*.py")):
            h.update(str(f.relative_to(base)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _disk_get(read: tuple) -> tuple[bytes, bool] | None:
    import zlib

    path = _disk_path(read)
    try:
        data = zlib.decompress(path.read_bytes())
        os.utime(path)  # used last: kept longest
    except (OSError, zlib.error):
        return None
    return data[1:], data[:1] == b"T"


def _disk_put(read: tuple, kept: tuple[bytes, bool]) -> None:
    import zlib

    path = _disk_path(read)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(zlib.compress((b"T" if kept[1] else b"F") + kept[0], 1))
        os.replace(tmp, path)
        files = sorted(path.parent.glob("*.marshal.z"), key=_mtime, reverse=True)
        for old in files[DISK_KEEP:]:
            old.unlink(missing_ok=True)
    except OSError:  # a cache that cannot be written costs the next reader a check, nothing more
        return


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return 0.0


def _read_key(data: bytes, manifest: dict | None) -> tuple:
    from sweeper_kernels.source import source_fingerprint

    m = None if manifest is None else json.dumps(manifest, sort_keys=True, default=repr)
    return hashlib.sha256(data).hexdigest(), m, source_fingerprint()


def trial_key(doc: dict) -> tuple:
    """The cell a trial record measured: one record per key in a trial log."""
    ident = doc.get("variant_id") or doc["config"]
    return (doc.get("pattern") or "", doc["mode"], doc["dtype"], doc["n"], doc["role"], ident)


def repair_trials(run_dir: str | os.PathLike) -> int:
    """Drop a truncated last line in place (before resuming); return bytes dropped."""
    path = Path(run_dir) / TRIALS
    if not path.exists():
        return 0
    data = file_bytes(path)
    if not data or data.endswith(b"\n"):
        return 0
    keep = data[: data.rfind(b"\n") + 1]
    atomic_write_text(path, text_of(path, keep))
    return len(data) - len(keep)


def trials_to_frame(trials: list[dict]) -> pd.DataFrame:
    import pandas as pd

    df = pd.DataFrame({c: [t.get(c) for t in trials] for c in COLUMNS}, columns=list(COLUMNS))
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


def read_table(
    path: str | os.PathLike, columns: Sequence[str] = (), fix: str = ""
) -> pd.DataFrame | None:
    """A CSV a later stage left in a run folder (selection.csv, verify_timing.csv), or None
    when the stage has not run; SchemaError when it is there but unreadable or lacks one of
    `columns` (the message ends with `fix`: how to rebuild it)."""
    import pandas as pd

    path = Path(path)
    if not path.exists():
        return None
    text = read_text(path)
    try:
        table = pd.read_csv(io.StringIO(text))
    except ValueError as e:
        raise SchemaError(path, None, f"cannot read: {e}") from None
    for col in columns:
        if col not in table.columns:
            raise SchemaError(path, col, f"column missing; {fix}")
    return table


def read_results(run_dir: str | os.PathLike) -> pd.DataFrame:
    import pandas as pd

    path = Path(run_dir) / RESULTS
    text = read_text(path)
    try:
        df = pd.read_csv(io.StringIO(text), keep_default_na=False, na_values=[""])
    except ValueError as e:
        raise SchemaError(path, None, f"cannot read results table: {e}") from None
    missing = [c for c in COLUMNS if c not in df.columns and c not in ADDED_COLUMNS]
    if missing:
        raise SchemaError(path, missing[0], "column missing from the results table")
    return coerce(df)


def load_run(path: str | os.PathLike) -> RunData:
    """Manifest + tidy results of a run folder. The trial log is the record: the table is
    built from it, a results.csv beside it must hold the same rows (SchemaError otherwise),
    and the manifest must name the kernel source its variant ids were made with."""
    path = Path(path)
    manifest = load_manifest(path)
    trials, _ = read_trials(path, manifest)
    check_kernel_source(path, manifest, trials)
    results = trials_to_frame(trials)
    if (path / RESULTS).exists():
        check_results(path, results)
    return RunData(path=path, manifest=manifest, results=results, trials=trials)


def trials_file(run_dir: str | os.PathLike) -> Path:
    """The trial log of a run folder as it is on disk (trials.jsonl, else the archive)."""
    run_dir = Path(run_dir)
    if (run_dir / TRIALS).exists():
        return run_dir / TRIALS
    return log_archive(run_dir, TRIALS) or run_dir / TRIALS


def check_results(run_dir: str | os.PathLike, rebuilt: pd.DataFrame) -> None:
    """A results.csv must be the table of the trial log beside it; SchemaError naming its
    first difference otherwise (it is derived: deleting it is always safe)."""
    import numpy as np

    path = Path(run_dir) / RESULTS
    fix = f"delete it: it is rebuilt from {trials_file(run_dir).name}"
    table = read_results(run_dir)
    if len(table) != len(rebuilt):
        raise SchemaError(
            path, None, f"{len(table)} rows, the trial log has {len(rebuilt)} cells; {fix}"
        )
    order = ["mode", "pattern", "dtype", "n", "role", "variant_id", "config"]
    a = table.sort_values(order, kind="stable").reset_index(drop=True)
    b = rebuilt.sort_values(order, kind="stable").reset_index(drop=True)
    for col, (typ, _) in COLUMNS.items():
        if typ == "str":
            same = (a[col] == b[col]).to_numpy()
        else:
            x = a[col].astype("float64").to_numpy()
            y = b[col].astype("float64").to_numpy()
            same = np.isclose(x, y, rtol=1e-9, atol=0.0) | (np.isnan(x) & np.isnan(y))
        if not same.all():
            raise SchemaError(path, col, f"differs from the trial log; {fix}")


def check_kernel_source(run_dir: Path, manifest: dict, trials: list[dict]) -> None:
    """Every variant id of the trials hashes the source it was measured with: the grid's
    kernel-source fingerprint (`kernel_source`); for a user's kernel (config "ext-..."), the
    file's sha256 the manifest lists under `external`; for a policy's dispatch ("policy-..."),
    its header's sha256 under `dispatch`. SchemaError naming the manifest field when one
    does not."""
    from sweeper_kernels.external import PREFIX
    from sweeper_kernels.variants import id_hash

    from sweeper.runfolder import POLICY_PREFIX

    sources = {
        k["config"]: ("external", k.get("source_sha256", ""))
        for k in manifest.get("external") or []
    }
    sources.update(
        {
            d["config"]: ("dispatch", d.get("header_sha256", ""))
            for d in manifest.get("dispatch") or []
        }
    )
    fingerprint = manifest.get("kernel_source")
    hashes: dict[tuple[str, str], str] = {}
    for t in trials:
        vid = t.get("variant_id") or ""
        if t["role"] not in MEASURED or not vid.startswith(f"{t['dtype']}-{t['config']}-"):
            continue
        if t["config"].startswith((PREFIX, POLICY_PREFIX)):
            kind = "external" if t["config"].startswith(PREFIX) else "dispatch"
            field, source = sources.get(t["config"], (kind, ""))
        else:
            field, source = "kernel_source", fingerprint
            if not source:
                continue
        key = (t["dtype"], t["config"])
        if key not in hashes:
            hashes[key] = id_hash(t["dtype"], t["config"], source)
        if vid[-8:] != hashes[key]:
            what = f"{source[:12]}..." if source else "no source listed"
            raise SchemaError(
                Path(run_dir) / MANIFEST,
                field,
                f"{what} is not the kernel source {vid} in "
                f"{trials_file(run_dir).name} was measured with; restore the run's manifest",
            )


def write_run(path: str | os.PathLike, manifest: dict, results: pd.DataFrame) -> Path:
    """Write a complete run folder from a manifest and a results table (tests, imports); its
    trials are the run's (the manifest's run id); the manifest, written last, records them."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    df = coerce(results).assign(run_id=str(manifest["run_id"]))
    trials_path = path / TRIALS
    lines = []
    for row in df.to_dict(orient="records"):
        trial = {k: (None if isna(v) else _plain(v)) for k, v in row.items()}
        doc = stamp("trial", trial)
        validate_trial(doc)
        lines.append(json.dumps(doc, separators=(",", ":")))
    atomic_write_text(trials_path, "".join(line + "\n" for line in lines))
    write_results(path, df)
    write_manifest(path, manifest, finished=True)
    return path


def isna(v: Any) -> bool:
    """A missing value of a table cell: None, NaN, pandas' NA or NaT."""
    if v is None:
        return True
    if type(v) is float:
        return v != v  # NaN
    if type(v) in (int, str, bool):  # most cells; pd.isna would say False
        return False
    try:
        import pandas as pd

        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _plain(v: Any) -> Any:
    if hasattr(v, "item"):
        return v.item()
    return v


# selection.csv: `sweeper select` writes it (sweeper.analyze.select.write_selection)
SELECTION_COLUMNS = ("mode", "pattern", "dtype", "n", "ws_bytes", "config", "gbps", "ratio")


def read_selection(run_dir: str | os.PathLike, results: pd.DataFrame) -> pd.DataFrame | None:
    """<run>/selection.csv checked against the run's table (built from its trial log): one
    row per measured size, each naming a config measured ok there with its GB/s and ratio.
    None when `sweeper select` has not run; SchemaError naming the column otherwise."""
    import numpy as np

    from sweeper.analyze.select import ok_candidates
    from sweeper.runfolder import SELECTION_CSV

    path = Path(run_dir) / SELECTION_CSV
    fix = "run `sweeper select` to rebuild it from the trial log"
    sel = read_table(path, SELECTION_COLUMNS, fix)
    if sel is None:
        return None
    ok = ok_candidates(results)
    key = ["mode", "pattern", "dtype", "n"]
    try:
        sel = sel.astype({"n": "int64", "ws_bytes": "int64", "gbps": "float64", "ratio": "float64"})
    except (TypeError, ValueError):
        raise SchemaError(path, None, f"a number column holds other text; {fix}") from None
    if sel.duplicated(key).any():
        raise SchemaError(path, "n", f"a size is listed twice; {fix}")
    have = set(map(tuple, sel[key].astype(str).to_numpy()))
    want = set(map(tuple, ok[key].drop_duplicates().astype(str).to_numpy()))
    if have != want:
        raise SchemaError(
            path,
            "n",
            f"{len(have)} sizes, the trial log has {len(want)} with ok candidates; {fix}",
        )
    m = sel.merge(
        ok[[*key, "ws_bytes", "config", "gbps", "ratio"]],
        on=[*key, "config"],
        how="left",
        suffixes=("", "_trial"),
    )
    if m["gbps_trial"].isna().any():
        raise SchemaError(path, "config", f"names a config not measured ok at that size; {fix}")
    for col in ("ws_bytes", "gbps", "ratio"):
        x, y = m[col].to_numpy(dtype=float), m[f"{col}_trial"].to_numpy(dtype=float)
        if not (np.isclose(x, y, rtol=1e-9, atol=0.0) | (np.isnan(x) & np.isnan(y))).all():
            raise SchemaError(path, col, f"differs from the trial log; {fix}")
    check_derived(path, file_bytes(path))  # what the trial log cannot tell: another tie's pick
    return sel
