"""Execute a plan: screen -> sweep survivors -> refine crossovers; resumable, append-only.

The runner decides WHAT to measure and in which order, and records every cell; an Executor
decides HOW (sweeper.run.executor on the GPU; sweeper.run.replay for CPU tests and demos). Every
decision is a function of the recorded rows, so a resumed run continues exactly where the
interrupted one stopped without repeating or losing a finished cell.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import random
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sweeper import __version__
from sweeper.analyze import ceilings
from sweeper.analyze.columns import MEASURED
from sweeper.analyze.gpuwork import executor_kind
from sweeper.analyze.store import (
    TRIALS,
    TrialWriter,
    load_manifest,
    read_trials,
    repair_trials,
    rounded,
    trials_to_frame,
    write_manifest,
    write_results,
)
from sweeper.dtypes import ITEMSIZE
from sweeper.errors import PlanMismatchError, SweeperError
from sweeper.files import folder_to_write
from sweeper.ops import bytes_per_element, working_set
from sweeper.plan.planfile import Plan
from sweeper.run.search import (
    SearchParams,
    beyond_l2_only,
    climb_moves,
    climb_sizes,
    confirm_set,
    for_mode,
    in_scope,
    one_axis,
    policy_sample_points,
    refinement_points,
    screen_sizes,
    screened_everywhere,
    survivors,
)
from sweeper.runfolder import (
    BATCH_SPANS,
    BEYOND_L2,
    CELL_PHASES,
    PRUNED,
    REPLAY_GRAPHS,
    UNPACK,
    baseline_of,
    log_archive,
    new_run_dir,
    undo_new,
)
from sweeper.slices import config_matches
from sweeper.stats import Stopping
from sweeper.units import fmt_bytes

Progress = Callable[[str, int, int], None]  # (description, done, total)
CLIMB_ROUND = "climb_round"  # a climbed cell's round of the climb (trials only)
CONFIRM = "confirm"  # the phase (and role) of the confirmation round's cells


class Executor(Protocol):
    """How cells get measured. Rows returned use the columns of sweeper.analyze.columns."""

    def describe(self) -> dict: ...

    def variants(self, grid: str, dtype: str) -> list[Any]: ...

    def prepare(self, variants: list[Any]) -> None: ...

    def reference(self, mode: str, dtype: str, n: int) -> list[dict]: ...

    def measure(self, mode: str, dtype: str, n: int, variant: Any) -> dict: ...

    def release(self, dtype: str, n: int) -> None: ...

    # optional: `ceiling_set(dtype) -> list of variants` (the L2-resident ceiling's reference
    # configs; the runner measures the ceiling, in hot mode whatever the run's modes, only with
    # executors that have it), and
    # `neighbours(variant) -> list of variants` (the search's moves, Variant.neighbours; the
    # runner climbs from the screening rows only with executors that have it) with
    # `variant(dtype, config) -> variant` (what a resumed run's climbed configs are), and
    # `replays = True` (cells answered from a record: a new run that fails leaves no folder)


# The L2-resident ceiling: the best throughput of a reference set (the copy kernel and
# ceiling_set's configs), hot, at these working sets x L2: resident, yet large enough that
# per-call costs are small. The ceiling is the median over the three sizes of the best there.
CEILING_FRACTIONS = (0.5, 0.625, 0.75)
CEILING_DTYPE = "fp32"


def ceiling_sizes(l2_bytes: int, dtype: str) -> list[int]:
    """The element counts of the ceiling's working sets (whole 16-byte vectors)."""
    per_vec = 16 // ITEMSIZE[dtype]
    return [
        max(per_vec, round(f * l2_bytes / bytes_per_element(dtype) / per_vec) * per_vec)
        for f in CEILING_FRACTIONS
    ]


@dataclass
class RunConfig:
    plan: Plan
    plan_path: str
    grid: str = "default"
    dtypes: tuple[str, ...] = ()
    modes: tuple[str, ...] = ("hot",)
    pattern: str = "preallocated"
    stopping: Stopping = field(default_factory=Stopping)
    search: SearchParams = field(default_factory=SearchParams)
    full: bool = False  # sweep every config at every size (no screening)
    out_root: str = "results"
    run_id: str | None = None
    seed: int = 0
    time_limit_s: float | None = None  # stop cleanly (resumable) after this many seconds
    # a slice: only configs matching these fnmatch patterns, only working sets in [lo, hi]
    # bytes; a sliced run times every selected config at every selected size, no search
    configs: tuple[str, ...] = ()
    ws_range: tuple[int, int] | None = None
    # configs swept at every size whatever the screening says (users' kernels: a user asked
    # to see them over the whole plan)
    keep_configs: tuple[str, ...] = ()

    @property
    def sliced(self) -> bool:
        return bool(self.configs) or self.ws_range is not None

    def in_slice(self, config: str) -> bool:
        return config_matches(config, self.configs)

    def sizes(self, entries: list[dict]) -> list[dict]:
        if self.ws_range is None:
            return entries
        lo, hi = self.ws_range
        return [e for e in entries if lo <= e["working_set_bytes"] <= hi]


class TimeLimitReached(Exception):
    """The run stopped at its time limit: its folder is complete up to the last cell and can
    be resumed."""


