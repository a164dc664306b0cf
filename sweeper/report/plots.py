"""DataFrame -> matplotlib Figure. Never measures, never needs a GPU or a display.

Every figure takes the tidy results table (sweeper/analyze/columns.py) and plain inputs: a `RunInfo`
(markers and titles, from the manifest) and optional policy `bands`
({dtype: [(lo_bytes, hi_bytes | None, config), ...]}, a band holding sizes in [lo, hi),
as sweeper/analyze/policy.py writes them).
Figures are built on `matplotlib.figure.Figure` directly (no pyplot state, Agg/SVG canvases
on save), so nothing here opens a window or leaks figures.

Only rows with status "ok" enter a curve; the sampled sizes are drawn from every row, so a
size whose cells all failed still shows as sampled (and as a blank heatmap column).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeper.analyze.policy import Band
from sweeper.analyze.select import ok_candidates
from sweeper.dtypes import DTYPES
from sweeper.report.tables import (
    band_config,
    best_per_size,
    dtypes_in,
    facets,
    pct_of_best,
    rank_configs,
    shown_configs,
)
from sweeper.runfolder import PLOTS, baseline_of, dispatch_configs, is_audit, user_configs
from sweeper.units import MiB, fmt_mib

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from sweeper.analyze.store import RunData

V2_SWITCH_BYTES = 32 * MiB  # the threshold v2 streamed above (seeds/L2_BAND_CLIFF.md)

Bands = Mapping[str, Sequence[Band]]

_BEST, _POLICY, _TORCH, _COPY = "black", "tab:red", "tab:blue", "0.45"


@dataclass(frozen=True)
class RunInfo:
    """What the figures need from a manifest: titles, L2 markers, the dense band."""

    gpu: str = ""
    run_id: str = ""
    l2_bytes: int | None = None
    persisting_l2_max_bytes: int | None = None
    dense_lo_bytes: int | None = None
    dense_hi_bytes: int | None = None
    baseline: str = "torch"  # what the run timed every candidate against (manifest "baseline")
    users: tuple[str, ...] = ()  # configs of users' kernels (manifest "external")
    policies: tuple[str, ...] = ()  # configs of shipped policies' dispatch (manifest "dispatch")
    audit: bool = False  # a `sweeper audit` run: the user's kernel and the policies alone

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any]) -> RunInfo:
        device = manifest.get("device") or {}
        plan = manifest.get("plan") or {}
        return cls(
            baseline=baseline_of(manifest),
            gpu=str(manifest.get("gpu") or device.get("name") or ""),
            run_id=str(manifest.get("run_id") or ""),
            l2_bytes=_int(device.get("l2_bytes") or plan.get("l2_bytes")),
            persisting_l2_max_bytes=_int(device.get("persisting_l2_max_bytes")),
            dense_lo_bytes=_int(plan.get("dense_lo_bytes")),
            dense_hi_bytes=_int(plan.get("dense_hi_bytes")),
            users=user_configs(manifest),
            policies=dispatch_configs(manifest),
            audit=is_audit(manifest),
        )

    def markers(self) -> list[tuple[int, str]]:
        """Vertical reference lines (bytes, label), sorted by position."""
        out = [(V2_SWITCH_BYTES, "32 MiB")]
        if self.persisting_l2_max_bytes:
            out.append((self.persisting_l2_max_bytes, "persisting-L2 max"))
        if self.l2_bytes:
            out += [(self.l2_bytes, "L2"), (2 * self.l2_bytes, "2×L2")]
        return sorted(out)


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


def _byte_axis(ax: Axes, lo: float, hi: float, max_ticks: int = 12) -> None:
    """Log-2 byte axis with MiB labels at powers of two."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    ax.set_xscale("log", base=2)
    ax.set_xlim(lo / 1.15, hi * 1.15)
    e0, e1 = math.floor(math.log2(lo)), math.ceil(math.log2(hi))
    step = max(1, math.ceil((e1 - e0 + 1) / max_ticks))
    ax.xaxis.set_major_locator(FixedLocator([2.0**e for e in range(e0, e1 + 1, step)]))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: fmt_mib(x)))
    ax.xaxis.set_minor_locator(FixedLocator([2.0**e for e in range(e0, e1 + 1)]))
    ax.xaxis.set_minor_formatter(NullFormatter())


XLABEL = "working set = input + output (MiB, log scale)"


