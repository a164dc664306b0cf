"""Fixtures shared by the unit tests."""

from __future__ import annotations

import json
import lzma
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from sweeper.analyze.store import load_manifest, with_records, write_manifest

ROOT = Path(__file__).resolve().parents[2]

# The modules that compile the PTX of the default grid (each key for sm_90, a sample for
# sm_89, in a process pool, into the PTX disk cache) run in one pytest-xdist worker, in file
# order: the grid is compiled once, and test_kernels_ptxas reads the sm_90 PTX from the cache. Spread
# over the workers, each worker compiled the whole grid for itself.
PTX_MODULES = ("test_kernels_ptx.py", "test_kernels_ptxas.py")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in PTX_MODULES and item.path.parent == ROOT / "tests" / "unit":
            item.add_marker(pytest.mark.xdist_group("ptx"))


def one_dtype_of_hot7(root: Path, dtype: str) -> Path:
    """results/h200/hot-7 as a run of `dtype` alone, under `root` (a results folder): its
    trials of that dtype, its manifest narrowed to them (dtypes, pruned, climb, timing), the
    selection and policy that `sweeper select` and `sweeper policy build` make from them, no
    figures. The whole run has 51020 cells, its fp32 part 15514. Returns the run folder, whose
    manifest records its files as they are after the cut."""
    from sweeper import api

    def of_dtype(key: str) -> bool:  # 'hot/fp16/screen_s' names a dtype; 'prepare_s' none
        parts = key.split("/")
        return len(parts) < 2 or parts[1] == dtype

    shipped = ROOT / "results" / "h200" / "hot-7"
    run = root / "h200" / "hot-7"
    run.mkdir(parents=True)
    with lzma.open(shipped / "trials.jsonl.xz", "rt") as src:
        lines = [line for line in src if json.loads(line)["dtype"] == dtype]
    with lzma.open(run / "trials.jsonl.xz", "wt", preset=0) as dst:
        dst.writelines(lines)
    m = load_manifest(shipped)
    m["dtypes"] = [dtype]
    m["pruned"] = [p for p in m["pruned"] if p["dtype"] == dtype]
    m["climb"] = {k: v for k, v in m["climb"].items() if of_dtype(k)}
    m["timing"] = {k: v for k, v in m["timing"].items() if of_dtype(k)}
    write_manifest(run, m, finished=True)
    api.select(str(run))
    api.policy_build(str(run))
    return run


_CUTS: dict[str, Path] = {}  # dtype -> the cut this process made first, copied from then on


@pytest.fixture(scope="module")
def cut_hot7(tmp_path_factory) -> Callable[[Path, str], Path]:
    """one_dtype_of_hot7, for module-scoped fixtures: each dtype's cut is made once in a
    pytest process and copied under the root asked for (the same files)."""

    def cut(root: Path, dtype: str) -> Path:
        if dtype not in _CUTS:
            _CUTS[dtype] = one_dtype_of_hot7(tmp_path_factory.mktemp(f"hot7-{dtype}"), dtype)
        run = root / "h200" / "hot-7"
        shutil.copytree(_CUTS[dtype], run)
        return run

    return cut


@pytest.fixture
def planted_run(tmp_path) -> Callable[..., Path]:
    """A run folder made from a shipped run's first `cells` ok candidate trials that `pick`
    accepts, each passed through `plant` (which rewrites its samples), beside the shipped run's
    manifest (passed through `manifest`) and its pruned list: a recorded profile, planted."""

    def make(run: str, plant, cells: int, pick=lambda t: True, manifest=lambda m: m) -> Path:
        src = ROOT / "results/h200" / run
        out = []
        with lzma.open(src / "trials.jsonl.xz", "rt") as f:
            for line in f:
                t = json.loads(line)
                if t.get("role") == "candidate" and t.get("status") == "ok" and pick(t):
                    out.append(plant(t))
                if len(out) == cells:
                    break
        folder = tmp_path / "run"
        folder.mkdir()
        for pruned in src.glob("pruned.jsonl*"):
            shutil.copy(pruned, folder / pruned.name)
        (folder / "trials.jsonl").write_text("".join(json.dumps(t) + "\n" for t in out))
        shipped = json.loads((src / "manifest.json").read_text())
        # not the shipped run's logs: its manifest records the planted ones
        m = manifest({k: v for k, v in shipped.items() if k != "records"})
        (folder / "manifest.json").write_text(json.dumps(with_records(folder, m)))
        return folder

    return make
