"""Ratio to torch (clamp_min, fp32, hot) of the fp32 ReLU forms of forms.cu and of three Numba
kernels, at the plan's five fp32 sizes in 8-15 MiB, all with torch's launch (128 threads,
2 x 16 B per thread, one block per 1024 floats):

  nb-floor   the grid's floor config, v16-u2-ld.def-st.def-b128-flat32 (sweeper_kernels)
  nb-fixed   v16-u2-ld.def-st.def-b128-fixed32: the same with the block size compiled in
             (a literal, and launch bounds of 128 threads), the second vector's address the
             first's plus a constant
  nb-cbtile  nb-fixed with one check per block (the block's tile whole or not)
  nb-fixednc nb-fixed with non-coherent loads (v16-u2-ld.nc-st.def-b128-fixed32)
  nb-offmax  nb-fixed with the ReLU as max.f32 (one FMNMX per word, as nvcc makes of torch's
             `x > 0 ? x : 0`); first checked bit-identical to the integer maths over all 2**32
             fp32 words
  nb-ncmax   nb-offmax with non-coherent loads: torch's kernel's instructions

Each kernel and torch are CUDA graphs of CALLS calls; every round times, per kernel in a
shuffled order, torch, kernel, kernel, torch (ABBA) and keeps base/kernel; the ratio is the
median over ROUNDS rounds. Outputs checked against torch.relu. Two passes, other orders.
Usage (GPU): python3 lab/h200/floor-form/forms.py > table.txt
"""

import random
import statistics
from pathlib import Path

import cupy as cp
import numpy as np
import torch
from numba import cuda
from sweeper_kernels.build import get_kernel
from sweeper_kernels.launch import launch_shape
from sweeper_kernels.variants import Variant

# working-set bytes (2 * n * 4): the plan's fp32 sizes in 8-15 MiB and those where the fixed32
# floor's export lost to torch in both verify passes (lab/h200/floor-fp32)
SIZES = [8388608, 8879840, 9018560, 11099776, 12487232, 13007520, 13874720, 15728640]
CALLS, ROUNDS, BS = 20, 30, 128
HERE = Path(__file__).parent
CU = [
    "relu_tl",
    "relu_tlint",
    "relu_hdr",
    "relu_cb",
    "relu_cbnc",
    "relu_cboff",
    "relu_cboffmax",
    "relu_cbncmax",
]

NB_HEAD = """
from numba import cuda
from sweeper_kernels.intrinsics import vector_load, vector_store, relu_word, to_global, index32
LD = vector_load(4, "default")
ST = vector_store(4, "default")
RW = relu_word("fp32")
TO_GLOBAL = to_global()
MAD32, LT32 = index32()
"""
NB_FAST = """
        a0_0, a0_1, a0_2, a0_3 = LD(xa, b)
        a1_0, a1_1, a1_2, a1_3 = LD(xa, MAD32(1, 128, b))
        ST(ya, b, RW(a0_0), RW(a0_1), RW(a0_2), RW(a0_3))
        ST(ya, MAD32(1, 128, b), RW(a1_0), RW(a1_1), RW(a1_2), RW(a1_3))
"""
NB_SLOW = """
        for k in range(2):
            v = MAD32(k, 128, b)
            if LT32(v, nvec):
                c_0, c_1, c_2, c_3 = LD(xa, v)
                ST(ya, v, RW(c_0), RW(c_1), RW(c_2), RW(c_3))
"""
NB_OFF = (
    NB_HEAD
    + """
def k(x, y, n, nvec, ntiles, shift):
    xa = TO_GLOBAL(x)
    ya = TO_GLOBAL(y)
    b = MAD32(cuda.blockIdx.x, 256, cuda.threadIdx.x)
    if LT32(MAD32(1, 128, b), nvec):
        a0_0, a0_1, a0_2, a0_3 = LD(xa, b)
        a1_0, a1_1, a1_2, a1_3 = LD(xa + 2048, b)
        ST(ya, b, RW(a0_0), RW(a0_1), RW(a0_2), RW(a0_3))
        ST(ya + 2048, b, RW(a1_0), RW(a1_1), RW(a1_2), RW(a1_3))
    else:"""
    + NB_SLOW
)


def _rmax():
    """max.f32(w, 0) on a word's bits: fp32 ReLU as torch's kernel computes it."""
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def rmax(typingctx, w):
        def codegen(context, builder, signature, args):
            f32 = ir.FloatType()
            fn = ir.FunctionType(f32, [f32])
            asm = ir.InlineAsm(fn, "max.f32 $0, $1, 0f00000000;", "=f,f")
            out = builder.call(asm, [builder.bitcast(args[0], f32)])
            return builder.bitcast(out, ir.IntType(32))

        return types.uint32(types.uint32), codegen

    return rmax


RMAX = _rmax()


