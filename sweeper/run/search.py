"""Search decisions that fit the budget: screening sizes, survivors, refinement points.

Pure functions over measured rows (dicts with the columns of sweeper.analyze.columns), so the runner's
choices can be tested on the CPU and replayed from recorded results.

Comparisons between configs use each cell's ratio to the baseline, which was measured side by
side (ABBA) in the same cell; ratios are robust to drift between cells, raw times are not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sweeper.ops import bytes_per_element

# Screening sizes, as fractions of L2 (working set): three small sizes at different wave
# fractions, one below the band, four inside (L2/2, L2] (with 54 MiB of L2 or more, as on the
# H200 and the 4090, all four lie in the seeds' (32 MiB, L2] band), and two DRAM-bound
# sizes. Small calls are a handful of waves, so one small size can flatter a launch shape
# that happens to fill its last wave there: on the H200 0.125 x L2 is 8 MiB, one exact wave
# of one-vector-per-thread fp32 blocks; 0.03 and 0.18 x L2 sit at other wave fractions.
SCREEN_FRACTIONS = (0.03, 0.125, 0.18, 0.5, 0.6, 0.72, 0.84, 0.96, 1.5, 8.0)
BAND_FRACTIONS = (0.6, 0.72, 0.84, 0.96)  # the screening fractions inside the L2 band


@dataclass(frozen=True)
class SearchParams:
    # survivors: every config whose ratio is within `margin` of the best ratio at some
    # screening size, and the top `min_survivors` there; no cap on how many. In an fp32 hot
    # search on the H200, 59 of the 1664 configs screened (seed and climb) were within 0.5%
    # somewhere, 143 within 1% and 264 within 1.5%, most of them (35, 104 and 196) only at the
    # two DRAM sizes, where configs of every vector width run at the copy's speed (at 458 MiB,
    # 189 of 944 within 1.5%, at 99.6-101.3% of the copy's GB/s) (docs/methodology.md, "Which
    # configs at which sizes")
    margin: float = 0.005
    min_survivors: int = 3
    # the climb: configs within the margin (or top min_survivors) at a screening size have
    # every one-axis neighbour of the extended grid measured there, round after round, until
    # none of those has an unmeasured neighbour (or after max_climb_rounds rounds; the
    # manifest says which). Six one-axis moves reach any config of the extended grid.
    max_climb_rounds: int = 6
    # the climb's moves include trades of two of vector width, unroll and block size at the
    # same bytes in flight per block (sweeper_kernels.Variant.neighbours): without them the
    # climb never reached the 8 B x 4 configs that lead fp32 and bf16 at 35.6 MiB on the H200
    # (lab/h200/pruning-proof)
    climb_trades: bool = True
    # the climb runs at the screening sizes whose working set is at most `climb_max_l2` x L2
    # (None: at all of them). Beyond 2 x L2 (where the plan's dense range ends) a call is
    # DRAM-bound and the seed grid's best already runs at the copy kernel's throughput: in
    # hot-7 the climb at 7.6 x L2 measured 269-541 cells per dtype, at about three times a
    # band cell's GPU time, and raised the best ratio by 0.00-0.34%, inside the seed best's
    # CI in every dtype (docs/methodology.md, "Which configs at which sizes")
    climb_max_l2: float | None = 2.0
    # a survivor within the margin only at screening sizes beyond the L2 is swept and refined
    # only at sizes beyond the L2 (`beyond_l2_only`); the floor and the configs a run keeps
    # are measured everywhere. False: every survivor at every size
    beyond_l2_scope: bool = True
    # the modes the two rules above apply in. Replayed under them from its own cells, hot-7
    # picks the same config, or one tied within the selection's tolerance, at all 407 planned
    # sizes both replays select at, with 28% less GPU work; aw-4 and cold-6 pick configs
    # further apart at 16 and 17 sizes (faster at some, slower by up to 3.7% at others), so
    # after-write and cold search as before (`python lab/tools/scoped_search.py RUN`)
    scope_modes: tuple[str, ...] = ("hot",)
    refine_divisor: int = 256  # bracket crossovers to L2 / refine_divisor or finer
    max_refine_rounds: int = 6
    max_refine_points: int = 48  # per (mode, dtype)
    # Then: sample wherever the policy would need a boundary in a gap wider than the plan
    # resolution (sweeper policy refuses those), at the policy's tolerance.
    max_bracket_rounds: int = 12
    policy_tolerance: float = 0.02
    # The floor (sweeper.analyze.select, "The floor"): the grid's config closest to the
    # baseline's own launch shape is kept through the screening and measured at every size.
    floor: bool = True
    # The confirmation round: at every size, up to `confirm` configs tied with the fastest
    # (at policy_tolerance, fastest first) and the floor are timed a second time, in another
    # order, after the size's first measurement; selection trusts a win only where both
    # measurements show it (sweeper.analyze.select). 0: no confirmation round.
    confirm: int = 4


def search_params(doc: dict) -> SearchParams:
    """The SearchParams a manifest's `search` records, to resume its run by them. A run recorded
    before `climb_trades` existed climbed over one-axis moves only; one recorded with parameters
    this search does not have (e.g. a survivor cap) cannot be continued by it."""
    from dataclasses import fields

    from sweeper.errors import SweeperError

    unknown = sorted(set(doc) - {f.name for f in fields(SearchParams)})
    if unknown:
        raise SweeperError(
            f"the run's search was recorded with parameters this version does not have "
            f"({', '.join(unknown)}); resume it with the version that started it, or start a new run"
        )
    # a run recorded before the floor and the confirmation round had neither, and one recorded
    # before the scoped climb and sweep climbed at every screening size and swept every
    # survivor at every size
    old = {"floor": False, "confirm": 0, "climb_max_l2": None, "beyond_l2_scope": False,
           "scope_modes": ()}  # fmt: skip
    params = {**old, **doc, "climb_trades": climb_trades(doc)}
    return SearchParams(**{**params, "scope_modes": tuple(params["scope_modes"])})


def for_mode(params: SearchParams, mode: str) -> SearchParams:
    """The search of one mode: without the scoped climb and sweep where `mode` is not in
    params.scope_modes."""
    from dataclasses import replace

    if mode in params.scope_modes:
        return params
    return replace(params, climb_max_l2=None, beyond_l2_scope=False)


def climb_trades(doc: dict) -> bool:
    """Whether a manifest's recorded search climbed with trades (what a replay and the report
    need of any run, whatever else its search recorded)."""
    return bool(doc.get("climb_trades", False))


def one_axis(a, b) -> bool:
    """Whether variants a and b differ in exactly one axis."""
    from sweeper_kernels.variants import AXIS_NAMES

    return sum(getattr(a, x) != getattr(b, x) for x in AXIS_NAMES) == 1


def screen_sizes(
    entries: list[dict], l2_bytes: int, fractions: tuple[float, ...] = SCREEN_FRACTIONS
) -> list[int]:
    """Plan entries (their n) nearest to the screening fractions of L2 (or `fractions`, e.g.
    BAND_FRACTIONS), in order, unique."""
    if not entries:
        return []
    out: list[int] = []
    for f in fractions:
        target = f * l2_bytes
        best = min(entries, key=lambda e: abs(e["working_set_bytes"] - target))
        if best["n"] not in out:
            out.append(best["n"])
    return sorted(out, key=lambda n: next(e["working_set_bytes"] for e in entries if e["n"] == n))


def climb_sizes(
    entries: list[dict], screen: Iterable[int], l2_bytes: int, params: SearchParams
) -> set[int]:
    """The screening sizes (n) the climb runs at: those whose working set is at most
    params.climb_max_l2 x L2 (all of them where it is None)."""
    if params.climb_max_l2 is None:
        return set(screen)
    ws = {e["n"]: e["working_set_bytes"] for e in entries}
    return {n for n in screen if ws[n] <= params.climb_max_l2 * l2_bytes}


def beyond_l2_only(rows: list[dict], l2_bytes: int, params: SearchParams) -> set[str]:
    """The configs that come within the margin of the best (or among the top min_survivors)
    at some screening size, and at none whose working set fits the L2: survivors for the
    sizes beyond the L2 only. Empty where params.beyond_l2_scope is off."""
    if not params.beyond_l2_scope:
        return set()
    by_size = _ok_by_size(rows)
    inside: set[str] = set()
    beyond: set[str] = set()
    for group in by_size.values():
        near = {r["config"] for r in _near_best(group, params)}
        (beyond if group[0]["ws_bytes"] > l2_bytes else inside).update(near)
    return beyond - inside


def in_scope(config: str, ws_bytes: int, l2_bytes: int, scoped: Iterable[str]) -> bool:
    """Whether a survivor is measured at a working set: a config of `scoped`
    (beyond_l2_only) only beyond the L2, any other everywhere."""
    return ws_bytes > l2_bytes or config not in scoped


def screened_everywhere(
    rows: Iterable[dict], dtype: str, modes: Iterable[str] | None = None
) -> set[str] | None:
    """The configs a run's screening measured at every screening size of `dtype`, in every
    mode it screened (or in each of `modes`): its seed (a climbed config is measured where
    the climb went). None when the run has screened none of that dtype there."""
    sizes: dict[str, set[int]] = {}
    at: dict[tuple[str, str], set[int]] = {}
    keep = None if modes is None else set(modes)
    for r in rows:
        if keep is not None and r["mode"] not in keep:
            continue
        if r["dtype"] == dtype and r["role"] == "candidate" and r.get("phase") == "screen":
            sizes.setdefault(r["mode"], set()).add(r["n"])
            at.setdefault((r["mode"], r["config"]), set()).add(r["n"])
    if not sizes:
        return None
    configs = {c for _, c in at}
    return {c for c in configs if all(at.get((m, c), set()) >= ns for m, ns in sizes.items())}


def _ok(rows: Iterable[dict], role: str = "candidate") -> list[dict]:
    return [r for r in rows if r.get("role") == role and r.get("status") == "ok"]


def _ok_by_size(rows: Iterable[dict]) -> dict[int, list[dict]]:
    """n -> the ok candidate rows measured at that size."""
    by_size: dict[int, list[dict]] = {}
    for r in _ok(rows):
        by_size.setdefault(r["n"], []).append(r)
    return by_size


def _near_best(group: list[dict], params: SearchParams) -> list[dict]:
    """The rows of one size within the margin of its best ratio, or among its top
    min_survivors, best first."""
    group = sorted(group, key=lambda r: (-r["ratio"], r["config"]))
    best = group[0]["ratio"]
    return [
        r
        for rank, r in enumerate(group)
        if rank < params.min_survivors or r["ratio"] >= best * (1 - params.margin)
    ]


def climb_moves(
    rows: list[dict], neighbours: Callable[[str], list[str]], params: SearchParams
) -> dict[int, list[str]]:
    """n -> configs to measure next at that screening size: every neighbour (one axis
    changed) of a config within the margin of the best there that is not yet measured there.
    Empty when the climb has converged."""
    by_size = _ok_by_size(rows)
    measured: dict[int, set[str]] = {}
    for r in rows:
        if r.get("role") == "candidate":
            measured.setdefault(r["n"], set()).add(r["config"])
    out: dict[int, list[str]] = {}
    for n, group in sorted(by_size.items()):
        new: list[str] = []
        for r in _near_best(group, params):
            for c in neighbours(r["config"]):
                if c not in measured[n] and c not in new:
                    new.append(c)
        if new:
            out[n] = new
    return out


def survivors(rows: list[dict], params: SearchParams) -> tuple[list[str], list[dict]]:
    """Configs worth sweeping over the whole plan, and a record of every config screened out:
    where it came closest to the best and by how much.

    A config survives if at ANY screening size its ratio is within `margin` of the best ratio
    there, or it is among the top `min_survivors` there; there is no cap. A config with a
    non-ok status at any screening size is screened out with that status.
    """
    by_size = _ok_by_size(rows)
    failed: dict[str, dict] = {}
    for r in rows:
        if r.get("role") == "candidate" and r.get("status") != "ok":
            failed.setdefault(r["config"], r)
    keep: set[str] = set()
    closest: dict[str, tuple[float, dict]] = {}  # config -> (shortfall, its row there)
    for group in by_size.values():
        best = max(r["ratio"] for r in group)
        for r in group:
            shortfall = 1 - r["ratio"] / best
            if r["config"] not in closest or shortfall < closest[r["config"]][0]:
                closest[r["config"]] = (shortfall, r)
        keep.update(r["config"] for r in _near_best(group, params))
    configs = {r["config"] for r in rows if r.get("role") == "candidate"}
    measured_at: dict[str, int] = {}
    for r in rows:
        if r.get("role") == "candidate":
            measured_at[r["config"]] = measured_at.get(r["config"], 0) + 1
    pruned = []
    for c in sorted(configs):
        if c in failed:
            f = failed[c]
            keep.discard(c)
            pruned.append(
                {
                    "config": c,
                    "reason": f"failed at screening ({f['status']}: {f.get('status_detail', '')})",
                    "ws_bytes": f.get("ws_bytes"),
                    "shortfall": None,
                    "sizes": measured_at[c],
                }
            )
        elif c not in keep:
            shortfall, r = closest[c]
            pruned.append(
                {
                    "config": c,
                    "reason": f"more than {params.margin:.1%} behind the best at every "
                    "screening size it was measured at",
                    "ws_bytes": r.get("ws_bytes"),
                    "shortfall": round(shortfall, 5),
                    "sizes": measured_at[c],
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
        if at[hi][b]["ws_bytes"] - at[lo][a]["ws_bytes"] <= limit:
            continue
        mid = (lo + hi) // 2 // grain * grain
        if lo < mid < hi:
            out.append(mid)
    return out


# a band on one measured size gets a sample halfway to a neighbour more than this fraction of
# the size away (1.6%): on the H200 a bf16 band at 1.78 MiB stood on one size between
# neighbours 0.18 and 0.22 MiB away, finer than L2/256; three rounds of these samples (1.69
# and 1.89, 1.73 and 1.83, 1.75 and 1.80 MiB) left it on one size with neighbours 0.022 and
# 0.028 MiB away (a hot run's trials replayed through policy_sample_points at 2%; its policy
# serves that size with a neighbour, bands.segment)
SINGLE_STEP = 64


def confirm_set(rows: list[dict], floor: str | None, most: int, tolerance: float) -> list[str]:
    """The configs the confirmation round times again at one size: up to `most` of those tied
    with the fastest there (sweeper.analyze.select.tied_set at `tolerance`, fastest first) and
    the floor, from the size's candidate rows."""
    from sweeper.analyze.select import tied_set

    recs = sorted(_ok(rows), key=lambda r: (-r["gbps"], r["config"]))
    best = {}
    for r in recs:  # one row per config: its fastest
        best.setdefault(r["config"], r)
    recs = list(best.values())
    if not recs:
        return []
    names = [r["config"] for r in tied_set(recs, tolerance)][:most]
    if floor is not None and floor in best and floor not in names:
        names.append(floor)
    return names


