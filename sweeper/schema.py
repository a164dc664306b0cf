"""Versioned files: every file sweeper writes carries `kind` and `schema_version`.

All reads go through `load()`, which rejects other kinds and newer versions, runs
registered migrations for older ones, and names the file and field on any error.
Writes are atomic (temp file + rename). Nothing read from disk is ever eval()'d.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sweeper.errors import FieldError, SchemaError

# kind -> current schema version. Bump on any incompatible change and add a migration.
VERSIONS: dict[str, int] = {
    "plan": 1,
    "manifest": 2,
    "trial": 1,
    "pruned": 1,
    "selection": 1,
    "policy": 1,
    "merged-policy": 1,
}

# (kind, from_version) -> function(dict) -> dict at from_version + 1
MIGRATIONS: dict[tuple[str, int], Callable[[dict], dict]] = {
    # manifest 2 names the file of pruned configs (pruned.jsonl) in "pruned"; 1 held the list
    # itself, which is read as it is
    ("manifest", 1): lambda doc: doc,
}

Validator = Callable[[dict], None]


def canonical_json(obj: Any, allow_nan: bool = False) -> str:
    """Stable JSON text (sorted keys, no spaces): what hashes are computed over."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=allow_nan)


def content_hash(obj: Any, length: int = 12) -> str:
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()[:length]


def stamp(kind: str, payload: dict) -> dict:
    """Return payload with kind and schema_version first."""
    if kind not in VERSIONS:
        raise KeyError(f"unknown file kind {kind!r}")
    out = {"kind": kind, "schema_version": VERSIONS[kind]}
    out.update({k: v for k, v in payload.items() if k not in ("kind", "schema_version")})
    return out


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    from sweeper.files import file_to_write

    path = file_to_write(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp creates 0600 files: give the file the usual permissions under the umask.
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def dump(kind: str, payload: dict, path: str | os.PathLike) -> Path:
    """Atomically write a versioned JSON file of `kind`."""
    doc = stamp(kind, payload)
    return atomic_write_text(path, json.dumps(doc, indent=1, allow_nan=False) + "\n")


def check_header(doc: Any, kind: str, path: object) -> dict:
    """Check kind/version of an already parsed document; migrate older versions."""
    if not isinstance(doc, dict):
        raise SchemaError(path, None, f"expected a JSON object of kind '{kind}'")
    got_kind = doc.get("kind")
    if got_kind != kind:
        raise SchemaError(path, "kind", f"expected '{kind}', found {got_kind!r}")
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise SchemaError(path, "schema_version", f"must be an integer, found {version!r}")
    current = VERSIONS[kind]
    if version > current:
        raise SchemaError(
            path,
            "schema_version",
            f"version {version} is newer than this sweeper understands ({current}); "
            "upgrade sweeper",
        )
    while version < current:
        step = MIGRATIONS.get((kind, version))
        if step is None:
            raise SchemaError(
                path,
                "schema_version",
                f"version {version} is too old to read (current {current}); regenerate the file",
            )
        doc = step(dict(doc))
        version += 1
        doc["schema_version"] = version
    return doc


def load(path: str | os.PathLike, kind: str, validate: Validator | None = None) -> dict:
    """Read a versioned JSON file; raise SchemaError naming file and field on any problem."""
    from sweeper.files import read_json

    path = Path(path)
    doc = check_header(read_json(path), kind, path)
    if validate is not None:
        try:
            validate(doc)
        except FieldError as e:
            raise SchemaError(path, e.field, str(e)) from None
    return doc


# Small validation helpers shared by the file models.


def require(doc: dict, field: str, typ: type | tuple[type, ...], where: str = "") -> Any:
    name = f"{where}{field}"
    if field not in doc:
        raise FieldError(name, "missing")
    value = doc[field]
    if isinstance(value, bool) and typ in (int, float, (int, float)):
        raise FieldError(name, f"expected {getattr(typ, '__name__', typ)}, found a boolean")
    if not isinstance(value, typ):
        tname = typ.__name__ if isinstance(typ, type) else "/".join(t.__name__ for t in typ)
        raise FieldError(name, f"expected {tname}, found {type(value).__name__}")
    return value
