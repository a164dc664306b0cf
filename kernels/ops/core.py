"""An op's definition: its operands, exactness rule and the fields of `Op` (the registry and
the helpers every stage calls are in sweeper_kernels.ops)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import import_module

from sweeper_kernels.dtypes import DTYPES, ITEMSIZE

FLOATS: tuple[str, ...] = ("fp32", "fp16", "bf16")
LAYOUTS = ("flat", "gated")
RULES = ("bits", "values", "ulps")
_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")


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

    def dtype_at(self, dtype: str) -> str:
        """This operand's dtype when the op is timed at `dtype`."""
        return self.dtype or dtype


@dataclass(frozen=True)
class Rule:
    """What an output must be to count as exact, against the op's reference (the correctly
    rounded value `ref`):

    - "bits": the same bit pattern, NaN payloads included;
    - "values": the same bit pattern, except that any NaN stands for any NaN (an op whose NaN
      comes out of arithmetic: its payload is the hardware's, not the input's);
    - "ulps": |y - ref| <= ulps * ulp(ref) + atol, per output dtype (ulp: the spacing of the
      output dtype at |ref|; atol 0 unless named), NaN exactly where the reference is NaN, an
      infinity exactly where the reference has the same one.
    """

    kind: str = "bits"
    ulps: tuple[tuple[str, int], ...] = ()  # (output dtype, bound) for kind "ulps"
    atol: tuple[tuple[str, float], ...] = ()  # (output dtype, absolute slack) for kind "ulps"

    def __post_init__(self) -> None:
        if self.kind not in RULES:
            raise ValueError(f"unknown exactness rule {self.kind!r} (known: {', '.join(RULES)})")
        if (self.kind == "ulps") != bool(self.ulps) or (self.atol and self.kind != "ulps"):
            raise ValueError("an ulps rule names its bound per dtype, and only an ulps rule does")

    def bound(self, dtype: str) -> tuple[int, float]:
        """(ulps, atol) allowed at output dtype `dtype`; (0, 0.0): exact."""
        return dict(self.ulps).get(dtype, 0), float(dict(self.atol).get(dtype, 0.0))

    def describe(self) -> str:
        if self.kind == "bits":
            return "bit-exact against the reference, special values and NaN payloads included"
        if self.kind == "values":
            return "bit-exact against the reference; a NaN matches any NaN"
        atol = dict(self.atol)
        parts = [f"{d} {n} ulp{'s' if n != 1 else ''}" + (f" + {atol[d]:.3g}" if d in atol else "")
                 for d, n in self.ulps]  # fmt: skip
        return f"|y - ref| <= ulps * ulp(ref) + atol of the correctly rounded reference ({', '.join(parts)})"


@dataclass(frozen=True)
class Op:
    name: str
    summary: str
    operands: tuple[Operand, ...]
    # "module:function" or a function: (inputs..., dtype=, out=) -> the expected output in the
    # output dtype's storage, on the host
    reference: str | Callable
    baseline: str  # what the default baseline calls
    # torch's values for the op: a Python expression over the inputs (by name), `torch` and
    # `F` (torch.nn.functional), compared with the op's outputs on the GPU
    torch: str = ""
    differs: str = ""  # where the op deliberately differs from its baseline, said once
    dtypes: tuple[str, ...] = DTYPES  # the dtypes it is timed at
    # the element function's body: C++ statements over the inputs (named as the "in"
    # operands, of type C, the compute type), ending in `return`
    body: str = ""
    rule: Rule = field(default_factory=Rule)
    # "flat": operand i's element k goes with every other operand's element k; "gated": two
    # inputs taken from one tensor [.., 2d] (first half, second half of each row), output [.., d]
    layout: str = "flat"
    swept: bool = False  # the sweep's generated variants compute it (today: ReLU)

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"op name {self.name!r}: lower case letters, digits and '_'")
        if self.layout not in LAYOUTS:
            raise ValueError(
                f"op {self.name}: layout {self.layout!r} (known: {', '.join(LAYOUTS)})"
            )
        for o in self.operands:
            if o.role not in ("in", "out") or (o.dtype is not None and o.dtype not in DTYPES):
                raise ValueError(f"op {self.name}: operand {o.name!r} ({o.role}, {o.dtype})")
        if not self.inputs or len(self.outputs) != 1:
            raise ValueError(f"op {self.name}: one or more inputs and exactly one output")
        if self.layout == "gated" and len(self.inputs) != 2:
            raise ValueError(f"op {self.name}: a gated op reads two halves of one tensor")
        bad = [d for d in self.dtypes if d not in DTYPES]
        if bad or not self.dtypes:
            raise ValueError(f"op {self.name}: dtypes {bad or '()'} (known: {', '.join(DTYPES)})")

    @property
    def exact(self) -> str:
        """The exactness rule every candidate's output is held to, in words."""
        return self.rule.describe()

    @property
    def inputs(self) -> tuple[Operand, ...]:
        return tuple(o for o in self.operands if o.role == "in")

    @property
    def outputs(self) -> tuple[Operand, ...]:
        return tuple(o for o in self.operands if o.role == "out")

    def out_dtype(self, dtype: str) -> str:
        """The output's dtype when the op is timed at `dtype`."""
        return self.outputs[0].dtype_at(dtype)

    def reads(self, dtype: str) -> int:
        """Bytes read per element."""
        return sum(o.itemsize(dtype) for o in self.inputs)

    def writes(self, dtype: str) -> int:
        """Bytes written per element."""
        return sum(o.itemsize(dtype) for o in self.outputs)

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

    def torch_fn(self):
        """`torch` as a function of the input tensors (torch imported where it is called)."""
        import torch

        code = compile(self.torch, f"<{self.name} torch>", "eval")
        names = [o.name for o in self.inputs]

        def call(*tensors):
            env = dict(zip(names, tensors, strict=True))
            return eval(code, {"torch": torch, "F": torch.nn.functional}, env)  # noqa: S307

        return call

    def reference_fn(self):
        """The reference callable, imported where it is called (it needs numpy)."""
        if callable(self.reference):
            return self.reference
        module, name = self.reference.split(":")
        return getattr(import_module(module), name)


def compute_type(dtype: str) -> str:
    """The C++ type an op's body computes in at storage dtype `dtype`."""
    return "int" if dtype == "int8" else "float"
