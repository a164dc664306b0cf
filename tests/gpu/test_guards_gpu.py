"""The runner's guards catch the cheating variants (sweeper_kernels.adversarial)."""

from __future__ import annotations

import pytest

from sweeper.run.executor import GpuExecutor
from sweeper.stats import Stopping

N = 1 << 22  # 32 MiB working set in fp32
MODES = ("hot", "cold", "after-write")


@pytest.fixture(scope="module")
def ex():
    return GpuExecutor(stopping=Stopping(min_samples=4, max_samples=8, rel_tol=0.02, time_cap_s=1))


@pytest.fixture(scope="module")
def base():
    from sweeper_kernels import Variant

    return Variant("fp32", 16, 2, "cs", "cs")


def test_an_honest_variant_passes_every_guard(ex, base):
    row = ex.measure("hot", "fp32", N, base)
    assert row["status"] == "ok", row["status_detail"]


def test_a_persisting_window_is_caught_and_cleared(ex, base):
    from sweeper_kernels.adversarial import persisting_window

    row = ex.measure("hot", "fp32", N, persisting_window(base))
    assert row["status"] == "guard", row
    assert "persisting-L2 state changed" in row["status_detail"]
    assert ex.bench.persisting_state()["limit"] == 0  # reset after the cell


def test_drift_after_10_calls_is_caught_after_the_timed_loop(ex, base):
    from sweeper_kernels.adversarial import drift_after_10

    row = ex.measure("hot", "fp32", N, drift_after_10(base))
    assert row["status"] == "mismatch", row
    assert "after the timed loop" in row["status_detail"]


def test_skipping_half_the_work_after_warmup_is_caught(ex, base):
    from sweeper_kernels.adversarial import half_work_after_warmup

    row = ex.measure("hot", "fp32", N, half_work_after_warmup(base))
    assert row["status"] == "mismatch", row
    assert "after the timed loop" in row["status_detail"]


def test_cold_mode_catches_them_too(ex, base):
    # Cold mode makes one call per sample: the cell's calls (pre-check, two buffer-swapped
    # halves, each with a warm-up call) pass 10 in the timed loop, or else the untimed soak up
    # to SOAK_CALLS does.
    from sweeper_kernels.adversarial import drift_after_10, half_work_after_warmup

    row = ex.measure("cold", "fp32", N, drift_after_10(base))
    assert row["status"] == "mismatch", row
    assert "words differ from the reference" in row["status_detail"]
    row = ex.measure("cold", "fp32", N, half_work_after_warmup(base))
    assert row["status"] == "mismatch", row


def test_the_l2_normalizer_keeps_the_data_and_runs_between_slots(ex):
    import numpy as np

    b = ex.buffers("fp32", N)
    # The input holds NaN payloads, so compare bits, not values (NaN != NaN).
    before = [a.copy_to_host().view(np.uint8) for a in b.all_arrays()]
    norm = ex.bench.normalizer(b.all_arrays())
    assert norm is not None  # sm_80+
    norm(ex.bench.stream)
    ex.bench.sync()
    after = [a.copy_to_host().view(np.uint8) for a in b.all_arrays()]
    assert len(after) == len(before) >= 2
    for x, y in zip(before, after, strict=True):
        assert np.array_equal(x, y)


def test_an_evict_last_candidate_no_longer_slows_the_baseline():
    """At 37.5 MiB (fp32, in the H200's L2 band) torch measured 3-8% slower next to evict_last
    candidates before the normalizer; now its median next to one must match its median next
    to a default-hint candidate within 2% (the run's own stopping rule: 6-16 samples, 1%)."""
    from sweeper_kernels import Variant

    ex = GpuExecutor(stopping=Stopping())
    n = int(37.5 * (1 << 20)) // 8
    el = ex.measure("hot", "fp32", n, Variant("fp32", 16, 1, "L2::evict_last", "cs", 256, "flat"))
    plain = ex.measure("hot", "fp32", n, Variant("fp32", 16, 1, "default", "cs", 256, "flat"))
    assert el["status"] == plain["status"] == "ok"
    assert abs(el["base_time_us"] / plain["base_time_us"] - 1) < 0.02, (el, plain)


