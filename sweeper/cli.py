"""The `sweeper` command: parse -> one api call -> render. No file formats or pandas here."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from sweeper import __version__
from sweeper.api import DEFAULT_EXECUTOR
from sweeper.errors import USER_ERRORS
from sweeper.units import fmt_bytes

app = typer.Typer(
    name="sweeper",
    help="Byte-gap-free sweeps and launch-policy selection for memory-bound GPU kernels.",
    epilog="Example: sweeper --device 1 run --dtypes fp32",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"sweeper {__version__}")
        raise typer.Exit()


_DEBUG = {"on": False}


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    debug: bool = typer.Option(
        False, "--debug", help="Show the traceback of an error instead of its one line."
    ),
    device: int = typer.Option(
        None,
        "--device",
        min=0,
        metavar="N",
        help="The GPU to use, by index (of CUDA_VISIBLE_DEVICES where set).",
        show_default="0",
    ),
) -> None:
    """sweeper: plan -> run -> select -> policy -> export, with plots and reports."""
    _DEBUG["on"] = debug
    if device is not None:
        from sweeper.devices import use_device

        try:
            use_device(device)
        except USER_ERRORS as e:
            fail(str(e))


def fail(message: str) -> None:
    """Print one clear line on stderr and exit 1; with --debug, re-raise the error being
    handled (its traceback)."""
    if _DEBUG["on"] and sys.exc_info()[1] is not None:
        raise sys.exc_info()[1]
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


_RUN_HELP = "Run folder results/<gpu>/<run-id>."


def _named_run(run: str | None) -> str:
    """The run a command reads: the one named, or the newest complete one, which is then
    named on stderr (so the output says which run it describes)."""
    if run is not None:
        return run
    from sweeper.runfolder import resolve_run

    path = resolve_run(None)
    typer.echo(f"run: {path} (the newest complete run)", err=True)
    return str(path)


def _echo_json(doc: dict) -> None:
    import json

    typer.echo(json.dumps(doc, indent=1, sort_keys=True))


# Shared wording, so an option reads the same in every command that has it.
_DTYPES_HELP = "Comma-separated dtypes: fp32, fp16, bf16, int8."
_MODES_HELP = "Comma-separated residency modes: hot, cold, after-write."
_BASELINE_HELP = "torch, auto (torch if importable), a config, or a kernel FILE.cu:NAME."
_ROOT_HELP = "Results root: the run folder is ROOT/<gpu>/<run-id>."
_PLAN_HELP = "Plan file (from `sweeper plan`)."
_NEWEST_PLAN = "the newest in sweeps/ for this GPU"
_RUN_ID_HELP = "Name of the new run folder."
_SIZES_HELP = "Only working sets in LO:HI MiB (e.g. 36:52)."
_ALLOW_STATEFUL_HELP = (
    "Time a kernel whose PTX reads a clock or keeps state in device memory "
    "(docs/external-kernels.md)."
)
_GRID_RULE_HELP = "grid rule: stride1, strideW, onepass[E|KB] or fixedG."
_POLICY_HELP = (
    "Shipped policies whose exported dispatch is timed beside the configs: auto (per mode "
    "and dtype, the newest verified policy under ROOT/<gpu> that covers it), none, or "
    "comma-separated policy.json files; in a slice, name them in --configs ('policy-*')."
)


# ---- commands are registered below, one small function each ------------------------------


def _console():
    """A rich console; wide when not a terminal (pipes, logs, tests) so tables stay readable."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=200)


@app.command("gpus", epilog="Example: sweeper gpus --sources")
def gpus_cmd(
    gpu: str = typer.Argument(
        None,
        metavar="GPU",
        help="Show one GPU: a key or alias, or a spec file FILE.toml.",
        show_default="every row of the table",
    ),
    sources: bool = typer.Option(
        False, "--sources", help="Print every value with the primary source it comes from."
    ),
) -> None:
    """List the GPU spec table: cc, SMs, L2 (as the device reports it) and DRAM peak.

    An empty cell is a value no primary source gives: `sweeper plan --gpu auto` reads it on the
    device, or a spec file supplies it (docs/adding-a-gpu.md). --sources cites every value.
    """
    import textwrap

    from sweeper import api
    from sweeper.plan.gpus import SPEC_FIELDS

    try:
        specs = api.gpus(gpu)
    except USER_ERRORS as e:
        fail(str(e))

    def show(v) -> str:
        if v is None:
            return ""
        if isinstance(v, tuple):
            return f"{v[0]}.{v[1]}"
        return f"{v:g}" if isinstance(v, float) else str(v)

    if sources:
        for i, s in enumerate(specs):
            if i:
                typer.echo("")
            typer.echo(textwrap.shorten(f"{s.key}: {s.name} ({s.origin})", 80))
            for n in SPEC_FIELDS:
                v = getattr(s, n)
                if v is None:
                    why = "no primary source gives it" if s.origin == "spec table" else "not given"
                    typer.echo(f"  {n}: unknown ({why})")
                    continue
                typer.echo(f"  {n} = {show(v)}")
                typer.echo(
                    textwrap.fill(
                        s.sources.get(n, "(no source)"),
                        width=80,
                        initial_indent=" " * 6,
                        subsequent_indent=" " * 6,
                    )
                )
        return

    def mib(n: int | None) -> str:
        return "" if n is None else f"{n / 2**20:.2f}".rstrip("0").rstrip(".")

    head = ("key", "name", "cc", "SMs", "L2 MiB", "DRAM GB/s")
    rows = [
        (s.key, s.name, show(s.cc), show(s.sm_count), mib(s.l2_bytes), show(s.dram_peak_gbps))
        for s in specs
    ]
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    room = 80 - 2 * (len(head) - 1) - sum(w for i, w in enumerate(widths) if i != 1)
    widths[1] = max(len(head[1]), min(widths[1], room))

    def line(r: tuple[str, ...]) -> str:
        cells = []
        for i, (text, w) in enumerate(zip(r, widths, strict=True)):
            if len(text) > w:
                text = text[: w - 1] + "~"
            cells.append(text.ljust(w) if i < 2 else text.rjust(w))
        return "  ".join(cells).rstrip()

    typer.echo(line(head))
    for r in rows:
        typer.echo(line(r))
    if any("" in r for r in rows):
        typer.echo("")
        typer.echo("An empty cell: no primary source gives the value; a row without L2, SMs,")
        typer.echo("cc or DRAM peak cannot be planned from the table. `sweeper plan --gpu auto`")
        typer.echo("reads the device; a spec file supplies the values (docs/adding-a-gpu.md).")
    typer.echo("Sources of every value: sweeper gpus --sources")


