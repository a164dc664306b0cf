"""Global loads/stores with a PTX cache operator, as inline-PTX Numba intrinsics.

Every global memory access of the ReLU kernels goes through these, so the PTX carries exactly
the instruction we asked for (`ld.global.cs.v4.u32`, `st.global.cs.v4.u32`, ...). Numba's own
`cuda.ldcs`/`cuda.stcs` are scalar only and their overloads want a current device at compile
time; these intrinsics don't, so PTX compiles in CI without a GPU.

Addresses are plain int64 byte addresses (the launcher passes data pointers, not arrays), so a
kernel's signature is `(int64, int64, int64)` and a launch is cheap to pack and graph-capture.
Each access takes `(base, index)` and scales the index itself: the kernel source never does
pointer arithmetic, which is what lets the CUDA simulator run the same source with arrays.

Shapes:
  * "main" accesses move one vector of 1, 2 or 4 uint32 words (4, 8, 16 bytes) and use the
    `.u32` type: `ld.global{hint}{.v2|.v4}.u32`.
  * "element" accesses (the tail that is not a whole vector) move one element with the `.b8`,
    `.b16` or `.b32` type into/out of a 32-bit register (zero-extended on load). The different
    type suffix is deliberate: PTX checks can tell main-loop loads from tail loads.

Loads and stores are emitted as side-effecting asm (stores also clobber memory), so LLVM keeps
them in source order and never merges or drops one: the unrolled kernel source maps 1:1 onto
PTX instructions. ptxas still schedules them freely.

The hint -> PTX qualifier (and L2 cache policy) table is kernels/hints.py.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from sweeper_kernels import hints
from sweeper_kernels.bitmath import DTYPE_LANES, FP32_INF_BITS, relu_words, swar_constants
from sweeper_kernels.hints import createpolicy


def simulator() -> bool:
    """True when numba.cuda is the CUDA simulator (NUMBA_ENABLE_CUDASIM=1) in this process."""
    from numba.cuda.core import config

    return bool(config.ENABLE_CUDASIM)


def _with_policy(hint: str, ld: str) -> str:
    """Wrap a load in a scope that creates its L2 policy (one line per PTX statement)."""
    if hints.get("load", hint).policy is None:
        return ld
    ld = ld[:-1] + ", pol;"  # the policy is the load's last operand
    return f"{{\n.reg .b64 pol;\n{createpolicy(hint, 'pol')}\n{ld}\n}}"


def load_asm(nwords: int, hint: str) -> str:
    """PTX text of a main (vector) load of `nwords` uint32 words; operand $n is the address."""
    q = hints.get("load", hint).qualifier
    if nwords == 1:
        return _with_policy(hint, f"ld.global{q}.u32 $0, [$1];")
    regs = ", ".join(f"${i}" for i in range(nwords))
    return _with_policy(hint, f"ld.global{q}.v{nwords}.u32 {{{regs}}}, [${nwords}];")


def store_asm(nwords: int, hint: str) -> str:
    """PTX text of a main (vector) store; $0 is the address, $1.. the words."""
    q = hints.get("store", hint).qualifier
    if nwords == 1:
        return f"st.global{q}.u32 [$0], $1;"
    regs = ", ".join(f"${i + 1}" for i in range(nwords))
    return f"st.global{q}.v{nwords}.u32 [$0], {{{regs}}};"


def elem_load_asm(bits: int, hint: str) -> str:
    return _with_policy(hint, f"ld.global{hints.get('load', hint).qualifier}.b{bits} $0, [$1];")


def elem_store_asm(bits: int, hint: str) -> str:
    return f"st.global{hints.get('store', hint).qualifier}.b{bits} [$0], $1;"


# ---- simulator fallbacks: same (base, index) contract, plain numpy indexing -----------------


def _np(a: Any) -> np.ndarray:
    """The numpy array behind a simulator kernel argument."""
    while not isinstance(a, np.ndarray):
        a = a._ary if hasattr(a, "_ary") else a._item
    return a


class _SimAddress:
    """The simulator's global address: an array and a byte offset into it (a kernel adds
    constants to the address `to_global` gives, as a GPU kernel adds bytes)."""

    def __init__(self, array, offset: int = 0):
        self.array, self.offset = array, offset

    def __add__(self, nbytes):
        return _SimAddress(self.array, self.offset + int(nbytes))


def _sim_bytes(base, index, nbytes: int, what: str) -> np.ndarray:
    """The `nbytes` bytes at base + index * nbytes (raises where the GPU would go out of bounds)."""
    offset = 0
    if isinstance(base, _SimAddress):
        base, offset = base.array, base.offset
    raw = _np(base).view(np.uint8)
    i = offset + int(index) * nbytes
    if i < 0 or i + nbytes > raw.size:
        raise IndexError(f"{what} of bytes [{i}, {i + nbytes}) outside a {raw.size}-byte array")
    return raw[i : i + nbytes]


def _sim_load(nwords: int):
    def load(base, index):
        w = _sim_bytes(base, index, 4 * nwords, "vector load").view(np.uint32)
        return w[0] if nwords == 1 else tuple(w)

    return load


def _sim_store(nwords: int):
    def store(base, index, *words):
        dst = _sim_bytes(base, index, 4 * nwords, "vector store").view(np.uint32)
        dst[:] = np.array(words, dtype=np.uint32)

    return store


_UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32}


def _sim_elem_load(bits: int):
    def load(base, index):
        return np.uint32(_sim_bytes(base, index, bits // 8, "element load").view(_UINT[bits])[0])

    return load


def _sim_elem_store(bits: int):
    def store(base, index, value):
        dst = _sim_bytes(base, index, bits // 8, "element store").view(_UINT[bits])
        dst[0] = int(value) & ((1 << bits) - 1)

    return store


def _sim_to_global(a):
    return _SimAddress(a)


# ---- the real intrinsics ---------------------------------------------------------------------


def _address(builder, base, index, scale: int):
    """i64 base + index * scale, as an i8* (no bounds checks: the kernel guarantees them)."""
    from llvmlite import ir

    i64 = ir.IntType(64)
    off = builder.mul(index, ir.Constant(i64, scale))
    return builder.add(base, off)


@functools.cache
def _load_intrinsic(nwords: int, hint: str):
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    asm = load_asm(nwords, hint)
    ret = types.uint32 if nwords == 1 else types.UniTuple(types.uint32, nwords)

    @intrinsic
    def ld_words(typingctx, base, index):
        if not (isinstance(base, types.Integer) and isinstance(index, types.Integer)):
            return None
        sig = ret(types.int64, types.int64)

        def codegen(context, builder, signature, args):
            i32, i64 = ir.IntType(32), ir.IntType(64)
            addr = _address(builder, args[0], args[1], 4 * nwords)
            if nwords == 1:
                fnty = ir.FunctionType(i32, [i64])
                call = ir.InlineAsm(fnty, asm, "=r,l", side_effect=True)
                return builder.call(call, [addr])
            fnty = ir.FunctionType(ir.LiteralStructType([i32] * nwords), [i64])
            cons = ",".join(["=r"] * nwords + ["l"])
            res = builder.call(ir.InlineAsm(fnty, asm, cons, side_effect=True), [addr])
            vals = [builder.extract_value(res, k) for k in range(nwords)]
            return context.make_tuple(builder, ret, vals)

        return sig, codegen

    return ld_words


@functools.cache
def _store_intrinsic(nwords: int, hint: str):
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    asm = store_asm(nwords, hint)

    sig = types.void(types.int64, types.int64, *([types.uint32] * nwords))

    def codegen(context, builder, signature, args):
        i32, i64 = ir.IntType(32), ir.IntType(64)
        addr = _address(builder, args[0], args[1], 4 * nwords)
        fnty = ir.FunctionType(ir.VoidType(), [i64] + [i32] * nwords)
        cons = ",".join(["l"] + ["r"] * nwords + ["~{memory}"])
        builder.call(ir.InlineAsm(fnty, asm, cons, side_effect=True), [addr, *args[2:]])
        return context.get_dummy_value()

    def ok(*tys):
        return all(isinstance(t, types.Integer) for t in tys)

    # @intrinsic needs an explicit parameter list, one per word count.
    if nwords == 1:

        @intrinsic
        def st_words(typingctx, base, index, w0):
            return (sig, codegen) if ok(base, index, w0) else None

    elif nwords == 2:

        @intrinsic
        def st_words(typingctx, base, index, w0, w1):
            return (sig, codegen) if ok(base, index, w0, w1) else None

    else:

        @intrinsic
        def st_words(typingctx, base, index, w0, w1, w2, w3):
            return (sig, codegen) if ok(base, index, w0, w1, w2, w3) else None

    return st_words


@functools.cache
def _elem_load_intrinsic(bits: int, hint: str):
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    asm = elem_load_asm(bits, hint)

    @intrinsic
    def ld_elem(typingctx, base, index):
        if not (isinstance(base, types.Integer) and isinstance(index, types.Integer)):
            return None

        def codegen(context, builder, signature, args):
            i32, i64 = ir.IntType(32), ir.IntType(64)
            addr = _address(builder, args[0], args[1], bits // 8)
            fnty = ir.FunctionType(i32, [i64])
            return builder.call(ir.InlineAsm(fnty, asm, "=r,l", side_effect=True), [addr])

        return types.uint32(types.int64, types.int64), codegen

    return ld_elem


@functools.cache
def _elem_store_intrinsic(bits: int, hint: str):
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    asm = elem_store_asm(bits, hint)

    @intrinsic
    def st_elem(typingctx, base, index, value):
        if not all(isinstance(t, types.Integer) for t in (base, index, value)):
            return None

        def codegen(context, builder, signature, args):
            i32, i64 = ir.IntType(32), ir.IntType(64)
            addr = _address(builder, args[0], args[1], bits // 8)
            fnty = ir.FunctionType(ir.VoidType(), [i64, i32])
            call = ir.InlineAsm(fnty, asm, "l,r,~{memory}", side_effect=True)
            builder.call(call, [addr, args[2]])
            return context.get_dummy_value()

        return types.void(types.int64, types.int64, types.uint32), codegen

    return st_elem


@functools.cache
def _to_global_intrinsic():
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def to_global(typingctx, addr):
        if not isinstance(addr, types.Integer):
            return None

        def codegen(context, builder, signature, args):
            i64 = ir.IntType(64)
            fnty = ir.FunctionType(i64, [i64])
            asm = ir.InlineAsm(fnty, "cvta.to.global.u64 $0, $1;", "=l,l")
            return builder.call(asm, [args[0]])

        return types.int64(types.int64), codegen

    return to_global


@functools.cache
def _relu_word_intrinsic(dtype: str):
    """ReLU of one uint32 word of `dtype` lanes, as plain LLVM integer ops (see bitmath.py).

    An intrinsic rather than Python statements in the kernel: Numba's typing of a dozen
    np.uint32 expressions per word dominated compile time; one call per word keeps it small.
    """
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    bits = DTYPE_LANES[dtype][0]
    c = swar_constants(dtype)

    @intrinsic
    def relu_word(typingctx, w):
        if not isinstance(w, types.Integer):
            return None

        def codegen(context, builder, signature, args):
            i32 = ir.IntType(32)

            def k(v: int):
                return ir.Constant(i32, v)

            x = args[0]
            if bits == 32:
                below = builder.icmp_unsigned("<", builder.sub(x, k(1)), k(FP32_INF_BITS))
                return builder.select(below, x, k(0))
            m = builder.and_(x, k(c.mags))
            keep = builder.and_(builder.add(m, k(c.mags)), builder.not_(x))
            if c.big_add is not None:
                keep = builder.and_(keep, builder.not_(builder.add(m, k(c.big_add))))
            keep = builder.and_(keep, k(c.signs))
            mask = builder.mul(builder.lshr(keep, k(c.bits - 1)), k(c.lane_ones))
            return builder.and_(x, mask)

        return types.uint32(types.uint32), codegen

    return relu_word


@functools.cache
def _index32_intrinsics():
    """mad32(a, b, c) = a * b + c and lt32(a, b) = a < b on signed 32-bit integers (arguments
    of any integer type, truncated to 32 bits). Numba widens integer arithmetic to 64 bits;
    these keep a kernel's index maths 32-bit, as torch's `int` indexing is (the "flat32" grid).
    Pure LLVM ops (nsw: the launcher keeps every index below 2**31), so LLVM may fold and
    hoist them; a 32-bit index passed to a load or store is sign-extended there."""
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    i32 = ir.IntType(32)

    def as32(builder, v):
        w = v.type.width
        return v if w == 32 else builder.trunc(v, i32) if w > 32 else builder.sext(v, i32)

    @intrinsic
    def mad32(typingctx, a, b, c):
        if not all(isinstance(t, types.Integer) for t in (a, b, c)):
            return None

        def codegen(context, builder, signature, args):
            x, y, z = (as32(builder, v) for v in args)
            return builder.add(builder.mul(x, y, flags=["nsw"]), z, flags=["nsw"])

        return types.int32(*map(types.unliteral, (a, b, c))), codegen

    @intrinsic
    def lt32(typingctx, a, b):
        if not all(isinstance(t, types.Integer) for t in (a, b)):
            return None

        def codegen(context, builder, signature, args):
            x, y = (as32(builder, v) for v in args)
            return builder.icmp_signed("<", x, y)

        return types.boolean(*map(types.unliteral, (a, b))), codegen

    return mad32, lt32


def _sim_mad32(a, b, c):
    return int(a) * int(b) + int(c)


def _sim_lt32(a, b):
    return int(a) < int(b)


@functools.cache
def _relu_max_intrinsic():
    """fp32 ReLU of one uint32 word as `max.f32 w, 0` (one FMNMX in SASS, what nvcc makes of
    torch's kernel): the same bits as the integer formula for all 2**32 words (NaN and -0 give
    +0, denormals are kept; tests/gpu/test_kernels_gpu.py compares them on the GPU)."""
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def relu_max(typingctx, w):
        if not isinstance(w, types.Integer):
            return None

        def codegen(context, builder, signature, args):
            f32 = ir.FloatType()
            asm = ir.InlineAsm(ir.FunctionType(f32, [f32]), "max.f32 $0, $1, 0f00000000;", "=f,f")
            out = builder.call(asm, [builder.bitcast(args[0], f32)])
            return builder.bitcast(out, ir.IntType(32))

        return types.uint32(types.uint32), codegen

    return relu_max


RELU_FORMS = ("bits", "max")  # how a kernel computes ReLU: integer maths, or max.f32 (fp32 only)


def _sim_relu_word(dtype: str):
    def relu_word(w):
        return np.uint32(relu_words(dtype, w))

    return relu_word


# ---- what kernel modules import: the intrinsic, or its simulator fallback ---------------------


def vector_load(nwords: int, hint: str):
    return _sim_load(nwords) if simulator() else _load_intrinsic(nwords, hint)


def vector_store(nwords: int, hint: str):
    return _sim_store(nwords) if simulator() else _store_intrinsic(nwords, hint)


def element_load(bits: int, hint: str):
    return _sim_elem_load(bits) if simulator() else _elem_load_intrinsic(bits, hint)


def element_store(bits: int, hint: str):
    return _sim_elem_store(bits) if simulator() else _elem_store_intrinsic(bits, hint)


def relu_word(dtype: str, form: str = "bits"):
    """ReLU of one word of `dtype` lanes; form "max" (fp32 only) computes the same bits with
    max.f32, so the simulator runs both as the integer formula."""
    if form not in RELU_FORMS or (form == "max" and dtype != "fp32"):
        raise ValueError(f"no ReLU form {form!r} for {dtype}")
    if simulator():
        return _sim_relu_word(dtype)
    return _relu_max_intrinsic() if form == "max" else _relu_word_intrinsic(dtype)


def index32():
    """(mad32, lt32): 32-bit index maths (see _index32_intrinsics)."""
    return (_sim_mad32, _sim_lt32) if simulator() else _index32_intrinsics()


def jit_options(launch_bounds: tuple[int, ...] | None) -> dict:
    """`cuda.jit`'s keyword arguments for a kernel with these launch bounds (None: none);
    the simulator takes no launch bounds."""
    return {"launch_bounds": launch_bounds} if launch_bounds and not simulator() else {}


def to_global():
    """`cvta.to.global`: the launcher passes generic addresses; ld/st.global want global ones."""
    return _sim_to_global if simulator() else _to_global_intrinsic()
