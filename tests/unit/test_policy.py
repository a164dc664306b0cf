"""Policy: minimal segmentation (vs brute force), bracket refusal, the L2-band cliff,
validation of every corruption, and merging policies of several GPUs."""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweeper.analyze.bands import greedy_band_count, miss_cost, misses, segment
from sweeper.analyze.columns import COLUMNS
from sweeper.analyze.policy import (
    build_policy,
    config_at,
    describe,
    load_any,
    load_merged,
    load_policy,
    merge_docs,
    validate_policy,
    write_merged,
    write_policy,
)
from sweeper.errors import FieldError, SchemaError, SweeperError
from sweeper.plan.gpus import lookup
from sweeper.plan.planfile import make_plan
from sweeper.records import record_derived

ROOT = Path(__file__).resolve().parents[2]

MiB = 1 << 20
L2 = 72 * MiB
ITEM = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1}
VARIANTS = {
    "plain": dict(vec_bytes=16, unroll=1, load_hint="default", store_hint="default", block=256, grid="onepass"),
    "stream": dict(vec_bytes=16, unroll=1, load_hint="cs", store_hint="cs", block=256, grid="onepass"),
    "stcs": dict(vec_bytes=16, unroll=2, load_hint="default", store_hint="cs", block=512, grid="stride4"),
}  # fmt: skip


def row(dtype, ws, config, gbps, ci=0.002, gpu="synth"):
    t = ws / gbps / 1e3
    r = {c: None for c in COLUMNS}
    r.update(
        run_id="r1", gpu=gpu, mode="hot", pattern="preallocated", dtype=dtype,
        n=ws // (2 * ITEM[dtype]), ws_bytes=ws, role="candidate", config=config, status="ok",
        time_us=t, time_lo_us=t * (1 - ci), time_hi_us=t * (1 + ci), gbps=gbps,
        base_time_us=ws / 1000.0 / 1e3, ratio=gbps / 1000.0, ratio_lo=0.99 * gbps / 1000.0,
        ratio_hi=1.01 * gbps / 1000.0, n_samples=50, phase="sweep", **VARIANTS[config],
    )  # fmt: skip
    return r


def manifest(l2=L2, cc=(8, 9), gpu="synth", resolution=32, run_id="r1", sms=128):
    return {
        "run_id": run_id, "gpu": gpu, "modes": ["hot"], "baseline": "torch",
        "device": {"name": f"Synthetic {gpu}", "cc": list(cc), "sm_count": sms, "l2_bytes": l2},
        "plan": {"path": "sweeps/x.json", "plan_hash": "abc123", "resolution": resolution, "l2_bytes": l2},
    }  # fmt: skip


# ---- the synthetic cliff GPU: L2 = 72 MiB; "stream" (cs loads) is 0.4x in (32 MiB, 72 MiB] --


def cliff_gbps(config: str, ws: int) -> float:
    if config == "plain":
        return 1000.0
    in_band = 32 * MiB < ws <= L2
    return 400.0 if in_band else 1100.0


def cliff_results(sizes_by_dtype: dict[str, list[int]]) -> pd.DataFrame:
    rows = [
        row(dt, ws, c, cliff_gbps(c, ws))
        for dt, sizes in sizes_by_dtype.items()
        for ws in sizes
        for c in ("plain", "stream")
    ]
    return pd.DataFrame(rows, columns=list(COLUMNS))


# The seed's old sweep: element counts 64K..64M in 4x steps (fp32 ws 0.5, 2, 8, 32, 128,
# 512 MiB: 33.6 MB then 134 MB; fp16 lands 64 MiB inside the band).
OLD_N = [1 << k for k in range(16, 27, 2)]


def old_sizes(dtype):
    return [2 * n * ITEM[dtype] for n in OLD_N]


def new_sizes(dtype):
    plan = make_plan(lookup("4090"), dtypes=[dtype], resolution=32)
    assert plan.l2_bytes == L2
    return [e["working_set_bytes"] for e in plan.sizes(dtype)]


def test_cliff_old_sizes_reproduce_the_v2_bug_for_fp32():
    # fp32 at the old sizes never samples (32 MiB, 72 MiB]: one band, streaming everywhere.
    pol = build_policy(cliff_results({"fp32": old_sizes("fp32")}), manifest())
    bands = pol["dtypes"]["fp32"]["bands"]
    assert [b["config"] for b in bands] == ["stream"]
    # ... which is the 0.4x cliff inside the band the sweep never saw:
    chosen = config_at(bands, (48 * MiB) / L2)
    assert cliff_gbps(chosen, 48 * MiB) / cliff_gbps("plain", 48 * MiB) == pytest.approx(0.4)


def test_cliff_old_sizes_refused_where_a_boundary_would_be_a_guess():
    # fp16's old sizes do hit the band (64 MiB): the winner changes across brackets of
    # 16..64 MiB and 64..256 MiB, far wider than L2/32: refuse, naming dtype and bracket.
    with pytest.raises(SweeperError) as e:
        build_policy(cliff_results({"fp16": old_sizes("fp16")}), manifest())
    msg = str(e.value)
    assert "fp16" in msg and str(16 * MiB) in msg and str(64 * MiB) in msg
    assert "--resume" in msg


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "int8"])
def test_cliff_gap_free_sizes_bracket_both_edges(dtype):
    sizes = new_sizes(dtype)
    pol = build_policy(cliff_results({dtype: sizes}), manifest())
    bands = pol["dtypes"][dtype]["bands"]
    assert [b["config"] for b in bands] == ["stream", "plain", "stream"]
    step = L2 / 32
    for b, edge in zip(bands[1:], (32 * MiB, L2), strict=True):
        lo, hi = b["bracket_below"]
        assert lo <= edge < hi and hi - lo <= step
        assert abs(b["lo_bytes"] - edge) <= step
        assert b["lo_rel"] == pytest.approx(b["lo_bytes"] / L2)
    # no band serves the 0.4x config anywhere it was measured
    for ws in sizes:
        chosen = config_at(bands, ws / L2)
        best = max(cliff_gbps(c, ws) for c in VARIANTS if c != "stcs")
        assert cliff_gbps(chosen, ws) >= 0.98 * best, ws


# ---- segmentation is minimal: DP vs brute force ------------------------------------------------


def brute(sizes, acc, max_bracket):
    m = len(sizes)
    best = None
    for cuts in itertools.product([0, 1], repeat=m - 1):
        starts = [0] + [k + 1 for k in range(m - 1) if cuts[k]]
        ends = [s - 1 for s in starts[1:]] + [m - 1]
        if any(
            not set.intersection(*(set(acc[t]) for t in range(i, j + 1)))
            for i, j in zip(starts, ends, strict=True)
        ):
            continue
        wide = sum(1 for i in starts[1:] if sizes[i] - sizes[i - 1] > max_bracket)
        cost = (wide, len(starts))
        best = cost if best is None or cost < best else best
    return best


def ladders(gaps):
    """Segmentation instances of 1-8 sizes: (gaps drawn from `gaps`, each size's acceptable
    configs among a-d, each config's fraction of the best)."""
    return st.integers(1, 8).flatmap(
        lambda m: st.tuples(
            st.lists(st.sampled_from(gaps), min_size=m, max_size=m),
            st.lists(st.sets(st.sampled_from("abcd"), min_size=1), min_size=m, max_size=m),
            st.lists(st.floats(0.5, 1.0), min_size=4, max_size=4),
        )
    )


instances = ladders([1, 1, 3])


@settings(max_examples=300, deadline=None)
@given(instances)
def test_segment_is_minimal(inst):
    gaps, sets, fr = inst
    sizes = list(itertools.accumulate(gaps))
    acc = [{c: fr["abcd".index(c)] for c in s} for s in sets]
    bands, wide = segment(sizes, acc, max_bracket=2)
    # a valid segmentation: contiguous, covering, the band config acceptable at every size
    assert bands[0][0] == 0 and bands[-1][1] == len(sizes) - 1
    for (i, j, c), nxt in zip(bands, bands[1:] + [None], strict=True):
        assert all(c in acc[t] for t in range(i, j + 1))
        if nxt:
            assert nxt[0] == j + 1
    assert (wide, len(bands)) == brute(sizes, acc, 2)
    # with no bracket limit the count equals the greedy count (independent witness)
    free, _ = segment(sizes, acc, max_bracket=float("inf"))
    assert len(free) == greedy_band_count([set(a) for a in acc])


def test_band_config_maximises_performance_then_simplicity():
    sizes = [1, 2, 3]
    acc = [{"a": 1.0, "b": 0.99}, {"a": 0.99, "b": 1.0}, {"a": 1.0, "b": 1.0}]
    assert segment(sizes, acc, 1)[0] == [(0, 2, "a")]  # sum 2.99 vs 2.99 -> simpler name
    acc[1]["b"] = 1.0
    acc[0]["b"] = 1.0
    assert segment(sizes, acc, 1)[0] == [(0, 2, "b")]


# ---- files: write, load, every corruption named --------------------------------------------------


@pytest.fixture(scope="module")
def built_policy():
    return build_policy(cliff_results({"fp32": new_sizes("fp32")}), manifest())


@pytest.fixture
def policy_doc(built_policy):
    """The built policy, a copy each test may change (built once per module)."""
    return copy.deepcopy(built_policy)


def test_roundtrip_and_describe(tmp_path, policy_doc):
    path = write_policy(tmp_path / "policy.json", policy_doc)
    doc = load_policy(path)
    assert doc["kind"] == "policy" and doc["schema_version"] == 1
    assert doc["provenance"]["run_ids"] == ["r1"] and doc["provenance"]["tolerance"] == 0.02
    assert doc["configs"]["stream"]["load_hint"] == "cs"
    text = describe(doc)
    assert "stream" in text and "bracketed" in text
    merged = load_any(path)
    assert merged["entries"][0]["cc"] == [8, 9]