def _draw_markers(ax: Axes, info: RunInfo, labels: bool) -> None:
    """Vertical lines at 32 MiB, persisting-L2 max, L2, 2×L2. Their labels stand above the
    panel (clear of the data: the cliff sits right under these lines), each beside its line;
    two lines close together get their labels on opposite sides."""
    lo, hi = ax.get_xlim()
    span = math.log2(hi) - math.log2(lo)
    last_frac, last_side = -1.0, "left"
    for x, label in info.markers():
        if not lo <= x <= hi:
            continue
        ax.axvline(x, color="0.3", lw=0.8, ls=":", zorder=1, gid=f"marker-{label}")
        if not labels:
            continue
        frac = (math.log2(x) - math.log2(lo)) / span
        # "left": the text ends at the line; "right": it starts there
        side = ("right" if last_side == "left" else "left") if frac - last_frac < 0.04 else "left"
        ax.annotate(
            label,
            xy=(x, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(-1 if side == "left" else 1, 2),
            textcoords="offset points",
            rotation=90,
            ha="right" if side == "left" else "left",
            va="bottom",
            fontsize=7,
            color="0.25",
            annotation_clip=False,
            gid=f"marker-label-{label}",
        )
        last_frac, last_side = frac, side


def _dense(ax: Axes, info: RunInfo, label: bool) -> None:
    if info.dense_lo_bytes and info.dense_hi_bytes:
        ax.axvspan(
            info.dense_lo_bytes,
            info.dense_hi_bytes,
            color="gold",
            alpha=0.15,
            lw=0,
            zorder=0,
            label="dense band (plan)" if label else None,
            gid="dense",
        )


def _rug(ax: Axes, sizes: Sequence[int]) -> None:
    """Sampled sizes as ticks along the bottom edge: a gap in the plan shows as a gap here."""
    ax.plot(
        list(sizes),
        [0.0] * len(sizes),
        ls="none",
        marker="|",
        ms=9,
        color="0.2",
        transform=ax.get_xaxis_transform(),
        clip_on=False,
        label=f"sampled sizes ({len(sizes)})",
        gid="sampled",
    )


def _title(kind: str, info: RunInfo, facet: str | None) -> str:
    parts = [info.gpu or "unknown GPU"]
    if facet:
        parts.append(f"mode {facet}")
    parts.append(f"run {info.run_id or '?'}")
    return f"{kind} — " + " · ".join(parts)


def _legend_outside(ax: Axes) -> None:
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)


def _finish_panel(ax: Axes, info: RunInfo, dtype: str, ylabel: str, first: bool) -> None:
    """What every per-dtype panel ends with: the L2 markers (labelled on the first panel
    only), the y label, the dtype as title, a grid and the legend outside."""
    _draw_markers(ax, info, labels=first)
    ax.set_ylabel(ylabel)
    ax.set_title(dtype, loc="left", fontsize=10, fontweight="bold")
    ax.grid(True, which="major", alpha=0.3)
    _legend_outside(ax)


def _finish_ratio_panel(ax: Axes, info: RunInfo, d: pd.DataFrame, dtype: str, first: bool) -> None:
    """A speedup panel's end: the baseline's line at 1.0, the sampled sizes, _finish_panel."""
    ax.axhline(1.0, color=_TORCH, lw=1.2, label=f"{info.baseline} (1.0×)", gid="parity")
    _rug(ax, sorted(int(x) for x in d["ws_bytes"].unique()))
    _finish_panel(ax, info, dtype, f"speedup vs {info.baseline} (×)", first=first)


def _series(df: pd.DataFrame, col: str = "gbps") -> tuple[list[int], list[float]]:
    s = df.dropna(subset=[col]).groupby("ws_bytes")[col].median().sort_index()
    return [int(x) for x in s.index], [float(v) for v in s.values]


def _config_colours(configs: Sequence[str]) -> dict[str, Any]:
    from matplotlib import colormaps

    # Dark2 keeps clear of the blue (torch) and red (policy) of the reference lines
    cmap = colormaps["Dark2" if len(configs) <= 8 else "tab20"]
    return {c: cmap(i % cmap.N) for i, c in enumerate(sorted(configs))}


def _policy_points(d: pd.DataFrame, bands: Sequence[Band], col: str) -> tuple[list, list]:
    """At each size, the value of the policy's config (NaN where it has no ok measurement)."""
    cand = ok_candidates(d).dropna(subset=[col])
    medians = {
        (int(ws), config): float(v)
        for (ws, config), v in cand.groupby(["ws_bytes", "config"])[col].median().items()
    }
    xs = sorted(int(x) for x in d["ws_bytes"].unique())
    return xs, [medians.get((ws, band_config(bands, ws)), math.nan) for ws in xs]


