"""The GPU spec table (every value cited, per field), spec files, and detection of the device.

A value in the table comes from a primary source only: the vendor's whitepaper, datasheet or
product page, or a device query recorded by sweeper on that GPU. A field that no primary source
gives is None ("not known"); `sweeper plan --gpu auto` on the device reads it, and a spec file
(TOML, see `load_spec_file` and docs/adding-a-gpu.md) lets a user supply it.

Units and reading conventions:

* `l2_bytes` is what `cudaDeviceProp.l2CacheSize` / CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE reports;
  whitepapers write L2 in KB or MB and mean KiB / MiB (RTX 4090: 73728 KB = 72 MiB = 75497472).
* `memory_bytes` is the nominal capacity: a datasheet "GB" is read as GiB for GDDR boards (their
  memory chips come in binary sizes) and as 10^9 bytes for HBM parts. It only caps the plan's
  largest size, so a slight under-estimate is harmless; a device query gives the exact total.
* `dram_peak_gbps` is the vendor's peak DRAM bandwidth in GB/s (10^9 bytes per second).
* `persisting_l2_max_bytes` (cudaDeviceProp.persistingL2CacheMaxSize) is a device-query value
  that no datasheet states; it is None unless a recorded device query gives it.

Nothing here imports numba or the CUDA bindings at module level: `detect()` imports
`cuda.bindings.driver` inside the function, so `import sweeper.plan.gpus` works without a driver.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sweeper import __version__
from sweeper.errors import CUDA_EXTRA, NoGPUError, SchemaError, SweeperError
from sweeper.units import GiB, MiB

# The fields that carry a value and a citation, in display order.
SPEC_FIELDS: tuple[str, ...] = (
    "cc",
    "sm_count",
    "l2_bytes",
    "persisting_l2_max_bytes",
    "dram_type",
    "dram_peak_gbps",
    "memory_bytes",
)
# What a plan cannot be made without (see planfile.spec_snapshot / make_plan). The persisting
# max is optional: a plan without it simply has no "persist-max" anchor.
PLAN_FIELDS: tuple[str, ...] = ("l2_bytes", "memory_bytes", "sm_count", "cc", "dram_peak_gbps")


@dataclass(frozen=True)
class GpuSpec:
    """One GPU: identity, the spec fields (None = not known) and a citation per known field."""

    key: str
    name: str
    aliases: tuple[str, ...] = ()
    cc: tuple[int, int] | None = None
    sm_count: int | None = None
    l2_bytes: int | None = None
    persisting_l2_max_bytes: int | None = None
    dram_type: str | None = None
    dram_peak_gbps: float | None = None
    memory_bytes: int | None = None
    sources: dict[str, str] = field(default_factory=dict, hash=False)
    origin: str = field(default="spec table", compare=False)

    @property
    def l2_mib(self) -> float | None:
        return None if self.l2_bytes is None else self.l2_bytes / MiB

    def missing(self, names: tuple[str, ...] = PLAN_FIELDS) -> list[str]:
        """The fields among `names` whose value is not known."""
        return [n for n in names if getattr(self, n) is None]

    def uncited(self) -> list[str]:
        """Known fields without a citation (the table has none; tests check it)."""
        return [
            n
            for n in SPEC_FIELDS
            if getattr(self, n) is not None and not self.sources.get(n, "").strip()
        ]


def require_plannable(spec: GpuSpec) -> None:
    """Raise one clear SweeperError naming every unknown field a plan needs."""
    gone = spec.missing()
    if not gone:
        return
    one = len(gone) == 1
    if spec.origin == "spec table":
        where = f"GPU {spec.key!r} (spec table)"
        why = "no primary source gives " + ("it" if one else "them")
    elif spec.origin.startswith("device "):
        where, why = spec.origin, "the device does not report " + ("it" if one else "them")
    else:
        where, why = spec.origin, "not given"
    raise SweeperError(
        f"{where}: {', '.join(gone)} {'is' if one else 'are'} unknown ({why}), so no plan can "
        "be made; run `sweeper plan --gpu auto` on the device, or pass a spec file that gives "
        f"{'it' if one else 'them'} (--gpu FILE.toml, see docs/adding-a-gpu.md)"
    )


# ---- the table ------------------------------------------------------------------------------

# Primary sources, by title. Pages and tables are named in the per-field strings where they help.
ADA_WP = "NVIDIA Ada GPU Architecture whitepaper"
GA102_WP = "NVIDIA Ampere GA102 GPU Architecture whitepaper"
A100_WP = "NVIDIA A100 Tensor Core GPU Architecture whitepaper"
H100_WP = "NVIDIA H100 Tensor Core GPU Architecture whitepaper"
RTX_BW_WP = "NVIDIA RTX Blackwell GPU Architecture whitepaper"
CUDA_GPUS = "NVIDIA CUDA GPUs compute capability list (developer.nvidia.com/cuda-gpus)"
H200_QUERY = (
    "device query recorded by sweeper on an NVIDIA H200 "
    "(results/h200/hot-7/manifest.json, device block)"
)

SPECS: tuple[GpuSpec, ...] = (
    GpuSpec(
        key="3090",
        name="NVIDIA GeForce RTX 3090",
        aliases=("rtx3090", "rtx 3090", "geforce rtx 3090"),
        cc=(8, 6),
        sm_count=82,
        l2_bytes=6144 * 1024,
        dram_type="GDDR6X",
        dram_peak_gbps=936.0,
        memory_bytes=24 * GiB,
        sources={
            "cc": CUDA_GPUS + ": GeForce RTX 3090, 8.6",
            "sm_count": GA102_WP + ", GeForce RTX 3090 specifications: 82 SMs",
            "l2_bytes": GA102_WP + ", GeForce RTX 3090 specifications: L2 6144 KB",
            "dram_type": GA102_WP + ", GeForce RTX 3090 specifications: GDDR6X",
            "dram_peak_gbps": GA102_WP + ", GeForce RTX 3090 specifications: 936 GB/sec",
            "memory_bytes": GA102_WP + ", GeForce RTX 3090 specifications: 24 GB (GiB)",
        },
    ),
    GpuSpec(
        key="4080",
        name="NVIDIA GeForce RTX 4080",
        aliases=("rtx4080", "rtx 4080", "geforce rtx 4080"),
        cc=(8, 9),
        sm_count=76,
        l2_bytes=64 * MiB,
        dram_type="GDDR6X",
        dram_peak_gbps=716.8,
        memory_bytes=16 * GiB,
        sources={
            "cc": CUDA_GPUS + ": GeForce RTX 4080, 8.9",
            "sm_count": ADA_WP + ", appendix, GeForce RTX 4080 16 GB: 76 SMs",
            "l2_bytes": ADA_WP + ", appendix, GeForce RTX 4080 16 GB: L2 65536 KB",
            "dram_type": ADA_WP + ", appendix, GeForce RTX 4080 16 GB: GDDR6X",
            "dram_peak_gbps": ADA_WP + ", appendix, GeForce RTX 4080 16 GB: 716.8 GB/sec",
            "memory_bytes": ADA_WP + ", appendix, GeForce RTX 4080 16 GB: 16 GB (GiB)",
        },
    ),
    GpuSpec(
        key="4090",
        name="NVIDIA GeForce RTX 4090",
        aliases=("rtx4090", "rtx 4090", "geforce rtx 4090"),
        cc=(8, 9),
        sm_count=128,
        l2_bytes=72 * MiB,
        dram_type="GDDR6X",
        dram_peak_gbps=1008.0,
        memory_bytes=24 * GiB,
        sources={
            "cc": CUDA_GPUS + ": GeForce RTX 4090, 8.9",
            "sm_count": ADA_WP + ", GeForce RTX 4090 specifications: 128 SMs",
            "l2_bytes": ADA_WP + ", GeForce RTX 4090 specifications: L2 73728 KB (72 MB)",
            "dram_type": ADA_WP + ", GeForce RTX 4090 specifications: GDDR6X",
            "dram_peak_gbps": ADA_WP + ", GeForce RTX 4090 specifications: 1008 GB/sec",
            "memory_bytes": ADA_WP + ", GeForce RTX 4090 specifications: 24 GB (GiB)",
        },
    ),
    GpuSpec(
        key="5090",
        name="NVIDIA GeForce RTX 5090",
        aliases=("rtx5090", "rtx 5090", "geforce rtx 5090"),
        cc=(12, 0),
        sm_count=170,
        l2_bytes=96 * MiB,
        dram_type="GDDR7",
        dram_peak_gbps=1792.0,
        memory_bytes=32 * GiB,
        sources={
            "cc": CUDA_GPUS + ": GeForce RTX 5090, 12.0",
            "sm_count": RTX_BW_WP + ", GeForce RTX 5090 specifications: 170 SMs",
            "l2_bytes": RTX_BW_WP + ", GeForce RTX 5090 specifications: L2 98304 KB (96 MB)",
            "dram_type": RTX_BW_WP + ", GeForce RTX 5090 specifications: GDDR7",
            "dram_peak_gbps": RTX_BW_WP + ", GeForce RTX 5090 specifications: 1792 GB/sec",
            "memory_bytes": RTX_BW_WP + ", GeForce RTX 5090 specifications: 32 GB (GiB)",
        },
    ),
    GpuSpec(
        key="rtx6000-ada",
        name="NVIDIA RTX 6000 Ada Generation",
        aliases=("rtx 6000 ada", "rtx 6000 ada generation", "rtx6000ada", "6000ada"),
        cc=(8, 9),
        sm_count=142,
        dram_type="GDDR6",
        dram_peak_gbps=960.0,
        memory_bytes=48 * GiB,
        sources={
            "cc": CUDA_GPUS + ": RTX 6000 Ada, 8.9",
            "sm_count": "NVIDIA RTX 6000 Ada Generation datasheet: 18,176 CUDA cores and 142 RT "
            "cores; " + ADA_WP + ": 128 CUDA cores and one RT core per SM",
            "dram_type": "NVIDIA RTX 6000 Ada Generation datasheet: 48 GB GDDR6 with ECC",
            "dram_peak_gbps": "NVIDIA RTX 6000 Ada Generation datasheet: 960 GB/s",
            "memory_bytes": "NVIDIA RTX 6000 Ada Generation datasheet: 48 GB GDDR6 (GiB)",
        },
    ),
    GpuSpec(
        key="l4",
        name="NVIDIA L4",
        aliases=("nvidia l4",),
        cc=(8, 9),
        dram_type="GDDR6",
        dram_peak_gbps=300.0,
        memory_bytes=24 * GiB,
        sources={
            "cc": CUDA_GPUS + ": L4, 8.9",
            "dram_type": "NVIDIA L4 Tensor Core GPU datasheet: 24 GB GDDR6",
            "dram_peak_gbps": "NVIDIA L4 Tensor Core GPU datasheet: 300 GB/s",
            "memory_bytes": "NVIDIA L4 Tensor Core GPU datasheet: 24 GB GDDR6 (GiB)",
        },
    ),
    GpuSpec(
        key="l40s",
        name="NVIDIA L40S",
        aliases=("nvidia l40s",),
        cc=(8, 9),
        sm_count=142,
        dram_type="GDDR6",
        dram_peak_gbps=864.0,
        memory_bytes=48 * GiB,
        sources={
            "cc": CUDA_GPUS + ": L40S, 8.9",
            "sm_count": "NVIDIA L40S datasheet: 18,176 CUDA cores and 142 RT cores; "
            + ADA_WP
            + ": 128 CUDA cores and one RT core per SM",
            "dram_type": "NVIDIA L40S datasheet: 48 GB GDDR6 with ECC",
            "dram_peak_gbps": "NVIDIA L40S datasheet: 864 GB/s",
            "memory_bytes": "NVIDIA L40S datasheet: 48 GB GDDR6 (GiB)",
        },
    ),
    GpuSpec(
        key="a10",
        name="NVIDIA A10",
        aliases=("nvidia a10", "a10 pcie"),
        cc=(8, 6),
        dram_type="GDDR6",
        dram_peak_gbps=600.0,
        memory_bytes=24 * GiB,
        sources={
            "cc": CUDA_GPUS + ": A10, 8.6",
            "dram_type": "NVIDIA A10 Tensor Core GPU datasheet: 24 GB GDDR6",
            "dram_peak_gbps": "NVIDIA A10 Tensor Core GPU datasheet: 600 GB/s",
            "memory_bytes": "NVIDIA A10 Tensor Core GPU datasheet: 24 GB GDDR6 (GiB)",
        },
    ),
    GpuSpec(
        key="a100-40gb",
        name="NVIDIA A100 40GB",
        aliases=("a100", "a100-sxm4-40gb", "a100 40gb", "nvidia a100-sxm4-40gb"),
        cc=(8, 0),
        sm_count=108,
        l2_bytes=40960 * 1024,
        dram_type="HBM2",
        dram_peak_gbps=1555.0,
        memory_bytes=40 * 10**9,
        sources={
            "cc": CUDA_GPUS + ": A100, 8.0",
            "sm_count": A100_WP + ", V100 vs A100 comparison table: 108 SMs",
            "l2_bytes": A100_WP + ", V100 vs A100 comparison table: L2 40960 KB",
            "dram_type": A100_WP + ", V100 vs A100 comparison table: 40 GB HBM2",
            "dram_peak_gbps": A100_WP + ", V100 vs A100 comparison table: 1555 GB/sec",
            "memory_bytes": A100_WP + ", V100 vs A100 comparison table: 40 GB (10^9 bytes)",
        },
    ),
    GpuSpec(
        key="a100-80gb",
        name="NVIDIA A100 80GB",
        aliases=("a100-sxm4-80gb", "a100 80gb", "nvidia a100-sxm4-80gb", "a100-80gb-sxm"),
        cc=(8, 0),
        dram_type="HBM2e",
        dram_peak_gbps=2039.0,
        memory_bytes=80 * 10**9,
        sources={
            "cc": CUDA_GPUS + ": A100, 8.0",
            "dram_type": "NVIDIA A100 Tensor Core GPU datasheet: A100 80GB SXM, 80 GB HBM2e",
            "dram_peak_gbps": "NVIDIA A100 Tensor Core GPU datasheet: A100 80GB SXM, 2,039 GB/s",
            "memory_bytes": "NVIDIA A100 Tensor Core GPU datasheet: A100 80GB SXM, 80 GB "
            "(10^9 bytes)",
        },
    ),
    GpuSpec(
        key="h100-sxm",
        name="NVIDIA H100 SXM5 80GB",
        aliases=("h100", "h100 sxm", "h100-sxm5", "h100 80gb hbm3", "nvidia h100 80gb hbm3"),
        cc=(9, 0),
        sm_count=132,
        l2_bytes=50 * MiB,
        dram_type="HBM3",
        dram_peak_gbps=3350.0,
        memory_bytes=80 * 10**9,
        sources={
            "cc": H100_WP + ", A100 vs H100 comparison table: compute capability 9.0",
            "sm_count": H100_WP + ", A100 vs H100 comparison table: H100 SXM5, 132 SMs",
            "l2_bytes": H100_WP + ", A100 vs H100 comparison table: H100 SXM5, L2 50 MB",
            "dram_type": "NVIDIA H100 Tensor Core GPU datasheet: H100 SXM, 80 GB HBM3",
            "dram_peak_gbps": "NVIDIA H100 Tensor Core GPU datasheet: H100 SXM, 3.35 TB/s",
            "memory_bytes": "NVIDIA H100 Tensor Core GPU datasheet: H100 SXM, 80 GB (10^9 bytes)",
        },
    ),
    GpuSpec(
        key="h100-pcie",
        name="NVIDIA H100 PCIe 80GB",
        aliases=("h100 pcie", "nvidia h100 pcie"),
        cc=(9, 0),
        sm_count=114,
        l2_bytes=50 * MiB,
        dram_type="HBM2e",
        dram_peak_gbps=2000.0,
        memory_bytes=80 * 10**9,
        sources={
            "cc": H100_WP + ", A100 vs H100 comparison table: compute capability 9.0",
            "sm_count": H100_WP + ", A100 vs H100 comparison table: H100 PCIe, 114 SMs",
            "l2_bytes": H100_WP + ", A100 vs H100 comparison table: H100 PCIe, L2 50 MB",
            "dram_type": "NVIDIA H100 Tensor Core GPU datasheet: H100 PCIe, 80 GB HBM2e",
            "dram_peak_gbps": "NVIDIA H100 Tensor Core GPU datasheet: H100 PCIe, 2 TB/s",
            "memory_bytes": "NVIDIA H100 Tensor Core GPU datasheet: H100 PCIe, 80 GB (10^9 bytes)",
        },
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
        sources={
            "cc": H200_QUERY + ": cc 9.0",
            "sm_count": H200_QUERY + ": sm_count 132",
            "l2_bytes": H200_QUERY + ": l2_bytes 62914560",
            "persisting_l2_max_bytes": H200_QUERY + ": persisting_l2_max_bytes 39321600",
            "dram_type": "NVIDIA H200 Tensor Core GPU product page and datasheet: HBM3e",
            "dram_peak_gbps": "NVIDIA H200 Tensor Core GPU product page and datasheet: 4.8 TB/s",
            "memory_bytes": "NVIDIA H200 Tensor Core GPU product page and datasheet: 141 GB "
            "(10^9 bytes; the device query reports 150109880320)",
        },
    ),
    GpuSpec(
        key="gh200",
        name="NVIDIA GH200 (96 GB HBM3)",
        aliases=("gh200 480gb", "nvidia gh200 480gb", "grace hopper"),
        cc=(9, 0),
        dram_type="HBM3",
        dram_peak_gbps=4000.0,
        memory_bytes=96 * 10**9,
        sources={
            "cc": CUDA_GPUS + ": GH200, 9.0",
            "dram_type": "NVIDIA GH200 Grace Hopper Superchip datasheet: 96 GB HBM3",
            "dram_peak_gbps": "NVIDIA GH200 Grace Hopper Superchip datasheet: 4 TB/s (HBM3)",
            "memory_bytes": "NVIDIA GH200 Grace Hopper Superchip datasheet: 96 GB HBM3 "
            "(10^9 bytes)",
        },
    ),
    GpuSpec(
        key="b200",
        name="NVIDIA B200",
        aliases=("nvidia b200", "b200 sxm"),
        cc=(10, 0),
        dram_type="HBM3e",
        sources={
            "cc": CUDA_GPUS + ": B200, 10.0",
            "dram_type": "NVIDIA Blackwell Architecture Technical Brief: B200, HBM3e",
        },
    ),
)


def _norm(s: str) -> str:
    return " ".join(s.lower().replace("_", " ").replace("-", " ").split())


# Names of other vendors' accelerators: sweeper's kernels are Numba CUDA, NVIDIA only.
_NOT_NVIDIA = re.compile(
    r"^(amd|radeon|instinct|mi ?\d+\w*|rx ?\d+\w*|intel|arc|gaudi\d*|habana|xe|ponte vecchio|"
    r"max \d+|pvc|apple|m\d( (pro|max|ultra))?|tpu\w*|trainium\w*|inferentia\w*)( |$)"
)


def _names(spec: GpuSpec) -> tuple[str, ...]:
    return tuple(_norm(n) for n in (spec.key, spec.name, *spec.aliases))


def lookup(name: str) -> GpuSpec:
    """Find a row by key, alias or full name (case-insensitive; '-', '_' and ' ' equal).

    A key names its row. Any other name must point at one row only: a name that is an alias
    of one row and the start of another row's name ('h100': h100-sxm and h100-pcie) is refused
    with the candidates, as is another vendor's GPU (sweeper supports NVIDIA GPUs only).
    """
    want = _norm(name)
    for spec in SPECS:
        if _norm(spec.key) == want:
            return spec
    hits = [
        spec for spec in SPECS if any(n == want or n.startswith(want + " ") for n in _names(spec))
    ]
    if len(hits) == 1:
        return hits[0]
    if hits:
        raise SweeperError(
            f"GPU {name!r} is ambiguous: one of {', '.join(s.key for s in hits)} "
            "(name one by its key)"
        )
    if _NOT_NVIDIA.match(want.removeprefix("amd ").removeprefix("intel ")) or _NOT_NVIDIA.match(
        want
    ):
        raise SweeperError(f"GPU {name!r}: sweeper supports NVIDIA GPUs only")
    keys = ", ".join(s.key for s in SPECS)
    raise SweeperError(
        f"unknown GPU {name!r}; known: {keys} (or 'auto' to read the device, or a spec file "
        "FILE.toml)"
    )


# ---- spec files (TOML) ----------------------------------------------------------------------

_KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_FILE_FIELDS: tuple[str, ...] = ("key", "name", "aliases", *SPEC_FIELDS, "sources")


def is_spec_file_arg(gpu: str) -> bool:
    """`--gpu` values read as a spec file: ending in .toml, or naming an existing file."""
    return gpu.lower().endswith(".toml") or Path(gpu).is_file()


def _positive_int(path: Path, name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise SchemaError(path, name, f"expected a positive integer, found {_tname(v)}")
    if v <= 0:
        raise SchemaError(path, name, f"must be a positive integer, found {v}")
    return v


def _tname(v: Any) -> str:
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, str):
        return f"a string ({v!r})"
    if isinstance(v, dict):
        return "a table"
    if isinstance(v, list):
        return "an array"
    return f"{type(v).__name__} {v!r}"


def _nonempty_str(path: Path, name: str, v: Any) -> str:
    if not isinstance(v, str) or not v.strip():
        raise SchemaError(path, name, f"expected a non-empty string, found {_tname(v)}")
    if "\n" in v or "\r" in v:
        raise SchemaError(path, name, "must be a single line")
    return v.strip()


def spec_from_mapping(doc: dict, path: str | os.PathLike) -> GpuSpec:
    """Validate a parsed spec file; SchemaError (one line, naming file and field) on a problem.

    Fields left out are None. `key` defaults to the file name, `name` to the key; a field given
    without a `[sources]` entry is cited as the spec file itself. A `key` of the spec table
    completes or overrides that row: the file's fields replace the row's, the row's other
    fields (and their citations, its name and aliases) are kept.
    """
    path = Path(path)
    unknown = [k for k in doc if k not in _FILE_FIELDS]
    if unknown:
        raise SchemaError(path, unknown[0], f"unknown field; known: {', '.join(_FILE_FIELDS)}")
    key = doc.get("key", _slug(path.stem))
    key = _nonempty_str(path, "key", key)
    if not _KEY_RE.match(key):
        raise SchemaError(path, "key", f"{key!r} must be letters, digits, '.', '_' or '-'")
    name = _nonempty_str(path, "name", doc.get("name", key))
    aliases = doc.get("aliases", [])
    if not isinstance(aliases, list):
        raise SchemaError(path, "aliases", f"expected an array of strings, found {_tname(aliases)}")
    aliases = [_nonempty_str(path, f"aliases[{i}]", a) for i, a in enumerate(aliases)]

    values: dict[str, Any] = {}
    if "cc" in doc:
        cc = doc["cc"]
        if (
            not isinstance(cc, list)
            or len(cc) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in cc)
        ):
            raise SchemaError(path, "cc", f"expected [major, minor] (two integers), found {cc!r}")
        if cc[0] <= 0 or cc[1] < 0:
            raise SchemaError(path, "cc", f"major must be positive and minor >= 0, found {cc!r}")
        values["cc"] = (cc[0], cc[1])
    for n in ("sm_count", "l2_bytes", "persisting_l2_max_bytes", "memory_bytes"):
        if n in doc:
            values[n] = _positive_int(path, n, doc[n])
    if "dram_type" in doc:
        values["dram_type"] = _nonempty_str(path, "dram_type", doc["dram_type"])
    if "dram_peak_gbps" in doc:
        v = doc["dram_peak_gbps"]
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise SchemaError(path, "dram_peak_gbps", f"expected a number, found {_tname(v)}")
        if not math.isfinite(v) or v <= 0:
            raise SchemaError(path, "dram_peak_gbps", f"must be a positive number, found {v}")
        values["dram_peak_gbps"] = float(v)
    given = dict(values)
    row = next((r for r in SPECS if r.key == key), None)
    if row is not None:  # a spec file for a table GPU: its fields override, the rest is kept
        kept = [n for n in SPEC_FIELDS if n not in values and getattr(row, n) is not None]
        values.update({n: getattr(row, n) for n in kept})
        if "name" not in doc:
            name = row.name
        aliases = [*row.aliases, *(a for a in aliases if a not in row.aliases)]
    l2, persist, mem = (
        values.get(n) for n in ("l2_bytes", "persisting_l2_max_bytes", "memory_bytes")
    )
    if l2 is not None and persist is not None and persist > l2:
        raise SchemaError(
            path, "persisting_l2_max_bytes", f"{persist} is larger than l2_bytes {l2}"
        )
    if l2 is not None and mem is not None and mem <= l2:
        raise SchemaError(path, "memory_bytes", f"{mem} is not larger than l2_bytes {l2}")

    raw_sources = doc.get("sources", {})
    if not isinstance(raw_sources, dict):
        raise SchemaError(path, "sources", f"expected a table, found {_tname(raw_sources)}")
    sources: dict[str, str] = {}
    for k, v in raw_sources.items():
        where = f"sources.{k}"
        if k not in SPEC_FIELDS:
            raise SchemaError(path, where, f"unknown field; known: {', '.join(SPEC_FIELDS)}")
        if k not in given:
            raise SchemaError(path, where, f"cites {k}, which the file does not give")
        sources[k] = _nonempty_str(path, where, v)
    for k in values:
        if k in given:
            sources.setdefault(k, f"spec file {path.name}")
        else:
            sources[k] = row.sources[k]
    return GpuSpec(
        key=key,
        name=name,
        aliases=tuple(aliases),
        sources={k: sources[k] for k in SPEC_FIELDS if k in sources},
        origin=f"spec file {path}",
        **values,
    )


def load_spec_file(path: str | os.PathLike) -> GpuSpec:
    """Read and validate a GPU spec file (TOML); SchemaError names the file and the field."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise SchemaError(path, None, "spec file not found") from None
    except OSError as e:
        raise SchemaError(path, None, f"cannot read the spec file: {e.strerror}") from None
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise SchemaError(path, None, "not valid TOML (not UTF-8 text)") from None
    except tomllib.TOMLDecodeError as e:
        msg = " ".join(str(e).split())
        raise SchemaError(path, None, f"not valid TOML ({msg})") from None
    return spec_from_mapping(doc, path)