# tolerance_by_range values refused (provenance.tolerance set to their largest)
RANGES = {
    "entry_number": [5, {"hi_bytes": None, "tolerance": 0.02}],
    "last_no_hi": [{"hi_bytes": 2**20, "tolerance": 0.02}, {"tolerance": 0.02}],
    "hi_text_inside": [
        {"hi_bytes": 2**20, "tolerance": 0.02},
        {"hi_bytes": "2 MiB", "tolerance": 0.02},
        {"hi_bytes": None, "tolerance": 0.02},
    ],  # fmt: skip
    "hi_float_inside": [
        {"hi_bytes": 2**20, "tolerance": 0.02},
        {"hi_bytes": 2.0 * 2**20, "tolerance": 0.02},
        {"hi_bytes": None, "tolerance": 0.02},
    ],  # fmt: skip
    "no_tolerance": [{"hi_bytes": 2**20}, {"hi_bytes": None, "tolerance": 0.02}],
    "tolerance_one": [{"hi_bytes": 2**20, "tolerance": 1.0}, {"hi_bytes": None, "tolerance": 0.02}],
    "tolerance_big": [{"hi_bytes": 2**20, "tolerance": 1.5}, {"hi_bytes": None, "tolerance": 0.02}],
}


def _corrupt(doc, how):
    d = copy.deepcopy(doc)
    bands = d["dtypes"]["fp32"]["bands"]
    if how == "gap":
        bands[1]["lo_bytes"] += 32
    elif how == "overlap":
        bands[1]["lo_bytes"] -= 32
    elif how == "start":
        bands[0]["lo_bytes"] = 64
    elif how == "open_end":
        bands[-1]["hi_bytes"] = 10**12
    elif how == "unknown_config":
        bands[0]["config"] = "nope"
    elif how == "config_field":
        del d["configs"]["plain"]["store_hint"]
    elif how == "vec_bytes":
        d["configs"]["plain"]["vec_bytes"] = 12
    elif how == "grid":
        d["configs"]["plain"]["grid"] = "weird"
    elif how == "dtype":
        d["dtypes"]["fp64"] = d["dtypes"]["fp32"]
    elif how == "no_bands":
        bands.clear()
    elif how == "empty_band":
        bands[0]["hi_bytes"] = 0
    elif how == "rel_swapped":
        bands[0]["hi_rel"], bands[1]["hi_rel"] = bands[1]["hi_rel"], bands[0]["hi_rel"]
    elif how == "rel_nan":
        bands[0]["hi_rel"] = float("nan")
    elif how == "rel_missing":
        del bands[1]["lo_rel"]
    elif how == "no_generic":
        del d["dtypes"]["fp32"]["generic"]
    elif how.startswith("no_") and how[3:] in bands[1]:  # a band's field missing
        del bands[1][how[3:]]
    elif how == "no_sizes":
        bands[1]["n_sizes"] = 0
    elif how == "first_after_last":
        bands[1]["first_measured"] = bands[1]["last_measured"] + 32
    elif how in ("worst_frac_nan", "mean_frac_nan"):
        bands[1][how.replace("_nan", "_of_best")] = float("nan")
    elif how == "outside_beyond":
        bands[1]["outside_tolerance"] = [bands[1]["last_measured"] + 32]
    elif how == "outside_below":
        bands[1]["outside_tolerance"] = [bands[1]["first_measured"] - 32]
    elif how == "outside_number":
        bands[1]["outside_tolerance"] = 5
    elif how == "run_ids_text":
        d["provenance"]["run_ids"] = "r1"
    elif how == "run_ids_number":
        d["provenance"]["run_ids"] = ["r1", 2]
    elif how.startswith("prov_no_"):
        del d["provenance"][how[8:]]
    elif how == "resolution_zero":
        d["provenance"]["resolution"] = 0
    elif how == "l2_zero":
        d["l2_bytes"] = 0
    elif how == "l2_not_device":
        d["l2_bytes"] += 2**20
    elif how == "cc_three":
        d["cc"] = [8, 9, 0]
    elif how == "cc_bool":
        d["cc"] = [8, True]
    elif how == "resolution_bytes_off":
        d["resolution_bytes"] *= 1 + 1e-6
    elif how == "l2_one":
        d["l2_bytes"] = 1
    elif how == "device_cc_not_gpu":
        d["provenance"]["gpu"], d["cc"] = "h200", [9, 0]
    elif how == "device_sms_not_gpu":  # the H200's compute capability, another GPU's SMs
        d["provenance"]["gpu"], d["cc"] = "h200", [9, 0]
        d["provenance"]["device"]["cc"] = [9, 0]
    elif how == "l2_not_gpu":  # the H200's compute capability and SMs, another GPU's L2
        d["provenance"]["gpu"], d["cc"] = "h200", [9, 0]
        d["provenance"]["device"].update(cc=[9, 0], sm_count=132)
    elif how == "another_gpu":
        d["provenance"]["gpu"] = "h200"
    elif how == "next_band_number":
        bands[1] = 5
    elif how == "band_number":
        bands[0] = 5
    elif how == "first_no_lo":
        del bands[0]["lo_bytes"]
    elif how == "no_hi":
        del bands[0]["hi_bytes"]
    elif how == "hi_text":
        bands[0]["hi_bytes"] = "33701888"
    elif how == "lo_float":
        bands[1]["lo_bytes"] = float(bands[1]["lo_bytes"])
    elif how == "last_hi_rel":
        bands[-1]["hi_rel"] = 2.0
    elif how == "lo_rel_false":
        bands[0]["lo_rel"] = False
    elif how == "first_no_bracket":
        del bands[0]["bracket_below"]
    elif how == "first_bracket":
        bands[0]["bracket_below"] = [0, 32]
    elif how == "bracket_three":
        bands[1]["bracket_below"] = [*bands[1]["bracket_below"], 64]
    elif how == "bracket_float":
        bands[1]["bracket_below"][0] = float(bands[1]["bracket_below"][0])
    elif how == "bracket_wide":
        bands[1]["bracket_below"][0] -= int(d["resolution_bytes"])
    elif how == "bracket_not_neighbours":
        bands[0]["last_measured"] -= 32
    elif how in ("lo_at_below", "lo_above"):
        lo, hi = bands[1]["bracket_below"]
        edge = lo if how == "lo_at_below" else hi + 32
        bands[0]["hi_bytes"] = bands[1]["lo_bytes"] = edge
        bands[0]["hi_rel"] = bands[1]["lo_rel"] = edge / d["l2_bytes"]
    elif how.startswith("ranges_") and how[7:] in RANGES:
        d["provenance"]["tolerance_by_range"] = RANGES[how[7:]]
        d["provenance"]["tolerance"] = max(
            (r["tolerance"] for r in RANGES[how[7:]] if isinstance(r, dict) and "tolerance" in r),
            default=0.02,
        )
    elif how == "ranges_number":
        d["provenance"]["tolerance_by_range"] = 5
    elif how == "ranges_open_end":
        d["provenance"]["tolerance_by_range"] = [{"hi_bytes": 2**20, "tolerance": 0.02}]
    elif how == "ranges_max":
        d["provenance"]["tolerance_by_range"] = [
            {"hi_bytes": 2**20, "tolerance": 0.03}, {"hi_bytes": None, "tolerance": 0.02}
        ]  # fmt: skip
    return d


