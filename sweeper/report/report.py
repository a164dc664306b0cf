"""REPORT.md for a run folder: one markdown file that renders on GitHub.

Built from what is in the folder (manifest, results table, and when present selection.csv,
policy.json and plots/); a stage that has not run yet is named as missing, never silently
left out. Pure text: `build_report` takes plain inputs, `api.report()` does the file IO.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeper.analyze.columns import MODES
from sweeper.dtypes import DTYPES
from sweeper.report.plots import _plots_stale, plot_order, render_plots
from sweeper.report.tables import best_per_size, dtypes_in, facets
from sweeper.runfolder import PLOTS, REPORT, baseline_of
from sweeper.units import fmt_bytes, fmt_mib

if TYPE_CHECKING:
    import pandas as pd

SECTIONS = (
    "Environment",
    "Plan coverage",
    "Selection",
    "Policy",
    "Targets",
    "Verify",
    "Plots",
    "Guards",
    "Pruned",
    "Timing",
)


def _cell(v: Any) -> str:
    """Text for a table cell: no pipes or newlines that would break the table."""
    text = "" if v is None else str(v)
    return text.replace("|", "\\|").replace("\n", " ").strip()


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], align: str = "") -> list[str]:
    align = align or "-" * len(header)
    marks = {"-": "---", "r": "---:", "c": ":---:"}
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(marks[a] for a in align) + "|"]
    out += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return out


def _num(v: Any, fmt: str = ".0f") -> str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return "-"
    return "-" if math.isnan(f) else format(f, fmt)


def _ratio_ci(r: Any, lo: Any, hi: Any) -> str:
    if _num(r) == "-":
        return "-"
    ci = f" [{_num(lo, '.2f')}, {_num(hi, '.2f')}]" if _num(lo) != "-" else ""
    return f"{_num(r, '.2f')}x{ci}"


def _duration(s: Any) -> str:
    try:
        s = float(s)
    except (TypeError, ValueError):
        return _cell(s)
    h, rem = divmod(int(round(s)), 3600)
    m, sec = divmod(rem, 60)
    return f"{s:,.1f} s ({h}:{m:02d}:{sec:02d})"


# ---- sections -----------------------------------------------------------------------------


def environment(manifest: Mapping[str, Any]) -> list[str]:
    dev = manifest.get("device") or {}
    plan = manifest.get("plan") or {}
    cc = dev.get("cc")
    cc_text = f"{cc[0]}.{cc[1]}" if isinstance(cc, (list, tuple)) and len(cc) == 2 else cc
    rows = [
        ("GPU", f"{dev.get('name', '-')} (`{manifest.get('gpu', '-')}`)"),
        ("compute capability", cc_text or "-"),
        ("SMs", dev.get("sm_count", "-")),
        ("L2", fmt_bytes(dev.get("l2_bytes"))),
        ("persisting-L2 max", fmt_bytes(dev.get("persisting_l2_max_bytes"))),
        ("DRAM peak", f"{_num(dev.get('dram_peak_gbps'))} GB/s"),
        ("memory", fmt_bytes(dev.get("memory_bytes"))),
        ("driver", dev.get("driver_version", "-")),
        ("git commit", f"`{manifest.get('git_commit', '-')}`"),
        ("plan", f"`{plan.get('path', '-')}` (hash `{plan.get('plan_hash', '-')}`)"),
        ("modes", ", ".join(manifest.get("modes") or [str(manifest.get("mode", "-"))])),
        ("baseline", manifest.get("baseline", "-")),
        ("started / finished", f"{manifest.get('started', '-')} / {manifest.get('finished', '-')}"),
    ]
    versions = manifest.get("versions") or {}
    rows += [(f"version: {k}", v) for k, v in sorted(versions.items())]
    return _table(("", "value"), rows)


def largest_gaps(sizes: Sequence[int], k: int = 3) -> list[tuple[int, int]]:
    """The k widest steps between consecutive sampled sizes, by ratio (widest first)."""
    s = sorted(set(int(x) for x in sizes))
    pairs = list(zip(s, s[1:], strict=False))
    return sorted(pairs, key=lambda p: (-p[1] / p[0], p[0]))[:k]


def coverage(results: pd.DataFrame, manifest: Mapping[str, Any]) -> list[str]:
    plan = manifest.get("plan") or {}
    dev = manifest.get("device") or {}
    lo, hi = plan.get("dense_lo_bytes"), plan.get("dense_hi_bytes")
    l2 = plan.get("l2_bytes") or dev.get("l2_bytes")
    res = plan.get("resolution")
    step = l2 / res if l2 and isinstance(res, (int, float)) and res >= 1 else None
    out = [
        f"Dense band of the plan: {fmt_bytes(lo)} .. {fmt_bytes(hi)}; L2 {fmt_bytes(l2)}. "
        f"Dense-band step target: {fmt_bytes(step)} (L2/{res}). "
        "Gaps are between consecutive sampled working sets (all rows, any status).",
        "",
    ]
    rows = []
    for facet, sub in facets(results):
        for dtype in dtypes_in(sub):
            sizes = sorted(int(x) for x in sub[sub["dtype"] == dtype]["ws_bytes"].unique())
            dense = [s for s in sizes if lo and hi and lo <= s <= hi]
            widest = max(
                zip(dense, dense[1:], strict=False), key=lambda p: p[1] - p[0], default=None
            )
            if widest:
                a, b = widest
                flag = f" ⚠ wider than L2/{res:g}" if step and b - a > step * (1 + 1e-9) else ""
                dense_step = f"{fmt_bytes(b - a)} ({fmt_mib(a)} → {fmt_mib(b)}){flag}"
            else:
                dense_step = "no two sizes in the dense band"
            gaps = "; ".join(
                f"{fmt_mib(a)} → {fmt_mib(b)} MiB (×{b / a:.2f})" for a, b in largest_gaps(sizes)
            )
            below = max((s for s in sizes if l2 and s <= l2), default=None)
            above = min((s for s in sizes if l2 and s > l2), default=None)
            bracket = (
                f"{fmt_mib(below)} .. {fmt_mib(above)}" if below and above else "not bracketed"
            )
            rows.append(
                (
                    dtype,
                    facet,
                    len(sizes),
                    f"{fmt_mib(sizes[0])} .. {fmt_mib(sizes[-1])}",
                    len(dense),
                    dense_step,
                    bracket,
                    gaps or "-",
                )
            )
    header = ("dtype", "mode", "sizes", "range (MiB)", "in dense band", "widest dense step")
    return out + _table((*header, "L2 bracket (MiB)", "largest gaps (by ratio)"), rows, "--rrrrr-")


def selection(
    results: pd.DataFrame,
    sel: pd.DataFrame | None,
    l2_bytes: int | None = None,
    baseline: str = "torch",
) -> list[str]:
    if sel is None:
        out = [
            "**No selection built yet** (`sweeper select` writes selection.csv and "
            "selection.md into the run folder). Shown instead: the fastest ok config at each "
            "size, without the noise-aware tie handling of the selection.",
            "",
        ]
        table = best_per_size(results).rename(columns={"pct_of_copy": "pct_copy"})
    else:
        out = [
            "From `selection.csv` (details, runner-up and ties: [selection.md](selection.md)).",
            "",
        ]
        table = sel
    if table.empty:
        return [*out, "No ok candidate cell in this run: nothing to select from."]
    groups = sorted(
        table.groupby(["mode", "pattern", "dtype"], sort=False),
        key=lambda g: (_rank(g[0][0], MODES), g[0][1], _rank(g[0][2], DTYPES), g[0][2]),
    )
    for (mode, pattern, dtype), grp in groups:
        grp = grp.sort_values("ws_bytes")
        runs = "; ".join(
            f"{c} {fmt_mib(a)}..{fmt_mib(b)}"
            for c, a, b in config_runs(grp["config"], grp["ws_bytes"])
        )
        out += [
            "<details>",
            f"<summary><b>{dtype}</b>, mode {mode}, pattern {pattern}: {runs} (MiB)</summary>",
            "",
        ]
        rows = [
            (
                fmt_mib(r["ws_bytes"]),
                f"`{r['config']}`",
                _num(r["gbps"]),
                _num(r["pct_copy"], ".1f"),
                _ratio_ci(r["ratio"], r["ratio_lo"], r["ratio_hi"]),
            )
            for _, r in grp.sort_values("ws_bytes").iterrows()
        ]
        header = ("size (MiB)", "config", "GB/s", "% of copy", f"vs {baseline} [95% CI]")
        out += _table(header, rows, "r-rrr") + ["", "</details>", ""]
    return out + modes_side_by_side(table, l2_bytes)


def modes_side_by_side(table: pd.DataFrame, l2_bytes: int | None) -> list[str]:
    """Where a run measured several modes: per dtype and range of working set, the lowest and
    highest ratio of the selected config in each mode."""
    modes = [m for m in MODES if m in set(table["mode"])]
    if len(modes) < 2 or not l2_bytes:
        return []
    edges = [0, l2_bytes / 8, l2_bytes / 2, l2_bytes, 4 * l2_bytes, float("inf")]
    names = ["<= L2/8", "L2/8 - L2/2", "L2/2 - L2", "L2 - 4 x L2", "> 4 x L2"]
    rows = []
    for dtype in [d for d in DTYPES if d in set(table["dtype"])]:
        for mode in modes:
            t = table[(table["dtype"] == dtype) & (table["mode"] == mode)]
            cells = []
            for lo, hi in zip(edges, edges[1:], strict=False):
                r = t[(t.ws_bytes > lo) & (t.ws_bytes <= hi)].ratio
                cells.append(f"{r.min():.2f}-{r.max():.2f}" if len(r) else "-")
            rows.append((dtype, mode, *cells))
    return [
        "Modes side by side: the selected config's ratio to the baseline, lowest-highest per "
        "range of working set.",
        "",
        *_table(("dtype", "mode", *names), rows, "--rrrrr"),
        "",
    ]


def _rank(value: str, order: Sequence[str]) -> int:
    return order.index(value) if value in order else len(order)


def config_runs(configs: Sequence[str], sizes: Sequence[int]) -> list[tuple[str, int, int]]:
    """Consecutive sizes with the same config, as (config, first size, last size)."""
    out: list[tuple[str, int, int]] = []
    for c, ws in zip(configs, sizes, strict=True):
        if out and out[-1][0] == c:
            out[-1] = (c, out[-1][1], int(ws))
        else:
            out.append((c, int(ws), int(ws)))
    return out


def policy(doc: Mapping[str, Any] | None) -> list[str]:
    if doc is None:
        return [
            "**No policy built yet** (`sweeper policy` writes policy.json into the run folder)."
        ]
    prov = doc.get("provenance") or {}
    out = [
        f"From `policy.json`: mode {prov.get('mode', '-')}, pattern {prov.get('pattern', '-')}, "
        f"tolerance {prov.get('tolerance', '-')}, resolution L2/{prov.get('resolution', '-')}. "
        "A band holds working sets in [lo, hi); the bracket is the pair of measured sizes "
        "the boundary below it sits between.",
        "",
    ]
    rows = []
    for dtype, d in (doc.get("dtypes") or {}).items():
        for b in d.get("bands", []):
            hi = b.get("hi_bytes")
            br = b.get("bracket_below")
            worst = b.get("worst_frac_of_best")
            rows.append(
                (
                    dtype,
                    f"[{fmt_mib(b.get('lo_bytes') or 0)}, {'∞' if hi is None else fmt_mib(hi)})",
                    f"`{b.get('config')}`",
                    f"{fmt_mib(b['first_measured'])} .. {fmt_mib(b['last_measured'])}"
                    if "first_measured" in b
                    else "-",
                    b.get("n_sizes", "-"),
                    f"{fmt_mib(br[0])} .. {fmt_mib(br[1])}" if br else "-",
                    _num(100 * worst, ".1f") if isinstance(worst, (int, float)) else "-",
                )
            )
    header = ("dtype", "band (MiB)", "config", "measured (MiB)", "sizes", "bracket (MiB)")
    return out + _table((*header, "worst % of best"), rows, "--r-rrr")


def plots_section(run_dir: Path, plot_files: Sequence[Path]) -> list[str]:
    pngs = [p for p in plot_files if p.suffix == ".png"]
    if not pngs:
        return ["**No plots** (`sweeper plot` writes them into plots/)."]
    out = [f"Vector (SVG) versions: `sweeper plot {run_dir} --format svg`.", ""]
    for png in pngs:
        rel = Path(os.path.relpath(png, run_dir)).as_posix()
        out += [f"**{png.stem}**", "", f"![{png.stem}]({rel})", ""]
    return out


def guards(results: pd.DataFrame, manifest: Mapping[str, Any]) -> list[str]:
    bad = results[results["status"] != "ok"].sort_values(["mode", "dtype", "ws_bytes", "config"])
    logged = manifest.get("guards") or []
    out = [
        f"{len(bad)} of {len(results)} measured cells are not ok (left out of every table "
        f"and plot above); {len(logged)} finding(s) in the run's guard log.",
        "",
    ]
    if len(bad):
        rows = [
            (
                r["mode"],
                r["dtype"],
                fmt_mib(r["ws_bytes"]),
                r["role"],
                f"`{r['config']}`",
                r["status"],
                r["status_detail"],
            )
            for _, r in bad.iterrows()
        ]
        header = ("mode", "dtype", "size (MiB)", "role", "config", "status", "detail")
        out += _table(header, rows, "--r----") + [""]
    if logged:
        out += ["Guard log (manifest):", ""]
        rows = [(g.get("cell", "-"), g.get("status", "-"), g.get("detail", "")) for g in logged]
        out += _table(("cell", "status", "detail"), rows)
        out += [""]
    return out + physical_limits(results, manifest) + pairing_check(results, manifest)


def physical_limits(results: pd.DataFrame, manifest: Mapping[str, Any]) -> list[str]:
    """The physical-limit check's ceilings and margin as the run applied them."""
    from sweeper.run.ceilings import ABOVE_CEILING, ceilings_of

    if "ceiling_check" not in (manifest.get("harness") or {}):
        return ["**Physical limits.** This run was recorded without the physical-limit check.", ""]
    c = ceilings_of(manifest)
    l2c = f"{c.l2_resident_gbps:.0f} GB/s" if c.l2_resident_gbps else "not measured"
    peak = f"{c.dram_peak_gbps:.0f} GB/s" if c.dram_peak_gbps else "unknown"
    n = int((results["status"] == ABOVE_CEILING).sum())
    return [
        f"**Physical limits.** A candidate above {c.margin:g}x the L2-resident ceiling ({l2c}) "
        f"at any size, or from {c.copy_from_x_l2:g} x L2 on above {c.margin:g}x the copy "
        f"kernel at its size or the DRAM peak ({peak}), is `{ABOVE_CEILING}`: {n} cell(s) "
        "in this run.",
        "",
    ]


