"""The GPU spec table (every row cited) and detection of the real device.

`l2_bytes` is what `cudaDeviceProp.l2CacheSize` / CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE reports
(4090: 75497472 = 72 MiB); datasheets say "MB" and mean MiB for L2. `memory_bytes` is the
nominal capacity (datasheet "GB" read as GiB for GDDR boards, decimal GB for HBM parts)
unless a device dump gave the total; it is only used to cap the plan's largest size, so a
slight under-estimate is harmless. `dram_peak_gbps` is the datasheet figure in GB/s (1e9).

Fields whose value no source seen could confirm are listed in `unverified`; trust a
`sweeper plan --gpu auto` on the real device over any table row.

Nothing here imports numba or the CUDA bindings at module level: `detect()` imports
`cuda.bindings.driver` inside the function, so `import sweeper.plan.gpus` works without a driver.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from sweeper.errors import NoGPUError, SweeperError

MiB = 1 << 20
GiB = 1 << 30


@dataclass(frozen=True)
class GpuSpec:
    key: str
    name: str
    aliases: tuple[str, ...]
    cc: tuple[int, int]
    sm_count: int
    l2_bytes: int
    persisting_l2_max_bytes: int | None
    dram_type: str
    dram_peak_gbps: float
    memory_bytes: int
    source: str
    unverified: tuple[str, ...] = field(default=())

    @property
    def l2_mib(self) -> float:
        return self.l2_bytes / MiB


_TPU = "TechPowerUp GPU database (techpowerup.com/gpu-specs)"

SPECS: tuple[GpuSpec, ...] = (
    GpuSpec(
        key="3090",
        name="NVIDIA GeForce RTX 3090",
        aliases=("rtx3090", "rtx 3090", "geforce rtx 3090"),
        cc=(8, 6),
        sm_count=82,
        l2_bytes=6 * MiB,
        persisting_l2_max_bytes=None,
        dram_type="GDDR6X",
        dram_peak_gbps=936.2,
        memory_bytes=24 * GiB,
        source="NVIDIA Ampere GA102 GPU Architecture whitepaper (GA10x: 6144 KB L2, 12 x 32-bit "
        "controllers); " + _TPU,
        unverified=("sm_count", "dram_peak_gbps", "persisting_l2_max_bytes"),
    ),
    GpuSpec(
        key="4080",
        name="NVIDIA GeForce RTX 4080",
        aliases=("rtx4080", "rtx 4080", "geforce rtx 4080"),
        cc=(8, 9),
        sm_count=76,
        l2_bytes=64 * MiB,
        persisting_l2_max_bytes=None,
        dram_type="GDDR6X",
        dram_peak_gbps=716.8,
        memory_bytes=16 * GiB,
        source="hardwareluxx RTX 50 cache report (RTX 4080: 64 MB L2); guru3d RTX 5090 rumour "
        "article comparison list (RTX 4080: 16 GB GDDR6X, 256-bit, 736 vs 717 GB/s quoted)",
        unverified=("sm_count", "persisting_l2_max_bytes"),
    ),
    GpuSpec(
        key="4090",
        name="NVIDIA GeForce RTX 4090",
        aliases=("rtx4090", "rtx 4090", "geforce rtx 4090"),
        cc=(8, 9),
        sm_count=128,
        l2_bytes=72 * MiB,
        persisting_l2_max_bytes=None,
        dram_type="GDDR6X",
        dram_peak_gbps=1008.0,
        memory_bytes=24 * GiB,
        source="l2CacheSize 75497472 as reported (L2_BAND_CLIFF report); chipsandcheese.com "
        "'Microbenchmarking Nvidia's RTX 4090' (128 SMs); thefpsreview.com 4090 spec "
        "(1008 GB/s, 384-bit GDDR6X, 24 GB)",
        unverified=("persisting_l2_max_bytes",),
    ),
    GpuSpec(
        key="5090",
        name="NVIDIA GeForce RTX 5090",
        aliases=("rtx5090", "rtx 5090", "geforce rtx 5090"),
        cc=(12, 0),
        sm_count=170,
        l2_bytes=96 * MiB,
        persisting_l2_max_bytes=None,
        dram_type="GDDR7",
        dram_peak_gbps=1792.0,
        memory_bytes=32 * GiB,
        source="Linux Format May 2025 RTX 5090 review spec box (GB202, 170 SMs, 96 MB cache, "
        "32 GB 512-bit GDDR7, 1792 GB/s)",
        unverified=("cc", "persisting_l2_max_bytes"),
    ),
    GpuSpec(
        key="rtx6000-ada",
        name="NVIDIA RTX 6000 Ada Generation",
        aliases=("rtx 6000 ada", "rtx 6000 ada generation", "rtx6000ada", "6000ada"),
        cc=(8, 9),
        sm_count=142,
        l2_bytes=96 * MiB,
        persisting_l2_max_bytes=None,
        dram_type="GDDR6",
        dram_peak_gbps=960.0,
        memory_bytes=48 * GiB,
        source="hardwareluxx.de RTX 6000 Ada / L40 announcement (AD102, 18176 FP32 units, 142 RT "
        "cores = 142 SMs, 48 GB, 384-bit); L2 and bandwidth not confirmed from a source",
        unverified=("l2_bytes", "dram_peak_gbps", "persisting_l2_max_bytes"),
    ),
    GpuSpec(
        key="l4",
        name="NVIDIA L4",
        aliases=("nvidia l4",),
        cc=(8, 9),
        sm_count=58,
        l2_bytes=48 * MiB,
        persisting_l2_max_bytes=None,
        dram_type="GDDR6",
        dram_peak_gbps=300.0,
        memory_bytes=24 * GiB,
        source="grokipedia 'NVIDIA L4 vs L40S' (24 GB GDDR6, 300 GB/s); "
        + _TPU
        + " copies (AD104, 48 MB "
        "L2, CUDA 8.9); SM count conflicts between copies (58 vs 60)",
        unverified=("sm_count", "persisting_l2_max_bytes"),
    ),
    GpuSpec(
        key="l40s",
        name="NVIDIA L40S",
        aliases=("nvidia l40s",),
        cc=(8, 9),
        sm_count=142,
        l2_bytes=96 * MiB,
        persisting_l2_max_bytes=None,
        dram_type="GDDR6",
        dram_peak_gbps=864.0,
        memory_bytes=48 * GiB,
        source="NVIDIA L40/L40S datasheet (48 GB GDDR6 ECC, 864 GB/s, 18176 CUDA cores, 142 RT "
        "cores); L2 conflicts between third-party copies (48 MB vs 96 MB for the L40)",
        unverified=("l2_bytes", "persisting_l2_max_bytes"),
    ),
    GpuSpec(
        key="a10",
        name="NVIDIA A10",
        aliases=("nvidia a10", "a10 pcie"),
        cc=(8, 6),
        sm_count=72,
        l2_bytes=6 * MiB,
        persisting_l2_max_bytes=None,
        dram_type="GDDR6",
        dram_peak_gbps=600.2,
        memory_bytes=24 * GiB,
        source=_TPU + " A10 PCIe (GA102, 72 SMs, 6 MB L2, 384-bit GDDR6, 600.2 GB/s, 24 GB)",
        unverified=("persisting_l2_max_bytes",),
    ),
    GpuSpec(
        key="a100-40gb",
        name="NVIDIA A100 40GB",
        aliases=("a100", "a100-sxm4-40gb", "a100 40gb", "nvidia a100-sxm4-40gb"),
        cc=(8, 0),
        sm_count=108,
        l2_bytes=41943040,
        persisting_l2_max_bytes=31457280,
        dram_type="HBM2",
        dram_peak_gbps=1555.0,
        memory_bytes=42405855232,
        source="deviceQuery dump, Paderborn PC2 wiki 'NVIDIA A100 40GB with NVLINK' (108 SMs, "
        "L2 41943040, 42405855232 bytes, 5120-bit); NVIDIA developer forum 275542 "
        "(A100 persistingL2CacheMaxSize 31457280); glennklockwood.com A100 notes (1555 GB/s)",
        unverified=(),
    ),
    GpuSpec(
        key="a100-80gb",
        name="NVIDIA A100 80GB",
        aliases=("a100-sxm4-80gb", "a100 80gb", "nvidia a100-sxm4-80gb", "a100-80gb-sxm"),
        cc=(8, 0),
        sm_count=108,
        l2_bytes=41943040,
        persisting_l2_max_bytes=31457280,
        dram_type="HBM2e",
        dram_peak_gbps=2039.0,
        memory_bytes=80 * GiB,
        source="glennklockwood.com A100 notes, citing the NVIDIA A100 datasheet (80 GB HBM2e, "
        "2.039 TB/s SXM, same GA100 configuration as the 40 GB part); persisting max assumed "
        "equal to the A100 40GB",
        unverified=("persisting_l2_max_bytes",),
    ),
    GpuSpec(
        key="h100-sxm",
        name="NVIDIA H100 SXM5 80GB",
        aliases=("h100", "h100 sxm", "h100-sxm5", "h100 80gb hbm3", "nvidia h100 80gb hbm3"),
        cc=(9, 0),
        sm_count=132,
        l2_bytes=50 * MiB,
        persisting_l2_max_bytes=None,
        dram_type="HBM3",
        dram_peak_gbps=3350.0,
        memory_bytes=80 * GiB,
        source="NVIDIA H100 datasheet / Hopper whitepaper via hpctech.co.jp spec table (132 SMs, "
        "50 MB L2, 5120-bit HBM3, 3350 GB/s, 80 GB)",
        unverified=("persisting_l2_max_bytes",),
    ),
    GpuSpec(
        key="h100-pcie",
        name="NVIDIA H100 PCIe 80GB",
        aliases=("h100 pcie", "nvidia h100 pcie"),
        cc=(9, 0),
        sm_count=114,
        l2_bytes=50 * MiB,
        persisting_l2_max_bytes=None,
        dram_type="HBM2e",
        dram_peak_gbps=2000.0,
        memory_bytes=80 * GiB,
        source="NVIDIA LaunchPad H100 MIG guide (114 SMs, 80 GB HBM2e, 50 MB L2, 2 TB/s); "
        "hpctech.co.jp spec table",
        unverified=("persisting_l2_max_bytes",),
    ),
    GpuSpec(
        key="h200",
        name="NVIDIA H200",
        aliases=("h200 sxm", "nvidia h200", "h200-sxm"),
        cc=(9, 0),
        sm_count=132,
        l2_bytes=62914560,
        persisting_l2_max_bytes=39321600,
        dram_type="HBM3e",
        dram_peak_gbps=4800.0,
        memory_bytes=141 * 10**9,
        source="our measurement on the H200 test machine (shared/GPU_NOTES.md: l2CacheSize "
        "62914560, persistingL2CacheMaxSize 39321600, 132 SMs, cc 9.0, 6016-bit bus at 3.2 GHz); "
        "ai-hpc.github.io H200 hardware notes (141 GB HBM3e, 4.8 TB/s)",
        unverified=(),
    ),
    GpuSpec(
        key="gh200",
        name="NVIDIA GH200 Grace Hopper (96 GB HBM3)",
        aliases=("gh200 480gb", "nvidia gh200 480gb", "grace hopper"),
        cc=(9, 0),
        sm_count=132,
        l2_bytes=50 * MiB,
        persisting_l2_max_bytes=None,
        dram_type="HBM3",
        dram_peak_gbps=4000.0,
        memory_bytes=96 * 10**9,
        source="spheron.network GH200 guide (H100-class GPU, 96 GB HBM3); NVIDIA GH200 HBM3e "
        "announcement (96 GB HBM3 at 4 TB/s -> 141/144 GB HBM3e variant); no device dump seen",
        unverified=("sm_count", "l2_bytes", "persisting_l2_max_bytes"),
    ),
    GpuSpec(
        key="b200",
        name="NVIDIA B200",
        aliases=("nvidia b200", "b200 sxm"),
        cc=(10, 0),
        sm_count=148,
        l2_bytes=132644864,
        persisting_l2_max_bytes=None,
        dram_type="HBM3e",
        dram_peak_gbps=8000.0,
        memory_bytes=int(178.35 * GiB),
        source="device query in pytorch/ao PR #4002 (cc 10.0, 148 SMs, L2 126.50 MiB, 7680-bit "
        "bus at 3996 MHz = 7.67 TB/s, total 178.35 GiB; the table keeps the 8 TB/s datasheet "
        "figure that PR replaced)",
        unverified=("persisting_l2_max_bytes",),
    ),
)


def _norm(s: str) -> str:
    return " ".join(s.lower().replace("_", " ").replace("-", " ").split())


def lookup(name: str) -> GpuSpec:
    """Find a row by key, alias or full name (case-insensitive; '-', '_' and ' ' equal)."""
    want = _norm(name)
    for spec in SPECS:
        names = (spec.key, spec.name, *spec.aliases)
        if any(_norm(n) == want for n in names):
            return spec
    keys = ", ".join(s.key for s in SPECS)
    raise SweeperError(f"unknown GPU {name!r}; known: {keys} (or 'auto' to read the device)")


@dataclass(frozen=True)
class DeviceInfo:
    """Attributes read from the real device through the CUDA driver API."""

    name: str
    cc: tuple[int, int]
    sm_count: int
    l2_bytes: int
    persisting_l2_max_bytes: int
    memory_bytes: int
    driver_version: int
    mem_bus_width_bits: int
    mem_clock_khz: int

    @property
    def dram_peak_gbps(self) -> float:
        """Bus width x clock x 2 (DDR), in GB/s; the attribute clock is in kHz."""
        return self.mem_bus_width_bits / 8 * self.mem_clock_khz * 1e3 * 2 / 1e9


def detect(ordinal: int = 0) -> DeviceInfo:
    """Read device `ordinal` through cuda.bindings.driver; NoGPUError if there is none."""
    try:
        from cuda.bindings import driver
    except Exception as e:  # not installed, or broken install
        raise NoGPUError(
            f"cannot import cuda.bindings ({e}); install sweeper's GPU dependencies "
            "or pass --gpu NAME instead of auto"
        ) from None

    def call(fn, *args):
        try:
            out = fn(*args)
        except Exception as e:  # the bindings raise when libcuda cannot be loaded
            raise NoGPUError(
                f"no usable CUDA driver here ({type(e).__name__}: {e}); run on a GPU machine "
                "or pass --gpu NAME instead of auto"
            ) from None
        err, *rest = out if isinstance(out, tuple) else (out,)
        if err != driver.CUresult.CUDA_SUCCESS:
            raise NoGPUError(
                f"CUDA driver call {fn.__name__} failed ({err!r}); no usable GPU here, or pass "
                "--gpu NAME instead of auto"
            )
        return rest[0] if rest else None

    call(driver.cuInit, 0)
    count = call(driver.cuDeviceGetCount)
    if not count or ordinal >= count:
        raise NoGPUError(f"found {count or 0} CUDA devices, wanted device {ordinal}")
    dev = call(driver.cuDeviceGet, ordinal)
    A = driver.CUdevice_attribute

    def attr(a) -> int:
        return int(call(driver.cuDeviceGetAttribute, a, dev))

    raw_name = call(driver.cuDeviceGetName, 256, dev)
    name = raw_name.split(b"\0", 1)[0].decode(errors="replace").strip()
    return DeviceInfo(
        name=name,
        cc=(
            attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
            attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
        ),
        sm_count=attr(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        l2_bytes=attr(A.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE),
        persisting_l2_max_bytes=attr(A.CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE),
        memory_bytes=int(call(driver.cuDeviceTotalMem, dev)),
        driver_version=int(call(driver.cuDriverGetVersion)),
        mem_bus_width_bits=attr(A.CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH),
        mem_clock_khz=attr(A.CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE),
    )


def _match(info: DeviceInfo) -> GpuSpec | None:
    """The table row for a device: by name (longest key/alias contained in the device name),
    else by (cc, SM count) when exactly one row has that shape."""
    dev = _norm(info.name)
    best: tuple[int, GpuSpec] | None = None
    for spec in SPECS:
        for n in (spec.key, spec.name, *spec.aliases):
            cand = _norm(n)
            # whole-word containment, so "a10" does not match "a100"
            if re.search(rf"(^| ){re.escape(cand)}( |$)", dev) and (
                best is None or len(cand) > best[0]
            ):
                best = (len(cand), spec)
    if best is not None:
        return best[1]
    by_shape = [s for s in SPECS if s.cc == info.cc and s.sm_count == info.sm_count]
    return by_shape[0] if len(by_shape) == 1 else None


def _slug(name: str) -> str:
    s = _norm(name).removeprefix("nvidia ").removeprefix("geforce ")
    return "".join(c if c.isalnum() else "-" for c in s).strip("-") or "gpu"


def spec_for_device(info: DeviceInfo) -> tuple[GpuSpec, list[str]]:
    """A spec that uses the device's own attributes, and where they differ from the table.

    The returned spec keeps the table's key, name and DRAM figures when the device matches a
    row; L2, persisting max, SM count, cc and memory always come from the device.
    """
    row = _match(info)
    if row is None:
        spec = GpuSpec(
            key=_slug(info.name),
            name=info.name,
            aliases=(),
            cc=info.cc,
            sm_count=info.sm_count,
            l2_bytes=info.l2_bytes,
            persisting_l2_max_bytes=info.persisting_l2_max_bytes or None,
            dram_type="unknown",
            dram_peak_gbps=round(info.dram_peak_gbps, 1),
            memory_bytes=info.memory_bytes,
            source=f"device attributes (driver {info.driver_version})",
            unverified=("dram_type",),
        )
        note = (
            f"{info.name!r} is not in the spec table; using its attributes "
            f"(DRAM peak {spec.dram_peak_gbps:.0f} GB/s = bus width x clock x 2)"
        )
        return spec, [note]

    diffs: list[str] = []

    def differ(field_name: str, table, device, fmt=str) -> None:
        if table != device:
            diffs.append(f"{field_name}: table {fmt(table)}, device {fmt(device)}")

    differ("cc", row.cc, info.cc, lambda c: f"{c[0]}.{c[1]}")
    differ("sm_count", row.sm_count, info.sm_count)
    differ("l2_bytes", row.l2_bytes, info.l2_bytes)
    differ(
        "persisting_l2_max_bytes",
        row.persisting_l2_max_bytes,
        info.persisting_l2_max_bytes or None,
    )
    differ("memory_bytes", row.memory_bytes, info.memory_bytes)
    dev_peak = info.dram_peak_gbps
    if dev_peak and abs(dev_peak - row.dram_peak_gbps) > 0.05 * row.dram_peak_gbps:
        diffs.append(
            f"dram_peak_gbps: table {row.dram_peak_gbps:.0f}, device bus x clock "
            f"{dev_peak:.0f} (table value kept)"
        )
    spec = replace(
        row,
        cc=info.cc,
        sm_count=info.sm_count,
        l2_bytes=info.l2_bytes,
        persisting_l2_max_bytes=info.persisting_l2_max_bytes or None,
        memory_bytes=info.memory_bytes,
        source=f"device attributes (driver {info.driver_version}); table: {row.source}",
        unverified=tuple(
            f
            for f in row.unverified
            if f not in ("cc", "sm_count", "l2_bytes", "persisting_l2_max_bytes", "memory_bytes")
        ),
    )
    return spec, diffs
