"""`sweeper verify` on a GPU: build the exported header (sweeper.export.native), check it
bit-exact and its dispatch against the Python export (sweeper.export.verify), and time it with
the run's harness (GpuExecutor, sweeper.run.timers) against its Numba variant and the baseline.

numba.cuda is imported inside functions only: importing this module needs no GPU.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from sweeper.analyze.verdict import timing_verdict
from sweeper.dtypes import DTYPES
from sweeper.errors import SweeperError
from sweeper.export.native import (
    Launcher,
    build_exported_launchers,
    exported_choices,
    nvcc_version,
)
from sweeper.export.verify import check_export, run_sizes, verify_bits
from sweeper.ops import bytes_per_element, working_set
from sweeper.slices import slice_sizes

# Before timing pass p (p = 1, 2, ...) verify holds p * SPACER_BYTES of device memory, so most
# of that pass's buffers land at other addresses than the previous pass's (not all: the
# allocator may put the spacer in a hole; on the H200, 479 of 522 sizes moved).
SPACER_BYTES = 7 * 2**20


def exported_on(fn: Launcher, b, n: int) -> Callable:
    """side -> a launch on a stream of the exported `fn` on buffer set `side` ("A" or "B") of
    `b` (GpuExecutor's buffers), as verify times it."""
    from sweeper.run.executor import device_pointer

    def on(side: str):
        x, y, _ = b.side(side)
        xp, yp = device_pointer(x), device_pointer(y)
        return lambda s: fn(xp, yp, n, int(s.handle))

    return on


def verify_timing(
    launchers: dict[str, Launcher],
    select_config,
    sizes: dict[str, list[int]],
    cc: tuple[int, int],
    l2_bytes: int,
    *,
    mode: str = "hot",
    on_row=None,
    passes: int = 1,
) -> list[dict]:
    """Time each exported launcher with the run's harness (sweeper.run.timers), per size:

    * against the Numba variant it dispatches to (ABBA, separate buffers): the export must
      reproduce the Numba measurement (`vs_numba` ratio with CI, 1.0 = identical);
    * against the baseline (torch, or the reference config), as `sweeper run` does;
    and re-check the exported output bit-exactly after the timed loop.
    With `passes` > 1 every size is timed again in each further pass, after all sizes of the
    pass before, with fresh buffers (a spacer of SPACER_BYTES per pass is held first, so most
    land elsewhere): a repeat measurement, for `timing_verdict`. Rows carry their `pass`
    (1..) and `x_addr`, the address of the pass's input buffer.
    `on_row(rows)` is called after every size (verify uses it to keep a partial CSV on disk,
    so an interrupted verify still leaves what it measured).
    """
    from sweeper.run.executor import GpuExecutor

    if passes < 1:
        raise SweeperError(f"passes must be at least 1, got {passes}")
    ex = GpuExecutor(stopping=None)
    rows: list[dict] = []
    for p in range(passes):
        spacer = ex.cuda.device_array(p * SPACER_BYTES, dtype=np.uint8) if p else None
        time_pass(ex, launchers, select_config, sizes, cc, l2_bytes, mode, p + 1, rows, on_row)
        del spacer
    return rows


def time_pass(ex, launchers, select_config, sizes, cc, l2_bytes, mode, pass_no, rows, on_row):
    """One timing pass of `verify_timing` over every size, appending to `rows`."""
    from sweeper_kernels import Variant, get_launcher

    from sweeper.run.executor import device_pointer

    for dtype, ns in sizes.items():
        for n in ns:
            config, _ = select_config(dtype, n, cc, l2_bytes)
            variant = Variant.parse(f"{dtype}-{config}")
            b = ex.buffers(dtype, n)
            numba_launcher = get_launcher(variant)
            exported = exported_on(launchers[dtype], b, n)

            def numba_side(side, b=b, n=n, launch=numba_launcher):
                x, y, _ = b.side(side)
                return lambda s: launch(x, y, n, s)

            def base_side(side, b=b, n=n, dtype=dtype):
                return ex.baseline_launch(dtype, b, n, side)

            key = (dtype, n)
            ex.bench.reset_persisting()
            vs_numba = ex.pair_swapped(mode, exported, numba_side, b, key, ex.stopping, check=True)
            vs_base = ex.pair_swapped(mode, exported, base_side, b, key, ex.stopping, check=True)
            bad = vs_numba.bad + vs_base.bad
            vs_numba, vs_base = vs_numba.timing.summary(), vs_base.timing.summary()
            ws = working_set(n, dtype)
            rows.append(
                {
                    "pass": pass_no,
                    "mode": mode,
                    "dtype": dtype,
                    "n": n,
                    "ws_bytes": ws,
                    "config": config,
                    "time_us": vs_base["time_us"],
                    "gbps": ws / vs_base["time_us"] / 1e3,
                    "numba_time_us": vs_numba["base_time_us"],
                    "vs_numba": 1 / vs_numba["ratio"],
                    "vs_numba_lo": 1 / vs_numba["ratio_hi"],
                    "vs_numba_hi": 1 / vs_numba["ratio_lo"],
                    "baseline": ex.baseline_name,
                    "ratio": vs_base["ratio"],
                    "ratio_lo": vs_base["ratio_lo"],
                    "ratio_hi": vs_base["ratio_hi"],
                    "bit_exact_after_timing": bad == 0,
                    "x_addr": device_pointer(b.x_a),  # where this pass's buffers landed
                }
            )
            if on_row is not None:
                on_row(rows)
            ex.drop(dtype, n)  # the next pass on new buffers


def verify(
    policy_path: str | os.PathLike,
    out_dir: str | os.PathLike | None = None,
    timing: bool = True,
    passes: int = 2,
    ws_range: tuple[int, int] | None = None,
    configs: list[str] | None = None,
    dtypes_only: list[str] | None = None,
) -> dict:
    """Export the policy's header, build it, check bit-exactness on every dtype it covers and
    that the header's dispatch picks what the Python export picks on this device; with
    `timing`, time it at every size of the policy's run in `passes` passes (timing_verdict).
    `ws_range` (bytes of working set), `configs` (patterns of the config the policy dispatches
    to) and `dtypes_only` time only that slice of the sizes, into verify_timing_slice.csv (the
    run's verify_timing.csv stays as it is)."""
    import importlib.util

    from sweeper.analyze.policy import load_any
    from sweeper.export import render

    if passes < 1:
        raise SweeperError(f"--passes must be at least 1, got {passes}")
    doc = load_any(policy_path)
    from sweeper.run.timers import require_gpu

    out_dir = Path(out_dir) if out_dir else Path(policy_path).parent
    header = out_dir / "relu_policy.cuh"
    pyfile = out_dir / "relu_policy.py"
    formats = {header: "cuda", pyfile: "python"}
    texts = {path: render(doc, fmt) for path, fmt in formats.items()}
    for path, text in texts.items():
        if path.exists():  # verify checks this policy's export, never another file
            check_export(path, text, policy_path, formats[path])
    require_gpu()  # before anything is written
    from sweeper.schema import atomic_write_text

    for path, text in texts.items():
        if not path.exists():
            atomic_write_text(path, text)
    launchers = build_exported_launchers(header)
    dtypes = tuple(dt for dt in DTYPES if any(dt in e["dtypes"] for e in doc["entries"]))
    cases = verify_bits(launchers, dtypes)

    from numba import cuda

    dev = cuda.get_current_device()
    cc = dev.compute_capability
    l2 = int(dev.L2_CACHE_SIZE)
    sms = int(dev.MULTIPROCESSOR_COUNT)
    spec = importlib.util.spec_from_file_location("relu_policy_verify", pyfile)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]

    def select_config(dtype: str, n: int, cc, l2_bytes: int):  # this device's SM count
        return mod.select_config(dtype, n, cc, l2_bytes, sms)

    choices = exported_choices(header)
    dispatch = []
    for dt in dtypes:
        for k in range(1, 257):
            n = max(1, int(k / 64 * l2 / bytes_per_element(dt)))
            want, _ = select_config(dt, n, cc, l2)
            got = choices[dt](n)
            if got != want:
                dispatch.append({"dtype": dt, "n": n, "header": got, "python": want})
    result = {
        "header": str(header),
        "cases": cases,
        "failed": [c for c in cases if not c["ok"]],
        "dispatch_mismatches": dispatch,
        "device": {"cc": list(cc), "l2_bytes": l2, "sm_count": sms},
        "nvcc": nvcc_version(),
    }
    if timing:
        mode, sizes = run_sizes(Path(policy_path).parent, dtypes, doc)
        name = "verify_timing.csv"
        if ws_range is not None or configs or dtypes_only:
            sizes = slice_sizes(
                sizes,
                dtypes=dtypes_only,
                configs=configs,
                ws_range=ws_range,
                config_of=lambda dt, n: select_config(dt, n, cc, l2)[0],
            )
            name = "verify_timing_slice.csv"
        result["timing_mode"] = mode
        csv_path = out_dir / name
        total = passes * sum(len(v) for v in sizes.values())

        def progress(rows: list[dict]) -> None:
            _write_csv(csv_path, rows)
            if len(rows) % 25 == 0 or len(rows) == total:
                r = rows[-1]
                print(
                    f"verify timing: {len(rows)}/{total} sizes x passes "
                    f"(pass {r['pass']}, {r['dtype']} n={r['n']})",
                    file=sys.stderr,
                    flush=True,
                )

        rows = verify_timing(
            launchers, select_config, sizes, tuple(cc), l2, mode=mode, on_row=progress,
            passes=passes,
        )  # fmt: skip
        from sweeper.records import record_derived

        record_derived(csv_path)
        result["timing"] = timing_verdict(rows)
        result["timing_csv"] = str(csv_path)
    return result


def _write_csv(path: Path, rows: list[dict]) -> None:
    import csv
    import io

    from sweeper.schema import atomic_write_text

    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    atomic_write_text(path, buf.getvalue())
