"""Runs the simulator suite (sim_*.py) in its own process; see conftest.py for why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.mark.sim
@pytest.mark.skipif(os.environ.get("SWEEPER_IN_SIM") == "1", reason="already in the sim process")
def test_simulator_suite(tmp_path):
    env = dict(os.environ, SWEEPER_IN_SIM="1", NUMBA_ENABLE_CUDASIM="1")
    env.setdefault("SWEEPER_CACHE", str(tmp_path / "cache"))
    files = sorted(str(p) for p in HERE.glob("sim_*.py"))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "sim", *files]
    res = subprocess.run(cmd, cwd=HERE.parents[1], env=env, capture_output=True, text=True)
    assert res.returncode == 0, (
        f"simulator suite failed:\n{res.stdout[-8000:]}\n{res.stderr[-3000:]}"
    )
    assert " passed" in res.stdout and "failed" not in res.stdout