def pairing_check(results: pd.DataFrame, manifest: Mapping[str, Any]) -> list[str]:
    """The baseline's time next to evict_last candidates vs next to the others, same size."""
    from sweeper.report.pairing import ALPHA, FLAG, evict_last_contamination

    harness = manifest.get("harness") or {}
    normalized = harness.get("l2_normalize_between_slots")
    how = (
        "This run demoted the cell's L2 lines to normal priority between slots."
        if normalized
        else "This run did NOT demote L2 lines between slots: "
        + (
            f"the normalizer could not run ({harness['l2_normalize_error']})."
            if harness.get("l2_normalize_error")
            else "it was recorded before that guard."
        )
    )
    chk = evict_last_contamination(results)
    out = [
        "**Baseline next to evict_last candidates.** At one size the baseline's median time "
        "should not depend on the candidate it was paired with; if it is slower next to "
        "candidates with `L2::evict_last` loads, their lines outlived their turn and those "
        f"candidates' ratios are inflated by that factor. {how}",
        "",
    ]
    if chk.empty:
        return out + ["No size has cells on both sides to compare."]
    flagged = chk[chk["flagged"]]
    significant = int((flagged["p"] < ALPHA).sum())
    out.append(
        f"{len(chk)} size(s) compared; {len(flagged)} flagged (baseline more than "
        f"{FLAG:.0%} slower next to evict_last candidates), {significant} of them with "
        f"p < {ALPHA} (one-sided permutation test over the size's cells); "
        f"worst {chk['slowdown'].max():.3f}x. A run of adjacent flagged sizes is an effect; "
        "isolated flags with large p are what noise gives at 1-3 us calls, where 2% is "
        "inside the spread."
    )
    if len(flagged):
        rows = [
            (
                r["mode"],
                r["dtype"],
                fmt_mib(r["ws_bytes"]),
                f"{r['slowdown']:.3f}",
                r["cells_el"],
                r["cells_other"],
                f"{r['p']:.3f}",
            )
            for _, r in flagged.iterrows()
        ]
        header = (
            "mode", "dtype", "size (MiB)", "baseline slowdown", "cells el", "cells other", "p",
        )  # fmt: skip
        out += [""] + _table(header, rows, "--rrrrr")
    return out


