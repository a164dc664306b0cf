"""The ops sweeper times. Defined once, in the kernels layer (sweeper_kernels.ops, which never
imports sweeper); this module is where the rest of sweeper takes them from: an op's bytes per
element, and so the working set of `n` elements and the elements of a working set."""

from sweeper_kernels.ops import (
    DEFAULT_OP,
    OPS,
    SWEPT,
    Op,
    Operand,
    bytes_per_element,
    elements,
    get_op,
    working_set,
)

__all__ = [
    "DEFAULT_OP",
    "OPS",
    "SWEPT",
    "Op",
    "Operand",
    "bytes_per_element",
    "elements",
    "get_op",
    "working_set",
]
