"""ClockMonitor (sweeper.run.clocks) over a fake pynvml: no NVML, no GPU."""

from __future__ import annotations

import builtins
import json
from types import SimpleNamespace

import pytest

from sweeper.run.clocks import NOT_MEASURED, REASONS, ClockMonitor, reason_names


class FakeError(Exception):
    pass


class FakeNVML:
    """The pynvml calls ClockMonitor makes, on state the test sets: `reasons` (a list of masks
    handed out one per call, the last one repeated), `violation` (policy -> ns), clocks."""

    def __init__(self, buses=("00000000:3B:00.0",), fail_init=False, unsupported=()):
        self.buses = buses
        self.fail_init = fail_init
        self.unsupported = set(unsupported)
        self.reasons = [0]
        self.violation = {0: 0, 1: 0, 5: 0}
        self.sm = 1980
        self.mem = 3201
        self.handles = []
        self.shutdown = 0
        self.fail_reads = False

    def nvmlInit(self):
        if self.fail_init:
            raise FakeError("Driver Not Loaded")

    def nvmlShutdown(self):
        self.shutdown += 1

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        # NVML takes 4- or 8-digit domains
        want = bus.lower().split(":", 1)[1]
        for b in self.buses:
            if b.lower().split(":", 1)[1] == want:
                self.handles.append(("pci", b))
                return ("pci", b)
        raise FakeError("Not Found")

    def nvmlDeviceGetHandleByIndex(self, i):
        self.handles.append(("index", i))
        return ("index", i)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        if self.fail_reads:
            raise FakeError("GPU is lost")
        return self.reasons.pop(0) if len(self.reasons) > 1 else self.reasons[0]

    def nvmlDeviceGetClockInfo(self, h, kind):
        return {1: self.sm, 2: self.mem}[kind]

    def nvmlDeviceGetViolationStatus(self, h, policy):
        if policy in self.unsupported:
            raise FakeError("Not Supported")
        return SimpleNamespace(referenceTime=0, violationTime=self.violation[policy])


def batch(mon, nvml, reasons=(0, 0), grow=None, sm=None):
    """One begin/end around a 'launch' during which the violation counters grow by `grow`."""
    nvml.reasons = list(reasons)
    tok = mon.begin()
    for policy, ns in (grow or {}).items():
        nvml.violation[policy] += ns
    if sm is not None:
        nvml.sm = sm
    return mon.end(tok)


def test_matches_the_cuda_device_by_pci_bus_id():
    nvml = FakeNVML(buses=("00000000:1A:00.0", "00000000:3B:00.0"))
    mon = ClockMonitor("0000:3b:00.0", nvml=nvml)
    assert mon.available
    assert nvml.handles[-1] == ("pci", "00000000:3B:00.0")
    assert mon.summary()["device"] == "PCI 0000:3b:00.0"


def test_unknown_or_missing_bus_id_falls_back_to_device_0():
    nvml = FakeNVML()
    mon = ClockMonitor("0000:99:00.0", nvml=nvml)
    assert mon.available and nvml.handles[-1] == ("index", 0)
    assert "not found" in mon.summary()["device"]
    nvml = FakeNVML()
    ClockMonitor(None, nvml=nvml)
    assert nvml.handles == [("index", 0)]


def test_quiet_batches_are_not_throttled_and_summarised():
    nvml = FakeNVML()
    mon = ClockMonitor(nvml=nvml)
    for sm in (1980, 1965, 1950):
        res = batch(mon, nvml, sm=sm)
        assert not res.throttled and res.why == "" and res.sm_mhz == sm and res.mem_mhz == 3201
        mon.note(res, kept=True)
    s = mon.summary()
    assert s["available"] is True and s["batches"] == 3
    assert s["sm_mhz"] == {"min": 1950, "median": 1965, "max": 1980}
    assert s["mem_mhz"] == {"min": 3201, "median": 3201, "max": 3201}
    assert (s["throttled"], s["repeated"], s["kept_throttled"]) == (0, 0, 0)
    assert s["reasons"] == {}
    json.dumps(s)  # JSON-able


