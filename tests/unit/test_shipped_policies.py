"""The shipped policies are what today's code builds from their run folders: the same bands,
configs and provenance, and the exported header and Python module byte-identical.

Each policy is rebuilt as its own provenance records it (the tie tolerance per range of working
set, the mode, floors or not), from a copy of its run folder. Floats are compared to 1e-12
relative: the last digit of a mean (`mean_frac_of_best`) depends on the pandas release that
summed it, and nothing the export writes is read from it."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from sweeper import api

ROOT = Path(__file__).parents[2]
SHIPPED = ("hot-7", "aw-4", "cold-6")


def _same(a, b, where="policy") -> list[str]:
    """Where two JSON documents differ, floats to 1e-12 relative."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{where}: keys {sorted(a.keys() ^ b.keys())}"]
        return [d for k in a for d in _same(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} against {len(b)} items"]
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in _same(x, y, f"{where}[{i}]")
        ]
    if isinstance(a, float) and isinstance(b, float):
        return [] if math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0) else [f"{where}: {a} != {b}"]
    return [] if a == b and type(a) is type(b) else [f"{where}: {a!r} != {b!r}"]


@pytest.mark.parametrize("run", SHIPPED)
def test_a_shipped_policy_rebuilds_from_its_run(run, tmp_path, monkeypatch):
    src = ROOT / "results" / "h200" / run
    d = tmp_path / "results" / "h200" / run
    shutil.copytree(src, d)
    shipped = json.loads((src / "policy.json").read_text())
    prov = shipped["provenance"]
    tolerance = [(r["hi_bytes"], r["tolerance"]) for r in prov["tolerance_by_range"]]
    (d / "policy.json").unlink()
    api.policy_build(str(d), tolerance=tolerance, mode=prov["mode"], floors="floors" in prov)
    rebuilt = json.loads((d / "policy.json").read_text())
    rebuilt["provenance"]["plan_path"] = prov["plan_path"]  # the copy's own path
    assert _same(rebuilt, shipped) == []
    monkeypatch.chdir(tmp_path)  # the header names its policy by the path it was given
    for fmt, name in (("cuda", "relu_policy.cuh"), ("python", "relu_policy.py")):
        api.export(f"results/h200/{run}/policy.json", fmt, name)
        assert Path(name).read_bytes() == (src / name).read_bytes(), name


def test_the_comparison_sees_a_changed_config():
    doc = json.loads((ROOT / "results/h200/hot-7/policy.json").read_text())
    other = json.loads(json.dumps(doc))
    dtype = next(iter(other["dtypes"]))
    band = other["dtypes"][dtype]["bands"][0] if "bands" in other["dtypes"][dtype] else None
    assert band is not None, sorted(other["dtypes"][dtype])
    band["config"] = "v4-u1-ld.def-st.def-b128-flat"
    assert _same(other, doc) != []
    assert _same(doc, json.loads(json.dumps(doc))) == []