def pruned(manifest: Mapping[str, Any], closest: int = 10) -> list[str]:
    """What screening left out: counts per mode and dtype, and the closest misses (where they
    came nearest the best and by how much). The full list is the manifest's `pruned`."""
    items = manifest.get("pruned") or []
    if not items:
        return ["Nothing was screened out: every config of the grid was measured at every size."]
    climb = manifest.get("climb") or {}
    groups: dict[tuple[str, str], list] = {}
    for p in items:
        groups.setdefault((p.get("mode", "-"), p.get("dtype", "-")), []).append(p)
    rows = []
    for (mode, dtype), ps in sorted(groups.items()):
        c = climb.get(f"{mode}/{dtype}", {})
        failed = sum(1 for p in ps if str(p.get("reason", "")).startswith("failed"))
        conv = {True: "yes", False: "no (round limit)"}.get(c.get("converged"), "-")
        rows.append((mode, dtype, str(c.get("configs", "-")), str(len(ps)), str(failed),
                     str(c.get("rounds", "-")), conv))  # fmt: skip
    out = [
        f"{len(items)} config(s) screened out before the full sweep (full list: the manifest's "
        "`pruned`):",
        "",
        *_table(
            (
                "mode",
                "dtype",
                "configs screened",
                "screened out",
                "failed",
                "climb rounds",
                "climb converged",
            ),
            rows,
            "--rrrr-",
        ),
    ]
    near = sorted(
        (p for p in items if p.get("shortfall") is not None), key=lambda p: p["shortfall"]
    )[:closest]
    if near:
        out += ["", f"The {len(near)} closest misses:", ""] + _table(
            ("config", "mode", "dtype", "closest at (MiB)", "behind the best there"),
            [
                (
                    f"`{p['config']}`",
                    p.get("mode", "-"),
                    p.get("dtype", "-"),
                    fmt_mib(p["ws_bytes"]) if p.get("ws_bytes") else "-",
                    f"{p['shortfall']:.2%}",
                )
                for p in near
            ],
            "---rr",
        )
    return out


