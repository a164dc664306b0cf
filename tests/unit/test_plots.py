"""Plots on synthetic runs with known structure: a cliff at L2, two modes, a non-ok cell."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pandas as pd
import pytest

from sweeper import units
from sweeper.analyze import policy as policymod
from sweeper.report import plots, tables
from sweeper.report.plots import MiB, RunInfo

L2 = 64 * MiB
PERSIST = 40 * MiB
ITEMSIZE = {"fp32": 4, "fp16": 2}
SIZES = [1 * MiB, 4 * MiB, 16 * MiB] + [m * MiB for m in range(24, 161, 8)] + [256 * MiB, 512 * MiB]
CONFIGS = [
    "v16_u4_ld-cs_st-cs",
    "v16_u4_ld-def_st-cs",
    "v16_u4_ld-def_st-def",
    "v8_u2_ld-def_st-def",
]
STREAMING = CONFIGS[0]
BAD_CELL = ("hot", "fp16", 40 * MiB, CONFIGS[1])  # the one non-ok cell
BOUNDARY = 68 * MiB  # midway between the measured 64 MiB and 72 MiB
PRUNED = {
    "config": "v32_u8_ld-cs_st-cs",
    "mode": "hot",
    "dtype": "fp16",
    "reason": "more than 0.5% behind the best at every screening size it was measured at",
    "ws_bytes": 40 * 2**20,
    "shortfall": 0.0312,
    "sizes": 10,
}
CLIMB = {"hot/fp16": {"rounds": 3, "cells": 120, "configs": 57, "converged": True}}


def _gbps(mode: str, ws: int, config: str | None) -> float:
    """Hot: L2-resident up to L2, except streaming loads in (32 MiB, L2] (the v2 cliff of
    seeds/L2_BAND_CLIFF.md); DRAM above L2, where streaming wins."""
    in_l2 = mode == "hot" and ws <= L2
    if config is None:  # torch
        return 2900.0 if in_l2 else 950.0
    if in_l2 and config == STREAMING:
        return 1200.0 if ws > 32 * MiB else 2850.0
    if in_l2:
        return 3000.0 - 100 * CONFIGS.index(config)
    return 1100.0 if config == STREAMING else 1000.0 - 20 * CONFIGS.index(config)


def synthetic_results(modes=("hot", "cold"), run_id="r1", gpu="testgpu") -> pd.DataFrame:
    rows = []
    for mode in modes:
        for dtype, itemsize in ITEMSIZE.items():
            for ws in SIZES:
                base = dict(
                    run_id=run_id,
                    gpu=gpu,
                    mode=mode,
                    pattern="preallocated",
                    dtype=dtype,
                    n=ws // (2 * itemsize),
                    ws_bytes=ws,
                    phase="sweep",
                    status="ok",
                    status_detail="",
                    n_samples=30,
                    grid="stride4",
                    variant_id="",
                )
                torch_gbps = _gbps(mode, ws, None)
                torch_us = ws / torch_gbps / 1e3
                copy_gbps = 1.05 * max(_gbps(mode, ws, c) for c in CONFIGS)
                rows.append(
                    {
                        **base,
                        "role": "baseline",
                        "config": "torch",
                        "gbps": torch_gbps,
                        "time_us": torch_us,
                        "copy_gbps": copy_gbps,
                    }
                )
                rows.append(
                    {
                        **base,
                        "role": "copy",
                        "config": "copy",
                        "gbps": copy_gbps,
                        "time_us": ws / copy_gbps / 1e3,
                        "copy_gbps": copy_gbps,
                    }
                )
                for config in CONFIGS:
                    g = _gbps(mode, ws, config)
                    t = ws / g / 1e3
                    row = {
                        **base,
                        "role": "candidate",
                        "config": config,
                        "gbps": g,
                        "time_us": t,
                        "time_lo_us": t * 0.98,
                        "time_hi_us": t * 1.02,
                        "base_time_us": torch_us,
                        "ratio": torch_us / t,
                        "ratio_lo": 0.97 * torch_us / t,
                        "ratio_hi": 1.03 * torch_us / t,
                        "copy_gbps": copy_gbps,
                        "vec_bytes": 16,
                        "unroll": 4,
                        "block": 256,
                        "load_hint": "cs" if config == STREAMING else "default",
                        "store_hint": "cs",
                        "variant_id": f"{dtype}-{config}-abc",
                    }
                    if (mode, dtype, ws, config) == BAD_CELL:
                        row.update(
                            status="mismatch",
                            status_detail="max abs err 3.0 at index 17",
                            gbps=9999.0,
                        )
                    rows.append(row)
    from sweeper.analyze.store import coerce

    return coerce(pd.DataFrame(rows))


def synthetic_manifest(modes=("hot", "cold"), run_id="r1", gpu="testgpu") -> dict:
    return {
        "run_id": run_id,
        "gpu": gpu,
        "device": {
            "name": "Test GPU 64MB",
            "cc": [8, 9],
            "sm_count": 128,
            "l2_bytes": L2,
            "persisting_l2_max_bytes": PERSIST,
            "dram_peak_gbps": 1008.0,
            "memory_bytes": 24 << 30,
            "driver_version": "575.51",
        },
        "plan": {
            "path": "sweeps/test.json",
            "plan_hash": "abc123",
            "resolution": 8,
            "l2_bytes": L2,
            "dense_lo_bytes": 24 * MiB,
            "dense_hi_bytes": 160 * MiB,
        },
        "modes": list(modes),
        "grid": {"configs": len(CONFIGS)},
        "baseline": "torch.relu",
        "versions": {
            "python": "3.11.2",
            "numba": "0.61.0",
            "numba_cuda": "0.30.0",
            "numpy": "2.1.0",
            "torch": "2.7.0",
        },
        "git_commit": "deadbeef",
        "started": "2025-01-01T00:00:00Z",
        "finished": "2025-01-01T01:00:00Z",
        "pruned": [PRUNED],
        "climb": CLIMB,
        "guards": [
            {
                "cell": "hot/fp16/40MiB/" + CONFIGS[1],
                "status": "mismatch",
                "detail": "max abs err 3.0 at index 17",
            }
        ],
        "status": "complete",
        "timing": {
            "prepare_s": 0.5,
            "hot/fp32/climb_s": 40.0,
            "hot/fp32/screen_s": 120.0,
            "hot/fp32/sweep_s": 3000.0,
            "hot/fp32/refine_points": 12,
            "total_s": 3125.0,
        },
    }


def synthetic_bands() -> dict:
    # policy: default loads through L2, streaming above it; the boundary sits midway
    # between the measured sizes that bracket it, as sweeper/analyze/policy.py places it
    return {d: [(0, BOUNDARY, CONFIGS[1]), (BOUNDARY, None, STREAMING)] for d in ITEMSIZE}


def write_synthetic_run(path: Path, modes=("hot", "cold")) -> Path:
    from sweeper.analyze.store import write_run

    return write_run(path, synthetic_manifest(modes), synthetic_results(modes))


@pytest.fixture
def df() -> pd.DataFrame:
    return synthetic_results()


@pytest.fixture
def info() -> RunInfo:
    return RunInfo.from_manifest(synthetic_manifest())


def _hot(df):
    return df[df["mode"] == "hot"]


def _line(ax, gid):
    found = [ln for ln in ax.get_lines() if ln.get_gid() == gid]
    assert len(found) == 1, f"expected one line with gid {gid!r}, found {len(found)}"
    return found[0]


def test_run_info_from_manifest(info):
    assert info.l2_bytes == L2 and info.persisting_l2_max_bytes == PERSIST
    assert info.dense_lo_bytes == 24 * MiB and info.gpu == "testgpu" and info.run_id == "r1"
    assert [label for _, label in info.markers()] == ["32 MiB", "persisting-L2 max", "L2", "2×L2"]


def test_best_per_size_ignores_non_ok_rows(df):
    best = tables.best_per_size(df)
    # one row per (mode, dtype, size)
    assert len(best) == 2 * 2 * len(SIZES)
    mode, dtype, ws, config = BAD_CELL
    cell = best[(best["mode"] == mode) & (best["dtype"] == dtype) & (best["ws_bytes"] == ws)]
    # the mismatching cell claimed 9999 GB/s: it must not win
    assert cell["config"].item() == CONFIGS[2]
    assert cell["gbps"].item() == pytest.approx(2800.0)
    other = best[(best["mode"] == mode) & (best["dtype"] == dtype) & (best["ws_bytes"] == 48 * MiB)]
    assert other["config"].item() == CONFIGS[1]


def test_bandwidth_figure_axes_markers_and_sampled_points(df, info):
    fig = plots.bandwidth_figure(_hot(df), info, synthetic_bands(), facet="hot")
    axes = [ax for ax in fig.axes if ax.get_title(loc="left")]
    assert [ax.get_title(loc="left") for ax in axes] == ["fp32", "fp16"]
    assert "testgpu" in fig.get_suptitle() and "hot" in fig.get_suptitle()
    assert "r1" in fig.get_suptitle()
    for ax in axes:
        assert ax.get_xscale() == "log"
        assert "GB/s" in ax.get_ylabel()
        assert list(_line(ax, "marker-L2").get_xdata()) == [L2, L2]
        assert list(_line(ax, "marker-2×L2").get_xdata()) == [2 * L2, 2 * L2]
        assert list(_line(ax, "marker-32 MiB").get_xdata()) == [32 * MiB, 32 * MiB]
        assert len(_line(ax, "sampled").get_xdata()) == len(SIZES)
        assert len(_line(ax, "best").get_xdata()) == len(SIZES)
        for gid in ("baseline", "copy", "policy"):
            _line(ax, gid)
        assert ax.get_legend() is not None
    assert "MiB" in axes[-1].get_xlabel()
    # tick labels are MiB numbers
    labels = {t.get_text() for t in axes[-1].get_xticklabels()}
    assert {"1", "64", "512"} <= labels


def _marker_labels(fig):
    return [t for ax in fig.axes for t in ax.texts if str(t.get_gid()).startswith("marker-label-")]


@pytest.mark.parametrize("which", ["bandwidth", "ratio", "policy"])
def test_marker_labels_stand_above_the_panel_and_apart(df, info, which):
    """The labels of 32 MiB and persisting-L2 max (37.5 MiB apart by 17%) used to sit on the
    data's cliff and touch; now they are above the panel, clear of each other."""
    if which == "policy":
        fig = plots.policy_figure(synthetic_bands(), info)
    else:
        make = plots.bandwidth_figure if which == "bandwidth" else plots.ratio_figure
        fig = make(_hot(df), info, synthetic_bands(), facet="hot")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()
    labels = _marker_labels(fig)
    assert sorted(t.get_text() for t in labels) == sorted(lab for _, lab in info.markers())
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in labels]
    for t, box in zip(labels, boxes, strict=True):
        panel = t.axes.get_window_extent(renderer)
        assert box.y0 >= panel.y1 - 0.5, t.get_text()  # above the panel, not on the data
        assert box.y1 <= fig.bbox.y1 + 0.5, t.get_text()  # and inside the figure
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not a.overlaps(b)


