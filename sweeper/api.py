"""The public functions the CLI, notebooks and tests share. Each returns plain objects.

Heavy modules (numba, pandas, matplotlib) are imported inside the functions that need them,
so `import sweeper.api` stays fast and GPU-free.
"""

from __future__ import annotations

# ---- gpus / plan ---------------------------------------------------------------------------


def gpus() -> list:
    """The GPU spec table (list of sweeper.gpus.GpuSpec), every row with its source."""
    from sweeper.gpus import SPECS

    return list(SPECS)


def detect_gpu():
    """Attributes of the real device 0 (sweeper.gpus.DeviceInfo); NoGPUError without one."""
    from sweeper.gpus import detect

    return detect()


def plan(
    gpu: str,
    out: str | None = None,
    dtypes: str | list[str] | None = None,
    resolution: int = 32,
    force: bool = False,
):
    """Plan the byte-gap-free size ladder for `gpu` (a table key/alias, or 'auto' to read the
    device) and write it to `out` (default sweeps/<gpu>.json). Returns sweeper.plan.PlanResult.
    """
    from pathlib import Path

    from sweeper import gpus as gpumod
    from sweeper import plan as planmod

    if gpu.strip().lower() == "auto":
        spec, notes = gpumod.spec_for_device(gpumod.detect())
    else:
        spec, notes = gpumod.lookup(gpu), []
    p = planmod.make_plan(spec, dtypes=dtypes, resolution=resolution, notes=notes)
    path = Path(out) if out else Path("sweeps") / f"{spec.key}.json"
    planmod.write_plan(p, path, force=force)
    return planmod.PlanResult(plan=p, path=path, summary=planmod.summarize(p), notes=tuple(notes))
