"""The steps of tools/export_gap.py in-process, as run for results/h200/verify-gap (in_process.json):
the same pairing in one process, with and without what verify
does around it."""
import sys, json
import numpy as np
from sweeper.export.verify import build_exported_launchers, _time_pass, verify_bits
from sweeper.run.executor import GpuExecutor
from sweeper.run.stats import Stopping
from sweeper_kernels import Variant, get_launcher

H = "results/h200/hot-6/relu_policy.cuh"
CFG = "v8-u4-ld.nc-st.cs-b128-flat32"
SIZES = [21626880 // 8, 25559040 // 8, 27525120 // 8]
launchers = build_exported_launchers(H)
fn = launchers["fp32"]
ex = GpuExecutor()
launcher = get_launcher(Variant.parse(f"fp32-{CFG}"))
out = []

def tool(tag, reset, reps=3):
    for n in SIZES:
        b = ex._bufs("fp32", n); key = ("fp32", n)
        def exported(side, b=b, n=n):
            x, y, _ = b.side(side)
            xp, yp = x.device_ctypes_pointer.value, y.device_ctypes_pointer.value
            return lambda s: fn(xp, yp, n, int(s.handle))
        numba = lambda side, b=b, n=n: ex._candidate_launch(launcher, b, n, side)
        torch = lambda side, b=b, n=n: ex._baseline_launch("fp32", b, n, side)
        for rep in range(reps):
            if reset:
                ex.bench.reset_persisting()
            r1 = ex._pair_swapped("hot", exported, numba, b, key, ex.stopping, check=True)
            r2 = ex._pair_swapped("hot", exported, torch, b, key, ex.stopping, check=True)
            out.append(dict(tag=tag, n=n, rep=rep, vs_numba=1 / r1.timing.summary()["ratio"],
                            ratio=r2.timing.summary()["ratio"]))
        ex.release("fp32", n)

def verifylike(tag):
    rows = []
    _time_pass(ex, launchers, lambda dt, n, cc, l2: (CFG, None), {"fp32": SIZES}, (9, 0),
               ex.bench.l2_bytes, "hot", 1, rows, None)
    for r in rows:
        out.append(dict(tag=tag, n=r["n"], rep=0, vs_numba=r["vs_numba"], ratio=r["ratio"]))

tool("tool", False)
tool("tool+reset", True)
verifylike("verify_pass")
verifylike("verify_pass")
tool("tool", False)
verify_bits(launchers, ("fp32",))
tool("after_bits:tool", False)
verifylike("after_bits:verify_pass")
tool("after_bits:tool+reset", True)
# placement: the same pairings on buffers allocated behind a spacer of k x 2 MiB
from numba import cuda
place = []
for n, pairs in ((11099776 // 8, ("mixed", "export-torch")), (25559040 // 8, ("export-numba", "mixed"))):
    for k in range(8):
        spacer = cuda.device_array(k * 2**21 + 1, dtype=np.uint8) if k else None
        b = ex._bufs("fp32", n); key = ("fp32", n)
        cfg = CFG if n > 2**21 else "v16-u2-ld.lu-st.cg-b128-flat"
        lnch = get_launcher(Variant.parse(f"fp32-{cfg}"))
        def exported(side, b=b, n=n):
            x, y, _ = b.side(side)
            xp, yp = x.device_ctypes_pointer.value, y.device_ctypes_pointer.value
            return lambda s: fn(xp, yp, n, int(s.handle))
        numba = lambda side, b=b, n=n, lnch=lnch: ex._candidate_launch(lnch, b, n, side)
        torch = lambda side, b=b, n=n: ex._baseline_launch("fp32", b, n, side)
        sides = {"mixed": (numba, torch), "export-torch": (exported, torch), "export-numba": (exported, numba)}
        for name in pairs:
            for rep in range(2):
                r = ex._pair_swapped("hot", *sides[name], b, key, ex.stopping, check=True)
                place.append(dict(n=n, k=k, side=name, rep=rep, ratio=r.timing.summary()["ratio"],
                                  xa=b.x_a.device_ctypes_pointer.value, xb=b.x_b.device_ctypes_pointer.value,
                                  ya=b.y_a.device_ctypes_pointer.value, yb=b.y_b.device_ctypes_pointer.value))
        ex.release("fp32", n)
        del spacer
json.dump({"bisect": out, "placement": place}, open(sys.argv[1], "w"), indent=1)
print(f"{'ws MiB':>7} {'k':>2} {'side':>12} {'ratio':>6}   x_a/MiB  (y_a-x_a)/MiB (x_b-x_a)/MiB")
for r in place:
    if r["rep"] == 0:
        print(f"{8*r['n']/2**20:7.3f} {r['k']:>2} {r['side']:>12} {r['ratio']:6.3f}   {r['xa']/2**20:9.1f} {(r['ya']-r['xa'])/2**20:9.2f} {(r['xb']-r['xa'])/2**20:9.2f}")
print(f"{'step':>24} {'ws MiB':>7} {'rep':>3} {'exp/numba':>9} {'vs torch':>8}")
for r in out:
    print(f"{r['tag']:>24} {8*r['n']/2**20:7.3f} {r['rep']:>3} {r['vs_numba']:9.3f} {r['ratio']:8.3f}")