@pytest.mark.parametrize(
    "how,field,words",
    [
        ("gap", "dtypes.fp32.bands[1].lo_bytes", "gap"),
        ("overlap", "dtypes.fp32.bands[1].lo_bytes", "overlap"),
        ("start", "dtypes.fp32.bands[0].lo_bytes", "start at 0"),
        ("open_end", "dtypes.fp32.bands[2].hi_bytes", "open-ended"),
        ("unknown_config", "dtypes.fp32.bands[0].config", "not in the config table"),
        ("config_field", "configs.plain.store_hint", "missing"),
        ("vec_bytes", "configs.plain.vec_bytes", "one of"),
        ("grid", "configs.plain.grid", "onepass"),
        ("dtype", "dtypes.fp64", "unknown dtype"),
        ("no_bands", "dtypes.fp32.bands", "non-empty"),
        ("empty_band", "dtypes.fp32.bands[0].hi_bytes", "empty"),
        ("rel_swapped", "dtypes.fp32.bands[0].hi_rel", "is not hi_bytes / l2_bytes"),
        ("rel_nan", "dtypes.fp32.bands[0].hi_rel", "nan is not hi_bytes / l2_bytes"),
        ("rel_missing", "dtypes.fp32.bands[1].lo_rel", "'missing' is not lo_bytes"),
        ("no_generic", "dtypes.fp32.generic", "missing (the config for other GPUs)"),
        ("no_first_measured", "dtypes.fp32.bands[1].first_measured", "missing"),
        ("no_last_measured", "dtypes.fp32.bands[1].last_measured", "missing"),
        ("no_n_sizes", "dtypes.fp32.bands[1].n_sizes", "missing"),
        ("no_worst_frac_of_best", "dtypes.fp32.bands[1].worst_frac_of_best", "missing"),
        ("no_mean_frac_of_best", "dtypes.fp32.bands[1].mean_frac_of_best", "missing"),
        ("no_bracket_below", "dtypes.fp32.bands[1].bracket_below", "found 'missing'"),
        ("first_no_bracket", "dtypes.fp32.bands[0].bracket_below", "the first band has none"),
        ("band_number", "dtypes.fp32.bands[0]", "expected an object"),
        ("run_ids_text", "provenance.run_ids", "expected list"),
        ("run_ids_number", "provenance.run_ids", "expected a list of run ids"),
        *(
            (f"prov_no_{f}", f"provenance.{f}", "missing")
            for f in (
                "run_ids",
                "gpu",
                "mode",
                "pattern",
                "plan_hash",
                "tolerance",
                "resolution",
                "device",
            )
        ),  # fmt: skip
        ("resolution_zero", "provenance.resolution", "must be a positive integer, found 0"),
        ("l2_zero", "l2_bytes", "must be > 0"),
        ("l2_not_device", "l2_bytes", "76546048 is not provenance.device.l2_bytes (75497472)"),
        ("cc_three", "cc", "expected [major, minor], found [8, 9, 0]"),
        ("cc_bool", "cc", "expected [major, minor], found [8, True]"),
        (
            "resolution_bytes_off",
            "resolution_bytes",
            "is not l2_bytes / provenance.resolution (2359296.0)",
        ),
        ("another_gpu", "cc", "is not the NVIDIA H200"),
        (
            "device_cc_not_gpu",
            "provenance.device.cc",
            "[8, 9] is not the NVIDIA H200's ([9, 0]), the GPU the policy names: it was measured "
            "on another GPU",
        ),
        ("device_sms_not_gpu", "provenance.device.sm_count", "128 is not the NVIDIA H200's (132)"),
        ("l2_not_gpu", "l2_bytes", "75497472 is not the NVIDIA H200's (62914560)"),
        ("next_band_number", "dtypes.fp32.bands[1].lo_bytes", "gap: previous band ends at"),
        ("no_config", "dtypes.fp32.bands[1].config", "missing"),
        ("first_no_lo", "dtypes.fp32.bands[0].lo_bytes", "missing"),
        ("no_hi", "dtypes.fp32.bands[0].hi_bytes", "expected a number, found 'missing'"),
        ("hi_text", "dtypes.fp32.bands[0].hi_bytes", "expected a number, found '33701888'"),
        ("lo_float", "dtypes.fp32.bands[1].lo_bytes", "expected int"),
        ("last_hi_rel", "dtypes.fp32.bands[2].hi_rel", "2.0 is not hi_bytes / l2_bytes (None)"),
        ("lo_rel_false", "dtypes.fp32.bands[0].lo_rel", "False is not lo_bytes / l2_bytes (0.0)"),
        ("no_sizes", "dtypes.fp32.bands[1].n_sizes", "at least one measured size"),
        ("first_after_last", "dtypes.fp32.bands[1].n_sizes", "at least one measured size"),
        ("worst_frac_nan", "dtypes.fp32.bands[1].worst_frac_of_best", "found nan"),
        ("mean_frac_nan", "dtypes.fp32.bands[1].mean_frac_of_best", "found nan"),
        ("outside_beyond", "dtypes.fp32.bands[1].outside_tolerance", "found [75497504]"),
        ("outside_below", "dtypes.fp32.bands[1].outside_tolerance", "found [33849312]"),
        ("outside_number", "dtypes.fp32.bands[1].outside_tolerance", "served outside the"),
        ("first_bracket", "dtypes.fp32.bands[0].bracket_below", "the first band has none"),
        ("bracket_three", "dtypes.fp32.bands[1].bracket_below", "expected [below, above] bytes"),
        ("bracket_float", "dtypes.fp32.bands[1].bracket_below", "found [33554432.0, 33849344]"),
        ("bracket_wide", "dtypes.fp32.bands[1].bracket_below", "wider than the plan resolution"),
        (
            "bracket_not_neighbours",
            "dtypes.fp32.bands[1].bracket_below",
            "is not [the band below's last_measured, first_measured] ([33554400, 33849344])",
        ),
        ("lo_at_below", "dtypes.fp32.bands[1].lo_bytes", "33554432 is outside its bracket"),
        ("lo_above", "dtypes.fp32.bands[1].lo_bytes", "33849376 is outside its bracket"),
        ("ranges_number", "provenance.tolerance_by_range", "the last hi_bytes null"),
        *(
            ("ranges_" + k, "provenance.tolerance_by_range", "the last hi_bytes null")
            for k in RANGES
        ),
        ("ranges_open_end", "provenance.tolerance_by_range", "the last hi_bytes null"),
        ("ranges_max", "provenance.tolerance", "the largest of tolerance_by_range"),
    ],
)
def test_each_corruption_is_named(tmp_path, policy_doc, how, field, words):
    path = tmp_path / "policy.json"
    bad = {"kind": "policy", "schema_version": 1, **_corrupt(policy_doc, how)}
    path.write_text(json.dumps(bad))
    with pytest.raises(SchemaError) as e:
        load_policy(path)
    assert e.value.field == field and words in str(e.value)


def test_a_resolution_in_bytes_within_a_billionth_of_its_value_is_taken(tmp_path, policy_doc):
    """resolution_bytes is l2_bytes / provenance.resolution to a relative 1e-9 (another
    writer's float, printed to fewer digits, reads as the same step)."""
    doc = copy.deepcopy(policy_doc)
    doc["resolution_bytes"] *= 1 + 1e-12
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"kind": "policy", "schema_version": 1, **doc}))
    assert load_policy(path)["resolution_bytes"] == doc["resolution_bytes"]


def test_newer_version_and_wrong_kind_refused(tmp_path, policy_doc):
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"kind": "policy", "schema_version": 99, **policy_doc}))
    with pytest.raises(SchemaError, match="upgrade sweeper"):
        load_policy(path)
    path.write_text(json.dumps({"kind": "plan", "schema_version": 1, **policy_doc}))
    with pytest.raises(SchemaError, match="kind"):
        load_policy(path)


# ---- merge --------------------------------------------------------------------------------------


def _gpu_policy(l2, cc, gpu, edge_rel, sms=128):
    """A GPU whose 'stream' is best below edge_rel * L2 and 'plain' above (gap-free sizes)."""
    step = l2 // 64
    sizes = [k * step for k in range(1, 129)]
    rows = [
        row(
            "fp32",
            ws,
            c,
            (1100.0 if ws < edge_rel * l2 else 900.0) if c == "stream" else 1000.0,
            gpu=gpu,
        )
        for ws in sizes
        for c in ("plain", "stream")
    ]
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    return build_policy(df, manifest(l2=l2, cc=cc, gpu=gpu, run_id=f"run-{gpu}", sms=sms))


def test_merge_agree_and_disagree(tmp_path):
    a = _gpu_policy(72 * MiB, (8, 9), "4090", 0.5)
    b = _gpu_policy(60 * MiB, (9, 0), "h200", 0.5, sms=132)
    merged = merge_docs([a, b], ["a.json", "b.json"])
    assert merged["disagreements"] == []
    assert [e["gpu"] for e in merged["entries"]] == ["4090", "h200"]
    path = write_merged(tmp_path / "m.json", merged)
    assert load_merged(path)["kind"] == "merged-policy"

    c = _gpu_policy(60 * MiB, (9, 0), "h200", 1.5, sms=132)  # streams up to 1.5x L2
    merged = merge_docs([a, c], ["a.json", "c.json"])
    (d,) = merged["disagreements"]
    assert d["dtype"] == "fp32" and d["configs"] == ["plain", "stream"]
    assert d["rel"][0] == pytest.approx(0.5, abs=1 / 64) and d["rel"][1] == pytest.approx(
        1.5, abs=1 / 64
    )
    assert "DISAGREE" in describe(merged)


def test_merge_refuses_two_policies_for_one_gpu():
    a = _gpu_policy(72 * MiB, (8, 9), "4090", 0.5)
    with pytest.raises(SweeperError, match="one policy per GPU"):
        merge_docs([a, a], ["a.json", "b.json"])


# ---- CLI end to end on a written run folder --------------------------------------------------


def test_cli_select_policy_export(tmp_path):
    from typer.testing import CliRunner

    from sweeper.analyze.store import write_run
    from sweeper.cli import app

    run = tmp_path / "results" / "synth" / "r1"
    write_run(run, manifest(), cliff_results({"fp32": new_sizes("fp32")}))
    cli = CliRunner()
    r = cli.invoke(app, ["select", str(run)])
    assert r.exit_code == 0, r.output
    assert (run / "selection.csv").exists() and (run / "selection.md").exists()
    r = cli.invoke(app, ["policy", "build", str(run), "--mode", "hot,cold"])
    assert r.exit_code == 1 and not (run / "policy.json").exists()
    assert r.output.strip().splitlines() == [
        "error: --mode hot,cold: a policy is built for one mode; build one per mode"
    ]
    r = cli.invoke(app, ["policy", "build", str(run), "--modes", "hot"])
    assert r.exit_code == 0, r.output
    assert "bracketed" in r.output and (run / "policy.json").exists()
    r = cli.invoke(app, ["export", str(run / "policy.json"), "--format", "cuda"])
    assert r.exit_code == 0, r.output
    assert (run / "relu_policy.cuh").read_text().count("V_stream::launch<Dt::F32>") == 2
    r = cli.invoke(
        app, ["policy", "merge", str(run / "policy.json"), "-o", str(tmp_path / "m.json")]
    )
    assert r.exit_code == 0 and "fallback" in r.output

    old = tmp_path / "results" / "synth" / "old"
    write_run(old, manifest(run_id="old"), cliff_results({"fp16": old_sizes("fp16")}))
    r = cli.invoke(app, ["policy", "build", str(old)])
    assert r.exit_code == 1 and "fp16" in r.output and "--resume" in r.output


# ---- the bracket rule, at, just inside and just outside the plan resolution ---------------


def _switch_results(gap: int) -> pd.DataFrame:
    """fp32 sizes every `step` bytes up to 20 MiB, then one `gap` bytes further, and on; the
    best config switches from "plain" to "stream" across that one gap."""
    step = L2 // 32
    below = [4 * MiB + k * step for k in range(8)]
    above = [below[-1] + gap + k * step for k in range(8)]
    rows = []
    for ws in below + above:
        fast = "plain" if ws in below else "stream"
        for c in ("plain", "stream"):
            rows.append(row("fp32", ws, c, 1000.0 if c == fast else 500.0))
    return pd.DataFrame(rows, columns=list(COLUMNS))


