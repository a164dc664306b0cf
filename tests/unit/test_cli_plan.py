"""`sweeper gpus` and `sweeper plan` through typer's CliRunner (no GPU)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.plan import planfile as P

runner = CliRunner()


def test_gpus_lists_the_table():
    r = runner.invoke(app, ["gpus"])
    assert r.exit_code == 0, r.output
    for key in ("4090", "h200", "a100-80gb", "b200", "75497472", "62914560", "39321600"):
        assert key in r.output


def test_plan_default_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["plan", "--gpu", "4090"])
    assert r.exit_code == 0, r.output
    p = P.load_plan(tmp_path / "sweeps" / "4090.json")
    assert p.dtypes == ("fp32", "fp16", "bf16", "int8")
    assert "wrote sweeps/4090.json" in r.output
    for d in p.dtypes:
        assert d in r.output
    # same plan again: fine without --force
    assert runner.invoke(app, ["plan", "--gpu", "4090"]).exit_code == 0


def test_plan_options(tmp_path):
    out = tmp_path / "h.json"
    r = runner.invoke(
        app, ["plan", "--gpu", "H200", "--out", str(out), "--dtypes", "fp32,fp16",
              "--resolution", "64"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    p = P.load_plan(out)
    assert p.dtypes == ("fp32", "fp16") and p.resolution == 64 and p.gpu == "h200"


def test_plan_refuses_overwrite_without_force(tmp_path):
    out = str(tmp_path / "p.json")
    assert runner.invoke(app, ["plan", "--gpu", "4090", "--out", out]).exit_code == 0
    r = runner.invoke(app, ["plan", "--gpu", "4090", "--out", out, "--resolution", "64"])
    assert r.exit_code == 1
    assert "--force" in r.output
    assert P.load_plan(out).resolution == 32
    r = runner.invoke(app, ["plan", "--gpu", "4090", "--out", out, "--resolution", "64", "--force"])
    assert r.exit_code == 0 and P.load_plan(out).resolution == 64


def _one_error_line(r) -> str:
    assert r.exit_code == 1, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    assert "Traceback" not in r.output
    return lines[0]


def test_unknown_gpu(tmp_path):
    line = _one_error_line(
        runner.invoke(app, ["plan", "--gpu", "voodoo3", "--out", str(tmp_path / "x.json")])
    )
    assert "voodoo3" in line and "4090" in line and "h200" in line
    assert not (tmp_path / "x.json").exists()


def test_bad_resolution(tmp_path):
    for res in ("8", "100000"):
        line = _one_error_line(
            runner.invoke(
                app, ["plan", "--gpu", "4090", "--resolution", res, "--out", str(tmp_path / "x")]
            )
        )
        assert "--resolution" in line


def test_bad_dtype(tmp_path):
    line = _one_error_line(
        runner.invoke(
            app, ["plan", "--gpu", "4090", "--dtypes", "fp32,fp64", "--out", str(tmp_path / "x")]
        )
    )
    assert "fp64" in line and "fp16" in line


def test_auto_without_gpu_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)
    line = _one_error_line(
        runner.invoke(app, ["plan", "--gpu", "auto", "--out", str(tmp_path / "x")])
    )
    assert "--gpu NAME" in line


def test_python_dash_m(tmp_path):
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "l4.json"
    r = subprocess.run(
        [sys.executable, "-m", "sweeper", "plan", "--gpu", "l4", "--out", str(out)],
        cwd=root, capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert P.load_plan(out).gpu == "l4"
    r = subprocess.run(
        [sys.executable, "-m", "sweeper", "plan", "--gpu", "nope"],
        cwd=root, capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 1
    assert r.stderr.startswith("error: unknown GPU 'nope'") and "Traceback" not in r.stderr
