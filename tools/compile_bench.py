#!/usr/bin/env python3
"""Compile a kernel grid with every core and print the wall time.

    python tools/compile_bench.py                    # default grid, 4 dtypes, GPU machine
    python tools/compile_bench.py --ptx-only         # same, PTX for sm_90 only (no GPU)
    python tools/compile_bench.py --grid extended --dtype fp32 --workers 8

On a GPU machine each distinct compile key is built by `cuda.jit(sig, cache=True)` in a process
pool (spawned workers, one CUDA context each); Numba writes the cubin to its on-disk cache next
to the generated module under $SWEEPER_CACHE (default ~/.cache/sweeper). A second run loads every
kernel from that cache: it must report `compiled 0` and take a few seconds. With --ptx-only the
same keys go through `compile_ptx` into the PTX cache instead (what the CPU tests use).
Exit status 1 if --expect-cached is given and anything had to be compiled.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor


def _ptx_job(key) -> tuple[str, bool, float]:
    from sweeper_kernels.build import ptx, ptx_path

    t0 = time.perf_counter()
    cached = ptx_path(key, (9, 0)).exists()
    ptx(key, (9, 0))
    return key.slug, not cached, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", default="default", choices=["default", "extended"])
    ap.add_argument("--dtype", action="append", help="repeatable; default: all four")
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--ptx-only", action="store_true", help="PTX for sm_90 only; no GPU needed")
    ap.add_argument("--expect-cached", action="store_true", help="fail if anything compiles")
    args = ap.parse_args(argv)

    from sweeper_kernels.build import cache_dir
    from sweeper_kernels.variants import compile_keys, get_grid

    keys = compile_keys(get_grid(args.grid, args.dtype))
    t0 = time.perf_counter()
    if args.ptx_only:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max(1, min(args.workers, len(keys))), mp_context=ctx) as pool:
            results = list(pool.map(_ptx_job, keys, chunksize=1))
    else:
        from sweeper_kernels.build import warm_kernels

        results = warm_kernels(keys, args.workers)
    wall = time.perf_counter() - t0

    compiled = [r for r in results if r[1]]
    slowest = max(results, key=lambda r: r[2])
    what = "PTX sm_90" if args.ptx_only else "kernels"
    print(
        f"{args.grid} grid, {len(keys)} distinct {what}: compiled {len(compiled)}, "
        f"from cache {len(keys) - len(compiled)}; wall {wall:.1f} s with {args.workers} "
        f"workers (slowest key {slowest[0]} {slowest[2]:.1f} s); cache {cache_dir()}"
    )
    if args.expect_cached and compiled:
        print(f"expected everything cached, compiled: {[r[0] for r in compiled][:10]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
