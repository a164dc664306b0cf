"""SM clock and throttling around each batch of the batched executor, through NVML.

The batched executor times many cells in one CUDA graph launch (a batch). A batch the GPU
slowed down in the middle of would bias every cell in it, so around each launch it asks:

    token = mon.begin()           # before the launch
    res = mon.end(token)          # after the launch has completed, or, off the host's path:
    fut = mon.end_after(token, wait, start)  # a worker thread runs wait() (the launch
    res = fut.result()                       # completing), then end(token)
    if res.throttled: ...         # repeat the batch (up to twice), then keep it and mark it
    mon.note(res, kept=...)       # count it
    mon.summary()                 # -> manifest `timing.clocks`

What is read (nvidia-ml-py, module `pynvml`, imported when the monitor is made):

* clock-event ("throttle") reasons, `nvmlDeviceGetCurrentClocksEventReasons`, at begin and at
  end: a bit mask of what holds the clocks down at that instant;
* violation counters, `nvmlDeviceGetViolationStatus`, at begin and at end, for the thermal,
  power and reliability policies: nanoseconds the policy has held the GPU below its
  application clocks since boot. Their growth covers the whole batch, so a slowdown that
  started and ended between the two samples is still seen;
* the SM and memory clocks (`nvmlDeviceGetClockInfo`) when the batch ended.

A batch is throttled when one of DISQUALIFYING was active at begin or end (HW slowdown, HW
or SW thermal slowdown, HW power brake, reliability), or when the thermal or reliability
counter grew during the batch. Recorded, never disqualifying:

* `gpu_idle`: the GPU waits for the host before and after a launch, so the instant of a sample
  is often idle; it says nothing about the batch.
* `applications_clocks_setting`: the clocks are held at the application clocks the
  administrator set; they are the same for every cell of every batch.
* `sw_power_cap`: the driver's power limiter trims the clocks a few percent to hold the board
  at its power limit. A memory-bound kernel's time follows the memory clock, which it does
  not lower, and a cell's candidate and baseline samples alternate (A B B A) inside one batch,
  so a slow drift of the SM clock moves both sides of a ratio alike. The power policy's
  violation counter is what this limiter accrues, so its growth is recorded
  (`violation_ms.power`) and does not disqualify either; a HW power brake shows as its own
  reason.

A violation counter costs about 1 ms per policy to read on the H200 (three per batch; 17.8 s
of a profiled 235 s fp32 run, lab/h200/executor-cost), so the batched executor reads a batch's
end on a worker thread (`end_after`) while it builds the next batch: the worker waits for the
batch to complete (a CUDA event; the wait releases the interpreter) and reads then, so the
window still closes after the batch; readings run one at a time in the order the batches were
launched.

The monitor never raises into a run: without pynvml, or when NVML fails at start, it is
disabled and `summary()` says `{"available": false, "why": ...}`; a failure mid-run disables
it from there on (counted batches are kept, and `why` says what failed).
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

# clock-event reason bits (nvmlClocksEventReason*; NVML's values)
REASONS: dict[str, int] = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
    "board_limit": 0x200,
    "reliability": 0x400,
}
# reasons that make a batch throttled (the module docstring says why the others do not)
DISQUALIFYING = frozenset(
    {
        "hw_slowdown",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
        "reliability",
    }
)
# violation-counter policies read (nvmlPerfPolicyType_t values) and whether growth disqualifies
POLICIES: dict[str, tuple[int, bool]] = {
    "power": (0, False),
    "thermal": (1, True),
    "reliability": (5, True),
}
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2


def reason_names(mask: int) -> tuple[str, ...]:
    """The names of the reason bits set in `mask` (unknown bits as `bit0x...`)."""
    names = [name for name, bit in REASONS.items() if mask & bit]
    rest = mask & ~sum(REASONS.values())
    bit = 1
    while rest >= bit:
        if rest & bit:
            names.append(f"bit{bit:#x}")
        bit <<= 1
    return tuple(names)


@dataclass(frozen=True)
class ClockToken:
    """What `begin` read: the reason mask and the violation counters (ns) before a launch."""

    reasons: int
    violation_ns: dict[str, int]
    t0: float


@dataclass(frozen=True)
class BatchClocks:
    """One batch's clock record (`end`'s answer)."""

    throttled: bool
    sm_mhz: int | None = None
    mem_mhz: int | None = None
    reasons: tuple[str, ...] = ()  # active at begin or end
    violation_ns: dict[str, int] = field(default_factory=dict)  # growth during the batch
    why: str = ""  # what made it throttled, '' when it is not
    seconds: float = 0.0


NOT_MEASURED = BatchClocks(throttled=False)


def _stats(values: list[int]) -> dict[str, float] | None:
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


class ClockMonitor:
    """Clocks and throttling of one GPU around batches. `pci_bus_id`: the CUDA device's PCI bus
    id (e.g. "0000:3b:00.0"), matched to its NVML handle; without one, or when NVML does not
    know it, NVML's device 0. `nvml`: the pynvml module or an object with its functions
    (tests pass a fake); None imports pynvml."""

    def __init__(self, pci_bus_id: str | None = None, nvml: Any = None):
        self._nvml = None
        self._handle = None
        self.why = ""
        self.device = ""
        self._policies: dict[str, tuple[int, bool]] = {}
        self._batches = 0
        self._throttled = 0
        self._repeated = 0
        self._kept_throttled = 0
        self._sm: list[int] = []
        self._mem: list[int] = []
        self._reasons: dict[str, int] = {}
        self._violation_ns: dict[str, int] = {}
        self._last: dict[str, int] | None = None  # the violation counters as last read
        self._worker: ThreadPoolExecutor | None = None  # end_after's readings, in order
        self._worker_thread: int | None = None
        try:
            if nvml is None:
                import pynvml as nvml  # nvidia-ml-py
        except ImportError:
            self.why = "pynvml is not installed (pip install nvidia-ml-py)"
            return
        try:
            nvml.nvmlInit()
        except Exception as e:  # NVMLError and its subclasses; a missing libnvidia-ml
            self.why = f"NVML did not start: {e}"
            return
        self._nvml = nvml
        handle = None
        if pci_bus_id:
            try:
                handle = nvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
                self.device = f"PCI {pci_bus_id}"
            except Exception as e:
                self.device = f"NVML device 0 (PCI bus id {pci_bus_id} not found: {e})"
        try:
            if handle is None:
                handle = nvml.nvmlDeviceGetHandleByIndex(0)
                self.device = self.device or "NVML device 0 (no PCI bus id given)"
            self._handle = handle
            self._event_reasons = getattr(
                nvml,
                "nvmlDeviceGetCurrentClocksEventReasons",
                getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None),
            )
            if self._event_reasons is None:
                raise RuntimeError("this pynvml has no clocks-event reasons call")
            self._event_reasons(handle)
            nvml.nvmlDeviceGetClockInfo(handle, NVML_CLOCK_SM)
        except Exception as e:
            self._disable(f"NVML cannot read the device: {e}")
            return
        for name, (policy, disqualifies) in POLICIES.items():
            try:  # a policy the device does not support is left out, not an error
                nvml.nvmlDeviceGetViolationStatus(handle, policy)
                self._policies[name] = (policy, disqualifies)
            except Exception:
                pass

    @property
    def available(self) -> bool:
        return self._handle is not None

    def _disable(self, why: str) -> None:
        self.why = why
        self._handle = None
        self.close()

    def close(self) -> None:
        """Shut NVML down (the monitor is disabled afterwards), once pending readings ran."""
        worker, self._worker = self._worker, None
        if worker is not None:  # a reading that fails disables the monitor from the worker
            worker.shutdown(wait=threading.get_ident() != self._worker_thread)
        nvml, self._nvml, self._handle = self._nvml, None, None
        if nvml is not None:
            with contextlib.suppress(Exception):
                nvml.nvmlShutdown()

    def __enter__(self) -> ClockMonitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _violations(self) -> dict[str, int]:
        out = {}
        for name, (policy, _) in self._policies.items():
            v = self._nvml.nvmlDeviceGetViolationStatus(self._handle, policy)
            out[name] = int(v.violationTime)
        return out

    def begin(self) -> ClockToken | None:
        """Read the reasons before a launch, and take the violation counters as `end` last read
        them (None when disabled). A violation counter is the slowest NVML read here, one per
        policy; the last reading was taken before this launch, so the window from it to this
        batch's `end` still holds the whole batch (a batch in flight at that reading can share
        a violation with this one: both are flagged)."""
        if not self.available:
            return None
        try:
            if self._last is None:
                self._last = self._violations()
            return ClockToken(int(self._event_reasons(self._handle)), self._last, time.monotonic())
        except Exception as e:
            self._disable(f"NVML failed mid-run: {e}")
            return None

    def end(self, token: ClockToken | None) -> BatchClocks:
        """Read them again after the launch completed and say whether the batch throttled;
        NOT_MEASURED (never throttled) when disabled or `token` is None."""
        if token is None or not self.available:
            return NOT_MEASURED
        nvml, h = self._nvml, self._handle
        try:
            mask = token.reasons | int(self._event_reasons(h))
            after = self._last = self._violations()
            sm = int(nvml.nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM))
            mem = int(nvml.nvmlDeviceGetClockInfo(h, NVML_CLOCK_MEM))
        except Exception as e:
            self._disable(f"NVML failed mid-run: {e}")
            return NOT_MEASURED
        grew = {k: after[k] - token.violation_ns.get(k, after[k]) for k in after}
        names = reason_names(mask)
        bad = [r for r in names if r in DISQUALIFYING]
        bad += [
            f"{k} violation +{grew[k] / 1e6:.3f} ms"
            for k, (_, disqualifies) in self._policies.items()
            if disqualifies and grew.get(k, 0) > 0
        ]
        return BatchClocks(
            throttled=bool(bad),
            sm_mhz=sm,
            mem_mhz=mem,
            reasons=names,
            violation_ns=grew,
            why=", ".join(bad),
            seconds=time.monotonic() - token.t0,
        )

    def end_after(
        self, token: ClockToken | None, wait: Callable[[], object], start: Callable[[], object]
    ) -> Future:
        """`end(token)` on the monitor's worker thread once `wait()` has returned there (the
        launch it brackets has completed); a Future of its BatchClocks. `start()` runs once on
        the worker before its first reading (e.g. making a CUDA context current). Readings run
        one at a time, in the order they were asked for, so each `end` sets the counters the
        next `begin` takes. A `wait` that raises makes the Future raise. Disabled or no token:
        a completed Future of NOT_MEASURED (`wait` is not called)."""
        if token is None or not self.available:
            done: Future = Future()
            done.set_result(NOT_MEASURED)
            return done
        if self._worker is None:

            def first() -> None:
                self._worker_thread = threading.get_ident()
                start()

            self._worker = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="sweeper-clocks", initializer=first
            )

        def read() -> BatchClocks:
            wait()
            return self.end(token)

        return self._worker.submit(read)

    def note(self, res: BatchClocks, kept: bool) -> None:
        """Count one batch: `kept` False when the executor repeats it."""
        if res is NOT_MEASURED or res.sm_mhz is None:
            return
        self._batches += 1
        self._sm.append(res.sm_mhz)
        if res.mem_mhz is not None:
            self._mem.append(res.mem_mhz)
        for r in res.reasons:
            self._reasons[r] = self._reasons.get(r, 0) + 1
        for k, ns in res.violation_ns.items():
            self._violation_ns[k] = self._violation_ns.get(k, 0) + max(ns, 0)
        if res.throttled:
            self._throttled += 1
            if kept:
                self._kept_throttled += 1
            else:
                self._repeated += 1

    def summary(self) -> dict[str, Any]:
        """The manifest's `timing.clocks`: JSON-able."""
        if not self._batches and not self.available:
            return {"available": False, "why": self.why or "NVML is not open"}
        out: dict[str, Any] = {
            "available": True,
            "device": self.device,
            "batches": self._batches,
            "sm_mhz": _stats(self._sm),
            "mem_mhz": _stats(self._mem),
            "throttled": self._throttled,
            "repeated": self._repeated,
            "kept_throttled": self._kept_throttled,
            "reasons": dict(sorted(self._reasons.items())),
            "violation_ms": {k: round(v / 1e6, 3) for k, v in sorted(self._violation_ns.items())},
            "disqualifying": sorted(DISQUALIFYING)
            + [f"{k} violation" for k, (_, d) in self._policies.items() if d],
        }
        if self.why:  # NVML failed after some batches were counted
            out["why"] = self.why
        return out