@pytest.mark.parametrize(
    "extra, refused", [(-32, False), (0, False), (32, True)], ids=["inside", "at", "outside"]
)
def test_a_boundary_is_placed_only_in_a_bracket_no_wider_than_the_resolution(extra, refused):
    gap = L2 // 32 + extra  # resolution 32: the plan's dense step is L2 / 32
    results = _switch_results(gap)
    if refused:
        with pytest.raises(SweeperError, match="a bracket wider than the plan resolution"):
            build_policy(results, manifest(resolution=32))
        return
    doc = build_policy(results, manifest(resolution=32))
    bands = doc["dtypes"]["fp32"]["bands"]
    assert [b["config"] for b in bands] == ["plain", "stream"]
    lo, hi = bands[1]["bracket_below"]
    assert hi - lo == gap
    # the edge is the bracket's midpoint, not either measured size
    assert bands[1]["lo_bytes"] == (lo + hi) // 2 and bands[0]["hi_bytes"] == (lo + hi) // 2


# ---- segmentation edge cases ---------------------------------------------------------------


def test_segmenting_nothing_gives_no_bands_and_no_wide_bracket():
    assert segment([], [], 1.0) == ([], 0)
    assert greedy_band_count([]) == 0
    assert greedy_band_count([{"a"}]) == 1


def test_equal_configs_are_broken_by_the_simpler_key_else_by_name():
    acc = [{"b": 1.0, "a": 1.0}, {"b": 1.0, "a": 1.0}]
    assert segment([1, 2], acc, 10.0) == ([(0, 1, "a")], 0)
    assert segment([1, 2], acc, 10.0, simpler=lambda c: -ord(c)) == ([(0, 1, "b")], 0)


def test_a_config_closer_to_the_best_wins_a_band_of_the_same_count():
    """Both A and B serve every size; A is the faster overall: one band of A."""
    acc = [{"A": 1.0, "B": 0.99}, {"A": 0.99, "B": 1.0}, {"A": 1.0, "B": 0.98}]
    assert segment([1, 2, 3], acc, 10.0) == ([(0, 2, "A")], 0)


def test_on_a_full_tie_the_earlier_band_extends_as_far_as_it_can():
    acc = [{"A": 1.0}, {"A": 1.0, "B": 1.0}, {"B": 1.0}]
    assert segment([1, 2, 3], acc, 10.0) == ([(0, 1, "A"), (2, 2, "B")], 0)


def test_wide_brackets_are_counted_only_between_sizes():
    acc = [{"A": 1.0}, {"B": 1.0}]
    assert segment([0, 100], acc, 100.0)[1] == 0  # at the limit: fine
    assert segment([0, 101], acc, 100.0)[1] == 1
    assert segment([500], [{"A": 1.0}], 1.0) == ([(0, 0, "A")], 0)  # no bracket below the first


def test_of_two_segmentations_with_as_many_bands_the_one_closer_to_the_best_wins():
    """[A][B B] serves every size at its best (sum 3.0); [A A][B] serves the middle size at
    0.99 of its best (2.99): the first."""
    acc = [{"A": 1.0}, {"A": 0.99, "B": 1.0}, {"B": 1.0}]
    assert segment([1, 2, 3], acc, 10.0) == ([(0, 0, "A"), (1, 2, "B")], 0)


# ---- no band on one finely sampled size --------------------------------------------------


def brute_two_size(sizes, acc, measured, max_bracket, tol):
    """(wide, total miss cost, bands) of the best segmentation by enumeration: bands of two
    sizes or more except beside a wide gap, a config measured across its band and inside the
    tolerance at every size beside a wide gap; None when there is none."""
    m = len(sizes)
    gap = [b - a for a, b in zip(sizes, sizes[1:], strict=False)]
    loose = [
        max(gap[t - 1] if t else 0, gap[t] if t < m - 1 else 0) > max_bracket for t in range(m)
    ]
    best = None
    for cuts in itertools.product([0, 1], repeat=m - 1):
        starts = [0] + [k + 1 for k in range(m - 1) if cuts[k]]
        ends = [s - 1 for s in starts[1:]] + [m - 1]
        total = 0
        for i, j in zip(starts, ends, strict=True):
            if i == j and m > 1 and not loose[i]:
                break
            fits = [
                sum(miss_cost(measured[t][c], tol) for t in range(i, j + 1) if c not in acc[t])
                for c in "abcd"
                if all(c in measured[t] and (c in acc[t] or not loose[t]) for t in range(i, j + 1))
            ]
            if not fits:
                break
            total += min(fits)
        else:
            wide = sum(1 for i in starts[1:] if sizes[i] - sizes[i - 1] > max_bracket)
            cost = (wide, total, len(starts))
            best = cost if best is None or cost < best else best
    return best


two_size_instances = ladders([1, 1, 1, 3])  # mostly fine sizes, where lone winners are absorbed


@settings(max_examples=300, deadline=None)
@given(two_size_instances)
def test_lone_winners_on_fine_sizes_are_absorbed_where_a_neighbour_can_serve(inst):
    gaps, sets, fr = inst
    sizes = list(itertools.accumulate(gaps))
    acc = [{c: fr["abcd".index(c)] for c in s} for s in sets]
    # a config is measured at a size or not (a failed cell, a refinement size)
    measured = [
        {c: 0.9 * fr["abcd".index(c)] for c in "abcd" if (k + "abcd".index(c)) % 3} | a
        for k, a in enumerate(acc)
    ]
    tol = [0.02] * len(sizes)
    bands, wide = segment(sizes, acc, 2, measured=measured, tolerance=tol)
    assert bands[0][0] == 0 and bands[-1][1] == len(sizes) - 1
    want = brute_two_size(sizes, acc, measured, 2, 0.02)
    if want is None:  # two neighbours share no measured config: the tied-set segmentation
        assert (bands, wide) == segment(sizes, acc, 2)
        return
    for (i, j, c), nxt in zip(bands, bands[1:] + [None], strict=True):
        if nxt:
            assert nxt[0] == j + 1
        assert all(c in measured[t] for t in range(i, j + 1))
    cost = sum(
        miss_cost(measured[t][c], 0.02)
        for i, j, c in bands
        for t in range(i, j + 1)
        if c not in acc[t]
    )
    assert (wide, cost, len(bands)) == want
    assert {t for i, j, c in bands for t in range(i, j + 1) if c not in acc[t]} == set(
        misses(bands, acc)
    )


def test_a_lone_winner_among_fine_sizes_joins_a_neighbours_band_and_is_listed():
    """B wins at the middle of five finely sampled sizes alone (A is 3% behind there): one
    band of A, which names that size as served outside the tolerance."""
    sizes = [10, 11, 12, 13, 14]
    acc = [{"A": 1.0}, {"A": 1.0}, {"B": 1.0}, {"A": 1.0}, {"A": 1.0}]
    measured = [{"A": 1.0, "B": 0.9}, {"A": 1.0, "B": 0.9}, {"A": 0.97, "B": 1.0}, *acc[3:]]
    measured[3] = measured[4] = {"A": 1.0, "B": 0.9}
    bands, wide = segment(sizes, acc, 5, measured=measured, tolerance=[0.02] * 5)
    assert (bands, wide) == ([(0, 4, "A")], 0) and misses(bands, acc) == [2]
    assert segment(sizes, acc, 5) == ([(0, 1, "A"), (2, 2, "B"), (3, 4, "A")], 0)


def test_a_lone_winner_joins_the_band_that_serves_its_size_best_even_at_a_band_more():
    """A failed cell leaves B measured alone at 13 (A's cell failed there) and C wins at 12
    alone: A's band would serve 12 at 0.43 of the best (cost 28 at 2%), B's at 0.966 (cost 1),
    so 12 joins B's band [12, 13], though that takes three bands, not two."""
    sizes = [10, 11, 12, 13, 14, 15]
    acc = [{"A": 1.0}, {"A": 1.0}, {"C": 1.0}, {"B": 1.0}, {"A": 1.0}, {"A": 1.0}]
    measured = [
        {"A": 1.0, "B": 0.9},
        {"A": 1.0, "B": 0.9},
        {"A": 0.43, "B": 0.966, "C": 1.0},
        {"B": 1.0, "C": 0.5},
        {"A": 1.0, "B": 0.9},
        {"A": 1.0, "B": 0.9},
    ]
    bands, _ = segment(sizes, acc, 5, measured=measured, tolerance=[0.02] * 6)
    assert bands == [(0, 1, "A"), (2, 3, "B"), (4, 5, "A")] and misses(bands, acc) == [2]
    assert miss_cost(0.43, 0.02) == 28 and miss_cost(0.966, 0.02) == 1


def test_a_lone_winner_beside_a_wide_gap_keeps_its_band_and_its_wide_brackets():
    """The same winner sampled once between gaps wider than the resolution may be the only
    sample of a real change (the v2 cliff): it is kept, and its brackets are reported."""
    sizes = [10, 11, 20, 29, 30]
    acc = [{"A": 1.0}, {"A": 1.0}, {"B": 1.0}, {"A": 1.0}, {"A": 1.0}]
    measured = [{"A": 1.0, "B": 0.9}] * 2 + [{"A": 0.5, "B": 1.0}] + [{"A": 1.0, "B": 0.9}] * 2
    assert segment(sizes, acc, 5, measured=measured, tolerance=[0.02] * 5) == (
        [(0, 1, "A"), (2, 2, "B"), (3, 4, "A")],
        2,
    )


