"""Generate the Python source of one ReLU kernel from its compile key. No numba import here.

Why generated source (not a closure over constants): every compile key becomes its own module
file with its own Numba on-disk cache index, so a process pool can compile the whole grid in
parallel without racing on one shared index file, and `unroll` is written out as straight-line
code, so the PTX shows exactly `unroll` main loads per loop iteration by construction.

The ReLU itself is integer math on 32-bit words of bit patterns (see bitmath.py), one
`relu_word` intrinsic call per word.

Indexing (launch-time `block` and grid size, nothing about them compiled in):
  * the data is `nvec = n // E` whole vectors (E elements per vector) plus `n % E` tail elements;
  * tiles of `U * blockDim` vectors; block b handles tiles b, b + gridDim, ... (grid-stride);
    in a tile, thread t touches vectors t, t + blockDim, ..., so each of the U accesses is
    coalesced across the warp. All U loads are issued before any store (U accesses in flight);
  * the partial last tile is done one vector per thread per step (guarded), started by the
    blocks that did one tile fewer (rotated block index), so onepass puts it on the last block;
  * the `n % E` tail elements are done one per thread by the same rotated threads.
A "onepass" launch sizes the grid to cover every tile once; "strideW" caps it at W waves.
The flat form ("flat", its own template) has no loop; "flat32" is that template with its index
maths in 32-bit integers (the `MAD32` / `LT32` intrinsics), as torch's `int` indexing is;
"fixed32" is flat32 with the block size compiled in (a literal, and the kernel's launch bounds),
as torch's vectorized elementwise kernel has it: its slot offsets become constants, and at
fp32 its ReLU is one `max.f32` per word (one FMNMX, as nvcc compiles torch's; the same bits as
the integer formula for every word).
"""

from __future__ import annotations

import ast
import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

from sweeper_kernels.bitmath import DTYPE_LANES


@dataclass(frozen=True)
class CompileKey:
    """The fields of a Variant that change the compiled code (block and grid do not)."""

    dtype: str
    vec_bytes: int
    unroll: int
    load_hint: str
    store_hint: str
    flat: bool = False  # no loop: `unroll` vectors per thread, one block per tile (grid "flat")
    index32: bool = False  # flat only: 32-bit index maths, as torch's kernel (grid "flat32")
    block: int = 0  # flat only: the block size compiled in, with launch bounds (grid "fixed32")

    @property
    def slug(self) -> str:
        def tok(h: str) -> str:
            return h.replace("::", "").replace("_", "").replace(":0.", "f")

        return (
            f"{self.dtype}_v{self.vec_bytes}_u{self.unroll}"
            f"_ld{tok(self.load_hint)}_st{tok(self.store_hint)}{'_flat' if self.flat else ''}"
            f"{'_i32' if self.index32 else ''}{f'_b{self.block}' if self.block else ''}"
        )

    @property
    def relu_form(self) -> str:
        """ "max" (max.f32, fp32 "fixed32" only) or "bits" (integer maths): intrinsics.RELU_FORMS."""
        return "max" if self.block and self.dtype == "fp32" else "bits"


def kernel_source(key: CompileKey) -> str:
    """The full text of the module for `key` (deterministic: it is hashed and cached on)."""
    bits, _ = DTYPE_LANES[key.dtype]
    nwords = key.vec_bytes // 4
    elems = key.vec_bytes * 8 // bits  # elements per vector (E)
    u = key.unroll

    def load(name: str, idx: str) -> list[str]:
        names = ", ".join(f"{name}_{j}" for j in range(nwords))  # a tuple unpack if > 1
        return [f"{names} = LD(xa, {idx})"]

    def relu_store(name: str, idx: str) -> list[str]:
        ws = ", ".join(f"RW({name}_{j})" for j in range(nwords))
        return [f"ST(ya, {idx}, {ws})"]

    def indent(lines: list[str], n: int) -> str:
        return "\n".join(" " * n + ln for ln in lines)

    if key.flat:
        return _flat_source(key, nwords, bits, elems, load, relu_store, indent)
    tile: list[str] = []
    for k in range(u):
        tile += load(f"a{k}", "b" if k == 0 else f"b + {k} * bs")
    for k in range(u):
        tile += relu_store(f"a{k}", "b" if k == 0 else f"b + {k} * bs")
    rem = load("c", "r") + relu_store("c", "r")
    if elems > 1:
        tail_lines = [
            f"e = nvec * {elems} + rot * bs + tid",
            "if e < n:",
            "    STE(ya, e, RW(LDE(xa, e)))",
        ]
    else:
        tail_lines = []

    body = f"""\
    tid = cuda.threadIdx.x
    bid = cuda.blockIdx.x
    nb = cuda.gridDim.x
    bs = cuda.blockDim.x
    t = bid
    while t < ntiles:
        b = t * bs * {u} + tid
{indent(tile, 8)}
        t += nb
    rot = bid - shift  # blocks that did one tile fewer start the leftovers
    if rot < 0:
        rot += nb
    r = ntiles * bs * {u} + rot * bs + tid
    while r < nvec:
{indent(rem, 8)}
        r += nb * bs
{indent(tail_lines, 4)}"""
    comment = [
        "n elements; nvec = n // E whole vectors; ntiles = nvec // (blockDim * U) whole tiles;",
        "shift = ntiles % gridDim. All precomputed by the launcher: no divisions on the device.",
    ]
    return _module(key, nwords, bits, comment, body)


