"""The timer's statistics (pure numpy): paired ratios, and the buffer-swapped halves."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from sweeper.run.executor import merge_timings
from sweeper.stats import PairTiming, parts_median_ci, parts_ratio_ci, ratio_ci


def _noisy(rng, centre, k, rel=0.01):
    return centre * (1 + rel * rng.standard_normal(k))


def test_ratio_ci_known_ratio_lies_inside_a_tight_interval():
    rng = np.random.default_rng(1)
    a, b = _noisy(rng, 10.0, 40), _noisy(rng, 12.0, 40)
    r, lo, hi = ratio_ci(b, a)
    assert lo <= 1.2 <= hi and abs(r - 1.2) < 0.01 and hi - lo < 0.03


@pytest.mark.parametrize("counts", [(8, 8), (3, 16), (16, 3)])
def test_a_placement_effect_cancels_whatever_the_halves_sample_counts(counts):
    """True ratio 1.10; buffer set A is 6% faster than B for whichever side sits on it. Half 1
    reads 1.10 * p^2, half 2 1.10 / p^2; the parts estimator gives 1.10, the median of the
    concatenated samples leans to the half with more samples."""
    rng = np.random.default_rng(2)
    p = 1 / 1.06
    k1, k2 = counts
    a = [_noisy(rng, 10.0 * p, k1, 0.002), _noisy(rng, 10.0 / p, k2, 0.002)]  # a on A, then B
    b = [_noisy(rng, 11.0 / p, k1, 0.002), _noisy(rng, 11.0 * p, k2, 0.002)]
    r, lo, hi = parts_ratio_ci(b, a)
    assert abs(r - 1.10) < 0.005 and lo <= 1.10 <= hi
    t, t_lo, t_hi = parts_median_ci(a)
    assert abs(t - 10.0) < 0.05 and t_lo <= 10.0 <= t_hi
    if k1 != k2:  # the old estimator is off by about the placement effect
        r_old, _, _ = ratio_ci(np.concatenate(b), np.concatenate(a))
        assert abs(r_old - 1.10) > 0.05


def test_merged_halves_summarise_with_the_parts_estimator_and_keep_their_counts():
    rng = np.random.default_rng(3)
    p = 1 / 1.05
    h1 = PairTiming(_noisy(rng, 10.0 * p, 3, 0.002), _noisy(rng, 10.0 / p, 3, 0.002), 20, "hot")
    h2 = PairTiming(_noisy(rng, 10.0 / p, 9, 0.002), _noisy(rng, 10.0 * p, 10, 0.002), 22, "hot")
    m = merge_timings([h1, h2])
    assert m.parts == (3, 9) and m.a_us.size == m.b_us.size == 12  # h2's extra b sample dropped
    s = m.summary()
    assert abs(s["ratio"] - 1.0) < 0.005 and s["ratio_lo"] <= 1.0 <= s["ratio_hi"]
    assert abs(s["time_us"] - 10.0) < 0.05 and s["n_samples"] == 12


def test_a_single_part_summary_is_the_plain_paired_estimate():
    rng = np.random.default_rng(4)
    t = PairTiming(_noisy(rng, 5.0, 10), _noisy(rng, 6.0, 10), 10, "hot")
    s = t.summary()
    assert s["ratio"] == pytest.approx(np.median(t.b_us) / np.median(t.a_us))
    assert s["time_us"] == pytest.approx(np.median(t.a_us))


def test_the_ratio_ci_is_paired_so_drift_shared_by_both_sides_cancels():
    """Both sides slow down together over the samples (clock drift, a neighbour's load) by up
    to 30%; the true ratio is exactly 1.2 in every pair. A paired bootstrap sees a ratio of 1.2
    in every resample; resampling the sides apart would mix fast and slow samples and give an
    interval about as wide as the drift."""
    rng = np.random.default_rng(3)
    drift = 1 + 0.3 * rng.random(40)
    a = 10.0 * drift * (1 + 0.001 * rng.standard_normal(40))
    b = 12.0 * drift * (1 + 0.001 * rng.standard_normal(40))
    r, lo, hi = ratio_ci(b, a)
    assert lo <= 1.2 <= hi and hi - lo < 0.005
    unpaired_lo, unpaired_hi = np.quantile(
        [np.median(rng.choice(b, 40)) / np.median(rng.choice(a, 40)) for _ in range(400)],
        [0.025, 0.975],
    )
    assert unpaired_hi - unpaired_lo > 10 * (hi - lo)  # what pairing buys on this input


def test_the_ci_level_is_95_percent():
    """On normal noise a bootstrap interval's width scales with the normal quantile: a 95%
    interval is about 1.96 / 1.645 = 1.19 times a 90% one."""
    rng = np.random.default_rng(4)
    a, b = _noisy(rng, 10.0, 200, 0.02), _noisy(rng, 12.0, 200, 0.02)
    _, lo, hi = ratio_ci(b, a)
    _, lo90, hi90 = ratio_ci(b, a, level=0.90)
    _, lo95, hi95 = ratio_ci(b, a, level=0.95)
    assert (lo, hi) == (lo95, hi95)
    assert 1.1 < (hi - lo) / (hi90 - lo90) < 1.3


def test_median_ci_edge_cases_and_determinism():
    from sweeper.stats import median_ci

    assert all(np.isnan(median_ci(np.array([]))))
    assert median_ci(np.array([3.5])) == (3.5, 3.5)
    x = np.arange(1.0, 42.0)  # median 21
    lo, hi = median_ci(x)
    assert lo < 21 < hi and (lo, hi) == median_ci(x, seed=0) and (lo, hi) != median_ci(x, seed=9)
    lo50, hi50 = median_ci(x, level=0.5)
    assert lo <= lo50 <= 21 <= hi50 <= hi and hi50 - lo50 < hi - lo
    # the bootstrap draws medians of resamples, never values outside the data
    assert x.min() <= lo and hi <= x.max()


def test_rel_halfwidth_is_half_the_ci_over_the_median():
    from sweeper.stats import median_ci, rel_halfwidth

    x = 100.0 + np.arange(-20.0, 21.0)
    lo, hi = median_ci(x)
    assert rel_halfwidth(x) == pytest.approx((hi - lo) / 2 / 100.0)
    assert rel_halfwidth(np.zeros(5)) == float("inf")


def test_the_bootstrap_is_seeded_deterministic_and_seed_sensitive():
    rng = np.random.default_rng(5)
    a, b = _noisy(rng, 10.0, 30), _noisy(rng, 12.0, 30)
    assert ratio_ci(b, a) == ratio_ci(b, a, seed=0) == ratio_ci(b, a)
    assert ratio_ci(b, a, seed=5) != ratio_ci(b, a, seed=0)
    assert parts_ratio_ci([b], [a]) == parts_ratio_ci([b], [a], seed=0)
    assert parts_ratio_ci([b], [a], seed=5) == ratio_ci(b, a, seed=5)
    assert parts_median_ci([a]) == parts_median_ci([a], seed=0) == parts_median_ci([a])
    assert parts_median_ci([a], seed=5) != parts_median_ci([a], seed=0)


def test_the_ci_tails_split_the_level_evenly():
    from sweeper.stats import ci_tails

    assert ci_tails(0.95) == pytest.approx((0.025, 0.975))
    assert ci_tails(0.5) == pytest.approx((0.25, 0.75))


def test_pairs_are_the_first_k_of_each_side_and_the_parts_must_match():
    a, b = np.array([10.0, 10.0, 10.0]), np.array([20.0, 20.0, 20.0, 1.0, 1.0])
    r, lo, hi = ratio_ci(b, a)
    assert (r, lo, hi) == (2.0, 2.0, 2.0)  # b's unpaired last two samples are not used
    with pytest.raises(ValueError):
        parts_ratio_ci([b, b], [a])
    assert parts_median_ci([np.array([1, 2, 3])]) == parts_median_ci([np.array([1.0, 2.0, 3.0])])


def test_pair_timing_summary_splits_its_parts_only_when_they_add_up():
    a = np.array([10.0] * 4 + [20.0] * 4 + [40.0] * 4)
    b = 1.5 * a
    three = PairTiming(a, b, calls=8, mode="hot", parts=(4, 4, 4)).summary()
    assert three["time_us"] == pytest.approx(20.0)  # geometric mean of 10, 20, 40
    assert three["ratio"] == pytest.approx(1.5) and three["n_samples"] == 12
    assert set(three) == {
        "time_us", "time_lo_us", "time_hi_us", "base_time_us", "base_time_lo_us",
        "base_time_hi_us", "ratio", "ratio_lo", "ratio_hi", "n_samples",
    }  # fmt: skip
    assert three["base_time_us"] == pytest.approx(30.0)
    assert three["time_lo_us"] == pytest.approx(20.0) == three["time_hi_us"]  # no spread
    assert three["base_time_lo_us"] == pytest.approx(30.0) == three["base_time_hi_us"]
    one = PairTiming(a, b, calls=8, mode="hot", parts=(12,)).summary()
    assert one["time_us"] == pytest.approx(20.0)  # one part: the plain median
    odd = PairTiming(a, b, calls=8, mode="hot", parts=(4, 4)).summary()  # parts do not add up
    assert odd == one


def test_median_ci_of_two_samples_spans_both():
    from sweeper.stats import median_ci, rel_halfwidth

    assert median_ci(np.array([0.0, 10.0])) == (0.0, 10.0)  # resampled medians: 0, 5, 10
    assert median_ci([1, 3]) == (1.0, 3.0)
    assert rel_halfwidth(np.array([0.4, 0.6])) == pytest.approx(0.2)  # a median below 1 is fine


def test_resampled_medians_equal_numpy_medians_of_the_drawn_values():
    """The bootstrap's medians come from draw counts over the sorted sample; they must be what
    np.median of the drawn values gives, ties and even sizes included."""
    from sweeper.stats import _BOOT, _resample_counts, _resample_medians

    rng = np.random.default_rng(3)
    for k in (2, 3, 7, 8, 16):
        for x in (rng.random(k) * 10, np.round(rng.random(k) * 3)):
            (counts,) = _resample_counts(11, (k,))
            assert counts.shape == (_BOOT, k) and (counts.sum(axis=1) == k).all()
            drawn = [np.repeat(x, c) for c in counts]
            expect = np.array([np.median(d) for d in drawn])
            np.testing.assert_array_equal(_resample_medians(x, counts), expect)


def test_the_two_quantiles_are_numpys_linear_ones():
    from sweeper.stats import _quantiles

    rng = np.random.default_rng(5)
    for size in (1, 2, 3, 10, 400):
        v = rng.random(size)
        for qs in ((0.025, 0.975), (0.05, 0.95), (0.0, 1.0), (0.25, 0.5)):
            got = _quantiles(v, qs)
            want = np.quantile(v, qs)
            assert got == pytest.approx(tuple(want), rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("split", [(8, 8), (3, 5), (16,), (2, 2, 4), (1, 7)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_paired_summary_is_the_three_cis_it_replaces_bit_for_bit(split, seed):
    from sweeper.stats import paired_summary_ci

    r = np.random.default_rng(seed)
    a = [r.lognormal(2.0, 0.05, k) for k in split]
    b = [r.lognormal(2.1, 0.08, k) for k in split]
    for s, lv in ((0, 0.95), (seed + 3, 0.9)):
        got = paired_summary_ci(a, b, seed=s, level=lv)
        want = (
            parts_median_ci(a, seed=s, level=lv),
            parts_median_ci(b, seed=s, level=lv),
            parts_ratio_ci(b, a, seed=s, level=lv),
        )
        assert got == want


def test_the_paired_summary_computes_apart_where_the_sides_parts_differ():
    from sweeper.stats import paired_summary_ci

    r = np.random.default_rng(7)
    a, b = r.random(9) + 10, r.random(8) + 10  # one part, unequal sizes: the ratio truncates
    assert paired_summary_ci([a], [b]) == (
        parts_median_ci([a]), parts_median_ci([b]), parts_ratio_ci([b], [a]))  # fmt: skip
    empty = [np.array([]), r.random(4) + 10]
    got = paired_summary_ci(empty, [np.array([]), r.random(4) + 10])
    assert got[0] == parts_median_ci(empty)
    t = PairTiming(a[:8], b, 1, "hot", parts=(4, 4))  # what summary() reports from it
    s = t.summary()
    assert (s["time_us"], s["time_lo_us"], s["time_hi_us"]) == parts_median_ci(
        [a[:4], a[4:8]])  # fmt: skip
    assert (s["ratio"], s["ratio_lo"], s["ratio_hi"]) == parts_ratio_ci(
        [b[:4], b[4:]], [a[:4], a[4:8]])  # fmt: skip


def test_hot_warm_up_is_four_calls_from_a_quarter_of_the_l2_to_all_of_it():
    from sweeper.stats import warm_calls

    l2 = 60 * 2**20
    sizes = (0.5, 8, 14.9, 15, 16, 32, 56, 60, 60.1, 120, 512)
    assert [warm_calls(int(ws * 2**20), l2) for ws in sizes] == [1, 1, 1, 4, 4, 4, 4, 4, 1, 1, 1]


def test_a_recorded_warm_up_rule_gives_calls_by_working_set():
    from sweeper.stats import WARM_RULE, warm_calls, warm_rule

    l2 = 60 * 2**20
    sizes = [int(ws * 2**20) for ws in (1, 20, 59, 200)]
    assert [warm_rule(WARM_RULE, l2)(ws) for ws in sizes] == [warm_calls(ws, l2) for ws in sizes]
    assert [warm_rule(3, l2)(ws) for ws in sizes] == [3, 3, 3, 3]
    for bad in (0, True, "ceil(L2 / working set)", 2.0):
        with pytest.raises(ValueError, match="unknown warm-up rule"):
            warm_rule(bad, l2)


@pytest.mark.parametrize(
    "per_call_us, want",
    [
        (1.0, 128),  # 150 us at 1 us per call: capped at max_calls
        (1.5, 100),  # ceil(150 / 1.5)
        (1.6, 94),  # ceil(93.75)
        (0.1, 128),  # counted as 0.5 us: 300, capped
        (400.0, 1),  # one call is more than a sample: one call
    ],
)
def test_a_hot_sample_holds_enough_calls_for_its_target_time(per_call_us, want):
    from sweeper.stats import Stopping, calls_per_sample

    assert calls_per_sample(per_call_us, Stopping()) == want
    assert isinstance(calls_per_sample(per_call_us, Stopping()), int)


def test_a_hot_sample_counts_at_least_half_a_microsecond_per_call():
    from sweeper.stats import Stopping, calls_per_sample

    stop = Stopping(target_sample_us=10.0, max_calls=1000)
    assert calls_per_sample(0.1, stop) == 20  # 10 / 0.5
    assert calls_per_sample(0.5, stop) == 20
    assert calls_per_sample(0.8, stop) == 13  # ceil(12.5)


def test_a_fixed_warm_up_of_one_call_is_a_rule_and_zero_is_not():
    from sweeper.stats import warm_rule

    assert warm_rule(1, 1 << 20)(123) == 1
    for bad in (0, -1, True, "4"):
        with pytest.raises(ValueError, match="unknown warm-up rule"):
            warm_rule(bad, 1 << 20)


def test_paired_figures_computed_apart_keep_the_seed_and_the_level():
    """Parts of unequal sizes take the separate path: the same seed and level as asked."""
    from sweeper.stats import paired_summary_ci, parts_median_ci, parts_ratio_ci

    rng = np.random.default_rng(7)
    a = [rng.normal(10, 0.3, 6), rng.normal(10, 0.3, 7)]
    b = [rng.normal(11, 0.3, 6), rng.normal(11, 0.3, 6)]
    got = paired_summary_ci(a, b, seed=3, level=0.9)
    want = (
        parts_median_ci(a, seed=3, level=0.9),
        parts_median_ci(b, seed=3, level=0.9),
        parts_ratio_ci(b, a, seed=3, level=0.9),
    )
    assert got == want
    assert got != paired_summary_ci(a, b, seed=4, level=0.9)
    assert got != paired_summary_ci(a, b, seed=3, level=0.95)


def _random_cells(seed: int, count: int):
    """(a_parts, b_parts) of cells with one to three parts of 1-10 samples; ties in the
    samples (rounded values), and now and then parts whose sizes differ between the sides."""
    r = np.random.default_rng(seed)
    cells = []
    for _ in range(count):
        sizes = r.integers(1, 11, size=r.integers(1, 4))
        a = [np.round(r.lognormal(2.0, 0.05, k), 1) for k in sizes]
        b = [r.lognormal(2.1, 0.08, k + (r.random() < 0.05)) for k in sizes]
        cells.append((a, b))
    return cells


@pytest.mark.parametrize("seed", range(4))
def test_summaries_drawn_together_are_the_three_cis_drawn_apart_bit_for_bit(seed):
    from sweeper.stats import paired_summaries, summaries

    def apart(a, b, **kw):
        return (parts_median_ci(a, **kw), parts_median_ci(b, **kw), parts_ratio_ci(b, a, **kw))

    cells = _random_cells(seed, 300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the median of an empty part
        cells.append(([np.array([]), np.array([9.0])], [np.array([]), np.array([8.0])]))
        assert paired_summaries(cells) == [apart(a, b) for a, b in cells]
        assert paired_summaries(cells, seed=seed + 1, level=0.9) == [
            apart(a, b, seed=seed + 1, level=0.9) for a, b in cells]  # fmt: skip
    assert paired_summaries([]) == []
    timings = [PairTiming(np.concatenate(a), np.concatenate(b), 8, "hot",
                          parts=tuple(p.size for p in a)) for a, b in cells[:60]]  # fmt: skip
    assert summaries(timings) == [t.summary() for t in timings]


@pytest.mark.parametrize("seed", range(4))
def test_half_widths_drawn_together_are_each_arrays_own_bit_for_bit(seed):
    from sweeper.stats import median_ci, rel_halfwidth, rel_halfwidths

    def own(x):
        lo, hi = median_ci(x)
        med = float(np.median(x)) if np.size(x) else math.nan
        return (hi - lo) / 2 / med if med > 0 else math.inf

    r = np.random.default_rng(seed)
    arrays = [np.round(r.lognormal(0.0, 0.5, r.integers(0, 17)), 1) for _ in range(400)]
    arrays += [np.zeros(4), np.full(8, 3.0), np.array([5.0]), np.array([])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the median of an empty array
        want = [own(x) for x in arrays]
        assert rel_halfwidths(arrays) == want
        assert [rel_halfwidth(x) for x in arrays] == want
    assert any(0 < np.median(x) < 1 for x in arrays if x.size)  # medians below 1 included
    assert rel_halfwidths([]) == []


def test_the_rows_quantiles_are_each_rows_own():
    from sweeper.stats import _quantiles_rows

    rng = np.random.default_rng(6)
    for size in (1, 2, 3, 10, 400):
        v = rng.random((5, size))
        for qs in ((0.025, 0.975), (0.0, 1.0), (0.25, 0.5), (0.6, 0.99)):
            lo, hi = _quantiles_rows(v, qs)
            for row, got in zip(v, zip(lo, hi, strict=True), strict=True):
                assert got == pytest.approx(tuple(np.quantile(row, qs)), rel=1e-12, abs=1e-15)


def test_only_what_cannot_share_a_draw_is_drawn_on_its_own(monkeypatch):
    """The point of drawing together: a cell's three CIs are computed apart only where its
    sides' parts differ in size or a part is empty, an array's half-width alone only below
    two samples; parts of one and two samples share the batch's draws."""
    import sweeper.stats as st

    apart, drawn = [], []
    real_median, real_rows = st.parts_median_ci, st._resample_medians_rows
    monkeypatch.setattr(st, "parts_median_ci",
                        lambda a, **kw: apart.append(len(a)) or real_median(a, **kw))  # fmt: skip
    monkeypatch.setattr(st, "_resample_medians_rows",
                        lambda x, c: drawn.append(x.shape) or real_rows(x, c))  # fmt: skip
    one, two = np.array([3.0]), np.array([3.0, 4.0])
    empty = np.array([])
    cells = [([one, two], [one, two]), ([two], [two]), ([one, empty], [one, empty]),
             ([two], [one]), ([], [])]  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the median of an empty part
        st.paired_summaries(cells)
        # once per side: the empty part, the unequal sides, no parts at all
        assert apart == [2, 2, 1, 1, 0, 0]
        apart.clear()
        drawn.clear()
        st.paired_summaries([([two], [two + 1]), ([two + 2], [two + 3])])
        assert apart == [] and drawn == [(2, 2), (2, 2)]  # a's rows, b's rows: one draw each
        drawn.clear()
        widths = st.rel_halfwidths([one, two, empty, np.array([0.4, 0.6]), np.array([0.0])])
    assert drawn == [(2, 2)]  # the two two-sample arrays in one draw
    assert widths[0] == 0.0 and widths[2] == math.inf and widths[4] == math.inf
