"""The policy as a PyTorch op: one Python file (templates/relu_torch.py.tmpl) that embeds the
CUDA header of `render_cuda` byte for byte and the C++ of templates/relu_torch.cpp, and builds
them with torch.utils.cpp_extension.load_inline on first use into `torch.ops.sweeper.relu`
(and `relu.out`), with fake and autograd implementations registered from Python.

Rendering needs neither torch nor a GPU; the file imports torch, and builds only when called.
"""

from __future__ import annotations

import ast
import json

from sweeper_kernels import hints

from sweeper.dtypes import DTYPES
from sweeper.errors import SweeperError
from sweeper.export.cuda import c_api_declaration, provenance, render_cuda, template
from sweeper.export.native import NVCC_FLAGS
from sweeper.ops import get_op

# per dtype: the c10::ScalarType of its tensors and torch's name for it
TORCH_DTYPE = {
    "fp32": ("Float", "float32"),
    "fp16": ("Half", "float16"),
    "bf16": ("BFloat16", "bfloat16"),
    "int8": ("Char", "int8"),
}


def _raw_string(text: str, what: str) -> str:
    """`text` as a raw triple-quoted Python literal, checked to read back as `text` exactly."""
    literal = f'r"""{text}"""'
    try:
        same = ast.literal_eval(literal) == text
    except (SyntaxError, ValueError):
        same = False
    if not same:
        raise SweeperError(f"the {what} cannot be embedded as a raw Python string")
    return literal[len('r"""') : -len('"""')]


def render_cpp() -> str:
    """The .cpp source of the op: the header's extern "C" launchers declared, one per dtype,
    and the TORCH_LIBRARY definition and implementations."""
    words = [TORCH_DTYPE[dt][1] for dt in DTYPES]
    return template("relu_torch.cpp").substitute(
        declarations="\n".join(c_api_declaration(dt) for dt in DTYPES),
        cases="\n".join(
            f"    case c10::ScalarType::{TORCH_DTYPE[dt][0]}: return sweeper_launch_relu_{dt};"
            for dt in DTYPES
        ),
        dtypes=", ".join(words[:-1]) + " or " + words[-1],
    )


def _nc_loads(doc: dict) -> str:
    """The docstring's reason for no in-place form, from the policy's load hints."""
    nc = [
        c for c in doc["configs"].values() if hints.get("load", c["load_hint"]).qualifier == ".nc"
    ]
    if not nc:
        return "The kernels read x while they write out."
    return (
        f"{len(nc)} of the policy's {len(doc['configs'])} configs load with ld.global.nc, "
        "which PTX allows only on memory that nothing writes while the kernel runs."
    )


def render_torch(doc: dict) -> str:
    """The relu_torch.py text for a merged policy (see sweeper.analyze.policy.load_any)."""
    header = render_cuda(doc)
    entries, disagreements = provenance(doc)
    return template("relu_torch.py.tmpl").substitute(
        fallback=" > ".join(doc["fallback"]),
        provenance="\n".join(f"    {line}" for line in [*entries, *disagreements]),
        differs=get_op("relu").differs,
        nc_loads=_nc_loads(doc),
        header=_raw_string(header, "header"),
        cpp=_raw_string(render_cpp(), "C++ source"),
        nvcc_flags=json.dumps(list(NVCC_FLAGS)),
    )
