"""Search decisions that fit the budget: screening sizes, survivors, refinement points.

Pure functions over measured rows (dicts with the columns of sweeper.analyze.columns), so the runner's
choices can be tested on the CPU and replayed from recorded results.

Comparisons between configs use each cell's ratio to the baseline, which was measured side by
side (ABBA) in the same cell; ratios are robust to drift between cells, raw times are not.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# Screening sizes, as fractions of L2 (working set): three deep inside L2, the band below and
# above the boundary, and two DRAM-bound sizes. Small calls are a handful of waves, so one
# small size can flatter a launch shape that happens to fill its last wave there: on the H200
# 0.125 x L2 is 8 MiB, one exact wave of one-vector-per-thread fp32 blocks; at
# 8.5-13 MiB, where that shape lost to torch, only the survivors of that screen were measured.
# 0.03 and 0.18 x L2 sit at other wave fractions.
SCREEN_FRACTIONS = (0.03, 0.125, 0.18, 0.5, 0.75, 1.0, 1.5, 8.0)


@dataclass(frozen=True)
class SearchParams:
    tolerance: float = 0.03  # survivors: within this of the best ratio at some screening size
    min_survivors: int = 3  # always keep at least the top-k at every screening size
    max_survivors: int = 12  # then keep at most this many (closest to the best first)
    refine_divisor: int = 256  # bracket crossovers to L2 / refine_divisor or finer
    max_refine_rounds: int = 6
    max_refine_points: int = 48  # per (mode, dtype)
    # Then: sample wherever the policy would need a boundary in a gap wider than the plan
    # resolution (sweeper policy refuses those), at the policy's tolerance.
    max_bracket_rounds: int = 6
    policy_tolerance: float = 0.02


def screen_sizes(entries: list[dict], l2_bytes: int) -> list[int]:
    """Plan entries (their n) nearest to the screening fractions of L2, in order, unique."""
    if not entries:
        return []
    out: list[int] = []
    for f in SCREEN_FRACTIONS:
        target = f * l2_bytes
        best = min(entries, key=lambda e: abs(e["working_set_bytes"] - target))
        if best["n"] not in out:
            out.append(best["n"])
    return sorted(out, key=lambda n: next(e["working_set_bytes"] for e in entries if e["n"] == n))


def _ok(rows: Iterable[dict]) -> list[dict]:
    return [r for r in rows if r.get("role") == "candidate" and r.get("status") == "ok"]


def survivors(rows: list[dict], params: SearchParams) -> tuple[list[str], list[dict]]:
    """Configs worth sweeping over the whole plan, and a record of what was pruned and why.

    A config survives if at ANY screening size its ratio is within `tolerance` of the best
    ratio there, or its ratio CI overlaps the best's, or it is among the top `min_survivors`.
    A config with a non-ok status at any screening size is pruned with that status.
    """
    by_size: dict[int, list[dict]] = {}
    for r in _ok(rows):
        by_size.setdefault(r["n"], []).append(r)
    failed: dict[str, str] = {}
    for r in rows:
        if r.get("role") == "candidate" and r.get("status") != "ok":
            failed.setdefault(r["config"], f"{r['status']}: {r.get('status_detail', '')}")
    keep: set[str] = set()
    margins: dict[str, float] = {}
    for _n, group in by_size.items():
        group = sorted(group, key=lambda r: -r["ratio"])
        best = group[0]
        for rank, r in enumerate(group):
            margin = 1 - r["ratio"] / best["ratio"]
            margins[r["config"]] = min(margins.get(r["config"], 1.0), margin)
            overlaps = r.get("ratio_hi", r["ratio"]) >= best.get("ratio_lo", best["ratio"])
            if rank < params.min_survivors or margin <= params.tolerance or overlaps:
                keep.add(r["config"])
    configs = {r["config"] for r in rows if r.get("role") == "candidate"}
    # Cap: the winner at every screening size always stays; then the closest to the best.
    winners_ = {max(g, key=lambda r: r["ratio"])["config"] for g in by_size.values()}
    ranked = sorted(keep - winners_, key=lambda c: (margins.get(c, 1.0), c))
    capped = set(ranked[max(0, params.max_survivors - len(winners_)) :])
    keep -= capped
    pruned = []
    for c in sorted(configs):
        if c in failed:
            pruned.append({"config": c, "reason": f"failed at screening ({failed[c]})"})
            keep.discard(c)
        elif c in capped:
            pruned.append(
                {
                    "config": c,
                    "reason": (
                        f"within noise at a screening size but beyond the {params.max_survivors} "
                        f"closest to the best (closest: {margins.get(c, 1.0):.1%} behind)"
                    ),
                }
            )
        elif c not in keep:
            pruned.append(
                {
                    "config": c,
                    "reason": (
                        f"slower than the best by more than {params.tolerance:.0%} and outside "
                        f"its CI at every screening size (closest: {margins.get(c, 1.0):.1%})"
                    ),
                }
            )
    return sorted(keep), pruned


def winners(rows: list[dict]) -> dict[int, dict]:
    """n -> the best ok candidate row (highest ratio to the baseline) at that n."""
    best: dict[int, dict] = {}
    for r in _ok(rows):
        if r["n"] not in best or r["ratio"] > best[r["n"]]["ratio"]:
            best[r["n"]] = r
    return best


def _beats(rows_at: dict[str, dict], a: str, b: str) -> bool:
    """a beats b at this size by more than the noise (CIs disjoint)."""
    ra, rb = rows_at.get(a), rows_at.get(b)
    if ra is None or rb is None:
        return False
    return ra.get("ratio_lo", ra["ratio"]) > rb.get("ratio_hi", rb["ratio"])


def refinement_points(
    rows: list[dict], l2_bytes: int, itemsize: int, params: SearchParams
) -> list[int]:
    """New sizes (n) between neighbours whose winners differ significantly.

    Two neighbouring sizes need a point between them when the winner changes AND at one of the
    two sizes its winner beats the other size's winner by more than the noise (a real
    crossover, not a tie), and their working sets are further apart than L2/refine_divisor.
    """
    ok = _ok(rows)
    at: dict[int, dict[str, dict]] = {}
    for r in ok:
        at.setdefault(r["n"], {})[r["config"]] = r
    win = winners(ok)
    ns = sorted(win)
    grain = max(1, 16 // itemsize)  # n multiple of this keeps 16-byte multiples
    limit = l2_bytes / params.refine_divisor
    out = []
    for lo, hi in zip(ns, ns[1:], strict=False):
        a, b = win[lo]["config"], win[hi]["config"]
        if a == b:
            continue
        if not (_beats(at[lo], a, b) or _beats(at[hi], b, a)):
            continue
        if (hi - lo) * 2 * itemsize <= limit:
            continue
        mid = (lo + hi) // 2 // grain * grain
        if lo < mid < hi:
            out.append(mid)
    return out


def bracket_points(
    rows: list[dict], l2_bytes: int, resolution: int, itemsize: int, tolerance: float = 0.02
) -> list[int]:
    """New sizes (n) where the minimal policy segmentation of these rows puts a boundary in
    a gap wider than L2/resolution: the midpoint of each such gap.

    The same segmentation `sweeper policy build` runs (sweeper.analyze.policy.segment over
    sweeper.analyze.select.acceptable_sets), so a run refined by this never has its policy refused.
    """
    from sweeper.analyze.bands import segment
    from sweeper.analyze.select import acceptable_sets
    from sweeper.analyze.store import trials_to_frame

    ok = [r for r in rows if r.get("role") == "candidate" and r.get("status") == "ok"]
    if not ok:
        return []
    df = trials_to_frame(ok)
    step = l2_bytes / resolution
    grain = max(1, 16 // itemsize)
    out: set[int] = set()
    for seq in acceptable_sets(df, tolerance).values():
        sizes = [s for s, _ in seq]
        bands, wide = segment(sizes, [a for _, a in seq], step)
        if not wide:
            continue
        for i, _, _ in bands:
            if i > 0 and sizes[i] - sizes[i - 1] > step * (1 + 1e-12):
                lo_n, hi_n = sizes[i - 1] // (2 * itemsize), sizes[i] // (2 * itemsize)
                mid = (lo_n + hi_n) // 2 // grain * grain
                if lo_n < mid < hi_n:
                    out.add(mid)
    return sorted(out)
