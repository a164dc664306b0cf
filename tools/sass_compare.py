"""Compare the SASS of a Numba variant with the SASS of the same config in an exported header,
without a GPU: Numba's as nvJitLink assembles it, the header's as nvcc builds it for
`sweeper verify`.

    python tools/sass_compare.py results/h200/hot-7/relu_policy.cuh fp32-v16-u8-ld.nc-st.cs-b128-flat

Needs nvcc (to build the header) and nvdisasm (`pip install nvidia-cuda-nvdisasm`,
or SWEEPER_NVDISASM). Prints each kernel's instruction count, then a diff of the two
instruction streams with register numbers, immediates and labels normalised away.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("header")
    ap.add_argument("variant", help="dtype-config, e.g. fp32-v16-u2-ld.def-st.cs-b128-flat")
    ap.add_argument("--arch", default="90")
    a = ap.parse_args()

    from sweeper_kernels import Variant
    from sweeper_kernels.toolkit import find_tool

    from sweeper.export.sass import header_kernel, header_sass, numba_sass

    nvcc, nvdisasm = find_tool("nvcc"), find_tool("nvdisasm")
    if not nvcc or not nvdisasm:
        print("error: needs nvcc and nvdisasm (pip install nvidia-cuda-nvdisasm)", file=sys.stderr)
        return 2
    v = Variant.parse(a.variant)
    try:
        a_ins = numba_sass(v, a.arch, nvdisasm)
        b_ins = header_kernel(header_sass(a.header, a.arch, nvcc, nvdisasm), v)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"numba  {v.config}: {len(a_ins)} instructions")
    print(f"header {v.config}: {len(b_ins)} instructions")
    diff = list(difflib.unified_diff(a_ins, b_ins, "numba", "header", n=0, lineterm=""))
    print("\n".join(diff) if diff else "identical after normalisation")
    return 0


if __name__ == "__main__":
    sys.exit(main())
