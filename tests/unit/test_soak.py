"""How many candidate calls a cell makes after its outputs are poisoned (executor.timed_calls),
which decides whether the untimed soak must run to reach an after-N-calls change."""

import numpy as np

from sweeper.run.executor import SOAK_CALLS, timed_calls
from sweeper.stats import PairTiming


def _timing(mode: str, samples: int, calls: int) -> PairTiming:
    return PairTiming(np.ones(samples), np.ones(samples), calls, mode, list("ABBA"))


def test_hot_counts_the_graph_calls_and_one_warm_call_per_sample():
    assert timed_calls(_timing("hot", 8, 50)) == 8 * 51


def test_cold_makes_one_call_per_sample_and_needs_the_soak_for_drift_after_10():
    made = timed_calls(_timing("cold", 8, 1))
    assert made == 8
    assert made < 10 < SOAK_CALLS  # adversarial drift_after_10 is only reached by the soak


def test_after_write_counts_like_cold():
    assert timed_calls(_timing("after-write", 12, 1)) == 12


def test_each_buffer_swapped_half_takes_half_the_samples_and_time():
    from sweeper.run.executor import half_stopping
    from sweeper.stats import Stopping

    h = half_stopping(Stopping(min_samples=6, max_samples=16, time_cap_s=2.0))
    assert (h.min_samples, h.max_samples, h.time_cap_s) == (3, 8, 1.0)
    assert half_stopping(Stopping(min_samples=1, max_samples=3)).min_samples == 2


def test_merged_halves_keep_pairs_adjacent_and_orders_concatenated():
    from sweeper.run.executor import merge_timings

    a = PairTiming(np.array([1.0, 2.0]), np.array([3.0, 4.0]), 10, "hot", list("ABBA"))
    b = PairTiming(np.array([5.0]), np.array([6.0]), 12, "hot", list("AB"))
    m = merge_timings([a, b])
    assert m.a_us.tolist() == [1.0, 2.0, 5.0] and m.b_us.tolist() == [3.0, 4.0, 6.0]
    assert m.order == list("ABBAAB") and m.mode == "hot"
