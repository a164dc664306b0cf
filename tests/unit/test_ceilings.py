"""The physical-limit check (sweeper.analyze.ceilings) on synthetic rows: each ceiling, the margin's
edge, a missing DRAM peak, a missing L2-resident ceiling."""

from __future__ import annotations

import math

import pytest

from sweeper.analyze.ceilings import (
    ABOVE_CEILING,
    CEILING_MARGIN,
    COPY,
    COPY_FROM_X_L2,
    DRAM_PEAK,
    L2_RESIDENT,
    Ceilings,
    ceilings_of,
    check,
    ratios,
)
from sweeper.units import MiB

L2 = 60 * MiB
CEIL = Ceilings(l2_bytes=L2, l2_resident_gbps=6000.0, dram_peak_gbps=4800.0)
BIG = COPY_FROM_X_L2 * L2  # the smallest working set the copy and DRAM bounds apply to


def row(ws: int, gbps: float, status: str = "ok", detail: str = "") -> dict:
    return {"ws_bytes": ws, "gbps": gbps, "status": status, "status_detail": detail}


def test_the_l2_resident_ceiling_bounds_every_size():
    for ws in (1 * MiB, 40 * MiB, L2, BIG, 32 * L2):
        status, detail = check(row(ws, 13500.0), CEIL, copy_gbps=4300.0)
        assert status == ABOVE_CEILING
    # in the band it is the only bound: 2.25x the ceiling, named with both values
    status, detail = check(row(40 * MiB, 13500.0), CEIL, copy_gbps=4300.0)
    assert detail == f"13500 GB/s is 2.25x the {L2_RESIDENT} (6000 GB/s); the limit is 1.2x"


def test_the_copy_kernel_bounds_only_from_twice_l2():
    # 1.3x the copy kernel: an honest kernel in the L2 band may do that, not above 2 x L2
    fast = 1.3 * 4000.0
    assert check(row(BIG - 1, fast), CEIL, copy_gbps=4000.0) == ("ok", "")
    status, detail = check(row(BIG, fast), CEIL, copy_gbps=4000.0)
    assert status == ABOVE_CEILING and COPY in detail and "(4000 GB/s)" in detail


def test_the_dram_peak_bounds_only_from_twice_l2():
    fast = 1.25 * 4800.0  # below 1.2x the L2-resident ceiling (7200)
    assert check(row(BIG - 1, fast), CEIL, copy_gbps=None) == ("ok", "")
    status, detail = check(row(BIG, fast), CEIL, copy_gbps=None)
    assert status == ABOVE_CEILING and DRAM_PEAK in detail and "(4800 GB/s)" in detail


def test_the_detail_names_the_ceiling_exceeded_most():
    # 85 TB/s at 4 x L2: 14.2x the L2 ceiling, 17.7x the DRAM peak, 19.8x the copy kernel
    _, detail = check(row(4 * L2, 85000.0), CEIL, copy_gbps=4300.0)
    assert detail.startswith(f"85000 GB/s is 19.77x the {COPY}")
    got = {name: r for name, _, r in ratios(row(4 * L2, 85000.0), CEIL, 4300.0)}
    assert got == pytest.approx(
        {L2_RESIDENT: 85000 / 6000, COPY: 85000 / 4300, DRAM_PEAK: 85000 / 4800}
    )


@pytest.mark.parametrize(
    ("ws", "ceiling", "copy"),
    [(40 * MiB, 6000.0, None), (BIG, 1e9, 4000.0), (BIG, 1e9, None)],
    ids=["l2-resident", "copy", "dram-peak"],
)
def test_the_margin_is_the_edge(ws, ceiling, copy):
    c = Ceilings(
        l2_bytes=L2, l2_resident_gbps=ceiling, dram_peak_gbps=4800.0 if copy is None else None
    )
    bound = ceiling if ws < BIG else (copy or 4800.0)
    at = CEILING_MARGIN * bound
    assert check(row(ws, at), c, copy) == ("ok", "")
    assert check(row(ws, math.nextafter(at, math.inf)), c, copy)[0] == ABOVE_CEILING
    assert check(row(ws, at * 1.001), c, copy)[0] == ABOVE_CEILING


