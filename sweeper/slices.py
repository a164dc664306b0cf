"""A slice of a run: the configs (comma-separated names, shell wildcards) and the working-set
range that `sweeper run --configs/--sizes` re-times and `sweeper verify --configs/--sizes/
--dtypes` times again. One home for what a pattern matches."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable

from sweeper.errors import SweeperError
from sweeper.ops import working_set


def config_matches(config: str, patterns: Iterable[str] | None) -> bool:
    """True when no patterns are given or `config` matches one (case-sensitive wildcards)."""
    pats = list(patterns or ())
    return not pats or any(fnmatch.fnmatchcase(config, p) for p in pats)


def slice_sizes(
    sizes: dict[str, list[int]],
    *,
    dtypes: Iterable[str] | None = None,
    configs: Iterable[str] | None = None,
    ws_range: tuple[int, int] | None = None,
    config_of: Callable[[str, int], str] | None = None,
) -> dict[str, list[int]]:
    """The sizes (n, per dtype) inside the slice: of the dtypes named, with a working set in
    `ws_range`, where `config_of(dtype, n)` (the config the policy dispatches to) matches a
    pattern. SweeperError when nothing is left."""
    wanted = set(dtypes) if dtypes else None
    pats = list(configs or ())
    if pats and config_of is None:
        raise ValueError("config patterns need config_of")
    out: dict[str, list[int]] = {}
    for dt, ns in sizes.items():
        if wanted is not None and dt not in wanted:
            continue
        keep = [
            n
            for n in ns
            if (ws_range is None or ws_range[0] <= working_set(n, dt) <= ws_range[1])
            and (not pats or config_matches(config_of(dt, n), pats))  # type: ignore[misc]
        ]
        if keep:
            out[dt] = keep
    if not out:
        asked = [
            f"{flag} {val}"
            for flag, val in (
                ("--dtypes", ",".join(sorted(wanted)) if wanted else None),
                ("--configs", ",".join(pats) if pats else None),
                ("--sizes", f"{ws_range[0]}:{ws_range[1]} B" if ws_range else None),
            )
            if val
        ]
        raise SweeperError(f"{'; '.join(asked)}: the run measured no size in that slice")
    return out
