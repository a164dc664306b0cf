"""scripts/sweep.sh's exit status, on a CPU: the script run with `python3` standing in for the
machine's (a wheelhouse install, then `python3 -m sweeper ...`), each sweeper command answered
as a run would answer it. 0: verified; 3: the run stopped before it finished (nothing built);
4: the last verify failed, after the plots and the report were built."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# the stand-in python3: pip is a no-op, `-c` is the real interpreter, and `-m sweeper CMD`
# logs CMD and its arguments, then answers: `run` writes the run folder's manifest with
# STUB_STATUS, the k-th `verify` fails where k is in STUB_FAIL, `export --format cuda` writes a
# header whose code is STUB_CODE_<k> for the k-th export (the rebuilt policy's header changes
# when the two differ)
STUB = """#!/usr/bin/env bash
if [ "$1" = -m ] && [ "$2" = pip ]; then exit 0; fi
if [ "$1" = -c ]; then exec {python} "$@"; fi
shift 2
echo "$*" >> "$STUB_LOG"
case "$1" in
  run)
    if [ "$2" = --resume ]; then run=$4; else run=results/synth/$3; fi
    mkdir -p "$run"
    printf '{{"status": "%s"}}' "$STUB_STATUS" > "$run/manifest.json" ;;
  verify)
    k=$(grep -c '^verify' "$STUB_LOG")
    case " $STUB_FAIL " in *" $k "*) echo "verify: 1 size loses"; exit 1 ;; esac ;;
  export)
    if [ "$3" = --format ] && [ "$4" = cuda ]; then
      k=$(grep -c '^export .* --format cuda' "$STUB_LOG")
      var=STUB_CODE_$k
      printf '// header %s\\n%s\\n' "$k" "${{!var:-same}}" > "$6"
    fi ;;
esac
exit 0
"""


def _sweep(tmp_path, status="complete", fail="", codes=("a", "a"), resume=False):
    """Run a copy of scripts/sweep.sh in a folder of its own; (exit status, the sweeper
    commands it ran, its stderr)."""
    tree = tmp_path / "tree"
    (tree / "scripts").mkdir(parents=True)
    for name in ("sweep.sh", "wheelhouse.sh"):
        shutil.copy(ROOT / "scripts" / name, tree / "scripts" / name)
    (tree / ".whl").mkdir()
    (tree / ".whl" / "stub-0-py3-none-any.whl").write_bytes(b"")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "python3"
    stub.write_text(STUB.format(python=sys.executable))
    stub.chmod(0o755)
    (tmp_path / "site").mkdir()  # what the wheelhouse's pip install would have made
    log = tmp_path / "sweeper.log"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "STUB_LOG": str(log),
        "STUB_STATUS": status,
        "STUB_FAIL": fail,
        "STUB_CODE_1": codes[0],
        "STUB_CODE_2": codes[1],
        "SWEEPER_SITE": str(tmp_path / "site"),
        "RUN_ID": "x",
    }
    if resume:
        (tree / "results" / "synth" / "x").mkdir(parents=True)
        env["RESUME"] = "results/synth/x"
    p = subprocess.run(["bash", str(tree / "scripts" / "sweep.sh"), "--time-limit", "5"],
                       cwd=tree, env=env, capture_output=True, text=True)  # fmt: skip
    cmds = [line.split()[0] for line in log.read_text().splitlines()] if log.exists() else []
    return p.returncode, cmds, p.stderr


STEPS = ["run", "select", "policy", "export", "export", "verify", "policy", "export", "export"]


@pytest.fixture(autouse=True)
def _bash():
    if shutil.which("bash") is None:
        pytest.skip("no bash")


def test_a_verified_run_exits_0_and_builds_everything(tmp_path):
    rc, cmds, _ = _sweep(tmp_path)
    assert rc == 0
    assert cmds == [*STEPS, "plot", "report"]  # the same header: one verify


def test_a_run_stopped_by_its_time_limit_exits_3_and_builds_nothing(tmp_path):
    rc, cmds, err = _sweep(tmp_path, status="stopped")
    assert rc == 3 and cmds == ["run"]
    assert "continue it with RESUME=results/synth/x ./scripts/sweep.sh" in err


def test_a_failed_verify_exits_4_after_the_plots_and_the_report(tmp_path):
    rc, cmds, err = _sweep(tmp_path, fail="1")
    assert rc == 4
    assert cmds == [*STEPS, "plot", "report"]
    assert "results/synth/x: verify failed (status 1); the report says where" in err


def test_the_last_verify_decides_where_the_rebuilt_header_changed(tmp_path):
    rc, cmds, _ = _sweep(tmp_path, fail="1", codes=("a", "b"))
    assert rc == 0 and cmds == [*STEPS, "verify", "plot", "report"]
    rc, cmds, _ = _sweep(tmp_path / "both", fail="1 2", codes=("a", "b"))
    assert rc == 4 and cmds == [*STEPS, "verify", "plot", "report"]


def test_a_verified_policy_is_kept_where_the_rebuilt_one_fails_its_verify(tmp_path):
    """The first verify passed, the rebuilt policy's failed: the first policy's files and the
    manifest as they were after its verify are put back, before the plots and the report, and
    the job exits 0."""
    rc, cmds, err = _sweep(tmp_path, fail="2", codes=("a", "b"))
    assert rc == 0 and cmds == [*STEPS, "verify", "plot", "report"]
    assert "the policy at the default tolerance, which passed its own, is kept" in err
    run = tmp_path / "tree" / "results" / "synth" / "x"
    assert (run / "relu_policy.cuh").read_text() == "// header 1\na\n"
    assert sorted(p.name for p in run.iterdir()) == ["manifest.json", "relu_policy.cuh"]


def test_a_resumed_run_takes_the_same_steps(tmp_path):
    rc, cmds, _ = _sweep(tmp_path, fail="1", resume=True)
    assert rc == 4 and cmds == [*STEPS, "plot", "report"]
