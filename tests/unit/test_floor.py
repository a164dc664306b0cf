"""The floor and the confirmation round (sweeper.analyze.select, "The floor"), on the CPU.

The floor's launch-shape match is pure integer maths; the rule is tested on hand-made
measurements (the runner's part: tests/unit/test_floor_runner.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from sweeper_kernels.launch import closest_to_launch

from sweeper.analyze.select import (
    DEFAULT_TOLERANCE,
    confirmed_set,
    pass_noise,
    select,
    tolerance_at,
)
from sweeper.analyze.store import trials_to_frame
from sweeper.run.search import confirm_set

# ---- the floor's launch shape ----------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype, n, blocks, threads, config, exact",
    [
        # torch's fp32 elementwise kernel: 128 threads, 2 x 16 B per thread, one pass
        ("fp32", 1 << 24, (1 << 24) // (128 * 8), 128, "v16-u2-ld.def-st.def-b128-fixed32", True),
        ("fp32", 1_000_003, 977, 128, "v16-u2-ld.def-st.def-b128-fixed32", True),
        ("fp16", 1 << 24, (1 << 24) // (128 * 16), 128, "v16-u2-ld.def-st.def-b128-fixed32", True),
        ("bf16", 1 << 20, (1 << 20) // (256 * 8), 256, "v16-u1-ld.def-st.def-b256-fixed32", True),
        # 4 bytes per thread: one 4-byte vector
        ("fp32", 1 << 20, (1 << 20) // 256, 256, "v4-u1-ld.def-st.def-b256-fixed32", True),
        # a block size the grid lacks: the closest in log2, and not exact
        ("int8", 1 << 20, 1024, 64, "v16-u1-ld.def-st.def-b128-fixed32", False),
        # a grid-stride launch (few blocks): the widest loop-free config, not exact
        ("fp32", 1 << 24, 264, 1024, "v16-u8-ld.def-st.def-b1024-fixed32", False),
    ],
)
def test_the_floor_is_the_grids_config_closest_to_the_baselines_launch(
    dtype, n, blocks, threads, config, exact
):
    v, got_exact = closest_to_launch(dtype, n, blocks, threads)
    assert (v.config, got_exact) == (config, exact)


def test_a_launch_past_32_bit_indices_maps_to_the_64_bit_form():
    n = 5 << 31  # fp32: 2**31 * 5 elements, more 16-byte slots than int32 holds at 1 per thread
    v, _ = closest_to_launch("fp32", n, -(-n // (4 * 128)), 128)
    assert v.grid == "flat"


def test_an_empty_launch_is_refused():
    from sweeper_kernels.errors import KernelError

    with pytest.raises(KernelError, match=">= 1"):
        closest_to_launch("fp32", 1024, 0, 128)


# ---- the rule on hand-made measurements --------------------------------------------------------


def _row(config, ratio, ws=1 << 24, role="candidate", floor=False):
    base_us = 10.0
    t = base_us / ratio
    return {
        "run_id": "r", "mode": "hot", "pattern": "preallocated", "dtype": "fp32",
        "n": ws // 8, "ws_bytes": ws, "role": role, "config": config, "status": "ok",
        "time_us": t, "time_lo_us": t * 0.999, "time_hi_us": t * 1.001,
        "gbps": ws / t / 1e3, "base_time_us": base_us, "ratio": ratio,
        "ratio_lo": ratio * 0.995, "ratio_hi": ratio * 1.005, "n_samples": 10,
        "floor": 1 if floor else None,
    }  # fmt: skip


def test_a_config_that_ties_the_floor_in_either_measurement_does_not_beat_it():
    first = [_row("a", 1.012), _row("b", 1.010), _row("flr", 1.0, floor=True)]
    second = {"a": _row("a", 0.985, role="confirm"), "b": _row("b", 1.02, role="confirm"),
              "flr": _row("flr", 1.0, role="confirm", floor=True)}  # fmt: skip
    got, how = confirmed_set(first, second, "flr", DEFAULT_TOLERANCE, noise=0.005)
    # a led by 1.2% and then lost by 1.5%; b led by 1.0% and 2.0%: only b beats the floor
    assert how == "confirmed" and [r["config"] for r in got] == ["b"]
    got, how = confirmed_set(first, second, "flr", DEFAULT_TOLERANCE, noise=0.015)
    assert how == "floor" and [r["config"] for r in got] == ["flr"]


def test_without_both_measurements_of_the_floor_the_one_measurement_rule_applies():
    first = [_row("a", 1.01), _row("flr", 1.0, floor=True)]
    assert confirmed_set(first, {"a": _row("a", 1.0, role="confirm")}, "flr", 0.02, 0.0) is None
    assert confirmed_set(first, {}, None, 0.02, 0.0) is None


def _twice(first, second, sizes, r1, r2, config="a"):
    """Record `config` measured at ratio r1, then r2, at each of `sizes` (pass_noise's input)."""
    for ws in sizes:
        first.setdefault(ws, {})[config] = _row(config, r1, ws=ws)
        second.setdefault(ws, {})[config] = _row(config, r2, ws=ws, role="confirm")


def test_the_pass_to_pass_noise_is_the_p95_per_range_of_working_set():
    small, large = 1 << 20, 1 << 30  # (0, 1] MiB and (256 MiB, inf)
    first, second = {}, {}
    for i in range(20):
        for ws, dev in ((small + 8 * i, 0.03), (large + 8 * i, 0.002)):
            first[ws] = {"a": _row("a", 1.0, ws=ws)}
            second[ws] = {"a": _row("a", 1.0 + dev, ws=ws, role="confirm")}
    noise = dict(pass_noise(first, second))
    assert noise[1 << 20] == pytest.approx(0.03)
    assert noise[None] == pytest.approx(0.002)
    # ranges without enough values take the p95 over all
    assert noise[4 << 20] == pytest.approx(0.03)
    # fewer than ten values in all: the default tolerance
    assert dict(pass_noise({}, {}))[None] == DEFAULT_TOLERANCE


def test_six_configs_that_tie_the_baseline_make_no_band_the_floor_serves_them():
    """The issue's fp32 8-15 MiB band: six configs each tie torch in the sweep and lose to it by
    1-3% when measured again; the floor (torch's shape) is chosen at every size."""
    rows = []
    sizes = [(8 << 20) + k * (1 << 19) for k in range(14)]
    for i, ws in enumerate(sizes):
        lead = ["c1", "c2", "c3", "c4", "c5", "c6"][i % 6]
        for c in ("c1", "c2", "c3", "c4", "c5", "c6"):
            first = 1.006 if c == lead else 0.998
            rows.append(_row(c, first, ws=ws))
            rows.append(_row(c, first - 0.02, ws=ws, role="confirm"))
        rows.append(_row("flr", 1.0, ws=ws, floor=True))
        rows.append(_row("flr", 1.0, ws=ws, role="confirm", floor=True))
    sel = select(trials_to_frame(rows))
    assert set(sel["config"]) == {"flr"}
    assert sel["reason"].str.startswith("floor").all()
    # the same measurements without the second one: the leader of each size is chosen
    once = select(trials_to_frame([r for r in rows if r["role"] == "candidate"]))
    assert set(once["config"]) != {"flr"}


def test_the_round_times_the_tied_configs_fastest_first_and_the_floor():
    rows = [_row(c, r) for c, r in (("a", 1.3), ("b", 1.29), ("c", 1.28), ("d", 1.0))]
    rows.append(_row("flr", 0.95, floor=True))
    assert confirm_set(rows, "flr", 2, 0.02) == ["a", "b", "flr"]
    assert confirm_set(rows, None, 4, 0.02) == ["a", "b", "c"]
    assert confirm_set([], "flr", 4, 0.02) == []


# ---- the rule's edges --------------------------------------------------------------------------


def test_two_floors_in_one_group_are_refused():
    from sweeper.analyze.select import floor_config
    from sweeper.errors import SweeperError

    rows = [_row("a", 1.0, floor=True), _row("b", 1.0, floor=True)]
    with pytest.raises(SweeperError, match="2 configs are tagged as the floor"):
        floor_config(trials_to_frame(rows))


def test_a_floor_is_read_per_group_and_only_from_tagged_rows():
    from sweeper.analyze.select import floor_config

    rows = [_row("flr", 1.0, floor=True), _row("a", 1.2), _row("flr", 1.0, role="confirm",
                                                                floor=True)]  # fmt: skip
    assert floor_config(trials_to_frame(rows)) == {("hot", "preallocated", "fp32"): "flr"}
    assert floor_config(trials_to_frame([_row("a", 1.2)])) == {}


def test_a_config_must_beat_the_floor_by_more_than_the_noise_in_each_measurement():
    first = [_row("a", 1.05), _row("flr", 1.0, floor=True)]
    conf = {"flr": _row("flr", 1.0, role="confirm"), "a": _row("a", 1.05, role="confirm")}
    # exactly at 1 + noise is not beyond it
    assert confirmed_set(first, conf, "flr", 0.02, noise=0.05)[1] == "floor"
    assert confirmed_set(first, conf, "flr", 0.02, noise=0.0499)[1] == "confirmed"
    # beyond it in the first measurement alone is not enough
    conf["a"] = _row("a", 1.049, role="confirm")
    assert confirmed_set(first, conf, "flr", 0.02, noise=0.0495)[1] == "floor"


def test_a_tied_config_slower_than_the_floor_in_either_measurement_is_dropped():
    # a wins beyond the noise; b is tied with a in the first measurement and timed once; c is
    # tied too but measured slower than the floor the second time; d is slower the first time
    first = [_row("a", 1.10), _row("b", 1.095), _row("c", 1.09), _row("flr", 1.0, floor=True)]
    conf = {"flr": _row("flr", 1.0, role="confirm"), "a": _row("a", 1.1, role="confirm"),
            "c": _row("c", 0.99, role="confirm")}  # fmt: skip
    got, how = confirmed_set(first, conf, "flr", 0.02, noise=0.01)
    assert how == "confirmed" and [r["config"] for r in got] == ["a", "b"]
    first.append(_row("d", 0.999))
    got, _ = confirmed_set(first, conf, "flr", 0.2, noise=0.01)
    assert "d" not in [r["config"] for r in got]


def test_a_floor_without_a_positive_ratio_in_either_measurement_leaves_the_one_measurement_rule():
    first = [_row("a", 1.1), {**_row("flr", 1.0, floor=True), "ratio": 0.0}]
    conf = {"flr": _row("flr", 1.0, role="confirm"), "a": _row("a", 1.1, role="confirm")}
    assert confirmed_set(first, conf, "flr", 0.02, 0.01) is None
    first = [_row("a", 1.1), _row("flr", 1.0, floor=True)]
    conf["flr"] = {**conf["flr"], "ratio": 0.0}
    assert confirmed_set(first, conf, "flr", 0.02, 0.01) is None


def test_the_selection_says_how_each_size_was_decided():
    rows = []
    for k, ws in enumerate((1 << 24, 1 << 25)):
        lead = 1.3 if k == 0 else 1.001
        rows += [_row("a", lead, ws=ws), _row("a", lead, ws=ws, role="confirm")]
        rows += [_row("flr", 1.0, ws=ws, floor=True),
                 _row("flr", 1.0, ws=ws, role="confirm", floor=True)]  # fmt: skip
    sel = select(trials_to_frame(rows)).sort_values("ws_bytes")
    assert list(sel["reason"]) == [
        "fastest, confirmed",
        "floor: none beats it in both measurements",
    ]
    assert list(sel["config"]) == ["a", "flr"]


def test_ten_values_are_enough_for_a_range_of_its_own():
    first, second = {}, {}
    # inside (0, 1 MiB], the first at its upper edge
    _twice(first, second, [(1 << 20) - 8 * i for i in range(10)], 1.0, 1.01)
    _twice(first, second, [(1 << 30) + 8 * i for i in range(10)], 1.0, 1.001)
    noise = dict(pass_noise(first, second))
    assert noise[1 << 20] == pytest.approx(0.01)
    assert noise[None] == pytest.approx(0.001)
    # nine values: the p95 over all
    del first[1 << 20], second[1 << 20]
    noise = dict(pass_noise(first, second))
    assert noise[1 << 20] == pytest.approx(float(np.percentile([0.01] * 9 + [0.001] * 10, 95)))


def test_segment_lets_a_floor_size_join_a_band_beside_a_wide_gap_only_when_soft():
    from sweeper.analyze.bands import segment

    sizes = [100, 200, 1000, 1100]  # a gap of 800 beside the third size, resolution 150
    acc = [{"a": 1.0}, {"a": 1.0}, {"flr": 1.0}, {"a": 1.0}]
    measured = [{"a": 1.0, "flr": 0.99}] * 2 + [{"a": 0.995, "flr": 1.0}, {"a": 1.0, "flr": 0.99}]
    tol = [0.02] * 4
    bands, wide = segment(sizes, acc, 150, measured=measured, tolerance=tol)
    assert wide > 0 and "flr" in [c for *_, c in bands]  # a band of its own: a wide bracket
    bands, wide = segment(sizes, acc, 150, measured=measured, tolerance=tol,
                          soft=[False, False, True, False])  # fmt: skip
    assert wide == 0 and [c for *_, c in bands] == ["a"]
    with pytest.raises(ValueError, match="soft"):
        segment(sizes, acc, 150, soft=[False] * 4)
    with pytest.raises(ValueError, match="soft"):
        segment(sizes, acc, 150, measured=measured, tolerance=tol, soft=[False])


def test_segments_argument_errors_say_what_is_missing():
    from sweeper.analyze.bands import segment

    sizes, acc = [1, 2], [{"a": 1.0}, {"a": 1.0}]
    measured = [{"a": 1.0}, {"a": 1.0}]
    with pytest.raises(
        ValueError, match=r"^segment: `measured` needs the tolerance at every size$"
    ):
        segment(sizes, acc, 10, measured=measured, tolerance=[0.02])
    with pytest.raises(
        ValueError, match=r"^segment: `measured` needs the tolerance at every size$"
    ):
        segment(sizes, acc, 10, measured=measured)
    with pytest.raises(
        ValueError, match=r"^segment: `soft` needs `measured` and a flag at every size$"
    ):
        segment(sizes, acc, 10, soft=[False, False])
    with pytest.raises(
        ValueError, match=r"^segment: `soft` needs `measured` and a flag at every size$"
    ):
        segment(sizes, acc, 10, measured=measured, tolerance=[0.02] * 2, soft=[False])


# ---- edges the mutation run found unpinned ------------------------------------------------------


def test_the_noise_divides_the_second_ratio_by_the_first_over_varied_deviations():
    first, second = {}, {}
    devs = [0.001 * (i + 1) for i in range(20)]
    for i, d in enumerate(devs):
        ws = (1 << 30) + 8 * i
        first[ws] = {"a": _row("a", 2.0, ws=ws)}
        second[ws] = {"a": _row("a", 2.0 * (1 + d), ws=ws, role="confirm")}
    noise = dict(pass_noise(first, second))
    assert noise[None] == pytest.approx(float(np.percentile(devs, 95)))


def test_the_noise_skips_a_config_or_a_size_the_first_measurement_lacks():
    first, second = {}, {}
    for i in range(12):
        ws = (1 << 30) + 8 * i
        first[ws] = {"a": _row("a", 1.0, ws=ws)}
        second[ws] = {"a": _row("a", 1.01, ws=ws, role="confirm"),
                      "b": _row("b", 3.0, ws=ws, role="confirm")}  # fmt: skip
    second[(1 << 30) + 999] = {"a": _row("a", 3.0, ws=(1 << 30) + 999, role="confirm")}
    assert dict(pass_noise(first, second))[None] == pytest.approx(0.01)


def test_ten_deviations_in_all_are_enough_for_the_overall_noise():
    first, second = {}, {}
    _twice(first, second, [(1 << 30) + 8 * i for i in range(10)], 1.0, 1.004)
    noise = dict(pass_noise(first, second))
    assert noise[1 << 20] == pytest.approx(0.004)  # an empty range: the overall p95


def test_a_size_at_a_ranges_upper_edge_counts_in_that_range_alone():
    first, second = {}, {}
    edge = 1 << 20
    first[edge] = {f"c{i}": _row(f"c{i}", 1.0, ws=edge) for i in range(10)}
    second[edge] = {f"c{i}": _row(f"c{i}", 1.01, ws=edge, role="confirm") for i in range(10)}
    _twice(first, second, [(1 << 30) + 8 * i for i in range(10)], 1.0, 1.05)
    noise = dict(pass_noise(first, second))
    assert noise[1 << 20] == pytest.approx(0.01)
    assert noise[4 << 20] == pytest.approx(0.05)  # empty: the overall p95, not the edge's


def test_a_range_with_too_few_values_takes_the_p95_of_all_the_deviations():
    first, second = {}, {}
    devs = [0.001 * (i + 1) for i in range(20)]
    for i, d in enumerate(devs):
        ws = (1 << 19) + 8 * i if i < 5 else (1 << 30) + 8 * i  # 5 in (0, 1 MiB], 15 above 256 MiB
        first[ws] = {"a": _row("a", 1.0, ws=ws)}
        second[ws] = {"a": _row("a", 1.0 + d, ws=ws, role="confirm")}
    noise = dict(pass_noise(first, second))
    assert noise[1 << 20] == pytest.approx(float(np.percentile(devs, 95)))
    assert noise[4 << 20] == pytest.approx(float(np.percentile(devs, 95)))
    assert noise[None] == pytest.approx(float(np.percentile(devs[5:], 95)))


def test_a_size_at_a_ranges_upper_edge_is_judged_by_the_noise_measured_in_that_range():
    first, second = {}, {}
    edge = 1 << 20
    _twice(first, second, [edge - 8 * i for i in range(10)], 1.0, 1.01)  # (0, 1 MiB]
    _twice(first, second, [edge + 8 * (i + 1) for i in range(10)], 1.0, 1.05)  # (1, 4 MiB]
    noise = pass_noise(first, second)
    assert tolerance_at(noise, edge) == pytest.approx(0.01)
    assert tolerance_at(noise, edge + 1) == pytest.approx(0.05)


def test_the_rule_compares_ratios_over_the_floors_not_products():
    # every ratio halved: the same decisions
    first = [_row("a", 0.6), _row("flr", 0.5, floor=True)]
    conf = {"flr": _row("flr", 0.5, role="confirm"), "a": _row("a", 0.6, role="confirm")}
    assert confirmed_set(first, conf, "flr", 0.02, noise=0.1)[1] == "confirmed"  # 1.2x both
    assert confirmed_set(first, conf, "flr", 0.02, noise=0.25)[1] == "floor"


def test_the_noise_margin_is_strict_in_each_measurement():
    flr = [_row("flr", 1.0, floor=True)]
    conf_flr = {"flr": _row("flr", 1.0, role="confirm")}
    # first exactly at 1 + noise, second above: not beyond in the first
    got = confirmed_set([_row("a", 1.25), *flr], {**conf_flr, "a": _row("a", 1.5, role="confirm")},
                        "flr", 0.02, noise=0.25)  # fmt: skip
    assert got[1] == "floor"
    # second exactly at 1 + noise, first above
    got = confirmed_set([_row("a", 1.5), *flr], {**conf_flr, "a": _row("a", 1.25, role="confirm")},
                        "flr", 0.02, noise=0.25)  # fmt: skip
    assert got[1] == "floor"


def test_a_floor_timed_twice_but_missing_from_the_first_measurement_leaves_the_old_rule():
    conf = {"flr": _row("flr", 1.0, role="confirm"), "a": _row("a", 1.2, role="confirm")}
    assert confirmed_set([_row("a", 1.2)], conf, "flr", 0.02, 0.01) is None


def test_a_beater_outside_the_fastest_tie_leaves_the_floor():
    # c is fastest once and slower than the floor the second time; b beats the floor twice but
    # is not tied with c: no tied config is faster than the floor in each measurement
    first = [_row("c", 1.5), _row("b", 1.2), _row("flr", 1.0, floor=True)]
    conf = {"c": _row("c", 0.9, role="confirm"), "b": _row("b", 1.2, role="confirm"),
            "flr": _row("flr", 1.0, role="confirm")}  # fmt: skip
    got, how = confirmed_set(first, conf, "flr", 0.02, noise=0.05)
    assert how == "floor" and [r["config"] for r in got] == ["flr"]


def _frame_with(rows_by_ws):
    rows = []
    for ws, spec in rows_by_ws.items():
        for c, (r1, r2) in spec.items():
            rows.append(_row(c, r1, ws=ws, floor=c == "flr"))
            if r2 is not None:
                rows.append(_row(c, r2, ws=ws, role="confirm", floor=c == "flr"))
    return trials_to_frame(rows)


def test_only_confirmation_rows_count_as_a_second_measurement():
    # a was timed once: its candidate row is no second measurement
    frame = _frame_with({1 << 24: {"a": (1.3, None), "flr": (1.0, 1.0)}})
    assert list(select(frame)["config"]) == ["flr"]


def test_a_size_without_confirmation_rows_takes_the_one_measurement_rule():
    frame = _frame_with({1 << 24: {"a": (1.3, 1.3), "flr": (1.0, 1.0)},
                         1 << 25: {"a": (1.3, None), "flr": (1.0, None)}})  # fmt: skip
    sel = select(frame).sort_values("ws_bytes")
    assert list(sel["reason"]) == ["fastest, confirmed", "fastest"]


def test_every_group_with_a_floor_is_confirmed_whatever_the_order():
    rows = []
    for dtype, floor in (("bf16", False), ("fp32", True)):
        for c, r in (("a", 1.001), ("flr", 1.0)):
            for role in ("candidate", "confirm"):
                row = _row(c, r, role=role, floor=floor and c == "flr")
                rows.append({**row, "dtype": dtype, "n": row["ws_bytes"] // (2 if dtype == "bf16" else 8) // 2 * 2})  # fmt: skip
    for r in rows:
        r["ws_bytes"] = 2 * r["n"] * (2 if r["dtype"] == "bf16" else 4)
    sel = select(trials_to_frame(rows))
    assert sel.set_index("dtype").loc["fp32", "config"] == "flr"


def test_the_confirmation_context_reads_each_groups_own_first_measurement():
    from sweeper.analyze.select import confirm_context

    rows = []  # ten values per mode: the p95 leans on the largest
    for mode, level, dev in (("hot", 1.0, 0.01), ("after-write", 2.0, 0.08)):
        for i in range(5):
            ws = (1 << 30) + 16 * i
            for c in ("a", "flr"):
                rows.append({**_row(c, level, ws=ws, floor=c == "flr"), "mode": mode})
                rows.append({**_row(c, level * (1 + dev), ws=ws, role="confirm",
                                    floor=c == "flr"), "mode": mode})  # fmt: skip
    # a duplicate first measurement (a screening size timed again by the sweep): the faster
    # is the config's first measurement
    rows.append({**_row("a", 0.5, ws=1 << 30), "mode": "hot"})
    ctx = confirm_context(trials_to_frame(rows))
    assert dict(ctx[("hot", "preallocated", "fp32")]["noise"])[None] == pytest.approx(0.01)
    assert dict(ctx[("after-write", "preallocated", "fp32")]["noise"])[None] == pytest.approx(0.08)


def test_the_sets_and_the_floors_sizes_follow_the_rule():
    from sweeper.analyze.select import acceptable_sets, floor_sizes, fracs_of_best
    from sweeper.errors import SweeperError

    frame = _frame_with({1 << 24: {"a": (1.004, 0.99), "flr": (1.0, 1.0)},
                         1 << 25: {"a": (1.3, 1.3), "b": (1.29, 1.29), "flr": (1.0, 1.0)}})  # fmt: skip
    key = ("hot", "preallocated", "fp32")
    assert floor_sizes(frame)[key] == {1 << 24}
    with pytest.raises(SweeperError, match="--tolerance 1.5"):  # the tolerance is checked
        floor_sizes(frame, 1.5)
    sets = fracs_of_best(frame)[key]
    assert [sorted(tied) for _, tied, _ in sets] == [["flr"], ["a", "b"]]
    assert [sorted(t) for _, t in acceptable_sets(frame, 0.001)[key]] == [["flr"], ["a"]]


def test_two_floors_are_refused_with_the_group_and_the_names():
    from sweeper.analyze.select import floor_config
    from sweeper.errors import SweeperError

    rows = [_row("a", 1.0, floor=True), _row("b", 1.0, floor=True)]
    with pytest.raises(SweeperError) as e:
        floor_config(trials_to_frame(rows))
    assert str(e.value) == (
        "hot/preallocated/fp32: 2 configs are tagged as the floor (a, b); a run has one floor "
        "per dtype"
    )
