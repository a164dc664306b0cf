"""Why verify reads an exported header slower than its Numba twin, on a GPU.

`sweeper verify` of hot-6's policy reads the header's fp32 `launch_relu` 1.5-2.3% slower than
the Numba kernel it dispatches to at 16-37 MiB, hot, while `lab/tools/hot_slots.py --export` read
them within 0.3% of each other. Both time the same pairing (GpuExecutor.pair_swapped). This
probe times it in one process in the steps that tell the two apart. Its configs are the ones
hot-6's header dispatches to at the sizes it times; that header is in commit f96b83b
(`git show f96b83b:results/h200/hot-6/relu_policy.cuh > hot6.cuh`), and every run recorded in
lab/h200/verify-gap timed it:

    python lab/tools/export_gap.py in-process --header hot6.cuh --out in_process.json
    python lab/tools/export_gap.py drift --header hot6.cuh --out drift.json
    python lab/tools/export_gap.py trigger --header hot6.cuh --out trigger.json
    python lab/tools/export_gap.py sides --header hot6.cuh --out sides.json
    python lab/tools/export_gap.py cause --header hot6.cuh --out cause.json
    python lab/tools/export_gap.py sizes --header hot6.cuh --out sizes.json

`in-process`: at 20.6, 24.4 and 26.3 MiB, fp32 `v8-u4-ld.nc-st.cs-b128-flat32` (hot-6's band
config there; hot-6 is in commit f96b83b), the header against its twin and against torch, 3
pairings per size, as hot_slots does (`tool`), with the persisting-L2 reset a cell and verify
make before each (`tool+reset`), through verify's own timing pass (`verify_pass`, twice), as
hot_slots does again, and after verify's bit-exactness cases (`after_bits:`); then the same
pairings at 8 buffer placements (a spacer of k x 2 MiB + 1 byte allocated first), at 10.6 MiB
(the Numba config and the header against torch, where hot-6 is at parity) and 24.4 MiB.

`drift`: at 24.4 MiB, the header against its twin, pairing after pairing: 40 on one set of
buffers in a fresh process, 10 on new buffers, 15 after 12 untimed allocate/release cycles of
other sizes (what verify's size loop does), 15 after Numba's pending frees are flushed, 15
after 15 s idle, 15 with a second executor.

`trigger`: at 24.4 MiB, 10 pairings on the first executor after each step: a fresh process,
gc.collect(), a new Numba stream, a new Numba kernel loaded and launched, a second executor
built; then 10 on the second executor and 10 on the first again.

`sides`: at 24.4 MiB, 6 pairings each of the header against its twin and the twin against
torch, each way round, and of the header and the twin against themselves, on the first
executor, on a second and on the first again, each with side a first in both halves and in
the first half only: whether the flip follows the header or a
pairing's first side, and whether it moves a Numba config's ratio to torch as a run's cells
see it.

`sizes`: the Numba config against itself and against torch at 1-96 MiB (hot; after-write
at 37.5 and 48 MiB), before the flip and after it, with side a first in both halves (the
timer of runs before harness.halves_first_side) and in the first half only (today's).

`cause`: at 24.4 MiB, 6 pairings of the header against its twin on the first executor after
each use a second executor's first pairing makes, one at a time: a graph launched on a second
stream, a second Bench (timers.Bench) built, its blocking kernel held and released, its flush
buffer written, its L2 normalizer run, its calibration, a hot pairing on it; then a second
executor's buffers made at the same size, its outputs poisoned, its outputs checked, a
pairing of the Numba config against itself on it, and last a pairing on a third executor.

Ratios are a pairing's side B time over side A time (the header is side A): `exp/numba` is
the header's time over its twin's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

CONFIG = "v8-u4-ld.nc-st.cs-b128-flat32"  # fp32 at 15-38 MiB in hot-6's policy (commit f96b83b)
PARITY_CONFIG = "v16-u2-ld.lu-st.cg-b128-flat"  # fp32 at 8.5-11.4 MiB
IN_PROCESS_BYTES = (21626880, 25559040, 27525120)  # hot-6's plan sizes, working set
PARITY_BYTES, BAND_BYTES = 11099776, 25559040


class Probe:
    def __init__(self, header: str):
        from sweeper_kernels import Variant, get_launcher

        from sweeper.export.native import build_exported_launchers

        self.launchers = build_exported_launchers(header)
        self.fn = self.launchers["fp32"]
        self.ex = self.new_executor()
        self.numba = {c: get_launcher(Variant.parse(f"fp32-{c}")) for c in (CONFIG, PARITY_CONFIG)}

    @staticmethod
    def new_executor():
        """An executor that puts the candidate first in both halves, as in the runs these
        probes study (`sides` and `sizes` time both orders)."""
        from sweeper.run.executor import GpuExecutor

        ex = GpuExecutor()
        ex.halves_first = ("a", "a")
        return ex

    def sides(self, n: int, config: str = CONFIG):
        from sweeper.run.verify import exported_on

        ex, launcher = self.ex, self.numba[config]
        b = ex.buffers("fp32", n)
        return b, {
            "export": exported_on(self.fn, b, n),
            "numba": lambda side: ex.candidate_launch(launcher, b, n, side),
            "torch": lambda side: ex.baseline_launch("fp32", b, n, side),
        }

    def ratio(self, n: int, a: str, bside: str, config: str = CONFIG, mode: str = "hot") -> float:
        b, s = self.sides(n, config)
        r = self.ex.pair_swapped(mode, s[a], s[bside], b, ("fp32", n), self.ex.stopping, check=True)
        return float(r.timing.summary()["ratio"])

    def flip(self, n: int) -> None:
        """One pairing on a second executor, which leaves the process in the state the probes
        below found (`cause`); the first executor is kept."""

        first = self.ex
        self.ex = self.new_executor()
        self.ratio(n, "export", "numba")
        self.ex = first


def in_process(p: Probe) -> dict:
    from sweeper.export.verify import verify_bits
    from sweeper.run.verify import time_pass

    ns = [w // 8 for w in IN_PROCESS_BYTES]
    out = []

    def tool(tag, reset, reps=3):
        for n in ns:
            for rep in range(reps):
                if reset:
                    p.ex.bench.reset_persisting()
                vs_numba = 1 / p.ratio(n, "export", "numba")
                out.append(dict(tag=tag, n=n, rep=rep, vs_numba=vs_numba,
                                ratio=p.ratio(n, "export", "torch")))  # fmt: skip
            p.ex.release("fp32", n)

    def verify_pass(tag):
        rows = []
        time_pass(p.ex, p.launchers, lambda dt, n, cc, l2: (CONFIG, None), {"fp32": ns}, (9, 0),
                   p.ex.bench.l2_bytes, "hot", 1, rows, None)  # fmt: skip
        out.extend(dict(tag=tag, n=r["n"], rep=0, vs_numba=r["vs_numba"], ratio=r["ratio"])
                   for r in rows)  # fmt: skip

    tool("tool", False)
    tool("tool+reset", True)
    verify_pass("verify_pass")
    verify_pass("verify_pass")
    tool("tool", False)
    verify_bits(p.launchers, ("fp32",))
    tool("after_bits:tool", False)
    verify_pass("after_bits:verify_pass")
    tool("after_bits:tool+reset", True)

    from numba import cuda

    place = []
    for n, config, pairs in (
        (PARITY_BYTES // 8, PARITY_CONFIG, (("numba", "torch"), ("export", "torch"))),
        (BAND_BYTES // 8, CONFIG, (("export", "numba"), ("numba", "torch"))),
    ):
        for k in range(8):
            spacer = cuda.device_array(k * 2**21 + 1, dtype=np.uint8) if k else None
            b, _ = p.sides(n, config)
            for a, bside in pairs:
                for rep in range(2):
                    place.append(dict(n=n, k=k, side=f"{a}-{bside}", rep=rep,
                                      ratio=p.ratio(n, a, bside, config),
                                      xa=b.x_a.device_ctypes_pointer.value,
                                      ya=b.y_a.device_ctypes_pointer.value,
                                      xb=b.x_b.device_ctypes_pointer.value))  # fmt: skip
            p.ex.release("fp32", n)
            del spacer
    print(f"{'step':>24} {'ws MiB':>7} {'rep':>3} {'exp/numba':>9} {'vs torch':>8}")
    for r in out:
        print(f"{r['tag']:>24} {8 * r['n'] / 2**20:7.3f} {r['rep']:>3} {r['vs_numba']:9.3f} "
              f"{r['ratio']:8.3f}")  # fmt: skip
    print(f"{'ws MiB':>7} {'k':>2} {'pairing':>13} {'ratio':>6} {'y_a-x_a MiB':>11}")
    for r in place:
        print(f"{8 * r['n'] / 2**20:7.3f} {r['k']:>2} {r['side']:>13} {r['ratio']:6.3f} "
              f"{(r['ya'] - r['xa']) / 2**20:11.2f}")  # fmt: skip
    return {"in_process": out, "placement": place}


def drift(p: Probe) -> dict:
    from numba import cuda

    n = BAND_BYTES // 8
    t0 = time.perf_counter()
    log = []

    def pairings(tag, k):
        for i in range(k):
            log.append(dict(tag=tag, t=time.perf_counter() - t0, wall=time.time(), i=i,
                            exp_over_numba=1 / p.ratio(n, "export", "numba")))  # fmt: skip

    pairings("fresh process, one set of buffers", 40)
    p.ex.release("fp32", n)
    pairings("new buffers", 10)
    for i in range(12):  # size cycles as verify's size loop makes them, untimed
        p.ex.buffers("fp32", (16 + i) * 2**20 // 8)
        p.ex.release("fp32", (16 + i) * 2**20 // 8)
    pairings("after 12 alloc/free cycles", 15)
    p.ex.release("fp32", n)
    cuda.current_context().deallocations.clear()
    pairings("after pending frees flushed", 15)
    time.sleep(15)
    pairings("15 s idle later, same buffers", 15)
    p.ex.release("fp32", n)

    p.ex = p.new_executor()
    pairings("a second executor", 15)
    print(f"{'phase':>38} {'t s':>6} {'n':>3} {'median':>7} {'min':>6} {'max':>6}")
    for tag in dict.fromkeys(r["tag"] for r in log):
        g = [r for r in log if r["tag"] == tag]
        parts = [g[i : i + 10] for i in range(0, len(g), 10)] if len(g) == 40 else [g]
        for j, part in enumerate(parts):
            v = np.array([r["exp_over_numba"] for r in part])
            name = f"{tag} ({j * 10 + 1}-{j * 10 + 10})" if len(parts) > 1 else tag
            print(f"{name:>38} {part[0]['t']:6.1f} {len(part):>3} {np.median(v):7.3f} "
                  f"{v.min():6.3f} {v.max():6.3f}")  # fmt: skip
    return {"drift": log}


def _steps(p: Probe, log: list, width: int, k: int):
    """Print the step table's head; return pairings(tag): k pairings of the header against
    its twin at BAND_BYTES on p's executor, logged and printed as one line."""
    n = BAND_BYTES // 8
    print(f"{'step (pairings on the first executor)':>{width}} {'median':>7} {'min':>6} {'max':>6}")

    def pairings(tag: str) -> None:
        v = [1 / p.ratio(n, "export", "numba") for _ in range(k)]
        log.append(dict(tag=tag, exp_over_numba=v))
        print(f"{tag:>{width}} {np.median(v):7.3f} {min(v):6.3f} {max(v):6.3f}", flush=True)

    return pairings


