"""The GPU spec table, lookup, and device detection (with a fake driver: no GPU here)."""

from __future__ import annotations

import subprocess
import sys
import types
from dataclasses import fields

import pytest

from sweeper.errors import NoGPUError, SweeperError
from sweeper.plan import gpus

REQUIRED = {
    "3090", "4080", "4090", "5090", "rtx6000-ada", "l4", "l40s", "a10", "a100-40gb",
    "a100-80gb", "h100-sxm", "h100-pcie", "h200", "gh200", "b200",
}  # fmt: skip


def test_table_rows_present_and_well_formed():
    keys = [s.key for s in gpus.SPECS]
    assert set(keys) >= REQUIRED
    assert len(keys) == len(set(keys))
    names = {f.name for f in fields(gpus.GpuSpec)}
    for s in gpus.SPECS:
        assert s.key == s.key.lower() and " " not in s.key
        assert s.source.strip()
        assert set(s.unverified) <= names, s.key
        assert s.l2_bytes > 0 and s.sm_count > 0 and s.memory_bytes > s.l2_bytes
        assert s.dram_peak_gbps > 0 and len(s.cc) == 2
        if s.persisting_l2_max_bytes is None:
            assert "persisting_l2_max_bytes" in s.unverified, s.key
        else:
            assert s.persisting_l2_max_bytes < s.l2_bytes


def test_known_values():
    assert gpus.lookup("4090").l2_bytes == 75497472
    h200 = gpus.lookup("h200")
    assert (h200.l2_bytes, h200.persisting_l2_max_bytes) == (62914560, 39321600)
    assert (h200.sm_count, h200.cc) == (132, (9, 0))
    assert h200.unverified == ()
    a100 = gpus.lookup("a100-40gb")
    assert (a100.l2_bytes, a100.persisting_l2_max_bytes) == (41943040, 31457280)


@pytest.mark.parametrize(
    "name, key",
    [("H200", "h200"), ("rtx 4090", "4090"), ("NVIDIA GeForce RTX 4090", "4090"),
     ("A100_80GB", "a100-80gb"), ("h100", "h100-sxm"), ("H100-PCIe", "h100-pcie")],
)  # fmt: skip
def test_lookup(name, key):
    assert gpus.lookup(name).key == key


def test_unknown_lists_keys_on_one_line():
    with pytest.raises(SweeperError) as ei:
        gpus.lookup("voodoo3")
    msg = str(ei.value)
    assert "\n" not in msg and "voodoo3" in msg
    for k in REQUIRED:
        assert k in msg


def test_import_pulls_in_no_cuda():
    code = (
        "import sys, sweeper, sweeper.plan.gpus, sweeper.plan, sweeper.api\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'cuda'))\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- detection ----------------------------------------------------------------------------


def fake_driver(name=b"NVIDIA H200", l2=62914560, persist=39321600, sms=132, cc=(9, 0)):
    """A stand-in for cuda.bindings.driver with the calls detect() makes."""
    ok = "SUCCESS"
    attrs = types.SimpleNamespace(
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR="major",
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR="minor",
        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT="sms",
        CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE="l2",
        CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE="persist",
        CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH="bus",
        CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE="clock",
    )
    values = dict(
        major=cc[0], minor=cc[1], sms=sms, l2=l2, persist=persist, bus=6016, clock=3200000
    )
    return types.SimpleNamespace(
        CUresult=types.SimpleNamespace(CUDA_SUCCESS=ok),
        CUdevice_attribute=attrs,
        cuInit=lambda flags: (ok,),
        cuDeviceGetCount=lambda: (ok, 1),
        cuDeviceGet=lambda i: (ok, i),
        cuDeviceGetAttribute=lambda a, dev: (ok, values[a]),
        cuDeviceGetName=lambda n, dev: (ok, name + b"\0" * 8),
        cuDeviceTotalMem=lambda dev: (ok, 150 * 10**9),
        cuDriverGetVersion=lambda: (ok, 13000),
    )


def install(monkeypatch, driver):
    pkg = types.ModuleType("cuda.bindings")
    pkg.driver = driver
    monkeypatch.setitem(sys.modules, "cuda.bindings", pkg)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", driver)


def test_detect_reads_attributes(monkeypatch):
    install(monkeypatch, fake_driver())
    info = gpus.detect()
    assert info.name == "NVIDIA H200"
    assert (info.cc, info.sm_count, info.l2_bytes) == ((9, 0), 132, 62914560)
    assert info.persisting_l2_max_bytes == 39321600
    assert info.driver_version == 13000
    assert info.dram_peak_gbps == pytest.approx(6016 / 8 * 3.2e9 * 2 / 1e9)


def test_detect_without_bindings(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)
    with pytest.raises(NoGPUError, match="--gpu NAME"):
        gpus.detect()


def test_detect_driver_failure(monkeypatch):
    drv = fake_driver()

    def no_lib(flags):
        raise OSError("libcuda.so not found")

    drv.cuInit = no_lib
    install(monkeypatch, drv)
    with pytest.raises(NoGPUError, match="no usable CUDA driver"):
        gpus.detect()
    drv.cuInit = lambda flags: ("CUDA_ERROR_NO_DEVICE",)
    with pytest.raises(NoGPUError, match="CUDA_ERROR_NO_DEVICE"):
        gpus.detect()


def test_spec_for_matching_device(monkeypatch):
    install(monkeypatch, fake_driver())
    spec, diffs = gpus.spec_for_device(gpus.detect())
    assert spec.key == "h200"
    assert diffs == ["memory_bytes: table 141000000000, device 150000000000"]


def test_spec_for_device_that_differs(monkeypatch):
    install(monkeypatch, fake_driver(name=b"NVIDIA H100 80GB HBM3", l2=50 * 2**20 + 4096))
    spec, diffs = gpus.spec_for_device(gpus.detect())
    assert spec.key == "h100-sxm"
    assert spec.l2_bytes == 50 * 2**20 + 4096  # the device wins
    assert any(d.startswith("l2_bytes: table 52428800, device") for d in diffs)
    assert any(d.startswith("persisting_l2_max_bytes") for d in diffs)


def test_spec_for_unknown_device(monkeypatch):
    install(monkeypatch, fake_driver(name=b"NVIDIA Mystery GPU", sms=77, cc=(8, 7)))
    spec, notes = gpus.spec_for_device(gpus.detect())
    assert spec.key == "mystery-gpu"
    assert spec.l2_bytes == 62914560
    assert spec.dram_peak_gbps == pytest.approx(4812.8)
    assert len(notes) == 1 and "not in the spec table" in notes[0]
