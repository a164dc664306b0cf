"""The public functions the CLI, notebooks and tests share. Each returns plain objects.

Heavy modules (numba, pandas, matplotlib) are imported inside the functions that need them,
so `import sweeper.api` stays fast and GPU-free.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

# ---- gpus / plan ---------------------------------------------------------------------------


def gpus(gpu: str | None = None) -> list:
    """The GPU spec table (list of sweeper.plan.gpus.GpuSpec, each with per-field `sources`;
    None = no primary source gives the value). With `gpu`, just that one: a table key/alias or
    a spec file (FILE.toml)."""
    from sweeper.plan import gpus as gpumod

    if gpu is None:
        return list(gpumod.SPECS)
    if gpumod.is_spec_file_arg(gpu):
        spec = gpumod.load_spec_file(gpu)
        gpumod.require_plannable(spec)  # a spec file exists to plan from: a cut one is refused
        return [spec]
    return [gpumod.lookup(gpu)]


def detect_gpu():
    """Attributes of the real device 0 (sweeper.plan.gpus.DeviceInfo); NoGPUError without one."""
    from sweeper.plan.gpus import detect

    return detect()


def plan(
    gpu: str,
    out: str | None = None,
    dtypes: str | list[str] | None = None,
    resolution: int = 32,
    force: bool = False,
    save_spec: str | None = None,
):
    """Plan the byte-gap-free size ladder for `gpu` and write it to `out` (default
    sweeps/<key>.json). Returns sweeper.plan.PlanResult.

    `gpu` is a table key/alias, a spec file (ends in .toml or names an existing file), or
    'auto' to read device 0. A spec missing a field the plan needs is refused with one line.
    `save_spec` (only with 'auto') also writes the device's spec as a spec file for other
    machines; an existing file with other values is never replaced. Nothing is written when
    anything is refused.
    """
    from pathlib import Path

    from sweeper.errors import NoGPUError, SweeperError
    from sweeper.plan import gpus as gpumod
    from sweeper.plan import planfile as planmod
    from sweeper.runfolder import check_output

    auto = gpu.strip().lower() == "auto"
    if save_spec is not None and not auto:
        raise SweeperError(
            "--save-spec needs --gpu auto: it records the attributes of the device it runs on"
        )
    try:
        spec, notes = gpumod.resolve(gpu)
    except NoGPUError as e:
        raise NoGPUError(f"{e}; or pass --gpu NAME (see `sweeper gpus`) instead of auto") from None
    p = planmod.make_plan(spec, dtypes=dtypes, resolution=resolution, notes=notes)
    path = check_output(Path(out) if out else Path("sweeps") / f"{spec.key}.json")
    if save_spec is not None:
        check_output(save_spec, option="--save-spec")  # before the plan is written
    shown = list(notes)
    spec_needs_write = save_spec is not None and gpumod.spec_file_needs_write(spec, save_spec)
    planmod.write_plan(p, path, force=force)
    if save_spec is not None:
        if spec_needs_write:
            gpumod.write_spec_file(spec, save_spec)
            shown.append(f"wrote the device's spec to {save_spec}")
        else:
            shown.append(f"{save_spec} already holds this device's spec; left as it is")
    return planmod.PlanResult(plan=p, path=path, summary=planmod.summarize(p), notes=tuple(shown))


# ---- plot / report -------------------------------------------------------------------------


def plot(
    run: str | None = None,
    formats: tuple[str, ...] | list[str] = ("png", "svg"),
    root: str = "results",
    top: int = 3,
    heatmap_top: int = 40,
    force: bool = False,
) -> list:
    """Render every figure of a run folder (default: the newest under `root`) into
    <run>/plots/, unless they are current (`force` draws them anyway); returns the figure
    files (list of Path). Never measures."""
    from sweeper.report.plots import render_plots
    from sweeper.runfolder import resolve_run

    return render_plots(resolve_run(run, root), formats, top, heatmap_top, force)


def report(run: str | None = None, root: str = "results", targets: str | None = None):
    """Write <run>/REPORT.md (default run: the newest complete one under `root`), rendering
    the plots first if they are missing or were drawn from other inputs; returns its
    Path. `targets`: a targets file checked instead of `sweeper/analyze/targets.py`'s
    defaults (read and validated before anything is written)."""
    from sweeper.report.report import write_report
    from sweeper.runfolder import resolve_run

    return write_report(resolve_run(run, root), targets=targets)


# ---- run -----------------------------------------------------------------------------------


def find_plan(gpu_key: str, sweeps: str = "sweeps"):
    """The newest plan file in `sweeps` made for `gpu_key` (by modification time)."""
    from pathlib import Path

    from sweeper.errors import SweeperError
    from sweeper.plan.planfile import load_plan

    found = []
    for path in sorted(Path(sweeps).glob("*.json")):
        try:
            p = load_plan(path)
        except SweeperError:
            continue
        if p.gpu == gpu_key:
            found.append((path.stat().st_mtime, str(path), p))
    if not found:
        raise SweeperError(
            f"no plan for '{gpu_key}' in {sweeps}/; run `sweeper plan --gpu {gpu_key}` first"
        )
    _, path, p = max(found)
    return path, p


def require_cuda(command: str) -> None:
    """Raise one line naming the `cuda` extra when numba / numba-cuda / the CUDA bindings are
    not installed (the light install reads results but cannot measure or compile)."""
    from importlib.util import find_spec

    from sweeper.errors import CUDA_EXTRA, SweeperError

    def missing(name: str) -> bool:
        try:
            return find_spec(name) is None
        except (ImportError, ValueError):
            return True

    gone = [n for n in ("numba", "numba.cuda", "cuda.bindings") if missing(n)]
    if gone:
        raise SweeperError(f"{command} needs the cuda extra: {CUDA_EXTRA} ({gone[0]} is missing)")


@dataclass(frozen=True)
class RunRequest:
    """What `sweeper run` is asked to measure, validated once when it is made.

    `plan_path` None takes the newest plan in sweeps/ for this GPU. `kernel` (FILE.cu:NAME,
    docs/external-kernels.md) adds a user's kernel as one more config, launched with
    `kernel_block` threads and the `kernel_grid` rule, swept at every size; `baseline`
    FILE.cu:NAME times every candidate against a user's kernel (`baseline_block`,
    `baseline_grid`). `resume` is True (the newest run for this GPU) or a run folder; a resumed
    run takes its grid, dtypes, modes, slice and kernels from its manifest. With
    `time_limit_s` the run stops cleanly after that many seconds. `configs` (fnmatch patterns
    of config names) and `sizes` ("LO:HI" MiB of working set) slice the run: every selected
    config at every selected planned size, no screening or refinement. `policy` ("none",
    "auto" or policy files, sweeper.run.dispatch) adds shipped policies' dispatch as one more
    config each, timed in its policy's mode. `allow_stateful` times users' kernels whose PTX
    reads a clock or keeps state in device memory (sweeper_kernels.scan), which are refused
    otherwise.
    """

    plan_path: str | None = None
    grid: str = "default"
    dtypes: tuple[str, ...] | None = None
    modes: tuple[str, ...] = ("hot",)
    baseline: str = "auto"
    allocating: bool = False
    full: bool = False
    resume: str | bool | None = None
    run_id: str | None = None
    out_root: str = "results"
    force: bool = False
    quick: bool = False
    workers: int | None = None
    time_limit_s: float | None = None
    configs: tuple[str, ...] | None = None
    sizes: str | None = None
    producer: str = "sm"
    kernel: str | None = None
    kernel_block: int = 256
    kernel_grid: str = "stride1"
    baseline_block: int = 256
    baseline_grid: str = "stride1"
    allow_stateful: bool = False
    policy: str = "none"
    executor: str | None = None  # None: DEFAULT_EXECUTOR for a new run, a resumed run's own
    devices: str | None = None  # "all" or "0,1,...": one Ray actor per GPU (sweeper.run.fleet)

    def __post_init__(self) -> None:
        from sweeper.analyze.columns import MODES
        from sweeper.errors import SweeperError

        for name in ("dtypes", "modes", "configs"):  # lists from callers become tuples
            v = getattr(self, name)
            if v is not None and not isinstance(v, tuple):
                object.__setattr__(self, name, tuple(v))
        if not self.modes:
            object.__setattr__(self, "modes", ("hot",))
        if self.plan_path is not None:
            object.__setattr__(self, "plan_path", str(self.plan_path))
        if self.executor is not None and self.executor not in EXECUTORS:
            raise SweeperError(f"--executor {self.executor!r}: use {' or '.join(EXECUTORS)}")
        if self.producer not in ("sm", "memcpy"):
            raise SweeperError(f"--producer {self.producer!r}: use sm or memcpy")
        if self.time_limit_s is not None and not self.time_limit_s > 0:
            raise SweeperError(
                f"--time-limit must be a positive number of seconds, got {self.time_limit_s}"
            )
        for m in self.modes:
            if m not in MODES:
                raise SweeperError(f"unknown mode {m!r}; known: {', '.join(MODES)}")


# sweeper.run.executor (one cell at a time) and sweeper.run.batched (a size's cells in batches)
EXECUTORS = ("classic", "batched")
DEFAULT_EXECUTOR = "batched"  # a new run's; a resumed run keeps the one it recorded


@dataclass(frozen=True)
class _Measure:
    """What a run measures: the request's choices, or a resumed run's recorded ones, and the
    plan they apply to (None until it is resolved)."""

    plan_path: str | None
    grid: str
    dtypes: tuple[str, ...] | None
    modes: tuple[str, ...]
    allocating: bool
    full: bool
    stopping: object
    search: object
    producer: str
    configs: tuple[str, ...]
    ws_range: tuple[int, int] | None
    kernels: list
    baseline_kernel: object | None
    dispatch: object = None
    resume_dir: object | None = None
    plan: object = None
    executor: str = DEFAULT_EXECUTOR


def run(
    request: RunRequest | str | None = None,
    *,
    progress=None,
    executor=None,
    **fields,
):
    """Measure a RunRequest on this machine's GPU (or with `executor`, e.g. a replay); returns
    the run folder. `request` may also be a plan path, with the request's fields as keywords.

    The steps: resolve what to measure (`_measure`: users' kernels, a resumed run's recorded
    choices, the plan, the policies' dispatch, every refusal before anything is written), the
    runner's configuration, the GPU executor, then the runner. Users' kernels are compiled and
    checked for the plan's compute capability before the GPU is touched, and for the device's
    before anything is written. With a time limit the run stops cleanly (the cell in flight
    finishes) and raises TimeLimitReached; its folder resumes where it stopped."""
    if not isinstance(request, RunRequest):
        if request is not None and "plan_path" in fields:
            raise TypeError("run() got the plan twice: as `request` and as `plan_path`")
        request = RunRequest(**{"plan_path": request, **fields})
    elif fields:
        request = replace(request, **fields)
    if request.devices is not None:
        from sweeper.run.fleet import parse_devices

        parse_devices(request.devices)  # a bad list is refused before anything else
        if executor is not None:
            raise TypeError("run() got an executor and --devices")
    elif executor is None:
        require_cuda("sweeper run")
    from sweeper.run.runner import start

    # a run over several GPUs resolves everything here, where no GPU is needed, and makes its
    # executors on the GPUs of its Ray actors
    m = _measure(request, executor, detect=request.devices is None)
    cfg = _run_config(request, m)
    pool = None
    if request.devices is not None:
        from functools import partial

        from sweeper.run.fleet import host_pool

        executor = pool = host_pool(
            request.devices, partial(_gpu_executor, request, m, cfg), planned_sizes(cfg)
        )
    elif executor is None:
        executor = _gpu_executor(request, m, cfg)
    try:
        return start(cfg, executor, resume=m.resume_dir, progress=progress)
    finally:
        if pool is not None:
            pool.close()


def planned_sizes(cfg) -> dict[str, list[int]]:
    """Per dtype of a run, the element counts of its plan's sizes (how a pooled run deals
    sizes to its GPUs)."""
    return {d: [e["n"] for e in cfg.plan.sizes(d)] for d in cfg.dtypes}


def fleet_run(campaign: str, address: str | None = None, force: bool = False) -> dict:
    """Measure a campaign (sweeper.run.campaign) on a Ray cluster: one run per GPU model, each
    on its GPUs (one Ray actor per GPU, of the model's accelerator type), all models at once;
    a run found complete is kept, one found stopped is resumed. Then each run's selection and
    policy, and the fleet's policy merged from them with its CUDA header, in
    <results>/fleet/<name>/. `address`: the cluster's (None: a local Ray instance of this
    host's GPUs, or the one already started). Returns {"runs": {gpu: run folder}, "policy":
    merged policy, "header": CUDA header}."""
    from concurrent.futures import ThreadPoolExecutor
    from functools import partial

    from sweeper.analyze.store import load_manifest
    from sweeper.errors import SweeperError
    from sweeper.files import folder_to_write
    from sweeper.plan.planfile import load_plan
    from sweeper.run.campaign import load_campaign
    from sweeper.run.fleet import actors, ray_module
    from sweeper.run.pool import PoolExecutor
    from sweeper.run.replay import ReplayExecutor
    from sweeper.run.runner import start
    from sweeper.runfolder import MANIFEST

    c = load_campaign(campaign)
    plans = [load_plan(r.plan) for r in c.runs]  # every plan read before Ray starts
    seen: dict[str, int] = {}
    for i, p in enumerate(plans):
        if p.gpu in seen:
            raise SweeperError(
                f"{c.path}: gpu[{seen[p.gpu]}] and gpu[{i}] both plan for '{p.gpu}': one run "
                "per GPU model (its `gpus` says how many of them measure it)"
            )
        seen[p.gpu] = i
    ray = ray_module()
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)

    def measure(r, plan):
        run_id = r.run_id or f"{c.name}-{plan.gpu}"
        run_dir = c.results / plan.gpu / run_id
        resume = None
        if (run_dir / MANIFEST).is_file():
            if load_manifest(run_dir).get("status") == "complete":
                return run_dir
            resume = str(run_dir)
        request = RunRequest(
            plan_path=str(r.plan), dtypes=r.dtypes, modes=r.modes, out_root=str(c.results),
            run_id=None if resume else run_id, resume=resume,
        )  # fmt: skip
        replay = ReplayExecutor(r.replay) if r.replay is not None else None
        m = _measure(request, replay, detect=False)
        cfg = _run_config(request, m)
        if r.replay is not None:
            make = partial(ReplayExecutor, str(r.replay))
        else:
            make = partial(_gpu_executor, request, m, cfg)
        workers = actors(make, r.gpus, r.accelerator_type, name=f"{plan.gpu}-gpu")
        pool = PoolExecutor(workers, planned_sizes(cfg))
        try:
            return start(cfg, pool, resume=m.resume_dir)
        finally:
            pool.close()

    with ThreadPoolExecutor(len(c.runs)) as threads:
        run_dirs = list(threads.map(measure, c.runs, plans))
    policies = []
    for run_dir in run_dirs:
        select(str(run_dir), root=str(c.results))
        path, _ = policy_build(str(run_dir), root=str(c.results))
        policies.append(str(path))
    fleet = folder_to_write(c.results / "fleet" / c.name, "fleet folder")
    fleet.mkdir(parents=True, exist_ok=True)
    merged, _ = policy_merge(policies, out=str(fleet / "policy.json"), force=force)
    header = export(str(merged), "cuda", out=str(fleet / "relu_policy.cuh"), force=force)
    return {
        "runs": {p.gpu: d for p, d in zip(plans, run_dirs, strict=True)},
        "policy": merged,
        "header": header,
    }


def _fresh(req: RunRequest, executor, kernels: list, baseline_kernel) -> _Measure:
    """A new run measures what the request asks (a replay climbs as its recorded run did)."""
    from dataclasses import fields

    from sweeper.run.search import SearchParams, search_params
    from sweeper.stats import Stopping

    search = SearchParams()
    replayed = getattr(executor, "manifest", {}).get("search")
    if replayed:  # a replay searches as the run it answers from did, by what this version has
        known = {f.name for f in fields(SearchParams)}
        search = search_params({k: v for k, v in replayed.items() if k in known})
    quick = Stopping(min_samples=4, max_samples=8, rel_tol=0.02, time_cap_s=0.5)
    return _Measure(
        plan_path=req.plan_path, grid=req.grid, dtypes=req.dtypes, modes=req.modes,
        allocating=req.allocating, full=req.full, stopping=quick if req.quick else Stopping(),
        search=search, producer=req.producer, configs=tuple(req.configs or ()),
        ws_range=parse_ws_range(req.sizes) if req.sizes else None, kernels=kernels,
        baseline_kernel=baseline_kernel, executor=req.executor or DEFAULT_EXECUTOR,
    )  # fmt: skip


def _resumed(req: RunRequest, gpu_key: str | None) -> _Measure:
    """A resumed run measures what its manifest recorded: grid, dtypes, modes, pattern,
    stopping, search, producer, slice, users' kernels and policies' dispatch."""
    from pathlib import Path

    from sweeper.analyze.gpuwork import executor_kind
    from sweeper.analyze.store import load_manifest
    from sweeper.errors import SweeperError
    from sweeper.run.dispatch import dispatch_from_manifest
    from sweeper.run.external import kernels_from_manifest
    from sweeper.run.search import search_params
    from sweeper.runfolder import newest_run
    from sweeper.stats import Stopping

    resume_dir = (
        Path(req.resume) if isinstance(req.resume, str) else newest_run(req.out_root, gpu_key)
    )
    man = load_manifest(resume_dir)
    recorded = man.get("slice") or {}
    executor = executor_kind(man)
    if req.executor is not None and req.executor != executor:
        raise SweeperError(
            f"{resume_dir} is measured by the {executor} executor; resume it with that one "
            f"(leave --executor out) or start a new run with --executor {req.executor}"
        )
    kernels, baseline_kernel = kernels_from_manifest(man, req.allow_stateful)
    return _Measure(
        plan_path=req.plan_path or man["plan"]["path"], grid=man["grid"],
        dtypes=tuple(man["dtypes"]), modes=tuple(man["modes"]),
        allocating=man.get("pattern") == "allocating", full=man.get("full", False),
        stopping=Stopping(**man["stopping"]), search=search_params(man["search"]),
        producer=man.get("harness", {}).get("after_write_producer", "memcpy"),
        configs=tuple(recorded.get("configs") or ()),
        ws_range=tuple(recorded["ws_range"]) if recorded.get("ws_range") else None,
        kernels=kernels, baseline_kernel=baseline_kernel,
        dispatch=dispatch_from_manifest(man), resume_dir=resume_dir, executor=executor,
    )  # fmt: skip


def _measure(req: RunRequest, executor, detect: bool = True) -> _Measure:
    """Resolve the users' kernels, the choices (the request's, or a resumed run's), the plan
    and the policies' dispatch; refuse a bad grid, a kernel that does not compile, a taken run
    id or a plan for another GPU before anything is written. Without `detect` this process's
    GPU is not asked which it is (a run on other processes' GPUs: the runner checks the plan
    against the device they describe)."""
    from sweeper.errors import PlanMismatchError, SweeperError
    from sweeper.plan.planfile import load_plan
    from sweeper.run.external import check_kernels, user_kernels
    from sweeper.runfolder import EXTERNAL_GRID, new_run_dir

    kernels, baseline_kernel = user_kernels(
        req.kernel, req.kernel_block, req.kernel_grid,
        req.baseline, req.baseline_block, req.baseline_grid, req.allow_stateful,
    )  # fmt: skip
    gpu_key = None
    if detect and executor is None and (req.plan_path is None or req.resume is True):
        gpu_key = _gpu_key()
    m = _resumed(req, gpu_key) if req.resume else _fresh(req, executor, kernels, baseline_kernel)
    if m.plan_path is None:
        if gpu_key is None:
            raise SweeperError("name the plan file to run (--plan FILE)")
        plan_path, plan_obj = find_plan(gpu_key)
    else:
        plan_path, plan_obj = m.plan_path, load_plan(m.plan_path)
    from sweeper_kernels import GRIDS

    if m.grid not in GRIDS and m.grid != EXTERNAL_GRID:  # before anything is written
        raise SweeperError(f"--grid {m.grid!r}: known grids are {', '.join(GRIDS)}")
    run_dtypes = tuple(m.dtypes or plan_obj.dtypes)
    check_kernels([*m.kernels, *([m.baseline_kernel] if m.baseline_kernel else [])],
                  run_dtypes, plan_obj.cc)  # fmt: skip
    dispatch = m.dispatch
    if m.resume_dir is None:
        from sweeper.run.dispatch import resolve

        dispatch = resolve(req.policy, req.out_root, plan_obj.gpu, list(m.modes), list(run_dtypes))
    if detect and executor is None and gpu_key is None:
        gpu_key = _gpu_key()
    if m.resume_dir is None:
        new_run_dir(req.out_root, plan_obj.gpu, req.run_id)
    if gpu_key is not None and plan_obj.gpu != gpu_key and not req.force:
        raise PlanMismatchError(
            f"{plan_path} was planned for '{plan_obj.gpu}' but this GPU is '{gpu_key}'; "
            f"run `sweeper plan --gpu auto` (or pass --other-gpu)"
        )
    return replace(m, plan_path=str(plan_path), plan=plan_obj, dtypes=run_dtypes, dispatch=dispatch)


def _run_config(req: RunRequest, m: _Measure):
    """The runner's configuration for what `_measure` resolved."""
    from sweeper.run.runner import RunConfig

    return RunConfig(
        time_limit_s=req.time_limit_s,
        configs=m.configs,
        ws_range=m.ws_range,
        plan=m.plan,
        plan_path=m.plan_path,
        grid=m.grid,
        dtypes=m.dtypes,
        keep_configs=tuple(k.config for k in m.kernels),
        modes=m.modes,
        pattern="allocating" if m.allocating else "preallocated",
        stopping=m.stopping,
        search=m.search,
        full=m.full,
        out_root=req.out_root,
        run_id=req.run_id,
    )


