"""Elementwise ops as data: the operands an op reads and writes per element, and so the bytes
one call moves, its reference, its exactness rule and its baseline, in one value per op.

A plan's sizes are working sets: the bytes one call reads and writes. An op's working set for
`n` elements is `n * op.bytes_per_element(dtype)` (ReLU: one read and one write of the dtype,
`2 * itemsize`), so one plan, gap-free in bytes, serves every op: each op reads its own element
counts off the same byte ladder. Every stage takes the working set of `n` elements, and the
elements of a working set, from here (sweeper.ops re-exports). No numpy import: a reference is
named, and resolved where it is called.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import import_module

from sweeper_kernels.dtypes import ITEMSIZE


@dataclass(frozen=True)
class Operand:
    """One array an op reads (`role` "in") or writes ("out"), one element per element of the
    op; `dtype` None: the dtype the op is timed at, else that fixed dtype (a cast's other
    side)."""

    name: str
    role: str
    dtype: str | None = None

    def itemsize(self, dtype: str) -> int:
        return ITEMSIZE[self.dtype or dtype]


@dataclass(frozen=True)
class Op:
    name: str
    summary: str
    operands: tuple[Operand, ...]
    exact: str  # the exactness rule every candidate's output is held to
    reference: str  # "module:function", (x, dtype) -> the expected output, on the host
    baseline: str  # what the default baseline calls
    differs: str = ""  # where the op deliberately differs from its baseline, said once

    def reads(self, dtype: str) -> int:
        """Bytes read per element."""
        return sum(o.itemsize(dtype) for o in self.operands if o.role == "in")

    def writes(self, dtype: str) -> int:
        """Bytes written per element."""
        return sum(o.itemsize(dtype) for o in self.operands if o.role == "out")

    def bytes_per_element(self, dtype: str) -> int:
        """The working set's bytes per element: read + written in one call."""
        return self.reads(dtype) + self.writes(dtype)

    def working_set(self, n: int, dtype: str) -> int:
        """Bytes one call on `n` elements reads and writes."""
        return n * self.bytes_per_element(dtype)

    def elements(self, ws_bytes: int, dtype: str) -> int:
        """The elements of a working set of `ws_bytes`; ValueError where it is not a whole
        number of elements."""
        per = self.bytes_per_element(dtype)
        n, rest = divmod(int(ws_bytes), per)
        if rest:
            raise ValueError(
                f"{ws_bytes} B is not a whole number of {self.name} {dtype} elements ({per} B each)"
            )
        return n

    def reference_fn(self):
        """The reference callable, imported where it is called (it needs numpy)."""
        module, name = self.reference.split(":")
        return getattr(import_module(module), name)


RELU = Op(
    name="relu",
    summary="y = max(x, 0), elementwise, one input and one output of the same dtype",
    operands=(Operand("x", "in"), Operand("y", "out")),
    exact="bit-exact against the reference, special values included",
    reference="sweeper_kernels.reference:reference_relu",
    baseline="torch.clamp_min(x, 0, out=y) (torch.relu's values, written into y)",
    differs=(
        "NaN of either sign maps to +0 (`x > 0 ? x : 0`: a NaN is not above 0), where "
        "torch.relu keeps the NaN"
    ),
)

OPS: dict[str, Op] = {RELU.name: RELU}
DEFAULT_OP = RELU.name


def get_op(name: str = DEFAULT_OP) -> Op:
    try:
        return OPS[name]
    except KeyError:
        raise ValueError(f"unknown op {name!r} (known: {', '.join(sorted(OPS))})") from None


def working_set(n: int, dtype: str, op: str = DEFAULT_OP) -> int:
    """Bytes one call of `op` on `n` elements of `dtype` reads and writes."""
    return n * bytes_per_element(dtype, op)


@functools.cache  # every trial record read is checked against it
def bytes_per_element(dtype: str, op: str = DEFAULT_OP) -> int:
    return get_op(op).bytes_per_element(dtype)


def elements(ws_bytes: int, dtype: str, op: str = DEFAULT_OP) -> int:
    """The elements of `op` at `dtype` in a working set of `ws_bytes` (a whole number)."""
    return get_op(op).elements(ws_bytes, dtype)