@pytest.mark.parametrize(
    "reason",
    ["hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"],
)
def test_a_disqualifying_reason_at_begin_or_at_end_throttles(reason):
    nvml = FakeNVML()
    mon = ClockMonitor(nvml=nvml)
    bit = REASONS[reason]
    for reasons in ((bit, 0), (0, bit)):
        res = batch(mon, nvml, reasons=reasons)
        assert res.throttled and reason in res.reasons and reason in res.why


@pytest.mark.parametrize("reason", ["gpu_idle", "applications_clocks_setting", "sw_power_cap"])
def test_idle_app_clocks_and_sw_power_cap_are_recorded_not_disqualifying(reason):
    nvml = FakeNVML()
    mon = ClockMonitor(nvml=nvml)
    res = batch(mon, nvml, reasons=(REASONS[reason], REASONS[reason]))
    assert not res.throttled and res.reasons == (reason,)
    mon.note(res, kept=True)
    assert mon.summary()["reasons"] == {reason: 1}


@pytest.mark.parametrize("policy,name", [(1, "thermal"), (5, "reliability")])
def test_a_slowdown_between_the_two_samples_is_caught_by_the_violation_counter(policy, name):
    """No reason bit is set at begin or end, but the policy's counter grew during the batch."""
    nvml = FakeNVML()
    mon = ClockMonitor(nvml=nvml)
    res = batch(mon, nvml, grow={policy: 2_500_000})
    assert res.throttled and res.reasons == ()
    assert res.violation_ns[name] == 2_500_000
    assert f"{name} violation +2.500 ms" in res.why


def test_power_violation_growth_is_recorded_not_disqualifying():
    nvml = FakeNVML()
    mon = ClockMonitor(nvml=nvml)
    res = batch(mon, nvml, grow={0: 4_000_000})
    assert not res.throttled and res.violation_ns["power"] == 4_000_000
    mon.note(res, kept=True)
    assert mon.summary()["violation_ms"]["power"] == 4.0


def test_repeats_and_kept_throttled_batches_are_counted():
    nvml = FakeNVML()
    mon = ClockMonitor(nvml=nvml)
    hot = REASONS["hw_thermal_slowdown"]
    # one batch throttled twice, repeated twice, then kept throttled; another repeated once
    for kept in (False, False, True):
        mon.note(batch(mon, nvml, reasons=(hot, hot)), kept=kept)
    mon.note(batch(mon, nvml, reasons=(0, hot)), kept=False)
    mon.note(batch(mon, nvml), kept=True)
    s = mon.summary()
    assert s["batches"] == 5 and s["throttled"] == 4
    assert s["repeated"] == 3 and s["kept_throttled"] == 1
    assert s["reasons"] == {"hw_thermal_slowdown": 4}


def test_unsupported_violation_policies_are_left_out():
    nvml = FakeNVML(unsupported={5})
    mon = ClockMonitor(nvml=nvml)
    res = batch(mon, nvml, grow={1: 10})
    assert res.throttled and set(res.violation_ns) == {"power", "thermal"}
    assert "reliability violation" not in mon.summary()["disqualifying"]


def test_without_pynvml_the_monitor_is_disabled(monkeypatch):
    real = builtins.__import__

    def no_pynvml(name, *a, **k):
        if name == "pynvml":
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_pynvml)
    mon = ClockMonitor("0000:3b:00.0")
    assert not mon.available
    assert mon.begin() is None and mon.end(None) is NOT_MEASURED
    mon.note(NOT_MEASURED, kept=True)
    s = mon.summary()
    assert s == {"available": False, "why": "pynvml is not installed (pip install nvidia-ml-py)"}


def test_nvml_that_does_not_start_disables_the_monitor_without_raising():
    mon = ClockMonitor(nvml=FakeNVML(fail_init=True))
    assert not mon.available
    assert not mon.end(mon.begin()).throttled
    s = mon.summary()
    assert s["available"] is False and "Driver Not Loaded" in s["why"]


def test_nvml_failing_mid_run_disables_it_and_keeps_what_was_counted():
    nvml = FakeNVML()
    mon = ClockMonitor(nvml=nvml)
    mon.note(batch(mon, nvml), kept=True)
    nvml.fail_reads = True
    res = batch(mon, nvml)
    assert res is NOT_MEASURED and not res.throttled
    assert not mon.available and nvml.shutdown == 1
    s = mon.summary()
    assert s["available"] is True and s["batches"] == 1 and "GPU is lost" in s["why"]


