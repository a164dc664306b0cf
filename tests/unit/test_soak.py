"""How many candidate calls a cell makes after its outputs are poisoned (executor.timed_calls),
which decides whether the untimed soak must run to reach an after-N-calls change."""

import numpy as np

from sweeper.executor import SOAK_CALLS, timed_calls
from sweeper.measure import PairTiming


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