def _new_figure(w: float, h: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(w, h), layout="constrained")


def _panels(n: int, height: float = 3.2) -> tuple[Figure, list[Axes]]:
    fig = _new_figure(12, height * n + 0.9)
    axes = fig.subplots(n, 1, sharex=True, squeeze=False)[:, 0]
    return fig, list(axes)


def _size_range(results: pd.DataFrame) -> tuple[float, float]:
    ws = results["ws_bytes"].dropna().astype("int64")
    return float(ws.min()), float(ws.max())


# ---- figures ------------------------------------------------------------------------------


def bandwidth_figure(
    results: pd.DataFrame,
    info: RunInfo | None = None,
    bands: Bands | None = None,
    top: int = 3,
    facet: str | None = None,
) -> Figure:
    """GB/s vs working set, one panel per dtype, for ONE mode (see `facets`).

    Curves: the configs of `shown_configs(top)`, the best-per-size envelope, the policy's
    config at each size (if `bands`), the baseline, the copy roofline; sampled sizes as a rug.
    """
    info = info or RunInfo()
    dtypes = dtypes_in(results)
    fig, axes = _panels(len(dtypes))
    lo, hi = _size_range(results)
    for i, (ax, dtype) in enumerate(zip(axes, dtypes, strict=True)):
        d = results[results["dtype"] == dtype]
        _byte_axis(ax, lo, hi)
        _dense(ax, info, label=True)
        cand = ok_candidates(d)
        tops = shown_configs(d, top)
        colours = _config_colours(tops)
        for config in tops:
            xs, ys = _series(cand[cand["config"] == config])
            ax.plot(xs, ys, lw=1, ms=3, marker=".", color=colours[config], alpha=0.8, label=config)
        best = best_per_size(d)
        xs, ys = _series(best)
        ax.plot(xs, ys, color=_BEST, lw=2, marker="o", ms=3.5, label="best per size", gid="best")
        if bands and dtype in bands:
            xs, ys = _policy_points(d, bands[dtype], "gbps")
            ax.plot(xs, ys, color=_POLICY, lw=1.6, ls="--", label="policy", gid="policy")
        xs, ys = _series(d[(d["role"] == "baseline") & (d["status"] == "ok")])
        ax.plot(xs, ys, color=_TORCH, lw=1.4, marker="s", ms=2.5, label=info.baseline,
                gid="baseline")  # fmt: skip
        xs, ys = _series(d[(d["role"] == "copy") & (d["status"] == "ok")])
        if not xs:  # fall back to the copy bandwidth recorded on candidate rows
            xs, ys = _series(cand, "copy_gbps")
        ax.plot(xs, ys, color=_COPY, lw=1.2, ls="-.", label="D2D copy roofline", gid="copy")
        _rug(ax, sorted(int(x) for x in d["ws_bytes"].unique()))
        ax.set_ylim(bottom=0)
        _finish_panel(ax, info, dtype, "bandwidth (GB/s)", first=(i == 0))
    axes[-1].set_xlabel(XLABEL)
    fig.suptitle(_title("Bandwidth vs working set", info, facet))
    return fig


def ratio_figure(
    results: pd.DataFrame,
    info: RunInfo | None = None,
    bands: Bands | None = None,
    facet: str | None = None,
) -> Figure:
    """Speedup over the baseline of the best config per size (95% CI shaded), per dtype."""
    info = info or RunInfo()
    dtypes = dtypes_in(results)
    fig, axes = _panels(len(dtypes), height=2.6)
    lo, hi = _size_range(results)
    for i, (ax, dtype) in enumerate(zip(axes, dtypes, strict=True)):
        d = results[results["dtype"] == dtype]
        _byte_axis(ax, lo, hi)
        _dense(ax, info, label=True)
        best = best_per_size(d).dropna(subset=["ratio"])
        xs = [int(x) for x in best["ws_bytes"]]
        ax.fill_between(
            xs,
            best["ratio_lo"].astype(float),
            best["ratio_hi"].astype(float),
            color=_BEST,
            alpha=0.15,
            lw=0,
            label="95% CI",
            gid="ci",
        )
        ax.plot(xs, best["ratio"], color=_BEST, lw=1.8, marker="o", ms=3, label="best per size")
        if bands and dtype in bands:
            pxs, pys = _policy_points(d, bands[dtype], "ratio")
            ax.plot(pxs, pys, color=_POLICY, lw=1.4, ls="--", label="policy", gid="policy")
        _finish_ratio_panel(ax, info, d, dtype, first=(i == 0))
    axes[-1].set_xlabel(XLABEL)
    fig.suptitle(_title(f"Speedup over {info.baseline} (>1 = faster)", info, facet))
    return fig


