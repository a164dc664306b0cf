"""`sweeper gpus` and `sweeper plan` through typer's CliRunner (no GPU)."""

from __future__ import annotations

import datetime
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweeper import __version__
from sweeper.cli import app
from sweeper.plan import gpus
from sweeper.plan import planfile as P

runner = CliRunner()


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
    out = tmp_path / "3090.json"
    r = subprocess.run(
        [sys.executable, "-m", "sweeper", "plan", "--gpu", "3090", "--out", str(out)],
        cwd=root, capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert P.load_plan(out).gpu == "3090"
    r = subprocess.run(
        [sys.executable, "-m", "sweeper", "plan", "--gpu", "nope"],
        cwd=root, capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 1
    assert r.stderr.startswith("error: unknown GPU 'nope'") and "Traceback" not in r.stderr


# ---- sweeper gpus ---------------------------------------------------------------------------

MiB = 1 << 20


def _lines(r) -> list[str]:
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    too_wide = [ln for ln in lines if len(ln) > 80]
    assert not too_wide, too_wide
    return lines


def r_text(lines: list[str]) -> str:
    return "\n".join(lines)


def test_gpus_table_fits_80_columns_with_empty_cells_for_unknowns():
    lines = _lines(runner.invoke(app, ["gpus"]))
    assert lines[0].split() == ["key", "name", "cc", "SMs", "L2", "MiB", "DRAM", "GB/s"]
    body = lines[1 : lines.index("")]
    rows = {ln.split()[0]: ln.split() for ln in body}
    assert set(rows) == {s.key for s in gpus.SPECS}
    assert rows["4090"][-4:] == ["8.9", "128", "72", "1008"]
    assert rows["h200"][-4:] == ["9.0", "132", "60", "4800"]
    assert rows["l4"] == ["l4", "NVIDIA", "L4", "8.9", "300"]  # SMs and L2 cells empty
    assert rows["b200"] == ["b200", "NVIDIA", "B200", "10.0"]
    assert "sweeper gpus --sources" in r_text(lines)


def test_gpus_sources_cites_every_value():
    text = r_text(_lines(runner.invoke(app, ["gpus", "--sources"])))
    for want in ("75497472", "62914560", "39321600", "results/h200/hot-7/manifest.json",
                 "NVIDIA Ada GPU Architecture whitepaper", "NVIDIA H100 Tensor Core GPU",
                 "l4: NVIDIA L4", "  l2_bytes: unknown (no primary source gives it)"):  # fmt: skip
        assert want in text, want
    one = r_text(_lines(runner.invoke(app, ["gpus", "rtx 4090", "--sources"])))
    assert one.startswith("4090: NVIDIA GeForce RTX 4090") and "h200" not in one


def test_gpus_shows_a_spec_file(tmp_path):
    (tmp_path / "lab.toml").write_text(LAB)
    text = r_text(_lines(runner.invoke(app, ["gpus", str(tmp_path / "lab.toml"), "--sources"])))
    assert "lab-gpu: Lab GPU" in text and "Lab GPU datasheet: L2 48 MB" in text
    assert "spec file lab.toml" in text  # fields given without a citation


def test_gpus_refuses_a_cut_spec_file_as_plan_does(tmp_path):
    cut = tmp_path / "cut.toml"
    cut.write_text('key = "mygpu"\nname = "My GPU"\n')
    before = cut.read_bytes()
    line = _one_error_line(runner.invoke(app, ["gpus", str(cut)]))
    assert line.startswith(f"error: spec file {cut}: l2_bytes, memory_bytes, sm_count, cc, ")
    assert "so no plan can be made" in line and cut.read_bytes() == before


def test_gpus_unknown_is_one_line():
    line = _one_error_line(runner.invoke(app, ["gpus", "voodoo3"]))
    assert "voodoo3" in line


# ---- plans from spec files ------------------------------------------------------------------

LAB = """\
key = "lab-gpu"
name = "Lab GPU"
cc = [8, 9]
sm_count = 60
l2_bytes = 50331648
persisting_l2_max_bytes = 31457280
dram_type = "GDDR6"
dram_peak_gbps = 300.0
memory_bytes = 25769803776

[sources]
l2_bytes = "Lab GPU datasheet: L2 48 MB"
"""


def test_plan_from_a_spec_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lab.toml").write_text(LAB)
    r = runner.invoke(app, ["plan", "--gpu", "lab.toml", "--dtypes", "fp32,int8"])
    assert r.exit_code == 0, r.output
    assert "wrote sweeps/lab-gpu.json" in r.output
    p = P.load_plan(tmp_path / "sweeps" / "lab-gpu.json")
    l2 = 48 * MiB
    assert p.spec == {
        "key": "lab-gpu", "name": "Lab GPU", "l2_bytes": l2, "persisting_l2_max_bytes": 31457280,
        "memory_bytes": 24 << 30, "sm_count": 60, "cc": [8, 9], "dram_peak_gbps": 300.0,
    }  # fmt: skip
    for d in p.dtypes:
        dense = [e["working_set_bytes"] for e in p.sizes(d) if e["region"] == "dense"]
        assert (min(dense), max(dense)) == (l2 // 4, 2 * l2)  # the band is the file's L2
        assert max(b - a for a, b in zip(dense, dense[1:], strict=False)) <= l2 // 32
        at = {a: e["working_set_bytes"] for e in p.sizes(d) for a in e["anchors"]}
        assert at["L2"] == l2 and at["persist-max"] == 31457280


def test_spec_file_of_a_table_row_gives_the_same_plan(tmp_path):
    root = Path(__file__).resolve().parents[2]
    spec_path = gpus.write_spec_file(gpus.lookup("4090"), tmp_path / "mine.toml")
    out = tmp_path / "p.json"
    r = runner.invoke(app, ["plan", "--gpu", str(spec_path), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert out.read_bytes() == (root / "sweeps" / "4090.json").read_bytes()


@pytest.mark.parametrize("key", ["h200", "4090"])
def test_committed_plans_regenerate_byte_identically(tmp_path, key):
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / f"{key}.json"
    r = runner.invoke(app, ["plan", "--gpu", key, "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert out.read_bytes() == (root / "sweeps" / f"{key}.json").read_bytes()


@pytest.mark.parametrize(
    "edit, words",
    [
        (("l2_bytes = 50331648\n", ""), "l2_bytes is unknown (not given)"),
        (
            ("l2_bytes = 50331648", "l2_bytes = -50331648"),
            "field 'l2_bytes': must be a positive integer",
        ),
        (("sm_count = 60", 'sm_count = "60"'), "field 'sm_count': expected a positive integer"),
        (("cc = [8, 9]", "cc = [8, 9, 0]"), "field 'cc': expected [major, minor]"),
        (("dram_type", "dram_kind"), "field 'dram_kind': unknown field"),
        (("key = ", "key == "), "not valid TOML"),
    ],
)
def test_bad_spec_file_is_one_line_and_writes_nothing(tmp_path, monkeypatch, edit, words):
    monkeypatch.chdir(tmp_path)
    text = LAB.replace(*edit)
    if edit[0].startswith("l2_bytes = 5") and not edit[1]:
        text = text.replace('l2_bytes = "Lab GPU datasheet: L2 48 MB"\n', "")
    assert text != LAB
    (tmp_path / "lab.toml").write_text(text)
    line = _one_error_line(runner.invoke(app, ["plan", "--gpu", "lab.toml"]))
    assert "lab.toml" in line and words in line, line
    assert not (tmp_path / "sweeps").exists()


def test_missing_spec_file_is_one_line(tmp_path):
    line = _one_error_line(
        runner.invoke(app, ["plan", "--gpu", str(tmp_path / "x.toml"), "--out", str(tmp_path)])
    )
    assert "x.toml" in line and "not found" in line


def test_table_row_with_unknown_field_refuses_in_one_line(tmp_path):
    out = tmp_path / "l4.json"
    line = _one_error_line(runner.invoke(app, ["plan", "--gpu", "l4", "--out", str(out)]))
    assert "'l4'" in line and "l2_bytes, sm_count are unknown" in line
    assert "sweeper plan --gpu auto" in line and "spec file" in line
    assert not out.exists()


# ---- --gpu auto --save-spec (the device is faked: no GPU here) -------------------------------


def fake_device(monkeypatch, sms=58, name="NVIDIA L4"):
    info = gpus.DeviceInfo(
        name=name, cc=(8, 9), sm_count=sms, l2_bytes=48 * MiB, persisting_l2_max_bytes=0,
        memory_bytes=23034 * MiB, driver_version=13000, mem_bus_width_bits=192,
        mem_clock_khz=6251000,
    )  # fmt: skip
    monkeypatch.setattr(gpus, "detect", lambda ordinal=0: info)
    return info


def test_save_spec_writes_a_spec_file_that_plans_the_same(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fake_device(monkeypatch)
    r = runner.invoke(app, ["plan", "--gpu", "auto", "--save-spec", "l4.toml", "--out", "a.json"])
    assert r.exit_code == 0, r.output
    assert "wrote the device's spec to l4.toml" in r.output
    saved = gpus.load_spec_file(tmp_path / "l4.toml")
    assert (saved.key, saved.l2_bytes, saved.sm_count) == ("l4", 48 * MiB, 58)
    assert saved.persisting_l2_max_bytes is None  # the device reported none
    today = datetime.date.today().isoformat()
    for n in ("cc", "sm_count", "l2_bytes", "memory_bytes"):
        assert saved.sources[n] == f"device query recorded by sweeper {__version__} on {today}"
    assert saved.sources["dram_peak_gbps"].startswith("NVIDIA L4 Tensor Core GPU datasheet")
    # another machine plans from the file alone
    monkeypatch.setattr(gpus, "detect", None)
    r = runner.invoke(app, ["plan", "--gpu", "l4.toml", "--out", "b.json"])
    assert r.exit_code == 0, r.output
    a, b = P.load_plan(tmp_path / "a.json"), P.load_plan(tmp_path / "b.json")
    assert a.spec == b.spec and a.entries == b.entries


def test_save_spec_keeps_the_same_and_refuses_a_different_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fake_device(monkeypatch)
    args = ["plan", "--gpu", "auto", "--save-spec", "l4.toml"]
    assert runner.invoke(app, [*args, "--out", "a.json"]).exit_code == 0
    before = (tmp_path / "l4.toml").read_bytes()
    r = runner.invoke(app, [*args, "--out", "a.json"])
    assert r.exit_code == 0 and "left as it is" in r.output
    fake_device(monkeypatch, sms=60)  # another card under the same file name
    line = _one_error_line(runner.invoke(app, [*args, "--out", "c.json"]))
    assert "l4.toml" in line and "different GPU spec" in line
    assert (tmp_path / "l4.toml").read_bytes() == before
    assert not (tmp_path / "c.json").exists()


def test_save_spec_needs_auto_and_a_toml_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fake_device(monkeypatch)
    line = _one_error_line(runner.invoke(app, ["plan", "--gpu", "4090", "--save-spec", "x.toml"]))
    assert "--save-spec needs --gpu auto" in line
    line = _one_error_line(runner.invoke(app, ["plan", "--gpu", "auto", "--save-spec", "x.json"]))
    assert "must end in .toml" in line
    assert list(tmp_path.iterdir()) == []