def cell_key(mode: str, dtype: str, n: int, role: str, ident: str) -> str:
    return f"{mode}|{dtype}|{n}|{role}|{ident}"


def row_key(row: dict) -> str:
    ident = row.get("variant_id") or row["config"]
    return cell_key(row["mode"], row["dtype"], int(row["n"]), row["role"], ident)


def resume_key(trial: dict) -> str:
    """A recorded trial's cell key in this checkout's ids (sweeper_kernels.Variant.current_id)."""
    from sweeper_kernels import Variant

    if trial.get("role") in MEASURED and trial.get("variant_id"):
        vid = trial["variant_id"]
        return row_key({**trial, "variant_id": Variant.current_id(vid) or vid})
    return trial.get("cell_key") or row_key(trial)


def git_commit(cwd: str | Path = ".") -> str:
    """HEAD's sha (+dirty), $SWEEPER_GIT_COMMIT where the checkout has no git metadata (a
    copied tree on a GPU node), else "unknown"."""
    import os
    import re

    if os.environ.get("SWEEPER_GIT_COMMIT"):
        return os.environ["SWEEPER_GIT_COMMIT"]
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5
        )
        sha = out.stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
        if not re.fullmatch(r"[0-9a-f]{40}", sha):
            return "unknown"
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_run_id(gpu: str) -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y%m%d-%H%M%S")


def command_line() -> str:
    """The command that started this process, as a shell would re-run it (`sweeper run ...`
    when started through the `sweeper` entry point or `python -m sweeper`)."""
    argv = list(sys.argv)
    if argv and (Path(argv[0]).name in ("sweeper", "__main__.py")):
        argv[0] = "sweeper"
    return shlex.join(argv)


def slice_doc(cfg: RunConfig) -> dict | None:
    """The run's slice as the manifest records it (None for a whole run)."""
    if not cfg.sliced:
        return None
    return {
        "configs": list(cfg.configs),
        "ws_range": list(cfg.ws_range) if cfg.ws_range is not None else None,
    }


def manifest_for(cfg: RunConfig, device: dict, run_id: str) -> dict:
    plan = cfg.plan
    b = plan.bounds
    return {
        "run_id": run_id,
        "gpu": plan.gpu,
        "device": device["device"],
        "versions": device.get("versions", {}),
        "baseline": device.get("baseline", "torch"),
        "harness": device.get("harness", {}),
        "kernel_source": device.get("kernel_source", ""),
        # users' kernels (sweeper_kernels.external): candidates and the baseline
        **{k: device[k] for k in ("external", "baseline_kernel", "dispatch") if device.get(k)},
        # a run over several GPUs (sweeper.run.pool): every device, in the order rows name them
        **({"devices": device["devices"]} if len(device.get("devices") or ()) > 1 else {}),
        "plan": {
            "path": cfg.plan_path,
            "plan_hash": plan.plan_hash,
            "resolution": plan.resolution,
            "l2_bytes": plan.l2_bytes,
            "dense_lo_bytes": b.dense_lo,
            "dense_hi_bytes": b.dense_hi,
        },
        "modes": list(cfg.modes),
        "pattern": cfg.pattern,
        "grid": cfg.grid,
        "dtypes": list(cfg.dtypes),
        "full": cfg.full,
        "slice": slice_doc(cfg),
        "stopping": asdict(cfg.stopping),
        "search": asdict(cfg.search),
        "seed": cfg.seed,
        "sweeper_version": __version__,
        "git_commit": git_commit(),
        "command": command_line(),
        "started": _now(),
        "finished": None,
        "status": "running",
        "pruned": [],
        "guards": [],
        "timing": {},
    }


