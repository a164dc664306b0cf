"""An audit times the shipped policy's dispatch beside the user's kernel (sweeper.run.dispatch):
which policy `--policy auto` takes, what is refused, and the cliff against it, on a model GPU."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from sweeper_kernels import external as ex
from typer.testing import CliRunner

from sweeper import api
from sweeper.analyze.store import with_records
from sweeper.cli import app
from sweeper.errors import SweeperError
from sweeper.plan.gpus import lookup
from sweeper.run import dispatch as dp
from sweeper.run.replay import ModelExecutor
from sweeper.units import MiB

ROOT = Path(__file__).resolve().parents[2]
V2 = str(ROOT / "examples" / "relu_v2.cu")
SHIPPED = ROOT / "results"
L2 = lookup("h200").l2_bytes


def test_auto_takes_each_modes_newest_verified_policy_per_dtype():
    got = dp.shipped_policies(SHIPPED, "h200", ["hot", "after-write", "cold"])
    # one verified policy per mode, each covering the four dtypes
    assert [p.parent.name for p in got] == ["hot-7", "aw-4", "cold-6"]
    fp32 = dp.shipped_policies(SHIPPED, "h200", ["hot", "after-write"], ["fp32"])
    assert [p.parent.name for p in fp32] == ["hot-7", "aw-4"]
    fp16 = dp.shipped_policies(SHIPPED, "h200", ["after-write"], ["fp16"])
    assert [p.parent.name for p in fp16] == ["aw-4"]
    d = dp.load_dispatch(got[0])
    assert (d.config, d.mode, d.dtypes) == ("policy-hot-7", "hot", ("bf16", "fp16", "fp32", "int8"))
    v = d.variant("fp16")
    assert v.mode == "hot" and v.id.startswith("fp16-policy-hot-7-") and len(v.id) == 26
    assert [p.parent.name for p in dp.shipped_policies(SHIPPED, "h200", ["cold"])] == ["cold-6"]
    assert dp.shipped_policies(SHIPPED, "4090", ["hot"]) == []


@pytest.mark.parametrize("newer", ["a", "b"])
def test_auto_takes_the_verified_policy_whose_run_finished_last(tmp_path, newer):
    """Two verified folders with one hot policy (hot-7's): `auto` takes the one whose run
    finished later (the manifest's `finished`), whichever folder sorts first."""
    for name in ("a", "b"):
        folder = tmp_path / "h200" / name
        folder.mkdir(parents=True)
        for f in ("policy.json", "relu_policy.cuh", "verify.txt", "pruned.jsonl.xz"):
            shutil.copy(SHIPPED / "h200" / "hot-7" / f, folder / f)
        manifest = json.loads((SHIPPED / "h200" / "hot-7" / "manifest.json").read_text())
        manifest["finished"] = "2026-12-02T00:00:00Z" if name == newer else "2026-12-01T00:00:00Z"
        derived = manifest.pop("records")["derived"]  # its records made again for the edits
        manifest = with_records(folder, manifest)
        manifest["records"]["derived"] = {"policy.json": derived["policy.json"]}
        (folder / "manifest.json").write_text(json.dumps(manifest))
    got = dp.shipped_policies(tmp_path, "h200", ["hot"])
    assert [p.parent.name for p in got] == [newer]


def test_a_header_that_is_not_the_policys_export_is_refused(tmp_path):
    folder = tmp_path / "h200" / "p"
    shutil.copytree(
        SHIPPED / "h200" / "aw-4",
        folder,
        ignore=shutil.ignore_patterns("trials.*", "*.csv", "plots"),
    )
    header = folder / "relu_policy.cuh"
    header.write_text(header.read_text().replace("v16", "v8", 1))
    with pytest.raises(SweeperError, match=r"relu_policy.cuh is not the export of .*policy.json"):
        dp.load_dispatch(folder / "policy.json")
    header.unlink()
    with pytest.raises(SweeperError, match=r"relu_policy.cuh: missing; `sweeper export"):
        dp.load_dispatch(folder)
    with pytest.raises(SweeperError, match=r"--policy nowhere.json: no such policy file"):
        dp.load_dispatch("nowhere.json")


def test_a_bad_policy_is_refused_in_one_line_before_anything_is_written(tmp_path):
    res = CliRunner().invoke(
        app,
        ["audit", f"{V2}:relu_v2", "--plan", str(ROOT / "sweeps" / "h200.json"),
         "--policy", str(tmp_path / "none.json"), "--root", str(tmp_path / "res")],
    )  # fmt: skip
    assert res.exit_code == 1
    assert res.output == f"error: --policy {tmp_path / 'none.json'}: no such policy file\n"
    assert not (tmp_path / "res").exists()


def test_run_takes_a_policy_too_and_refuses_a_bad_one_before_anything_is_written(tmp_path):
    res = CliRunner().invoke(
        app,
        ["run", str(ROOT / "sweeps" / "h200.json"), "--policy", str(tmp_path / "none.json"),
         "--root", str(tmp_path / "res"), "--run-id", "r"],
    )  # fmt: skip
    assert res.exit_code == 1
    assert res.output.strip() == f"error: --policy {tmp_path / 'none.json'}: no such policy file"
    assert not (tmp_path / "res").exists()


class ModelWithPolicy(ModelExecutor):
    """A model GPU timing a user's kernel and a policy's dispatch, described as GpuExecutor
    describes them."""

    def __init__(self, kernel, dispatch, *, curve, policy_curve, **kw):
        super().__init__({kernel.config: curve, dispatch.config: policy_curve}, **kw)
        self.kernel, self.dispatch = kernel, dispatch

    def describe(self) -> dict:
        doc = super().describe()
        doc["device"].update(sm_count=132, max_threads_per_sm=2048)
        return {**doc, "external": [self.kernel.describe()], "kernel_source": "f" * 64,
                "dispatch": [self.dispatch.describe()]}  # fmt: skip

    def variants(self, grid, dtype):
        out = [self.kernel.variant(dtype)]
        return out + ([self.dispatch.variant(dtype)] if dtype in self.dispatch.dtypes else [])


def _audit(tmp_path, modes):
    plan = api.plan("h200", out=str(tmp_path / "plan.json"), dtypes="fp32,fp16")
    # aw-4's after-write policy, as a policy that covers fp32 alone
    d = replace(dp.load_dispatch(SHIPPED / "h200" / "aw-4"), dtypes=("fp32",))
    model = ModelWithPolicy(
        ex.load_kernel(f"{V2}:relu_v2"), d,
        curve=lambda ws, l2: 3000.0 if 32 * MiB < ws <= l2 else 5000.0,
        policy_curve=lambda ws, l2: 4000.0, l2_bytes=L2, baseline=lambda ws, l2: 4000.0,
        copy=lambda ws, l2: 5500.0, noise=0.0,
    )  # fmt: skip
    run_dir, lines = api.audit(f"{V2}:relu_v2", str(plan.path), executor=model,
                               out_root=str(tmp_path / "res"), run_id="a", modes=modes,
                               policy="none")  # fmt: skip
    return run_dir, lines, model


def test_the_cliff_compares_the_kernel_with_the_policy_timed_in_its_own_mode(tmp_path):
    run_dir, lines, model = _audit(tmp_path, ["hot", "after-write"])
    timed = {(c[0], c[1], c[3]) for c in model.calls}
    # the after-write fp32 policy is timed after-write, fp32 only; the kernel everywhere
    assert {t for t in timed if t[2] == "policy-aw-4"} == {("after-write", "fp32", "policy-aw-4")}
    assert {(m, d) for m, d, c in timed if c.startswith("ext-")} == {
        (m, d) for m in ("hot", "after-write") for d in ("fp32", "fp16")
    }
    i = lines.index(
        next(x for x in lines if x.startswith("ext-relu_v2-b256-stride1 fp32 after-write"))
    )
    vs = lines[i + 2]  # after the head line and the runs below torch
    assert vs.startswith(
        "  vs policy-aw-4 (that policy's dispatch, timed in this run): worst 0.750x at "
    )
    assert "in (32 MiB, 60 MiB]; worst overall 0.750x" in vs
    assert (
        lines[i + 3].startswith("    below policy-aw-4 at 32.")
        and "(down to 0.750x)" in lines[i + 3]
    )
    assert not any("vs policy" in x for x in lines if " hot " in x or " fp16 " in x)
    report = (run_dir / "REPORT.md").read_text()
    assert vs in report
    # an audit's verdict is the kernel's, from the cliff: no policy or target applies
    assert (
        "**Verdict: below torch.** Your kernel falls below torch in 4 of 4 mode-dtype pairs, "
        "down to 0.750x (" in report
    )
    assert "Targets:" not in report.split("## Environment")[0]
    assert "Not built yet" not in report
    sel = pd.read_csv(run_dir / "selection.csv")
    assert "policy-aw-4" in set(sel["config"])  # fastest outside the band


def test_a_policys_dispatch_is_never_a_policy_and_its_header_hash_is_checked(tmp_path):
    run_dir, _, _ = _audit(tmp_path, ["after-write"])
    res = CliRunner().invoke(app, ["policy", "build", str(run_dir)])
    assert res.exit_code == 1 and "no ok candidate rows" in res.output
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["dispatch"][0]["header_sha256"] = "0" * 64
    del manifest["records"]  # and its records made again for the edited fields
    (run_dir / "manifest.json").write_text(json.dumps(with_records(run_dir, manifest)))
    res = CliRunner().invoke(app, ["select", str(run_dir)])
    assert res.exit_code == 1
    assert res.output.startswith(
        f"error: {run_dir / 'manifest.json'}: field 'dispatch': 000000000000... is not the "
        "kernel source fp32-policy-aw-4-"
    )


def test_an_audit_draws_the_cliff_of_the_kernel_beside_the_policy(tmp_path):
    from sweeper.analyze.store import load_run
    from sweeper.report.plots import RunInfo, cliff_figure, render_plots

    run_dir, _, _ = _audit(tmp_path, ["hot", "after-write"])
    paths = [p.name for p in render_plots(run_dir, formats=("png",))]
    assert sorted(paths[:2]) == ["cliff_after-write.png", "cliff_hot.png"]
    # best-per-size figures would mix the kernel and the policy: an audit draws the cliff
    assert not [p for p in paths if p.startswith(("ratio_", "modes"))]
    run = load_run(run_dir)
    info = RunInfo.from_manifest(run.manifest)
    assert info.users == ("ext-relu_v2-b256-stride1",) and info.policies == ("policy-aw-4",)
    res = run.results
    fig = cliff_figure(res[res["mode"] == "after-write"], info, "after-write")
    fp32, fp16 = fig.axes[:2]
    gids = lambda ax: {ln.get_gid() for ln in ax.get_lines()}  # noqa: E731
    assert {"policy-policy-aw-4", "below-ext-relu_v2-b256-stride1", "parity"} <= gids(fp32)
    assert "policy-policy-aw-4" not in gids(fp16)  # the policy covers fp32 only
    below = next(ln for ln in fp32.get_lines() if (ln.get_gid() or "").startswith("below-"))
    xs = [int(x) for x in below.get_xdata()]
    assert xs and all(32 * MiB < x <= L2 for x in xs)  # 0.75x of torch only in the band