def timing(manifest: Mapping[str, Any]) -> list[str]:
    t = manifest.get("timing") or {}
    if not t:
        return ["No timing recorded in the manifest."]
    rows, counts, parts = [], [], 0.0
    for key, value in t.items():
        if key == "total_s":
            continue
        if not key.endswith("_s"):  # refine_points, bracket_points: counts of sizes
            counts.append(f"{key.replace('_', ' ')} {_cell(value)}")
            continue
        name = key.removesuffix("_s")
        if name.endswith("/climb"):  # the climb runs inside its screen phase
            rows.append((f"{name} (part of screen)", _duration(value)))
            continue
        rows.append((name, _duration(value)))
        if isinstance(value, int | float):
            parts += float(value)
    total = t.get("total_s", parts)
    what = "the run's wall time" if "total_s" in t else "sum of the phases"
    rows.append((f"**total** ({what})", _duration(total)))
    out = _table(("phase", "wall time"), rows, "-r")
    return out + (["", "Sizes added: " + "; ".join(counts) + "."] if counts else [])


# ---- the document -------------------------------------------------------------------------


def targets_section(
    results: pd.DataFrame,
    manifest: Mapping[str, Any],
    doc: Mapping[str, Any] | None,
    vt: pd.DataFrame | None = None,
) -> list[str]:
    if doc is None:
        return ["No policy yet: the targets are checked on the policy's configs."]
    from sweeper.report.checks import scorecard, scorecard_markdown, verify_scorecard

    mode = (doc.get("provenance") or {}).get("mode", "hot")
    l2 = int(doc.get("l2_bytes") or manifest["device"]["l2_bytes"])
    ceiling = (manifest.get("ceiling") or {}).get("gbps")
    card = scorecard(results, dict(doc), l2, mode=mode, ceiling_gbps=ceiling)
    ceiling_s = f"{ceiling:.0f} GB/s" if ceiling else "not measured in this run"
    out = [
        f"The policy's config at every measured size ({mode} mode), against the targets "
        "(`sweeper/report/checks.py`). Ratios are to the baseline, measured side by side. "
        "`worst` is the value the target is checked on (for the CI target, the lowest upper "
        "end of a ratio's CI); the lowest point ratio is shown beside it. L2-resident "
        f"ceiling: {ceiling_s}.",
        "",
        scorecard_markdown(card),
    ]
    if vt is not None and "ratio" in vt:
        vcard = verify_scorecard(vt, l2, mode=mode, ceiling_gbps=ceiling)
        out += [
            "",
            "The same targets on the exported header's own timing (`sweeper verify`): a size "
            "fails only where it fails in every pass.",
            "",
            scorecard_markdown(vcard),
        ]
    return out