def policy_sample_points(
    rows: list[dict],
    l2_bytes: int,
    resolution: int,
    itemsize: int,
    tolerance: float = 0.02,
    divisor: int = 256,
    floors: Sequence[Any] = (),
    ceiling_gbps: float | None = None,
) -> tuple[list[int], list[int]]:
    """New sizes (n) the policy needs, from one minimal segmentation of these rows over
    their tied sets alone (sweeper.analyze.bands.segment over
    sweeper.analyze.select.fracs_of_best), with the targets' `floors` kept in ties as
    `sweeper policy build` keeps them (sweeper.analyze.policy.keep_floors; `rows` then hold
    the copy kernel's rows too, for a floor on % of copy, and `ceiling_gbps` is the run's
    L2-resident ceiling). A floor that narrows a tie can move a boundary into another gap:
    on the H200 the after-write 1.05x floor at fp32 108-120 MiB put one between 139 and
    144.5 MiB, which the sets without floors never bracketed (results/h200/aw-4's first
    `policy build`). `sweeper policy build` also lets a lone winner's size join a
    neighbour's band, which never adds a wide bracket, so its brackets are closed by these
    too; the one-size bands here are those lone winners:

    * brackets: the midpoint of every gap wider than L2/resolution that holds a band
      boundary, so a run refined by these never has its policy refused;
    * singles: beside every band that rests on one measured size, the midpoints to its
      neighbours where they are further apart than L2/divisor or than 1/SINGLE_STEP of the
      larger size (below a few MiB the plan's own steps are finer than L2/divisor). A second
      sample either joins the band (it then rests on two) or shows a neighbour's config
      serves that size too (the band goes).
    """
    from sweeper.analyze.bands import segment
    from sweeper.analyze.select import fracs_and_floor_sizes
    from sweeper.analyze.store import trials_to_frame

    ok = _ok(rows)
    if not ok:
        return [], []
    frame = trials_to_frame(ok + _ok(rows, "confirm"))
    sets, floor_only = fracs_and_floor_sizes(frame, tolerance)
    if floors:
        from sweeper.analyze.policy import keep_floors

        every = trials_to_frame(list(rows))
        for mode in sorted(set(frame["mode"])):
            part = {k: v for k, v in sets.items() if k[0] == mode}
            mine = frame[frame["mode"] == mode]
            sets.update(keep_floors(part, mine, every, mode, floors, ceiling_gbps)[0])
    step = l2_bytes / resolution
    grain = max(1, 16 // itemsize)

    per_element = bytes_per_element(ok[0]["dtype"])  # the rows are one dtype's

    def midpoint(lo_ws: int, hi_ws: int) -> int | None:
        lo_n, hi_n = lo_ws // per_element, hi_ws // per_element
        mid = (lo_n + hi_n) // 2 // grain * grain
        return mid if lo_n < mid < hi_n else None

    brackets: set[int | None] = set()
    singles: set[int | None] = set()
    for key, seq in sets.items():
        sizes = [s for s, _, _ in seq]
        soft = floor_only.get(key, set())
        if soft:  # the floor's sizes join a neighbour's band as `sweeper policy build` lets them
            bands, wide = segment(sizes, [a for _, a, _ in seq], step,
                                  measured=[f for _, _, f in seq], tolerance=[tolerance] * len(seq),
                                  soft=[s in soft for s in sizes])  # fmt: skip
        else:
            bands, wide = segment(sizes, [a for _, a, _ in seq], step)
        for i, j, _ in bands:
            if wide and i > 0 and sizes[i] - sizes[i - 1] > step * (1 + 1e-12):
                brackets.add(midpoint(sizes[i - 1], sizes[i]))
            if i == j and len(bands) > 1:
                for a, b in ((i - 1, i), (i, i + 1)):
                    if a < 0 or b >= len(sizes):
                        continue
                    if sizes[b] - sizes[a] > min(l2_bytes / divisor, sizes[b] / SINGLE_STEP):
                        singles.add(midpoint(sizes[a], sizes[b]))
    return sorted(brackets - {None}), sorted(singles - {None})


def bracket_points(
    rows: list[dict], l2_bytes: int, resolution: int, itemsize: int, tolerance: float = 0.02
) -> list[int]:
    """New sizes (n) where the minimal policy segmentation of these rows puts a boundary in
    a gap wider than L2/resolution: the midpoint of each such gap (policy_sample_points)."""
    return policy_sample_points(rows, l2_bytes, resolution, itemsize, tolerance)[0]


def single_size_band_points(
    rows: list[dict],
    l2_bytes: int,
    resolution: int,
    itemsize: int,
    tolerance: float = 0.02,
    divisor: int = 256,
) -> list[int]:
    """New sizes (n) beside every band of the policy's segmentation that rests on one
    measured size (policy_sample_points)."""
    return policy_sample_points(rows, l2_bytes, resolution, itemsize, tolerance, divisor)[1]
