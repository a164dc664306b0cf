"""Planner invariants (property-based), plan-file round trip, corruption and overwrite rules."""

from __future__ import annotations

import copy
import json
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sweeper import schema
from sweeper.dtypes import DTYPES, ITEMSIZE
from sweeper.errors import SchemaError, SweeperError
from sweeper.plan import gpus
from sweeper.plan import planfile as P
from sweeper.plan.ladder import EST_CALLS_PER_SAMPLE, EST_MIN_CALL_S, EST_SAMPLES, EST_WARMUP

MiB = 1 << 20
KiB = 1 << 10


def spec_with(l2: int, persisting: int | None = None, memory: int = 80 << 30):
    return replace(
        gpus.lookup("h200"),
        key="test",
        l2_bytes=l2,
        persisting_l2_max_bytes=persisting,
        memory_bytes=memory,
    )


def check_invariants(p: P.Plan) -> None:
    """Independent restatement of the planner's promises (not calling validate_plan_doc).

    Edges are rounded to the 32-byte grain, hence the +-31 tolerances.
    """
    l2 = p.l2_bytes
    cap = p.memory_bytes // 8
    dense_lo, dense_hi = min(l2 // 4, cap), min(2 * l2, cap)
    step = max(32, (2 * l2 + 256 * 32) // (256 * 64) * 32)  # L2/256 to the nearest 32 B, halves up

    def in_dense(ws: int) -> bool:
        return dense_lo - 31 <= ws <= dense_hi + 31

    for d in p.dtypes:
        item = ITEMSIZE[d]
        es = p.sizes(d)
        ws = [e["working_set_bytes"] for e in es]
        assert ws == sorted(set(ws)), "sorted and unique"
        for e in es:
            assert e["working_set_bytes"] == 2 * e["n"] * item
            assert (e["n"] * item) % 16 == 0
            assert e["region"] == ("dense" if in_dense(e["working_set_bytes"]) else "outer")
        # coverage: from 64 KiB (or below) to >= 32 x L2, unless the memory cap stops it
        assert ws[0] <= 64 * KiB
        assert ws[-1] >= min(32 * l2, cap - 31)
        assert ws[-1] <= cap
        assert sum(in_dense(w) for w in ws) >= 2
        for a, b in zip(ws, ws[1:], strict=False):
            if in_dense(a) and in_dense(b):
                assert b - a <= l2 / p.resolution, (d, a, b)
            else:
                assert b / a <= 1.25, (d, a, b)
        names = {n: e["working_set_bytes"] for e in es for n in e["anchors"]}
        nominal = {
            "32MiB-": 32 * MiB - step,
            "32MiB": 32 * MiB,
            "32MiB+": 32 * MiB + step,
            "L2-": l2 - step,
            "L2": l2,
            "L2+": l2 + step,
            "2xL2": 2 * l2,
            "1024^2": 2 * 1024 * 1024 * item,
            "4096^2": 2 * 4096 * 4096 * item,
        }
        if p.persisting_l2_max_bytes:
            nominal["persist-max"] = p.persisting_l2_max_bytes
        for name, v in nominal.items():
            if v + 32 <= cap:
                assert name in names, name
                assert abs(names[name] - v) <= 16, (name, names[name], v)
            elif v > cap + 32:
                assert name not in names, name
        assert set(names) <= set(nominal)
    for t in p.tails:
        assert t["working_set_bytes"] == 2 * t["n"] * ITEMSIZE[t["dtype"]]
    for d in p.dtypes:
        assert {t["n"] for t in p.tail_sizes(d)} == {1, 3, 15, 17, 4097, 1000003}


l2_sizes = st.one_of(
    st.integers(1, 256).map(lambda m: m * MiB),
    st.integers(1 * MiB, 256 * MiB),  # odd values too
)
resolutions = st.integers(32, 256)
dtype_sets = st.lists(st.sampled_from(sorted(DTYPES)), min_size=1, max_size=4, unique=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    l2=l2_sizes, res=resolutions, dtypes=dtype_sets, persist_frac=st.sampled_from([0, 0.625, 0.75])
)
def test_ladder_invariants(l2, res, dtypes, persist_frac):
    persisting = int(l2 * persist_frac) or None
    p = P.make_plan(spec_with(l2, persisting), dtypes=dtypes, resolution=res)
    check_invariants(p)
    P.validate_plan_doc(json.loads(json.dumps(schema.stamp("plan", p.payload()))))


@settings(max_examples=15, deadline=None)
@given(l2=l2_sizes, mem_gib=st.integers(1, 8))
def test_memory_cap_limits_the_top(l2, mem_gib):
    mem = mem_gib << 30
    p = P.make_plan(spec_with(l2, memory=mem), resolution=32)
    check_invariants(p)
    for d in p.dtypes:
        assert p.sizes(d)[-1]["working_set_bytes"] <= mem // 8


def test_4090_band_is_dense():
    p = P.make_plan(gpus.lookup("4090"))
    for d in DTYPES:
        ws = [e["working_set_bytes"] for e in p.sizes(d)]
        assert sum(32 * MiB < w <= 72 * MiB for w in ws) >= 16
        inside = [w for w in ws if 18 * MiB <= w <= 144 * MiB]
        assert inside[0] == 18 * MiB and inside[-1] == 144 * MiB
        assert max(b - a for a, b in zip(inside, inside[1:], strict=False)) <= 2.25 * MiB
    fp16 = {e["working_set_bytes"]: e for e in p.sizes("fp16")}
    assert "4096^2" in fp16[64 * MiB]["anchors"]
    assert "L2" in fp16[72 * MiB]["anchors"]


def test_h200_persisting_anchor():
    p = P.make_plan(gpus.lookup("h200"), dtypes="fp32")
    at = {n: e["working_set_bytes"] for e in p.sizes("fp32") for n in e["anchors"]}
    assert at["persist-max"] == 39321600
    assert at["L2"] == 62914560


def test_committed_sweeps_are_valid():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "sweeps"
    for key in ("4090", "h200"):
        p = P.load_plan(root / f"{key}.json")
        assert p.gpu == key
        assert p.l2_bytes == gpus.lookup(key).l2_bytes


@pytest.mark.parametrize("res", [0, 31, 4097, 10**9, "32", True])
def test_bad_resolution(res):
    with pytest.raises(SweeperError, match="resolution"):
        P.make_plan(gpus.lookup("4090"), resolution=res)


def test_resolution_too_fine_for_small_l2():
    with pytest.raises(SweeperError, match="below 32 bytes"):
        P.make_plan(spec_with(64 * KiB), resolution=4096)


@pytest.mark.parametrize("dtypes", ["fp64", "fp32,xx", ",", ""])
def test_bad_dtypes(dtypes):
    with pytest.raises(SweeperError, match="dtype"):
        P.make_plan(gpus.lookup("4090"), dtypes=dtypes)


def test_sizes_of_absent_dtype():
    p = P.make_plan(gpus.lookup("4090"), dtypes="fp16")
    with pytest.raises(SweeperError, match=r"dtype 'fp32' is not in this plan \(fp16\)"):
        p.sizes("fp32")


def test_summary():
    p = P.make_plan(gpus.lookup("4090"), dtypes="fp32,int8")
    rows = P.summarize(p)
    assert [r["dtype"] for r in rows] == ["fp32", "int8"]
    for r in rows:
        assert r["max_gap_dense_bytes"] <= 72 * MiB / 32
        assert r["max_ratio_outer"] <= 1.25
        assert r["dense_lo_bytes"] == 18 * MiB and r["dense_hi_bytes"] == 144 * MiB
        assert r["est_seconds_per_config"] > 0


# ---- file round trip and corruption -------------------------------------------------------


@pytest.fixture
def plan_file(tmp_path):
    p = P.make_plan(gpus.lookup("4090"), dtypes="fp32,fp16")
    path = tmp_path / "4090.json"
    P.write_plan(p, path)
    return p, path


def test_round_trip(plan_file):
    p, path = plan_file
    q = P.load_plan(path)
    assert q == p
    doc = json.loads(path.read_text())
    assert doc["kind"] == "plan" and doc["schema_version"] == 1
    assert doc["spec"]["l2_bytes"] == 75497472


def _edit(path, fn, rehash=True):
    doc = json.loads(path.read_text())
    fn(doc)
    if rehash:
        doc["plan_hash"] = P._hash(doc)
    path.write_text(json.dumps(doc))


def _fp16_index(doc, ws):
    return next(
        i
        for i, e in enumerate(doc["entries"])
        if e["dtype"] == "fp16" and e["working_set_bytes"] == ws
    )


def _drop_dense_point(doc):
    i = _fp16_index(doc, 18 * MiB)
    del doc["entries"][i + 1]  # the next dense point: the gap doubles to 4.5 MiB


def _drop_outer_point(doc):
    i = next(i for i, e in enumerate(doc["entries"]) if e["working_set_bytes"] > 200 * MiB)
    del doc["entries"][i]


def _drop_anchor(doc):
    i = _fp16_index(doc, 64 * MiB)
    doc["entries"][i]["anchors"] = []


def _swap(doc):
    e = doc["entries"]
    e[3], e[4] = e[4], e[3]


def _dup(doc):
    doc["entries"].insert(5, dict(doc["entries"][5]))


def _bad_ws(doc):
    doc["entries"][2]["working_set_bytes"] += 32


def _not16(doc):
    e = doc["entries"][2]
    e["n"] += 1
    e["working_set_bytes"] = 2 * e["n"] * 4


def _unknown_dtype(doc):
    doc["entries"][0]["dtype"] = "fp64"


def _unknown_plan_dtype(doc):
    doc["dtypes"].append("fp8")


def _bad_region(doc):
    doc["entries"][0]["region"] = "dense"


def _tail(doc):
    doc["tails"][0]["working_set_bytes"] = 7


def _spec_l2(doc):
    doc["spec"]["l2_bytes"] = 64 * MiB


@pytest.mark.parametrize(
    "mutate, field",
    [
        (_drop_dense_point, "entries["),
        (_drop_outer_point, "entries["),
        (_drop_anchor, "entries"),
        (_swap, "entries["),
        (_dup, "entries["),
        (_bad_ws, "entries[2].working_set_bytes"),
        (_not16, "entries[2].n"),
        (_unknown_dtype, "entries[0].dtype"),
        (_unknown_plan_dtype, "dtypes[2]"),
        (_bad_region, "entries[0].region"),
        (_tail, "tails[0]"),
        (_spec_l2, "entries"),
    ],
)
def test_corruption_rejected_naming_field(plan_file, mutate, field):
    _, path = plan_file
    _edit(path, mutate)
    with pytest.raises(SchemaError) as ei:
        P.load_plan(path)
    assert ei.value.field is not None and ei.value.field.startswith(field), str(ei.value)
    assert str(path) in str(ei.value)


def test_hand_edit_without_rehash_is_caught(plan_file):
    _, path = plan_file

    # an edit every other check accepts: only the hash can tell
    def edit(doc):
        doc["gpu"] = "4090-tuned"
        doc["notes"].append("hand edited")

    _edit(path, edit, rehash=False)
    with pytest.raises(SchemaError) as ei:
        P.load_plan(path)
    assert ei.value.field == "plan_hash"


def test_newer_version_and_other_kind_rejected(plan_file):
    _, path = plan_file
    _edit(path, lambda d: d.__setitem__("schema_version", 99), rehash=False)
    with pytest.raises(SchemaError, match="upgrade sweeper"):
        P.load_plan(path)
    _edit(path, lambda d: d.update(schema_version=1, kind="policy"), rehash=False)
    with pytest.raises(SchemaError) as ei:
        P.load_plan(path)
    assert ei.value.field == "kind"


def test_write_refuses_different_plan_without_force(plan_file):
    p, path = plan_file
    P.write_plan(p, path)  # the same plan again is fine
    other = P.make_plan(gpus.lookup("4090"), dtypes="fp32,fp16", resolution=64)
    before = path.read_text()
    with pytest.raises(SweeperError, match="--force"):
        P.write_plan(other, path)
    assert path.read_text() == before
    P.write_plan(other, path, force=True)
    assert P.load_plan(path).resolution == 64


def test_write_refuses_over_unreadable_file(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("not json")
    p = P.make_plan(gpus.lookup("3090"), dtypes="int8")
    with pytest.raises(SweeperError, match="--force"):
        P.write_plan(p, path)
    P.write_plan(p, path, force=True)
    assert P.load_plan(path) == p


@pytest.mark.parametrize("l2", [1052672, 1069056, 2461696, 62914560])
def test_the_anchor_step_rounds_halves_up(l2):
    """At the first three L2 sizes, L2 / 256 lies exactly halfway between two multiples of
    32 bytes: the step is rounded up there, as the planner documents (the H200's is exact)."""
    p = P.make_plan(spec_with(l2), resolution=32)
    check_invariants(p)
    step = p.bounds.small_step
    assert step % 32 == 0 and abs(step - l2 / 256) <= 16
    if (l2 / 256) % 32 == 16:
        assert step == l2 / 256 + 16


@pytest.mark.parametrize("l2", [62914560, 62914560 + 4 * 8, 62914560 + 4 * 24, 75497472 + 100])
def test_the_dense_band_is_rounded_outward_to_the_32_byte_grain(l2):
    """The dense band covers at least [L2 / 4, 2 x L2]: its start is rounded down and its end
    up to the 32-byte grain, never inward."""
    b = P.make_plan(spec_with(l2), resolution=32).bounds
    assert b.dense_lo % 32 == 0 and l2 / 4 - 32 < b.dense_lo <= l2 / 4
    assert b.dense_hi % 32 == 0 and 2 * l2 <= b.dense_hi < 2 * l2 + 32


def test_geometric_steps_are_grain_multiples_at_most_125_percent_apart_and_always_advance():
    from sweeper.plan.ladder import _geometric

    out = _geometric(64 * 1024, 10 << 20)
    assert out[0] == 64 * 1024 and out[-1] == 10 << 20
    assert all(b > a and b % 32 == 0 and b <= 1.25 * a for a, b in zip(out, out[1:], strict=False))
    # below 128 bytes x 1.25 rounds down to the value itself: the ladder still advances a grain
    assert _geometric(32, 160) == [32, 64, 96, 128, 160]


def test_dtype_lists_skip_empty_items_and_name_the_known_dtypes():
    p = P.make_plan(gpus.lookup("4090"), dtypes="FP32,, fp16 ,fp32")
    assert p.dtypes == ("fp32", "fp16")
    with pytest.raises(SweeperError, match="unknown dtype 'fp64'; known: fp32, fp16, bf16, int8"):
        P.make_plan(gpus.lookup("4090"), dtypes="fp64")
    with pytest.raises(SweeperError, match="no dtypes given; known: fp32, fp16, bf16, int8"):
        P.make_plan(gpus.lookup("4090"), dtypes=" , ")


def test_the_finest_resolution_is_one_grain_per_step():
    P.make_plan(spec_with(32 * 1056), resolution=1056)  # steps of exactly 32 bytes: allowed
    with pytest.raises(SweeperError, match=r"gives steps below 32 bytes .* use at most 1056$"):
        P.make_plan(spec_with(32 * 1056), resolution=1057)


def test_an_anchor_at_the_memory_cap_is_kept():
    l2 = 62914560
    p = P.make_plan(spec_with(l2, memory=8 * 2 * l2), resolution=32)  # cap = 2 x L2
    assert p.bounds.cap == 2 * l2
    assert all("2xL2" in e["anchors"] for e in p.sizes("fp32") if e["working_set_bytes"] == 2 * l2)
    assert any("2xL2" in e["anchors"] for e in p.sizes("fp32"))


def test_an_anchor_of_one_grain_is_kept():
    p = P.make_plan(spec_with(62914560, persisting=32), resolution=32)
    assert p.bounds.anchors(4)["persist-max"] == 32
    assert any(
        "persist-max" in e["anchors"] and e["working_set_bytes"] == 32 for e in p.sizes("fp32")
    )


def test_a_plan_without_a_resolution_has_the_default_of_32():
    assert P.make_plan(gpus.lookup("4090"), dtypes="fp32").resolution == 32


def test_an_absent_dtype_names_every_dtype_of_the_plan():
    p = P.make_plan(gpus.lookup("4090"), dtypes="fp16,int8")
    with pytest.raises(SweeperError) as e:
        p.sizes("fp32")
    assert str(e.value) == "dtype 'fp32' is not in this plan (fp16, int8)"


def test_the_time_estimate_is_replays_of_calls_at_dram_peak_with_a_floor_per_call():
    # 20 calls per sample, 5 warm-up + 30 samples: 700 calls per size; 1 TB/s
    per_size = 20 * (5 + 30)
    assert per_size == EST_CALLS_PER_SAMPLE * (EST_WARMUP + EST_SAMPLES)
    big = 2 * 10**9  # 2 ms per call at 1000 GB/s
    small = 64  # below the 5 us floor per call
    got = P.estimate_seconds([big, small], 1000.0)
    assert got == pytest.approx(per_size * (2e-3 + EST_MIN_CALL_S), rel=1e-12)
    assert P.estimate_seconds([], 1000.0) == 0


def test_the_summary_is_what_the_plans_sizes_say():
    """Every field of a summary row, recomputed from the plan's own sizes and bounds."""
    p = P.make_plan(gpus.lookup("4090"), dtypes="fp32,int8")
    b = p.bounds
    for r in P.summarize(p):
        ws = [e["working_set_bytes"] for e in p.sizes(r["dtype"])]
        pairs = list(zip(ws, ws[1:], strict=False))
        dense = [(x, y) for x, y in pairs if b.region(x) == b.region(y) == "dense"]
        outer = [(x, y) for x, y in pairs if (x, y) not in dense]
        assert r == {
            "dtype": r["dtype"],
            "sizes": len(ws),
            "dense_lo_bytes": b.dense_lo,
            "dense_hi_bytes": b.dense_hi,
            "dense_count": sum(b.region(x) == "dense" for x in ws),
            "max_gap_dense_bytes": max(y - x for x, y in dense),
            "max_ratio_outer": max(y / x for x, y in outer),
            "min_ws_bytes": min(ws),
            "max_ws_bytes": max(ws),
            "est_seconds_per_config": P.estimate_seconds(ws, p.dram_peak_gbps),
        }
        assert 0 < r["dense_count"] < r["sizes"]  # both kinds of step are exercised
        assert r["max_ratio_outer"] > 1 and r["max_gap_dense_bytes"] > 0


class _Bounds:
    def __init__(self, lo, hi):
        self.dense_lo, self.dense_hi = lo, hi

    def region(self, ws):
        return "dense" if self.dense_lo <= ws <= self.dense_hi else "outer"


class _Plan:
    """What summarize reads of a plan, with sizes chosen to tell the two kinds of step apart."""

    def __init__(self, ws, lo, hi):
        self.bounds, self.dtypes, self.dram_peak_gbps, self._ws = _Bounds(lo, hi), ["fp32"], 1e3, ws

    def sizes(self, dtype):
        return [{"working_set_bytes": w} for w in self._ws]


@pytest.mark.parametrize(
    "ws, lo, hi, gap, ratio",
    [
        # outer 100->110 (1.1), into the band 110->200 (1.82), in it 200->500 (2.5, a gap of
        # 300), out of it 500->750 (1.5): a step that touches the band's edge is an outer step
        ([100, 110, 200, 500, 750], 200, 500, 300, 200 / 110),
        ([100, 150, 160], 1000, 2000, 0, 1.5),  # no dense step: the gap is 0
        ([1000, 1500], 1000, 2000, 500, 1.0),  # no outer step: the ratio is 1
    ],
    ids=["both", "outer-only", "dense-only"],
)
def test_the_summary_tells_dense_steps_from_outer_ones(ws, lo, hi, gap, ratio):
    (row,) = P.summarize(_Plan(ws, lo, hi))
    assert row["max_gap_dense_bytes"] == gap
    assert row["max_ratio_outer"] == pytest.approx(ratio)
    assert row["dense_count"] == sum(lo <= w <= hi for w in ws)


def _set(path, value):
    def edit(doc):
        *head, last = path
        for k in head:
            doc = doc[k]
        if value is _DROP:
            del doc[last]
        else:
            doc[last] = value

    return edit


_DROP = object()


@pytest.mark.parametrize(
    "edit, field",
    [
        (_set(["gpu"], _DROP), "gpu"),
        (_set(["spec", "sm_count"], _DROP), "spec.sm_count"),
        (_set(["spec", "persisting_l2_max_bytes"], 1.5), "spec.persisting_l2_max_bytes"),
        (_set(["spec", "persisting_l2_max_bytes"], True), "spec.persisting_l2_max_bytes"),
        (_set(["spec", "cc"], [9.0, 0]), "spec.cc"),
        (_set(["spec", "cc"], [True, 0]), "spec.cc"),
    ],
    ids=["no-gpu", "no-sm-count", "persisting-float", "persisting-bool", "cc-float", "cc-bool"],
)
def test_a_plan_field_of_the_wrong_kind_is_named_exactly(plan_file, edit, field):
    _, path = plan_file
    _edit(path, edit)
    with pytest.raises(SchemaError) as ei:
        P.load_plan(path)
    assert ei.value.field == field, str(ei.value)


def test_a_plan_without_notes_loads_with_none():
    p = P.make_plan(gpus.lookup("4090"), dtypes="fp32")
    doc = json.loads(json.dumps(p.payload()))
    doc.pop("notes", None)
    doc["plan_hash"] = P._hash(doc)
    assert P.plan_from_doc(doc).notes == ()


# ---- the plan file's validation, refusal by refusal (validate_plan_doc) ---------------------
# Each corruption of the 4090 plan (fp32, fp16), re-hashed so that the field itself is what is
# refused, with the field and the message a user reads (tools/mutation.sh --plan-doc).


def _doc_first(doc, dtype, ws=None, region=None, anchored=False):
    for i, e in enumerate(doc["entries"]):
        if e["dtype"] != dtype:
            continue
        if ws is not None and e["working_set_bytes"] != ws:
            continue
        if region is not None and e["region"] != region:
            continue
        if anchored and not e["anchors"]:
            continue
        return i
    raise LookupError


def _doc_fp16(doc):
    return [i for i, e in enumerate(doc["entries"]) if e["dtype"] == "fp16"]


def _doc_entry(i, **kw):
    def edit(doc):
        doc["entries"][i].update(kw)

    return edit


def _dense_gap(doc):
    i = _doc_first(doc, "fp16", region="dense")
    del doc["entries"][i + 3]


def _outer_gap(doc):
    i = max(
        j
        for j in _doc_fp16(doc)
        if doc["entries"][j]["region"] == "outer"
        and doc["entries"][j]["working_set_bytes"] > 200 * MiB
    )
    del doc["entries"][i - 1]


def _smallest(doc):
    del doc["entries"][_doc_fp16(doc)[0]]


def _largest(doc):
    del doc["entries"][_doc_fp16(doc)[-1]]


def _dense_edge(doc):
    i = _doc_first(doc, "fp16", region="dense")
    del doc["entries"][i]


def _anchor_moved(doc):
    i = _doc_first(doc, "fp16", anchored=True)
    name = doc["entries"][i]["anchors"][0]
    doc["entries"][i]["anchors"] = []
    doc["entries"][i + 1]["anchors"] = [name]


def _anchor_gone(doc):
    i = _doc_first(doc, "fp16", anchored=True)
    doc["entries"][i]["anchors"] = []


def _no_fp16(doc):
    doc["entries"] = [e for e in doc["entries"] if e["dtype"] != "fp16"]


def _twice(doc):
    doc["entries"].insert(6, dict(doc["entries"][5]))


DOC_REFUSALS = {  # case: (the edit, (field, message) or None where the plan is accepted)
    "resolution-not-int": (_set(["resolution"], 32.0), ("resolution", "expected int, found float")),
    "l2-zero": (_set(["spec", "l2_bytes"], 0), ("spec.l2_bytes", "must be positive, found 0")),
    "memory-negative": (
        _set(["spec", "memory_bytes"], -1),
        ("spec.memory_bytes", "must be positive, found -1"),
    ),
    "sms-zero": (_set(["spec", "sm_count"], 0), ("spec.sm_count", "must be positive, found 0")),
    "persisting-missing": (
        _set(["spec", "persisting_l2_max_bytes"], _DROP),
        (
            "spec.persisting_l2_max_bytes",
            "expected an integer or null, found 'missing'",
        ),
    ),
    "persisting-negative": (
        _set(["spec", "persisting_l2_max_bytes"], -1),
        (
            "spec.persisting_l2_max_bytes",
            "expected an integer or null, found -1",
        ),
    ),
    "persisting-null": (
        _set(["spec", "persisting_l2_max_bytes"], None),
        None,
    ),  # accepted: a GPU without a persisting L2
    "cc-three": (
        _set(["spec", "cc"], [8, 9, 0]),
        ("spec.cc", "expected [major, minor], found [8, 9, 0]"),
    ),
    "dram-peak-string": (
        _set(["spec", "dram_peak_gbps"], "fast"),
        ("spec.dram_peak_gbps", "expected int/float, found str"),
    ),
    "resolution-too-fine": (
        _set(["resolution"], 1 << 22),
        (
            "resolution",
            "--resolution must be between 32 and 4096 (steps of L2/resolution bytes in the dense band), got 4194304",
        ),
    ),
    "dtypes-empty": (_set(["dtypes"], []), ("dtypes", "empty")),
    "dtypes-unknown": (
        _set(["dtypes"], ["fp32", "fp64"]),
        ("dtypes[1]", "unknown dtype 'fp64'; known: fp32, fp16, bf16, int8"),
    ),
    "dtypes-twice": (_set(["dtypes"], ["fp32", "fp32"]), ("dtypes", "duplicate dtype")),
    "entry-not-object": (_set(["entries", 0], 7), ("entries[0]", "expected an object")),
    "entry-dtype-not-planned": (
        _doc_entry(0, dtype="bf16"),
        (
            "entries[0].dtype",
            "unknown dtype 'bf16' (plan dtypes: ['fp32', 'fp16'])",
        ),
    ),
    "entry-n-zero": (
        _doc_entry(0, n=0, working_set_bytes=0),
        ("entries[0].n", "must be positive, found 0"),
    ),
    "entry-ws-mismatch": (
        _doc_entry(0, working_set_bytes=65536 + 8),
        (
            "entries[0].working_set_bytes",
            "65544 != n * bytes per element = 65536 (fp32)",
        ),
    ),
    "entry-not-16": (
        _doc_entry(0, n=8193, working_set_bytes=8193 * 8),
        ("entries[0].n", "n * itemsize = 32772 is not a multiple of 16"),
    ),
    "entry-region": (
        _doc_entry(0, region="dense"),
        ("entries[0].region", "'dense' but 65536 bytes is 'outer'"),
    ),
    "entry-anchors-not-names": (
        _doc_entry(0, anchors=[1]),
        ("entries[0].anchors", "expected a list of names"),
    ),
    "no-sizes-for-a-dtype": (_no_fp16, ("entries", "no sizes for dtype fp16")),
    "unsorted": (
        _twice,
        (
            "entries[6].working_set_bytes",
            "fp32: 200000 after 200000; sizes must be sorted and unique",
        ),
    ),
    "dense-gap": (
        _dense_gap,
        (
            "entries[133].working_set_bytes",
            "fp16: gap 4718592 bytes in the dense region > L2/resolution",
        ),
    ),
    "outer-gap": (
        _outer_gap,
        (
            "entries[204].working_set_bytes",
            "fp16: ratio 1.374 outside the dense region > 1.25",
        ),
    ),
    "smallest": (_smallest, ("entries", "fp16: smallest size 81920 > 65536")),
    "largest": (_largest, ("entries", "fp16: largest size 2197265600 < 2415919104")),
    "dense-edge": (_dense_edge, ("entries", "fp16: dense-region edge 18874368 bytes missing")),
    "anchor-moved": (
        _anchor_moved,
        (
            "entries[123].anchors",
            "fp16: anchor '1024^2' does not belong at 4546496 bytes",
        ),
    ),
    "anchor-missing": (_anchor_gone, ("entries", "fp16: anchor '1024^2' (4194304 bytes) missing")),
    "tail-not-object": (_set(["tails", 0], 7), ("tails[0]", "expected an object")),
    "tail-dtype": (
        lambda d: d["tails"][0].update(dtype="fp64"),
        ("tails[0].dtype", "unknown dtype 'fp64'"),
    ),
    "tail-n-zero": (
        lambda d: d["tails"][0].update(n=0, working_set_bytes=0),
        ("tails[0].working_set_bytes", "0 != n * bytes per element"),
    ),
    "tail-ws": (
        lambda d: d["tails"][0].update(working_set_bytes=12),
        ("tails[0].working_set_bytes", "12 != n * bytes per element"),
    ),
    "no-version": (_set(["sweeper_version"], _DROP), ("sweeper_version", "missing")),
    "hash": (
        _set(["plan_hash"], "0" * 16),
        (
            "plan_hash",
            "0000000000000000 does not match the content (abbd79baeb3f); was the file edited? Re-run `sweeper plan`",
        ),
    ),
    "sms-one": (_set(["spec", "sm_count"], 1), None),  # accepted: one SM is a GPU
    "persisting-zero": (
        _set(["spec", "persisting_l2_max_bytes"], 0),
        None,
    ),  # accepted: no persisting L2
    "cc-missing": (_set(["spec", "cc"], _DROP), ("spec.cc", "missing")),
    "entry-no-dtype": (_set(["entries", 0, "dtype"], _DROP), ("entries[0].dtype", "missing")),
    "entry-no-n": (_set(["entries", 0, "n"], _DROP), ("entries[0].n", "missing")),
    "entry-no-ws": (
        _set(["entries", 0, "working_set_bytes"], _DROP),
        ("entries[0].working_set_bytes", "missing"),
    ),
    "entry-no-region": (_set(["entries", 0, "region"], _DROP), ("entries[0].region", "missing")),
    "entry-no-anchors": (_set(["entries", 0, "anchors"], _DROP), ("entries[0].anchors", "missing")),
    "entry-n-one": (
        _doc_entry(0, n=1, working_set_bytes=8),
        ("entries[0].n", "n * itemsize = 4 is not a multiple of 16"),
    ),
    "tail-no-dtype": (_set(["tails", 0, "dtype"], _DROP), ("tails[0].dtype", "missing")),
    "tail-no-n": (_set(["tails", 0, "n"], _DROP), ("tails[0].n", "missing")),
    "tail-no-ws": (
        _set(["tails", 0, "working_set_bytes"], _DROP),
        ("tails[0].working_set_bytes", "missing"),
    ),
}


@pytest.fixture(scope="module")
def plan_doc(tmp_path_factory):
    path = tmp_path_factory.mktemp("plan") / "4090.json"
    P.write_plan(P.make_plan(gpus.lookup("4090"), dtypes="fp32,fp16"), path)
    return json.loads(path.read_text())


@pytest.mark.parametrize("case", list(DOC_REFUSALS))
def test_each_refusal_of_a_plan_names_its_field_and_says_why(plan_doc, case):
    from sweeper.errors import FieldError

    doc = copy.deepcopy(plan_doc)
    P.validate_plan_doc(copy.deepcopy(doc))  # the plan as written is valid
    edit, want = DOC_REFUSALS[case]
    edit(doc)
    if case != "hash":
        doc["plan_hash"] = P._hash(doc)
    if want is None:
        P.validate_plan_doc(doc)
        return
    with pytest.raises(FieldError) as e:
        P.validate_plan_doc(doc)
    assert (e.value.field, str(e.value)) == want
