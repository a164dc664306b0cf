"""A run over several GPUs (sweeper.run.pool): does one of them read the baseline apart?

Each size is measured on one GPU, and every ratio pairs a candidate with the baseline on that
GPU, so a GPU that runs slower moves neither its ratios nor the selection. Its baseline GB/s
shows it, though: each baseline cell is compared with the baseline cells of the nearest sizes
on either side that another GPU measured (their geometric mean), in the same mode and dtype.
A GPU whose median reads below 1 by more than the run's noise is slower than the others
(clocks, power, thermals, a neighbour's load); one whose spread is wide varied during the run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

NEAREST = 3  # how many sizes on each side are looked at for one measured on another GPU


def baseline_spread(
    trials: Sequence[Mapping[str, Any]], manifest: Mapping[str, Any]
) -> list[dict] | None:
    """Per device of the run (manifest `devices`): the number of baseline cells compared and
    the median, 10th and 90th percentile of their GB/s over their neighbours' on other
    devices. None for a run on one GPU."""
    import numpy as np

    devices = manifest.get("devices") or []
    if len(devices) < 2:
        return None
    groups: dict[tuple, list[tuple[int, int, float]]] = {}
    for t in trials:
        if t.get("role") != "baseline" or t.get("status") != "ok" or t.get("device") is None:
            continue
        gbps = t.get("gbps")
        if gbps is None or not gbps > 0:
            continue
        groups.setdefault((t["mode"], t["dtype"]), []).append((int(t["n"]), int(t["device"]), gbps))
    ratios: dict[int, list[float]] = {i: [] for i in range(len(devices))}
    for cells in groups.values():
        cells.sort()
        for i, (_, dev, gbps) in enumerate(cells):
            beside = []
            for step in (-1, 1):
                j = i + step
                while 0 <= j < len(cells) and abs(j - i) <= NEAREST:
                    if cells[j][1] != dev:
                        beside.append(cells[j][2])
                        break
                    j += step
            if beside:
                ref = math.exp(sum(math.log(g) for g in beside) / len(beside))
                ratios.setdefault(dev, []).append(gbps / ref)
    out = []
    for dev, rs in sorted(ratios.items()):
        d = devices[dev] if dev < len(devices) else {}
        if rs:
            p10, med, p90 = (float(x) for x in np.quantile(rs, [0.1, 0.5, 0.9]))
        else:
            p10 = med = p90 = float("nan")
        out.append(
            {"device": dev, "name": d.get("name", "?"), "cells": len(rs),
             "median": med, "p10": p10, "p90": p90}
        )  # fmt: skip
    return out


def spread_lines(trials: Sequence[Mapping[str, Any]], manifest: Mapping[str, Any]) -> list[str]:
    """The report's table of baseline_spread (nothing for a run on one GPU)."""
    rows = baseline_spread(trials, manifest)
    if rows is None:
        return []
    lines = [
        "",
        f"Measured on {len(rows)} GPUs, each size on one of them (its ratios paired there). "
        "The baseline on each GPU against the nearest sizes another GPU measured (1.00: the "
        "same speed):",
        "",
        "| GPU | device | baseline cells | median | p10 - p90 |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['device']} | {r['name']} | {r['cells']} | {r['median']:.3f} | "
            f"{r['p10']:.3f} - {r['p90']:.3f} |"
        )
    return lines