def _gpu_executor(req: RunRequest, m: _Measure, cfg):
    """The executor that times on the GPU; users' kernels are checked on the device first."""
    if m.executor == "batched":
        from sweeper.run.batched import BatchedExecutor as GpuExecutor
    else:
        from sweeper.run.executor import GpuExecutor

    executor = GpuExecutor(
        baseline=req.baseline,
        pattern=cfg.pattern,
        stopping=m.stopping,
        dram_peak_gbps=m.plan.dram_peak_gbps,
        workers=req.workers,
        producer=m.producer,
        kernels=m.kernels,
        baseline_kernel=m.baseline_kernel,
        dispatch=m.dispatch,
    )
    if m.kernels or m.baseline_kernel:
        executor.check_external(cfg.dtypes)
    return executor


def _gpu_key() -> str:
    """The spec-table key of device 0 (NoGPUError without one, or with a driver older than
    the CUDA 13 wheels need)."""
    from sweeper.errors import NoGPUError
    from sweeper.plan.gpus import detect, require_driver, spec_for_device

    try:
        info = detect()
    except NoGPUError as e:
        raise NoGPUError(f"{e}; `sweeper run` measures on this machine's GPU") from None
    require_driver(info.driver_version)
    spec, _notes = spec_for_device(info)
    return spec.key