def cliff_figure(results: pd.DataFrame, info: RunInfo, facet: str | None = None) -> Figure:
    """A user's kernel against the baseline per dtype (95% CI shaded, sizes below the baseline
    marked), beside each shipped policy's dispatch timed in the same run, with (32 MiB, L2]
    shaded: where the kernel falls off."""
    from matplotlib.colors import to_rgba

    dtypes = dtypes_in(results)
    fig, axes = _panels(len(dtypes), height=2.6)
    lo, hi = _size_range(results)
    users = [c for c in info.users if c in set(results["config"])]
    colours = _config_colours(users)
    for i, (ax, dtype) in enumerate(zip(axes, dtypes, strict=True)):
        d = ok_candidates(results[results["dtype"] == dtype])
        _byte_axis(ax, lo, hi)
        if info.l2_bytes:
            ax.axvspan(V2_SWITCH_BYTES, info.l2_bytes, color=to_rgba("tab:orange", 0.10), lw=0,
                       label="(32 MiB, L2]", gid="band")  # fmt: skip
        for config in users:
            k = d[d["config"] == config].sort_values("ws_bytes")
            if k.empty:
                continue
            xs = [int(x) for x in k["ws_bytes"]]
            c = colours[config]
            ax.fill_between(xs, k["ratio_lo"].astype(float), k["ratio_hi"].astype(float),
                            color=c, alpha=0.18, lw=0, gid=f"ci-{config}")  # fmt: skip
            ax.plot(xs, k["ratio"], color=c, lw=1.8, marker="o", ms=2.5, label=config)
            below = k[k["ratio"] < 1]
            if not below.empty:
                ax.plot([int(x) for x in below["ws_bytes"]], below["ratio"], ls="none",
                        marker="o", ms=4.5, mfc="none", mec="tab:red", mew=1.0,
                        label=f"below {info.baseline}", gid=f"below-{config}")  # fmt: skip
        for config in info.policies:
            p = d[d["config"] == config].sort_values("ws_bytes")
            if not p.empty:
                ax.plot([int(x) for x in p["ws_bytes"]], p["ratio"], color=_POLICY, lw=1.3,
                        ls="--", label=f"{config} (dispatch)", gid=f"policy-{config}")  # fmt: skip
        _finish_ratio_panel(ax, info, d, dtype, first=(i == 0))
    axes[-1].set_xlabel(XLABEL)
    fig.suptitle(_title(f"Your kernel against {info.baseline}", info, facet))
    return fig


def _verify_passes(vt: pd.DataFrame) -> list[int]:
    return sorted(int(x) for x in vt["pass"].unique()) if "pass" in vt.columns else [1]


def _of_pass(d: pd.DataFrame, p: int) -> pd.DataFrame:
    return (d[d["pass"] == p] if "pass" in d.columns else d).sort_values("ws_bytes")


