"""What the scoped climb and sweep (SearchParams.climb_max_l2, beyond_l2_scope) save on a
recorded run, and whether its policy moves: the run replayed from its own cells under the
search as recorded and under the scoped search, side by side.

    python lab/tools/scoped_search.py results/h200/hot-7 --plan sweeps/h200.json --mode hot

The scoped search measures a subset of the cells the unscoped one does (no climb beyond
2 x L2; the survivors of the sizes beyond the L2 only are not swept within it), so a replay of
a run recorded without it answers every cell it asks from the run's own measurements. Prints,
per dtype: the cells of each replay, their GPU work as estimated from the recorded samples
(sweeper.analyze.gpuwork.phase_split, the reference cells left out), and where the two policies pick configs whose ratios
differ (sweeper.analyze.select at each planned size: the same config, configs whose ratios
are within the selection's tie tolerance, or apart). Both replays stop after the sweep of the
planned sizes: the refinement's points follow from the survivors, which the scoped search
changes. A cell the scoped search asks and the run never measured (a seed config that comes
near the best at 8 x L2 only once no climb runs there) is answered as an error row and
counted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from sweeper import api
from sweeper.analyze.gpuwork import phase_split
from sweeper.analyze.select import DEFAULT_TOLERANCE, searched, select
from sweeper.analyze.store import load_manifest, load_run, read_trials
from sweeper.errors import SweeperError
from sweeper.ops import working_set
from sweeper.run.replay import ReplayExecutor

UNRECORDED = "not measured by the recorded run"


class Replay(ReplayExecutor):
    """A replay that answers a cell the recorded run never measured as an error row (the
    search then treats that config as failed at that size) instead of stopping."""

    def measure(self, mode: str, dtype: str, n: int, variant) -> dict:
        try:
            return super().measure(mode, dtype, n, variant)
        except SweeperError:
            return {"mode": mode, "dtype": dtype, "n": n, "ws_bytes": working_set(n, dtype),
                    "role": self.role, "config": variant.config, "variant_id": variant.id,
                    "status": "error", "status_detail": UNRECORDED}  # fmt: skip


def replay(run: str, plan: str, mode: str, dtypes: list[str], out: Path, scoped: bool) -> Path:
    """`run` replayed from its own cells, searching as it recorded (scoped False) or with the
    scoped climb and sweep (True)."""
    ex = Replay(run)
    search = dict(ex.manifest.get("search") or {})
    search.update(climb_max_l2=2.0 if scoped else None, beyond_l2_scope=scoped,
                  scope_modes=[mode] if scoped else [])  # fmt: skip
    # the refinement's points follow from the survivors, which the scoped search changes:
    # both replays stop after the sweep of the planned sizes, whose cells the run recorded
    search.update(max_refine_rounds=0, max_bracket_rounds=0)
    ex.manifest["search"] = search
    return api.run(plan, executor=ex, modes=[mode], dtypes=dtypes, out_root=str(out),
                   run_id="scoped" if scoped else "recorded")  # fmt: skip


def gpu_s(run_dir: Path, mode: str) -> dict[str, tuple[int, float]]:
    """dtype -> (ok candidate cells of `mode`, their estimated GPU seconds: every part of
    sweeper.analyze.gpuwork.phase_split but the reference cells')."""
    manifest = load_manifest(run_dir)
    trials, _ = read_trials(run_dir)
    out: dict[str, tuple[int, float]] = {}
    for d in sorted({t["dtype"] for t in trials}):
        m = phase_split(manifest, [t for t in trials if t["dtype"] == d]).get(mode)
        if m:
            out[d] = (m["ok"], sum(s for p, s in m["parts"].items() if p != "reference"))
    return out


def agreement(pick_a, pick_b, cells, dtype: str, mode: str, tol: float = DEFAULT_TOLERANCE):
    """At every planned size of `dtype`: whether the two selections pick the same config, or
    configs whose ratios (in the unscoped replay's cells, which hold both) are within `tol`
    of each other; the others as (ws, config, scoped config, ratio, scoped ratio)."""
    a = pick_a[(pick_a["dtype"] == dtype) & (pick_a["mode"] == mode)].set_index("ws_bytes")
    b = pick_b[(pick_b["dtype"] == dtype) & (pick_b["mode"] == mode)].set_index("ws_bytes")
    ok = cells[(cells["role"] == "candidate") & (cells["status"] == "ok")]
    ratio = {(int(r.ws_bytes), r.config): float(r.ratio) for r in ok.itertuples()
             if r.dtype == dtype and r.mode == mode}  # fmt: skip
    same = tied = 0
    apart = []
    for ws in sorted(set(a.index) & set(b.index)):
        ca, cb = a.loc[ws, "config"], b.loc[ws, "config"]
        if ca == cb:
            same += 1
            continue
        ra, rb = ratio.get((ws, ca)), ratio.get((ws, cb))
        if ra is not None and rb is not None and abs(rb / ra - 1) <= tol:
            tied += 1
        else:
            apart.append((ws, ca, cb, ra or float("nan"), rb or float("nan")))
    return same, tied, apart


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--plan", required=True)
    ap.add_argument("--mode", default="hot")
    ap.add_argument("--dtypes", default=None, help="default: the run's")
    args = ap.parse_args(argv)
    try:
        recorded = load_run(args.run)
        dtypes = args.dtypes.split(",") if args.dtypes else list(recorded.manifest["dtypes"])
        with tempfile.TemporaryDirectory() as tmp:
            runs = {s: replay(args.run, args.plan, args.mode, dtypes, Path(tmp), s)
                    for s in (False, True)}  # fmt: skip
            work = {s: gpu_s(d, args.mode) for s, d in runs.items()}
            data = {s: load_run(d) for s, d in runs.items()}
            scoped_doc = data[True].manifest.get("beyond_l2_only") or {}
            print(
                "| dtype | cells | GPU s | cells, scoped | GPU s, scoped | saved | "
                "beyond-L2-only survivors | unrecorded cells | picks same / tied / apart |"
            )
            print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")  # fmt: skip
            picks = {s: select(searched(d.results, d.manifest)) for s, d in data.items()}
            total = [0, 0.0, 0, 0.0]
            for d in dtypes:
                (c0, s0), (c1, s1) = work[False][d], work[True][d]
                res = data[True].results
                unrecorded = int(((res["dtype"] == d) & (res["status_detail"] == UNRECORDED)).sum())
                same, tied, apart = agreement(picks[False], picks[True], data[False].results,
                                              d, args.mode)  # fmt: skip
                print(
                    f"| {d} | {c0} | {s0:.1f} | {c1} | {s1:.1f} | {1 - s1 / s0:.1%} | "
                    f"{len(scoped_doc.get(f'{args.mode}/{d}', []))} | {unrecorded} | "
                    f"{same} / {tied} / {len(apart)} |"
                )
                for ws, a, b, ra, rb in apart:
                    print(f"|   | {ws / 2**20:.2f} MiB: {a} {ra:.4f}, scoped {b} {rb:.4f} |")
                total = [total[0] + c0, total[1] + s0, total[2] + c1, total[3] + s1]
            print(
                f"| all | {total[0]} | {total[1]:.1f} | {total[2]} | {total[3]:.1f} | "
                f"{1 - total[3] / total[1]:.1%} | | | |"
            )
    except (SweeperError, OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
