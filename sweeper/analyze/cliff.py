"""The cliff of a user's kernel in an audit run: where it falls below the baseline, by how
much, whether an edge of its own launch rule lies in a stretch the run did not sample, and
where it falls below a shipped policy's dispatch timed in the same run (sweeper.run.dispatch):
there the comparison is the quotient of the two ratios to the baseline at each size both
measured, each ratio timed side by side with the baseline.

Pure: reads the results table and the manifest (no GPU), so `sweeper report` and tests can
rebuild it from a run folder.
"""

from __future__ import annotations

from typing import Any

from sweeper.dtypes import ITEMSIZE
from sweeper.runfolder import baseline_of, dispatch_configs
from sweeper.units import MiB
from sweeper.units import fmt_bytes as _fmt

BAND_LO = 32 * MiB  # the (32 MiB, L2] band: the seeds' v2 rule switched loads at 32 MiB
DEFAULT_THREADS_PER_SM = 2048  # where a manifest does not record the device's


def below_runs(rows: list[dict]) -> list[tuple[int, int, float]]:
    """Runs of consecutive measured sizes with ratio < 1: (first ws, last ws, worst ratio)."""
    out: list[tuple[int, int, float]] = []
    cur: list[dict] = []
    for r in [*rows, None]:
        if r is not None and r["ratio"] < 1:
            cur.append(r)
            continue
        if cur:
            out.append((cur[0]["ws_bytes"], cur[-1]["ws_bytes"], min(c["ratio"] for c in cur)))
            cur = []
    return out


def edge_gaps(edges: list[tuple[int, str]], sizes: list[int], step: float) -> list[dict[str, Any]]:
    """For each launch-rule edge (ws bytes, what): the measured sizes either side and whether
    they are further apart than `step` (the plan resolution): an unsampled gap."""
    out = []
    for ws, what in edges:
        below = [s for s in sizes if s <= ws]
        above = [s for s in sizes if s >= ws]
        lo = max(below) if below else None
        hi = min(above) if above else None
        gap = lo is None or hi is None or (hi - lo) > step * (1 + 1e-12)
        out.append({"ws_bytes": ws, "what": what, "lo": lo, "hi": hi, "unsampled": gap})
    return out


def cliff(results, manifest: dict) -> list[dict[str, Any]]:
    """Per (mode, dtype, user's kernel): ok sizes, worst ratio overall and in (32 MiB, L2],
    the runs below the baseline and the launch-rule edges with their sampling."""
    from sweeper_kernels.external import launch_edges

    kernels = {k["config"]: k for k in manifest.get("external") or []}
    if not kernels or results.empty:
        return []
    device = manifest.get("device") or {}
    plan = manifest.get("plan") or {}
    l2 = int(plan.get("l2_bytes") or device.get("l2_bytes") or 0)
    step = l2 / int(plan.get("resolution") or 32) if l2 else 0.0
    sms = int(device.get("sm_count") or 0)
    threads = int(device.get("max_threads_per_sm") or DEFAULT_THREADS_PER_SM)
    cand = results[(results["role"] == "candidate") & results["config"].isin(list(kernels))]
    pol = results[
        (results["role"] == "candidate")
        & results["config"].isin(list(dispatch_configs(manifest)))
        & (results["status"] == "ok")
    ]
    out = []
    for (mode, dtype, config), g in cand.groupby(["mode", "dtype", "config"], sort=True):
        ok = g[g["status"] == "ok"].sort_values("ws_bytes")
        rows = ok[["ws_bytes", "ratio"]].to_dict("records")
        k = kernels[config]
        band = [r for r in rows if BAND_LO < r["ws_bytes"] <= l2]
        edges = (
            launch_edges(k["grid"], int(k["block"]), ITEMSIZE[dtype], sms, threads) if sms else []
        )
        out.append(
            {
                "mode": mode,
                "dtype": dtype,
                "config": config,
                "sizes": len(rows),
                "not_ok": int((g["status"] != "ok").sum()),
                "worst": min(rows, key=lambda r: r["ratio"]) if rows else None,
                "worst_band": min(band, key=lambda r: r["ratio"]) if band else None,
                "below": below_runs(rows),
                "edges": edge_gaps(edges, [r["ws_bytes"] for r in rows], step),
                "l2_bytes": l2,
                "vs_policy": _vs_policies(rows, pol, mode, dtype, l2),
            }
        )
    return out


