"""Fingerprint what sweeper computes, to show that a change of code layout changed no behaviour.

    python tools/behaviour_snapshot.py OUT.json [--run results/h200/hot-7] [--grid default]

Records, each as a sha256:
  * the plan file sweeps/h200.json, its plan hash, and the plans `sweeper plan` writes now;
  * the PTX of every compile key of the grid (kernel names and the kernel-source fingerprint
    in them normalised away: they name code, they are not code);
  * the selection and policy rebuilt from the run's trials (`sweeper select`, `policy build`
    on a copy of the run folder), byte for byte;
  * the CUDA header exported from that policy, with comments and whitespace removed, and the
    PTX nvcc makes of it (when nvcc is found: SWEEPER_NVCC, else PATH).
Two snapshots from two commits are compared with `diff` or `python -m json.tool`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


def sha(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def normalise_ptx(text: str, fingerprint: str = "") -> str:
    """PTX without comment lines, with the parts of kernel names that are not code replaced:
    the kernel-source fingerprint and Numba's per-process function counter (`B3v84`)."""
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("//")]
    text = re.sub(r"(relu(?:_flat)?_kernel)B\d+v\d+", r"\1Bv", "\n".join(lines))
    return text.replace(fingerprint[:12], "FP") if fingerprint else text


def _ptx_one(key):
    from sweeper_kernels.build import ptx
    from sweeper_kernels.source import source_fingerprint

    return key.slug, sha(normalise_ptx(ptx(key, (9, 0)), source_fingerprint()))


def ptx_hashes(grid: str) -> dict[str, str]:
    from sweeper_kernels import compile_keys, get_grid

    keys = compile_keys(get_grid(grid))
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return dict(sorted(pool.map(_ptx_one, keys, chunksize=4)))


def strip_cxx(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"\s+", "", text)


def sweeper(*args: str, cwd: Path | None = None) -> None:
    subprocess.run(
        [sys.executable, "-m", "sweeper", *args], check=True, cwd=cwd, stdout=subprocess.DEVNULL
    )


def run_hashes(run: Path, work: Path) -> dict[str, str]:
    copy = work / run.name
    shutil.copytree(run, copy)
    for name in ("selection.csv", "selection.md", "policy.json", "relu_policy.cuh"):
        (copy / name).unlink(missing_ok=True)
    sweeper("select", str(copy))
    sweeper("policy", "build", str(copy))
    header = work / "relu_policy.cuh"
    sweeper("export", str(copy / "policy.json"), "--format", "cuda", "-o", str(header))
    out = {
        "selection.csv": sha((copy / "selection.csv").read_bytes()),
        "policy.json": sha((copy / "policy.json").read_bytes()),
        "relu_policy.cuh (no comments, no whitespace)": sha(strip_cxx(header.read_text())),
    }
    nvcc = os.environ.get("SWEEPER_NVCC") or shutil.which("nvcc")
    if nvcc:
        (work / "use.cu").write_text('#include "relu_policy.cuh"\n')
        subprocess.run(
            [nvcc, "-std=c++17", "-arch=sm_90", "-ptx", "use.cu", "-o", "use.ptx"],
            check=True,
            cwd=work,
        )
        out["relu_policy.cuh PTX (sm_90)"] = sha(normalise_ptx((work / "use.ptx").read_text()))
    else:
        out["relu_policy.cuh PTX (sm_90)"] = "not checked: no nvcc"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--run", default="results/h200/hot-7")
    ap.add_argument("--grid", default="default")
    a = ap.parse_args()
    plan = Path("sweeps/h200.json")
    snap: dict = {
        "plan file": sha(plan.read_bytes()),
        "plan_hash": json.loads(plan.read_text()).get("plan_hash"),
    }
    with tempfile.TemporaryDirectory() as tmp:
        for gpu in ("h200", "4090"):
            out = Path(tmp) / f"{gpu}.json"
            sweeper("plan", "--gpu", gpu, "--out", str(out))
            snap[f"sweeper plan --gpu {gpu}"] = sha(out.read_bytes())
        snap["run " + a.run] = run_hashes(Path(a.run), Path(tmp))
    snap[f"PTX ({a.grid} grid, sm_90)"] = ptx_hashes(a.grid)
    Path(a.out).write_text(json.dumps(snap, indent=1, sort_keys=True) + "\n")
    print(f"{a.out}: {len(snap[f'PTX ({a.grid} grid, sm_90)'])} compile keys")


if __name__ == "__main__":
    main()
