"""Reading what is on disk, and checking the kind of a path before writing to it: one home for
the failures a damaged or misdirected file can give (a folder where a file is expected and the
reverse, bytes that are not UTF-8, a cut or corrupt xz/gzip archive, text that is not JSON).
Each becomes a SchemaError (a file that is there but unreadable) or a SweeperError (a path of
the wrong kind) whose one line names the file; no reader lets an OSError, UnicodeDecodeError or
LZMAError through."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from sweeper.errors import SchemaError, SweeperError

ARCHIVE_KINDS = {".xz": "xz", ".gz": "gzip"}  # an archive's suffix -> its format


def file_bytes(path: str | os.PathLike) -> bytes:
    """The bytes of the file `path`; SchemaError for a folder, a missing or unreadable file."""
    path = Path(path)
    if path.is_dir():
        raise SchemaError(path, None, "is a folder, not a file")
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise SchemaError(path, None, "file not found") from None
    except OSError as e:
        raise SchemaError(path, None, f"cannot read: {e.strerror or e}") from None


def text_of(path: str | os.PathLike, data: bytes) -> str:
    """`data` (the contents of `path`) as UTF-8 text; SchemaError naming the line and byte
    where it is not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise SchemaError(
            path,
            None,
            f"not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}, line {line}); "
            "restore the file",
        ) from None


def read_text(path: str | os.PathLike) -> str:
    """The UTF-8 text of the file `path` (file_bytes, then text_of)."""
    return text_of(path, file_bytes(path))


def read_json(path: str | os.PathLike) -> Any:
    """The JSON document in the file `path`; SchemaError naming the line of a syntax error."""
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SchemaError(path, None, f"not valid JSON (line {e.lineno}: {e.msg})") from None


def unpack(path: str | os.PathLike, data: bytes | None = None) -> bytes:
    """The decompressed contents of the archive `path` (xz or gzip, by its suffix; its bytes
    `data` when already read); SchemaError for an archive that is cut short or corrupt."""
    import gzip
    import lzma
    import zlib

    path = Path(path)
    kind = ARCHIVE_KINDS.get(path.suffix)
    if kind is None:
        raise SchemaError(path, None, f"not an archive sweeper reads (.xz or .gz): {path.name}")
    if data is None:
        data = file_bytes(path)
    if not data:  # gzip reads an empty file as an empty archive; `gzip -d` refuses it
        raise SchemaError(path, None, f"not a complete {kind} archive (empty); restore the file")
    try:
        if kind == "xz":
            # lzma.decompress reads every stream to its end and raises on a cut one
            return lzma.decompress(data)
        return gzip.decompress(data)
    except (lzma.LZMAError, EOFError, gzip.BadGzipFile, zlib.error, OSError) as e:
        reason = str(e) or type(e).__name__
        if isinstance(e, EOFError):
            reason = "it ends before its last block"
        raise SchemaError(
            path, None, f"not a complete {kind} archive ({reason}); restore the file"
        ) from None


def folder_to_write(path: str | os.PathLike, what: str = "folder") -> Path:
    """`path` as a folder a command may create or write into: SweeperError when it, or a
    folder above it, is a file (mkdir would fail half way)."""
    path = Path(path)
    for p in (path, *path.parents):
        if p.exists() and not p.is_dir():
            where = "" if p == path else f" ({p} is a file)"
            raise SweeperError(
                f"{path}: the {what} to write into is not a folder{where}; name a folder"
            )
        if p.is_dir():
            break
    return path


def file_to_write(path: str | os.PathLike) -> Path:
    """`path` as a file a command may (re)write: SweeperError when it is a folder, or when a
    folder above it is a file."""
    path = Path(path)
    if path.is_dir():
        raise SweeperError(f"{path} is a folder; name the file to write (e.g. {path}/<name>)")
    folder_to_write(path.parent)
    return path
