"""The dtypes sweeper times: names, item sizes, how their data is held. The one definition
(sweeper.dtypes re-exports it for the rest of sweeper). No numpy import: types are named."""

from __future__ import annotations

DTYPES: tuple[str, ...] = ("fp32", "fp16", "bf16", "int8")

ITEMSIZE: dict[str, int] = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1}

# numpy dtype of host and device arrays (numpy has no bfloat16: bf16 is held as its raw bits)
STORAGE: dict[str, str] = {"fp32": "float32", "fp16": "float16", "bf16": "uint16", "int8": "int8"}

# C++ element type in the exported header
CTYPE: dict[str, str] = {
    "fp32": "float",
    "fp16": "__half",
    "bf16": "__nv_bfloat16",
    "int8": "int8_t",
}


def bits_view(dtype: str, signed: bool = False) -> str:
    """numpy dtype name of the integer view of `dtype`'s bit patterns ("uint32" for fp32)."""
    return f"{'' if signed else 'u'}int{8 * ITEMSIZE[dtype]}"