def _module(key: CompileKey, nwords: int, bits: int, comment: list[str], body: str) -> str:
    """A generated module: the header, `relu_kernel` (its comment, the two global addresses,
    then `body`, already indented) and `build()`. Every kernel form has the same signature
    (a form ignores what it does not use), so one launcher drives them all."""
    lines = "\n".join(f"    # {c}" for c in comment)
    return (
        _header(key, nwords, bits)
        + f'''

def relu_kernel(x, y, n, nvec, ntiles, shift):
{lines}
    xa = TO_GLOBAL(x)
    ya = TO_GLOBAL(y)
{body}


def build():
    """The launchable kernel (compiles on first use, cached on disk by Numba)."""
    return cuda.jit(SIGNATURE, cache=True, **jit_options(LAUNCH_BOUNDS))(relu_kernel)
'''
    )


def _header(key: CompileKey, nwords: int, bits: int) -> str:
    return f'''"""Generated by sweeper_kernels.source for {key!r}. Do not edit."""

from numba import cuda

from sweeper_kernels.intrinsics import (
    element_load,
    element_store,
    jit_options,
    relu_word,
    to_global,
    vector_load,
    vector_store,
)

LD = vector_load({nwords}, {key.load_hint!r})
ST = vector_store({nwords}, {key.store_hint!r})
LDE = element_load({bits}, {key.load_hint!r})
STE = element_store({bits}, {key.store_hint!r})
RW = relu_word({key.dtype!r}{", 'max'" if key.relu_form == "max" else ""})
TO_GLOBAL = to_global()
SIGNATURE = "void(int64, int64, int64, int64, int64, int64)"
LAUNCH_BOUNDS = {(key.block,) if key.block else None}
''' + (
        "\nfrom sweeper_kernels.intrinsics import index32\n\nMAD32, LT32 = index32()\n"
        if key.index32
        else ""
    )


def _flat_source(key, nwords, bits, elems, load, relu_store, indent) -> str:
    """The flat form: thread i of the grid does vector i (i < nvec), or tail element i - nvec;
    no loop, so a small call pays for nothing but its one access. Same signature as the tiled
    form (ntiles and shift are unused) so one launcher drives both."""
    if key.unroll > 1:
        return _flat_unrolled_source(key, nwords, bits, elems, load, relu_store, indent)
    access = load("a0", "i") + relu_store("a0", "i")
    i32 = key.index32
    bs = str(key.block) if key.block else "cuda.blockDim.x"
    first = (
        f"MAD32(cuda.blockIdx.x, {bs}, cuda.threadIdx.x)"
        if i32
        else f"cuda.blockIdx.x * {bs} + cuda.threadIdx.x"
    )
    tail = ""
    if elems > 1:
        tail = f"""
    else:
        e = nvec * {elems} + (i - nvec)
        if e < n:
            STE(ya, e, RW(LDE(xa, e)))"""
    check = "LT32(i, nvec)" if i32 else "i < nvec"
    body = f"""\
    i = {first}
    if {check}:
{indent(access, 8)}{tail}"""
    comment = [f"one vector per thread: the launcher starts nvec + (n % E) threads, E = {elems}"]
    return _module(key, nwords, bits, comment, body)


def _flat_unrolled_source(key, nwords, bits, elems, load, relu_store, indent) -> str:
    """The flat form with U = unroll > 1 vectors per thread and no loop: block b covers the
    tile of U * blockDim slots from b * U * blockDim, thread t takes slots t, t + blockDim, ...
    (coalesced per k, the shape of torch's vectorized elementwise kernel). Slot v < nvec is
    vector v; nvec <= v < nvec + n % E is tail element v - nvec. Every block but the last takes
    the check-free path. The U = 1 form above is this with one slot."""
    u = key.unroll
    i32 = key.index32

    def at(k: int) -> str:  # slot k of this thread
        return "b" if k == 0 else f"MAD32({k}, bs, b)" if i32 else f"b + {k} * bs"

    def below_nvec(v: str) -> str:
        return f"LT32({v}, nvec)" if i32 else f"{v} < nvec"

    if key.block:  # compiled in: the tile and the slot offsets are constants
        first = f"MAD32(cuda.blockIdx.x, {key.block * u}, cuda.threadIdx.x)"
    elif i32:
        first = f"MAD32(cuda.blockIdx.x, bs * {u}, cuda.threadIdx.x)"
    else:
        first = f"cuda.blockIdx.x * bs * {u} + cuda.threadIdx.x"
    fast: list[str] = []
    if key.block:  # slot k's address is slot 0's plus a constant: one offset for all U
        for k in range(u):
            fast += [ln.replace("(xa, ", f"(xa + {k * key.block * key.vec_bytes}, " if k else "(xa, ")
                     for ln in load(f"a{k}", "b")]  # fmt: skip
        for k in range(u):
            fast += [ln.replace("(ya, ", f"(ya + {k * key.block * key.vec_bytes}, " if k else "(ya, ")
                     for ln in relu_store(f"a{k}", "b")]  # fmt: skip
    else:
        for k in range(u):
            fast += load(f"a{k}", at(k))
        for k in range(u):
            fast += relu_store(f"a{k}", at(k))
    slow: list[str] = []
    for k in range(u):
        slow += [f"v = {at(k)}", f"if {below_nvec('v')}:"]
        slow += ["    " + ln for ln in load("c", "v") + relu_store("c", "v")]
        if elems > 1:
            slow += [
                "else:",
                f"    e = nvec * {elems} + (v - nvec)",
                "    if e < n:",
                "        STE(ya, e, RW(LDE(xa, e)))",
            ]
    body = f"""\
    bs = {key.block or "cuda.blockDim.x"}
    b = {first}
    if {below_nvec(at(u - 1))}:
{indent(fast, 8)}
    else:
{indent(slow, 8)}"""
    comment = [
        f"{u} slots per thread, no loop: the launcher starts ceil((nvec + n % E) / {u}) threads",
        f"rounded up to whole blocks, E = {elems}",
    ]
    return _module(key, nwords, bits, comment, body)


