"""Fixtures shared by the unit tests."""

from __future__ import annotations

import json
import lzma
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from sweeper.analyze.store import with_records

ROOT = Path(__file__).resolve().parents[2]

# The modules that compile the PTX of the default grid (each key for sm_89 and sm_90, in a
# process pool, into the PTX disk cache) run in one pytest-xdist worker, in file order: the
# grid is compiled once, and test_kernels_ptxas reads the sm_90 half from the cache. Spread
# over the workers, each worker compiled the whole grid for itself.
PTX_MODULES = ("test_kernels_ptx.py", "test_kernels_ptxas.py")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in PTX_MODULES and item.path.parent == ROOT / "tests" / "unit":
            item.add_marker(pytest.mark.xdist_group("ptx"))


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