def test_policy_line_follows_the_bands(df, info):
    fig = plots.bandwidth_figure(_hot(df), info, synthetic_bands())
    ax = fig.axes[0]
    policy = _line(ax, "policy")
    xs, ys = list(policy.get_xdata()), list(policy.get_ydata())
    # below L2 the policy picks default loads (3000-100 GB/s), above it streaming (1100)
    assert ys[xs.index(16 * MiB)] == pytest.approx(2900.0)
    assert ys[xs.index(256 * MiB)] == pytest.approx(1100.0)
    assert ys[xs.index(L2)] == pytest.approx(2900.0)
    assert ys[xs.index(72 * MiB)] == pytest.approx(1100.0)


def test_ratio_figure_has_ci_and_parity(df, info):
    fig = plots.ratio_figure(_hot(df), info, facet="hot")
    ax = fig.axes[0]
    assert list(_line(ax, "parity").get_ydata()) == [1.0, 1.0]
    assert any(c.get_gid() == "ci" for c in ax.collections)
    assert "torch" in ax.get_ylabel()


def test_heatmap_values_in_range_with_100_at_best(df, info):
    import numpy as np

    d = _hot(df)
    d = d[d["dtype"] == "fp16"]
    fig = plots.heatmap_figure(d, info, top_n=3)
    ax = fig.axes[0]
    (im,) = [i for i in ax.get_images() if i.get_gid() == "heatmap"]
    a = np.ma.filled(im.get_array().astype(float), np.nan)
    # the 3 configs that win somewhere (fp16 hot: CONFIGS[2] wins the size where CONFIGS[1]
    # is not ok); every sampled size a column
    assert a.shape == (3, len(SIZES))
    assert tables.shown_configs(d, 1) == [STREAMING]  # most wins: 14 sizes above L2
    assert np.nanmin(a) >= 0 and np.nanmax(a) <= 100
    assert np.allclose(np.nanmax(a, axis=0), 100.0)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert STREAMING not in labels[:1]  # streaming loses in L2: not ranked first
    # the non-ok cell is marked
    assert len(_line(ax, "not-ok").get_xdata()) == 1
    assert "MiB" in ax.get_xlabel()


