"""Compare the SASS of a Numba variant with the SASS of the same config in an exported header,
both assembled by nvJitLink (the compiler Numba uses), without a GPU.

    python scripts/sass_compare.py results/h200/hot-8/relu_policy.cuh fp32-v16-u2-ld.def-st.cs-b128-flat

Needs nvcc (to turn the header into PTX) and nvdisasm (`pip install nvidia-cuda-nvdisasm`,
or SWEEPER_NVDISASM). Prints each kernel's instruction count, then a diff of the two
instruction streams with register numbers, immediates and labels normalised away.
Written for the parity question in results/h200/README.md (session 3): the exported
2-vector flat kernel timed 3-6% slower than the Numba one.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_DT = {"fp32": 0, "fp16": 1, "bf16": 2, "int8": 3}  # sweeper_relu::Dt in the header


def nvjitlink_cubin(ptx: str, arch: str) -> bytes:
    from cuda.bindings import nvjitlink as nj

    h = nj.create(2, [f"-arch=sm_{arch}", "-O3"])
    try:
        data = ptx.encode()
        nj.add_data(h, nj.InputType.PTX, data, len(data), "k.ptx")
        nj.complete(h)
        buf = bytearray(nj.get_linked_cubin_size(h))
        nj.get_linked_cubin(h, buf)
        return bytes(buf)
    finally:
        nj.destroy(h)


def disassemble(cubin: bytes, nvdisasm: str, tmp: Path) -> str:
    p = tmp / f"k{len(list(tmp.iterdir()))}.cubin"
    p.write_bytes(cubin)
    return subprocess.run(
        [nvdisasm, "-c", str(p)], capture_output=True, text=True, check=True
    ).stdout


def functions(sass: str) -> dict[str, list[str]]:
    """name -> normalised instructions (NOPs dropped)."""
    out: dict[str, list[str]] = {}
    name = None
    for line in sass.splitlines():
        m = re.match(r"^\.text\.(\S+):$", line)
        if m:
            name = m.group(1)
            out[name] = []
            continue
        m = re.search(r"/\*[0-9a-f]{4}\*/\s*([^;]*;)", line)
        if name and m:
            ins = m.group(1)
            ins = re.sub(r"\bUR\d+", "UR", ins)
            ins = re.sub(r"\bR\d+", "R", ins)
            ins = re.sub(r"\bU?P\d\b", "P", ins)
            ins = re.sub(r"0x[0-9a-f]+", "X", ins)
            ins = re.sub(r"\.L_x_\d+", "L", ins)
            if not ins.startswith("NOP"):
                out[name].append(ins)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("header")
    ap.add_argument("variant", help="dtype-config, e.g. fp32-v16-u2-ld.def-st.cs-b128-flat")
    ap.add_argument("--arch", default="90")
    a = ap.parse_args()

    from sweeper_kernels import Variant
    from sweeper_kernels.build import ptx

    from sweeper.export import _hint_struct
    from sweeper.verify import find_nvcc

    nvcc = find_nvcc()
    nvdisasm = os.environ.get("SWEEPER_NVDISASM") or shutil.which("nvdisasm")
    if not nvdisasm:
        try:
            import nvidia.cu13  # type: ignore[import-not-found]

            cand = Path(list(nvidia.cu13.__path__)[0]) / "bin" / "nvdisasm"
            nvdisasm = str(cand) if cand.exists() else None
        except ImportError:
            nvdisasm = None
    if not nvcc or not nvdisasm:
        print("error: needs nvcc and nvdisasm (pip install nvidia-cuda-nvdisasm)", file=sys.stderr)
        return 2
    v = Variant.parse(a.variant)
    cc = (int(a.arch[:-1]), int(a.arch[-1]))
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        src = tmp / "h.cu"
        src.write_text(f'#include "{Path(a.header).resolve()}"\n')
        hptx = tmp / "h.ptx"
        subprocess.run(
            [nvcc, f"-arch=sm_{a.arch}", "-std=c++17", "-ptx", str(src), "-o", str(hptx)],
            check=True,
        )
        numba = functions(disassemble(nvjitlink_cubin(ptx(v, cc), a.arch), nvdisasm, tmp))
        header = functions(disassemble(nvjitlink_cubin(hptx.read_text(), a.arch), nvdisasm, tmp))
    kname = "16relu_flat_kernel" if v.grid == "flat" else "11relu_kernel"
    ld, st = _hint_struct("load", v.load_hint), _hint_struct("store", v.store_hint)
    # Itanium mangling of relu_*_kernel<Dt, NW, U, Ld_..., St_...>
    tmpl = f"ILNS_2DtE{_DT[v.dtype]}ELi{v.vec_bytes // 4}ELi{v.unroll}ENS0_{len(ld)}{ld}ENS0_{len(st)}{st}E"
    match = [n for n in header if kname in n and tmpl in n]
    if len(numba) != 1 or len(match) != 1:
        print(f"error: found {len(numba)} Numba and {len(match)} header kernels", file=sys.stderr)
        return 2
    a_ins, b_ins = next(iter(numba.values())), header[match[0]]
    print(f"numba  {v.config}: {len(a_ins)} instructions")
    print(f"header {match[0]}: {len(b_ins)} instructions")
    diff = list(difflib.unified_diff(a_ins, b_ins, "numba", "header", n=0, lineterm=""))
    print("\n".join(diff) if diff else "identical after normalisation")
    return 0


if __name__ == "__main__":
    sys.exit(main())
