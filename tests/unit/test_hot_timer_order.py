"""The hot timer's queueing order, on the CPU with a recording fake of the CUDA calls.

The GPU figures themselves are in tests/gpu; what is checked here is the invariant that
removes the side-a bias measured on the H200 (docs/methodology.md): every launch and event of an ABBA
round is queued while the blocking kernel holds the stream, and every first launch (which can
load a module under CUDA lazy loading) happens before any hold."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from sweeper.run import timers as measure
from sweeper.run.timers import Bench
from sweeper.stats import Stopping


class _Log(list):
    pass


class _Event:
    def __init__(self, log, i):
        self.log, self.i = log, i

    def record(self, stream):
        self.log.append(f"event{self.i}")


class _Cuda:
    def __init__(self, log):
        self.log = log
        self.n = 0

    def event(self, timing=True):
        self.n += 1
        return _Event(self.log, self.n - 1)

    def event_elapsed_time(self, e0, e1):
        return 0.1  # ms

    @contextlib.contextmanager
    def defer_cleanup(self):
        self.log.append("defer")
        yield
        self.log.append("undefer")


def _fake_bench(monkeypatch, log) -> Bench:
    class FakeGraph:
        def __init__(self, launch, calls, stream):
            self.calls, self.name = calls, f"{launch.__name__}x{calls}"

        def launch(self):
            log.append(f"graph {self.name}")

        def close(self):
            pass

    monkeypatch.setattr(measure, "Graph", FakeGraph)
    b = Bench.__new__(Bench)
    b.cuda = _Cuda(log)
    b.stream = object()
    b._events = []
    b.clock = measure.PhaseClock()
    b.hold = lambda k=0: log.append("hold" if k == 0 else f"hold{k}")
    b.release_hold = lambda: log.append("release")
    b.release_flag = lambda k: log.append(f"release{k}")
    b._wait = lambda e: log.append(f"wait event{e.i}")
    b._check_timeout = lambda: log.append("timeout?")
    b.sync = lambda: log.append("sync")
    return b


def _launch(name, log):
    def f(stream):
        log.append(name)

    f.__name__ = name
    return f


def _holds(log, first):
    """The bodies of the held blocks from log[first] on, checking that nothing but a sync
    (and the deferred-cleanup markers) comes between a release and the next hold."""
    bodies = []
    i = first
    while "hold" in log[i:]:
        h = log.index("hold", i)
        r = log.index("release", h)
        bodies.append(log[h + 1 : r])
        nxt = log.index("hold", r) if "hold" in log[r:] else len(log)
        assert [x for x in log[r + 1 : nxt] if x not in ("undefer", "sync", "defer")] == []
        i = r
    return bodies


def _hot_rounds(log, first):
    """The hot timer's pipelined rounds from log[first] on: for each hold, its flag and the
    launches queued under it (up to the next host wait or release)."""
    rounds = []
    for i in range(first, len(log)):
        if log[i] in ("hold", "hold1"):
            j = i + 1
            while not log[j].startswith(("wait", "release", "hold")):
                j += 1
            rounds.append((0 if log[i] == "hold" else 1, log[i + 1 : j], i))
    return rounds


@pytest.mark.parametrize("with_between", [True, False])
@pytest.mark.parametrize("samples", [2, 4, 6])
def test_every_round_is_queued_under_the_hold_after_all_first_launches(
    monkeypatch, with_between, samples
):
    log = _Log()
    b = _fake_bench(monkeypatch, log)
    between = _launch("between", log) if with_between else None
    stop = Stopping(min_samples=samples, max_samples=samples, rel_tol=0.0)
    res = b.time_pair_hot(
        _launch("a", log), _launch("b", log), stop, calls=8, between=between,
        prime=lambda: log.append("prime"),
    )  # fmt: skip
    n_rounds = samples // 2
    assert res.order == list("ABBA" * n_rounds)  # 2 samples per side per round
    assert np.allclose(res.a_us, 100.0 / 8) and np.allclose(res.b_us, 100.0 / 8)
    first_hold = log.index("hold")
    pre = log[:first_hold]
    # first launches of everything queued later, then prime, all before the first hold
    assert {"graph ax1", "graph bx1"} <= set(pre) and pre.index("prime") > pre.index("graph bx1")
    if with_between:
        assert "between" in pre
    rounds = _hot_rounds(log, first_hold)
    assert len(rounds) == n_rounds  # the last round is never queued ahead at max_samples
    slot = (["between"] if with_between else []) + ["graph {w}x1", "event{e0}", "graph {w}x8", "event{e1}"]  # fmt: skip
    for r, (flag, body, at) in enumerate(rounds):
        assert flag == r % 2  # the holds alternate between the two flags
        base = 8 * (r % 2)  # and so do the event sets
        want = []
        for k, s in enumerate("ABBA"):
            w = s.lower()
            want += [x.format(w=w, e0=base + 2 * k, e1=base + 2 * k + 1) for x in slot]
        assert body == want
        # released after it was queued, and read only after that release
        rel = log.index(f"release{flag}", at)
        wait = log.index(f"wait event{base + 7}", at)
        assert at < rel < wait
        if r + 1 < n_rounds:
            # pipelined: the next round is queued before this one is read, and released only
            # after it was read (the stopping rule decided on this round's samples)
            nxt = rounds[r + 1][2]
            assert nxt < wait < log.index(f"release{1 - flag}", nxt)
    # the end: every flag released, the stream synced, the timeout checked
    assert log[-5:] == ["sync", "timeout?", "undefer", "release0", "release1"]


def test_a_round_queued_ahead_and_not_needed_is_released_and_dropped(monkeypatch):
    """The stopping rule stops at min_samples (a zero-width CI): round 3 was queued ahead
    while round 2 ran; it is released and its samples are not recorded."""
    log = _Log()
    b = _fake_bench(monkeypatch, log)
    stop = Stopping(min_samples=4, max_samples=16, rel_tol=0.5)
    res = b.time_pair_hot(_launch("a", log), _launch("b", log), stop, calls=8)
    assert res.order == list("ABBA" * 2) and res.a_us.size == res.b_us.size == 4
    rounds = _hot_rounds(log, log.index("hold"))
    assert [flag for flag, _, _ in rounds] == [0, 1, 0]
    third = rounds[2][2]
    assert log.index("release0", third) < log.index("sync", third)
    assert "wait event7" not in log[third:]  # never read


@pytest.mark.parametrize("per_hold", [1, 2, 8])
def test_the_blocked_timer_queues_its_samples_under_holds_after_all_first_launches(
    monkeypatch, per_hold
):
    log = _Log()
    b = _fake_bench(monkeypatch, log)
    stop = Stopping(min_samples=4, max_samples=4, rel_tol=0.0)
    res = b.time_pair_blocked(
        _launch("a", log), _launch("b", log), stop, mode="none",
        before_a=_launch("pa", log), before_b=_launch("pb", log),
        between=_launch("between", log), prime=lambda: log.append("prime"),
        per_hold=per_hold,
    )  # fmt: skip
    assert res.order == list("ABBA" * 2)  # one stopping check: 4 samples per side
    assert res.a_us.size == res.b_us.size == 4
    first_hold = log.index("hold")
    # every piece launched once, synced, outputs primed, then the samples held
    assert log[:first_hold] == ["pa", "pb", "between", "a", "b", "sync", "prime", "defer"]
    bodies = _holds(log, first_hold)
    assert len(bodies) == 8 // per_hold
    for h, body in enumerate(bodies):
        want = []
        for k, s in enumerate(("ABBA" * 2)[h * per_hold : (h + 1) * per_hold]):
            w = s.lower()
            want += ["between", f"p{w}", f"event{2 * k}", w, f"event{2 * k + 1}"]
        assert body == want


def test_the_blocked_timer_defaults_to_one_sample_per_hold_as_nvbench(monkeypatch):
    log = _Log()
    b = _fake_bench(monkeypatch, log)
    stop = Stopping(min_samples=4, max_samples=4, rel_tol=0.0)
    b.time_pair_blocked(_launch("a", log), _launch("b", log), stop, mode="none")
    assert measure.BLOCKED_SAMPLES_PER_HOLD == 1
    assert [len(x) for x in _holds(log, log.index("hold"))] == [3] * 8  # event, call, event


@pytest.mark.parametrize("per_hold", [0, 3, 16])
def test_the_blocked_timer_refuses_a_hold_that_does_not_divide_its_round(monkeypatch, per_hold):
    b = _fake_bench(monkeypatch, _Log())
    stop = Stopping(min_samples=4, max_samples=4, rel_tol=0.0)
    with pytest.raises(ValueError, match="per_hold must divide 8"):
        b.time_pair_blocked(_launch("a", []), _launch("b", []), stop, mode="none",
                            per_hold=per_hold)  # fmt: skip


def test_cold_mode_queues_the_flush_right_before_each_call_under_the_hold(monkeypatch):
    """The cold sample nvbench's agrees with (tests/gpu/test_nvbench_gpu.py): one sample per
    hold, the L2 flush queued before its call inside the hold, outside its events."""
    log = _Log()
    b = _fake_bench(monkeypatch, log)
    b.flush = lambda stream: log.append("flush")
    stop = Stopping(min_samples=4, max_samples=4, rel_tol=0.0)
    res = b.time_pair_blocked(_launch("a", log), _launch("b", log), stop, mode="cold",
                              between=_launch("between", log))  # fmt: skip
    assert res.order == list("ABBA" * 2)
    first_hold = log.index("hold")
    assert log[: first_hold - 1] == ["flush", "flush", "between", "a", "b", "sync"]
    want = []
    for s in "ABBA" * 2:
        want += ["defer", "hold", "between", "flush", "event0", s.lower(), "event1"]
        want += ["release", "undefer"]
    assert log[first_hold - 1 :] == want


def test_the_phase_clock_books_exclusive_time_and_the_hot_timer_names_its_phases(monkeypatch):
    clock = measure.PhaseClock()
    t = iter([0.0, 1.0, 3.0, 6.0])  # enter cell, enter rounds, leave rounds, leave cell
    monkeypatch.setattr(measure.time, "perf_counter", lambda: next(t))
    clock.prefix = "hot"
    with clock("cell"), clock("rounds"):
        pass
    assert clock.seconds == {"hot/cell": 1.0 + 3.0, "hot/rounds": 2.0}
    assert clock.take() == {"hot/cell": 4.0, "hot/rounds": 2.0} and clock.seconds == {}
    monkeypatch.undo()
    b = _fake_bench(monkeypatch, _Log())
    # the bootstrap runs between min_samples and max_samples: after the first round here
    stop = Stopping(min_samples=2, max_samples=4, rel_tol=0.0)
    b.time_pair_hot(_launch("a", []), _launch("b", []), stop, calls=8)
    assert set(b.clock.take()) == {"graphs", "rounds", "stopping"}


class _PoolDriver:
    """A recording fake of the driver calls timers.ExecPool makes."""

    class CUresult:
        CUDA_SUCCESS = 0

    def __init__(self):
        self.log, self.refuse, self.n = [], False, 0

    def cuGraphExecUpdate(self, ex, graph):
        self.log.append(("update", ex, graph))
        return (1 if self.refuse else 0, None)

    def cuGraphInstantiate(self, graph, flags):
        self.n += 1
        self.log.append(("instantiate", graph))
        return (0, 100 + self.n)  # a handle: int() of it names it, as of CUgraphExec

    def cuGraphExecDestroy(self, ex):
        self.log.append(("destroy", ex))

    def cuGraphDestroy(self, graph):
        self.log.append(("destroy graph", graph))


def test_the_exec_pool_updates_a_returned_graph_and_instantiates_where_the_driver_refuses(
    monkeypatch,
):
    """timers.ExecPool with a recording fake of the driver: a graph of a key seen before
    updates the returned executable; a refused update destroys it and instantiates."""

    cu = _PoolDriver()
    monkeypatch.setattr(measure, "cuda_driver", lambda: cu)
    pool = measure.ExecPool()
    first = pool.take(("fresh", 128), "g1")
    assert first == 101 and pool.take(("fresh", 128), "g2") == 102  # none free yet
    pool.give(("fresh", 128), first)
    assert pool.take(("fresh", 64), "g3") == 103  # another key never reuses it
    assert pool.take(("fresh", 128), "g4") == 101  # updated in place
    assert ("update", 101, "g4") in cu.log
    pool.give(("fresh", 128), 101)
    cu.refuse = True
    assert pool.take(("fresh", 128), "g5") == 104
    assert cu.log[-3:] == [("update", 101, "g5"), ("destroy", 101), ("instantiate", "g5")]
    assert (pool.updated, pool.instantiated) == (1, 4)


def test_an_exec_updated_from_a_later_graph_is_addressed_by_its_first_graphs_nodes(monkeypatch):
    """CUDA names a node of an instantiated graph by the graph it was instantiated from:
    ExecPool.take_addressed keeps that graph (the caller must not destroy it) with its nodes
    and hands them out with every later update; a refused update destroys both."""
    cu = _PoolDriver()
    monkeypatch.setattr(measure, "cuda_driver", lambda: cu)
    pool = measure.ExecPool()
    key = ("slot", 20)
    ex, nodes, owned = pool.take_addressed(key, "g1", ("n1a", "n1b"))
    assert (ex, nodes, owned) == (101, ("n1a", "n1b"), True)
    pool.give(key, ex)
    ex, nodes, owned = pool.take_addressed(key, "g2", ("n2a", "n2b"))
    assert (ex, nodes, owned) == (101, ("n1a", "n1b"), False)  # g2 stays the caller's
    assert ("update", 101, "g2") in cu.log and ("destroy graph", "g1") not in cu.log
    pool.give(key, ex)
    cu.refuse = True
    ex, nodes, owned = pool.take_addressed(key, "g3", ("n3a", "n3b"))
    assert (ex, nodes, owned) == (102, ("n3a", "n3b"), True)
    assert cu.log[-4:] == [("update", 101, "g3"), ("destroy", 101), ("destroy graph", "g1"),
                           ("instantiate", "g3")]  # fmt: skip


@pytest.mark.parametrize("warm", [1, 3])
def test_every_sample_follows_a_warm_up_replay_of_warm_calls_of_its_own_side(monkeypatch, warm):
    log = _Log()
    b = _fake_bench(monkeypatch, log)
    stop = Stopping(min_samples=4, max_samples=4, rel_tol=0.0)
    b.time_pair_hot(_launch("a", log), _launch("b", log), stop, calls=8, warm_calls=warm)
    for _, body, _ in _hot_rounds(log, log.index("hold")):
        timed = [i for i, x in enumerate(body) if x.endswith("x8")]
        assert [body[i - 2] for i in timed] == [f"graph {w}x{warm}" for w in "abba"]


def test_cached_baseline_graphs_must_have_the_samples_warm_up_length(monkeypatch):
    log = _Log()
    b = _fake_bench(monkeypatch, log)
    stop = Stopping(min_samples=4, max_samples=4, rel_tol=0.0)
    graphs = (measure.Graph(_launch("b", log), 8, None), measure.Graph(_launch("b", log), 1, None))
    with pytest.raises(ValueError, match="different number of calls"):
        b.time_pair_hot(_launch("a", log), None, stop, calls=8, b_graphs=graphs, warm_calls=2)


@pytest.mark.parametrize("first", ["A", "B"])
def test_side_b_first_queues_b_a_a_b_rounds_and_books_each_sample_to_its_side(monkeypatch, first):
    """With `first` "B" a hot round is B A A B (the second half of a cell, pair_swapped) and
    a blocked one B A A B B A A B; each slot's time still goes to the side that ran in it."""
    log = _Log()
    b = _fake_bench(monkeypatch, log)
    b.cuda.event_elapsed_time = lambda e0, e1: 0.001 * (1 + e0.i % 16)  # ms, by start event
    slots = measure.round_slots(first)
    stop = Stopping(min_samples=4, max_samples=4, rel_tol=0.0)
    res = b.time_pair_hot(_launch("a", log), _launch("b", log), stop, calls=1, first=first)
    assert res.order == list(slots * 2)
    rounds = _hot_rounds(log, log.index("hold"))
    assert len(rounds) == 2
    for _, body, _ in rounds:  # the timed graph of each slot, after its warm-up graph
        timed = [x.split()[1][0] for x in body if x.startswith("graph")][1::2]
        assert timed == list(slots.lower())
    # event 2k (of set r % 2, 8 events a set) starts slot k: its time is 1 + that index us
    want = {s: [] for s in "AB"}
    for r in range(2):
        for k, s in enumerate(slots):
            want[s].append(1.0 + 8 * (r % 2) + 2 * k)
    assert list(res.a_us) == pytest.approx(want["A"]) and list(res.b_us) == pytest.approx(want["B"])

    log.clear()
    b.cuda.event_elapsed_time = lambda e0, e1: 0.1
    res = b.time_pair_blocked(_launch("a", log), _launch("b", log), stop, mode="none", first=first)
    assert res.order == list(slots * 2)
    calls = [x for x in log if x in ("a", "b")][2:]  # after the warm-up launch of each
    assert calls == list((slots * 2).lower())


def test_the_first_side_is_a_or_b():
    with pytest.raises(ValueError, match="first must be 'A' or 'B'"):
        measure.round_slots("C")
