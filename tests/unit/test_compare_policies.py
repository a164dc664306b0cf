"""`sweeper compare` on two run folders with policies: the picks compared size by size, a
different pick counted as a tie only within the policy's tie tolerance in both runs' cells."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper.analyze.policy import load_policy, policy_agreement
from sweeper.analyze.store import load_run

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "results" / "h200" / "hot-7"


@pytest.fixture(scope="module")
def shipped():
    return load_policy(RUN / "policy.json"), load_run(RUN).results


def _band_cells(cells, band, dtype="fp32"):
    ok = cells[(cells.role == "candidate") & (cells.status == "ok") & (cells.dtype == dtype)]
    hi = band["hi_bytes"] if band["hi_bytes"] is not None else float("inf")
    return ok[(ok.ws_bytes >= band["lo_bytes"]) & (ok.ws_bytes < hi)]


def test_a_policy_agrees_with_itself_at_every_size(shipped):
    pol, cells = shipped
    for p in policy_agreement(pol, pol, cells, cells):
        assert p["sizes"] > 100 and p["same"] == p["sizes"], p
        assert not p["outside"] and p["tied"] == p["unknown"] == 0


def test_a_slow_pick_is_outside_and_named_by_size(shipped):
    pol, cells = shipped
    band = pol["dtypes"]["fp32"]["bands"][3]
    here = _band_cells(cells, band)
    sizes = sorted(set(here.ws_bytes))
    by = here.pivot_table(index="config", columns="ws_bytes", values="ratio").dropna()
    pick = by.loc[band["config"]]
    slow = (by < 0.8 * pick).all(axis=1)
    assert slow.any(), "the band has a config 20% slower at every size"
    other = copy.deepcopy(pol)
    other["dtypes"]["fp32"]["bands"][3]["config"] = slow[slow].index[0]
    (fp32,) = [p for p in policy_agreement(pol, other, cells, cells) if p["dtype"] == "fp32"]
    assert fp32["outside"] == [int(s) for s in sizes]
    assert fp32["same"] == fp32["sizes"] - len(sizes)


def test_a_different_pick_within_the_tolerance_is_a_tie(shipped):
    pol, cells = shipped
    for k, band in enumerate(pol["dtypes"]["fp32"]["bands"]):  # noqa: B007 - k used below
        by = _band_cells(cells, band).pivot_table(index="config", columns="ws_bytes",
                                                   values="ratio").dropna()  # fmt: skip
        if band["config"] not in by.index:
            continue
        pick = by.loc[band["config"]]
        close = ((by / pick - 1).abs() <= 0.02).all(axis=1) & (by.index != band["config"])
        if close.any():
            break
    else:
        pytest.fail("no fp32 band has another config within 2% of its pick at every size")
    other = copy.deepcopy(pol)
    other["dtypes"]["fp32"]["bands"][k]["config"] = close[close].index[0]
    (fp32,) = [p for p in policy_agreement(pol, other, cells, cells) if p["dtype"] == "fp32"]
    assert fp32["tied"] == by.shape[1] and not fp32["outside"]


def test_the_cli_prints_one_line_per_policy_dtype():
    out = subprocess.run(
        [sys.executable, "-m", "sweeper", "compare", str(RUN), str(RUN)],
        capture_output=True, text=True, cwd=ROOT, check=True,
    ).stdout  # fmt: skip
    lines = [x for x in out.splitlines() if x.startswith("policy ")]
    assert [x.split()[1] for x in lines] == ["bf16", "fp16", "fp32", "int8"]
    assert all("outside at 0" in x for x in lines)


def test_a_size_at_a_band_edge_is_the_upper_bands():
    """A policy serves a band from its lower edge up to, not including, its upper edge: at
    the edge itself the two policies below pick the same config, one byte under it they do
    not (and the two configs are 50% apart, so that is outside any tie)."""
    import pandas as pd

    prov = {"mode": "hot", "tolerance": 0.02}
    split = {"provenance": prov, "dtypes": {"fp32": {"bands": [
        {"lo_bytes": 0, "hi_bytes": 1000, "config": "a"},
        {"lo_bytes": 1000, "hi_bytes": None, "config": "b"}]}}}  # fmt: skip
    whole = {"provenance": prov, "dtypes": {"fp32": {"bands": [
        {"lo_bytes": 0, "hi_bytes": None, "config": "b"}]}}}  # fmt: skip
    cells = pd.DataFrame(
        [
            {
                "role": "candidate",
                "status": "ok",
                "mode": "hot",
                "dtype": "fp32",
                "ws_bytes": ws,
                "config": c,
                "ratio": r,
            }  # fmt: skip
            for ws in (999, 1000, 1001)
            for c, r in (("a", 1.0), ("b", 1.5))
        ]
    )
    (p,) = policy_agreement(split, whole, cells, cells)
    assert (p["sizes"], p["same"], p["outside"], p["unknown"]) == (3, 2, [999], 0)


def _verify_table():
    from sweeper.analyze.verdict import load_verify

    return load_verify(RUN)


def test_the_headline_of_a_run_against_itself_moves_nowhere():
    from sweeper.api import headline_rows

    vt = _verify_table()
    l2 = int(load_run(RUN).manifest["device"]["l2_bytes"])
    rows = headline_rows(vt, vt, l2)
    assert {r["dtype"] for r in rows} == {"fp32", "fp16", "bf16", "int8"}
    assert all(r["a"] == r["b"] and r["move"] == 0 and not r["moved"] for r in rows)
    assert 0 < rows[0]["spread"] < 0.1  # the shipped verify's pass-to-pass p95


def test_a_headline_end_moved_beyond_the_pass_to_pass_spread_is_named():
    from sweeper.api import headline_rows

    vt = _verify_table()
    l2 = int(load_run(RUN).manifest["device"]["l2_bytes"])
    spread = headline_rows(vt, vt, l2)[0]["spread"]
    # fp32's sizes in the third range (36-52 MiB on the H200) read slower by twice the
    # spread in B, every pass
    from sweeper.report.summary import ranges

    lo, hi, label = ranges(l2)[2]
    sel = (vt["dtype"] == "fp32") & (vt["ws_bytes"] >= lo) & (vt["ws_bytes"] < hi)
    assert sel.any()
    slow = vt.copy()
    slow.loc[sel, "ratio"] = slow.loc[sel, "ratio"] / (1 + 2 * spread)
    moved = [r for r in headline_rows(vt, slow, l2) if r["moved"]]
    assert [(r["dtype"], r["range"]) for r in moved] == [("fp32", label)]
    assert moved[0]["move"] == pytest.approx(2 * spread / (1 + 2 * spread), rel=1e-9)
    # within the spread: not moved
    near = vt.copy()
    near.loc[sel, "ratio"] = near.loc[sel, "ratio"] * (1 + 0.5 * spread)
    assert not any(r["moved"] for r in headline_rows(vt, near, l2))


def test_the_cli_names_each_runs_executor_and_the_candidate_agreement():
    out = subprocess.run(
        [sys.executable, "-m", "sweeper", "compare", str(RUN), str(RUN)],
        capture_output=True, text=True, cwd=ROOT, check=True,
    ).stdout  # fmt: skip
    lines = out.splitlines()
    assert lines[0].startswith("A: ") and "executor classic" in lines[0]
    assert lines[1].startswith("B: ") and "executor classic" in lines[1]
    assert any(x.startswith("candidate ratios: 100.0% of ") for x in lines)
    assert any(x.startswith("headline (verify") and "0 of 20 ranges moved" in x for x in lines)