def test_a_process_whose_first_cell_is_cold_does_not_deadlock_the_blocking_kernel():
    """The L2 normalizer's first launch must not happen while the blocking kernel holds the
    stream: loading its module (CUDA lazy loading) would wait for that stream, a deadlock at
    the first cold cell. It needs a fresh process: once any test has launched the
    normalizer, its module is loaded for good."""
    import subprocess
    import sys

    code = (
        "from sweeper.run.executor import GpuExecutor\n"
        "from sweeper.run.timers import Stopping\n"
        "from sweeper_kernels import Variant\n"
        "ex = GpuExecutor(stopping=Stopping(min_samples=4, max_samples=8, rel_tol=0.02,"
        " time_cap_s=1))\n"
        "row = ex.measure('cold', 'fp32', 1 << 20, Variant('fp32', 16, 1, 'L2::evict_last',"
        " 'cs', 256, 'flat'))\n"
        "print(row['status'], row['status_detail'])\n"
        "assert row['status'] == 'ok', row\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["skipright", "onein2", "onein4"])
def test_a_kernel_that_skips_work_is_caught_on_fresh_input(ex, base, mode, kind):
    """Each passes the pre-check and every poison-then-check (a poisoned output makes it work
    once); only the replay on input rewritten before every call sees its stale output."""
    import re

    from sweeper_kernels.adversarial import AdversarialVariant

    row = ex.measure(mode, "fp32", N, AdversarialVariant(kind, base))
    assert row["status"] == "mismatch", row
    assert row["status_detail"].startswith("fresh input: "), row
    stale, checked = map(
        int, re.match(r"fresh input: (\d+) of (\d+) ", row["status_detail"]).groups()
    )
    assert 0 < stale <= checked


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["drift10", "half3"])
def test_the_after_n_calls_fixtures_are_caught_before_the_replay(ex, base, mode, kind):
    from sweeper_kernels.adversarial import AdversarialVariant

    row = ex.measure(mode, "fp32", N, AdversarialVariant(kind, base))
    assert row["status"] == "mismatch", row
    assert "words differ from the reference" in row["status_detail"], row


@pytest.mark.parametrize("mode", MODES)
def test_an_honest_variant_passes_the_fresh_input_replay_in_every_mode(ex, base, mode):
    cells = ex._fresh_cells
    row = ex.measure(mode, "fp32", N, base)
    assert row["status"] == "ok", row["status_detail"]
    assert ex._fresh_cells == cells + 1  # the replay ran


@pytest.mark.parametrize("mode", MODES)
def test_the_replay_leaves_the_input_as_it_found_it(ex, base, mode):
    import numpy as np
    from sweeper_kernels.adversarial import one_call_in_2

    ex.measure(mode, "fp32", N, base)
    ex.measure(mode, "fp32", N, one_call_in_2(base))
    b = ex.buffers("fp32", N)
    src = b.src.copy_to_host().view(np.uint32)  # bits: the input holds NaN payloads
    for side in "AB":
        assert np.array_equal(b.side(side)[0].copy_to_host().view(np.uint32), src), side
    x, _ = ex._host.get("fp32", N)
    assert np.array_equal(src, x.view(np.uint32))


def test_the_hot_replay_checks_every_call_of_a_samples_graph(ex, base):
    """The hot replay checks every call of a sample's graph: a kernel that works on one call
    in 4 is stale on three of every four checks on each buffer set."""
    import re

    from sweeper_kernels.adversarial import one_call_in_4

    from sweeper.run.fresh import FRESH_WORDS

    row = ex.measure("hot", "fp32", N, one_call_in_4(base))
    stale, checked = map(
        int, re.match(r"fresh input: (\d+) of (\d+) ", row["status_detail"]).groups()
    )
    calls = ex._base_calls[("fp32", N)]
    assert checked == 2 * calls * FRESH_WORDS
    assert stale >= FRESH_WORDS * (2 * (calls - 1) * 3 // 4)


def test_the_hot_replay_updates_its_graphs_and_still_catches_a_skipping_kernel(ex, base):
    """The replay's graphs are updated in place (timers.ExecPool) where the driver allows it
    (buffer set B's graphs from set A's, same kernel), else instantiated; a skipping kernel
    replayed through updated graphs is caught as through new ones."""
    from sweeper_kernels.adversarial import AdversarialVariant

    assert ex.measure("hot", "fp32", N, base)["status"] == "ok"
    before = ex.replay_graphs()
    row = ex.measure("hot", "fp32", N, AdversarialVariant("skipright", base))
    got = ex.replay_graphs()
    assert before["updated"] >= 2 and got["updated"] >= 2, (before, got)
    assert got["updated"] + got["instantiated"] == 4  # a warm-up and a sample graph per set
    assert row["status"] == "mismatch" and row["status_detail"].startswith("fresh input: "), row
    assert ex.measure("hot", "fp32", N, base)["status"] == "ok"


@pytest.mark.parametrize("mode", ["hot", "cold"])
def test_with_two_output_buffers_the_replay_checks_the_one_each_call_wrote(mode):
    """The allocating pattern alternates two output buffers per side; each check reads the
    buffer its call wrote, so an honest kernel stays ok and a skipping one is caught."""
    from sweeper_kernels import Variant
    from sweeper_kernels.adversarial import skip_when_right

    ex = GpuExecutor(
        pattern="allocating",
        stopping=Stopping(min_samples=4, max_samples=8, rel_tol=0.02, time_cap_s=1),
    )
    base = Variant("fp32", 16, 2, "cs", "cs")
    row = ex.measure(mode, "fp32", N, base)
    assert row["status"] == "ok", row["status_detail"]
    row = ex.measure(mode, "fp32", N, skip_when_right(base))
    assert row["status"] == "mismatch" and row["status_detail"].startswith("fresh input: "), row