def _vs_policies(rows: list[dict], pol, mode: str, dtype: str, l2: int) -> list[dict[str, Any]]:
    """Per policy timed at this mode and dtype: the user's ratio over the policy's at each
    size both measured ok; the worst overall and in (32 MiB, L2], and the runs below 1."""
    out = []
    mine = {r["ws_bytes"]: r["ratio"] for r in rows}
    here = pol[(pol["mode"] == mode) & (pol["dtype"] == dtype)]
    for config, g in here.groupby("config", sort=True):
        theirs = dict(zip(g["ws_bytes"], g["ratio"], strict=True))
        rel = [
            {"ws_bytes": ws, "ratio": mine[ws] / theirs[ws]}
            for ws in sorted(set(mine) & set(theirs))
        ]
        if not rel:
            continue
        band = [r for r in rel if BAND_LO < r["ws_bytes"] <= l2]
        out.append(
            {
                "config": config,
                "sizes": len(rel),
                "worst": min(rel, key=lambda r: r["ratio"]),
                "worst_band": min(band, key=lambda r: r["ratio"]) if band else None,
                "below": below_runs(rel),
            }
        )
    return out


def cliff_lines(results, manifest: dict) -> list[str]:
    """The cliff as plain lines (the audit command prints them; the report renders them)."""
    base = baseline_of(manifest)
    lines = []
    for c in cliff(results, manifest):
        head = f"{c['config']} {c['dtype']} {c['mode']} vs {base}:"
        if c["worst"] is None:
            lines.append(f"{head} no ok cell ({c['not_ok']} cells not ok; see Guards)")
            continue
        w, wb = c["worst"], c["worst_band"]
        band = (
            f"worst {wb['ratio']:.3f}x at {_fmt(wb['ws_bytes'])} in (32 MiB, {_fmt(c['l2_bytes'])}]"
            if wb
            else "no size measured in (32 MiB, L2]"
        )
        lines.append(
            f"{head} {band}; worst overall {w['ratio']:.3f}x at {_fmt(w['ws_bytes'])} "
            f"({c['sizes']} sizes ok, {c['not_ok']} not ok)"
        )
        if c["below"]:
            lines.append(f"  below {base} at {_runs(c['below'])}")
        else:
            lines.append(f"  never below {base}")
        for v in c["vs_policy"]:
            w, wb = v["worst"], v["worst_band"]
            band = (
                f"worst {wb['ratio']:.3f}x at {_fmt(wb['ws_bytes'])} in (32 MiB, "
                f"{_fmt(c['l2_bytes'])}]; "
                if wb
                else ""
            )
            lines.append(
                f"  vs {v['config']} (that policy's dispatch, timed in this run): {band}worst "
                f"overall {w['ratio']:.3f}x at {_fmt(w['ws_bytes'])} ({v['sizes']} sizes)"
            )
            if v["below"]:
                lines.append(f"    below {v['config']} at {_runs(v['below'])}")
        for e in c["edges"]:
            where = f"edge at {_fmt(e['ws_bytes'])} ({e['what']})"
            if not e["unsampled"]:
                lines.append(f"  {where}: sampled ({_fmt(e['lo'])}, {_fmt(e['hi'])})")
            elif e["lo"] is None or e["hi"] is None:
                lines.append(f"  {where}: outside the measured sizes")
            else:
                lines.append(
                    f"  {where}: in an UNSAMPLED gap {_fmt(e['lo'])}-{_fmt(e['hi'])}, "
                    "wider than the plan resolution"
                )
    return lines


def _runs(below: list[tuple[int, int, float]]) -> str:
    """below_runs() as text: '32 MiB-46.88 MiB (down to 0.671x), ...'."""
    return ", ".join(f"{_fmt(lo)}-{_fmt(hi)} (down to {r:.3f}x)" for lo, hi, r in below)