def trigger(p: Probe) -> dict:
    """What in a second executor flips the pairing: the same pairings on the first executor
    after each step that building one takes."""
    import gc

    from numba import cuda

    log = []
    pairings = _steps(p, log, 44, 10)
    pairings("fresh process")
    gc.collect()
    pairings("after gc.collect()")
    stream = cuda.stream()
    pairings("after a new Numba stream")

    @cuda.jit
    def nothing(a):
        a[0] = 1

    a = cuda.device_array(1, dtype=np.int32)
    nothing[1, 1, stream](a)
    stream.synchronize()
    pairings("after a new Numba kernel, loaded and launched")
    first = p.ex
    p.ex = p.new_executor()
    p.ex = first
    pairings("after a second executor is built")
    p.ex = p.new_executor()
    pairings("on the second executor")
    p.ex = first
    pairings("on the first again")
    return {"trigger": log}


def sides(p: Probe) -> dict:
    """Whether the flip follows the header or the pairing's first side, and whether it moves
    the Numba config against torch: each way round, before and after a second executor, with
    side a first in both halves (the timer of the runs before harness.halves_first_side) and
    in the first half only (today's)."""
    from sweeper.stats import HALVES_FIRST

    n = BAND_BYTES // 8
    log = []
    orders = (
        ("export", "numba"),
        ("numba", "export"),
        ("numba", "torch"),
        ("torch", "numba"),
        ("export", "export"),
        ("numba", "numba"),
    )

    def pairings(tag, k=6):
        for firsts in (("a", "a"), HALVES_FIRST):
            p.ex.halves_first = firsts
            for a, b in orders:
                v = [p.ratio(n, a, b) for _ in range(k)]
                log.append(dict(tag=tag, halves_first=firsts, a=a, b=b, b_over_a=v))
                print(f"{tag:>26} {''.join(firsts):>6} {a + '-' + b:>13} {np.median(v):7.3f} "
                      f"{min(v):6.3f} {max(v):6.3f}", flush=True)  # fmt: skip

    print(f"{'executor':>26} {'firsts':>6} {'A-B':>13} {'B/A med':>7} {'min':>6} {'max':>6}")
    pairings("first, fresh process")
    first = p.ex
    p.ex = p.new_executor()
    pairings("second")
    p.ex = first
    pairings("first again")
    return {"sides": log}


