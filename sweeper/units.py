"""Byte units and the one way sweeper writes a byte count for people."""

from __future__ import annotations

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30


def fmt_bytes(b: float | None, none: str = "-") -> str:
    """A byte count for people: '4.125 MiB', '72 MiB', '1.5 GiB', '512 B' (4 significant
    digits); `none` for None or NaN (e.g. "inf" for an open band edge)."""
    if b is None or b != b:
        return none
    for unit, div in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if b >= div:
            return f"{b / div:.4g} {unit}"
    return f"{int(b)} B"


def fmt_mib(nbytes: float, digits: int = 4) -> str:
    """A byte count as a MiB label ('72', '33.6', '0.5'); KiB below 1/16 MiB."""
    mib = nbytes / MiB
    if mib >= 10**digits:
        return f"{mib:.0f}"
    if mib >= 1 / 16:
        return f"{mib:.{digits}g}"
    return f"{nbytes / 1024:.{digits}g} KiB"