def test_reason_names_reads_every_bit():
    assert reason_names(0) == ()
    assert reason_names(0x1 | 0x40) == ("gpu_idle", "hw_thermal_slowdown")
    assert reason_names(0x800) == ("bit0x800",)


def test_overlapping_batches_read_the_violation_counters_once_per_batch_and_miss_nothing():
    """The executor launches batch k+1 before it waits for batch k. begin() takes the counters
    as the last end() read them: one read per batch, and a window that still holds the whole
    batch, so a violation while k+1 was queued behind k flags k+1 (and k, which shared it)."""
    nvml = FakeNVML()
    mon = ClockMonitor(nvml=nvml)
    reads = {"n": 0}
    real = nvml.nvmlDeviceGetViolationStatus

    def counted(h, policy):
        reads["n"] += 1
        return real(h, policy)

    nvml.nvmlDeviceGetViolationStatus = counted
    t0 = mon.begin()
    first = reads["n"]  # the first begin has no earlier reading
    assert first > 0
    t1 = mon.begin()  # batch 1 queued while batch 0 runs
    assert reads["n"] == first
    nvml.violation[1] += 2_000_000  # thermal, after batch 1 was queued, before batch 0 ended
    r0 = mon.end(t0)
    t2 = mon.begin()
    r1 = mon.end(t1)
    r2 = mon.end(t2)
    assert r0.throttled and r1.throttled and not r2.throttled
    assert reads["n"] == first + 3 * first  # one reading per end()


def test_end_after_reads_on_a_worker_once_the_wait_returned_in_launch_order():
    """end_after: the reading runs on another thread after wait() returned, readings run in
    the order asked, and each sets the counters the next begin() takes."""
    import threading

    nvml = FakeNVML()
    mon = ClockMonitor(nvml=nvml)
    started, waited, read_on = [], [], []
    real = nvml.nvmlDeviceGetViolationStatus

    def tracked(h, policy):
        read_on.append(threading.get_ident())
        return real(h, policy)

    nvml.nvmlDeviceGetViolationStatus = tracked
    gate = threading.Event()
    t0 = mon.begin()
    del read_on[:]  # the first begin reads on the caller's thread
    f0 = mon.end_after(
        t0, wait=lambda: (gate.wait(5), waited.append(0)), start=lambda: started.append(1)
    )
    t1 = mon.begin()  # batch 1 queued while batch 0 runs: its window opens before batch 0's end
    f1 = mon.end_after(t1, wait=lambda: waited.append(1), start=lambda: started.append(1))
    nvml.violation[1] += 2_000_000  # thermal, while both are in flight
    assert not f0.done() and not f1.done()  # both wait for batch 0's completion
    gate.set()
    r0, r1 = f0.result(5), f1.result(5)
    assert waited == [0, 1] and started == [1]
    assert r0.throttled and r1.throttled
    assert read_on and threading.get_ident() not in read_on
    t2 = mon.begin()
    assert not mon.end_after(t2, wait=lambda: None, start=lambda: None).result(5).throttled
    mon.close()
    assert nvml.shutdown == 1


def test_end_after_a_failed_wait_raises_through_its_future_and_disabled_calls_nothing():
    nvml = FakeNVML()
    mon = ClockMonitor(nvml=nvml)

    def broken():
        raise RuntimeError("sticky CUDA error")

    fut = mon.end_after(mon.begin(), wait=broken, start=lambda: None)
    with pytest.raises(RuntimeError, match="sticky"):
        fut.result(5)
    called = []
    off = ClockMonitor(nvml=FakeNVML(fail_init=True))
    res = off.end_after(off.begin(), wait=lambda: called.append(1), start=lambda: None)
    assert res.result(0) is NOT_MEASURED and not called


def test_a_reading_that_fails_on_the_worker_disables_the_monitor_without_hanging():
    nvml = FakeNVML()
    mon = ClockMonitor(nvml=nvml)
    tok = mon.begin()
    nvml.fail_reads = True
    assert mon.end_after(tok, wait=lambda: None, start=lambda: None).result(5) is NOT_MEASURED
    assert not mon.available and nvml.shutdown == 1
