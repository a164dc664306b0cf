"""benchmarks/cell_cost.py and gpuwork.phase_split: host and GPU time per cell by phase.

The shipped hot-7 folder is read twice: by the script, and here straight from its files
(manifest.json, trials.jsonl.xz), and the figures must agree; a synthetic manifest with phase
names the classic executor never books (as a batched executor records its own) must come out
with its host time per phase and no GPU figure made up for them.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import lzma
from pathlib import Path

import pytest

from sweeper.analyze import gpuwork
from sweeper.stats import Stopping, calls_per_sample

ROOT = Path(__file__).resolve().parents[2]
HOT7 = ROOT / "results" / "h200" / "hot-7"
_spec = importlib.util.spec_from_file_location("cell_cost", ROOT / "benchmarks/cell_cost.py")
cc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cc)


@functools.cache
def hot7_files() -> tuple[dict, list[dict]]:
    m = json.loads((HOT7 / "manifest.json").read_text())
    with lzma.open(HOT7 / "trials.jsonl.xz", "rt") as f:
        trials = [json.loads(line) for line in f if line.strip()]
    return m, trials


@functools.cache
def hot7_cost() -> dict:
    return cc.load(str(HOT7))


def _row(c: dict, phase: str) -> dict:
    (row,) = [r for r in c["rows"] if r["phase"] == phase]
    return row


def test_hot7_host_time_per_phase_is_the_manifests():
    m, trials = hot7_files()
    c = hot7_cost()
    t = m["timing"]
    phases = t["cell_phases_s"]
    cells = sum(1 for r in trials if r["role"] == "candidate")
    assert c["cells"] == cells
    assert c["reference"] == sum(1 for r in trials if r["role"] == "copy")
    for phase, s in phases.items():
        row = _row(c, phase)
        assert row["host_s"] == pytest.approx(s)
        assert row["cells"] == cells  # hot-7 has one mode
    assert _row(c, "cells, all phases")["host_s"] == pytest.approx(sum(phases.values()))
    compile_s = sum(v for k, v in t.items() if k.endswith("/climb_compile_s"))
    assert _row(c, "hot/climb_compile")["host_s"] == pytest.approx(compile_s)
    assert _row(c, "prepare")["host_s"] == pytest.approx(t["prepare_s"])
    rest = t["total_s"] - sum(phases.values()) - compile_s - t["prepare_s"] - t["ceiling_s"]
    assert _row(c, "rest")["host_s"] == pytest.approx(rest)
    assert c["wall_s"] == t["total_s"]
    # every phase the manifest has is a row, and the rows are nothing else
    names = {r["phase"] for r in c["rows"]}
    assert names == set(phases) | {"cells, all phases", "hot/climb_compile", "prepare",
                                   "ceiling", "rest"}  # fmt: skip


def test_hot7_gpu_split_agrees_with_gpu_work_and_the_recorded_samples():
    m, trials = hot7_files()
    c = hot7_cost()
    parts = c["parts"]
    # the floor `sweeper gpu-work` prints, summed over its dtype x search-phase groups
    work, _, _ = gpuwork.gpu_work(str(HOT7))
    for part in gpuwork.PARTS:
        assert parts[part] == pytest.approx(sum(w[part] for w in work.values()))
    # the timed part from medians x counts, against the recorded samples summed one by one
    stop = Stopping(**m["stopping"])
    summed = ref = 0.0
    for r in trials:
        if r["status"] != "ok" or r["role"] not in ("candidate", "copy"):
            continue
        calls = calls_per_sample(r["base_time_us"], stop)
        if r["role"] == "candidate":
            summed += calls * (sum(r["samples_us"]) + sum(r["base_samples_us"])) / 1e6
        else:
            ref += r["n_samples"] * calls * (r["time_us"] + r["base_time_us"]) / 1e6
    assert parts["timed"] == pytest.approx(summed, rel=0.02)
    assert ref < parts["reference"] < 2 * ref  # the warm-up calls on top, at most one per call
    # by phase: rounds hold the timed, warm-up and reference calls; the GPU cannot have worked
    # longer in a phase than the host waited in it
    rounds = _row(c, "hot/rounds")
    assert rounds["gpu_s"] == pytest.approx(parts["timed"] + parts["warm-up"] + parts["reference"])
    assert _row(c, "hot/fresh")["gpu_s"] == pytest.approx(parts["fresh"])
    assert _row(c, "hot/checks")["gpu_s"] == pytest.approx(parts["checks"])
    for r in c["rows"]:
        if r["gpu_s"] is not None:
            assert 0 < r["gpu_s"] < r["host_s"], r
    for phase in ("hot/graphs", "hot/stopping", "hot/summary", "hot/cell", "hot/reference"):
        assert _row(c, phase)["gpu_s"] is None
    assert parts["flush/producer"] == 0.0  # hot mode flushes nothing
    assert c["gpu_s"] == pytest.approx(sum(parts.values()))


def test_the_printed_table_carries_the_computed_figures():
    c = hot7_cost()
    text = "\n".join(cc.one("hot-7", c))
    rounds = _row(c, "hot/rounds")
    ms = 1e3 * rounds["host_s"] / c["cells"]
    assert f"| hot/rounds | {rounds['host_s']:.1f} | {ms:.2f} |" in text
    assert f"wall {c['wall_s']:.1f} s, {c['cells']} cells" in text
    assert f"wall/GPU {c['wall_s'] / c['gpu_s']:.1f}" in text
    assert "checks" in text and "(estimate)" in text


def _synthetic(executor: str | None, phases: dict[str, float]) -> dict:
    harness = {"fresh_input": {"words": 64, "blocked_calls": 16}, "soak_calls": 64}
    if executor:
        harness["executor"] = executor
    return {
        "modes": ["hot"],
        "device": {"l2_bytes": 60 * 2**20},
        "pattern": "preallocated",
        "harness": harness,
        "stopping": {"min_samples": 6, "max_samples": 16, "rel_tol": 0.01},
        "timing": {
            "total_s": 20.0,
            "prepare_s": 1.5,
            "hot/fp32/climb_compile_s": 2.0,
            "hot/fp32/screen_s": 9.0,  # holds cells: not a row of its own
            "cell_phases_s": phases,
            "replay_graphs": {"updated": 3, "instantiated": 1},
        },
    }


def _trials() -> list[dict]:
    cand = {
        "mode": "hot", "dtype": "fp32", "role": "candidate", "status": "ok",
        "ws_bytes": 8 * 2**20, "time_us": 10.0, "base_time_us": 12.0, "n_samples": 8,
        "copy_gbps": 900.0,
    }  # fmt: skip
    copy = {**cand, "role": "copy", "time_us": 9.0, "n_samples": 10}
    bad = {**cand, "status": "mismatch", "time_us": None}
    return [copy, cand, {**cand, "ws_bytes": 4 * 2**20}, bad]


def test_unknown_phase_names_are_shown_with_no_gpu_figure():
    phases = {"hot/launch": 3.0, "hot/sync": 4.5, "hot/readback": 0.5}
    c = cc.cost(_synthetic("batched", phases), _trials())
    assert c["executor"] == "batched"
    assert c["cells"] == 3  # the mismatch cell cost host time too
    for phase, s in phases.items():
        row = _row(c, phase)
        assert row["host_s"] == s and row["gpu_s"] is None
    assert _row(c, "hot/climb_compile")["host_s"] == 2.0
    assert _row(c, "rest")["host_s"] == pytest.approx(20.0 - 8.0 - 1.5 - 2.0)
    assert not any(r["phase"].endswith("screen") for r in c["rows"])
    # the GPU work is known in total: the two ok cells and the reference cell
    assert c["gpu_s"] > 0
    assert _row(c, "cells, all phases")["gpu_s"] == pytest.approx(c["gpu_s"])
    text = "\n".join(cc.one("synthetic", c))
    assert "| hot/sync | 4.5 | 1500.00 | - | - |" in text


def test_a_classic_run_with_a_new_phase_maps_only_the_known_ones():
    phases = {"hot/rounds": 5.0, "hot/checks": 1.0, "hot/fresh": 1.0, "hot/new": 2.0}
    c = cc.cost(_synthetic(None, phases), _trials())
    assert c["executor"] == "classic"
    assert _row(c, "hot/new")["gpu_s"] is None
    assert _row(c, "hot/rounds")["gpu_s"] > 0
    known = sum(r["gpu_s"] for r in c["rows"] if r["phase"].startswith("hot/") and r["gpu_s"])
    assert known == pytest.approx(c["gpu_s"])


def test_side_by_side_prints_the_ratio_of_common_phases():
    a = cc.cost(_synthetic(None, {"hot/rounds": 6.0, "hot/fresh": 3.0}), _trials())
    b = cc.cost(_synthetic("batched", {"hot/rounds": 1.5, "hot/launch": 0.3}), _trials())
    text = "\n".join(cc.side_by_side(["A", "B"], [a, b]))
    assert "| hot/rounds | 2000.00 | 500.00 | 0.25 |" in text  # 6 s and 1.5 s over 3 cells
    assert "| hot/launch | - | 100.00 | - |" in text
    assert "| hot/fresh | 1000.00 | - | - |" in text
    assert "executor classic" in text and "executor batched" in text


def test_the_soak_is_counted_only_below_the_soak_calls():
    stop = Stopping(min_samples=6, max_samples=16, rel_tol=0.01)
    big = {"time_us": 300.0, "base_time_us": 310.0, "n_samples": 8, "ws_bytes": 2**30,
           "copy_gbps": 4000.0}  # fmt: skip
    assert calls_per_sample(310.0, stop) == 1  # 8 x (1 + 1) calls: below 64
    with_soak = gpuwork.split_cell(big, "hot", stop)
    without = gpuwork.split_cell(big, "hot", stop, soak=16)
    assert with_soak["checks"] - without["checks"] == pytest.approx(
        (64 - 16) * 300e-6 + 1.5 * 2**30 / 4000e9
    )
    cold = gpuwork.split_cell(big, "cold", stop, before_s=1e-4)
    assert cold["flush/producer"] == pytest.approx(2 * 8 * 1e-4)
    assert cold["timed"] == pytest.approx(8 * 610e-6)


def test_a_missing_run_is_one_line_and_a_nonzero_exit(tmp_path, capsys):
    assert cc.main([str(tmp_path / "nope")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such run folder" in err[0]


def test_a_manifest_without_timing_is_refused():
    m = _synthetic(None, {})
    del m["timing"]["total_s"]
    with pytest.raises(gpuwork.SweeperError, match="total_s"):
        cc.cost(m, _trials())


def test_a_batched_run_prints_its_measured_gpu_spans():
    m = _synthetic("batched", {"hot/batch-build": 3.0})
    m["timing"]["batch_spans"] = {
        "batches": 4, "gpu_s": 1.5, "topup_batches": 1, "topup_gpu_s": 0.25, "between_s": 0.75,
    }  # fmt: skip
    c = cc.cost(m, _trials())
    text = "\n".join(cc.one("synthetic", c))
    assert (
        "GPU measured: 1.5 s in 4 batches (500.00 ms/cell), 0.2 s of it in 1 of top-up "
        "segments only; 0.8 s between batches" in text
    )
    m["timing"]["batch_spans"].update(calls=2, between_calls_s=0.5, between_topups_s=0.125)
    text = "\n".join(cc.one("synthetic", cc.cost(m, _trials())))
    assert (
        "0.8 s between batches (0.5 s before the first batch of 2 calls, 250.00 ms per call; "
        "0.1 s before top-up batches, 0.1 s before the others)" in text
    )
    m["timing"]["batch_spans"]["size_setups"] = 1  # the other call found its size kept
    text = "\n".join(cc.one("synthetic", cc.cost(m, _trials())))
    assert "of 2 calls, 250.00 ms per call, 1 of them setting their size up; 0.1 s" in text
    b = cc.cost(_synthetic("batched", {"hot/batch-build": 3.0}), _trials())
    assert not any("GPU measured" in line for line in cc.one("b", b))  # none recorded
    both = "\n".join(cc.side_by_side(["A", "B"], [b, c]))
    assert "B: GPU measured: 1.5 s" in both and "A: GPU measured" not in both