def verify_figure(
    vt: pd.DataFrame, info: RunInfo | None = None, what: str = "ratio", parity: float = 0.05
) -> Figure:
    """`sweeper verify`'s timing (verify_timing.csv), per dtype, one line per pass.

    what="ratio": the exported launch_relu against the baseline (>1 = faster), the first
    pass's 95% CI shaded; sizes that lose in every pass (CI wholly below 1) are marked.
    what="parity": the export's time over the Numba kernel it dispatches to, with the
    +-`parity` band verify checks."""
    from sweeper.analyze.verdict import timing_verdict  # the one definition of a repeated loss

    info = info or RunInfo()
    dtypes = [d for d in DTYPES if d in set(vt["dtype"])]
    fig, axes = _panels(len(dtypes), height=2.4)
    lo, hi = _size_range(vt)
    passes = _verify_passes(vt)
    styles = [dict(color=_BEST, ls="-"), dict(color="tab:orange", ls="--"),
              dict(color="tab:green", ls=":")]  # fmt: skip
    for i, (ax, dtype) in enumerate(zip(axes, dtypes, strict=True)):
        d = vt[vt["dtype"] == dtype]
        _byte_axis(ax, lo, hi)
        _dense(ax, info, label=True)
        col = "ratio" if what == "ratio" else "vs_numba"
        for k, p in enumerate(passes):
            dp = _of_pass(d, p)
            xs = [int(x) for x in dp["ws_bytes"]]
            if k == 0 and what == "ratio":
                ax.fill_between(xs, dp["ratio_lo"].astype(float), dp["ratio_hi"].astype(float),
                                color=_BEST, alpha=0.15, lw=0, label="95% CI, pass 1")  # fmt: skip
            ax.plot(xs, dp[col].astype(float), lw=1.3, marker="o", ms=2.5,
                    label=f"pass {p}", gid=f"pass{p}", **styles[k % len(styles)])  # fmt: skip
        if what == "ratio":
            lost = sorted(
                (int(r["ws_bytes"]), min(float(x["ratio"]) for x in r["passes"]))
                for r in timing_verdict(d.to_dict("records"))["baseline_losses"]
            )
            if lost:
                ax.plot(*zip(*lost, strict=True), ls="none", marker="x", ms=7, mew=2,
                        color=_POLICY, label="loses in every pass", gid="lost")  # fmt: skip
            ax.axhline(1.0, color=_TORCH, lw=1.2, label="baseline (1.0×)", gid="parity")
            ylabel = "export vs baseline (×)"
        else:
            ax.axhspan(1 - parity, 1 + parity, color="0.85", alpha=0.5, lw=0,
                       label=f"±{parity:.0%} (verify's check)", gid="band")  # fmt: skip
            ax.axhline(1.0, color=_TORCH, lw=1.0)
            ylabel = "export / Numba time"
        _finish_panel(ax, info, dtype, ylabel, first=(i == 0))
    axes[-1].set_xlabel(XLABEL)
    kind = (
        "Exported launch_relu against the baseline (>1 = faster)"
        if what == "ratio"
        else "Exported launch_relu against its Numba kernel (time ratio, 1 = same)"
    )
    fig.suptitle(
        _title(kind + f", {len(passes)} pass{'es' if len(passes) > 1 else ''}", info, None)
    )
    return fig


def heatmap_figure(
    results: pd.DataFrame,
    info: RunInfo | None = None,
    top_n: int = 40,
    vmin: float = 50.0,
    facet: str | None = None,
) -> Figure:
    """Config × size coloured by % of the best config at that size, for ONE dtype and mode.

    Rows: `shown_configs(top_n)` (the configs winning most sizes, then the best by mean %
    of best), ordered by mean % of best. Columns: every sampled size;
    blank = not measured ok, × = measured but not ok. Colours saturate below `vmin` %.
    """
    import numpy as np

    info = info or RunInfo()
    dtypes = dtypes_in(results)
    if len(dtypes) != 1:
        raise ValueError(f"heatmap_figure wants one dtype, got {dtypes}")
    ranked = rank_configs(results)
    rows = shown_configs(results, top_n)
    sizes = sorted(int(x) for x in results["ws_bytes"].unique())
    pct = pct_of_best(results)
    grid = (
        pct[pct["config"].isin(rows)]
        .pivot_table(index="config", columns="ws_bytes", values="pct_best", aggfunc="max")
        .reindex(index=rows, columns=sizes)
    )
    values = np.ma.masked_invalid(grid.to_numpy(dtype=float))
    fig = _new_figure(max(8.0, 0.2 * len(sizes) + 4.5), max(3.0, 0.2 * len(rows) + 2.2))
    ax = fig.subplots()
    from matplotlib import colormaps

    cmap = colormaps["viridis"].with_extremes(bad="0.92")
    im = ax.imshow(values, aspect="auto", interpolation="nearest", cmap=cmap, vmin=vmin, vmax=100)
    im.set_gid("heatmap")
    bad = results[(results["role"] == "candidate") & (results["status"] != "ok")]
    bad = bad[bad["config"].isin(rows)]
    if len(bad):
        ax.plot(
            [sizes.index(int(w)) for w in bad["ws_bytes"]],
            [rows.index(c) for c in bad["config"]],
            ls="none",
            marker="x",
            ms=5,
            color="tab:red",
            label="not ok (see report)",
            gid="not-ok",
        )
        ax.legend(loc="upper left", bbox_to_anchor=(0, -0.12), fontsize=8, frameon=False)
    step = max(1, math.ceil(len(sizes) / 60))
    ax.set_xticks(range(0, len(sizes), step))
    ax.set_xticklabels([fmt_mib(s, 3) for s in sizes[::step]], rotation=90, fontsize=7)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows, fontsize=7)
    for x, label in info.markers():
        if label in ("L2", "32 MiB") and sizes[0] < x <= sizes[-1]:
            col = next(j for j, s in enumerate(sizes) if s >= x) - 0.5
            ax.axvline(col, color="white", lw=1.2, ls="--", gid=f"marker-{label}")
            ax.annotate(
                label,
                (col, 1.0),
                xycoords=("data", "axes fraction"),
                fontsize=7,
                xytext=(0, 2),
                textcoords="offset points",
                ha="center",
                va="bottom",
            )
    ax.set_xlabel("working set (MiB)")
    ax.set_ylabel("config (best mean % first)")
    bar = fig.colorbar(im, ax=ax, extend="min", shrink=0.9)
    bar.set_label("% of the best config at this size")
    shown = (
        f"{len(rows)} of {len(ranked)} configs: most wins, then best mean %"
        if len(ranked) > len(rows)
        else "all configs"
    )
    fig.suptitle(_title(f"{dtypes[0]}: % of best per size ({shown})", info, facet))
    return fig