def test_two_finely_sampled_sizes_with_different_winners_make_one_band():
    """Each of two sizes one step apart is a lone winner: neither gets a band of its own; the
    config that serves the other size closer to its best takes both."""
    acc = [{"A": 1.0}, {"B": 1.0}]
    measured = [{"A": 1.0, "B": 0.97}, {"A": 0.9, "B": 1.0}]
    bands, wide = segment([10, 11], acc, 5, measured=measured, tolerance=[0.02] * 2)
    assert (bands, wide) == ([(0, 1, "B")], 0) and misses(bands, acc) == [0]


def test_where_neighbours_share_no_measured_config_the_one_size_bands_keep_the_simpler_key():
    """No config is measured at both 1 and 2, so no band can span them: the tied-set
    segmentation decides, with the same simplicity order, and reports the wide bracket."""
    sizes = [1, 2, 30]
    acc = [{"a": 1.0, "b": 1.0}, {"c": 1.0}, {"d": 1.0}]
    tol = [0.02] * 3
    bands, wide = segment(sizes, acc, 10, lambda c: -ord(c), measured=acc, tolerance=tol)
    assert (bands, wide) == ([(0, 0, "b"), (1, 1, "c"), (2, 2, "d")], 1)
    assert segment(sizes, acc, 10, measured=acc, tolerance=tol)[0][0] == (0, 0, "a")


@pytest.mark.parametrize("path", sorted(ROOT.glob("results/*/*/policy.json")), ids=str)
def test_no_shipped_policy_band_rests_on_one_size(path):
    doc = load_policy(path)
    for dtype, d in doc["dtypes"].items():
        for b in d["bands"]:
            assert b["n_sizes"] >= 2, (dtype, b["config"], b["first_measured"])
            assert all(
                b["first_measured"] <= x <= b["last_measured"]
                for x in b.get("outside_tolerance", [])  # absent in policies built before it
            )
            assert doc["provenance"]["tolerance"] >= 0.02


@pytest.mark.parametrize(
    ("modes", "wanted", "got"),
    [
        (("hot", "after-write"), None, "after-write"),  # production's residency by default
        (("hot", "after-write"), "hot", "hot"),
        (("hot", "cold"), None, "hot"),
        (("cold",), None, "cold"),
    ],
)
def test_a_policy_is_built_for_one_mode_after_write_by_default(modes, wanted, got):
    sizes = [s * MiB for s in range(33, 72, 2)]  # the band: "plain" wins, 1000 vs 400 GB/s
    frames = []
    for m in modes:  # ... except after a producer, where "stream" runs 4x faster
        f = cliff_results({"fp32": sizes}).assign(mode=m)
        if m == "after-write":
            fast = f.config == "stream"
            f.loc[fast, ["gbps", "ratio", "ratio_lo", "ratio_hi"]] *= 4
            f.loc[fast, ["time_us", "time_lo_us", "time_hi_us"]] /= 4
        frames.append(f)
    doc = build_policy(pd.concat(frames, ignore_index=True), manifest(), mode=wanted)
    assert doc["provenance"]["mode"] == got
    configs = {b["config"] for b in doc["dtypes"]["fp32"]["bands"]}
    assert configs == ({"stream"} if got == "after-write" else {"plain"})


@pytest.mark.parametrize(("moved", "want"), [(0.03, 0.03), (0.005, 0.02)])
def test_the_tie_tolerance_can_come_from_verifys_pass_to_pass_movement(tmp_path, moved, want):
    from typer.testing import CliRunner

    from sweeper.analyze.store import write_run
    from sweeper.cli import app

    run = tmp_path / "results" / "synth" / "r1"
    sizes = new_sizes("fp32")
    write_run(run, manifest(), cliff_results({"fp32": sizes}))
    rows = [
        {"pass": p, "mode": "hot", "dtype": "fp32", "n": ws // 8, "ws_bytes": ws, "config": "plain",
         "gbps": 1000.0, "vs_numba": 1.0, "ratio": r, "ratio_lo": r - 0.01, "ratio_hi": r + 0.01}
        for ws in sizes[:20]
        for p, r in ((1, 1.0), (2, 1.0 + moved))
    ]  # fmt: skip
    pd.DataFrame(rows).to_csv(run / "verify_timing.csv", index=False)
    record_derived(run / "verify_timing.csv")  # as `sweeper verify` records what it wrote
    r = CliRunner().invoke(app, ["policy", "build", str(run), "--tolerance", "verify"])
    assert r.exit_code == 0, r.output
    doc = json.loads((run / "policy.json").read_text())
    assert doc["provenance"]["tolerance"] == pytest.approx(want)