def test_a_missing_dram_peak_leaves_the_other_ceilings():
    c = Ceilings(l2_bytes=L2, l2_resident_gbps=6000.0, dram_peak_gbps=None)
    assert check(row(BIG, 1.25 * 4800.0), c, copy_gbps=None) == ("ok", "")
    assert check(row(BIG, 1.25 * 4800.0), c, copy_gbps=4800.0)[0] == ABOVE_CEILING
    assert check(row(40 * MiB, 7300.0), c, copy_gbps=None)[0] == ABOVE_CEILING


def test_a_missing_l2_resident_ceiling_leaves_the_band_unbounded():
    c = Ceilings(l2_bytes=L2, l2_resident_gbps=None, dram_peak_gbps=4800.0)
    assert check(row(40 * MiB, 85000.0), c, copy_gbps=4000.0) == ("ok", "")
    assert check(row(BIG, 85000.0), c, copy_gbps=None)[0] == ABOVE_CEILING
    nothing = Ceilings(l2_bytes=L2)
    assert check(row(BIG, 85000.0), nothing, copy_gbps=None) == ("ok", "")
    assert ratios(row(BIG, 85000.0), nothing, None) == []


def test_a_row_that_failed_another_check_keeps_its_status():
    bad = row(4 * L2, 85000.0, "mismatch", "after the timed loop: 3 words differ")
    assert check(bad, CEIL, 4300.0) == ("mismatch", "after the timed loop: 3 words differ")


@pytest.mark.parametrize("gbps", [None, float("nan"), 0.0, -1.0])
def test_a_row_without_a_positive_throughput_is_not_judged(gbps):
    assert check(row(4 * L2, gbps), CEIL, 4300.0) == ("ok", "")


def test_an_infinite_throughput_is_above_every_ceiling():
    assert check(row(1 * MiB, float("inf")), CEIL, None)[0] == ABOVE_CEILING


def test_the_ceilings_come_from_the_manifest():
    m = {
        "plan": {"l2_bytes": L2},
        "device": {"dram_peak_gbps": 4800.0},
        "ceiling": {"gbps": 5983.0},
        "harness": {"ceiling_check": {"margin": 1.5, "copy_from_x_l2": 3}},
    }
    assert ceilings_of(m) == Ceilings(L2, 5983.0, 4800.0, margin=1.5, copy_from_x_l2=3)
    # a manifest without them: no ceilings, today's parameters
    bare = ceilings_of({"plan": {"l2_bytes": L2}, "device": {}, "ceiling": {"gbps": None}})
    assert bare == Ceilings(L2, None, None, CEILING_MARGIN, COPY_FROM_X_L2)


@pytest.mark.parametrize(
    ("check_doc", "field"),
    [
        ({"margin": "1.2", "copy_from_x_l2": 2}, "margin"),
        ({"margin": 0, "copy_from_x_l2": 2}, "margin"),
        ({"margin": 1.2}, "copy_from_x_l2"),
        ({"margin": 1.2, "copy_from_x_l2": -2}, "copy_from_x_l2"),
    ],
)
def test_a_manifest_with_edited_check_parameters_is_refused_naming_the_field(
    tmp_path, check_doc, field
):
    import json

    from sweeper.analyze.store import load_manifest, with_records
    from sweeper.errors import SchemaError
    from sweeper.schema import VERSIONS

    m = {
        "kind": "manifest",
        "schema_version": VERSIONS["manifest"],
        "run_id": "r1",
        "gpu": "h200",
        "device": {"l2_bytes": L2, "sm_count": 132},
        "plan": {"plan_hash": "abc", "l2_bytes": L2},
        "modes": ["hot"],
        "harness": {"ceiling_check": check_doc},
    }
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(SchemaError, match=f"harness.ceiling_check.{field}"):
        load_manifest(tmp_path)
    m["harness"]["ceiling_check"] = {"margin": 1.5, "copy_from_x_l2": 3}
    (tmp_path / "manifest.json").write_text(json.dumps(with_records(tmp_path, m)))
    assert ceilings_of(load_manifest(tmp_path)).margin == 1.5