def policy_figure(
    bands: Bands,
    info: RunInfo | None = None,
    x_range: tuple[float, float] | None = None,
) -> Figure:
    """The launch policy as coloured spans along the byte axis, one row per dtype."""
    from matplotlib.patches import Patch

    info = info or RunInfo()
    dtypes = sorted(bands, key=lambda d: (DTYPES.index(d) if d in DTYPES else 99, d))
    if x_range is None:
        edges = [e for d in dtypes for lo, hi, _ in bands[d] for e in (lo, hi) if e]
        edges = edges or [MiB, 1024 * MiB]
        x_range = (min(edges) / 4, max(edges) * 4)
    lo, hi = x_range
    configs = sorted({c for d in dtypes for _, _, c in bands[d]})
    colours = _config_colours(configs)
    # tall enough for a row per dtype and for the legend's entry per config beside them
    fig = _new_figure(12, max(0.7 * len(dtypes) + 1.8, 0.19 * len(configs) + 1.6))
    ax = fig.subplots()
    _byte_axis(ax, lo, hi)
    xmin, xmax = ax.get_xlim()
    width_in = 12 * 0.7  # data area, roughly, after the legend
    for row, dtype in enumerate(dtypes):
        for b_lo, b_hi, config in bands[dtype]:
            left, right = max(b_lo or xmin, xmin), min(b_hi or xmax, xmax)
            if right <= left:
                continue
            ax.broken_barh(
                [(left, right - left)],
                (row - 0.38, 0.76),
                facecolors=colours[config],
                edgecolors="white",
                gid=f"band-{dtype}-{config}",
            )
            frac = (math.log2(right) - math.log2(left)) / (math.log2(xmax) - math.log2(xmin))
            if frac * width_in * 72 > 5.2 * len(config) + 6:  # label fits inside at 8 pt
                ax.text(math.sqrt(left * right), row, config, ha="center", va="center", fontsize=8)
    ax.set_yticks(range(len(dtypes)))
    ax.set_yticklabels(dtypes)
    ax.set_ylim(len(dtypes) - 0.5, -0.5)
    _draw_markers(ax, info, labels=True)
    ax.set_xlabel(XLABEL)
    ax.legend(
        handles=[Patch(color=colours[c], label=c) for c in configs],
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=8,
        frameon=False,
        title="config",
    )
    fig.suptitle(_title("Launch policy: config per working-set band [lo, hi)", info, None))
    return fig


def modes_figure(results: pd.DataFrame, info: RunInfo | None = None) -> Figure:
    """Best GB/s per size in each residency mode (and the baseline's), one panel per dtype."""
    info = info or RunInfo()
    dtypes = dtypes_in(results)
    fig, axes = _panels(len(dtypes), height=2.8)
    lo, hi = _size_range(results)
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    for i, (ax, dtype) in enumerate(zip(axes, dtypes, strict=True)):
        d = results[results["dtype"] == dtype]
        _byte_axis(ax, lo, hi)
        for j, (facet, sub) in enumerate(facets(d)):
            xs, ys = _series(best_per_size(sub))
            ax.plot(xs, ys, color=cmap(j), lw=1.8, marker="o", ms=3, label=f"best, {facet}")
            xs, ys = _series(sub[(sub["role"] == "baseline") & (sub["status"] == "ok")])
            ax.plot(xs, ys, color=cmap(j), lw=1, ls="--", label=f"{info.baseline}, {facet}")
        ax.set_ylim(bottom=0)
        _finish_panel(ax, info, dtype, "bandwidth (GB/s)", first=(i == 0))
    axes[-1].set_xlabel(XLABEL)
    fig.suptitle(_title("Residency modes compared", info, None))
    return fig


# ---- all figures of a run -----------------------------------------------------------------


