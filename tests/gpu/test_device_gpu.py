"""`sweeper --device N` on a GPU machine: device 0 is read as usual; an index past the
visible devices is one line and exit 1, with nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def _sweeper(*args, cwd):
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    return subprocess.run(
        [sys.executable, "-m", "sweeper", *args], cwd=cwd, env=env, capture_output=True, text=True
    )


def test_device_0_plans_for_the_device_and_a_missing_index_is_refused(tmp_path):
    from numba import cuda

    count = len(cuda.gpus)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ok = _sweeper("--device", "0", "plan", "--gpu", "auto", "--out", str(tmp_path / "a.json"),
                  cwd=repo)  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    plan = json.loads((tmp_path / "a.json").read_text())
    assert plan["spec"]["sm_count"] == cuda.get_current_device().MULTIPROCESSOR_COUNT
    bad = _sweeper("--device", str(count), "plan", "--gpu", "auto", "--out",
                   str(tmp_path / "b.json"), cwd=repo)  # fmt: skip
    assert bad.returncode == 1
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), bad.stderr
    assert not (tmp_path / "b.json").exists()
