"""A small end-to-end sweep and an interrupted + resumed run on the real GPU."""

from __future__ import annotations

import dataclasses

import pytest

from sweeper.analyze.ceilings import CEILING_MARGIN
from sweeper.analyze.store import load_manifest, load_run, read_trials
from sweeper.plan.gpus import detect, spec_for_device
from sweeper.plan.planfile import make_plan
from sweeper.run.executor import GpuExecutor
from sweeper.run.runner import RunConfig, start
from sweeper.stats import Stopping

STOP = Stopping(min_samples=4, max_samples=8, rel_tol=0.02, time_cap_s=0.5)


def _variants(dtype):
    from sweeper_kernels import Variant

    return [
        Variant(dtype, 16, 1),
        Variant(dtype, 16, 2, "cs", "cs"),
        Variant(dtype, 16, 4, "L2::evict_last", "cs", 256, "stride4"),
        Variant(dtype, 4, 1),
    ]


class SmallGrid(GpuExecutor):
    """Seeds the search with three of the four configs; the climb finds the fourth, one axis
    (the vector width) away from the first, and stays inside the four."""

    def variants(self, grid, dtype):
        return _variants(dtype)[:3]

    def neighbours(self, variant):
        return [v for v in variant.neighbours() if v in _variants(variant.dtype)]


class Interrupting(SmallGrid):
    ceiling_set = None  # counts only the search's cells (the ceiling is tested above)

    def __init__(self, after, **kw):
        super().__init__(**kw)
        self.after, self.count = after, 0

    def measure(self, *a):
        if self.count >= self.after:
            raise KeyboardInterrupt
        self.count += 1
        return super().measure(*a)


@pytest.fixture(scope="module")
def plan():
    spec, _ = spec_for_device(detect())
    p = make_plan(spec, dtypes=["fp32", "fp16"])
    keep = []
    for d in ("fp32", "fp16"):
        sizes = p.sizes(d)
        keep += sizes[:: max(1, len(sizes) // 6)]
    return dataclasses.replace(p, entries=tuple(keep))


def _cfg(plan, tmp_path, run_id, modes=("hot",)):
    return RunConfig(
        plan=plan,
        plan_path="(test)",
        dtypes=("fp32", "fp16"),
        modes=modes,
        stopping=STOP,
        out_root=str(tmp_path),
        run_id=run_id,
    )


def test_small_sweep_end_to_end(plan, tmp_path):
    run_dir = start(_cfg(plan, tmp_path, "e2e", ("hot", "cold")), SmallGrid(stopping=STOP))
    data = load_run(run_dir)
    df = data.results
    c = df[df.role == "candidate"]
    assert (c.status == "ok").all(), c[c.status != "ok"][["config", "status_detail"]]
    # the confirmation round times the tied configs and the floor again (role "confirm")
    assert set(df.role) == {"candidate", "confirm", "baseline", "copy"}
    conf = df[df.role == "confirm"]
    assert (conf.status == "ok").all() and set(conf.ws_bytes) == set(c.ws_bytes)
    assert set(df["mode"]) == {"hot", "cold"}
    assert (c.ratio > 0).all() and ((c.ratio_lo <= c.ratio) & (c.ratio <= c.ratio_hi)).all()
    # honest cold figures stay below the DRAM peak; the physical-limit check was applied
    assert data.manifest["harness"]["ceiling_check"]["margin"] == CEILING_MARGIN
    cold = c[c["mode"] == "cold"]
    assert (cold.gbps <= plan.dram_peak_gbps * 1.0).all()
    assert data.manifest["status"] == "complete"
    # the climb measured the config the seed left out, at the screening sizes
    climbed = c[c.config == _variants("fp32")[3].config]
    assert len(climbed) and set(climbed.phase) >= {"screen"}
    assert all(v["cells"] > 0 for v in data.manifest["climb"].values())
    # the L2-resident ceiling: measured once, hot, at three resident sizes; resident data
    # moves faster than DRAM's peak
    ceiling = data.manifest["ceiling"]
    assert len(ceiling["points"]) == 3 and ceiling["gbps"] > plan.dram_peak_gbps, ceiling
    print(f"L2-resident ceiling: {ceiling}")


def test_interrupted_run_resumes_on_the_gpu(plan, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        start(_cfg(plan, tmp_path, "res"), Interrupting(10, stopping=STOP))
    run_dir = (
        tmp_path / "h200" / "res" if (tmp_path / "h200").exists() else next(tmp_path.glob("*/res"))
    )
    first = {t["cell_key"] for t in read_trials(run_dir)[0]}
    resumed = Interrupting(10**6, stopping=STOP)
    start(_cfg(plan, tmp_path, "res"), resumed, resume=run_dir)
    keys = [t["cell_key"] for t in read_trials(run_dir)[0]]
    assert len(keys) == len(set(keys))
    assert first <= set(keys)
    assert load_manifest(run_dir)["status"] == "complete"
    timed = [k for k in keys if "|candidate|" in k or "|confirm|" in k]
    assert resumed.count == len(timed) - 10


@pytest.mark.parametrize("producer", ["sm", "memcpy"])
def test_after_write_with_either_producer_is_exact_and_recorded(plan, tmp_path, producer):
    """After-write rewrites the input before every call (an SM kernel by default, the driver's
    copy as a diagnostic): every cell checks out bit-exact, and the manifest says which."""
    cfg = dataclasses.replace(
        _cfg(plan, tmp_path, f"aw-{producer}", ("after-write",)),
        ws_range=(8 << 20, 128 << 20),
    )
    run_dir = start(cfg, SmallGrid(stopping=STOP, producer=producer))
    data = load_run(run_dir)
    c = data.results[data.results.role == "candidate"]
    assert len(c) and (c.status == "ok").all(), c[c.status != "ok"][["config", "status_detail"]]
    assert set(c["mode"]) == {"after-write"}
    assert data.manifest["harness"]["after_write_producer"] == producer