def figures(
    results: pd.DataFrame,
    info: RunInfo | None = None,
    bands: Bands | None = None,
    top: int = 3,
    heatmap_top: int = 40,
    verify: pd.DataFrame | None = None,
) -> Iterator[tuple[str, Figure]]:
    """(file stem, figure) for every figure of a run, one at a time (the verify figures when
    `verify`, the run's verify_timing.csv, is given)."""
    info = info or RunInfo()
    many = facets(results)
    for facet, sub in many:
        if info.users:
            yield f"cliff_{facet}", cliff_figure(sub, info, facet)
        yield f"bandwidth_{facet}", bandwidth_figure(sub, info, bands, top, facet)
        if not info.audit:  # an audit's best per size mixes the kernel and the policy: the cliff
            yield f"ratio_{facet}", ratio_figure(sub, info, bands, facet)
        for dtype in dtypes_in(sub):
            d = sub[sub["dtype"] == dtype]
            if not ok_candidates(d).empty:
                yield f"heatmap_{facet}_{dtype}", heatmap_figure(d, info, heatmap_top, facet=facet)
    if len(many) > 1 and not info.audit:
        yield "modes", modes_figure(results, info)
    if bands:
        yield "policy", policy_figure(bands, info, _size_range(results))
    if verify is not None and not verify.empty:
        yield "verify_ratio", verify_figure(verify, info, "ratio")
        yield "verify_parity", verify_figure(verify, info, "parity")


PNG_DPI = 120
PNG_COLOURS = 256  # a palette PNG: a third of the RGBA file's bytes, the same picture to the eye


def _save_png(fig: Figure, path: Path, inputs: str) -> None:
    """The figure as a palette PNG (median cut to PNG_COLOURS, no dithering: a line plot has
    a few dozen colours besides its antialiasing, a heatmap's colormap 256), with the inputs
    digest in a text chunk."""
    import io

    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=PNG_DPI)
    buf.seek(0)
    with Image.open(buf) as im:
        pal = im.convert("RGB").quantize(
            PNG_COLOURS, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
        )
    info = PngInfo()
    if inputs:
        info.add_text(INPUTS_KEY, inputs)
    pal.save(path, format="PNG", optimize=True, pnginfo=info)


def save(
    fig: Figure, out_dir: str | Path, stem: str, formats: Sequence[str], inputs: str = ""
) -> list[Path]:
    """Write a figure in each format. `inputs`: the digest of what it was drawn from
    (inputs_digest), stored in a PNG's text so a later report can tell it is current."""
    from sweeper.files import folder_to_write

    out_dir = folder_to_write(out_dir, "figures' folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", stem)
    paths = []
    for fmt in formats:
        path = out_dir / f"{stem}.{fmt}"
        # the same figure gives the same bytes: no creation date, fixed SVG element ids
        meta = {
            "svg": {"Date": None},
            "pdf": {"CreationDate": None},
        }.get(fmt, {})
        import matplotlib

        # written beside and renamed: a failure leaves the figure that was there, not half a file
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            with matplotlib.rc_context({"svg.hashsalt": "sweeper"}):
                if fmt == "png":
                    _save_png(fig, tmp, inputs)
                else:
                    fig.savefig(tmp, format=fmt, metadata=meta)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        paths.append(path)
    return paths


def write_plots(
    results: pd.DataFrame,
    out_dir: str | Path,
    formats: Sequence[str] = ("png", "svg"),
    info: RunInfo | None = None,
    bands: Bands | None = None,
    top: int = 3,
    heatmap_top: int = 40,
    verify: pd.DataFrame | None = None,
    inputs: str = "",
) -> list[Path]:
    """Render every figure of a run into out_dir; return the files written."""
    paths: list[Path] = []
    for stem, fig in figures(results, info, bands, top, heatmap_top, verify):
        paths += save(fig, out_dir, stem, formats, inputs)
    return paths


# ---- run-folder IO (what api.plot / api.report call) ---------------------------------------

FORMATS = ("png", "svg", "pdf")
_ORDER = ("cliff", "bandwidth", "ratio", "modes", "policy", "verify", "heatmap")


def plot_order(path: Path) -> tuple:
    stem = path.stem
    kind = next((i for i, k in enumerate(_ORDER) if stem.startswith(k)), len(_ORDER))
    return (kind, stem, path.suffix)


