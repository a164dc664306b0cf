"""A fleet campaign (`sweeper fleet run CAMPAIGN.toml`): which GPU models measure what.

    name = "relu-fleet"              # the fleet's folder: <results>/fleet/<name>/
    results = "results"              # the results root (default "results")

    [[gpu]]                          # one run per GPU model
    plan = "sweeps/h200.json"        # the plan names the model (its L2 and sizes)
    accelerator_type = "H200"        # Ray's accelerator type of that model (optional)
    gpus = 2                         # how many of its GPUs measure the run (default 1)
    ops = ["relu"]                   # default ["relu"]
    dtypes = ["fp32", "bf16"]        # default: the plan's
    modes = ["hot"]                  # default ["hot"]
    run_id = "relu-fleet-h200"       # default "<name>-<plan's gpu>"
    replay = "results/h200/hot-7"    # optional: answer from a recorded run (a rehearsal)

Paths are relative to the campaign file's folder. Every field is checked when the file is
read: an error names the file and the field, before any GPU is asked for.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from sweeper.errors import SchemaError
from sweeper.ops import DEFAULT_OP, OPS, SWEPT
from sweeper.runfolder import plain_run_id


@dataclass(frozen=True)
class ModelRun:
    plan: Path
    accelerator_type: str | None
    gpus: int
    ops: tuple[str, ...]
    dtypes: tuple[str, ...] | None
    modes: tuple[str, ...]
    run_id: str | None
    replay: Path | None


@dataclass(frozen=True)
class Campaign:
    path: Path
    name: str
    results: Path
    runs: tuple[ModelRun, ...]


def _strings(doc: dict, key: str, where: str, path: Path) -> tuple[str, ...] | None:
    v = doc.get(key)
    if v is None:
        return None
    if not isinstance(v, list) or not v or not all(isinstance(x, str) for x in v):
        raise SchemaError(path, f"{where}{key}", f"expected a list of names, found {v!r}")
    return tuple(v)


def load_campaign(path: str | Path) -> Campaign:
    from sweeper.analyze.columns import MODES
    from sweeper.dtypes import DTYPES
    from sweeper.files import read_text

    path = Path(path)
    try:
        doc = tomllib.loads(read_text(path))
    except tomllib.TOMLDecodeError as e:
        raise SchemaError(path, None, f"not valid TOML ({e})") from None
    base = path.parent
    name = doc.get("name")
    if not isinstance(name, str) or not plain_run_id(name):
        raise SchemaError(path, "name", f"expected a folder name, found {name!r}")
    results = doc.get("results", "results")
    if not isinstance(results, str) or not results:
        raise SchemaError(path, "results", f"expected a folder, found {results!r}")
    unknown = sorted(set(doc) - {"name", "results", "gpu"})
    if unknown:
        raise SchemaError(path, unknown[0], "not a campaign field (name, results, [[gpu]])")
    gpus = doc.get("gpu")
    if not isinstance(gpus, list) or not gpus:
        raise SchemaError(path, "gpu", "expected one [[gpu]] table or more")
    runs = []
    fields = {"plan", "accelerator_type", "gpus", "ops", "dtypes", "modes", "run_id", "replay"}
    for i, g in enumerate(gpus):
        where = f"gpu[{i}]."
        extra = sorted(set(g) - fields)
        if extra:
            raise SchemaError(
                path, f"{where}{extra[0]}", f"not a field of [[gpu]] ({', '.join(sorted(fields))})"
            )
        plan = g.get("plan")
        if not isinstance(plan, str):
            raise SchemaError(path, f"{where}plan", f"expected a plan file, found {plan!r}")
        accel = g.get("accelerator_type")
        if accel is not None and (not isinstance(accel, str) or not accel):
            raise SchemaError(path, f"{where}accelerator_type", f"expected a name, found {accel!r}")
        count = g.get("gpus", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise SchemaError(path, f"{where}gpus", f"expected a positive count, found {count!r}")
        ops = _strings(g, "ops", where, path) or (DEFAULT_OP,)
        for op in ops:
            if op not in OPS:
                raise SchemaError(
                    path, f"{where}ops", f"unknown op {op!r} (known: {', '.join(sorted(OPS))})"
                )
            if op not in SWEPT:
                raise SchemaError(
                    path, f"{where}ops", f"op {op!r} is not swept yet (swept: {', '.join(SWEPT)})"
                )
        dtypes = _strings(g, "dtypes", where, path)
        for d in dtypes or ():
            if d not in DTYPES:
                raise SchemaError(
                    path, f"{where}dtypes", f"unknown dtype {d!r} (known: {', '.join(DTYPES)})"
                )
        modes = _strings(g, "modes", where, path) or ("hot",)
        for m in modes:
            if m not in MODES:
                raise SchemaError(
                    path, f"{where}modes", f"unknown mode {m!r} (known: {', '.join(MODES)})"
                )
        run_id = g.get("run_id")
        if run_id is not None and (not isinstance(run_id, str) or not plain_run_id(run_id)):
            raise SchemaError(path, f"{where}run_id", f"expected a folder name, found {run_id!r}")
        replay = g.get("replay")
        if replay is not None and not isinstance(replay, str):
            raise SchemaError(path, f"{where}replay", f"expected a run folder, found {replay!r}")
        runs.append(
            ModelRun(
                plan=base / plan,
                accelerator_type=accel,
                gpus=count,
                ops=ops,
                dtypes=dtypes,
                modes=modes,
                run_id=run_id,
                replay=base / replay if replay is not None else None,
            )
        )
    return Campaign(path=path, name=name, results=base / results, runs=tuple(runs))