def test_heatmap_top_n_limits_rows(df, info):
    d = _hot(df)
    d = d[d["dtype"] == "fp32"]
    fig = plots.heatmap_figure(d, info, top_n=3)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    # the two winners (default loads in L2, streaming above), + the best mean %, by mean %
    assert labels == [CONFIGS[1], CONFIGS[2], STREAMING]
    assert "3 of 4" in fig.get_suptitle()


def test_policy_figure_one_span_per_band(info):
    fig = plots.policy_figure(synthetic_bands(), info, (MiB, 512 * MiB))
    ax = fig.axes[0]
    gids = sorted(c.get_gid() for c in ax.collections if c.get_gid())
    assert gids == sorted(f"band-{d}-{c}" for d in ITEMSIZE for c in (CONFIGS[1], STREAMING))
    assert [t.get_text() for t in ax.get_yticklabels()] == ["fp32", "fp16"]


def test_band_config_is_lo_closed_hi_open():
    bands = synthetic_bands()["fp32"]
    assert tables.band_config(bands, BOUNDARY - 1) == CONFIGS[1]
    assert tables.band_config(bands, BOUNDARY) == STREAMING
    assert tables.band_config(bands, 1) == CONFIGS[1]


def test_figures_one_set_per_mode(df, info):
    stems = [s for s, _ in plots.figures(df, info, synthetic_bands())]
    for mode in ("hot", "cold"):
        assert f"bandwidth_{mode}" in stems and f"ratio_{mode}" in stems
        assert f"heatmap_{mode}_fp32" in stems
    assert "modes" in stems and "policy" in stems