def render_plots(
    run_dir: str | os.PathLike,
    formats: Sequence[str] = ("png", "svg"),
    top: int = 3,
    heatmap_top: int = 40,
    force: bool = False,
    loaded: RunData | None = None,
) -> list[Path]:
    """Write every figure of a run into <run>/plots/; files of the formats drawn that no
    longer have a figure are removed, files of other formats are left as they are. Without
    `force`, figures that are current (every PNG drawn from these inputs with these options,
    and a file of each format asked for beside it) are left as they are and returned.
    `loaded`: the run as load_run read it (its reader has it already)."""
    from sweeper.analyze.policy import load_bands
    from sweeper.analyze.store import load_run
    from sweeper.analyze.verdict import load_verify
    from sweeper.errors import SweeperError

    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise SweeperError(f"unknown plot format {bad or formats!r}; use some of {FORMATS}")
    if top < 0:
        raise SweeperError(f"--top {top}: the number of configs drawn, 0 or more")
    if heatmap_top < 1:
        raise SweeperError(f"--heatmap-top {heatmap_top}: config rows per heatmap, 1 or more")
    from sweeper.files import folder_to_write

    folder_to_write(Path(run_dir) / PLOTS, "figures' folder")  # before reading the run
    run = loaded if loaded is not None else load_run(run_dir)
    if run.results.empty:
        raise SweeperError(f"{run.path}: the run has no measured cells yet; nothing to plot")
    out = run.path / PLOTS
    if not force:
        current = _current_plots(run.path, formats, top, heatmap_top)
        if current is not None:
            return sorted(current, key=plot_order)
    info = RunInfo.from_manifest(run.manifest)
    bands = load_bands(run.path)
    verify = load_verify(run.path)
    digest = inputs_digest(run.path, top, heatmap_top)
    written = write_plots(
        run.results, out, formats, info, bands, top, heatmap_top, verify, inputs=digest
    )
    for old in out.glob("*"):
        if old.suffix.lstrip(".") in formats and old not in written:
            old.unlink()
    return sorted(written, key=plot_order)


INPUTS_KEY = "sweeper-inputs"  # a PNG text chunk: the digest of what the figure was drawn from


def inputs_digest(run_dir: Path, top: int = 3, heatmap_top: int = 40) -> str:
    """sha256 over what a run's figures are drawn from: the trial log's content (not its
    file's bytes: gzip stores a time; an archive is labelled the same whatever its
    compression, so recompressing leaves the figures current), the manifest, the pruned
    configs' log (content, as the trials'), the policy and verify's timing where they exist,
    the drawing options and sweeper's version."""
    import hashlib

    from sweeper import __version__
    from sweeper.files import file_bytes
    from sweeper.runfolder import (
        ARCHIVES,
        MANIFEST,
        POLICY,
        PRUNED,
        TRIALS,
        TRIALS_GZ,
        VERIFY_CSV,
        read_archive,
        read_log,
    )

    h = hashlib.sha256(f"sweeper {__version__} top={top} heatmap_top={heatmap_top}".encode())
    for name in (TRIALS, *ARCHIVES, MANIFEST, PRUNED, POLICY, VERIFY_CSV):
        if name == PRUNED:
            got = read_log(run_dir, PRUNED)
            if got is not None:
                h.update(f"\n{PRUNED}\n".encode())
                h.update(got[1])
            continue
        path = run_dir / name
        if not path.exists():
            continue
        if name in ARCHIVES:
            h.update(f"\n{TRIALS_GZ}\n".encode())
            h.update(read_archive(path))
            continue
        h.update(f"\n{name}\n".encode())
        h.update(file_bytes(path))
    return h.hexdigest()


def _png_inputs(path: Path) -> str | None:
    from PIL import Image

    try:
        with Image.open(path) as im:
            return im.text.get(INPUTS_KEY)  # type: ignore[attr-defined]
    except OSError:
        return None


def _current_plots(
    run_dir: Path, formats: Sequence[str], top: int, heatmap_top: int
) -> list[Path] | None:
    """The figure files of these formats if every PNG is current for these options and each
    has a file of every format asked for; None if anything must be drawn."""
    pngs = list((run_dir / PLOTS).glob("*.png"))
    digest = inputs_digest(run_dir, top, heatmap_top)
    if not pngs or any(_png_inputs(p) != digest for p in pngs):
        return None
    files = [p.with_suffix(f".{fmt}") for p in pngs for fmt in formats]
    return files if all(f.exists() for f in files) else None


def _plots_stale(run_dir: Path) -> bool:
    """The figures must be drawn again: none yet, or a PNG drawn from other inputs (content,
    not file times: a fresh clone's times say nothing)."""
    return _current_plots(run_dir, ("png",), 3, 40) is None