def test_the_tolerance_from_verify_is_taken_per_range_of_working_set(tmp_path):
    """Ratios that move 4% between passes at <= 1 MiB and 1% above: the tie tolerance is
    4% there and the 2% floor elsewhere; a range with fewer than TOLERANCE_MIN_SIZES sizes
    takes the p95 over all sizes. A size's ties follow its range's tolerance."""
    from sweeper import api
    from sweeper.analyze.select import TOLERANCE_MIN_SIZES, tolerance_at
    from sweeper.analyze.store import write_run

    run = tmp_path / "results" / "synth" / "r1"
    write_run(run, manifest(), cliff_results({"fp32": new_sizes("fp32")}))
    small = [int(k * MiB / 16) for k in range(1, 17)]  # 16 sizes in (0, 1 MiB]
    mid = [int(MiB * (1 + k / 4)) for k in range(1, TOLERANCE_MIN_SIZES)]  # 9 in (1, 4]
    large = [int(MiB * (16 + 4 * k)) for k in range(1, 40)]  # 39 in (16, 64] and above
    rows = [
        {"pass": p, "mode": "hot", "dtype": "fp32", "n": ws // 8, "ws_bytes": ws, "config": "plain",
         "gbps": 1000.0, "vs_numba": 1.0, "ratio": r, "ratio_lo": r - 0.01, "ratio_hi": r + 0.01}
        for ws, moved in [*((w, 0.04) for w in small), *((w, 0.01) for w in mid + large)]
        for p, r in ((1, 1.0), (2, 1.0 + moved))
    ]  # fmt: skip
    pd.DataFrame(rows).to_csv(run / "verify_timing.csv", index=False)
    record_derived(run / "verify_timing.csv")  # as `sweeper verify` records what it wrote
    tol = api.verify_tolerance(run)
    overall = round(float(np.quantile([0.04] * 16 + [0.01] * 48, 0.95)), 4)
    fallback = max(0.02, overall)  # (1, 4]: 9 sizes, (4, 16] and (256, inf): none
    assert tol == [
        (MiB, 0.04),
        (4 * MiB, fallback),
        (16 * MiB, fallback),
        (64 * MiB, 0.02),
        (256 * MiB, 0.02),
        (None, fallback),
    ]
    assert tolerance_at(tol, MiB // 2) == 0.04 and tolerance_at(tol, 100 * MiB) == 0.02
    _, doc = api.policy_build(str(run), tolerance="verify")
    prov = doc["provenance"]
    assert prov["tolerance"] == 0.04 and prov["tolerance_by_range"][0] == {
        "hi_bytes": MiB,
        "tolerance": 0.04,
    }
    assert "0.04 in (0 B, 1 MiB]" in api.policy_show(str(run / "policy.json"))


def test_tolerance_verify_without_two_passes_is_refused_and_writes_nothing(tmp_path):
    from typer.testing import CliRunner

    from sweeper.analyze.store import write_run
    from sweeper.cli import app

    run = tmp_path / "results" / "synth" / "r1"
    write_run(run, manifest(), cliff_results({"fp32": new_sizes("fp32")}))
    for args in (["--tolerance", "verify"], ["--tolerance", "wide"]):
        r = CliRunner().invoke(app, ["policy", "build", str(run), *args])
        assert r.exit_code == 1 and r.output.count("\n") == 1, r.output
        assert not (run / "policy.json").exists()


def test_a_config_the_search_pruned_serves_no_band_and_is_not_selected():
    """A pruned config was measured only at screening sizes: even where its GB/s reads above
    the survivors' there (drift between cells timed apart), it neither splits a band nor
    wins the selection; without the manifest's `pruned` it would need a one-size band whose
    edges fall in gaps no sweep will sample."""
    from sweeper.analyze.select import searched, select

    sizes = [k * 4 * MiB for k in range(1, 12)]
    rows = [row("fp32", ws, "plain", 1000.0) for ws in sizes]
    rows.append(row("fp32", sizes[5], "stream", 1100.0))  # one screening size only
    results = pd.DataFrame(rows, columns=list(COLUMNS))
    m = manifest(resolution=32)
    with pytest.raises(SweeperError, match="a bracket wider than the plan resolution"):
        build_policy(results, m)  # its one size would need a band bracketed by 4 MiB gaps
    m["pruned"] = [{"mode": "hot", "dtype": "fp32", "config": "stream", "ws_bytes": sizes[5]}]
    bands = build_policy(results, m)["dtypes"]["fp32"]["bands"]
    assert [b["config"] for b in bands] == ["plain"]
    chosen = select(searched(results, m))
    assert set(chosen["config"]) == {"plain"} and len(chosen) == len(sizes)
    # another dtype's or mode's pruning of the same name leaves these rows alone
    m["pruned"] = [{"mode": "cold", "dtype": "fp32", "config": "stream"}]
    assert len(searched(results, m)) == len(results)


# ---- the targets' floors in ties (keep_floors) -----------------------------------------------


def _floor_results(b_late: float = 1960.0) -> pd.DataFrame:
    """fp32 at 36-41 MiB: "plain" leads by 5% at 36-38 MiB and trails "stcs" by 1.5% (a tie
    at 2%) at 39-41 MiB, where it reads 96.5% of a 2000 GB/s ceiling and "stcs" 98%."""
    rows = []
    for k, ws in enumerate(s * MiB for s in range(36, 42)):
        late = k >= 3
        rows.append(row("fp32", ws, "plain", 1930.0 if late else 2100.0))
        rows.append(row("fp32", ws, "stcs", b_late if late else 2000.0))
    return pd.DataFrame(rows)


def _ceiling_floor():
    from sweeper.analyze.targets import Target

    return Target("97% of the ceiling", ("fp32",), 32 * MiB, 48 * MiB, "pct_ceiling", 97.0)


def _bands(doc) -> list[tuple[float, str]]:
    return [(b["lo_bytes"] / MiB, b["config"]) for b in doc["dtypes"]["fp32"]["bands"]]


def test_a_tie_never_trades_away_a_floor_that_a_tied_config_meets():
    res = _floor_results()
    plain = build_policy(res, manifest())
    assert _bands(plain) == [(0, "plain")]  # one band: "plain" is tied at 39-41 MiB
    doc = build_policy(res, manifest(), floors=[_ceiling_floor()], ceiling_gbps=2000.0)
    assert _bands(doc) == [(0, "plain"), (38.5, "stcs")]  # 98% beats 96.5% where both tie
    assert doc["provenance"]["floors"] == ["97% of the ceiling"]
    assert doc["provenance"]["floored_sizes"] == 3
    assert "target floors kept: 3 sizes" in describe(doc)


@pytest.mark.parametrize(
    ("b_late", "ceiling", "why"),
    [(1935.0, 2000.0, "no tied config meets the floor"), (1960.0, None, "no ceiling measured")],
)
def test_a_floor_that_no_tied_config_meets_changes_nothing(b_late, ceiling, why):
    res = _floor_results(b_late)
    doc = build_policy(res, manifest(), floors=[_ceiling_floor()], ceiling_gbps=ceiling)
    assert _bands(doc) == _bands(build_policy(res, manifest())) == [(0, "plain")], why
    assert doc["provenance"]["floored_sizes"] == 0


def test_policy_build_keeps_the_project_targets_floors_unless_told_not_to(tmp_path):
    """The CLI builds with the default targets (the ceiling from the
    manifest); --no-floors builds as before floors existed, with no floors in provenance."""
    from typer.testing import CliRunner

    from sweeper.analyze.store import write_run
    from sweeper.cli import app

    run = tmp_path / "results" / "synth" / "r1"
    write_run(run, {**manifest(), "ceiling": {"mode": "hot", "gbps": 2000.0}}, _floor_results())
    cli = CliRunner()
    r = cli.invoke(app, ["policy", "build", str(run)])
    assert r.exit_code == 0, r.output
    doc = json.loads((run / "policy.json").read_text())
    assert ">= 97% of the L2 ceiling in (32, 48] MiB" in doc["provenance"]["floors"]
    assert _bands(doc) == [(0, "plain"), (38.5, "stcs")]
    r = cli.invoke(app, ["policy", "build", str(run), "--no-floors"])
    assert r.exit_code == 0, r.output
    doc = json.loads((run / "policy.json").read_text())
    assert "floors" not in doc["provenance"] and _bands(doc) == [(0, "plain")]


def test_a_targets_file_sets_the_floors_and_a_bad_one_writes_nothing(tmp_path):
    """`policy build --targets FILE` keeps that file's floors (as `report --targets` reads
    it); a bad file, or --targets with --no-floors, is one line and no policy.json."""
    from typer.testing import CliRunner

    from sweeper.analyze.store import write_run
    from sweeper.cli import app

    run = tmp_path / "results" / "synth" / "r1"
    write_run(run, {**manifest(), "ceiling": {"mode": "hot", "gbps": 2000.0}}, _floor_results())
    good = tmp_path / "t.json"
    good.write_text(json.dumps({"targets": [
        {"name": "98% of the ceiling", "metric": "pct_ceiling", "floor": 98, "modes": ["hot"]}]}))  # fmt: skip
    bad = tmp_path / "bad.json"
    bad.write_text('{"targets": [{"name": "x"}]}')
    cli = CliRunner()
    for argv in (["--targets", str(bad)], ["--targets", str(good), "--no-floors"]):
        r = cli.invoke(app, ["policy", "build", str(run), *argv])
        assert r.exit_code == 1 and len(r.output.strip().splitlines()) == 1, r.output
        assert not (run / "policy.json").exists()
    r = cli.invoke(app, ["policy", "build", str(run), "--targets", str(good)])
    assert r.exit_code == 0, r.output
    doc = json.loads((run / "policy.json").read_text())
    assert doc["provenance"]["floors"] == ["98% of the ceiling"]
    assert _bands(doc) == [(0, "plain"), (38.5, "stcs")]  # stcs reads 98%, plain 96.5%


def test_a_gap_exactly_the_resolution_is_finely_sampled():
    """A lone winner between neighbours exactly one resolution apart joins a band (a miss);
    one a hair wider keeps its band (a wide gap)."""
    from sweeper.analyze.bands import segment

    acc = [{"a": 1.0}, {"b": 1.0}, {"a": 1.0}]
    measured = [{"a": 1.0, "b": 0.99}, {"a": 0.99, "b": 1.0}, {"a": 1.0, "b": 0.99}]
    tol = [0.02] * 3
    bands, wide = segment([100, 200, 300], acc, 100, measured=measured, tolerance=tol)
    assert [c for *_, c in bands] == ["a"] and wide == 0
    bands, wide = segment([100, 201, 302], acc, 100, measured=measured, tolerance=tol)
    assert [c for *_, c in bands] == ["a", "b", "a"] and wide == 2


@pytest.mark.parametrize(
    "frac, tolerance, cost",
    [
        (0.25, 0.25, 2),
        (0.5, 0.25, 1),
        (0.74, 0.25, 1),
        (0.2, 0.25, 3),
        (0.9, 0.0, 1),
        (0.1, 0.0, 1),
    ],
)
def test_a_miss_costs_one_per_tolerance_it_falls_behind(frac, tolerance, cost):
    from sweeper.analyze.bands import miss_cost

    assert miss_cost(frac, tolerance) == cost


def test_each_bracket_rule_allows_its_own_edge(policy_doc):
    """The rules' edges are inside them: a band's sizes served outside the tolerance may be
    its first and last measured sizes, a band may stand on one size (first == last), and a
    boundary may sit at its bracket's upper end (the first size of the band above)."""
    d = copy.deepcopy(policy_doc)
    bands = d["dtypes"]["fp32"]["bands"]
    bands[1]["outside_tolerance"] = [bands[1]["first_measured"], bands[1]["last_measured"]]
    validate_policy(d)
    top = bands[2]
    top["first_measured"] = top["last_measured"] = bands[2]["bracket_below"][1]
    top["n_sizes"] = 1
    validate_policy(d)
    edge = bands[1]["bracket_below"][1]
    bands[0]["hi_bytes"] = bands[1]["lo_bytes"] = edge
    bands[0]["hi_rel"] = bands[1]["lo_rel"] = edge / d["l2_bytes"]
    validate_policy(d)


@pytest.mark.parametrize(
    "how,message",
    [
        ("no_generic", "dtypes.fp32.generic: missing (the config for other GPUs)"),
        ("no_sizes", "dtypes.fp32.bands[1].n_sizes: a band stands on at least one measured size"),
        ("first_bracket", "dtypes.fp32.bands[0].bracket_below: the first band has none (null)"),
        ("no_bands", "dtypes.fp32.bands: expected a non-empty list of bands"),
        (
            "open_end",
            "dtypes.fp32.bands[2].hi_bytes: the last band must be open-ended (null): gap above",
        ),
        ("band_number", "dtypes.fp32.bands[0]: expected an object"),
        ("hi_text", "dtypes.fp32.bands[0].hi_bytes: expected a number, found '33701888'"),
        (
            "gap",
            "dtypes.fp32.bands[1].lo_bytes: gap: previous band ends at 33701888, found 33701920",
        ),
        (
            "overlap",
            "dtypes.fp32.bands[1].lo_bytes: overlap: previous band ends at 33701888, "
            "found 33701856",
        ),
        (
            "bracket_wide",
            "dtypes.fp32.bands[1].bracket_below: 31195136..33849344 bytes is wider "
            "than the plan resolution (2359296 bytes): a boundary there is not bracketed; rebuild "
            "the policy with `sweeper policy build`",
        ),
        (
            "lo_at_below",
            "dtypes.fp32.bands[1].lo_bytes: 33554432 is outside its bracket 33554432..33849344",
        ),
        (
            "ranges_number",
            "provenance.tolerance_by_range: expected [{hi_bytes, tolerance}, ...] ascending, "
            "the last hi_bytes null",
        ),
        ("ranges_max", "provenance.tolerance: expected the largest of tolerance_by_range"),
        ("run_ids_number", "provenance.run_ids: expected a list of run ids"),
        ("l2_zero", "l2_bytes: must be > 0"),
        ("l2_one", "l2_bytes: 1 is not provenance.device.l2_bytes (75497472)"),
    ],
)
def test_a_bracket_rule_says_exactly_what_is_wrong(tmp_path, policy_doc, how, message):
    path = tmp_path / "policy.json"
    path.write_text(
        json.dumps({"kind": "policy", "schema_version": 1, **_corrupt(policy_doc, how)})
    )
    with pytest.raises(SchemaError) as e:
        load_policy(path)
    field, why = message.split(": ", 1)
    assert str(e.value) == f"{path}: field '{field}': {why}"


def test_a_band_from_before_the_outside_tolerance_field_is_read():
    """Policies built before bands recorded the sizes they serve outside the tolerance have
    no `outside_tolerance`: read as none."""
    d = build_policy(cliff_results({"fp32": new_sizes("fp32")}), manifest())
    for b in d["dtypes"]["fp32"]["bands"]:
        del b["outside_tolerance"]
    validate_policy(d)


def test_a_merged_policy_is_held_to_its_relative_edges(policy_doc):
    """The exports of a merged policy dispatch on relative edges (lo_rel, hi_rel): a gap
    there is refused even where the byte edges beside them still meet."""
    from sweeper.analyze.policy import validate_merged

    merged = merge_docs([policy_doc], ["h200"])
    validate_merged(merged)
    bands = merged["entries"][0]["dtypes"]["fp32"]["bands"]
    bands[1]["lo_rel"] += 0.001
    with pytest.raises(FieldError) as e:
        validate_merged(merged)
    assert e.value.field == "entries[0].dtypes.fp32.bands[1].lo_rel" and "gap" in str(e.value)


def test_a_range_may_tie_nothing(policy_doc):
    """A tolerance of 0 in a range of working set (no tie accepted there) is a valid policy."""
    d = copy.deepcopy(policy_doc)
    d["provenance"]["tolerance_by_range"] = [
        {"hi_bytes": 2**20, "tolerance": 0.0}, {"hi_bytes": None, "tolerance": 0.02}]  # fmt: skip
    d["provenance"]["tolerance"] = 0.02
    validate_policy(d)


def test_a_policy_head_allows_its_rules_edges(policy_doc):
    """A plan resolution of 1 (one step per L2 size) and a device record without its L2 size
    (the policy's own is then the only one) are valid."""
    d = copy.deepcopy(policy_doc)
    d["provenance"]["resolution"], d["resolution_bytes"] = 1, float(d["l2_bytes"])
    validate_policy(d)
    d = copy.deepcopy(policy_doc)
    del d["provenance"]["device"]["l2_bytes"]
    validate_policy(d)


# ---- a policy in its run's folder is that run's (check_against_run) -------------------------


def _policy_in_run(tmp_path):
    """A run folder (manifest, trials) and the policy built from it, written beside them."""
    from sweeper.analyze.store import write_run

    run = tmp_path / "r1"
    man = manifest()
    write_run(run, man, cliff_results({"fp32": new_sizes("fp32")}))
    doc = build_policy(cliff_results({"fp32": new_sizes("fp32")}), man)
    return run, doc


@pytest.mark.parametrize(
    "field, edit, have, want",
    [
        ("provenance.gpu", lambda d: d["provenance"].update(gpu="h200"), "'h200'", "'synth'"),
        (
            "provenance.device",
            lambda d: d["provenance"]["device"].update(sm_count=132),
            None,
            None,
        ),
        ("cc", lambda d: d.update(cc=[9, 0]), "[9, 0]", "[8, 9]"),
        ("provenance.resolution", lambda d: d["provenance"].update(resolution=64), "64", "32"),
        (
            "provenance.plan_hash",
            lambda d: d["provenance"].update(plan_hash="000000"),
            "'000000'",
            "'abc123'",
        ),
        ("l2_bytes", lambda d: d.update(l2_bytes=L2 + 128), str(L2 + 128), str(L2)),
    ],
)
def test_a_policy_beside_its_run_must_be_that_runs(tmp_path, field, edit, have, want):
    """Each field of a policy that names its run (provenance.run_ids) is held to the run's
    manifest, and a mismatch names the field, both values and the manifest, in one line."""
    from sweeper.analyze.policy import check_against_run

    run, doc = _policy_in_run(tmp_path)
    path = run / "policy.json"
    check_against_run(path, doc)  # the run's own: accepted
    bad = copy.deepcopy(doc)
    edit(bad)
    with pytest.raises(SchemaError) as e:
        check_against_run(path, bad)
    msg = str(e.value)
    assert e.value.field == field and e.value.path == str(path), msg
    if have is not None:
        assert (
            f"{have} is not the run's ({want} in {run / 'manifest.json'}); rebuild the "
            "policy with `sweeper policy build`" in msg
        ), msg


def test_a_policy_of_another_run_or_without_a_run_beside_it_is_not_held_to_one(tmp_path):
    from sweeper.analyze.policy import check_against_run

    run, doc = _policy_in_run(tmp_path)
    other = copy.deepcopy(doc)
    other["provenance"]["run_ids"] = ["r0"]
    other["provenance"]["gpu"] = "h200"  # kept here, but measured elsewhere
    check_against_run(run / "policy.json", other)
    alone = tmp_path / "elsewhere"
    alone.mkdir()
    bad = copy.deepcopy(doc)
    bad["provenance"]["gpu"] = "h200"
    check_against_run(alone / "policy.json", bad)


def test_a_run_that_records_no_resolution_takes_the_policys(tmp_path):
    """A manifest whose plan has no resolution (or L2) leaves that field to the policy: what
    is unknown is not a mismatch; the L2 falls back to the device's."""
    from sweeper.analyze.policy import check_against_run
    from sweeper.analyze.store import write_run

    run = tmp_path / "r1"
    man = manifest()
    del man["plan"]["resolution"], man["plan"]["l2_bytes"]
    write_run(run, man, cliff_results({"fp32": new_sizes("fp32")}))
    doc = build_policy(cliff_results({"fp32": new_sizes("fp32")}), manifest())
    doc["provenance"]["resolution"] = 64
    check_against_run(run / "policy.json", doc)
    doc["l2_bytes"] = L2 + 128
    with pytest.raises(SchemaError) as e:
        check_against_run(run / "policy.json", doc)
    assert e.value.field == "l2_bytes" and f"({L2} in " in str(e.value)


# ---- keep_floors' edges (the mutation run found them unpinned) --------------------------------


def _with_copy_rows(res: pd.DataFrame, gbps: float = 2000.0) -> pd.DataFrame:
    copies = []
    for ws in sorted(set(res["ws_bytes"])):
        r = row("fp32", int(ws), "plain", gbps)
        r.update(role="copy", config="copy")
        copies.append(r)
    return pd.concat([res, pd.DataFrame(copies)], ignore_index=True)


def test_no_floors_leave_the_sets_and_narrow_no_size():
    from sweeper.analyze.policy import keep_floors

    sets = {("hot", "preallocated", "fp32"): [(1, {"plain": 1.0}, True)]}
    assert keep_floors(sets, _floor_results(), _floor_results(), "hot", [], 2000.0) == (sets, 0)


def test_a_floor_on_the_copy_kernel_reads_the_copy_rows_of_the_policys_mode():
    from sweeper.analyze.targets import Target

    res = _with_copy_rows(_floor_results())
    floor = Target("97% of copy", ("fp32",), 32 * MiB, 48 * MiB, "pct_copy", 97.0)
    doc = build_policy(res, manifest(), floors=[floor])
    assert _bands(doc) == [(0, "plain"), (38.5, "stcs")]
    assert doc["provenance"]["floored_sizes"] == 3


@pytest.mark.parametrize(
    ("dtypes", "modes"), [(("fp16",), ("hot",)), (("fp32",), ("after-write",))],
    ids=["another dtype", "another mode"],
)  # fmt: skip
def test_a_floor_of_another_dtype_or_mode_is_not_kept_here(dtypes, modes):
    from sweeper.analyze.targets import Target

    floor = Target("97% of the ceiling", dtypes, 32 * MiB, 48 * MiB, "pct_ceiling", 97.0, modes)
    doc = build_policy(_floor_results(), manifest(), floors=[floor], ceiling_gbps=2000.0)
    assert _bands(doc) == [(0, "plain")] and doc["provenance"]["floored_sizes"] == 0


def test_a_floor_is_read_on_a_configs_best_cell_at_a_size():
    """A config timed twice at a size (a screening size's screen and sweep cells) meets a
    floor by its faster cell, as selection reads it."""
    res = _floor_results()
    again = res[(res["config"] == "stcs") & (res["ws_bytes"] >= 39 * MiB)].copy()
    again["gbps"] = 1900.0  # below 97% of the ceiling
    again["phase"] = "screen"
    res = pd.concat([res, again], ignore_index=True)
    doc = build_policy(res, manifest(), floors=[_ceiling_floor()], ceiling_gbps=2000.0)
    assert _bands(doc) == [(0, "plain"), (38.5, "stcs")]
    assert doc["provenance"]["floored_sizes"] == 3


# ---- build_policy's inputs, refusals and provenance (the mutation run found them unpinned) ---


def _fp32_cliff():
    return cliff_results({"fp32": new_sizes("fp32")})


def test_the_l2_comes_from_the_plan_else_the_device_and_a_run_without_one_is_refused():
    man = manifest()
    plan_only = copy.deepcopy(man)
    del plan_only["device"]["l2_bytes"]
    assert build_policy(_fp32_cliff(), plan_only)["l2_bytes"] == L2
    device_only = copy.deepcopy(man)
    del device_only["plan"]["l2_bytes"]
    assert build_policy(_fp32_cliff(), device_only)["l2_bytes"] == L2
    # the plan's L2 is what its sizes were laid out on: it wins over the device's
    other = copy.deepcopy(man)
    other["device"]["l2_bytes"] = L2 + MiB
    assert build_policy(_fp32_cliff(), other)["l2_bytes"] == L2
    neither = copy.deepcopy(device_only)
    del neither["device"]["l2_bytes"]
    with pytest.raises(SweeperError) as e:
        build_policy(_fp32_cliff(), neither)
    assert str(e.value) == "the run manifest has no l2_bytes (device.l2_bytes / plan.l2_bytes)"


def test_a_run_without_a_resolution_needs_one_given():
    man = manifest()
    del man["plan"]["resolution"]
    with pytest.raises(SweeperError) as e:
        build_policy(_fp32_cliff(), man)
    assert str(e.value) == "the run manifest has no plan.resolution; pass --resolution"
    assert build_policy(_fp32_cliff(), man, resolution=32)["provenance"]["resolution"] == 32


def test_a_users_kernel_and_the_copy_kernel_are_never_a_policys_config():
    """A user's kernel timed as a candidate (manifest "external") is compared in the report,
    never chosen; the copy kernel's rows are no candidates, however fast: the policy is the one
    the grid's configs alone make."""
    res = _fp32_cliff()
    fast = res[res["config"] == "plain"].copy()
    fast["config"], fast["gbps"] = "mine", 5000.0
    copies = res[res["config"] == "plain"].copy()
    copies["role"], copies["config"], copies["gbps"] = "copy", "copy", 9000.0
    res = pd.concat([res, fast, copies], ignore_index=True)
    man = {**manifest(), "external": [{"config": "mine"}]}
    doc = build_policy(res, man)
    grid_only = build_policy(_fp32_cliff(), manifest())
    assert _bands(doc) == _bands(grid_only)
    assert [c for _, c in _bands(doc)] == ["stream", "plain", "stream"]
    assert doc["configs"] == grid_only["configs"]
    assert doc["dtypes"]["fp32"]["generic"] == grid_only["dtypes"]["fp32"]["generic"]
    # without the manifest's word, the user's kernel is a config like any other
    assert {b["config"] for b in build_policy(res, manifest())["dtypes"]["fp32"]["bands"]} == {
        "mine"
    }


def test_a_run_with_no_ok_candidate_row_is_refused():
    res = _fp32_cliff().assign(status="error")
    with pytest.raises(SweeperError) as e:
        build_policy(res, manifest())
    assert str(e.value) == "the run has no ok candidate rows: nothing to build a policy from"


def test_a_mode_or_pattern_not_in_the_run_is_named():
    res = _fp32_cliff()
    with pytest.raises(SweeperError) as e:
        build_policy(res, manifest(), mode="cold")
    assert str(e.value) == "no mode 'cold' in this run (it has: hot)"
    with pytest.raises(SweeperError) as e:
        build_policy(res, manifest(), pattern="allocating")
    assert str(e.value) == "no pattern 'allocating' in this run (it has: preallocated)"


def test_of_two_patterns_the_preallocated_is_built_unless_the_other_is_asked_for():
    pre = _fp32_cliff()
    # in the allocating cells "stream" leads everywhere
    alloc = pd.DataFrame(
        [row("fp32", ws, c, g) for ws in new_sizes("fp32") for c, g in (("plain", 1000.0),
                                                                       ("stream", 2000.0))],
        columns=list(COLUMNS),
    ).assign(pattern="allocating")  # fmt: skip
    res = pd.concat([pre, alloc], ignore_index=True)
    doc = build_policy(res, manifest())
    assert doc["provenance"]["pattern"] == "preallocated"
    assert [b["config"] for b in doc["dtypes"]["fp32"]["bands"]] == ["stream", "plain", "stream"]
    doc = build_policy(res, manifest(), pattern="allocating")
    assert doc["provenance"]["pattern"] == "allocating"
    assert [b["config"] for b in doc["dtypes"]["fp32"]["bands"]] == ["stream"]


def test_the_tie_tolerance_given_is_the_one_the_sets_are_made_with():
    """At a 65% tolerance both configs tie at every size (in the band "stream" reads 0.4x
    "plain", outside it "plain" reads 0.91x "stream"): one band, the simpler "plain"; at the
    default tolerance, three."""
    res = _fp32_cliff()
    assert len(build_policy(res, manifest())["dtypes"]["fp32"]["bands"]) == 3
    wide = build_policy(res, manifest(), tolerance=0.65)
    assert [b["config"] for b in wide["dtypes"]["fp32"]["bands"]] == ["plain"]
    assert wide["provenance"]["tolerance"] == 0.65


def test_tied_configs_are_served_by_the_simpler_one_whatever_their_names():
    """Two configs equally fast everywhere: the one without cache hints serves (simplicity_key),
    though its name sorts after the other's."""
    rows = []
    for ws in new_sizes("fp32"):
        rows.append(row("fp32", ws, "plain", 1000.0))
        rows.append(row("fp32", ws, "stream", 1000.0))
    res = pd.DataFrame(rows, columns=list(COLUMNS))
    res.loc[res["config"] == "plain", "config"] = "zz-plain"
    doc = build_policy(res, manifest())
    assert [b["config"] for b in doc["dtypes"]["fp32"]["bands"]] == ["zz-plain"]
    assert doc["dtypes"]["fp32"]["generic"]["config"] == "zz-plain"


def test_dtypes_given_are_the_policys_and_none_left_is_refused():
    res = cliff_results({"fp32": new_sizes("fp32"), "fp16": new_sizes("fp16")})
    assert sorted(build_policy(res, manifest())["dtypes"]) == ["fp16", "fp32"]
    assert sorted(build_policy(res, manifest(), dtypes=["fp16"])["dtypes"]) == ["fp16"]
    assert sorted(build_policy(res, manifest(), dtypes=["fp32"])["dtypes"]) == ["fp32"]
    with pytest.raises(SweeperError) as e:
        build_policy(res, manifest(), dtypes=["int8"])
    assert str(e.value) == "no dtype left to build a policy for"


def test_a_wide_bracket_is_refused_naming_the_first_one_and_how_to_close_it():
    sizes = new_sizes("fp32")
    # the cliff's lower edge (32 MiB) measured only 1.5 MiB either side
    keep = [ws for ws in sizes if not 30.5 * MiB < ws < 33.5 * MiB]
    with pytest.raises(SweeperError) as e:
        build_policy(cliff_results({"fp32": keep}), manifest())
    lo = max(ws for ws in keep if ws <= 30.5 * MiB)
    hi = min(ws for ws in keep if ws >= 33.5 * MiB)
    step = L2 / 32
    assert str(e.value) == (
        f"fp32: the best config changes between {lo} and {hi} bytes of working set "
        f"({lo / L2:.4f}-{hi / L2:.4f} x L2), a bracket wider than the plan resolution "
        f"({step:.0f} bytes = L2/32); refusing to place a boundary there. "
        "`sweeper run --resume --run-dir RUN` samples that stretch (the runner adds "
        "sizes wherever a boundary's bracket is too wide)"
    )


def test_the_provenance_of_a_manifest_that_leaves_fields_out():
    man = manifest()
    for k in ("run_id", "gpu"):
        del man[k]
    for k in ("plan_hash", "path"):
        del man["plan"][k]
    del man["device"]["cc"]
    doc = build_policy(_fp32_cliff(), man)
    prov = doc["provenance"]
    assert prov["run_ids"] == [""] and prov["gpu"] == "" and prov["plan_hash"] == ""
    assert prov["plan_path"] == "" and doc["cc"] == [0, 0]
    full = build_policy(_fp32_cliff(), manifest())["provenance"]
    assert full["plan_path"] == "sweeps/x.json" and full["baseline"] == "torch"
    from sweeper import __version__

    assert full["sweeper_version"] == __version__


def _steps(ks, winner) -> pd.DataFrame:
    """fp32 cells at k plan steps (L2/32) for k in `ks`: `winner(k)` at 1000 GB/s, the other
    config at 500."""
    step = L2 // 32
    rows = [
        row("fp32", k * step, c, 1000.0 if c == winner(k) else 500.0)
        for k in ks
        for c in ("plain", "stream")
    ]
    return pd.DataFrame(rows, columns=list(COLUMNS))


@pytest.mark.parametrize(
    ("ks", "winner", "lo", "hi"),
    [
        # a boundary in a bracket of exactly one step (10 -> 11: placed), then one of two (20 -> 22)
        ([k for k in range(1, 41) if k != 21],
         lambda k: "plain" if k <= 10 or k >= 22 else "stream", 20, 22),
        # the first size alone, then two steps to the next
        ([1, *range(3, 41)], lambda k: "stream" if k == 1 else "plain", 1, 3),
    ],
    ids=["after-an-exact-step", "at-the-first-size"],
)  # fmt: skip
def test_the_refusal_names_the_first_bracket_wider_than_a_step(ks, winner, lo, hi):
    step = L2 // 32
    with pytest.raises(SweeperError) as e:
        build_policy(_steps(ks, winner), manifest())
    assert str(e.value).startswith(
        f"fp32: the best config changes between {lo * step} and {hi * step} bytes of working set"
    )


def test_a_manifest_without_a_device_or_a_plan_record():
    man = manifest()
    del man["device"]
    doc = build_policy(_fp32_cliff(), man)
    assert doc["provenance"]["device"] == {} and doc["cc"] == [0, 0] and doc["l2_bytes"] == L2
    man = manifest()
    del man["plan"]
    with pytest.raises(SweeperError) as e:
        build_policy(_fp32_cliff(), man)
    assert str(e.value) == "the run manifest has no plan.resolution; pass --resolution"
    doc = build_policy(_fp32_cliff(), man, resolution=32)
    assert doc["l2_bytes"] == L2 and doc["provenance"]["plan_hash"] == ""


def test_a_size_the_floor_serves_alone_joins_a_band_beside_a_wide_gap():
    """A size where nothing beat the floor in both measurements (its set holds the floor
    alone) may join the neighbouring band beside a bracket wider than a step, instead of
    being a band of its own whose wide bracket refuses the policy (bands.segment's `soft`)."""
    from test_floor import _frame_with

    step = L2 // 32
    clear = {"a": (1.3, 1.3), "flr": (1.0, 1.0)}
    at_parity = {"a": (1.004, 0.99), "flr": (1.0, 1.0)}
    frame = _frame_with({10 * step: clear, 11 * step: clear, 12 * step: at_parity,
                         16 * step: clear})  # fmt: skip
    doc = build_policy(frame, manifest())
    assert [b["config"] for b in doc["dtypes"]["fp32"]["bands"]] == ["a"]
