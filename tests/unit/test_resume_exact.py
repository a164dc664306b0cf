"""A run stopped at any cell and resumed measures what the run in one go measures.

The run: a replay of results/h200/aw-4's fp16 part (one dtype of a climbing run with refinement
and bracket rounds), from a copy holding that dtype's cells alone. It is stopped (as by Ctrl-C,
a KeyboardInterrupt from the executor) at points spread over its cells, most of them in its
last fifth, where the refinement and bracket rounds decide from the cells recorded so far; each
stop is resumed, and the next segment is stopped at the next point.
"""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import pytest

from sweeper.analyze.store import load_manifest, read_trials, with_records
from sweeper.plan.planfile import load_plan
from sweeper.run.replay import ReplayExecutor
from sweeper.run.runner import CLIMB_ROUND, RunConfig, start
from sweeper.run.search import search_params

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "results" / "h200" / "aw-4"
MODE, DTYPE = "after-write", "fp16"
# where the run is stopped, as fractions of its candidate cells: 8 of 14 in the last fifth, 7
# of them in its refinement and bracket rounds (its last 6%)
STOPS = (0.02, 0.2, 0.4, 0.6, 0.75, 0.85, 0.9, 0.945, 0.96, 0.975, 0.985, 0.99, 0.993, 0.997)


class Stopped(ReplayExecutor):
    """The replay, interrupted at its `stop_at`-th call of `at` in a segment (None: never):
    "measure" (a candidate cell) or "reference" (a size's baseline and copy cells, before any
    of that size's cells is recorded)."""

    def __init__(self, source: ReplayExecutor, at: str = "measure"):
        self.__dict__.update(source.__dict__)
        self.at = at
        self.stop_at: int | None = None
        self.calls = 0

    def _count(self, method: str) -> None:
        if method == self.at:
            self.calls += 1
            if self.calls == self.stop_at:
                raise KeyboardInterrupt

    def measure(self, *args):
        self._count("measure")
        return super().measure(*args)

    def reference(self, *args):
        self._count("reference")
        return super().reference(*args)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> ReplayExecutor:
    """The shipped run's fp16 cells in a run folder of their own."""
    folder = tmp_path_factory.mktemp("aw-4-fp16")
    for log in ("trials.jsonl", "pruned.jsonl"):
        with lzma.open(SHIPPED / f"{log}.xz", "rt") as f:
            lines = [line for line in f if json.loads(line).get("dtype") == DTYPE]
        (folder / log).write_text("".join(lines))
    m = json.loads((SHIPPED / "manifest.json").read_text())
    m["dtypes"] = [DTYPE]
    m["climb"] = {k: v for k, v in m["climb"].items() if k == f"{MODE}/{DTYPE}"}
    m.pop("records", None)  # a run folder of its own: it records its own logs
    (folder / "manifest.json").write_text(json.dumps(with_records(folder, m)))
    return ReplayExecutor(folder)


def config(root: Path, run_id: str) -> RunConfig:
    m = load_manifest(SHIPPED)
    return RunConfig(
        plan=load_plan(ROOT / "sweeps" / "h200.json"),
        plan_path="sweeps/h200.json",
        dtypes=(DTYPE,),
        modes=(MODE,),
        search=search_params(m["search"]),
        out_root=str(root),
        run_id=run_id,
    )


def candidates(run_dir: Path) -> list[dict]:
    return [t for t in read_trials(run_dir)[0] if t["role"] == "candidate"]


def search_record(m: dict) -> dict:
    """What a manifest records of the search's decisions."""
    timing = {k: v for k, v in m["timing"].items() if k.endswith("_points")}
    return {k: m.get(k) for k in ("climb", "pruned", "open_brackets", "status")} | timing


def test_a_run_stopped_at_any_point_and_resumed_measures_the_run_in_one_go(recorded, tmp_path):
    whole = start(config(tmp_path, "whole"), Stopped(recorded))
    want = candidates(whole)
    stops = sorted({max(1, round(f * len(want))) for f in STOPS})
    assert len(stops) == len(STOPS) and sum(s > 0.8 * len(want) for s in stops) >= 8
    # the stops fall in every stage: the seed's screening, the climb, the sweep, and the
    # refinement and bracket rounds (cells at sizes the plan does not have)
    planned = {e["n"] for e in config(tmp_path, "x").plan.sizes(DTYPE)}
    at = [want[s - 1] for s in stops]
    assert any(t["phase"] == "screen" and not t.get(CLIMB_ROUND) for t in at)
    assert any(t.get(CLIMB_ROUND) for t in at)
    assert any(t["phase"] == "sweep" for t in at)
    assert sum(t["phase"] == "refine" and t["n"] not in planned for t in at) >= 7

    ex = Stopped(recorded)
    run_dir = tmp_path / "h200" / "parts"
    resume, done = None, 0
    for stop in stops:
        ex.calls, ex.stop_at = 0, stop - done
        with pytest.raises(KeyboardInterrupt):
            start(config(tmp_path, "parts"), ex, resume=resume)
        resume = run_dir
        assert load_manifest(run_dir)["status"] == "interrupted"
        # what the run in one go had measured before that cell, in its order
        got = [t["cell_key"] for t in candidates(run_dir)]
        assert got == [t["cell_key"] for t in want[: stop - 1]], f"stopped at {stop}"
        done = len(got)
    ex.calls, ex.stop_at = 0, None
    start(config(tmp_path, "parts"), ex, resume=run_dir)

    trials = read_trials(run_dir)[0]
    keys = [t["cell_key"] for t in trials]
    assert len(keys) == len(set(keys))  # no cell recorded twice
    assert sorted(keys) == sorted(t["cell_key"] for t in read_trials(whole)[0])
    assert [t["cell_key"] for t in candidates(run_dir)] == [t["cell_key"] for t in want]
    got, full = load_manifest(run_dir), load_manifest(whole)
    assert search_record(got) == search_record(full)
    assert got["status"] == "complete" and len(got["resumed"]) == len(stops)


def test_a_run_stopped_in_a_baseline_call_resumes_as_the_run_in_one_go(recorded, tmp_path):
    whole = start(config(tmp_path, "whole"), recorded)
    sizes = len({(t["mode"], t["n"]) for t in read_trials(whole)[0]})
    ex = Stopped(recorded, at="reference")
    run_dir = tmp_path / "h200" / "parts"
    resume, done = None, 0
    # in the seed's screening, the sweep, and the refinement rounds' new sizes
    for stop in (2, sizes // 2, sizes - 3, sizes - 1):
        ex.calls, ex.stop_at = 0, stop - done
        with pytest.raises(KeyboardInterrupt):
            start(config(tmp_path, "parts"), ex, resume=resume)
        resume = run_dir
        done = len({(t["mode"], t["n"]) for t in read_trials(run_dir)[0] if t["role"] == "copy"})
        assert done == stop - 1
    ex.calls, ex.stop_at = 0, None
    start(config(tmp_path, "parts"), ex, resume=run_dir)
    keys = [t["cell_key"] for t in read_trials(run_dir)[0]]
    assert len(keys) == len(set(keys))
    assert keys == [t["cell_key"] for t in read_trials(whole)[0]]