def verify_section(run_dir: Path, vt: pd.DataFrame | None) -> list[str]:
    """What `sweeper verify` measured for this run's policy (verify_timing.csv): the verdict
    as verify computes it, with every repeated failure and the pass-to-pass noise."""
    if vt is None:
        return [
            "Not verified yet: `sweeper verify <run>/policy.json` on a GPU builds the exported "
            "header, checks it bit-exact and times it here."
        ]
    from sweeper.export.verdict import pass_values, timing_verdict

    rows = vt.to_dict("records")
    v = timing_verdict(rows)
    mode = rows[0].get("mode", "?") if rows else "?"
    txt = run_dir / "verify.txt"
    out = [
        "From `verify_timing.csv`"
        + (" (verify's printout: [verify.txt](verify.txt))" if txt.exists() else "")
        + f": {v['sizes']} sizes x {v['passes']} pass{'es' if v['passes'] != 1 else ''}, "
        f"{mode} mode. A size fails parity or loses only if it does in every pass.",
        "",
    ]
    sp = v["pass_spread"]
    spread = f"median {sp['median']:.2%}, p95 {sp['p95']:.2%}, max {sp['max']:.2%}" if sp else "-"
    out += _table(
        ["check", "result"],
        [
            [
                "bit-exact after timing",
                "yes" if not v["bit_failures"] else f"**no** ({len(v['bit_failures'])} rows)",
            ],
            ["export vs its Numba kernel, max deviation (any pass)", f"{v['max_parity_dev']:.1%}"],
            ["sizes off Numba by > 5% in every pass", len(v["parity_failures"])],
            ["sizes losing to the baseline in every pass", len(v["baseline_losses"])],
            ["sizes losing in some passes only", len(v["unrepeated_losses"])],
            ["lowest ratio to the baseline (any pass)", _num(v["min_ratio"], ".3f")],
            ["pass-to-pass movement of the ratio", spread],
            ["verdict", "**pass**" if v["ok"] else "**fail**"],
        ],  # fmt: skip
        "--",
    )
    for title, key, what in (
        ("Losses in every pass", "baseline_losses", "ratio"),
        ("Parity failures in every pass", "parity_failures", "parity"),
        ("Losses in some passes only", "unrepeated_losses", "ratio"),
    ):
        if not v[key]:
            continue
        body = [
            [
                r["dtype"],
                fmt_bytes(r["ws_bytes"]),
                f"`{r['config']}`",
                "; ".join(pass_values(r, what)),
            ]
            for r in v[key]
        ]
        out += ["", f"**{title}**", ""]
        out += _table(["dtype", "size", "config", "each pass"], body, "----")
    return out