def test_write_plots_png_and_svg(df, info, tmp_path):
    paths = plots.write_plots(_hot(df), tmp_path, ("png", "svg"), info, synthetic_bands())
    assert {p.suffix for p in paths} == {".png", ".svg"}
    for p in paths:
        assert p.exists() and p.stat().st_size > 1000
    assert (tmp_path / "bandwidth_hot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in (tmp_path / "bandwidth_hot.svg").read_text()[:500]


def test_fmt_mib():
    assert units.fmt_mib(64 * MiB) == "64"
    assert units.fmt_mib(33.6e6, 3) == "32"
    assert units.fmt_mib(MiB // 2) == "0.5"
    assert units.fmt_mib(4096) == "4 KiB"
    assert units.fmt_mib(1234 * MiB, 3) == "1234"  # never 1.23e+03


def test_bands_from_a_built_policy(tmp_path):
    from sweeper.analyze import policy

    assert policymod.load_bands(tmp_path) is None
    doc = policy.build_policy(synthetic_results(("hot",)), synthetic_manifest(("hot",)))
    policy.write_policy(tmp_path / "policy.json", doc)
    bands = policymod.load_bands(tmp_path)
    assert set(bands) == {"fp32", "fp16"}
    for dtype, bs in bands.items():
        # default loads inside L2, streaming above it, one boundary between 64 and 72 MiB
        assert [c for _, _, c in bs][-1] == STREAMING
        assert 64 * MiB < bs[-1][0] <= 72 * MiB and bs[-1][1] is None and bs[0][0] == 0
        assert tables.band_config(bs, 32 * MiB) != STREAMING, dtype


def synthetic_verify(passes: int = 2) -> pd.DataFrame:
    """verify_timing.csv of known shape: fp32 loses at 16 MiB in every pass and at 4 MiB in
    pass 1 only; fp16 is 3% off its Numba kernel at 1 MiB in every pass."""
    rows = []
    for p in range(1, passes + 1):
        for dtype in ITEMSIZE:
            for ws in SIZES:
                ratio = 1.1
                if dtype == "fp32" and (ws == 16 * MiB or (ws == 4 * MiB and p == 1)):
                    ratio = 0.97
                vs_numba = 1.03 if dtype == "fp16" and ws == 1 * MiB else 1.0
                rows.append(
                    {"pass": p, "mode": "hot", "dtype": dtype, "n": ws // (2 * ITEMSIZE[dtype]),
                     "ws_bytes": ws, "config": CONFIGS[1], "time_us": 10.0, "gbps": ws / 1e4,
                     "numba_time_us": 10.0 / vs_numba, "vs_numba": vs_numba,
                     "vs_numba_lo": vs_numba - 0.01, "vs_numba_hi": vs_numba + 0.01,
                     "baseline": "torch", "ratio": ratio, "ratio_lo": ratio - 0.01,
                     "ratio_hi": ratio + 0.01, "bit_exact_after_timing": True,
                     "x_addr": 1 << 32}
                )  # fmt: skip
    return pd.DataFrame(rows)


def test_verify_ratio_figure_marks_only_losses_of_every_pass(info):
    fig = plots.verify_figure(synthetic_verify(), info, "ratio")
    fp32, fp16 = fig.axes[0], fig.axes[1]
    assert [ax.get_title(loc="left") for ax in fig.axes] == ["fp32", "fp16"]
    assert list(_line(fp32, "lost").get_xdata()) == [16 * MiB]  # not 4 MiB: pass 1 only
    assert not [ln for ln in fp16.get_lines() if ln.get_gid() == "lost"]
    assert len(_line(fp32, "pass2").get_xdata()) == len(SIZES)
    assert "2 passes" in fig.get_suptitle()


def test_verify_parity_figure_shows_the_band_and_a_one_pass_csv_without_pass_column(info):
    old = synthetic_verify(passes=1).drop(columns=["pass", "x_addr"])  # before --passes
    fig = plots.verify_figure(old, info, "parity")
    fp16 = fig.axes[1]
    ys = dict(zip(_line(fp16, "pass1").get_xdata(), _line(fp16, "pass1").get_ydata(), strict=True))
    assert ys[1 * MiB] == pytest.approx(1.03)
    assert any(c.get_gid() == "band" for c in fp16.patches + fp16.collections)
    assert "1 pass " in fig.get_suptitle() or "1 pass," in fig.get_suptitle()


def test_figures_include_verify_only_with_a_verify_table(df, info):
    without = [stem for stem, _ in plots.figures(_hot(df), info)]
    with_v = [stem for stem, _ in plots.figures(_hot(df), info, verify=synthetic_verify())]
    assert "verify_ratio" not in without
    assert set(with_v) - set(without) == {"verify_ratio", "verify_parity"}


def test_rendering_the_same_data_twice_gives_the_same_bytes(tmp_path):
    from sweeper.report.plots import RunInfo, ratio_figure, save

    res = synthetic_results()
    paths = []
    for d in ("a", "b"):
        fig = ratio_figure(res, RunInfo.from_manifest(synthetic_manifest()))
        paths.append(save(fig, tmp_path / d, "ratio", ("png", "svg", "pdf")))
    for a, b in zip(*paths, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name


def test_plots_are_current_by_their_inputs_content_not_by_file_times(tmp_path):
    """A PNG carries the digest of what it was drawn from: a report on a fresh clone (new file
    times) draws nothing again; a changed input does; the same inputs give the same bytes."""
    import os

    from sweeper.analyze import policy
    from sweeper.report.plots import _plots_stale, render_plots

    run = write_synthetic_run(tmp_path / "r1", modes=("hot",))
    render_plots(run)
    pngs = sorted((run / "plots").glob("*.png"))
    first = {p: p.read_bytes() for p in [*pngs, *(run / "plots").glob("*.svg")]}
    assert pngs and not _plots_stale(run)
    for p in run.rglob("*"):  # a checkout writes every file anew, in any order
        os.utime(p, (1, 1 if p.suffix == ".png" else 2))
    assert not _plots_stale(run)
    assert render_plots(run) and all(p.stat().st_mtime == 1 for p in pngs)  # current: untouched
    render_plots(run, force=True)
    assert all(p.stat().st_mtime > 1 for p in pngs)
    assert {p: p.read_bytes() for p in first} == first  # drawn again: the same bytes
    (run / "plots" / pngs[0].with_suffix(".svg").name).unlink()
    render_plots(run)  # a format asked for is missing: drawn
    assert {p: p.read_bytes() for p in first} == first
    from sweeper.analyze.store import load_run

    doc = policy.build_policy(load_run(run).results, load_run(run).manifest)
    policy.write_policy(run / "policy.json", doc)
    assert _plots_stale(run)  # a new input: the policy figure is missing, the rest outdated


def test_pngs_are_palette_images_that_carry_their_inputs_digest(tmp_path):
    """A PNG is written as a 256-colour palette image (a third of the RGBA file's bytes) and
    keeps the digest of its inputs, which tells a later report that it is current."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    from sweeper.report.plots import INPUTS_KEY, PNG_COLOURS, _png_inputs, save

    fig, ax = plt.subplots()
    ax.plot(range(50), [x * x for x in range(50)], label="a")
    ax.imshow([[i * j for i in range(64)] for j in range(64)], cmap="viridis")
    (path,) = save(fig, tmp_path, "figure", ["png"], inputs="d" * 64)
    with Image.open(path) as im:
        assert im.mode == "P"
        assert len(im.getcolors(maxcolors=PNG_COLOURS + 1) or []) <= PNG_COLOURS
        assert im.text[INPUTS_KEY] == "d" * 64
    assert _png_inputs(path) == "d" * 64
    again = save(fig, tmp_path / "b", "figure", ["png"], inputs="d" * 64)[0]
    assert again.read_bytes() == path.read_bytes()  # the same figure gives the same bytes
    plt.close(fig)


SHIPPED = sorted(
    p.parent for p in (Path(__file__).resolve().parents[2] / "results").glob("*/*/plots")
)


@pytest.mark.parametrize("run", SHIPPED, ids=lambda p: p.name)
def test_a_shipped_runs_figures_are_current_so_its_report_draws_none(run):
    """Every shipped run's PNGs were drawn from its files as they are: `sweeper report` on it
    draws nothing (a stale figure shows what its run no longer says)."""
    assert not plots._plots_stale(run)
