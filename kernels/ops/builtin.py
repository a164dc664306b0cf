"""The built-in ops. Each body is the formula of the baseline's own CUDA kernel, in its compute
type (torch's `opmath`: float for the float dtypes), so the op's error against the correctly
rounded reference is no larger than the baseline's; where the op deliberately differs from the
baseline it says so in `differs`.

The references (sweeper_kernels.ops.reference) are float64 formulas rounded once to the output
dtype, written independently of the bodies. An ulp rule's bounds are torch's own largest errors
against the same reference on the GPU (docs/new-op.md, "Checking an op without a GPU")."""

from __future__ import annotations

from sweeper_kernels.ops.core import FLOATS, Op, Operand, Rule

_REF = "sweeper_kernels.ops.reference"
_UNARY = (Operand("x", "in"), Operand("y", "out"))
_BINARY = (Operand("a", "in"), Operand("b", "in"), Operand("y", "out"))

RELU = Op(
    name="relu",
    summary="y = max(x, 0), elementwise, one input and one output of the same dtype",
    operands=_UNARY,
    reference=f"{_REF}:relu",
    baseline="torch.clamp_min(x, 0, out=y) (torch.relu's values, written into y)",
    torch="torch.relu(x)",
    differs=(
        "NaN of either sign maps to +0 (`x > 0 ? x : 0`: a NaN is not above 0), where "
        "torch.relu keeps the NaN"
    ),
    body="return x > C(0) ? x : C(0);",
    swept=True,
)

# torch's tanh GELU (aten/src/ATen/native/cuda/ActivationGeluKernel.cu): x^3 first, then
# kBeta * (x + kKappa * x^3), then 0.5 * x * (1 + tanh(inner)), all in float. 1 + tanh(inner)
# cancels for x below about -3: there float's 1 + tanh keeps about 2^-24 absolute, so the
# result's absolute error reaches 2^-21 (4.77e-7, the host's largest), far more than an ulp of
# a result near 0, in torch's kernel and here alike: the rule's atol, no looser than that.
GELU = Op(
    name="gelu",
    summary='y = gelu(x, approximate="tanh"), as torch.nn.functional.gelu',
    operands=_UNARY,
    reference=f"{_REF}:gelu",
    baseline='torch.nn.functional.gelu(x, approximate="tanh")',
    torch='F.gelu(x, approximate="tanh")',
    dtypes=FLOATS,
    body=(
        "const C cube = x * x * x;\n"
        "const C inner = C(0.7978845608028654) * (x + C(0.044715) * cube);\n"
        "return C(0.5) * x * (C(1) + tanhf(inner));"
    ),
    rule=Rule(
        "ulps",
        ulps=(("fp32", 0), ("fp16", 1), ("bf16", 1)),
        atol=(("fp32", 2**-21), ("fp16", 2**-21), ("bf16", 2**-22)),
    ),
)

# torch's SiLU (ActivationSiluKernel.cu): x / (1 + exp(-x)) in float.
SILU = Op(
    name="silu",
    summary="y = x * sigmoid(x), as torch.nn.functional.silu",
    operands=_UNARY,
    reference=f"{_REF}:silu",
    baseline="torch.nn.functional.silu(x)",
    torch="F.silu(x)",
    dtypes=FLOATS,
    body="return x / (C(1) + expf(-x));",
    rule=Rule("ulps", ulps=(("fp32", 2), ("fp16", 1), ("bf16", 0))),
)


def _arithmetic(name: str, sign: str) -> Op:
    """A two-input op of one dtype that is one IEEE operation (int8 wraps, as torch's)."""
    return Op(
        name=name,
        summary=f"y = a {sign} b, two inputs of one dtype (int8 wraps, as torch's)",
        operands=_BINARY,
        reference=f"{_REF}:{name}",
        baseline=f"torch.{name}(a, b, out=y)",
        torch=f"torch.{name}(a, b)",
        body=f"return a {sign} b;",
        rule=Rule("values"),
    )


ADD = _arithmetic("add", "+")
MUL = _arithmetic("mul", "*")

# vLLM's silu_and_mul (csrc/activation_kernels.cu): input [.., 2d], output [.., d],
# y = silu(x[.., :d]) * x[.., d:].
SILU_AND_MUL = Op(
    name="silu_and_mul",
    summary="y = silu(x[.., :d]) * x[.., d:], input [.., 2d], output [.., d], as vLLM's",
    operands=(Operand("gate", "in"), Operand("up", "in"), Operand("y", "out")),
    reference=f"{_REF}:silu_and_mul",
    baseline="torch.nn.functional.silu(x[..., :d]) * x[..., d:]",
    torch="F.silu(gate) * up",
    differs=(
        "the product is taken in float and rounded once, where vLLM's kernel and the torch "
        "baseline round silu(gate) to the dtype before multiplying"
    ),
    dtypes=FLOATS,
    body="return gate / (C(1) + expf(-gate)) * up;",
    rule=Rule("ulps", ulps=(("fp32", 3), ("fp16", 1), ("bf16", 1))),
    layout="gated",
)

_TORCH_DTYPE = {"fp32": "torch.float32", "bf16": "torch.bfloat16"}


def _cast(src: str, dst: str, how: str) -> Op:
    """y = dst(x): read at `src`, written at `dst`; the conversion is the store's own (round to
    nearest even), the body the identity."""
    return Op(
        name=f"cast_{src}_{dst}",
        summary=f"y = {dst}(x), {src} in, {dst} out, {how}",
        operands=(Operand("x", "in"), Operand("y", "out", dst)),
        reference=f"{_REF}:cast",
        baseline=f"y.copy_(x) (x.to({_TORCH_DTYPE[dst]}), written into y)",
        torch=f"x.to({_TORCH_DTYPE[dst]})",
        dtypes=(src,),
        body="return x;",
        rule=Rule("values"),
    )


CAST_FP32_BF16 = _cast("fp32", "bf16", "round to nearest even")
CAST_BF16_FP32 = _cast("bf16", "fp32", "exact")

BUILTIN: tuple[Op, ...] = (
    RELU,
    GELU,
    SILU,
    ADD,
    MUL,
    SILU_AND_MUL,
    CAST_FP32_BF16,
    CAST_BF16_FP32,
)
