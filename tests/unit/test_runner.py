"""The runner's logic on the CPU: ordering, pairing, pruning, refinement, guards, resume.

Driven through the real runner with a synthetic-GPU executor (sweeper.run.replay.ModelExecutor)
and a replay of a recorded run; nothing here mocks Numba.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sweeper.analyze.store import load_manifest, load_run, read_trials
from sweeper.errors import PlanMismatchError, SweeperError
from sweeper.plan.gpus import lookup
from sweeper.plan.planfile import make_plan
from sweeper.run.replay import ModelExecutor, ReplayExecutor
from sweeper.run.runner import RunConfig, start
from sweeper.run.search import SearchParams
from sweeper.stats import Stopping

L2 = lookup("h200").l2_bytes
CROSS = 0.9 * L2  # where "keep" stops winning and "stream" starts


def unrecorded(manifest: dict) -> dict:
    """A manifest as a run wrote it before manifests recorded their files (no "records"):
    what these tests edit to stand for a run of an earlier version."""
    return {k: v for k, v in manifest.items() if k != "records"}


def stopped(manifest: dict) -> dict:
    """A manifest as a run stopped part way wrote it: status interrupted, no records yet."""
    return {**unrecorded(manifest), "status": "interrupted"}


def keep(ws, l2):  # fast while the data fits comfortably in L2, DRAM-bound after
    return 9000.0 if ws < CROSS else 3600.0


def stream(ws, l2):
    return 6000.0 if ws < CROSS else 4500.0


def stream2(ws, l2):  # within the tolerance of stream: a tie that survives
    return stream(ws, l2) * 0.99


def slow(ws, l2):
    return 1500.0


def baseline(ws, l2):
    return 5000.0 if ws < CROSS else 4300.0


def copy(ws, l2):
    return 4800.0


CURVES = {"keep": keep, "stream": stream, "stream2": stream2, "slow": slow, "bad": stream}


class CeilingModel(ModelExecutor):
    """A model GPU that measures the L2-resident ceiling with "keep" and "stream"."""

    def ceiling_set(self, dtype):
        from sweeper.run.replay import SimpleVariant

        return [SimpleVariant(dtype, "keep"), SimpleVariant(dtype, "stream")]


def model(**kw) -> ModelExecutor:
    return ModelExecutor(
        CURVES, l2_bytes=L2, baseline=baseline, copy=copy, fail={"bad": "mismatch"}, **kw
    )


@pytest.fixture(scope="module")
def plan():
    return make_plan(lookup("h200"), dtypes=["fp32", "int8"])


def cfg(plan, tmp_path, **kw) -> RunConfig:
    kw.setdefault("run_id", "r1")
    return RunConfig(
        plan=plan,
        plan_path="sweeps/h200.json",
        dtypes=("fp32",),
        stopping=Stopping(),
        search=SearchParams(),
        out_root=str(tmp_path),
        **kw,
    )


@pytest.fixture(scope="module")
def complete(plan, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("runs")
    ex = model()
    run_dir = start(cfg(plan, tmp), ex)
    return run_dir, ex


def test_screen_prunes_slow_and_failed_configs_with_reasons(complete):
    run_dir, _ = complete
    m = load_manifest(run_dir)
    pruned = {p["config"]: p["reason"] for p in m["pruned"]}
    assert set(pruned) == {"slow", "bad"}
    assert "failed at screening (mismatch" in pruned["bad"]
    assert "behind the best at every screening size" in pruned["slow"]
    slow = next(p for p in m["pruned"] if p["config"] == "slow")
    assert slow["shortfall"] > 0.015 and slow["ws_bytes"] > 0 and slow["sizes"] >= 4
    # A failing cell is recorded as a guard finding, not silently dropped.
    assert any(g["status"] == "mismatch" for g in m["guards"])


def test_survivors_are_swept_over_every_planned_size(complete, plan):
    run_dir, _ = complete
    df = load_run(run_dir).results
    cands = df[df.role == "candidate"]
    planned = {e["n"] for e in plan.sizes("fp32")}
    for c in ("keep", "stream", "stream2"):
        assert planned <= set(cands[cands.config == c].n)
    assert set(cands[cands.config == "slow"].n) < planned  # screening sizes only
    # Every size has the copy roofline and the baseline measured in the same run.
    for role in ("copy", "baseline"):
        assert planned <= set(df[df.role == role].n)


def test_refinement_brackets_the_crossover_to_l2_over_256(complete):
    run_dir, _ = complete
    df = load_run(run_dir).results
    ok = df[(df.role == "candidate") & (df.status == "ok")]
    win = ok.loc[ok.groupby("n").ratio.idxmax()].sort_values("ws_bytes")
    below = win[win.config == "keep"].ws_bytes.max()
    above = win[win.config == "stream"].ws_bytes.min()
    assert below < CROSS <= above
    assert above - below <= L2 / 256
    assert (df.phase == "refine").any()


def test_every_candidate_carries_a_paired_ratio(complete):
    run_dir, _ = complete
    df = load_run(run_dir).results
    c = df[(df.role == "candidate") & (df.status == "ok")]
    assert c.ratio.notna().all()
    assert ((c.ratio_lo <= c.ratio) & (c.ratio <= c.ratio_hi)).all()
    # the three figures are each recorded to TRIAL_DIGITS significant digits
    from sweeper.analyze.store import TRIAL_DIGITS

    rtol = 3 * 0.5 * 10.0 ** (1 - TRIAL_DIGITS)
    assert (abs(c.ratio / (c.base_time_us / c.time_us) - 1) <= rtol).all()


def test_each_cell_recorded_once(complete):
    run_dir, _ = complete
    trials, truncated = read_trials(run_dir)
    keys = [t["cell_key"] for t in trials]
    assert not truncated
    assert len(keys) == len(set(keys))


def test_interrupted_run_resumes_without_repeating_or_losing_cells(plan, tmp_path, complete):
    full_dir, full_ex = complete
    ex = model(interrupt_after=40)
    with pytest.raises(KeyboardInterrupt):
        start(cfg(plan, tmp_path), ex)
    run_dir = tmp_path / "h200" / "r1"
    assert load_manifest(run_dir)["status"] == "interrupted"
    first = {t["cell_key"] for t in read_trials(run_dir)[0]}
    assert len([k for k in first if "|candidate|" in k]) == 40
    # Simulate a crash mid-write: a half-written last line.
    with open(run_dir / "trials.jsonl", "a") as f:
        f.write('{"kind": "trial", "schema_ver')
    # the first segment's stage times, made large so that an overwrite would show
    m1 = load_manifest(run_dir)
    stages = [k for k in m1["timing"] if k.endswith("_s") and k != "total_s"]
    assert stages
    m1["timing"] = {**m1["timing"], **{k: 1000.0 for k in stages}}
    (run_dir / "manifest.json").write_text(json.dumps(unrecorded(m1)))
    ex2 = model()
    start(cfg(plan, tmp_path), ex2, resume=run_dir)
    timing = load_manifest(run_dir)["timing"]
    assert all(timing[k] >= 1000.0 for k in stages)  # a segment adds to the ones before it
    trials, truncated = read_trials(run_dir)
    keys = [t["cell_key"] for t in trials]
    assert not truncated
    assert len(keys) == len(set(keys))  # nothing repeated
    assert first <= set(keys)  # nothing lost
    full = {t["cell_key"] for t in read_trials(full_dir)[0]}
    assert set(keys) == full  # the same cells as an uninterrupted run
    assert len(ex2.calls) == len(full_ex.calls) - 40  # finished cells were not re-measured
    m = load_manifest(run_dir)
    assert m["status"] == "complete" and m["resumed"]


def test_resume_refuses_a_different_plan(plan, tmp_path):
    start(cfg(plan, tmp_path), model())
    other = make_plan(lookup("h200"), dtypes=["fp32", "int8"], resolution=64)
    with pytest.raises(PlanMismatchError, match="plan hash"):
        start(cfg(other, tmp_path), model(), resume=tmp_path / "h200" / "r1")


def test_resume_refuses_a_different_device(plan, tmp_path):
    start(cfg(plan, tmp_path), model())
    with pytest.raises(PlanMismatchError, match="device name"):
        start(cfg(plan, tmp_path), model(device_name="Other"), resume=tmp_path / "h200" / "r1")


def test_resume_refuses_a_hot_run_warmed_up_otherwise(plan, tmp_path):
    """A hot run made with another warm-up before each sample (one call, before the field
    was recorded) is not resumed with this one: its cells and the new ones would differ by
    the order effect the warm-up removes."""
    from sweeper.stats import WARM_RULE

    class Warmed(ModelExecutor):
        def describe(self) -> dict:
            return {**super().describe(), "harness": {"hot_warm_calls": WARM_RULE}}

    with pytest.raises(KeyboardInterrupt):
        start(cfg(plan, tmp_path), model(interrupt_after=10))
    run_dir = tmp_path / "h200" / "r1"
    warmed = Warmed(CURVES, l2_bytes=L2, baseline=baseline, copy=copy, fail={"bad": "mismatch"})
    with pytest.raises(PlanMismatchError, match=re.escape(f"per sample 1 != {WARM_RULE!r}")):
        start(cfg(plan, tmp_path), warmed, resume=run_dir)
    assert load_manifest(run_dir)["status"] == "interrupted"  # refused before anything ran
    m = load_manifest(run_dir)
    m["harness"] = {"hot_warm_calls": WARM_RULE}
    (run_dir / "manifest.json").write_text(json.dumps(unrecorded(m)))
    start(cfg(plan, tmp_path), warmed, resume=run_dir)
    assert load_manifest(run_dir)["status"] == "complete"


def test_resume_refuses_a_run_whose_halves_ordered_the_sides_otherwise(plan, tmp_path):
    """A run made with side a first in both halves (before the field was recorded) is not
    resumed by a timer that puts side b first in the second half, nor the other way round."""
    from sweeper.stats import HALVES_FIRST

    class Alternating(ModelExecutor):
        def describe(self) -> dict:
            return {**super().describe(), "harness": {"halves_first_side": list(HALVES_FIRST)}}

    with pytest.raises(KeyboardInterrupt):
        start(cfg(plan, tmp_path), model(interrupt_after=10))
    run_dir = tmp_path / "h200" / "r1"
    alt = Alternating(CURVES, l2_bytes=L2, baseline=baseline, copy=copy, fail={"bad": "mismatch"})
    want = f"first side per half ['a', 'a'] != {list(HALVES_FIRST)!r}"
    with pytest.raises(PlanMismatchError, match=re.escape(want)):
        start(cfg(plan, tmp_path), alt, resume=run_dir)
    assert load_manifest(run_dir)["status"] == "interrupted"  # refused before anything ran
    m = load_manifest(run_dir)
    m["harness"] = {"halves_first_side": list(HALVES_FIRST)}
    (run_dir / "manifest.json").write_text(json.dumps(unrecorded(m)))
    start(cfg(plan, tmp_path), alt, resume=run_dir)
    assert load_manifest(run_dir)["status"] == "complete"


def test_resume_keeps_the_executor_that_measured_the_run(plan, tmp_path):
    """A run's cells all come from one executor: a resume with another is refused before
    anything runs, at the runner (the executor's harness) and at the API, where a request
    that names none resumes with the one the manifest records."""
    from sweeper import api

    class Batched(ModelExecutor):
        def describe(self) -> dict:
            return {**super().describe(), "harness": {"executor": "batched"}}

    class Classic(ModelExecutor):
        def describe(self) -> dict:
            return {**super().describe(), "harness": {}}

    with pytest.raises(KeyboardInterrupt):
        start(cfg(plan, tmp_path), Batched(CURVES, l2_bytes=L2, baseline=baseline, copy=copy,
                                           interrupt_after=10))  # fmt: skip
    run_dir = tmp_path / "h200" / "r1"
    classic = Classic(CURVES, l2_bytes=L2, baseline=baseline, copy=copy)
    with pytest.raises(PlanMismatchError, match="executor batched != classic"):
        start(cfg(plan, tmp_path), classic, resume=run_dir)
    assert load_manifest(run_dir)["status"] == "interrupted"  # refused before anything ran
    with pytest.raises(SweeperError, match="measured by the batched executor"):
        api._resumed(api.RunRequest(resume=str(run_dir), executor="classic"), None)
    assert api._resumed(api.RunRequest(resume=str(run_dir)), None).executor == "batched"
    assert api._resumed(api.RunRequest(resume=str(run_dir), executor="batched"), None).executor
    start(cfg(plan, tmp_path), Batched(CURVES, l2_bytes=L2, baseline=baseline, copy=copy),
          resume=run_dir)  # fmt: skip
    assert load_manifest(run_dir)["status"] == "complete"


def test_resume_refuses_a_grid_whose_configs_changed(plan, tmp_path):
    """The grid's name is not its content: a config added to it since the run started would
    be screened by the resume alone, so the resume is refused; a manifest written before the
    grid's fingerprint was recorded resumes with the grid as it is."""
    with pytest.raises(KeyboardInterrupt):
        start(cfg(plan, tmp_path), model(interrupt_after=10))
    run_dir = tmp_path / "h200" / "r1"
    grown = ModelExecutor({**CURVES, "new": stream}, l2_bytes=L2,
                          baseline=baseline, copy=copy, fail={"bad": "mismatch"})  # fmt: skip
    with pytest.raises(PlanMismatchError, match="grid holds other configs"):
        start(cfg(plan, tmp_path), grown, resume=run_dir)
    assert load_manifest(run_dir)["status"] == "interrupted"  # refused before anything ran
    m = load_manifest(run_dir)
    del m["grid_hash"]
    (run_dir / "manifest.json").write_text(json.dumps(unrecorded(m)))
    start(cfg(plan, tmp_path), grown, resume=run_dir)
    assert load_manifest(run_dir)["status"] == "complete"


def test_a_run_recorded_without_its_grids_fingerprint_resumes_with_the_seed_it_screened(
    plan, tmp_path, complete
):
    """A manifest without grid_hash, interrupted in its sweep, resumed where the grid gained
    a config: the resume keeps the seed the run screened and measures what one run in one go
    measured."""
    full_dir, _ = complete
    with pytest.raises(KeyboardInterrupt):
        start(cfg(plan, tmp_path), model(interrupt_after=200))
    run_dir = tmp_path / "h200" / "r1"
    trials, _ = read_trials(run_dir)
    assert any(t["phase"] == "sweep" for t in trials)  # stopped in the sweep
    m = load_manifest(run_dir)
    del m["grid_hash"]
    (run_dir / "manifest.json").write_text(json.dumps(unrecorded(m)))
    grown = ModelExecutor({**CURVES, "new": stream}, l2_bytes=L2,
                          baseline=baseline, copy=copy, fail={"bad": "mismatch"})  # fmt: skip
    start(cfg(plan, tmp_path), grown, resume=run_dir)
    keys = {t["cell_key"] for t in read_trials(run_dir)[0]}
    assert keys == {t["cell_key"] for t in read_trials(full_dir)[0]}
    assert not any(c[3] == "new" for c in grown.calls)


def test_resume_refuses_cells_made_by_other_kernel_code(plan, tmp_path):
    """A variant id hashes the kernel source: a run interrupted before a kernel change must
    not be resumed after it (two versions of one config name in one run)."""
    import json

    from sweeper.runfolder import TRIALS

    run_dir = start(cfg(plan, tmp_path), model())
    path = run_dir / TRIALS
    lines = path.read_text().splitlines()
    rows = [json.loads(ln) for ln in lines]
    k = next(i for i, r in enumerate(rows) if r.get("role") == "candidate")
    rows[k]["variant_id"] = rows[k]["variant_id"] + "-0ldc0de0"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(PlanMismatchError, match="kernel code this checkout does not have"):
        start(cfg(plan, tmp_path), model(), resume=run_dir)


@pytest.mark.parametrize(
    "archive, unpack", [("trials.jsonl.xz", "unxz"), ("trials.jsonl.gz", "gunzip")]
)
def test_an_archived_run_reads_the_same_and_refuses_to_resume(plan, tmp_path, archive, unpack):
    import gzip
    import lzma

    from sweeper.errors import SweeperError
    from sweeper.report.plots import inputs_digest

    run_dir = start(cfg(plan, tmp_path), model())
    plain = read_trials(run_dir)[0]
    raw = (run_dir / "trials.jsonl").read_bytes()
    for name, pack in (("trials.jsonl.xz", lzma.compress), ("trials.jsonl.gz", gzip.compress)):
        (run_dir / name).write_bytes(pack(raw))
    (run_dir / "trials.jsonl").unlink()
    with pytest.raises(SweeperError, match="holds both trials.jsonl.xz and trials.jsonl.gz"):
        read_trials(run_dir)
    for name in ("trials.jsonl.xz", "trials.jsonl.gz"):
        if name != archive:
            (run_dir / name).rename(tmp_path / name)
    assert read_trials(run_dir)[0] == plain
    with pytest.raises(SweeperError, match=rf"archived \({archive}\); `{unpack} "):
        start(cfg(plan, tmp_path), model(), resume=run_dir)
    # the figures' inputs are the same whatever the archive's compression
    before = inputs_digest(run_dir)
    (run_dir / archive).rename(tmp_path / "a")
    other = next(n for n in ("trials.jsonl.xz", "trials.jsonl.gz") if n != archive)
    (tmp_path / other).rename(run_dir / other)
    assert inputs_digest(run_dir) == before


def test_replay_reproduces_the_recorded_run(complete, plan, tmp_path):
    run_dir, _ = complete
    replay_dir = start(cfg(plan, tmp_path, run_id="replay"), ReplayExecutor(run_dir))
    a = {t["cell_key"]: t["phase"] for t in read_trials(run_dir)[0]}
    b = {t["cell_key"]: t["phase"] for t in read_trials(replay_dir)[0]}
    assert a == b
    ma, mb = load_manifest(run_dir), load_manifest(replay_dir)
    assert ma["pruned"] == mb["pruned"]


def test_full_mode_measures_every_config_everywhere(plan, tmp_path):
    run_dir = start(cfg(plan, tmp_path, full=True), model())
    df = load_run(run_dir).results
    c = df[df.role == "candidate"]
    assert c.groupby("config").n.nunique().min() >= len(plan.sizes("fp32"))


def test_candidate_order_is_shuffled_but_reproducible(plan, tmp_path):
    ex1, ex2 = model(), model()
    start(cfg(plan, tmp_path, run_id="a"), ex1)
    start(cfg(plan, tmp_path, run_id="b"), ex2)
    assert ex1.calls == ex2.calls
    first_size = [c for c in ex1.calls if c[2] == ex1.calls[0][2]]
    orders = {tuple(c[3] for c in first_size)}
    assert orders != {tuple(sorted(c[3] for c in first_size))} or len(first_size) < 3


def test_manifest_records_provenance(complete):
    run_dir, _ = complete
    m = json.loads((run_dir / "manifest.json").read_text())
    assert m["kind"] == "manifest" and m["schema_version"] == 2
    for f in ("plan", "device", "git_commit", "grid", "modes", "stopping", "search", "timing"):
        assert f in m
    assert m["plan"]["plan_hash"]
    # the pruned configs are one line each in the file the manifest names, not in it
    assert m["pruned"] == "pruned.jsonl"
    lines = (run_dir / "pruned.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        {"kind": "pruned", "schema_version": 1, **p} for p in load_manifest(run_dir)["pruned"]
    ]
    assert len(lines) == 2


def _copy_run(run_dir: Path, dest: Path) -> Path:
    import shutil

    return Path(shutil.copytree(run_dir, dest / run_dir.name))


def test_a_manifest_of_version_1_holding_its_pruned_list_reads_the_same(complete, tmp_path):
    run_dir = _copy_run(complete[0], tmp_path)
    want = load_manifest(run_dir)
    m = json.loads((run_dir / "manifest.json").read_text())
    m["schema_version"], m["pruned"] = 1, want["pruned"]
    (run_dir / "manifest.json").write_text(json.dumps(unrecorded(m), indent=1))
    (run_dir / "pruned.jsonl").unlink()
    assert load_manifest(run_dir) == unrecorded(want)
    assert load_run(run_dir).manifest["pruned"] == want["pruned"]


@pytest.mark.parametrize(
    "damage, message",
    [
        (
            "missing",
            r"manifest.json: field 'pruned': names pruned.jsonl, which is not in the run folder",
        ),
        ("renamed", r"manifest.json: field 'pruned': expected 'pruned.jsonl', found 'other.jsonl'"),
        ("cut", r"pruned.jsonl:2: the last line is incomplete"),
        ("not json", r"pruned.jsonl:1: not valid JSON"),
        ("no config", r"pruned.jsonl:2: field 'config': missing"),
        ("bad mode", r"pruned.jsonl:1: field 'mode': unknown mode 'warm'"),
        ("trial line", r"pruned.jsonl:1: field 'kind': expected 'pruned', found 'trial'"),
    ],
)
def test_a_damaged_pruned_list_is_refused_by_file_and_line(complete, tmp_path, damage, message):
    """In a run stopped part way (no records of its files yet: what a resume reads) the pruned
    list is checked line by line."""
    from sweeper.errors import SchemaError

    run_dir = _copy_run(complete[0], tmp_path)
    m = json.loads((run_dir / "manifest.json").read_text())
    (run_dir / "manifest.json").write_text(json.dumps(stopped(m)))
    path = run_dir / "pruned.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    docs = [json.loads(line) for line in lines]
    if damage == "missing":
        path.unlink()
    elif damage == "renamed":
        m = json.loads((run_dir / "manifest.json").read_text())
        m["pruned"] = "other.jsonl"
        (run_dir / "manifest.json").write_text(json.dumps(stopped(m)))
    elif damage == "cut":
        path.write_text(lines[0] + lines[1][:-10])
    elif damage == "not json":
        path.write_text("{" + "".join(lines))
    elif damage == "no config":
        del docs[1]["config"]
    elif damage == "bad mode":
        docs[0]["mode"] = "warm"
    elif damage == "trial line":
        docs[0]["kind"] = "trial"
    if damage in ("no config", "bad mode", "trial line"):
        path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    with pytest.raises(SchemaError, match=message):
        load_manifest(run_dir)
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before


def test_a_manifest_with_a_bad_pruned_entry_is_not_written(complete, tmp_path):
    from sweeper.analyze.store import write_manifest
    from sweeper.errors import SchemaError

    run_dir = _copy_run(complete[0], tmp_path)
    m = load_manifest(run_dir)
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    m["pruned"] = [*m["pruned"], {"mode": "hot", "dtype": "fp32", "config": 7}]
    with pytest.raises(SchemaError, match=r"pruned.jsonl: field 'config': entry 3: expected str"):
        write_manifest(run_dir, m)
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before


def test_an_archived_pruned_list_reads_the_same_and_refuses_to_resume(plan, tmp_path):
    import lzma

    from sweeper.report.plots import inputs_digest

    run_dir = start(cfg(plan, tmp_path), model())
    want, digest = load_manifest(run_dir), inputs_digest(run_dir)
    path = run_dir / "pruned.jsonl"
    (run_dir / "pruned.jsonl.xz").write_bytes(lzma.compress(path.read_bytes()))
    path.unlink()
    assert load_manifest(run_dir) == want
    assert inputs_digest(run_dir) == digest
    with pytest.raises(SweeperError, match=r"archived \(pruned.jsonl.xz\); `unxz "):
        start(cfg(plan, tmp_path), model(), resume=run_dir)


def _outer_cross_model():
    far = 6 * L2  # a crossover in the outer (1.25x-spaced) region of the plan

    def a(ws, l2):
        return 4400.0 if ws < far else 4000.0

    def b(ws, l2):
        return 4000.0 if ws < far else 4400.0

    return ModelExecutor(
        {"a": a, "b": b},
        l2_bytes=L2,
        baseline=lambda ws, l2: 4100.0,
        copy=lambda ws, l2: 4500.0,
        noise=0.002,
    )


def test_bracket_points_are_the_midpoints_of_too_wide_policy_gaps():
    from sweeper.run.search import bracket_points

    def row(ws, config, gbps):
        n = ws // 8
        return {"mode": "hot", "dtype": "fp32", "n": n, "ws_bytes": ws, "role": "candidate",
                "config": config, "status": "ok", "gbps": gbps, "time_us": ws / gbps / 1e3,
                "pattern": "preallocated", "run_id": "r"}  # fmt: skip

    sizes = [L2 * k for k in (4, 5, 6, 8)]  # crossover between 5 and 6 x L2, 1 x L2 apart
    rows = [row(ws, "a", 4400.0 if ws < 5.5 * L2 else 4000.0) for ws in sizes]
    rows += [row(ws, "b", 4000.0 if ws < 5.5 * L2 else 4400.0) for ws in sizes]
    pts = bracket_points(rows, L2, 32, 4)
    assert pts == [(5 * L2 // 8 + 6 * L2 // 8) // 2 // 4 * 4]
    # once the gap is sampled at L2/32, nothing is left to add
    fine = [L2 * 5 + k * L2 // 32 for k in range(33)]
    rows = [row(ws, "a", 4400.0 if ws < 5.5 * L2 else 4000.0) for ws in fine]
    rows += [row(ws, "b", 4000.0 if ws < 5.5 * L2 else 4400.0) for ws in fine]
    assert bracket_points(rows, L2, 32, 4) == []


def test_the_brackets_closed_are_those_of_the_policy_with_the_targets_floors():
    """`sweeper policy build` keeps the targets' floors in ties (keep_floors); a floor that
    narrows a tie can move a boundary into a gap the tie alone never put one in, so the
    runner samples the gaps of the floored segmentation."""
    from dataclasses import replace

    from sweeper.analyze.targets import Target
    from sweeper.run.search import policy_sample_points

    def row(ws, config, gbps, ratio):
        return {"mode": "hot", "dtype": "fp32", "n": ws // 8, "ws_bytes": ws, "role": "candidate",
                "config": config, "status": "ok", "gbps": gbps, "ratio": ratio,
                "time_us": ws / gbps / 1e3, "pattern": "preallocated", "run_id": "r"}  # fmt: skip

    fine = [2 * L2 + k * L2 // 64 for k in range(65)]  # 2-3 x L2 at L2/64, then 5 and 6 x L2
    rows = [row(ws, "a", 1000.0, 1.04) for ws in fine + [5 * L2, 6 * L2]]
    # b ties a (1% behind) at 2-3 x L2 and alone meets the floor there; far behind above
    rows += [row(ws, "b", 990.0, 1.06) for ws in fine]
    rows += [row(ws, "b", 800.0, 0.8) for ws in (5 * L2, 6 * L2)]
    floor = Target("1.05x", ("fp32",), 2 * L2, 3 * L2, "ratio", 1.05, ("hot",), True)
    assert policy_sample_points(rows, L2, 32, 4) == ([], [])  # a serves every size
    brackets, singles = policy_sample_points(rows, L2, 32, 4, floors=[floor])
    assert brackets == [(3 * L2 // 8 + 5 * L2 // 8) // 2 // 4 * 4] and singles == []
    # the floored policy serves b to 3 x L2 and a above: its boundary lies in (3, 5) x L2.
    # A floor no tied config meets leaves the tie as it is.
    unmet = replace(floor, floor=1.1)
    assert policy_sample_points(rows, L2, 32, 4, floors=[unmet]) == ([], [])


def test_a_refused_policy_is_fixed_by_resuming_the_run(plan, tmp_path):
    from sweeper.analyze.policy import build_policy
    from sweeper.errors import SweeperError

    no_brackets = SearchParams(max_refine_rounds=0, max_bracket_rounds=0)
    c = cfg(plan, tmp_path)
    c.search = no_brackets
    run_dir = start(c, _outer_cross_model())
    data = load_run(run_dir)
    with pytest.raises(SweeperError, match="wider than the plan resolution"):
        build_policy(data.results, data.manifest)
    # The manifest and the report say the gap is open, though the run is complete.
    assert data.manifest["status"] == "complete"
    assert data.manifest["open_brackets"] == ["hot/fp32"]
    from sweeper import api

    assert "bracketed more widely than the plan resolution** in hot/fp32" in (
        api.report(str(run_dir)).read_text()
    )
    # Resuming with bracket refinement on samples the gap; the policy then builds.
    c2 = cfg(plan, tmp_path)
    c2.search = SearchParams(max_refine_rounds=0)  # bracket refinement alone
    start(c2, _outer_cross_model(), resume=run_dir)
    assert load_manifest(run_dir)["timing"]["hot/fp32/bracket_points"] > 0
    assert load_manifest(run_dir)["open_brackets"] == []
    data = load_run(run_dir)
    pol = build_policy(data.results, data.manifest)
    bands = pol["dtypes"]["fp32"]["bands"]
    cross = [b for b in bands if b["bracket_below"] and b["bracket_below"][0] > 4 * L2]
    assert len(cross) == 1
    lo, hi = cross[0]["bracket_below"]
    assert lo < 6 * L2 <= hi and hi - lo <= L2 / 32


@pytest.mark.parametrize("run", ["aw-sm", "baseline-v2"])
def test_the_shipped_run_maps_onto_this_checkouts_kernels(run):
    """The run was measured under kernel code recorded as equivalent (same PTX; its ids carry
    the fingerprint Python 3.12 gave this code from ast.dump's text): every one of its candidate
    ids maps onto a variant of the current extended grid on any Python, so it can be resumed
    and compared, and its done cells keep their keys."""
    import json
    import lzma

    from sweeper_kernels import Variant

    from sweeper.run.runner import resume_key, row_key

    current_id = Variant.current_id

    path = Path(__file__).parents[2] / "lab/h200" / run / "trials.jsonl.xz"
    with lzma.open(path, "rt") as f:
        trials = [json.loads(line) for line in f]
    ids = {t["variant_id"] for t in trials if t.get("role") == "candidate"}
    now = {current_id(i) for i in ids}
    assert None not in now and len(now) == len(ids)
    assert all(Variant.parse(i).id == i for i in now)  # ids of this checkout's extended grid
    assert not ids & now  # the recorded ids carry the earlier fingerprint ...
    t = next(t for t in trials if t.get("role") == "candidate")
    assert resume_key(t) == row_key({**t, "variant_id": current_id(t["variant_id"])})
    assert current_id(t["variant_id"][:-8] + "00000000") is None  # ... an unknown one maps to none


def test_a_resume_refines_no_further_than_the_run_in_one_go(plan, tmp_path):
    """The refinement's point budget is the run's: resuming a run whose refinement stopped at
    the budget measures no new size (a segment that got a fresh budget would add sizes the
    run in one go does not have)."""
    from dataclasses import replace

    search = replace(SearchParams(), max_refine_points=2)
    run_dir = start(replace(cfg(plan, tmp_path), search=search), model())
    before = {t["cell_key"] for t in read_trials(run_dir)[0]}
    refined = {t["n"] for t in read_trials(run_dir)[0] if t["phase"] == "refine"}
    m = load_manifest(run_dir)
    assert m["timing"]["hot/fp32/refine_points"] == 2 and len(refined) >= 2
    start(replace(cfg(plan, tmp_path), search=search), model(), resume=run_dir)
    assert {t["cell_key"] for t in read_trials(run_dir)[0]} == before
    assert load_manifest(run_dir)["timing"]["hot/fp32/refine_points"] == 2


def test_a_time_limited_run_stops_resumably_and_resumes_to_the_full_run(plan, tmp_path, complete):
    from dataclasses import replace

    from sweeper.run.runner import TimeLimitReached

    full_dir, _ = complete
    with pytest.raises(TimeLimitReached):
        start(replace(cfg(plan, tmp_path), time_limit_s=1e-9), model())
    run_dir = tmp_path / "h200" / "r1"
    assert load_manifest(run_dir)["status"] == "interrupted"
    assert len(read_trials(run_dir)[0]) == 1  # stopped after the first cell it finished
    start(cfg(plan, tmp_path), model(), resume=run_dir)
    keys = {t["cell_key"] for t in read_trials(run_dir)[0]}
    assert keys == {t["cell_key"] for t in read_trials(full_dir)[0]}
    assert load_manifest(run_dir)["status"] == "complete"


def test_the_manifest_records_the_command_that_made_the_run(plan, tmp_path, monkeypatch):
    monkeypatch.setattr("sys.argv", ["/venv/bin/sweeper", "run", "--modes", "hot", "my plan.json"])
    start(cfg(plan, tmp_path), model())
    m = load_manifest(tmp_path / "h200" / "r1")
    assert m["command"] == "sweeper run --modes hot 'my plan.json'"


# ---- a slice: the named configs at the named sizes, nothing else ---------------------------


def test_a_slice_times_every_named_config_at_every_planned_size_in_its_range(plan, tmp_path):
    from dataclasses import replace

    lo, hi = 36 << 20, 52 << 20
    sliced = replace(cfg(plan, tmp_path), configs=("stream*",), ws_range=(lo, hi))
    run_dir = start(sliced, model())
    trials = read_trials(run_dir)[0]
    cands = [t for t in trials if t["role"] == "candidate"]
    want = {e["n"] for e in plan.sizes("fp32") if lo <= e["working_set_bytes"] <= hi}
    assert {t["config"] for t in cands} == {"stream", "stream2"}
    assert {t["n"] for t in trials} == want and len(want) >= 4
    assert len(cands) == 2 * len(want) and {t["phase"] for t in trials} == {"sweep"}
    assert load_manifest(run_dir)["slice"] == {"configs": ["stream*"], "ws_range": [lo, hi]}
    with pytest.raises(PlanMismatchError, match="slice"):
        start(replace(sliced, configs=("keep",)), model(), resume=run_dir)


def test_a_whole_run_records_no_slice(plan, tmp_path):
    assert load_manifest(start(cfg(plan, tmp_path), model()))["slice"] is None


@pytest.mark.parametrize(
    "kw, why",
    [({"configs": ("nope*",)}, "--configs nope\\*: no config of the 'default' grid matches"),
     ({"ws_range": (1, 2)}, "--sizes: no planned working set of fp32 lies in")],
)  # fmt: skip
def test_a_slice_that_selects_nothing_is_refused_before_anything_is_written(
    plan, tmp_path, kw, why
):
    from dataclasses import replace

    with pytest.raises(SweeperError, match=why):
        start(replace(cfg(plan, tmp_path), **kw), model())
    assert not (tmp_path / "h200").exists()


@pytest.mark.parametrize(
    "text, want",
    [("36:52", (36 << 20, 52 << 20)), (":1", (0, 1 << 20)), ("0.5:", (1 << 19, 2**63 - 1))],
)
def test_sizes_are_parsed_in_mib_of_working_set(text, want):
    from sweeper.api import parse_ws_range

    assert parse_ws_range(text) == want


@pytest.mark.parametrize("text", ["36", "a:b", "52:36", "-1:4"])
def test_bad_sizes_are_one_clear_error(text):
    from sweeper.api import parse_ws_range

    with pytest.raises(SweeperError, match=f"--sizes '{text}'"):
        parse_ws_range(text)


# ---- the L2-resident ceiling ---------------------------------------------------------------


def test_a_hot_run_records_the_l2_resident_ceiling_once(plan, tmp_path):
    """The best of the copy kernel and the reference set at 0.5, 0.625 and 0.75 x L2 (all below
    the model's crossover, where "keep" runs at 9000 GB/s), median over the three sizes."""
    from sweeper.run.runner import CEILING_FRACTIONS, ceiling_sizes

    ex = CeilingModel(CURVES, l2_bytes=L2, baseline=baseline, copy=copy, fail={"bad": "mismatch"})
    run_dir = start(cfg(plan, tmp_path), ex)
    c = load_manifest(run_dir)["ceiling"]
    assert c["gbps"] == sorted(p["gbps"] for p in c["points"])[1]  # the median of three
    assert c["gbps"] == pytest.approx(9000.0, rel=0.02)  # the model's noise is +-1%
    assert c["dtype"] == "fp32" and c["mode"] == "hot"
    assert [p["ws_bytes"] for p in c["points"]] == [8 * n for n in ceiling_sizes(L2, "fp32")]
    assert all(
        abs(p["ws_bytes"] / L2 - f) < 1e-3
        for p, f in zip(c["points"], CEILING_FRACTIONS, strict=True)
    )
    assert {p["by"] for p in c["points"]} == {"keep"} and c["reference"] == [
        "copy",
        "keep",
        "stream",
    ]
    plain_dir = start(cfg(plan, tmp_path / "m"), model())  # the same run without a set
    assert "ceiling" not in load_manifest(plain_dir)
    keys = {t["cell_key"] for t in read_trials(run_dir)[0]}
    assert keys == {t["cell_key"] for t in read_trials(plain_dir)[0]}  # no part of the search


def test_a_run_without_hot_mode_measures_the_ceiling_in_hot_mode(plan, tmp_path):
    from sweeper.run.runner import ceiling_sizes

    ex = CeilingModel(CURVES, l2_bytes=L2, baseline=baseline, copy=copy)
    run_dir = start(cfg(plan, tmp_path, modes=("cold",)), ex)
    c = load_manifest(run_dir)["ceiling"]
    assert c["mode"] == "hot" and c["gbps"] == pytest.approx(9000.0, rel=0.02)
    hot = {(n, config) for mode, _, n, config in ex.calls if mode == "hot"}
    assert hot == {(n, v) for n in ceiling_sizes(L2, "fp32") for v in ("keep", "stream")}
    assert {t["mode"] for t in read_trials(run_dir)[0]} == {"cold"}  # no hot cell recorded


# ---- the physical-limit check (sweeper.analyze.ceilings) ----------------------------------------


def cheat(ws, l2):
    """Slower than "stream" below L2 / 2; from there on, a kernel that skips its work: 2.25x
    the L2-resident ceiling (9000 GB/s, "keep") in the band, 85 TB/s from 2 x L2."""
    if ws < l2 / 2:
        return 0.9 * stream(ws, l2)
    return 20250.0 if ws < 2 * l2 else 85000.0


def cheat_model(**kw) -> ModelExecutor:
    # DRAM peak 4900 GB/s, above the copy kernel's 4800: the copy is the tighter bound
    return CeilingModel(
        {**CURVES, "cheat": cheat},
        l2_bytes=L2,
        baseline=baseline,
        copy=copy,
        fail={"bad": "mismatch"},
        dram_peak_gbps=4900.0,
        **kw,
    )


def test_an_impossible_throughput_is_refused_in_every_mode_and_never_selected(plan, tmp_path):
    from sweeper.analyze.ceilings import CEILING_MARGIN, COPY, COPY_FROM_X_L2, L2_RESIDENT
    from sweeper.analyze.policy import build_policy
    from sweeper.analyze.select import select

    run_dir = start(cfg(plan, tmp_path, full=True, modes=("hot", "cold")), cheat_model())
    data = load_run(run_dir)
    df, m = data.results, data.manifest
    assert m["harness"]["ceiling_check"] == {"margin": CEILING_MARGIN, "copy_from_x_l2": 2}
    ceiling = m["ceiling"]["gbps"]
    cands = df[df.role == "candidate"]
    mine = cands[cands.config == "cheat"]
    honest, refused = mine[mine.ws_bytes < L2 / 2], mine[mine.ws_bytes >= L2 / 2]
    assert len(honest) and (honest.status == "ok").all()
    assert set(refused["mode"]) == {"hot", "cold"}
    assert (refused.status == "above-ceiling").all()
    band = refused[refused.ws_bytes < COPY_FROM_X_L2 * L2]
    big = refused[refused.ws_bytes >= COPY_FROM_X_L2 * L2]
    assert len(band) and len(big)
    in_band = f"x the {L2_RESIDENT} ({ceiling:.0f} GB/s)"
    assert band.status_detail.str.contains(in_band, regex=False).all()
    assert big.status_detail.str.fullmatch(
        rf"\d+ GB/s is [\d.]+x the {COPY} \(4[78]\d\d GB/s\); .*"
    ).all()
    # the honest configs pass: no other cell is refused
    others = cands[~cands.config.isin(["cheat", "bad"])]
    assert (others.status == "ok").all()
    # every refused cell is in the run's guard log
    trials = read_trials(run_dir)[0]
    refused_keys = {t["cell_key"] for t in trials if t["status"] == "above-ceiling"}
    assert len(refused_keys) == len(refused)
    assert refused_keys == {g["cell"] for g in m["guards"] if g["status"] == "above-ceiling"}
    # refused, the cheat is the fastest cell at every size; it is never selected
    for _, cell in cands[cands.ws_bytes >= L2 / 2].groupby(["mode", "n"]):
        assert cell.loc[cell.gbps.idxmax(), "config"] == "cheat"
    assert "cheat" not in set(select(df).config)
    policy = build_policy(df, m, mode="hot")
    assert "cheat" not in policy["configs"]


def test_a_resumed_run_keeps_recorded_statuses_and_checks_new_cells(plan, tmp_path):
    """A run recorded before the check (an impossible cell stored as ok, no check parameters in
    its manifest) keeps what it recorded; the cells measured after the resume are checked."""
    # interrupted at 3 x L2: past the ceiling's 6 cells and the cheat's first refused ones
    sizes = [e for e in plan.sizes("fp32") if e["working_set_bytes"] < 3 * L2]
    ex = cheat_model(interrupt_after=6 + len(CURVES | {"cheat": cheat}) * len(sizes))
    with pytest.raises(KeyboardInterrupt):
        start(cfg(plan, tmp_path, full=True), ex)
    run_dir = tmp_path / "h200" / "r1"
    path = run_dir / "trials.jsonl"
    old = [json.loads(line) for line in path.read_text().splitlines()]
    before = [t for t in old if t["config"] == "cheat" and t["status"] == "above-ceiling"]
    assert before
    for t in before:
        t["status"], t["status_detail"] = "ok", ""
    path.write_text("".join(json.dumps(t) + "\n" for t in old))
    m = load_manifest(run_dir)
    del m["harness"]["ceiling_check"]
    m["guards"] = []
    (run_dir / "manifest.json").write_text(json.dumps(unrecorded(m)))

    start(cfg(plan, tmp_path, full=True), cheat_model(), resume=run_dir)
    trials = {t["cell_key"]: t for t in read_trials(run_dir)[0]}
    assert all(trials[t["cell_key"]]["status"] == "ok" for t in before)
    kept = {t["cell_key"] for t in before}
    new = [
        t
        for k, t in trials.items()
        if k not in kept and t["config"] == "cheat" and t["ws_bytes"] >= L2 / 2
    ]
    assert new and all(t["status"] == "above-ceiling" for t in new)
    m = load_manifest(run_dir)
    assert m["harness"]["ceiling_check"]["margin"] == pytest.approx(1.2)
    assert {g["cell"] for g in m["guards"]} >= {t["cell_key"] for t in new}


def test_a_replay_of_a_climbing_run_climbs_as_it_did_and_rebuilds_its_policy(tmp_path):
    """results/h200/aw-4, fp32: the search seeded with the default grid and climbed the
    extended grid (with trades); its replay starts from the seeds, reaches the climbed configs
    through the recorded cells, and the policy built from it has the bands of the one built
    from the run."""
    from sweeper import api
    from sweeper.analyze.policy import build_policy

    root = Path(__file__).resolve().parents[2]
    shipped = root / "results" / "h200" / "aw-4"
    ex = ReplayExecutor(shipped)
    seeds = ex.variants("default", "fp32")
    assert seeds and len(seeds) < len(ex._variants["fp32"])  # the climbed ones come later
    run_dir = api.run(str(root / "sweeps" / "h200.json"), executor=ex, modes=["after-write"],
                      dtypes=["fp32"], out_root=str(tmp_path), run_id="replay")  # fmt: skip
    data, recorded = load_run(run_dir), load_run(shipped)
    got = build_policy(data.results, data.manifest, mode="after-write")["dtypes"]["fp32"]
    want = build_policy(recorded.results, recorded.manifest, mode="after-write")["dtypes"]["fp32"]
    keys = ("config", "lo_bytes", "hi_bytes")
    assert [tuple(b[k] for k in keys) for b in got["bands"]] == [
        tuple(b[k] for k in keys) for b in want["bands"]
    ]
    assert data.manifest["climb"]["after-write/fp32"]["rounds"] >= 1


def test_the_cells_host_time_by_phase_is_recorded_and_a_resume_adds_to_it(plan, tmp_path):
    from dataclasses import replace

    from sweeper.run.runner import TimeLimitReached

    class Clocked(ModelExecutor):
        def phase_seconds(self):
            return {"hot/rounds": 1.5, "hot/fresh": 0.25}

        def replay_graphs(self):
            return {"updated": 3, "instantiated": 1}

        def batch_spans(self):
            return {"batches": 2, "gpu_s": 0.5, "between_s": 0.125}

    def clocked():
        return Clocked(CURVES, l2_bytes=L2, baseline=baseline, copy=copy)

    with pytest.raises(TimeLimitReached):
        start(replace(cfg(plan, tmp_path), time_limit_s=1e-9), clocked())
    run_dir = tmp_path / "h200" / "r1"
    assert load_manifest(run_dir)["timing"]["cell_phases_s"] == {
        "hot/fresh": 0.25, "hot/rounds": 1.5}  # fmt: skip
    assert load_manifest(run_dir)["timing"]["batch_spans"] == {
        "batches": 2, "gpu_s": 0.5, "between_s": 0.125}  # fmt: skip
    start(cfg(plan, tmp_path), clocked(), resume=run_dir)
    timing = load_manifest(run_dir)["timing"]
    assert timing["cell_phases_s"] == {
        "hot/fresh": 0.5,
        "hot/rounds": 3.0,
    }
    assert timing["batch_spans"] == {"batches": 4, "gpu_s": 1.0, "between_s": 0.25}
    assert timing["replay_graphs"] == {"updated": 6, "instantiated": 2}


def test_a_replay_of_a_run_under_equivalent_kernel_code_resumes_each_cell_once(tmp_path):
    """aw-sm's candidates were recorded under kernel code recorded as equivalent (its ids
    carry an earlier fingerprint): the replay of its slice answers them under this
    checkout's ids, as a resume keys done cells, so a replay stopped part-way and resumed
    records every cell once and ends where a replay run in one go ends."""
    from sweeper import api

    shipped = Path(__file__).parents[2] / "lab/h200/aw-sm"
    plan = str(Path(__file__).parents[2] / "sweeps/h200.json")
    m = load_manifest(shipped)
    kw = {"dtypes": ["fp32"], "modes": ["after-write"], "out_root": str(tmp_path),
          "grid": "extended", "configs": m["slice"]["configs"], "sizes": "32:96",
          "quick": True}  # fmt: skip

    class Stopped(ReplayExecutor):
        """Interrupted (as by Ctrl-C) at its 20th candidate cell."""

        calls = 0

        def measure(self, *args):
            self.calls += 1
            if self.calls == 20:
                raise KeyboardInterrupt
            return super().measure(*args)

    whole = api.run(plan, executor=ReplayExecutor(shipped), run_id="whole", **kw)
    with pytest.raises(KeyboardInterrupt):
        api.run(plan, executor=Stopped(shipped), run_id="parts", **kw)
    parts = tmp_path / "h200" / "parts"
    assert load_manifest(parts)["status"] == "interrupted"
    done = [t for t in read_trials(parts)[0] if t["role"] == "candidate"]
    assert len(done) == 19  # done cells to skip
    api.run(plan, executor=ReplayExecutor(shipped), resume=str(parts), **kw)
    keys = [t["cell_key"] for t in read_trials(parts)[0]]
    assert len(keys) == len(set(keys))  # no cell recorded twice
    assert set(keys) == {t["cell_key"] for t in read_trials(whole)[0]}
    assert len(done) < sum(t["role"] == "candidate" for t in read_trials(whole)[0])


def test_a_trials_figures_are_recorded_to_seven_digits_and_decided_on_as_recorded(complete):
    """The runner rounds a cell's figures before it records or uses them: every float in the
    trial log has at most 7 significant digits, so a resume or a replay reads back the very
    numbers the run decided on."""
    from sweeper.analyze.store import TRIAL_DIGITS, rounded

    trials, _ = read_trials(complete[0])
    floats = [
        v
        for t in trials
        for x in t.values()
        for v in (x if isinstance(x, list) else [x])
        if isinstance(v, float) and v == v
    ]
    assert floats and all(float(f"{v:.{TRIAL_DIGITS}g}") == v for v in floats)
    assert all(rounded(t) == t for t in trials)
    assert rounded({"a": [1.23456789, 2], "b": 0.000123456789, "c": "x"}) == {
        "a": [1.234568, 2],
        "b": 0.0001234568,
        "c": "x",
    }


def test_a_finished_run_records_its_logs_and_a_resume_drops_the_record(plan, tmp_path):
    """The manifest's last write records the trial and pruned logs as they are (line count,
    sha256) and its own other fields; a resumed run appends to its logs, so its manifest
    holds no record until it finishes again."""
    import hashlib

    from sweeper.analyze.store import manifest_sha256

    with pytest.raises(KeyboardInterrupt):
        start(cfg(plan, tmp_path), model(interrupt_after=10))
    run_dir = tmp_path / "h200" / "r1"
    interrupted = json.loads((run_dir / "manifest.json").read_text())
    log = (run_dir / "trials.jsonl").read_bytes()
    assert interrupted["records"]["trials.jsonl"] == {
        "count": log.count(b"\n"),
        "sha256": hashlib.sha256(log).hexdigest(),
    }
    start(cfg(plan, tmp_path), model(), resume=run_dir)
    done = json.loads((run_dir / "manifest.json").read_text())
    log = (run_dir / "trials.jsonl").read_bytes()
    pruned = (run_dir / "pruned.jsonl").read_bytes()
    assert list(done)[-1] == "records"
    assert done["records"] == {
        "trials.jsonl": {"count": log.count(b"\n"), "sha256": hashlib.sha256(log).hexdigest()},
        "pruned.jsonl": {
            "count": pruned.count(b"\n"),
            "sha256": hashlib.sha256(pruned).hexdigest(),
        },
        "manifest.json": {"sha256": manifest_sha256(done)},
        "derived": {},  # nothing derived yet: `sweeper select` and the rest record their files
    }
    assert (
        done["records"]["trials.jsonl"]["count"] > interrupted["records"]["trials.jsonl"]["count"]
    )
