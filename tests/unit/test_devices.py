"""`sweeper --device N`: the N-th visible GPU, by narrowing CUDA_VISIBLE_DEVICES before CUDA
starts; an index that is not visible is one line and exit 1."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sweeper.devices import CHOSEN, ENV, use_device
from sweeper.errors import SweeperError


@pytest.mark.parametrize(
    "visible, index, want",
    [(None, 0, "0"), (None, 3, "3"), ("", 1, "1"), ("2,5", 1, "5"), (" 4 , 7 ", 0, "4"),
     ("GPU-abc,GPU-def", 1, "GPU-def")],
)  # fmt: skip
def test_the_index_picks_a_visible_device(visible, index, want):
    env = {} if visible is None else {ENV: visible}
    assert use_device(index, env) == want
    assert env[ENV] == want and env[CHOSEN] == str(index)


def test_an_index_past_the_visible_devices_is_refused_and_changes_nothing():
    env = {ENV: "2,5"}
    with pytest.raises(SweeperError, match=r"--device 2: CUDA_VISIBLE_DEVICES=2,5 makes 2 device"):
        use_device(2, env)
    assert env == {ENV: "2,5"}


def test_the_cli_option_narrows_the_environment_of_the_command():
    """The option reaches the process environment before the command runs (a child process
    with the option prints what a command would see)."""
    code = (
        "import os, sys; from typer.testing import CliRunner; from sweeper.cli import app; "
        "r = CliRunner().invoke(app, ['--device', '1', 'gpus']); "
        "print(r.exit_code, os.environ.get('CUDA_VISIBLE_DEVICES'))"
    )
    env = {k: v for k, v in os.environ.items() if k != ENV}
    env[ENV] = "3,6"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["0", "6"], out.stderr
    env[ENV] = "3"
    bad = subprocess.run(
        [sys.executable, "-m", "sweeper", "--device", "1", "gpus"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines() == [
        "error: --device 1: CUDA_VISIBLE_DEVICES=3 makes 1 device(s) visible (indices 0..0)"
    ]