def max_mismatches() -> int:
    """Words w of all 2**32 where max.f32(w, 0) and the integer ReLU differ."""
    from numba import uint32
    from sweeper_kernels.intrinsics import relu_word

    rw = relu_word("fp32")

    @cuda.jit
    def count(out):
        i = cuda.grid(1)
        stride = cuda.gridsize(1)
        while i < 4294967296:
            w = uint32(i)
            if RMAX(w) != rw(w):
                cuda.atomic.add(out, 0, 1)
            i += stride

    out = cuda.to_device(np.zeros(1, dtype=np.int64))
    count[132 * 16, 256](out)
    return int(out.copy_to_host()[0])


def numba_kernel(src: str):
    ns: dict = {"RMAX": RMAX}
    exec(compile(src, "<nb>", "exec"), ns)
    return cuda.jit("void(int64, int64, int64, int64, int64, int64)", launch_bounds=(BS,))(ns["k"])


def launcher(name, x, y, n, blocks, shape, cu, nbk):
    """`go(stream)`: one call of kernel `name` (or torch's) from x into y."""
    if name == "torch":
        return lambda s: torch.clamp_min(x, 0, out=y)
    if name in cu:
        f = cu[name]
        args = (np.uint64(x.data_ptr()), np.uint64(y.data_ptr()), np.uint64(n))

        def go_cu(s):
            with cp.cuda.ExternalStream(s.cuda_stream):
                f((blocks,), (BS,), args)

        return go_cu
    kern = nbk[name]
    args = (x.data_ptr(), y.data_ptr(), n, shape.nvec, shape.ntiles, shape.shift)

    def go_nb(s):
        kern[shape.blocks, shape.threads, cuda.external_stream(s.cuda_stream)](*args)

    return go_nb


def main():
    dev = torch.device("cuda")
    mod = cp.RawModule(code=(HERE / "forms.cu").read_text(), options=("-std=c++17",))
    cu = {name: mod.get_function(name) for name in CU}
    print(f"max.f32 vs integer ReLU, words that differ of 2**32: {max_mismatches()}")
    floor = Variant.parse("fp32-v16-u2-ld.def-st.def-b128-flat32")
    fixed = Variant.parse("fp32-v16-u2-ld.def-st.def-b128-fixed32")
    nbk = {
        "nb-floor": get_kernel(floor),
        "nb-fixed": get_kernel(fixed),
        "nb-fixednc": get_kernel(Variant.parse("fp32-v16-u2-ld.nc-st.def-b128-fixed32")),
        "nb-offmax": numba_kernel(NB_OFF.replace("RW(", "RMAX(")),
        "nb-ncmax": numba_kernel(
            NB_OFF.replace("RW(", "RMAX(").replace(
                'vector_load(4, "default")', 'vector_load(4, "nc")'
            )
        ),
    }
    props = torch.cuda.get_device_properties(0)
    rows = []
    for p in (1, 2):
        rng = random.Random(p)
        for ws in SIZES:
            n = ws // 8
            x = torch.randn(n, device=dev)
            y = torch.empty_like(x)
            ref = torch.relu(x)
            blocks = -(-n // (BS * 8))
            shape = launch_shape(floor, n, props.multi_processor_count, 2048)

            names = CU + list(nbk)
            graphs = {}
            for name in ["torch"] + names:
                go = launcher(name, x, y, n, blocks, shape, cu, nbk)
                s = torch.cuda.Stream()
                with torch.cuda.stream(s):
                    y.zero_()
                    go(s)
                torch.cuda.synchronize()
                if name != "torch":
                    assert torch.equal(y, ref), f"{name} at n={n}: output differs from torch.relu"
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    cs = torch.cuda.current_stream()
                    for _ in range(CALLS):
                        go(cs)
                graphs[name] = g
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(10)]
            ratios = {name: [] for name in names}
            for _ in range(3):
                graphs["torch"].replay()
            for _ in range(ROUNDS):
                order = names[:]
                rng.shuffle(order)
                for name in order:
                    seq = ["torch", name, name, "torch"]
                    for i, what in enumerate(seq):
                        ev[2 * i].record()
                        graphs[what].replay()
                        ev[2 * i + 1].record()
                    torch.cuda.synchronize()
                    t = [ev[2 * i].elapsed_time(ev[2 * i + 1]) for i in range(4)]
                    ratios[name].append((t[0] + t[3]) / (t[1] + t[2]))
            for name in names:
                rows.append((p, ws, name, statistics.median(ratios[name])))
    import pandas as pd

    df = pd.DataFrame(rows, columns=["p", "ws_bytes", "kernel", "ratio"])
    pd.set_option("display.width", 220)
    print(
        df.pivot_table(index="ws_bytes", columns=["kernel", "p"], values="ratio")
        .round(3)
        .to_string()
    )
    print(df.groupby(["kernel", "p"]).ratio.median().round(4).unstack().to_string())


if __name__ == "__main__":
    main()