def audit(
    kernel: str,
    plan_path: str | None = None,
    *,
    kernel_block: int = 256,
    kernel_grid: str = "stride1",
    dtypes: list[str] | None = None,
    modes: list[str] | None = None,
    baseline: str = "auto",
    baseline_block: int = 256,
    baseline_grid: str = "stride1",
    run_id: str | None = None,
    out_root: str = "results",
    quick: bool = False,
    sizes: str | None = None,
    producer: str = "sm",
    progress=None,
    executor=None,
    policy: str = "auto",
    allow_stateful: bool = False,
):
    """Time a user's kernel (FILE.cu:NAME) against the baseline at every planned size, with
    every guard, in the modes asked for, beside the dispatch of the shipped policies `policy`
    names (sweeper.run.dispatch: "auto" takes, per mode and dtype, the newest verified policy
    for the GPU that covers it);
    then write the selection and REPORT.md, whose first section is the cliff
    (sweeper.analyze.cliff). Returns (run folder, cliff lines)."""
    from sweeper.analyze.cliff import cliff_lines
    from sweeper.analyze.store import load_run
    from sweeper.runfolder import EXTERNAL_GRID

    if executor is None:
        require_cuda("sweeper audit")
    run_dir = run(
        plan_path,
        grid=EXTERNAL_GRID,
        dtypes=dtypes,
        modes=modes,
        baseline=baseline,
        full=True,
        run_id=run_id,
        out_root=out_root,
        quick=quick,
        sizes=sizes,
        producer=producer,
        progress=progress,
        executor=executor,
        kernel=kernel,
        kernel_block=kernel_block,
        kernel_grid=kernel_grid,
        baseline_block=baseline_block,
        baseline_grid=baseline_grid,
        allow_stateful=allow_stateful,
        policy=policy,
    )
    select(str(run_dir))
    report(str(run_dir))
    data = load_run(run_dir)
    return run_dir, cliff_lines(data.results, data.manifest)