def audit_section(results: pd.DataFrame, manifest: Mapping[str, Any]) -> list[str]:
    """The cliff of the users' kernels (sweeper.analyze.cliff), first in an audit's report;
    nothing for a run without users' kernels."""
    from sweeper.analyze.cliff import cliff_lines

    lines = cliff_lines(results, dict(manifest))
    if not lines:
        return []
    return ["## The cliff", "", "```", *lines, "```", ""]


def build_report(
    run_dir: str | os.PathLike,
    manifest: Mapping[str, Any],
    results: pd.DataFrame,
    plot_files: Sequence[Path] = (),
    selection_table: pd.DataFrame | None = None,
    policy_doc: Mapping[str, Any] | None = None,
    verify_table: pd.DataFrame | None = None,
) -> str:
    """The REPORT.md text. Links are relative to run_dir."""
    run_dir = Path(run_dir)
    missing = []
    if selection_table is None:
        missing.append("selection (run `sweeper select`)")
    if policy_doc is None:
        missing.append("policy (run `sweeper policy`)")
    if not any(p.suffix == ".png" for p in plot_files):
        missing.append("plots (run `sweeper plot`)")
    head = [
        f"# Run report: {manifest.get('gpu', '?')} · {manifest.get('run_id', '?')}",
        "",
        f"Generated by `sweeper report` from `{run_dir.as_posix()}`. "
        f"{len(results)} measured cells; only status-ok cells enter tables and plots.",
        "",
        "Not built yet: " + "; ".join(missing) + "." if missing else "All stages present.",
        "",
    ]
    if baseline_of(manifest) != "torch":
        head += [
            f"**The baseline is `{manifest['baseline']}`, not torch**: every ratio in this "
            "report is against it (torch was not importable, or another baseline was asked "
            "for; `pip install -e '.[torch]'`).",
            "",
        ]
    head += audit_section(results, manifest)
    if manifest.get("status") not in (None, "complete"):
        head += [f"**The run is {manifest['status']}**: `sweeper run --resume` completes it.", ""]
    if manifest.get("open_brackets"):
        head += [
            "**A band boundary is bracketed more widely than the plan resolution** in "
            + ", ".join(manifest["open_brackets"])
            + " (the run's bracketing stopped at its round limit): `sweeper policy build` "
            "refuses it; `sweeper run --resume --run-dir RUN` samples that stretch.",
            "",
        ]
    head += [
        " · ".join(f"[{s}](#{s.lower().replace(' ', '-')})" for s in SECTIONS),
    ]
    bodies = {
        "Environment": environment(manifest),
        "Plan coverage": coverage(results, manifest),
        "Selection": selection(
            results,
            selection_table,
            manifest.get("device", {}).get("l2_bytes"),
            baseline_of(manifest),
        ),
        "Policy": policy(policy_doc),
        "Targets": targets_section(results, manifest, policy_doc, verify_table),
        "Verify": verify_section(run_dir, verify_table),
        "Plots": plots_section(run_dir, plot_files),
        "Guards": guards(results, manifest),
        "Pruned": pruned(manifest),
        "Timing": timing(manifest),
    }
    lines = head
    for name in SECTIONS:
        lines += ["", f"## {name}", "", *bodies[name]]
    return "\n".join(lines).rstrip() + "\n"


def write_report(run_dir: str | os.PathLike) -> Path:
    """Write <run>/REPORT.md, rendering the plots first if they are missing or stale."""
    from sweeper.analyze.policy import load_policy
    from sweeper.analyze.select import read_selection
    from sweeper.analyze.store import load_run
    from sweeper.export.verdict import load_verify
    from sweeper.runfolder import POLICY
    from sweeper.schema import atomic_write_text

    run_dir = Path(run_dir)
    # every input is read and checked before anything is written
    run = load_run(run_dir)
    sel = read_selection(run_dir, run.results)
    doc = load_policy(run_dir / POLICY) if (run_dir / POLICY).exists() else None
    verify = load_verify(run_dir)
    if _plots_stale(run_dir):
        render_plots(run_dir)
    files = sorted((run_dir / PLOTS).glob("*.*"), key=plot_order)
    text = build_report(run_dir, run.manifest, run.results, files, sel, doc, verify)
    return atomic_write_text(run_dir / REPORT, text)