# The modules whose code decides what a kernel computes and which PTX it emits.
KERNEL_MODULES = ("source.py", "intrinsics.py", "bitmath.py", "hints.py")

# Fingerprints of earlier kernel code that compiles to the same PTX as this code, byte for byte,
# for every compile key but those it names (names aside; `python tools/behaviour_snapshot.py`
# shows it): fingerprint -> (CompileKey attribute, value) pairs of the keys whose code differs.
# Ids made under them name the same kernels: Variant.parse accepts them and a run made under
# one can be resumed and compared.
EQUIVALENT_FINGERPRINTS: dict[str, tuple[tuple[str, object], ...]] = {
    "53605ce348d7c9a6a31e98125a56e97f7e6d15fa6a94b678c2495389a6dff12b": (),
    # this code fingerprinted from ast.dump's text, which differs by Python version: 3.10-3.11,
    # 3.12 and 3.13
    "cbd6dd9a8d9740c8e36280a03198452f408f4ccec0a535278e7e4bee7bf41ba5": (),
    "96f03c95b85f24d8c51c3d4ed758a17280b5b62b84201f1c7aac5cb3f6e75014": (),
    "1aff540746a8dbc9bb9b2b6ab36f7fb9fd8f64a545d362dc1b221bbe8b8737b5": (),
    # before the "fixed32" form: every other key's kernel code is unchanged by it
    "9ea6a15839a2ed8eb905398ba9445d19da45541590ea323b12f4345b26145ab3": (),
    # fixed32 at fp32 with the integer ReLU, before max.f32
    "9b34a445edb6c6ddb5c62ce454b8a2f3b810c44f6807a5dc5c323bdcfa1e8bf9": (("relu_form", "max"),),
}


def equivalent_fingerprints(key: CompileKey) -> tuple[str, ...]:
    """The earlier fingerprints under which `key` compiled to the code it compiles to now."""
    return tuple(
        fp
        for fp, differs in EQUIVALENT_FINGERPRINTS.items()
        if not (differs and all(getattr(key, a) == v for a, v in differs))
    )


def _dump(node) -> str:
    """An AST node as text that is the same on every Python version: its type, then each field
    that holds something, by name. (`ast.dump`'s text is not: 3.12 added `type_params` to every
    function, 3.13 leaves empty fields out, so the same code would get three fingerprints.)"""
    if isinstance(node, ast.AST):
        fields = (
            f"{name}={_dump(value)}"
            for name in node._fields
            if (value := getattr(node, name, None)) is not None
            and not (isinstance(value, list) and not value)
        )
        return f"{type(node).__name__}({', '.join(fields)})"
    if isinstance(node, list):
        return "[" + ", ".join(_dump(x) for x in node) + "]"
    return repr(node)


def _definitions(tree: ast.Module) -> list[str]:
    """Each top-level definition of a module as text (_dump) without docstrings, comments,
    positions or imports: what the code does, not how the file is laid out."""
    out = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the module docstring
        for sub in ast.walk(node):
            body = getattr(sub, "body", None)
            if (
                isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                sub.body = body[1:] or [ast.Pass()]
        out.append(_dump(node))
    return out


@functools.cache
def source_fingerprint() -> str:
    """sha256 over the code of KERNEL_MODULES: their top-level definitions, sorted, without
    docstrings, comments, formatting or imports, so moving or documenting code leaves it alone
    while any change to what the code does changes it. Part of every variant id and
    compile-cache name."""
    here = Path(__file__).resolve().parent
    defs = sorted(
        d for name in KERNEL_MODULES for d in _definitions(ast.parse((here / name).read_text()))
    )
    return hashlib.sha256("\n".join(defs).encode()).hexdigest()