class Runner:
    def __init__(
        self,
        cfg: RunConfig,
        executor: Executor,
        run_dir: Path,
        manifest: dict,
        done: dict[str, dict],
        progress: Progress | None = None,
    ):
        self.cfg = cfg
        self.ex = executor
        self.run_dir = run_dir
        self.manifest = manifest
        self.rows = done  # key -> row (recorded trials, including resumed ones)
        self.progress = progress or (lambda desc, i, n: None)
        self.writer: TrialWriter | None = None
        self.measured_now = 0
        self.skipped = 0
        self._done_count = 0
        self._total = 0
        self._deadline: float | None = None
        self._compile_before = dict(manifest.get("compile") or {})
        self._ceilings: ceilings.Ceilings | None = None  # set once the ceiling is measured

    def _record_compile(self) -> None:
        """The manifest's compile stats: this segment's (the executor sums its prepares) added
        to those of a resumed run's segments before it."""
        stats = getattr(self.ex, "compile_stats", None)
        if stats:
            self.manifest["compile"] = {
                k: round(self._compile_before.get(k, 0) + v, 2) for k, v in stats.items()
            }

    def _add(self, key: str, value: float) -> None:
        """Add to a manifest timing entry: a resumed run adds its segment's seconds and counts
        to the segments' before it, so every entry covers the whole run."""
        timing = self.manifest.setdefault("timing", {})
        timing[key] = round(timing.get(key, 0) + value, 2)

    # -- recording ---------------------------------------------------------------------------
    def _record(self, row: dict, phase: str, tag: dict | None = None) -> dict:
        row = rounded(row)  # the figures the run decides on are the ones its log holds
        if tag and row["role"] == "candidate":
            row.update(tag)
        if phase == CONFIRM and row["role"] == "candidate":
            row["role"] = "confirm"
        floor = (self.manifest.get("floor") or {}).get(row["dtype"]) or {}
        if row["role"] in MEASURED and floor.get("config") and row["config"] == floor["config"]:
            row["floor"] = 1
        # the run's own record, whoever answered the cell (a replay answers with another run's)
        row["run_id"] = self.manifest["run_id"]
        row["gpu"] = self.manifest["gpu"]
        row.setdefault("pattern", self.cfg.pattern)
        row["phase"] = phase
        key = row_key(row)
        row["cell_key"] = key
        if row["role"] in MEASURED and self._ceilings is not None:
            copy = self.rows.get(cell_key(row["mode"], row["dtype"], int(row["n"]), "copy", "copy"))
            copy_gbps = copy["gbps"] if copy and copy.get("status") == "ok" else None
            row["status"], row["status_detail"] = ceilings.check(row, self._ceilings, copy_gbps)
        assert self.writer is not None
        self.writer.append(row)
        self.rows[key] = row
        self.measured_now += 1
        if self._deadline is not None and time.perf_counter() > self._deadline:
            raise TimeLimitReached(self.run_dir)
        if row.get("status") not in (None, "ok"):
            self.manifest["guards"].append(
                {"cell": key, "status": row["status"], "detail": row.get("status_detail", "")}
            )
        return row

    def _tick(self, desc: str) -> None:
        self._done_count += 1
        self.progress(desc, self._done_count, max(self._total, self._done_count))

    def _measure_size(
        self,
        mode: str,
        dtype: str,
        n: int,
        variants: list[Any],
        phase: str,
        tag: dict | None = None,
    ) -> None:
        if self._needs_reference(mode, dtype, n):
            for row in self.ex.reference(mode, dtype, n):
                if row_key(row) not in self.rows:
                    self._record(row, phase)
        role = "confirm" if phase == CONFIRM else "candidate"
        todo = self._todo(mode, dtype, n, variants, phase)
        many = getattr(self.ex, "measure_many", None)
        if hasattr(self.ex, "role"):  # an executor answering from a record: which of its cells
            self.ex.role = role
        try:
            rows = (
                many(mode, dtype, n, todo)
                if many is not None
                else (self.ex.measure(mode, dtype, n, v) for v in todo)
            )
            for row in rows:
                self._record(row, phase, tag)
                self._tick(f"{mode} {dtype} {phase}")
        finally:
            if hasattr(self.ex, "role"):
                self.ex.role = "candidate"
        self.ex.release(dtype, n)

    def _needs_reference(self, mode: str, dtype: str, n: int) -> bool:
        return not all(
            cell_key(mode, dtype, n, role, role_cfg) in self.rows for role, role_cfg in self._refs()
        )

    def _todo(self, mode: str, dtype: str, n: int, variants: list[Any], phase: str) -> list[Any]:
        """The variants of a size still to measure, in the order they are timed (recorded
        cells are skipped and counted)."""
        role = "confirm" if phase == CONFIRM else "candidate"
        order = list(variants)
        # the confirmation round times its configs in another order than their first cells
        random.Random(f"{self.cfg.seed}|{mode}|{dtype}|{n}|{role}").shuffle(order)
        todo = []
        for v in order:
            if cell_key(mode, dtype, n, role, v.id) in self.rows:
                self.skipped += 1
                self._tick(f"{mode} {dtype} {phase}")
            else:
                todo.append(v)
        return todo

    def _measure_sizes(
        self,
        mode: str,
        dtype: str,
        jobs: list[tuple[int, list[Any]]],
        phase: str,
        tag: dict | None = None,
    ) -> None:
        """`_measure_size` for each (n, variants) of `jobs`. An executor over several GPUs
        (sweeper.run.pool.PoolExecutor: `measure_sizes`) measures them at once, each on its
        size's GPU, and they are recorded in the jobs' order, as one GPU records them."""
        pooled = getattr(self.ex, "measure_sizes", None)
        if pooled is None:
            for n, variants in jobs:
                self._measure_size(mode, dtype, n, variants, phase, tag)
            return
        role = "confirm" if phase == CONFIRM else "candidate"
        sent = []
        for n, variants in jobs:
            need_ref = self._needs_reference(mode, dtype, n)
            todo = self._todo(mode, dtype, n, variants, phase)
            if need_ref or todo:
                sent.append((n, need_ref, todo))
        for refs, rows in pooled(mode, dtype, sent, role):
            for row in refs:
                if row_key(row) not in self.rows:
                    self._record(row, phase)
            for row in rows:
                self._record(row, phase, tag)
                self._tick(f"{mode} {dtype} {phase}")

    def _refs(self) -> list[tuple[str, str]]:
        return [("copy", "copy"), ("baseline", baseline_of(self.manifest))]

    def _rows_for(self, mode: str, dtype: str, ns: set[int] | None = None) -> list[dict]:
        return [
            r
            for r in self.rows.values()
            if r["mode"] == mode and r["dtype"] == dtype and (ns is None or r["n"] in ns)
        ]

    def _screen_rows(self, mode: str, dtype: str, screen: set[int]) -> list[dict]:
        """The screening and climb cells at the screening sizes: what the survivors and the
        climb are decided on. The sweep later times every survivor at those sizes too; its
        cells must not re-decide, on resume, what the screening decided."""
        return [r for r in self._rows_for(mode, dtype, screen) if r.get("phase") == "screen"]

    # -- the search --------------------------------------------------------------------------
    def run(self) -> Path:
        cfg, plan = self.cfg, self.cfg.plan
        t0 = time.perf_counter()
        if cfg.time_limit_s is not None:
            self._deadline = t0 + cfg.time_limit_s
        all_variants = {
            d: [v for v in self.ex.variants(cfg.grid, d) if cfg.in_slice(v.config)]
            for d in cfg.dtypes
        }
        if self.rows and "grid_hash" not in self.manifest:
            # resumed, and recorded before the manifest held its grid's fingerprint: a dtype
            # whose screening is over in some mode (its sweep began) keeps the seed screened
            # there, whatever the grid holds now
            for d, vs in all_variants.items():
                swept = {
                    r["mode"]
                    for r in self.rows.values()
                    if r["dtype"] == d and r.get("phase") in ("sweep", "refine")
                }
                seed = screened_everywhere(self.rows.values(), d, swept) if swept else None
                if seed is not None:
                    all_variants[d] = [v for v in vs if v.config in seed]
        self.ex.prepare([v for vs in all_variants.values() for v in vs])
        self._add("prepare_s", time.perf_counter() - t0)
        self._record_compile()
        self._total = (
            0
            if cfg.sliced
            else sum(
                len(screen_sizes(plan.sizes(d), plan.l2_bytes)) * len(all_variants[d])
                for d in cfg.dtypes
            )
            * len(cfg.modes)
        )
        self.writer = TrialWriter(self.run_dir)
        try:
            if "ceiling" not in self.manifest:
                self._measure_ceiling()
            # a resumed run keeps the parameters it started with
            self.manifest.setdefault("harness", {}).setdefault(
                "ceiling_check", ceilings.harness_doc()
            )
            self._ceilings = ceilings.ceilings_of(self.manifest)
            for mode in cfg.modes:
                for dtype in cfg.dtypes:
                    # a policy's dispatch is timed in the mode its policy was built for
                    vs = [v for v in all_variants[dtype] if getattr(v, "mode", mode) == mode]
                    self._run_one(mode, dtype, vs)
        except (KeyboardInterrupt, TimeLimitReached):
            self.manifest["status"] = "interrupted"
            self._finish(t0)
            raise
        except BaseException:
            # a run that failed part way is stopped, its cells kept to resume, never left
            # "running"; the error that stopped it is the one reported
            self.manifest["status"] = "interrupted"
            with contextlib.suppress(Exception):
                self._finish(t0)
            raise
        self.manifest["status"] = "complete"
        self._finish(t0)
        return self.run_dir

    def _measure_ceiling(self) -> None:
        """Record the L2-resident ceiling in the manifest (not in the trials: its sizes and
        configs are no part of the search)."""
        ceiling_set = getattr(self.ex, "ceiling_set", None)
        if ceiling_set is None:
            return
        t = time.perf_counter()
        dtype = CEILING_DTYPE
        variants = ceiling_set(dtype)
        self.ex.prepare(variants)
        points = []
        for n in ceiling_sizes(self.cfg.plan.l2_bytes, dtype):
            rows = [r for r in self.ex.reference("hot", dtype, n) if r["role"] == "copy"]
            rows += [self.ex.measure("hot", dtype, n, v) for v in variants]
            ok = [r for r in rows if r["status"] == "ok" and r.get("gbps")]
            self.ex.release(dtype, n)
            if ok:
                best = max(ok, key=lambda r: r["gbps"])
                points.append(
                    {
                        "ws_bytes": working_set(n, dtype),
                        "gbps": best["gbps"],
                        "by": best["config"],
                    }
                )
        gbps = sorted(p["gbps"] for p in points)
        self.manifest["ceiling"] = {
            "mode": "hot",
            "dtype": dtype,
            "gbps": gbps[len(gbps) // 2] if gbps else None,
            "points": points,
            "reference": ["copy", *(v.config for v in variants)],
        }
        self._add("ceiling_s", time.perf_counter() - t)
        write_manifest(self.run_dir, self.manifest)

    def _run_one(self, mode: str, dtype: str, variants: list[Any]) -> None:
        cfg, plan = self.cfg, self.cfg.plan
        entries = cfg.sizes(plan.sizes(dtype))
        if cfg.sliced:  # a slice re-times what it names: every config at every size, no search
            t = time.perf_counter()
            self._total += len(entries) * len(variants)
            self._measure_sizes(mode, dtype, [(e["n"], variants) for e in entries], "sweep")
            self._add(f"{mode}/{dtype}/sweep_s", time.perf_counter() - t)
            return
        itemsize = ITEMSIZE[dtype]
        by_config = {v.config: v for v in variants}
        variant_of = getattr(self.ex, "variant", None)
        if variant_of is not None:  # a resumed run: configs the climb found before
            for r in self._rows_for(mode, dtype):
                if r["role"] == "candidate" and r["config"] not in by_config:
                    by_config[r["config"]] = variant_of(dtype, r["config"])
        floor = self._floor(dtype, entries) if cfg.search.floor else None
        if floor is not None and floor not in by_config and variant_of is not None:
            by_config[floor] = variant_of(dtype, floor)
        if floor not in by_config:
            floor = None
        t = time.perf_counter()
        scoped: set[str] = set()  # survivors of the sizes beyond the L2 only
        if cfg.full:
            keep = list(by_config)
        else:
            screen = screen_sizes(entries, plan.l2_bytes)
            self._measure_sizes(mode, dtype, [(n, variants) for n in screen], "screen")
            scope = for_mode(cfg.search, mode)
            climb_at = climb_sizes(entries, screen, plan.l2_bytes, scope)
            self._climb(mode, dtype, climb_at, by_config)
            screen_rows = self._screen_rows(mode, dtype, set(screen))
            keep, pruned = survivors(screen_rows, cfg.search)
            always = {*cfg.keep_configs, *([floor] if floor else [])}
            kept_anyway = [c for c in always if c in by_config and c not in keep]
            keep += kept_anyway
            scoped = beyond_l2_only(screen_rows, plan.l2_bytes, scope) - always
            pruned = [p for p in pruned if p["config"] not in kept_anyway]
            self.manifest["pruned"] = [
                p for p in self.manifest["pruned"] if (p["mode"], p["dtype"]) != (mode, dtype)
            ] + [{"mode": mode, "dtype": dtype, **p} for p in pruned]
            if scope.beyond_l2_scope:
                self.manifest.setdefault(BEYOND_L2, {})[f"{mode}/{dtype}"] = sorted(scoped)
            write_manifest(self.run_dir, self.manifest)
        self._add(f"{mode}/{dtype}/screen_s", time.perf_counter() - t)
        t = time.perf_counter()
        chosen = [by_config[c] for c in keep]

        def chosen_at(n: int) -> list[Any]:
            """The survivors measured at size n (beyond_l2_only's only beyond the L2)."""
            ws = working_set(n, dtype)
            return [v for v in chosen if in_scope(v.config, ws, plan.l2_bytes, scoped)]

        jobs = [(e["n"], chosen_at(e["n"])) for e in entries]
        self._total += sum(len(vs) for _, vs in jobs)
        self._measure_sizes(mode, dtype, jobs, "sweep")
        self._add(f"{mode}/{dtype}/sweep_s", time.perf_counter() - t)
        t = time.perf_counter()
        kept = set(keep)

        def swept(r: dict) -> bool:
            """A cell of a survivor where the sweep measures it (chosen_at)."""
            return r["config"] in kept and in_scope(r["config"], r["ws_bytes"], plan.l2_bytes,
                                                    scoped)  # fmt: skip

        confirmed = 0

        def confirm(points: list[int]) -> None:
            """The confirmation round at these sizes (SearchParams.confirm)."""
            nonlocal confirmed
            if not cfg.search.confirm:
                return
            tc = time.perf_counter()
            jobs = []
            for n in points:
                rows = [r for r in self._rows_for(mode, dtype, {n}) if swept(r)]
                names = confirm_set(rows, floor, cfg.search.confirm, cfg.search.policy_tolerance)
                self._total += len(names)
                jobs.append((n, [by_config[c] for c in names]))
                confirmed += len(names)
            self._measure_sizes(mode, dtype, jobs, CONFIRM)
            self._add(f"{mode}/{dtype}/confirm_s", time.perf_counter() - tc)

        confirm([e["n"] for e in entries])
        # Each round below decides on the survivors' rows at the sizes decided before it: the
        # planned sizes, then every earlier round's points. A resumed run goes through the
        # rounds from the first, as the run in one go did (the cells an earlier segment
        # recorded are skipped, a size it stopped in is completed), so every round decides on
        # the same rows, and the budgets count the run's points, not a segment's. A size begun
        # but not finished decides nothing before its round has completed it.
        decided = {e["n"] for e in entries}

        def survivor_rows() -> list[dict]:
            return [r for r in self._rows_for(mode, dtype, decided) if swept(r)]

        def measure(points: list[int]) -> None:
            jobs = [(n, chosen_at(n)) for n in points]
            self._total += sum(len(vs) for _, vs in jobs)
            self._measure_sizes(mode, dtype, jobs, "refine")
            confirm(points)
            decided.update(points)

        added = 0
        for _ in range(cfg.search.max_refine_rounds):
            points = refinement_points(survivor_rows(), plan.l2_bytes, itemsize, cfg.search)
            points = points[: max(0, cfg.search.max_refine_points - added)]
            if not points:
                break
            measure(points)
            added += len(points)
        # Then close every gap the policy would need a boundary in (policy_sample_points),
        # with the project targets' floors kept in ties as `sweeper policy build` keeps them.
        from sweeper.analyze.targets import targets

        floors = targets(plan.l2_bytes)
        ceiling = (self.manifest.get("ceiling") or {}).get("gbps")
        bracketed, closed = 0, False
        for round_ in range(cfg.search.max_bracket_rounds + 1):
            copies = [r for r in self._rows_for(mode, dtype, decided) if r["role"] == "copy"]
            brackets, singles = policy_sample_points(
                survivor_rows() + copies,
                plan.l2_bytes,
                plan.resolution,
                itemsize,
                cfg.search.policy_tolerance,
                cfg.search.refine_divisor,
                floors=floors,
                ceiling_gbps=ceiling,
            )
            points = [n for n in brackets if n not in decided]
            closed = not points
            # then a second sample beside every band that rests on one measured size
            points += [n for n in singles if n not in points and n not in decided]
            points = points[: max(0, cfg.search.max_refine_points - bracketed)]
            if not points or round_ == cfg.search.max_bracket_rounds:
                break
            measure(points)
            bracketed += len(points)
        self._add(f"{mode}/{dtype}/refine_s", time.perf_counter() - t)
        # counts of the run's points (every segment's), as the rounds above count them
        self.manifest.setdefault("timing", {})[f"{mode}/{dtype}/refine_points"] = added
        self.manifest["timing"][f"{mode}/{dtype}/bracket_points"] = bracketed
        if cfg.search.confirm:
            self.manifest["timing"][f"{mode}/{dtype}/confirm_cells"] = sum(
                1 for r in self._rows_for(mode, dtype) if r["role"] == "confirm"
            )
        # where `sweeper policy build` will refuse a boundary: the gap is still open
        opened = [k for k in self.manifest.get("open_brackets", []) if k != f"{mode}/{dtype}"]
        self.manifest["open_brackets"] = opened + ([] if closed else [f"{mode}/{dtype}"])
        write_manifest(self.run_dir, self.manifest)

    def _floor(self, dtype: str, entries: list[dict]) -> str | None:
        """The dtype's floor config (SearchParams.floor): the manifest's, or found by the
        executor (`baseline_shape`: the grid's config closest to the baseline's own launch,
        read at the planned size nearest L2 / 2) and recorded there; None where the executor
        finds none (the manifest says why)."""
        floors = self.manifest.setdefault("floor", {})
        if dtype not in floors:
            shape_of = getattr(self.ex, "baseline_shape", None)
            if shape_of is None:
                doc = {"config": None, "why": "the executor cannot read a launch shape"}
            else:
                half = self.cfg.plan.l2_bytes // 2
                n = min(entries, key=lambda e: abs(e["working_set_bytes"] - half))["n"]
                doc = shape_of(dtype, n)
                self.ex.release(dtype, n)
            floors[dtype] = doc
            write_manifest(self.run_dir, self.manifest)
        return floors[dtype].get("config")

    def _climb(self, mode: str, dtype: str, screen: set[int], by_config: dict) -> None:
        """From the seed grid's screening rows, measure the neighbours (one-axis moves and,
        with search.climb_trades, bytes-in-flight trades) of every config near the best at
        each screening size until none comes within the margin (search.climb_moves). New
        configs join `by_config`; their compiles run in one batch per round. Executors
        without `neighbours` do not climb.

        Each climbed cell records its round (`climb_round`; the seed's cells have none), so
        the round budget is the run's and a resumed run climbs as one run in one go would:
        it takes up the last round it finds, whose moves follow from the rows of the rounds
        before it (the cells that round measured are skipped), and goes on from there. A run
        recorded before cells carried their round goes on from the rounds its manifest
        counts."""
        neighbours_of = getattr(self.ex, "neighbours", None)
        if neighbours_of is None:
            return
        params = self.cfg.search
        t = time.perf_counter()

        def neighbours(config: str) -> list[str]:
            out = []
            here = by_config[config]
            for v in neighbours_of(here):
                if not params.climb_trades and not one_axis(here, v):
                    continue
                by_config.setdefault(v.config, v)
                out.append(v.config)
            return out

        def climbed(rows: list[dict]) -> list[int]:
            return [r.get(CLIMB_ROUND, 0) for r in rows if r["role"] == "candidate"]

        rows = self._screen_rows(mode, dtype, screen)
        done = max(climbed(rows), default=0)
        recorded = self.manifest.get("climb", {}).get(f"{mode}/{dtype}")
        rounds, untagged = max(0, done - 1), 0
        if recorded and not done:  # climbed before cells carried their round: go on from its count
            rounds, untagged = recorded["rounds"], recorded["cells"]
        converged, compile_s = True, 0.0
        while True:
            moves = climb_moves(
                [r for r in rows if r.get(CLIMB_ROUND, 0) <= rounds], neighbours, params
            )
            if not moves:
                break
            if rounds >= params.max_climb_rounds:
                converged = False
                break
            rounds += 1
            new = {c for cs in moves.values() for c in cs}
            tc = time.perf_counter()
            self.ex.prepare([by_config[c] for c in sorted(new)])
            compile_s += time.perf_counter() - tc
            self._total += sum(len(cs) for cs in moves.values())
            jobs = [(n, [by_config[c] for c in cs]) for n, cs in moves.items()]
            self._measure_sizes(mode, dtype, jobs, "screen", {CLIMB_ROUND: rounds})
            rows = self._screen_rows(mode, dtype, screen)
        self.manifest.setdefault("climb", {})[f"{mode}/{dtype}"] = {
            "rounds": rounds,
            "cells": untagged + sum(1 for k in climbed(rows) if k > 0),
            "configs": len(by_config),
            "converged": converged,
        }
        self._add(f"{mode}/{dtype}/climb_s", time.perf_counter() - t)
        # the part of climb_s spent compiling and loading the new configs' kernels
        self._add(f"{mode}/{dtype}/climb_compile_s", compile_s)

    def _record_phases(self) -> None:
        """The executor's host time by cell phase (GpuExecutor.phase_seconds), added to a
        resumed run's segments before it."""
        take = getattr(self.ex, "phase_seconds", None)
        if take is None:
            return
        phases = self.manifest.setdefault("timing", {}).setdefault(CELL_PHASES, {})
        for k, v in sorted(take().items()):
            phases[k] = round(phases.get(k, 0) + v, 2)
        clocks = getattr(self.ex, "clock_summary", None)
        if clocks is not None:  # a resumed run keeps its last segment's
            self.manifest["timing"]["clocks"] = clocks()
        for name in (REPLAY_GRAPHS, BATCH_SPANS):  # summed over a resumed run's segments
            counts = getattr(self.ex, name, None)
            if counts is not None:
                total = self.manifest["timing"].setdefault(name, {})
                for k, v in counts().items():
                    total[k] = round(total.get(k, 0) + v, 4)

    def _finish(self, t0: float) -> None:
        if self.writer is not None:
            self.writer.close()
        self.manifest["finished"] = _now()
        self._record_compile()  # the climb's prepares add to it
        self._record_phases()
        self.manifest["timing"]["total_s"] = round(
            self.manifest["timing"].get("total_s", 0) + time.perf_counter() - t0, 2
        )
        trials, _ = read_trials(self.run_dir)
        write_results(self.run_dir, trials_to_frame(trials))
        # the last write: the manifest records its trial and pruned logs and itself
        write_manifest(self.run_dir, self.manifest, finished=True)


def start(
    cfg: RunConfig,
    executor: Executor,
    *,
    resume: Path | None = None,
    progress: Progress | None = None,
) -> Path:
    """Start a new run (or resume one) and execute it; returns the run folder."""
    for d in cfg.dtypes:
        cfg.plan.sizes(d)  # raises for a dtype the plan lacks
    check_slice(cfg, executor)
    device = executor.describe()
    grid = grid_hash(cfg, executor)
    if resume is not None:
        run_dir = Path(resume)
        manifest = load_manifest(run_dir)
        for log in (TRIALS, PRUNED):
            archive = log_archive(run_dir, log)
            if archive is not None and not (run_dir / log).exists():
                raise SweeperError(
                    f"{run_dir} is archived ({archive.name}); "
                    f"`{UNPACK[archive.suffix]} {archive}` to resume it"
                )
        check_resumable(manifest, cfg, device, grid)
        dropped = repair_trials(run_dir)
        trials, _ = read_trials(run_dir)
        check_same_kernels(trials, executor, cfg)
        done = {resume_key(t): t for t in trials}
        manifest["status"] = "running"
        manifest.setdefault("resumed", []).append(
            {
                "at": _now(),
                "dropped_bytes": dropped,
                "search": asdict(cfg.search),
                "command": command_line(),
            }
        )
        manifest["search"] = asdict(cfg.search)
        manifest["guards"] = [
            {"cell": k, "status": t["status"], "detail": t.get("status_detail", "")}
            for k, t in done.items()
            if t["status"] != "ok"
        ]
    else:
        check_plan_device(cfg, device)
        folder_to_write(cfg.out_root, "results root")
        run_id = cfg.run_id or new_run_id(cfg.plan.gpu)
        new_run_dir(cfg.out_root, cfg.plan.gpu, run_id)
        run_dir = Path(cfg.out_root) / cfg.plan.gpu / run_id
        undo = undo_new(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        manifest = manifest_for(cfg, device, run_id)
        manifest["grid_hash"] = grid
        done = {}
    runner = Runner(cfg, executor, run_dir, manifest, done, progress)
    try:
        write_manifest(run_dir, manifest)
        return runner.run()
    except Exception:
        # a new run that failed (not one interrupted: that one resumes) before its first
        # trial, or a replay (its cells cost nothing to answer again), leaves nothing behind
        if resume is None and (runner.measured_now == 0 or getattr(executor, "replays", False)):
            if runner.writer is not None:
                runner.writer.close()
            undo()
        raise


def check_plan_device(cfg: RunConfig, described: dict) -> None:
    """A new run's plan must be for the device it measures (or replays): its sizes are laid
    out around that device's L2 size, which the manifest records as the device's.
    `described`: the executor's describe()."""
    device = described.get("device") or {}
    l2 = device.get("l2_bytes")
    if isinstance(l2, int) and cfg.plan.l2_bytes != l2:
        raise PlanMismatchError(
            f"{cfg.plan_path}: field 'l2_bytes': planned for '{cfg.plan.gpu}' around an L2 of "
            f"{cfg.plan.l2_bytes} bytes, but the device measured ({device.get('name', '?')}) "
            f"has {l2}; use a plan for that device (`sweeper plan --gpu ...`)"
        )


def check_slice(cfg: RunConfig, executor: Executor) -> None:
    """A slice must select something: a config of the grid and a planned size."""
    if cfg.configs and not any(
        cfg.in_slice(v.config) for d in cfg.dtypes for v in executor.variants(cfg.grid, d)
    ):
        raise SweeperError(
            f"--configs {','.join(cfg.configs)}: no config of the {cfg.grid!r} grid matches "
            "(`sweeper kernels list` prints them)"
        )
    if cfg.ws_range is not None and not any(cfg.sizes(cfg.plan.sizes(d)) for d in cfg.dtypes):
        lo, hi = cfg.ws_range
        raise SweeperError(
            f"--sizes: no planned working set of {', '.join(cfg.dtypes)} lies in "
            f"[{fmt_bytes(lo)}, {fmt_bytes(hi)}]"
        )


def check_same_kernels(trials: list[dict], executor: Executor, cfg: RunConfig) -> None:
    """A resume must measure the same kernel code: a variant id hashes its config and the
    kernel source, so a done candidate cell whose id the current grid does not have was made by
    other code. Resuming would put two versions of one config name into one run."""
    from sweeper_kernels import Variant

    current = {v.id for d in cfg.dtypes for v in executor.variants(cfg.grid, d)}
    climbs = getattr(executor, "neighbours", None) is not None  # any extended-grid id is ours

    def stale_id(variant_id: str) -> bool:
        # current_id is None exactly where an id names kernel code this checkout lacks; a
        # climbing executor may have measured any config of the extended grid
        now = Variant.current_id(variant_id)
        return now is None or (not climbs and now not in current)

    stale = sorted(
        {
            t["variant_id"]
            for t in trials
            if t.get("role") in MEASURED and t.get("variant_id") and stale_id(t["variant_id"])
        }
    )
    if stale:
        raise PlanMismatchError(
            f"cannot resume this run: {len(stale)} of its variants were measured with kernel "
            f"code this checkout does not have (e.g. {stale[0]}); a resume would mix two "
            "versions of the same configs in one run. Start a new run"
        )


def grid_hash(cfg: RunConfig, executor: Executor) -> str:
    """A fingerprint of the configs the run's grid gives its dtypes (in its slice): what the
    screening starts from, so a resume can tell that the grid changed under a run."""
    from sweeper.schema import content_hash

    return content_hash(
        {d: sorted(v.config for v in executor.variants(cfg.grid, d) if cfg.in_slice(v.config))
         for d in cfg.dtypes}
    )  # fmt: skip


def check_resumable(manifest: dict, cfg: RunConfig, device: dict, grid: str | None = None) -> None:
    """A resumed run must use the same plan, grid (by name and, where the manifest records it,
    by content: `grid_hash`), modes and the same kind of device."""
    problems = []
    if grid is not None and manifest.get("grid_hash", grid) != grid:
        problems.append(
            f"the {cfg.grid} grid holds other configs than when the run started (grid hash "
            f"{manifest['grid_hash']} != {grid}); resume it with the version that started it"
        )
    if manifest["plan"]["plan_hash"] != cfg.plan.plan_hash:
        problems.append(
            f"plan hash {manifest['plan']['plan_hash']} != {cfg.plan.plan_hash} ({cfg.plan_path})"
        )
    if manifest.get("slice") != slice_doc(cfg):
        problems.append(f"slice {manifest.get('slice')} != {slice_doc(cfg)}")
    for f, want in (("grid", cfg.grid), ("modes", list(cfg.modes)), ("dtypes", list(cfg.dtypes))):
        if manifest.get(f) != want:
            problems.append(f"{f} {manifest.get(f)} != {want}")
    if manifest.get("pattern", "preallocated") != cfg.pattern:
        problems.append(f"pattern {manifest.get('pattern')} != {cfg.pattern}")
    # timer settings a resume must share; each default is what a run made before its field
    # existed did: one warm-up call, side a first in both halves
    timer = [("halves_first_side", ["a", "a"], "first side per half")]
    if "hot" in cfg.modes:
        timer.insert(0, ("hot_warm_calls", 1, "hot warm-up calls per sample"))
    for key, default, what in timer:
        was = (manifest.get("harness") or {}).get(key, default)
        now = (device.get("harness") or {}).get(key, default)
        if was != now:
            problems.append(
                f"{what} {was!r} != {now!r}; resume it with the version that started it"
            )
    if "harness" in device:  # a GPU executor's (a replay records none)
        was, now = executor_kind(manifest), executor_kind(device)
        if was != now:
            problems.append(f"executor {was} != {now}")
    old, new = manifest["device"], device["device"]
    for f in ("name", "l2_bytes", "sm_count"):
        if old.get(f) != new.get(f):
            problems.append(f"device {f} {old.get(f)!r} != {new.get(f)!r}")
    if problems:
        raise PlanMismatchError("cannot resume this run: " + "; ".join(problems))
