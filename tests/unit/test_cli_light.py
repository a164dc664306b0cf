"""The light install (no `cuda` extra) reads results: the reading commands import no numba
and no CUDA bindings, and the commands that measure or compile say, in one line, which extra
they need. Each command runs in a subprocess whose import system refuses numba, numba_cuda
and cuda, as on a machine where they are not installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

BLOCK = """
import importlib.abc, runpy, sys

class NoCuda(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("numba", "numba_cuda", "cuda"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoCuda())
sys.argv = ["sweeper", *sys.argv[1:]]
try:
    runpy.run_module("sweeper", run_name="__main__")
finally:
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("numba", "numba_cuda", "cuda"))
    print("LOADED:", ",".join(loaded), file=sys.stderr)
"""


def sweeper(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (*sys.path, env.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [sys.executable, "-c", BLOCK, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def run_copy(tmp_path_factory, cut_hot7):
    """hot-7's fp32 part as a run of its own, without figures: `report` draws them."""
    base = tmp_path_factory.mktemp("light")
    return base, cut_hot7(base / "results", "fp32")


READING = [
    ("gpus",),
    ("plan", "--gpu", "h200", "-o", "plan.json"),
    ("policy", "show", "{run}/policy.json"),
    ("export", "{run}/policy.json", "--format", "python", "-o", "policy.py"),
    ("export", "{run}/policy.json", "-o", "policy.cuh"),
    ("select", "{run}"),
    ("report", "{run}"),
    ("gpu-work", "{run}"),
    ("compare", "{run}", "{run}"),
    ("kernels", "list", "--dtypes", "fp32"),
]


@pytest.mark.parametrize("argv", READING, ids=lambda a: " ".join(a[:2]))
def test_reading_commands_work_without_numba(run_copy, argv):
    base, run = run_copy
    res = sweeper(base, *(a.format(run=run) for a in argv))
    assert res.returncode == 0, res.stderr[-2000:]
    assert "LOADED: \n" in res.stderr, res.stderr[-500:]  # nothing of numba or cuda loaded


NEEDS_CUDA = [
    (("run", "--plan", "plan.json"), "sweeper run"),
    (("audit", "k.cu:k"), "sweeper audit"),
    (("verify", "{run}/policy.json"), "sweeper verify"),
    (("kernels", "ptx", "fp32-v16-u1-ld.def-st.cs-b256-flat-9b4d2ea0"), "sweeper kernels ptx"),
    (("kernels", "check", "k.cu:k"), "sweeper kernels check"),
]


@pytest.mark.parametrize("argv, command", NEEDS_CUDA, ids=lambda a: str(a))
def test_commands_that_measure_name_the_cuda_extra(run_copy, argv, command):
    base, run = run_copy
    res = sweeper(base, *(a.format(run=run) for a in argv))
    assert res.returncode == 1, res.stderr[-2000:]
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: {command} needs the cuda extra: pip install 'relu-sweeper[cuda]' "
        "(numba is missing)"
    ], res.stderr[-2000:]