def kernel_check(kernel: str, dtypes: list[str] | None = None, cc: int = 90,
                 block: int = 256, grid: str = "stride1",
                 allow_stateful: bool = False) -> dict:  # fmt: skip
    """Compile and check a user's kernel (FILE.cu:NAME) for compute capability `cc` with
    NVRTC, without a GPU: {"config", "symbols", "cc"}. KernelError on the first problem."""
    require_cuda("sweeper kernels check")
    from sweeper_kernels.dtypes import DTYPES
    from sweeper_kernels.external import check, load_kernel

    from sweeper.errors import SweeperError

    if cc < 50 or cc > 129:
        raise SweeperError(f"--cc {cc}: give the compute capability as two digits, e.g. 90")
    k = load_kernel(kernel, block, grid, allow_stateful)
    ds = list(dtypes or DTYPES)
    check(k, ds, (cc // 10, cc % 10))
    return {"config": k.config, "symbols": [f"{k.name}_{d}" for d in ds], "cc": cc}


def parse_ws_range(text: str) -> tuple[int, int]:
    """'36:52' (MiB of working set, either end may be empty) -> (lo, hi) bytes."""
    from sweeper.errors import SweeperError
    from sweeper.units import MiB

    lo, sep, hi = text.partition(":")
    try:
        if not sep:
            raise ValueError
        lo_b = int(float(lo) * MiB) if lo.strip() else 0
        hi_b = int(float(hi) * MiB) if hi.strip() else 2**63 - 1
    except ValueError:
        raise SweeperError(
            f"--sizes {text!r}: use LO:HI in MiB of working set, e.g. 36:52"
        ) from None
    if not 0 <= lo_b <= hi_b:
        raise SweeperError(f"--sizes {text!r}: LO must be at least 0 and at most HI")
    return lo_b, hi_b


def run_summary(run_dir) -> dict:
    """Per mode x dtype: cells, sizes, non-ok cells, best-per-size ratio range vs the baseline,
    % of copy at the largest size. Strings, ready for a table."""
    from sweeper.analyze.store import load_run

    data = load_run(run_dir)
    df = data.results
    cols = [
        "mode",
        "dtype",
        "sizes",
        "cells",
        "not ok",
        "best/base min",
        "best/base max",
        "% copy @ max size",
        "pruned",
    ]
    rows = []
    pruned = data.manifest.get("pruned", [])
    for (mode, dtype), g in df.groupby(["mode", "dtype"], sort=True):
        c = g[(g.role == "candidate") & (g.status == "ok")]
        if c.empty:
            rows.append([mode, dtype, str(g.n.nunique()), str(len(g)), "all", "-", "-", "-", "-"])
            continue
        best = c.loc[c.groupby("n").ratio.idxmax()]
        top = best.loc[best.ws_bytes.idxmax()]
        pct = 100 * top.gbps / top.copy_gbps if top.copy_gbps == top.copy_gbps else float("nan")
        npruned = sum(1 for p in pruned if p.get("mode") == mode and p.get("dtype") == dtype)
        rows.append(
            [
                mode,
                dtype,
                str(g.n.nunique()),
                str(int((g.role == "candidate").sum())),
                str(int((g.status != "ok").sum())),
                f"{best.ratio.min():.3f}x",
                f"{best.ratio.max():.3f}x",
                f"{pct:.1f}%",
                str(npruned),
            ]
        )
    m = data.manifest
    notes = [
        f"manifest: {run_dir}/manifest.json  status: {m.get('status')}  "
        f"total {m.get('timing', {}).get('total_s', '?')} s"
    ]
    return {"columns": cols, "rows": rows, "notes": notes}


# ---- select / policy / export / verify -------------------------------------------------------


def select(run: str | None = None, root: str = "results", tolerance: float | None = None):
    """Per mode x pattern x dtype x size: the chosen config, its GB/s, % of copy, ratio to the
    baseline with CI, runner-up and margin. Writes <run>/selection.csv and selection.md;
    returns the DataFrame."""
    from sweeper.analyze import select as sel
    from sweeper.analyze.store import load_run
    from sweeper.runfolder import baseline_of, resolve_run

    data = load_run(resolve_run(run, root))
    tol = sel.DEFAULT_TOLERANCE if tolerance is None else tolerance
    df = sel.select(sel.searched(data.results, data.manifest), tol)
    l2 = (data.manifest.get("device") or {}).get("l2_bytes")
    sel.write_selection(
        data.path,
        df,
        l2,
        f"{data.manifest.get('run_id', data.path.name)}",
        baseline_of(data.manifest),
    )
    return df


def _pass_groups(vt) -> dict[tuple, list[dict]]:
    """A verify table's rows (load_verify; None: no table) by size, each size's in pass
    order: what verdict.pass_spread reads."""
    from sweeper.analyze.verdict import size_groups

    if vt is None or "pass" not in vt:
        return {}
    return size_groups(vt.sort_values("pass", kind="stable").to_dict("records"))


def verify_tolerance(run_dir) -> list[tuple[int | None, float]]:
    """The tie tolerance a policy needs on this GPU, per range of working set
    (sweeper.analyze.select.TOLERANCE_RANGES_MIB): the p95 of how far the ratio to the baseline
    moved between the passes of the run's `sweeper verify` (verify_timing.csv) over that
    range's sizes (over all sizes where a range has fewer than TOLERANCE_MIN_SIZES), and never
    below the default. Returns [(hi_bytes, value), ..., (None, value)]."""
    from sweeper.analyze.select import (
        DEFAULT_TOLERANCE,
        TOLERANCE_MIN_SIZES,
        TOLERANCE_RANGES_MIB,
    )
    from sweeper.analyze.verdict import load_verify, pass_spread
    from sweeper.errors import SweeperError
    from sweeper.units import MiB

    groups = _pass_groups(load_verify(run_dir))
    overall = pass_spread(groups.values())
    if overall is None:
        raise SweeperError(
            f"--tolerance verify: {run_dir} has no verify timing of two or more passes; run "
            "`sweeper verify RUN/policy.json --passes 2` on the GPU first"
        )
    out: list[tuple[int | None, float]] = []
    lo = 0
    for hi in [*(int(m * MiB) for m in TOLERANCE_RANGES_MIB), None]:
        sel = [g for (_, ws), g in groups.items() if ws > lo and (hi is None or ws <= hi)]
        spread = pass_spread(sel) if len(sel) >= TOLERANCE_MIN_SIZES else None
        out.append((hi, max(DEFAULT_TOLERANCE, round((spread or overall)["p95"], 4))))
        lo = hi or 0
    return out


def policy_build(
    run: str | None = None,
    root: str = "results",
    tolerance: float | str | list | None = None,
    mode: str | None = None,
    pattern: str | None = None,
    resolution: int | None = None,
    floors: bool = True,
    targets: str | None = None,
):
    """Build <run>/policy.json (fewest bands per dtype; refuses boundaries in brackets wider
    than the plan resolution). With `floors`, a tie keeps the targets' floors
    (sweeper.analyze.policy.keep_floors): the project targets, or those of the `targets` file
    (as `sweeper report --targets` reads it). Returns (path, policy dict)."""
    from sweeper.analyze import policy as pol
    from sweeper.analyze.select import DEFAULT_TOLERANCE
    from sweeper.analyze.store import load_run
    from sweeper.analyze.targets import load_targets
    from sweeper.analyze.targets import targets as project_targets
    from sweeper.errors import SweeperError
    from sweeper.runfolder import MANIFEST, POLICY, resolve_run

    if targets is not None and not floors:
        raise SweeperError("--targets sets the floors a tie keeps; it has no use with --no-floors")
    chosen = load_targets(targets) if targets is not None else None  # before any work
    data = load_run(resolve_run(run, root))
    pol.check_complete(data.path, data.manifest)
    planned = data.manifest["plan"].get("resolution")
    if resolution is not None and planned is not None and resolution != planned:
        raise SweeperError(
            f"--resolution {resolution}: the run's plan has resolution {planned} "
            f"({data.path / MANIFEST} plan.resolution); a policy's brackets are checked "
            "against the plan's, leave --resolution out"
        )
    if tolerance == "verify":
        tolerance = verify_tolerance(data.path)  # one per range of working set
    elif tolerance is None:
        tolerance = DEFAULT_TOLERANCE
    elif not isinstance(tolerance, list):
        tolerance = float(tolerance)
    if not floors:
        chosen = ()
    elif chosen is None:
        chosen = project_targets(int(data.manifest["device"]["l2_bytes"]))
    doc = pol.build_policy(
        data.results,
        data.manifest,
        tolerance,
        mode=mode,
        pattern=pattern,
        resolution=resolution,
        floors=chosen,
        ceiling_gbps=(data.manifest.get("ceiling") or {}).get("gbps"),
    )
    path = pol.write_policy(data.path / POLICY, doc)
    return path, pol.load_policy(path)


def policy_merge(paths: list[str], out: str, force: bool = False):
    """Merge per-GPU policies into one rule keyed by (cc, l2_bytes); returns (path, doc).
    Never writes onto one of the policies, nor over a file with other contents unless
    `force`."""
    from sweeper.analyze import policy as pol

    docs = [pol.load_policy(p) for p in paths]
    merged = pol.merge_docs(docs, [str(p) for p in paths])
    path = pol.write_merged(out, merged, inputs=paths, force=force)
    return path, pol.load_merged(path)


def policy_show(path: str) -> str:
    """A readable summary of a policy or merged policy."""
    from sweeper.analyze import policy as pol
    from sweeper.files import read_json

    doc = pol.load_any(path)
    kind = read_json(path).get("kind")
    return pol.describe(pol.load_policy(path) if kind == "policy" else doc)


def export(policy: str, fmt: str = "cuda", out: str | None = None, force: bool = False):
    """Render a policy (either kind) as a CUDA header, runtime JSON, Python module or PyTorch
    op; a file already there with other contents is kept unless `force`."""
    from sweeper.export import export as do_export

    return do_export(policy, fmt, out, force)


def verify(
    policy: str,
    out_dir: str | None = None,
    timing: bool = True,
    passes: int = 2,
    sizes: str | None = None,
    configs: str | None = None,
    dtypes: str | None = None,
) -> dict:
    """GPU: build the exported header, check it bit-exact on every dtype, and (timing) time it
    over the run's sizes against its Numba variant and the baseline, in `passes` passes; a
    size fails only if it fails in every pass (see verify.py). `sizes` ("LO:HI" MiB of working
    set), `configs` (comma-separated patterns of the dispatched config) and `dtypes`
    (comma-separated) time only that slice."""
    from sweeper.run.verify import verify as do_verify

    require_cuda("sweeper verify")
    ws_range = parse_ws_range(sizes) if sizes else None
    pats = [c.strip() for c in configs.split(",") if c.strip()] if configs else None
    dts = [d.strip() for d in dtypes.split(",") if d.strip()] if dtypes else None
    _check_dtypes(dts)
    return do_verify(
        policy,
        out_dir,
        timing=timing,
        passes=passes,
        ws_range=ws_range,
        configs=pats,
        dtypes_only=dts,
    )


# ---- kernels ---------------------------------------------------------------------------------


def kernels_list(grid: str = "default", dtypes: str | None = None) -> dict:
    """The variants of a kernel grid: {"grid", "variants": [Variant], "compiles", "per_dtype"};
    `dtypes` comma-separated."""
    from sweeper_kernels.variants import compile_keys, get_grid

    wanted = [d.strip() for d in dtypes.split(",") if d.strip()] if dtypes else None
    variants = get_grid(grid, wanted)
    per_dtype: dict[str, int] = {}
    for v in variants:
        per_dtype[v.dtype] = per_dtype.get(v.dtype, 0) + 1
    return {
        "grid": grid,
        "variants": variants,
        "compiles": len(compile_keys(variants)),
        "per_dtype": per_dtype,
    }


def kernels_ptx(variant_id: str, cc: int = 90) -> str:
    """PTX of one variant for compute capability `cc` (e.g. 90); needs no GPU."""
    require_cuda("sweeper kernels ptx")
    from sweeper_kernels.build import ptx
    from sweeper_kernels.variants import Variant

    from sweeper.errors import SweeperError

    if cc < 50 or cc > 129:
        raise SweeperError(f"--cc {cc}: give the compute capability as two digits, e.g. 90")
    return ptx(Variant.from_id(variant_id), (cc // 10, cc % 10))


def _check_dtypes(dtypes: list[str] | None) -> None:
    """One line for a --dtypes value sweeper does not know."""
    from sweeper.dtypes import DTYPES
    from sweeper.errors import SweeperError

    for d in dtypes or ():
        if d not in DTYPES:
            raise SweeperError(f"--dtypes: unknown dtype {d!r} (known: {', '.join(DTYPES)})")


def _load_op(spec: str):
    """A built-in op or a user's FILE.py:NAME (sweeper_kernels.ops.load_op), its mistake in
    one line."""
    from sweeper_kernels.ops import load_op

    from sweeper.errors import SweeperError

    try:
        return load_op(spec)
    except ValueError as e:
        raise SweeperError(str(e)) from None


def ops_list() -> list[dict]:
    """The ops sweeper knows, one row each: name, summary, dtypes, bytes read and written per
    element at each dtype, exactness rule, baseline, where it differs from the baseline, and
    whether the sweep's kernels compute it yet."""
    from sweeper.ops import OPS

    return [
        {"op": op.name, "summary": op.summary, "dtypes": list(op.dtypes),
         "bytes": {d: (op.reads(d), op.writes(d)) for d in op.dtypes}, "exact": op.exact,
         "baseline": op.baseline, "differs": op.differs, "swept": op.swept,
         "layout": op.layout}
        for op in OPS.values()
    ]  # fmt: skip


def ops_check(specs: list[str] | None = None, dtypes: list[str] | None = None,
              n_random: int = 1 << 16) -> list[dict]:  # fmt: skip
    """Each op's C++ element function compiled for the CPU (nvcc, no GPU) against its
    reference, under its rule: special values (every pair for two inputs) and `n_random`
    random bit patterns per input, at each dtype it takes (or those of `dtypes` it takes).
    `specs`: built-in op names or FILE.py:NAME of a user's op; all built-ins when empty. One
    row per (op, dtype): {"op", "dtype", "out", "inputs", "mismatches", "example"}."""
    from sweeper_kernels.ops.host import check_on_host, host_library

    from sweeper.errors import SweeperError
    from sweeper.ops import OPS

    _check_dtypes(dtypes)
    ops = [_load_op(s) for s in specs] if specs else list(OPS.values())
    lib = host_library(tuple(ops))
    rows = []
    for op in ops:
        for d in op.dtypes:
            if not dtypes or d in dtypes:
                rows.append({"op": op.name, "dtype": d, "out": op.out_dtype(d),
                             **check_on_host(op, d, n_random=n_random, lib=lib)})  # fmt: skip
    if not rows:
        raise SweeperError(f"--dtypes {','.join(dtypes or ())}: no op given takes these dtypes")
    return rows


def ops_source(spec: str, device: bool = False) -> str:
    """The C++ that `ops check` compiles for op `spec` (a built-in name or FILE.py:NAME): its
    element function and one host entry per dtype, or with `device` the check kernels NVRTC
    builds for the GPU test."""
    from sweeper_kernels.ops.host import device_source, host_source

    return (device_source if device else host_source)((_load_op(spec),))


def compare(run_a, run_b, tolerance: float = 0.03) -> dict:
    """Agreement of two runs on their common ok cells (same mode, dtype, n, role, config):
    the share of cells whose median time and ratio to the baseline differ by at most
    `tolerance`, overall and per range of working set (`by_size`: each range's cells and
    both shares); the median signed difference b / a - 1 (`shift`) of the time, of the
    baseline's time in the same cells (`base_time_us`) and of the ratio, which a bias of
    one run against the other moves and noise does not; and where both folders hold a
    policy.json, how their picks compare at every size both measured (`policies`,
    sweeper.analyze.policy.policy_agreement)."""
    from sweeper.analyze.store import load_run
    from sweeper.errors import SweeperError

    if not 0 < tolerance < 1:
        raise SweeperError(f"--tolerance {tolerance:g}: a relative difference in (0, 1), e.g. 0.03")
    data_a, data_b = load_run(run_a), load_run(run_b)
    a, b = data_a.results, data_b.results
    policies = _policy_agreement(run_a, run_b, a, b)
    key = ["mode", "dtype", "n", "role", "config"]
    m = a.merge(b, on=key, suffixes=("_a", "_b"))
    m = m[(m.status_a == "ok") & (m.status_b == "ok")]
    out = {"runs": [run_card(d) for d in (data_a, data_b)], "common_cells": int(len(m)),
           "tolerance": tolerance, "by_size": [], "policies": policies,
           "headline": headline_agreement(data_a, data_b)}  # fmt: skip
    if m.empty:
        return out
    signed = {col: m[f"{col}_b"] / m[f"{col}_a"] - 1 for col in ("time_us", "ratio")}
    devs = {col: d.abs() for col, d in signed.items()}
    for col, dev in devs.items():
        out[col] = {
            "within": float((dev <= tolerance).mean()),
            "median_dev": float(dev.median()),
            "p95_dev": float(dev.quantile(0.95)),
            "shift": float(signed[col].median()),
        }
    cand = (m["role"] == "candidate").to_numpy()
    if cand.any():
        dev = devs["ratio"][cand]
        out["candidate_ratio"] = {
            "cells": int(cand.sum()),
            "within": float((dev <= tolerance).mean()),
            "shift": float(signed["ratio"][cand].median()),
        }
    if "base_time_us_a" in m:
        base = (m["base_time_us_b"] / m["base_time_us_a"] - 1).dropna()
        if not base.empty:
            out["base_time_us"] = {"shift": float(base.median()), "cells": int(len(base))}
    edges = [0, 1, 4, 16, 64, 256, float("inf")]
    mib = m["ws_bytes_a"] / 2**20
    for lo, hi in zip(edges, edges[1:], strict=False):
        sel = (mib > lo) & (mib <= hi)
        if sel.any():
            out["by_size"].append(
                {"mib": f"({lo:g}, {hi:g}]", "cells": int(sel.sum()),
                 **{col: float((dev[sel] <= tolerance).mean()) for col, dev in devs.items()}}
            )  # fmt: skip
    return out


def run_card(data) -> dict:
    """What `sweeper compare` names a run by: its folder, executor, commit, GPU and the
    wall time of its `sweeper run`."""
    from sweeper.analyze.gpuwork import executor_kind

    man = data.manifest
    return {
        "path": str(data.path),
        "executor": executor_kind(man),
        "commit": str(man.get("git_commit") or "?"),
        "gpu": str((man.get("device") or {}).get("name") or "?"),
        "total_s": (man.get("timing") or {}).get("total_s"),
    }


def headline_agreement(data_a, data_b) -> list[dict]:
    """The README's headline figures of two runs side by side (headline_rows); empty unless
    both folders hold a verify_timing.csv."""
    from sweeper.analyze.verdict import load_verify

    vts = [load_verify(d.path) for d in (data_a, data_b)]
    l2 = int((data_a.manifest.get("device") or {}).get("l2_bytes") or 0)
    if any(v is None for v in vts) or l2 <= 0:
        return []
    return headline_rows(*vts, l2)


def headline_rows(vt_a, vt_b, l2_bytes: int) -> list[dict]:
    """Per mode, dtype and range of working set (sweeper.report.summary.ranges of
    `l2_bytes`) both verify tables cover: the lowest and highest of verify's lower pass at
    each size in A and in B, and whether either end moved by more than the run-to-run spread
    (the larger of the two tables' pass-to-pass p95: the noise between two timings of one
    header; None, and nothing counted as moved, where neither has two passes)."""
    from sweeper.analyze.verdict import pass_spread
    from sweeper.report.summary import range_ends, verified_ratios

    spreads = [(pass_spread(_pass_groups(vt).values()) or {}).get("p95") for vt in (vt_a, vt_b)]
    known = [s for s in spreads if s is not None]
    spread = max(known) if known else None
    out = []
    for mode in [md for md in vt_a["mode"].unique() if md in set(vt_b["mode"])]:
        per = [verified_ratios(vt, mode) for vt in (vt_a, vt_b)]
        for dtype in [d for d in per[0]["dtype"].unique() if d in set(per[1]["dtype"])]:
            a_ends, b_ends = (range_ends(p, l2_bytes, dtype) for p in per)
            for (label, a), (_, b) in zip(a_ends, b_ends, strict=True):
                if a is None or b is None:
                    continue
                move = max(abs(b[0] / a[0] - 1), abs(b[1] / a[1] - 1))
                out.append({"mode": mode, "dtype": dtype, "range": label, "a": a, "b": b,
                            "move": move, "spread": spread,
                            "moved": spread is not None and move > spread})  # fmt: skip
    return out


def _policy_agreement(run_a, run_b, cells_a, cells_b) -> list[dict]:
    """Both run folders' policy.json compared (sweeper.analyze.policy.policy_agreement); none
    where either folder has no policy."""
    from pathlib import Path

    from sweeper.analyze.policy import load_policy, policy_agreement

    paths = [Path(r) / "policy.json" for r in (run_a, run_b)]
    if not all(p.is_file() for p in paths):
        return []
    pol_a, pol_b = (load_policy(p) for p in paths)
    return policy_agreement(pol_a, pol_b, cells_a, cells_b)


def gpu_work(run: str, max_samples: int | None = None, current_warm_up: bool = False) -> str:
    """The GPU-work floor of a hot run's candidate cells as a markdown table (with the run's
    wall time beside it), sweeper.analyze.gpuwork."""
    from sweeper.analyze.gpuwork import table
    from sweeper.errors import SweeperError

    if max_samples is not None and max_samples < 1:
        raise SweeperError(f"--max-samples {max_samples}: 1 or more")
    return "\n".join(table(run, max_samples, current_warm_up))
