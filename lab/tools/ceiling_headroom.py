#!/usr/bin/env python3
"""The highest ratio of an ok candidate's GB/s to each ceiling of the physical-limit check.

    python lab/tools/ceiling_headroom.py results/h200/hot-7 results/h200/cold-6 \\
        --ceiling-from results/h200/hot-7

Per run and mode, for each ceiling that `sweeper.analyze.ceilings` applies (the L2-resident ceiling
at every size; the copy kernel at the same size and the DRAM peak from 2 x L2), the ok candidate
cell closest to it: its ratio, dtype, working set and config; and the same over the copy kernel
below 2 x L2, where it bounds nothing. `--ceiling-from RUN` gives runs whose manifest has no
L2-resident ceiling that run's (runs of the same GPU). What honest cells reach is what the
check's margin (`CEILING_MARGIN`) must stay clear of.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from sweeper.analyze.ceilings import COPY, DRAM_PEAK, L2_RESIDENT, ceilings_of, ratios
from sweeper.analyze.store import load_run
from sweeper.errors import SweeperError
from sweeper.units import MiB

IN_BAND = "copy kernel below 2 x L2 (no bound)"
ORDER = (L2_RESIDENT, IN_BAND, COPY, DRAM_PEAK)


def headroom(run: str, borrowed_ceiling: float | None) -> list[str]:
    data = load_run(run)
    m, df = data.manifest, data.results
    c = ceilings_of(m)
    note = ""
    if c.l2_resident_gbps is None and borrowed_ceiling is not None:
        c = replace(c, l2_resident_gbps=borrowed_ceiling)
        note = " (borrowed)"
    copies = {
        (r.mode, r.dtype, int(r.n)): float(r.gbps)
        for r in df[(df.role == "copy") & (df.status == "ok")].itertuples()
    }
    best: dict[tuple[str, int, str], tuple[float, dict, float]] = {}
    for r in df[(df.role == "candidate") & (df.status == "ok")].to_dict(orient="records"):
        copy = copies.get((r["mode"], r["dtype"], int(r["n"])))
        found = ratios(r, c, copy)
        if copy and r["ws_bytes"] < c.copy_from_x_l2 * c.l2_bytes:  # why the bound starts there
            found.append((IN_BAND, copy, r["gbps"] / copy))
        for name, value, ratio in found:
            key = (r["mode"], ORDER.index(name), name)
            if key not in best or ratio > best[key][0]:
                best[key] = (ratio, r, value)
    out = []
    for (mode, _, name), (ratio, r, value) in sorted(best.items()):
        out.append(
            f"{run}  {mode:<11} {name + (note if name == L2_RESIDENT else ''):<36} "
            f"{ratio:6.3f}  {r['dtype']} {r['ws_bytes'] / MiB:8.2f} MiB  {r['config']}  "
            f"({r['gbps']:.0f} / {value:.0f} GB/s)"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="run folders")
    ap.add_argument("--ceiling-from", help="a run whose L2-resident ceiling runs without one use")
    args = ap.parse_args(argv)
    try:
        borrowed = None
        if args.ceiling_from:
            borrowed = ceilings_of(load_run(args.ceiling_from).manifest).l2_resident_gbps
            if borrowed is None:
                raise SweeperError(f"{args.ceiling_from}: its manifest has no L2-resident ceiling")
        for run in args.runs:
            print("\n".join(headroom(run, borrowed)))
    except SweeperError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
