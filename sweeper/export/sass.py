"""SASS of a Numba variant and of the same config in an exported header, without a GPU.

A Numba variant's PTX is assembled by nvJitLink (what numba-cuda links with), the header by
nvcc into a cubin as `sweeper verify` builds it, both for one arch, and both disassembled with
nvdisasm (`pip install nvidia-cuda-nvdisasm`, or SWEEPER_NVDISASM). Used by
tests/unit/test_export_sass.py (the export mirrors the Numba kernels instruction for
instruction where it matters) and tools/sass_compare.py (a diff).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

_DT = {"fp32": 0, "fp16": 1, "bf16": 2, "int8": 3}  # sweeper_relu::Dt in the header


def nvjitlink_cubin(ptx: str | list[str], arch: str) -> bytes:
    """One cubin of one PTX module, or of several (each kernel is assembled on its own)."""
    from cuda.bindings import nvjitlink as nj

    h = nj.create(2, [f"-arch=sm_{arch}", "-O3"])
    try:
        for i, text in enumerate([ptx] if isinstance(ptx, str) else ptx):
            data = text.encode()
            nj.add_data(h, nj.InputType.PTX, data, len(data), f"k{i}.ptx")
        nj.complete(h)
        buf = bytearray(nj.get_linked_cubin_size(h))
        nj.get_linked_cubin(h, buf)
        return bytes(buf)
    finally:
        nj.destroy(h)


def disassemble(cubin: bytes, nvdisasm: str) -> str:
    with tempfile.TemporaryDirectory() as t:
        p = Path(t) / "k.cubin"
        p.write_bytes(cubin)
        return subprocess.run(
            [nvdisasm, "-c", str(p)], capture_output=True, text=True, check=True
        ).stdout


def functions(sass: str) -> dict[str, list[str]]:
    """Kernel name -> instructions with registers, immediates and labels normalised (NOPs
    dropped), so two compilations of the same code compare equal."""
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


def header_sass(header: str | os.PathLike, arch: str, nvcc: str, nvdisasm: str) -> dict:
    """functions() of every kernel of an exported header, assembled as `sweeper verify` builds
    it (nvcc's own ptxas, verify's optimisation and target flags): the SASS that ships.
    nvJitLink, which assembles Numba's kernels, does not always schedule as nvcc does."""
    from sweeper.export.native import nvcc_flags

    with tempfile.TemporaryDirectory() as t:
        src = Path(t) / "h.cu"
        src.write_text(f'#include "{Path(header).resolve()}"\n')
        cubin = Path(t) / "h.cubin"
        subprocess.run(
            [nvcc, *nvcc_flags(arch, "-cubin"), str(src), "-o", str(cubin)],
            check=True,
            capture_output=True,
        )
        return functions(disassemble(cubin.read_bytes(), nvdisasm))


def numba_sass(variant, arch: str, nvdisasm: str) -> list[str]:
    """functions() of a Numba variant's kernel, assembled by nvJitLink as a cubin of its own."""
    return numba_sass_many([variant], arch, nvdisasm)[variant.id]


def numba_sass_many(variants, arch: str, nvdisasm: str) -> dict[str, list[str]]:
    """numba_sass of each variant (by its id), from one cubin of all their kernels and one
    nvdisasm call (a call costs about half a second). Variants whose kernels have one name
    (configs that differ in launch only) share one kernel."""
    from sweeper_kernels.build import ptx

    cc = (int(arch[:-1]), int(arch[-1]))
    entry: dict[str, str] = {}  # variant id -> its kernel's name
    modules: dict[str, str] = {}  # kernel name -> its PTX
    for v in variants:
        text = ptx(v, cc)
        names = re.findall(r"^\.visible \.entry (\S+)\(", text, re.M)
        if len(names) != 1:
            raise ValueError(f"expected one kernel in {v.config}'s PTX, found {len(names)}")
        entry[v.id] = names[0]
        modules.setdefault(names[0], text)
    fns = functions(disassemble(nvjitlink_cubin(list(modules.values()), arch), nvdisasm))
    return {vid: fns[name] for vid, name in entry.items()}


def header_kernel(fns: dict[str, list[str]], variant) -> list[str]:
    """The header kernel that implements `variant` (by its Itanium-mangled template args)."""
    from sweeper.export.cuda import _hint_struct

    flat = variant.grid in ("flat", "flat32")
    fixed = variant.grid == "fixed32"
    kname = "19relu_fixed32_kernel" if fixed else "16relu_flat_kernel" if flat else "11relu_kernel"
    ld = _hint_struct("load", variant.load_hint)
    st = _hint_struct("store", variant.store_hint)
    tmpl = (
        f"ILNS_2DtE{_DT[variant.dtype]}ELi{variant.vec_bytes // 4}ELi{variant.unroll}"
        f"ENS0_{len(ld)}{ld}ENS0_{len(st)}{st}E"
    )
    if flat:  # the slot index type: int (flat32) or int64_t = long (flat)
        tmpl += "iE" if variant.grid == "flat32" else "lE"
    if fixed:  # the block size
        tmpl += f"Li{variant.block}E"
    match = [n for n in fns if kname in n and tmpl in n]
    if len(match) != 1:
        raise ValueError(f"{len(match)} header kernels match {variant.config}")
    return fns[match[0]]


def memory_ops(ins: list[str]) -> list[str]:
    """The global loads and stores, in order."""
    return [i for i in ins if re.match(r"(@!?P )?(LDG|STG)", i)]


def prologue(ins: list[str]) -> list[str]:
    """Everything up to and including the first branch (the index maths and the first check)."""
    for k, i in enumerate(ins):
        if "BRA" in i:
            return ins[: k + 1]
    return ins