def _toml_str(s: str) -> str:
    out = []
    for ch in s:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _toml_value(v: Any) -> str:
    """One TOML value: string, integer, finite float, or an array of integers / strings."""
    if isinstance(v, bool):
        raise TypeError("booleans are not used in spec files")
    if isinstance(v, str):
        return _toml_str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"cannot write the non-finite number {v!r}")
        return repr(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to a spec file")


def spec_to_toml(spec: GpuSpec, header: str = "") -> str:
    """The spec file text for `spec`: flat keys, then a [sources] table; None fields omitted."""
    lines = [f"# {ln}" if ln else "#" for ln in header.splitlines()]
    lines.append(f"key = {_toml_value(spec.key)}")
    lines.append(f"name = {_toml_value(spec.name)}")
    if spec.aliases:
        lines.append(f"aliases = {_toml_value(list(spec.aliases))}")
    for n in SPEC_FIELDS:
        v = getattr(spec, n)
        if v is not None:
            try:
                lines.append(f"{n} = {_toml_value(list(v) if n == 'cc' else v)}")
            except (TypeError, ValueError) as e:
                raise type(e)(f"{n}: {e}") from None
    cited = [
        (n, spec.sources[n])
        for n in SPEC_FIELDS
        if n in spec.sources and getattr(spec, n) is not None
    ]
    if cited:
        lines += ["", "[sources]"]
        lines += [f"{n} = {_toml_value(s)}" for n, s in cited]
    return "\n".join(lines) + "\n"


def _same_values(a: GpuSpec, b: GpuSpec) -> bool:
    names = ("key", "name", "aliases", *SPEC_FIELDS)
    return all(getattr(a, n) == getattr(b, n) for n in names)


def spec_file_needs_write(spec: GpuSpec, path: str | os.PathLike) -> bool:
    """True when `path` is absent; False when it already holds these values (sources aside).

    Raises SweeperError when it holds anything else, so a different file is never replaced.
    """
    path = Path(path)
    if not path.name.lower().endswith(".toml"):
        raise SweeperError(f"--save-spec {path}: the spec file name must end in .toml")
    if not path.exists():
        return True
    try:
        old = load_spec_file(path)
    except SweeperError:
        old = None
    if old is not None and _same_values(old, spec):
        return False
    raise SweeperError(
        f"{path} already exists and holds a different GPU spec; remove it or choose another "
        "--save-spec path"
    )


def write_spec_file(spec: GpuSpec, path: str | os.PathLike) -> Path:
    """Write `spec` as a spec file atomically (refusing to replace a different one, or a
    path `check_output` refuses)."""
    from sweeper.runfolder import check_output
    from sweeper.schema import atomic_write_text

    path = check_output(path, option="--save-spec")
    if spec_file_needs_write(spec, path):
        header = (
            f"GPU spec for sweeper: `sweeper plan --gpu {path.name}`.\n"
            "Units: bytes, GB/s (10^9 bytes/s); see docs/adding-a-gpu.md."
        )
        atomic_write_text(path, spec_to_toml(spec, header=header))
    return path


def resolve(gpu: str) -> tuple[GpuSpec, list[str]]:
    """`--gpu` value -> (spec, notes): 'auto' reads device 0, a spec file is read and
    validated, anything else is looked up in the table."""
    if gpu.strip().lower() == "auto":
        return spec_for_device(detect())
    if is_spec_file_arg(gpu):
        return load_spec_file(gpu), []
    return lookup(gpu), []


# ---- the device -------------------------------------------------------------------------------


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


# numba-cuda[cu13] and cuda-bindings 13 are CUDA 13 builds: CUDA 13.x needs driver 580 or newer
# (NVIDIA CUDA Compatibility guide, "Minor Version Compatibility", table 1).
MIN_DRIVER_CUDA = 13000  # cuDriverGetVersion: 1000 * major + 10 * minor
MIN_DRIVER_BRANCH = 580


def require_driver(driver_version: int) -> None:
    """Refuse, in one line, a driver older than the CUDA 13 wheels need."""
    if driver_version < MIN_DRIVER_CUDA:
        have = f"{driver_version // 1000}.{driver_version % 1000 // 10}"
        raise NoGPUError(
            f"the NVIDIA driver here supports CUDA {have}; sweeper's CUDA 13 wheels need a "
            f"driver for CUDA 13 (R{MIN_DRIVER_BRANCH} or newer)"
        )


def detect(ordinal: int = 0) -> DeviceInfo:
    """Read device `ordinal` through cuda.bindings.driver; NoGPUError if there is none."""
    try:
        from cuda.bindings import driver
    except Exception as e:  # not installed, or broken install
        raise NoGPUError(
            f"cannot import cuda.bindings ({e}): reading the device needs the cuda extra: "
            f"{CUDA_EXTRA}"
        ) from None

    def call(fn, *args):
        try:
            out = fn(*args)
        except Exception as e:  # the bindings raise when libcuda cannot be loaded
            raise NoGPUError(
                f"no usable CUDA driver here ({type(e).__name__}: {e}); sweeper needs an NVIDIA "
                f"driver for CUDA 13 (R{MIN_DRIVER_BRANCH} or newer)"
            ) from None
        err, *rest = out if isinstance(out, tuple) else (out,)
        if err != driver.CUresult.CUDA_SUCCESS:
            raise NoGPUError(f"CUDA driver call {fn.__name__} failed ({err!r}); no usable GPU here")
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


def device_source(today: str | None = None) -> str:
    """The citation for a value read from the device by this version of sweeper."""
    return f"device query recorded by sweeper {__version__} on {today or _dt.date.today()}"


_QUERIED = ("cc", "sm_count", "l2_bytes", "persisting_l2_max_bytes", "memory_bytes")


def spec_for_device(info: DeviceInfo, today: str | None = None) -> tuple[GpuSpec, list[str]]:
    """A spec that uses the device's own attributes, and where they differ from the table.

    The returned spec keeps the table's key, name and DRAM figures (with their citations) when
    the device matches a row; L2, persisting max, SM count, cc and memory always come from the
    device and are cited as "device query recorded by sweeper <version> on <date>". A DRAM peak
    the table does not know is bus width x memory clock x 2 from the device.
    """
    src = device_source(today)
    persist = info.persisting_l2_max_bytes or None
    queried = {
        "cc": info.cc,
        "sm_count": info.sm_count,
        "l2_bytes": info.l2_bytes,
        "persisting_l2_max_bytes": persist,
        "memory_bytes": info.memory_bytes,
    }
    dev_peak = round(info.dram_peak_gbps, 1) or None
    peak_src = f"{src} (memory bus width x memory clock x 2)"
    row = _match(info)
    if row is None:
        sources = {k: src for k, v in queried.items() if v is not None}
        if dev_peak is not None:
            sources["dram_peak_gbps"] = peak_src
        spec = GpuSpec(
            key=_slug(info.name),
            name=info.name,
            dram_peak_gbps=dev_peak,
            sources={k: sources[k] for k in SPEC_FIELDS if k in sources},
            origin=f"device {info.name!r}",
            **queried,
        )
        note = f"{info.name!r} is not in the spec table; using its attributes" + (
            f" (DRAM peak {dev_peak:.0f} GB/s = bus width x clock x 2)" if dev_peak else ""
        )
        return spec, [note]

    diffs: list[str] = []

    def show(v) -> str:
        if v is None:
            return "unknown"
        return f"{v[0]}.{v[1]}" if isinstance(v, tuple) else str(v)

    for n in _QUERIED:
        if getattr(row, n) != queried[n]:
            diffs.append(f"{n}: table {show(getattr(row, n))}, device {show(queried[n])}")
    sources = {k: v for k, v in row.sources.items() if k not in _QUERIED}
    sources.update({k: src for k, v in queried.items() if v is not None})
    peak = row.dram_peak_gbps
    if peak is None:
        peak = dev_peak
        if dev_peak is not None:
            sources["dram_peak_gbps"] = peak_src
            diffs.append(f"dram_peak_gbps: table unknown, device bus x clock {dev_peak:.0f}")
    elif dev_peak and abs(dev_peak - peak) > 0.05 * peak:
        diffs.append(
            f"dram_peak_gbps: table {peak:.0f}, device bus x clock {dev_peak:.0f} "
            "(table value kept)"
        )
    spec = replace(
        row,
        dram_peak_gbps=peak,
        sources={k: sources[k] for k in SPEC_FIELDS if k in sources},
        origin=f"device {info.name!r}",
        **queried,
    )
    return spec, diffs