@app.command("plan", epilog="Example: sweeper plan --gpu h200 -o sweeps/h200.json")
def plan_cmd(
    gpu: str = typer.Option(
        ...,
        "--gpu",
        metavar="GPU",
        help="GPU key or alias (see `sweeper gpus`), a spec file FILE.toml, or auto.",
    ),
    out: str = typer.Option(
        None,
        "-o",
        "--out",
        metavar="FILE",
        help="Plan file to write.",
        show_default="sweeps/<gpu>.json",
    ),
    dtypes: str = typer.Option(
        "fp32,fp16,bf16,int8", "--dtypes", metavar="LIST", help=_DTYPES_HELP
    ),
    resolution: int = typer.Option(
        32, "--resolution", metavar="N", help="Dense-band step is L2/N bytes (32..4096)."
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite a different existing plan."),
    save_spec: str = typer.Option(
        None,
        "--save-spec",
        metavar="FILE.toml",
        help="With --gpu auto: also write the device's spec to FILE.toml for other machines.",
        show_default="none",
    ),
) -> None:
    """Plan working-set sizes that are gap-free in bytes around the GPU's L2 boundary.

    Dense steps of L2/resolution bytes over [L2/4, 2xL2], ratio <= 1.25 elsewhere from 64 KiB
    to 32xL2, with the 32 MiB, L2, persisting-max, 2xL2, 1024^2 and 4096^2 anchors. A GPU
    whose L2, memory, SM count, cc or DRAM peak is unknown is refused: run --gpu auto on the
    device, or pass a spec file (docs/adding-a-gpu.md).
    """
    from rich.table import Table

    from sweeper import api

    try:
        result = api.plan(
            gpu,
            out=out,
            dtypes=dtypes,
            resolution=resolution,
            force=force,
            save_spec=save_spec,
        )
    except USER_ERRORS as e:
        fail(str(e))
    p = result.plan
    console = _console()
    for note in result.notes:
        console.print(f"note: {note}")
    table = Table(
        title=f"plan for {p.gpu}: L2 {fmt_bytes(p.l2_bytes)}, resolution {p.resolution}, "
        f"hash {p.plan_hash}"
    )
    for col in ("dtype", "sizes", "dense band", "in dense", "max gap dense", "max ratio outside"):
        table.add_column(col, no_wrap=True)
    table.add_column("range", no_wrap=True)
    table.add_column("est. s/config", no_wrap=True)
    for r in result.summary:
        table.add_row(
            r["dtype"],
            str(r["sizes"]),
            f"[{fmt_bytes(r['dense_lo_bytes'])}, {fmt_bytes(r['dense_hi_bytes'])}]",
            str(r["dense_count"]),
            f"{r['max_gap_dense_bytes']:,} B",
            f"{r['max_ratio_outer']:.3f}",
            f"{fmt_bytes(r['min_ws_bytes'])}..{fmt_bytes(r['max_ws_bytes'])}",
            f"{r['est_seconds_per_config']:.1f}",
        )
    console.print(table)
    console.print(f"wrote {result.path}")


def _list(text: str | None) -> list[str] | None:
    """'a, b,c' -> ['a', 'b', 'c']; None or empty -> None."""
    items = [t.strip() for t in (text or "").split(",") if t.strip()]
    return items or None


@app.command("run", epilog="Example: sweeper run --dtypes fp32,fp16 --modes hot,after-write")
def run_cmd(
    plan: str = typer.Option(
        None, "--plan", metavar="FILE", help=_PLAN_HELP, show_default=_NEWEST_PLAN
    ),
    plan_arg: str = typer.Argument(None, hidden=True, metavar="PLAN"),
    grid: str = typer.Option(
        "default", "--grid", metavar="NAME", help="Variant grid: default or extended."
    ),
    dtypes: str = typer.Option(
        None, "--dtypes", metavar="LIST", help=_DTYPES_HELP, show_default="the plan's"
    ),
    modes: str = typer.Option("hot", "--modes", metavar="LIST", help=_MODES_HELP),
    baseline: str = typer.Option("auto", "--baseline", metavar="WHAT", help=_BASELINE_HELP),
    allocating: bool = typer.Option(
        False, "--allocating", help="Diagnostic: the doubled output footprint."
    ),
    full: bool = typer.Option(False, "--full", help="Every config at every size (no screening)."),
    resume: bool = typer.Option(
        False, "--resume", help="Continue a stopped run: the newest for this GPU, or --run-dir."
    ),
    run_dir: str = typer.Option(
        None,
        "--run-dir",
        metavar="RUN",
        help="The run folder --resume continues.",
        show_default="the newest for this GPU",
    ),
    run_id: str = typer.Option(
        None, "--run-id", metavar="NAME", help=_RUN_ID_HELP, show_default="the UTC start time"
    ),
    root: str = typer.Option("results", "--root", metavar="DIR", help=_ROOT_HELP),
    other_gpu: bool = typer.Option(
        False, "--other-gpu", help="Run a plan made for another GPU than this one."
    ),
    force: bool = typer.Option(False, "--force", hidden=True),
    quick: bool = typer.Option(False, "--quick", help="Fewer samples per cell (smoke runs)."),
    time_limit: float = typer.Option(
        None,
        "--time-limit",
        metavar="SECONDS",
        help="Stop cleanly after this many seconds; --resume continues the run.",
        show_default="no limit",
    ),
    configs: str = typer.Option(
        None,
        "--configs",
        metavar="PATTERNS",
        help="Only these configs (comma-separated, wildcards: 'v16-u2-*-stride1').",
        show_default="all",
    ),
    sizes: str = typer.Option(
        None, "--sizes", metavar="LO:HI", help=_SIZES_HELP, show_default="every planned size"
    ),
    producer: str = typer.Option(
        "sm",
        "--producer",
        metavar="sm|memcpy",
        help="Diagnostic: after-write's producer, sm (a kernel) or memcpy (the driver's).",
    ),
    kernel: str = typer.Option(
        None,
        "--kernel",
        metavar="FILE.cu:NAME",
        help="Also time your kernel, at every size (docs/external-kernels.md).",
        show_default="none",
    ),
    kernel_block: int = typer.Option(
        256, "--kernel-block", metavar="N", help="--kernel's threads per block."
    ),
    kernel_grid: str = typer.Option(
        "stride1", "--kernel-grid", metavar="RULE", help="--kernel's " + _GRID_RULE_HELP
    ),
    baseline_block: int = typer.Option(
        256, "--baseline-block", metavar="N", help="A --baseline kernel's threads per block."
    ),
    baseline_grid: str = typer.Option(
        "stride1",
        "--baseline-grid",
        metavar="RULE",
        help="A --baseline kernel's " + _GRID_RULE_HELP,
    ),
    allow_stateful: bool = typer.Option(False, "--allow-stateful", help=_ALLOW_STATEFUL_HELP),
    policy: str = typer.Option("none", "--policy", metavar="WHICH", help=_POLICY_HELP),
    executor_name: str = typer.Option(
        None,
        "--executor",
        metavar="classic|batched",
        help="How hot cells are timed: one at a time (classic), or a size's cells in CUDA "
        "graph batches (batched). A resumed run keeps its own.",
        show_default=f"{DEFAULT_EXECUTOR}; a resumed run's own",
    ),
    devices: str = typer.Option(
        None,
        "--devices",
        metavar="all|0,1,...",
        help="Measure on several GPUs of this host, each size on one of them, through Ray "
        "(install extra 'ray'); one process writes the run (docs/fleet.md).",
        show_default="one GPU",
    ),
    replay: str = typer.Option(None, hidden=True, help="Answer cells from a recorded run."),
    as_json: bool = typer.Option(False, "--json", help="Print the closing summary as JSON."),
) -> None:
    """Time the variant grid over a plan against the baseline, with guards; resumable.

    --kernel FILE.cu:NAME adds your kernel as one more config, swept at every size.
    --baseline FILE.cu:NAME times everything against your kernel instead of torch.
    --policy FILE.json times a shipped policy's exported dispatch beside the grid.
    """
    from sweeper import api
    from sweeper.run.runner import TimeLimitReached

    if plan is not None and plan_arg is not None and plan != plan_arg:
        fail(f"two plans given: --plan {plan} and {plan_arg}")
    executor = None
    try:
        request = api.RunRequest(
            plan_path=plan or plan_arg,
            grid=grid,
            dtypes=_list(dtypes),
            modes=tuple(modes.split(",")),
            baseline=baseline,
            allocating=allocating,
            full=full,
            resume=(run_dir or True) if resume else None,
            run_id=run_id,
            out_root=root,
            force=other_gpu or force,
            quick=quick,
            time_limit_s=time_limit,
            configs=_list(configs),
            sizes=sizes,
            producer=producer,
            kernel=kernel,
            kernel_block=kernel_block,
            kernel_grid=kernel_grid,
            baseline_block=baseline_block,
            baseline_grid=baseline_grid,
            allow_stateful=allow_stateful,
            policy=policy,
            executor=executor_name,
            devices=devices,
        )
        if replay and devices:
            fail("--replay answers from a recorded run; it takes no --devices")
        if replay:
            from sweeper.run.replay import ReplayExecutor

            executor = ReplayExecutor(replay)
    except USER_ERRORS as e:
        fail(str(e))
    console = _console()
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("preparing", total=None)

        def progress(desc: str, done: int, total: int) -> None:
            bar.update(task, description=desc, completed=done, total=total)

        try:
            path = api.run(request, progress=progress, executor=executor)
        except USER_ERRORS as e:
            error = str(e)
        except TimeLimitReached as stop:
            error = None
            path = stop.args[0]
            console.print(
                f"stopped at the {time_limit:g} s time limit; continue with "
                f"`sweeper run --resume --run-dir {path}`"
            )
        else:
            error = None
    if error is not None:
        fail(error)
    from rich.table import Table

    summary = api.run_summary(path)
    if as_json:
        _echo_json({"run": str(path), **summary})
        return
    table = Table(title=f"run {path}")
    for col in summary["columns"]:
        table.add_column(col)
    for row in summary["rows"]:
        table.add_row(*row)
    console.print(table)
    for line in summary["notes"]:
        console.print(line)


@app.command(
    "audit", epilog="Example: sweeper audit examples/relu_v2.cu:relu_v2 --modes hot,after-write"
)
def audit_cmd(
    kernel: str = typer.Argument(
        ..., metavar="FILE.cu:NAME", help="Your kernel (docs/external-kernels.md)."
    ),
    plan: str = typer.Option(
        None, "--plan", metavar="FILE", help=_PLAN_HELP, show_default=_NEWEST_PLAN
    ),
    kernel_block: int = typer.Option(
        256, "--kernel-block", metavar="N", help="Your kernel's threads per block."
    ),
    kernel_grid: str = typer.Option(
        "stride1", "--kernel-grid", metavar="RULE", help="Your kernel's " + _GRID_RULE_HELP
    ),
    dtypes: str = typer.Option(
        None, "--dtypes", metavar="LIST", help=_DTYPES_HELP, show_default="the plan's"
    ),
    modes: str = typer.Option("hot", "--modes", metavar="LIST", help=_MODES_HELP),
    baseline: str = typer.Option("auto", "--baseline", metavar="WHAT", help=_BASELINE_HELP),
    baseline_block: int = typer.Option(
        256, "--baseline-block", metavar="N", help="A --baseline kernel's threads per block."
    ),
    baseline_grid: str = typer.Option(
        "stride1",
        "--baseline-grid",
        metavar="RULE",
        help="A --baseline kernel's " + _GRID_RULE_HELP,
    ),
    run_id: str = typer.Option(
        None, "--run-id", metavar="NAME", help=_RUN_ID_HELP, show_default="the UTC start time"
    ),
    root: str = typer.Option("results", "--root", metavar="DIR", help=_ROOT_HELP),
    quick: bool = typer.Option(False, "--quick", help="Fewer samples per cell (smoke runs)."),
    sizes: str = typer.Option(
        None, "--sizes", metavar="LO:HI", help=_SIZES_HELP, show_default="every planned size"
    ),
    policy: str = typer.Option("auto", "--policy", metavar="WHICH", help=_POLICY_HELP),
    allow_stateful: bool = typer.Option(False, "--allow-stateful", help=_ALLOW_STATEFUL_HELP),
) -> None:
    """Time your kernel against the baseline at every planned size, with every guard, beside
    the shipped policy's dispatch.

    Writes a run folder, its selection and REPORT.md, which opens with the cliff: where the
    kernel falls below the baseline and below the shipped policy, its worst ratio in
    (32 MiB, L2] and overall, and whether an edge of its launch rule lies in an unsampled gap
    of the plan.
    """
    from sweeper import api

    try:
        path, lines = api.audit(
            kernel,
            plan,
            kernel_block=kernel_block,
            kernel_grid=kernel_grid,
            dtypes=_list(dtypes),
            modes=modes.split(","),
            baseline=baseline,
            baseline_block=baseline_block,
            baseline_grid=baseline_grid,
            run_id=run_id,
            out_root=root,
            quick=quick,
            sizes=sizes,
            policy=policy,
            allow_stateful=allow_stateful,
        )
    except USER_ERRORS as e:
        fail(str(e))
    for line in lines:
        typer.echo(line)
    typer.echo(f"report: {path}/REPORT.md")


@app.command("plot", epilog="Example: sweeper plot results/h200/hot-7 --format png")
def plot_cmd(
    run: str = typer.Argument(
        None,
        metavar="RUN",
        help=_RUN_HELP,
        show_default="the newest complete run under results/",
    ),
    fmt: str = typer.Option(
        "png,svg", "--format", metavar="LIST", help="Comma-separated image formats: png, svg, pdf."
    ),
    top: int = typer.Option(
        3, "--top", metavar="N", help="Configs drawn besides the best-per-size curve."
    ),
    heatmap_top: int = typer.Option(
        40, "--heatmap-top", metavar="N", help="Config rows per heatmap."
    ),
    force: bool = typer.Option(
        False, "--force", help="Draw the figures even where they are current for these inputs."
    ),
) -> None:
    """Draw a run's figures into <run>/plots/: bandwidth, speedup over torch, config heatmaps,
    the policy bands (when policy.json exists) and hot vs cold. Needs no GPU."""
    from sweeper import api

    formats = [f.strip().lower() for f in fmt.split(",") if f.strip()]
    try:
        run = _named_run(run)
        paths = api.plot(run, formats=formats, top=top, heatmap_top=heatmap_top, force=force)
    except USER_ERRORS as e:
        fail(str(e))
    for p in paths:
        typer.echo(str(p))


@app.command("report", epilog="Example: sweeper report results/h200/hot-7 --targets targets.json")
def report_cmd(
    run: str = typer.Argument(
        None,
        metavar="RUN",
        help=_RUN_HELP,
        show_default="the newest complete run under results/",
    ),
    targets: str = typer.Option(
        None,
        "--targets",
        metavar="FILE.json",
        help="Grade the run on these targets instead of the default (never slower than "
        "the baseline beyond noise); the project's H200 targets keep their own section.",
        show_default="never slower than the baseline",
    ),
) -> None:
    """Write <run>/REPORT.md: first what to ship, how much faster than the baseline it is
    per range of working set and the verdict on your targets, then the summary and the
    detail. Says which stages are not built yet.

    A targets file: metric is ratio, ratio_hi (the CI's upper end), pct_ceiling
    or pct_copy; sizes in MiB, from_mib (inclusive) or above_mib (exclusive) and
    to_mib (inclusive), default every size; dtypes and modes default to all.

    \b
    {"targets": [{"name": "1.4x in [42, 52] MiB", "metric": "ratio",
                  "floor": 1.4, "from_mib": 42, "to_mib": 52, "modes": ["hot"]}]}
    """
    from sweeper import api

    try:
        run = _named_run(run)
        path = api.report(run, targets=targets)
    except USER_ERRORS as e:
        fail(str(e))
    typer.echo(str(path))


@app.command("select", epilog="Example: sweeper select results/h200/hot-7 --tolerance 0.02")
def select_cmd(
    run: str = typer.Argument(
        None,
        metavar="RUN",
        help=_RUN_HELP,
        show_default="the newest complete run under results/",
    ),
    tolerance: float = typer.Option(
        0.02, "--tolerance", metavar="X", help="Relative GB/s tie tolerance."
    ),
) -> None:
    """Pick the best config per mode, dtype and size; writes selection.csv and selection.md.

    Ties inside the noise go to the smaller size's choice, then to the simpler config.
    """
    from sweeper import api

    try:
        run = _named_run(run)
        df = api.select(run, tolerance=tolerance)
    except USER_ERRORS as e:
        fail(str(e))
    for r in df.itertuples(index=False):
        typer.echo(
            f"{r.mode:5} {r.dtype:5} {fmt_bytes(int(r.ws_bytes)):>12}  {r.config:40} "
            f"{r.gbps:7.0f} GB/s  {r.pct_copy:5.1f}% copy  {r.ratio:.3f}x  {r.reason}"
        )


policy_app = typer.Typer(
    help="Build, merge and show launch policies.", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(policy_app, name="policy")


@policy_app.command("build", epilog="Example: sweeper policy build results/h200/hot-7 --mode hot")
def policy_build_cmd(
    run: str = typer.Argument(
        None,
        metavar="RUN",
        help=_RUN_HELP,
        show_default="the newest complete run under results/",
    ),
    tolerance: str = typer.Option(
        "0.02",
        "--tolerance",
        metavar="X|verify",
        help="Relative GB/s tie tolerance, or verify: per range of working set, the p95 "
        "pass-to-pass movement of the run's verify there (at least 0.02).",
    ),
    mode: str = typer.Option(
        None,
        "--mode",
        metavar="MODE",
        help="The residency mode the policy is for, one of the run's.",
        show_default="after-write if measured, what production sees; else hot",
    ),
    modes: str = typer.Option(None, "--modes", hidden=True),
    pattern: str = typer.Option(
        None,
        "--pattern",
        metavar="PATTERN",
        help="Call pattern: preallocated or allocating.",
        show_default="preallocated",
    ),
    resolution: int = typer.Option(
        None,
        "--resolution",
        metavar="N",
        help="A band boundary's bracket may be at most L2/N bytes wide.",
        show_default="the run's plan's resolution",
    ),
    floors: bool = typer.Option(
        True,
        "--floors/--no-floors",
        help="A tie keeps the project targets' floors (sweeper/analyze/targets.py): where a tied "
        "config meets a target at a size, one that misses it does not serve that size.",
    ),
    targets: str = typer.Option(
        None,
        "--targets",
        metavar="FILE.json",
        help="The floors a tie keeps come from this targets file (as `sweeper report "
        "--targets` reads it).",
        show_default="the project targets",
    ),
) -> None:
    """Write <run>/policy.json: the fewest size bands per dtype, each served by one config.

    A boundary whose bracket is wider than the plan resolution is refused.
    """
    from sweeper import api

    try:
        if tolerance != "verify":
            try:
                tolerance = float(tolerance)
            except ValueError:
                fail(f"--tolerance {tolerance!r}: a number (0.02) or 'verify'")
        if mode is not None and modes is not None and mode != modes:
            fail(f"two modes given: --mode {mode} and --modes {modes}")
        mode = mode or modes
        if mode is not None and "," in mode:
            fail(f"--mode {mode}: a policy is built for one mode; build one per mode")
        run = _named_run(run)
        path, doc = api.policy_build(
            run,
            tolerance=tolerance,
            mode=mode,
            pattern=pattern,
            resolution=resolution,
            floors=floors,
            targets=targets,
        )
        text = api.policy_show(str(path))
    except USER_ERRORS as e:
        fail(str(e))
    typer.echo(text)
    typer.echo(str(path))


@policy_app.command(
    "merge", epilog="Example: sweeper policy merge h200/policy.json l4/policy.json -o all.json"
)
def policy_merge_cmd(
    policies: Annotated[
        list[str], typer.Argument(metavar="POLICY...", help="policy.json files, one per GPU.")
    ],
    out: str = typer.Option(
        ..., "-o", "--out", metavar="FILE", help="Merged policy file to write."
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite a file with other contents."),
) -> None:
    """Merge per-GPU policies into one rule keyed by (compute capability, L2 size).

    Bands are relative to L2; the command prints where GPUs disagree.
    """
    from sweeper import api

    try:
        path, _ = api.policy_merge(policies, out, force)
        text = api.policy_show(str(path))
    except USER_ERRORS as e:
        fail(str(e))
    typer.echo(text)
    typer.echo(str(path))


@policy_app.command("show", epilog="Example: sweeper policy show results/h200/hot-7/policy.json")
def policy_show_cmd(
    path: str = typer.Argument(..., metavar="POLICY", help="policy.json or merged policy."),
) -> None:
    """Print a policy's bands, where each came from, and (merged) disagreements."""
    from sweeper import api

    try:
        typer.echo(api.policy_show(path))
    except USER_ERRORS as e:
        fail(str(e))


@app.command(
    "export",
    epilog="Example: sweeper export results/h200/hot-7/policy.json -o relu_policy.cuh",
)
def export_cmd(
    policy: str = typer.Argument(..., metavar="POLICY", help="policy.json or merged policy."),
    fmt: str = typer.Option(
        "cuda",
        "--format",
        metavar="FORMAT",
        help="cuda (a header), json, python, or torch (a PyTorch op).",
    ),
    out: str = typer.Option(
        None,
        "-o",
        "--out",
        metavar="FILE",
        help="File to write.",
        show_default="relu_policy.cuh, .json or .py, or relu_torch.py, next to the policy",
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite a file with other contents."),
) -> None:
    """Render a policy for production code.

    The formats: a CUDA header (relu_policy.cuh), the runtime JSON, a Python module with
    select_config(dtype, n, cc, l2_bytes, sm_count), or a Python file that builds the header
    into torch.ops.sweeper.relu on first use (relu_torch.py).
    """
    from sweeper import api

    try:
        path = api.export(policy, fmt, out, force)
    except USER_ERRORS as e:
        fail(str(e))
    typer.echo(str(path))


@app.command("gpu-work", epilog="Example: sweeper gpu-work results/h200/hot-7")
def gpu_work_cmd(
    runs: Annotated[list[str], typer.Argument(metavar="RUN...", help="Run folders (hot mode).")],
    max_samples: int = typer.Option(
        None,
        "--max-samples",
        metavar="K",
        help="Count every cell at no more than K samples per side.",
        show_default="as the run recorded",
    ),
    current_warm_up: bool = typer.Option(
        False,
        "--current-warm-up",
        help="Count warm-up calls by today's rule, not the run's own.",
    ),
) -> None:
    """A lower bound on the GPU work of a hot run's candidate cells, per dtype and phase.

    The kernels alone must take this long: timed calls, warm-up calls and the fresh-input
    replay, from the run's recorded figures. The report's Timing section prints the total.
    """
    from sweeper import api

    try:
        out = [f"## {run}\n\n" + api.gpu_work(run, max_samples, current_warm_up) for run in runs]
    except USER_ERRORS as e:
        fail(str(e))
    typer.echo("\n\n".join(out))


@app.command("compare", epilog="Example: sweeper compare OLD_RUN results/h200/hot-7")
def compare_cmd(
    run_a: str = typer.Argument(..., metavar="RUN_A", help="First run folder."),
    run_b: str = typer.Argument(..., metavar="RUN_B", help="Second run folder."),
    within: float = typer.Option(
        0.03,
        "--within",
        metavar="X",
        help="Relative difference of two cells counted as agreement.",
    ),
    tolerance: float = typer.Option(None, "--tolerance", hidden=True),
    as_json: bool = typer.Option(False, "--json", help="Print the agreement as JSON."),
) -> None:
    """How well two runs agree on their common cells (run-to-run reproducibility)."""
    from sweeper import api

    tolerance = within if tolerance is None else tolerance
    try:
        rep = api.compare(run_a, run_b, tolerance)
    except USER_ERRORS as e:
        fail(str(e))
    if as_json:
        _echo_json(rep)
        return
    for name, card in zip("AB", rep["runs"], strict=True):
        took = f", sweeper run {card['total_s']:.0f} s" if card["total_s"] is not None else ""
        typer.echo(
            f"{name}: {card['path']} (executor {card['executor']}, commit {card['commit'][:10]}, "
            f"{card['gpu']}{took})"
        )
    typer.echo(f"{rep['common_cells']} common ok cells")
    for col in ("time_us", "ratio"):
        if col in rep:
            r = rep[col]
            typer.echo(
                f"{col}: {r['within']:.1%} within {tolerance:.0%}; median |diff| "
                f"{r['median_dev']:.2%}, p95 {r['p95_dev']:.2%}; median B/A - 1 {r['shift']:+.2%}"
            )
    if "candidate_ratio" in rep:
        r = rep["candidate_ratio"]
        typer.echo(
            f"candidate ratios: {r['within']:.1%} of {r['cells']} within {tolerance:.0%}; "
            f"median B/A - 1 {r['shift']:+.2%}"
        )
    if "base_time_us" in rep:
        typer.echo(f"base_time_us: median B/A - 1 {rep['base_time_us']['shift']:+.2%}")
    for row in rep["by_size"]:
        typer.echo(
            f"  ws {row['mib']} MiB: {row['cells']} cells; within {tolerance:.0%}: "
            f"time_us {row['time_us']:.1%}, ratio {row['ratio']:.1%}"
        )
    head = rep.get("headline") or []
    if head:
        spread = head[0]["spread"]
        moved = [h for h in head if h["moved"]]
        typer.echo(
            "headline (verify, the lower pass per size, lowest-highest per range): "
            + (f"{len(moved)} of {len(head)} ranges moved by more than the run-to-run spread "
               f"(pass-to-pass p95 {spread:.2%})" if spread is not None
               else f"{len(head)} ranges; one verify pass, so no run-to-run spread to judge by")
        )  # fmt: skip
        for h in moved:
            typer.echo(
                f"  {h['dtype']} {h['mode']} {h['range']}: {h['a'][0]:.2f}-{h['a'][1]:.2f} -> "
                f"{h['b'][0]:.2f}-{h['b'][1]:.2f} ({h['move']:+.2%})"
            )
    for p in rep.get("policies", []):
        where = ", ".join(f"{ws / 2**20:.2f}" for ws in p["outside"][:6])
        more = f" (+{len(p['outside']) - 6} more)" if len(p["outside"]) > 6 else ""
        typer.echo(
            f"policy {p['dtype']} ({p['mode']}): {p['sizes']} sizes, same config at {p['same']}, "
            f"tied within the tie tolerance at {p['tied']}, outside at {len(p['outside'])}"
            + (f" ({where} MiB{more})" if p["outside"] else "")
            + (f", not comparable at {p['unknown']}" if p["unknown"] else "")
        )


@app.command("verify", epilog="Example: sweeper verify results/h200/hot-7/policy.json --passes 2")
def verify_cmd(
    policy: str = typer.Argument(..., metavar="POLICY", help="policy.json or merged policy."),
    timing: bool = typer.Option(
        True, "--timing/--no-timing", help="Also time the export over the run's sizes."
    ),
    passes: int = typer.Option(
        2,
        "--passes",
        metavar="N",
        help="Timing passes over all sizes, each after the whole pass before, with fresh "
        "buffers; a size fails parity or loses only if it does in every pass.",
    ),
    sizes: str = typer.Option(
        None,
        "--sizes",
        metavar="LO:HI",
        help="Time only working sets in LO:HI MiB (into verify_timing_slice.csv).",
        show_default="every size of the run",
    ),
    configs: str = typer.Option(
        None,
        "--configs",
        metavar="PATTERNS",
        help="Time only sizes the policy dispatches to these configs (comma-separated, "
        "wildcards: 'v16-u2-*-stride1').",
        show_default="all",
    ),
    dtypes: str = typer.Option(
        None, "--dtypes", metavar="LIST", help=_DTYPES_HELP, show_default="the policy's"
    ),
) -> None:
    """GPU: check the exported header bit-exact and time it against what it replaces.

    The header is built with nvcc and launch_relu is checked bit-exact on every dtype (special
    values, tails, misaligned pointers), and its dispatch; then it is timed over the run's
    sizes against the Numba variant it dispatches to and against the baseline.
    """
    from sweeper import api

    try:
        rep = api.verify(
            policy, timing=timing, passes=passes, sizes=sizes, configs=configs, dtypes=dtypes
        )
    except USER_ERRORS as e:
        fail(str(e))
    bad = rep["failed"]
    typer.echo(f"header built with nvcc {rep.get('nvcc') or '(version unknown)'}")
    typer.echo(f"{len(rep['cases']) - len(bad)}/{len(rep['cases'])} bit-exact cases ok")
    for c in bad[:20]:
        typer.echo(f"FAIL {c['dtype']} n={c['n']} offset={c['offset']}: {c['detail']}")
    for m in rep["dispatch_mismatches"][:20]:
        typer.echo(f"DISPATCH {m['dtype']} n={m['n']}: header {m['header']}, python {m['python']}")
    t = rep.get("timing")
    if t is not None:
        _echo_timing(t, rep)
    if bad or rep["dispatch_mismatches"] or (t is not None and not t["ok"]):
        raise typer.Exit(1)


def _echo_timing(t: dict, rep: dict) -> None:
    """verify's timing lines: the summary, the pass-to-pass noise, then every failure kind
    (at most 20 lines each, with the count when there are more)."""
    n_passes = t.get("passes", 1)
    typer.echo(
        f"timing ({rep.get('timing_mode', 'hot')}): {t['sizes']} sizes x {n_passes} "
        f"pass{'es' if n_passes != 1 else ''}; export vs its Numba variant: max deviation "
        f"{t['max_parity_dev']:.1%}; vs baseline: min ratio {t['min_ratio']:.3f}x "
        f"({rep['timing_csv']})"
    )
    sp = t.get("pass_spread")
    if sp:
        typer.echo(
            f"pass to pass, the ratio to the baseline moved by a median {sp['median']:.2%}, "
            f"p95 {sp['p95']:.2%}, max {sp['max']:.2%} ({sp['n']} repeats)"
        )
    from sweeper.analyze.verdict import pass_values

    kinds = (
        ("parity failures", "parity_failures", "PARITY", "parity"),
        ("losses", "baseline_losses", "LOSES", "ratio"),
        ("parity failures in some passes only", "unrepeated_parity_failures", "parity once",
         "parity"),
        ("losses in some passes only", "unrepeated_losses", "lost once", "ratio"),
    )  # fmt: skip
    for what, key, tag, value in kinds:
        rows = t.get(key, [])
        if len(rows) > 20:
            typer.echo(f"{len(rows)} {what}; the first 20 are listed ({rep['timing_csv']})")
        for r in rows[:20]:
            tail = f" vs {r['baseline']}" if value == "ratio" else ""
            if r.get("within_noise"):
                tail += f" (within the pass-to-pass noise, p95 {sp['p95']:.2%})"
            typer.echo(
                f"{tag} {r['dtype']} {r['ws_bytes']} B: {'; '.join(pass_values(r, value))}{tail}"
            )
    for r in t["bit_failures"][:20]:
        typer.echo(f"WRONG after timing {r['dtype']} n={r['n']} (pass {r.get('pass', 1)})")


fleet_app = typer.Typer(
    help="Sweeps on a Ray cluster: one run per GPU model, one fleet policy.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(fleet_app, name="fleet")


@fleet_app.command("run", epilog="Example: sweeper fleet run examples/fleet.toml")
def fleet_run_cmd(
    campaign: Annotated[
        str, typer.Argument(metavar="CAMPAIGN", help="The campaign file (docs/fleet.md).")
    ],
    address: Annotated[
        str,
        typer.Option(
            "--address",
            metavar="HOST:PORT",
            help="The Ray cluster's address ('auto': the one this node belongs to).",
            show_default="a Ray instance of this host's GPUs",
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace a fleet policy or header with other contents.")
    ] = False,
) -> None:
    """Measure every GPU model of a campaign on its GPUs (one Ray actor per GPU), resume a
    stopped run, then build each run's policy and merge them into the fleet's policy and
    CUDA header (<results>/fleet/<name>/)."""
    from sweeper import api

    try:
        out = api.fleet_run(campaign, address=address, force=force)
    except USER_ERRORS as e:
        fail(str(e))
    for gpu, run_dir in out["runs"].items():
        typer.echo(f"{gpu}: {run_dir}")
    typer.echo(f"fleet policy: {out['policy']}")
    typer.echo(f"header: {out['header']}")


ops_app = typer.Typer(
    help="The elementwise ops: their definitions, and their element functions checked on the CPU.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(ops_app, name="ops")


@ops_app.command("list", epilog="Example: sweeper ops list")
def ops_list_cmd() -> None:
    """List the ops: dtypes, bytes read and written per element, baseline, exactness rule."""
    from sweeper import api

    rows = api.ops_list()
    cols = ("op", "dtypes", "B/elem", "swept", "baseline")
    cells = [(r["op"], " ".join(r["dtypes"]),
              " ".join(str(rd + wr) for rd, wr in r["bytes"].values()),
              "yes" if r["swept"] else "no", r["baseline"]) for r in rows]  # fmt: skip
    widths = [max([len(c), *(len(x[i]) for x in cells)]) for i, c in enumerate(cols)]

    def line(items) -> str:
        return "  ".join(x.ljust(w) for x, w in zip(items, widths, strict=True)).rstrip()

    out = [line(cols), line(["-" * w for w in widths]), *map(line, cells), "",
           "B/elem: bytes read + written per element at each dtype (the working set's unit)",
           "exactness:", *(f"  {r['op']}: {r['exact']}" for r in rows)]  # fmt: skip
    differs = [f"  {r['op']}: {r['differs']}" for r in rows if r["differs"]]
    typer.echo("\n".join(out + (["differs from the baseline:", *differs] if differs else [])))


@ops_app.command(
    "check", epilog="Example: sweeper ops check gelu examples/my_ops.py:leaky --dtypes fp16"
)
def ops_check_cmd(
    ops: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[OP|FILE.py:NAME]...",
            help="Built-in op names or your own ops.",
            show_default="every built-in op",
        ),
    ] = None,
    dtypes: Annotated[
        str | None,
        typer.Option("--dtypes", metavar="LIST", help=_DTYPES_HELP, show_default="each op's"),
    ] = None,
    samples: int = typer.Option(
        1 << 16, "--samples", min=1, metavar="N", help="Random bit patterns per input."
    ),
) -> None:
    """Compile each op's C++ element function for the CPU (nvcc, no GPU) and check it against
    the op's reference under its exactness rule, on special values and random bit patterns.
    Exits 1 when an output breaks the rule."""
    from sweeper import api

    try:
        rows = api.ops_check(ops or None, _list(dtypes), n_random=samples)
    except USER_ERRORS as e:
        fail(str(e))
    width = max(len(r["op"]) for r in rows)
    for r in rows:
        verdict = "ok" if not r["mismatches"] else f"{r['mismatches']} outside the rule"
        worst = r["worst"]
        err = f"max err {worst['ulps']:>9.4g} ulp {worst['abs']:>9.3g} abs" if worst else ""
        typer.echo(f"{r['op']:<{width}}  {r['dtype']:>4} -> {r['out']:<4}  "
                   f"{r['inputs']:>6} inputs  {err:<34}  {verdict}".rstrip())  # fmt: skip
        if r["example"]:
            typer.echo(f"    e.g. {r['example']}")
    bad = sum(1 for r in rows if r["mismatches"])
    if bad:
        typer.echo(f"{bad} of {len(rows)} (op, dtype) pairs break their rule", err=True)
        raise typer.Exit(1)


@ops_app.command("source", epilog="Example: sweeper ops source examples/my_ops.py:leaky")
def ops_source_cmd(
    op: str = typer.Argument(..., metavar="OP|FILE.py:NAME", help="A built-in op or your own."),
    device: bool = typer.Option(
        False, "--device", help="The GPU check kernels (NVRTC) instead of the host library."
    ),
) -> None:
    """Print the C++ that `sweeper ops check` compiles for an op: its element function and one
    entry per dtype."""
    from sweeper import api

    try:
        typer.echo(api.ops_source(op, device=device), nl=False)
    except USER_ERRORS as e:
        fail(str(e))


kernels_app = typer.Typer(
    help="The Numba CUDA ReLU variant grid.", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(kernels_app, name="kernels")


@kernels_app.command("list", epilog="Example: sweeper kernels list --grid extended --dtypes fp32")
def kernels_list_cmd(
    grid: Annotated[
        str, typer.Option("--grid", metavar="NAME", help="Variant grid: default or extended.")
    ] = "default",
    dtypes: Annotated[
        str | None,
        typer.Option("--dtypes", metavar="LIST", help=_DTYPES_HELP, show_default="all four"),
    ] = None,
) -> None:
    """List a grid's variant ids, with counts of variants and of distinct compiles."""
    from sweeper import api

    try:
        res = api.kernels_list(grid, dtypes)
    except USER_ERRORS as e:
        fail(str(e))
    # plain aligned columns, one variant per line (grep- and diff-friendly; the extended grid
    # has 15360 variants per dtype, which a drawn table takes seconds to lay out)
    cols = ("id", "dtype", "vec B", "unroll", "load", "store", "block", "grid")
    rows = [(v.id, v.dtype, str(v.vec_bytes), str(v.unroll), v.load_hint, v.store_hint,
             str(v.block), v.grid) for v in res["variants"]]  # fmt: skip
    widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(cols)]

    def line(cells) -> str:
        return "  ".join(x.ljust(w) for x, w in zip(cells, widths, strict=True)).rstrip()

    counts = ", ".join(f"{d}: {n}" for d, n in res["per_dtype"].items())
    typer.echo("\n".join([
        f"{grid} grid", line(cols), line(["-" * w for w in widths]), *map(line, rows),
        f"{len(rows)} variants ({counts}); {res['compiles']} distinct compiles",
    ]))  # fmt: skip


@kernels_app.command(
    "check", epilog="Example: sweeper kernels check examples/relu_vec.cu:relu_vec --cc 90"
)
def kernels_check_cmd(
    kernel: str = typer.Argument(..., metavar="FILE.cu:NAME", help="Your kernel."),
    dtypes: str = typer.Option(
        None, "--dtypes", metavar="LIST", help=_DTYPES_HELP, show_default="all four"
    ),
    cc: int = typer.Option(
        90, "--cc", metavar="NN", help="Compute capability as two digits (90 = sm_90)."
    ),
    kernel_block: int = typer.Option(
        256, "--kernel-block", metavar="N", help="Your kernel's threads per block."
    ),
    kernel_grid: str = typer.Option(
        "stride1", "--kernel-grid", metavar="RULE", help="Your kernel's " + _GRID_RULE_HELP
    ),
    block: int = typer.Option(None, "--block", hidden=True),
    grid: str = typer.Option(None, "--grid", hidden=True),
    allow_stateful: bool = typer.Option(False, "--allow-stateful", help=_ALLOW_STATEFUL_HELP),
) -> None:
    """Compile your kernel with NVRTC and check it against the contract; needs no GPU."""
    from sweeper import api

    try:
        out = api.kernel_check(
            kernel,
            _list(dtypes),
            cc=cc,
            block=kernel_block if block is None else block,
            grid=kernel_grid if grid is None else grid,
            allow_stateful=allow_stateful,
        )
    except USER_ERRORS as e:
        fail(str(e))
    typer.echo(f"{out['config']}: {', '.join(out['symbols'])} compile for sm_{out['cc']}")


@kernels_app.command(
    "ptx", epilog="Example: sweeper kernels ptx fp32-v16-u1-ld.def-st.cs-b256-flat-9b4d2ea0"
)
def kernels_ptx_cmd(
    variant_id: Annotated[
        str, typer.Argument(metavar="ID", help="A variant id from `sweeper kernels list`.")
    ],
    cc: Annotated[
        int,
        typer.Option("--cc", metavar="NN", help="Compute capability as two digits (90 = sm_90)."),
    ] = 90,
) -> None:
    """Print a variant's PTX (compiled on this machine; no GPU needed)."""
    from sweeper import api

    try:
        text = api.kernels_ptx(variant_id, cc)
    except USER_ERRORS as e:
        fail(str(e))
    typer.echo(text)


def main() -> None:
    try:
        app()
    except USER_ERRORS as e:
        typer.echo(f"error: {e}", err=True)
        sys.exit(1)
