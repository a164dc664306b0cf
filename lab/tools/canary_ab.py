"""The canary's cost to what is timed: 48 default-grid fp32 configs, hot, at 3/4 of the L2,
timed by one batched executor on the same buffers, in turn, `--reps` times:

- "off": no canary;
- "C": one call of the settle replay (the timed slot's graph) writes the canary's own
  buffer, counted after the segment's rounds;
- "C-early": "C" at a call of the replay's first half only;
- "noop": a call node of the settle replay set to the cell's own parameters and back (the
  node updates of "C" without its output);
- "own": "C" on a graph of CANARY_CALLS calls of its own, launched before the settle replay
  (the default);

and the classic executor once before and once after. Run from the repository root on a GPU machine:

    python3 lab/tools/canary_ab.py [--reps 3]

Per pass: the median candidate time, baseline time and ratio against the same executor's
passes without the canary (paired by config), the GPU's time in batches per cell (events
around each batch; `--frac 4` puts the size beyond the L2, where calls are long), the slot
test (a round's first candidate sample against its second, sweeper.analyze.position), the
cells not ok and the canary calls checked.
Executors of one process do not share buffers, so the classic lines compare buffers as well
as executors.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

from sweeper_kernels import GRIDS

from sweeper.analyze.position import segment_start
from sweeper.plan.gpus import detect
from sweeper.run.batched import BatchedExecutor
from sweeper.run.executor import GpuExecutor
from sweeper.stats import Stopping

MODES = ("off", "C", "C-early", "noop", "own")


class _Early:
    """The canary's position drawn from the first half of a settle replay's calls only."""

    def __init__(self, rng):
        self.rng = rng

    def integers(self, k):
        return self.rng.integers(max(1, k // 2))


class _Lab(BatchedExecutor):
    """A batched executor whose canary follows `mode` (MODES)."""

    def set_mode(self, mode: str) -> None:
        self.mode = mode
        self.canary = mode != "off"
        self.canary_graph = "own" if mode == "own" else "slot"
        self._rng = getattr(self, "_rng", self._canary_rng)
        self._canary_rng = _Early(self._rng) if mode == "C-early" else self._rng

    def _settle(self, batch, cell, hf, b, key, slot):
        """noop: the settle replay's call node set to the cell's own parameters and back."""
        name = f"slot-{hf.sa}"
        if self.mode != "noop" or hf.sa not in cell.params or name not in cell.cgs:
            return super()._settle(batch, cell, hf, b, key, slot)
        cg = cell.cgs[name][1]
        node = cg.calls[1 + int(self._canary_rng.integers(len(cg.calls) - 1))]
        own = cell.params[hf.sa]
        batch.graph.canary(cg.exec, cg.events, self._scratch, node, own, own)
        return None


def _median_pct(b: dict, c: dict, field: str) -> float:
    return 100 * math.expm1(statistics.median(math.log(b[k][field] / c[k][field]) for k in c))


def _against(passes: list[dict], ref: list[dict], field: str) -> float:
    """Median over configs of the log ratio of `field`, each pass against the mean (in logs)
    of the reference passes."""
    base = {k: statistics.fmean(math.log(r[k][field]) for r in ref) for k in ref[0]}
    logs = [math.log(p[k][field]) - base[k] for p in passes for k in base]
    return 100 * math.expm1(statistics.median(logs))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--frac", type=float, default=0.75, help="working set / L2")
    args = ap.parse_args()
    stop = Stopping(min_samples=4, max_samples=8, rel_tol=0.02, time_cap_s=0.5)
    n = int(detect().l2_bytes * args.frac) // 8
    grid = list(GRIDS["default"](["fp32"]))
    variants = grid[:: max(1, len(grid) // 48)][:48]
    print(f"fp32 hot, {n * 8 / 2**20:.2f} MiB working set, {len(variants)} configs")
    classic = GpuExecutor(stopping=stop)
    classic.reference("hot", "fp32", n)
    cls = [{v.id: classic.measure("hot", "fp32", n, v) for v in variants}]
    ex = _Lab(stopping=stop)
    ex.reference("hot", "fp32", n)
    runs: dict[str, list[dict]] = {m: [] for m in MODES}
    gpu: dict[str, list[float]] = {m: [] for m in MODES}  # GPU ms per cell in batches
    ex.batch_spans()  # from here on
    for rep in range(args.reps):
        k = rep % len(MODES)
        for mode in MODES[k:] + MODES[:k]:  # each mode in another place each time
            ex.set_mode(mode)
            t0 = time.time()
            b = {r["variant_id"]: r for r in ex.measure_many("hot", "fp32", n, variants)}
            dt = time.time() - t0
            runs[mode].append(b)
            gpu[mode].append(1e3 * ex.batch_spans()["gpu_s"] / len(b))
            slot = segment_start(list(b.values()))
            bad = sum(1 for r in b.values() if r["status"] != "ok")
            calls = sum(r.get("canaries", 0) for r in b.values())
            print(f"rep {rep} canary {mode:3}: slot {slot['verdict']} {slot['effect_pct']:+.2f}%, "
                  f"not ok {bad}, canaries {calls}, GPU {gpu[mode][-1]:.3f} ms/cell, "
                  f"{dt:.1f} s")  # fmt: skip
    cls.append({v.id: classic.measure("hot", "fp32", n, v) for v in variants})
    print("| passes | candidate time | baseline time | ratio | GPU per cell in batches |")
    print("|---|---:|---:|---:|---:|")
    off_gpu = statistics.median(gpu["off"])
    for mode in MODES:
        cells = [_against(runs[mode], runs["off"], f) for f in ("time_us", "base_time_us", "ratio")]
        cost = 100 * (statistics.median(gpu[mode]) / off_gpu - 1)
        print(f"| canary {mode} vs off | " + " | ".join(f"{c:+.2f}%" for c in cells)
              + f" | {cost:+.1f}% |")  # fmt: skip
    for mode in MODES:
        cells = [_against(runs[mode], cls, f) for f in ("time_us", "base_time_us", "ratio")]
        print(f"| canary {mode} vs classic | " + " | ".join(f"{c:+.2f}%" for c in cells) + " |")
    cells = [_against(cls[1:], cls[:1], f) for f in ("time_us", "base_time_us", "ratio")]
    print("| classic after vs before | " + " | ".join(f"{c:+.2f}%" for c in cells) + " |")


if __name__ == "__main__":
    main()
