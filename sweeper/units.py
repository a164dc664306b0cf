"""Byte units and the one way sweeper writes a byte count for people."""

from __future__ import annotations

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
