"""An op of your own, in one file: a leaky ReLU with slope 0.01, as
torch.nn.functional.leaky_relu(x, 0.01).

    sweeper ops list                               # the built-in ops, for comparison
    sweeper ops check examples/my_ops.py:leaky     # its C++ body on the CPU against `reference`

Copy this file and change the body, the reference and the rule. The body is C++ over the
inputs, named as the operands, in the compute type `C` (float for fp32, fp16 and bf16; each
input is converted to it and the result rounded back to the dtype, to nearest even).
"""

import numpy as np
from sweeper_kernels.ops import Op, Operand, Rule
from sweeper_kernels.ops.reference import from_float64, to_float64

# torch multiplies by the slope as a float (its opmath type): the reference takes the same
# float value of 0.01, exactly, so only the rounding differs
SLOPE = float(np.float32(0.01))


def reference(x, dtype, out):
    """x > 0 ? x : SLOPE * x in float64, rounded once to the output dtype."""
    v = to_float64(x, dtype)
    with np.errstate(invalid="ignore"):
        return from_float64(np.where(v > 0, v, SLOPE * v), out)


leaky = Op(
    name="leaky_relu",
    summary="y = x > 0 ? x : 0.01 * x",
    operands=(Operand("x", "in"), Operand("y", "out")),
    reference=reference,
    baseline="torch.nn.functional.leaky_relu(x, 0.01)",
    torch="F.leaky_relu(x, 0.01)",
    dtypes=("fp32", "fp16", "bf16"),
    body="return x > C(0) ? x : C(0.01f) * x;",
    # fp32: one rounding, as the reference; fp16 and bf16: rounded to float, then to the dtype
    rule=Rule("ulps", ulps=(("fp32", 0), ("fp16", 1), ("bf16", 1))),
)
