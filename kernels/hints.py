"""The cache-hint table: one entry per load or store hint, and everything else derives from it.

A hint is the PTX cache operator (or eviction priority) a kernel puts on its global loads or
stores. Each entry gives:

  * `name`: the hint as a Variant spells it (`load_hint="L2::evict_last:0.5"`);
  * `token`: how config names and ids spell it (`ld.L2el50`): no "::", shell- and file-safe;
  * `qualifier`: the PTX text inserted after `ld.global` / `st.global` (`.cs`, `.L2::cache_hint`);
  * `policy`: for loads that take an L2 cache policy operand, the `createpolicy.fractional`
    priorities and fraction (`createpolicy.fractional.L2::evict_last.L2::evict_first.b64 p, 0.5`:
    that fraction of the lines gets evict_last, the rest evict_first).

The intrinsics (kernels/intrinsics.py), the variant ids and their parser (kernels/variants.py),
the PTX checks (kernels/ptxcheck.py) and the exported header (sweeper/export/cuda.py) all read
this table. Adding a hint is adding one entry (docs/hints-and-grids.md).

PTX ISA: `ld{.ss}{.cop}{.vec}.type` with .cop in {.ca,.cg,.cs,.lu,.cv}; `ld.global.nc`;
`ld{.ss}{.level1::eviction_priority}` with L1::no_allocate; on sm_80/sm_90 an L2 eviction
priority on 32/64/128-bit loads only through a cache policy (`createpolicy` +
`ld.global.L2::cache_hint ... [a], p`; ptxas accepts `ld.global.L2::evict_last` only on 256-bit
loads); `st{.ss}{.cop}{.vec}.type` with .cop in {.wb,.cg,.cs,.wt}.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from sweeper_kernels.errors import KernelError

KINDS = ("load", "store")


@dataclass(frozen=True)
class Hint:
    kind: str  # "load" or "store"
    name: str
    token: str
    qualifier: str
    policy: tuple[str, str] | None = None  # (createpolicy priorities, fraction)


_TABLE: tuple[Hint, ...] = (
    Hint("load", "default", "def", ""),
    Hint("load", "cs", "cs", ".cs"),
    Hint("load", "cg", "cg", ".cg"),
    Hint("load", "lu", "lu", ".lu"),
    Hint("load", "nc", "nc", ".nc"),
    Hint("load", "L2::evict_first", "L2ef", ".L2::cache_hint", ("L2::evict_first", "1.0")),
    Hint("load", "L2::evict_last", "L2el", ".L2::cache_hint", ("L2::evict_last", "1.0")),
    # fractional: a hot input larger than what L2 keeps stays partly resident, not thrashing
    Hint(
        "load", "L2::evict_last:0.75", "L2el75", ".L2::cache_hint",
        ("L2::evict_last.L2::evict_first", "0.75"),
    ),
    Hint(
        "load", "L2::evict_last:0.5", "L2el50", ".L2::cache_hint",
        ("L2::evict_last.L2::evict_first", "0.5"),
    ),
    Hint("load", "L1::no_allocate", "L1na", ".L1::no_allocate"),
    Hint("store", "default", "def", ""),
    Hint("store", "cs", "cs", ".cs"),
    Hint("store", "cg", "cg", ".cg"),
    Hint("store", "wt", "wt", ".wt"),
)  # fmt: skip

_HINTS: dict[tuple[str, str], Hint] = {(h.kind, h.name): h for h in _TABLE}


def names(kind: str) -> tuple[str, ...]:
    """Every hint of `kind` ("load" or "store"), in table order."""
    return tuple(name for k, name in _HINTS if k == kind)


def get(kind: str, name: str) -> Hint:
    """The entry for hint `name` of `kind`; KernelError if there is none."""
    try:
        return _HINTS[kind, name]
    except KeyError:
        raise KernelError(f"{kind}_hint={name!r} is not one of {list(names(kind))}") from None


def from_token(kind: str, token: str) -> Hint | None:
    """The entry whose id token is `token` (None if no hint of `kind` has it)."""
    return next((h for (k, _), h in _HINTS.items() if k == kind and h.token == token), None)


def tokens(kind: str) -> list[str]:
    return sorted(h.token for (k, _), h in _HINTS.items() if k == kind)


def createpolicy(name: str, dst: str) -> str:
    """The `createpolicy` statement of a load hint with a policy, writing register `dst`."""
    priorities, fraction = get("load", name).policy
    return f"createpolicy.fractional.{priorities}.b64 {dst}, {fraction};"


def register(hint: Hint) -> None:
    """Add a hint to the table at run time (the table in this file is the normal place)."""
    if hint.kind not in KINDS:
        raise KernelError(f"hint kind {hint.kind!r}: use one of {KINDS}")
    if (hint.kind, hint.name) in _HINTS or from_token(hint.kind, hint.token):
        raise KernelError(f"a {hint.kind} hint named {hint.name!r} or token {hint.token!r} exists")
    _HINTS[hint.kind, hint.name] = hint


@contextlib.contextmanager
def registered(hint: Hint) -> Iterator[Hint]:
    """`register(hint)` for the duration of a with-block (tests)."""
    register(hint)
    try:
        yield hint
    finally:
        del _HINTS[hint.kind, hint.name]
