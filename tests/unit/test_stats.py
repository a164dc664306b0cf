"""The timer's statistics (pure numpy): paired ratios, and the buffer-swapped halves."""

from __future__ import annotations

import numpy as np
import pytest

from sweeper.run.executor import merge_timings
from sweeper.run.stats import PairTiming, parts_median_ci, parts_ratio_ci, ratio_ci


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
