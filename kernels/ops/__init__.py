"""Elementwise ops as data: the operands an op reads and writes per element, and so the bytes
one call moves, its element body in CUDA C++, its reference, its exactness rule and its
baseline, in one value per op.

A plan's sizes are working sets: the bytes one call reads and writes. An op's working set for
`n` elements is `n * op.bytes_per_element(dtype)` (ReLU: one read and one write of the dtype,
`2 * itemsize`), so one plan, gap-free in bytes, serves every op: each op reads its own element
counts off the same byte ladder. Every stage takes the working set of `n` elements, and the
elements of a working set, from here (sweeper.ops re-exports). No numpy import: a reference is
named, and resolved where it is called.

The body is one `__host__ __device__` C++ function of the op's inputs in its compute type
(`float` for the float dtypes, `int` for int8), converted from and to the storage dtype around
it (round to nearest even); `sweeper_kernels.ops.host` compiles exactly that text for the CPU
and checks it against the reference under the op's rule. The built-in ops are in
`sweeper_kernels.ops.builtin`; an op of a user's own is an `Op` in a Python file
(`load_op("my_ops.py:leaky")`).
"""

from __future__ import annotations

import functools
from pathlib import Path

from sweeper_kernels.ops.builtin import BUILTIN
from sweeper_kernels.ops.core import FLOATS, Op, Operand, Rule, compute_type

OPS: dict[str, Op] = {op.name: op for op in BUILTIN}
DEFAULT_OP = "relu"
RELU = OPS[DEFAULT_OP]
SWEPT: tuple[str, ...] = tuple(name for name, op in OPS.items() if op.swept)


def get_op(name: str = DEFAULT_OP) -> Op:
    try:
        return OPS[name]
    except KeyError:
        raise ValueError(f"unknown op {name!r} (known: {', '.join(sorted(OPS))})") from None


def load_op(spec: str) -> Op:
    """A built-in op by name, or a user's `Op` named by "path/to/file.py:attribute"."""
    if ":" not in spec:
        return get_op(spec)
    path, _, attr = spec.rpartition(":")
    file = Path(path)
    if file.suffix != ".py" or not file.is_file():
        raise ValueError(f"{spec}: expected FILE.py:NAME with an existing Python file")
    import importlib.util

    mod_spec = importlib.util.spec_from_file_location(f"sweeper_user_op_{file.stem}", file)
    module = importlib.util.module_from_spec(mod_spec)
    try:
        mod_spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 (a user's file: its error, in one line)
        raise ValueError(f"{file}: {type(e).__name__}: {e}") from None
    op = getattr(module, attr, None)
    if not isinstance(op, Op):
        raise ValueError(f"{spec}: {attr!r} is not a sweeper_kernels.ops.Op")
    if op.name in OPS:
        raise ValueError(f"{spec}: op name {op.name!r} is a built-in op's; choose another")
    return op


def working_set(n: int, dtype: str, op: str = DEFAULT_OP) -> int:
    """Bytes one call of `op` on `n` elements of `dtype` reads and writes."""
    return n * bytes_per_element(dtype, op)


@functools.cache  # every trial record read is checked against it
def bytes_per_element(dtype: str, op: str = DEFAULT_OP) -> int:
    return get_op(op).bytes_per_element(dtype)


def elements(ws_bytes: int, dtype: str, op: str = DEFAULT_OP) -> int:
    """The elements of `op` at `dtype` in a working set of `ws_bytes` (a whole number)."""
    return get_op(op).elements(ws_bytes, dtype)


__all__ = [
    "DEFAULT_OP",
    "FLOATS",
    "OPS",
    "RELU",
    "SWEPT",
    "Op",
    "Operand",
    "Rule",
    "bytes_per_element",
    "compute_type",
    "elements",
    "get_op",
    "load_op",
    "working_set",
]