SIZES_MIB = (1.0, 4.0, 10.59, 16.0, 24.37, 37.5, 48.0, 96.0)


def sizes(p: Probe) -> dict:
    """How far the flip moves a pairing by size and mode, and whether alternating the first
    side between the halves cancels it: the Numba config against itself and against torch at
    SIZES_MIB (fp32 working sets, hot; after-write at 37.5 and 48 MiB), side a first in both
    halves and in the first only, before the flip (against itself) and after it."""
    from sweeper.stats import HALVES_FIRST
    from sweeper.units import MiB

    log = []
    print(f"{'state':>7} {'mode':>11} {'ws MiB':>7} {'firsts':>6} {'A-B':>13} "
          f"{'B/A med':>7} {'min':>6} {'max':>6}")  # fmt: skip

    def pairings(state, mode, mib, firsts, a, b, k=4):
        n = int(mib * MiB) // 8 // 64 * 64
        p.ex.halves_first = firsts
        v = [p.ratio(n, a, b, mode=mode) for _ in range(k)]
        log.append(dict(state=state, mode=mode, ws_mib=mib, halves_first=firsts, a=a, b=b,
                        b_over_a=v))  # fmt: skip
        print(f"{state:>7} {mode:>11} {mib:7.2f} {''.join(firsts):>6} {a + '-' + b:>13} "
              f"{np.median(v):7.3f} {min(v):6.3f} {max(v):6.3f}", flush=True)  # fmt: skip

    cells = [("hot", m) for m in SIZES_MIB] + [("after-write", 37.5), ("after-write", 48.0)]
    for mode, mib in cells:
        pairings("before", mode, mib, ("a", "a"), "numba", "numba")
    p.flip(BAND_BYTES // 8)
    for mode, mib in cells:
        for firsts in (("a", "a"), HALVES_FIRST):
            pairings("after", mode, mib, firsts, "numba", "numba")
            pairings("after", mode, mib, firsts, "numba", "torch")
    return {"sizes": log}


def cause(p: Probe) -> dict:
    """Which first use on a second executor flips the pairing: 6 pairings of the header
    against its twin on the first executor after each step, in order; the state stays once
    flipped, so the first step after which they read slow is the one."""
    from numba import cuda
    from sweeper_kernels import Variant, get_launcher

    from sweeper.run.timers import Bench, Graph

    n = BAND_BYTES // 8
    log = []
    pairings = _steps(p, log, 56, 6)
    pairings("fresh process")
    s2 = cuda.stream()
    other = get_launcher(Variant.parse("fp32-v16-u1-ld.def-st.cs-b256-flat"))
    x = cuda.device_array(n, dtype=np.float32)
    y = cuda.device_array(n, dtype=np.float32)
    g = Graph(lambda st: other(x, y, n, st), 4, s2)
    g.launch()
    s2.synchronize()
    pairings("a graph of 4 calls launched on a second stream")
    g.close()
    bench = Bench()
    pairings("a second Bench built")
    bench.hold()
    bench.release_hold()
    pairings("its blocking kernel held and released")
    bench.flush()
    bench.sync()
    pairings("its flush buffer written")
    b2 = p.ex.buffers("fp32", n)
    norm = bench.normalizer(b2.all_arrays())
    if norm is not None:
        norm(bench.stream)
        bench.sync()
    pairings("its L2 normalizer run over the buffers")
    cal = bench.calibrate_calls(lambda st: other(x, y, n, st), p.ex.stopping)
    pairings(f"its calibration ({cal} calls per sample)")
    t = bench.time_pair_hot(
        lambda st: other(x, y, n, st), lambda st: other(x, y, n, st), p.ex.stopping
    )
    pairings(f"a hot pairing on it ({len(t.a_us)} samples a side)")
    ex2 = p.new_executor()
    b2 = ex2.buffers("fp32", n)
    ex2.bench.sync()
    pairings("a second executor's buffers made at this size")
    ex2._poison_all(b2.outputs("A"))
    ex2.bench.sync()
    pairings("its outputs poisoned")
    bad = ex2._mismatches_all(b2.outputs("A"), b2)
    pairings(f"its outputs checked ({bad} mismatches)")
    first = p.ex
    p.ex = ex2
    p.ratio(n, "numba", "numba")
    p.ex = first
    pairings("a pairing of the Numba config against itself on it")
    p.flip(n)
    pairings("one pairing on a third executor")
    return {"cause": log}


SUBCOMMANDS = {
    "in-process": in_process,
    "drift": drift,
    "trigger": trigger,
    "sides": sides,
    "cause": cause,
    "sizes": sizes,
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=tuple(SUBCOMMANDS))
    ap.add_argument(
        "--header",
        required=True,
        help="hot-6's relu_policy.cuh from commit f96b83b (the docstring)",
    )
    ap.add_argument("--out", default=None, help="write every pairing to this JSON file")
    ap.add_argument("--gc-off", action="store_true", help="Python's garbage collector disabled")
    args = ap.parse_args(argv)
    if args.gc_off:
        import gc

        gc.disable()
    p = Probe(args.header)
    doc = SUBCOMMANDS[args.what](p)
    if args.out:
        doc = {"header": args.header, "gc_off": args.gc_off, **doc}
        Path(args.out).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
