"""The verdict on a verify's timing (pure: no GPU): repeated losses, parity, pass-to-pass movement."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sweeper.runfolder import VERIFY_CSV

if TYPE_CHECKING:
    import pandas as pd


def timing_verdict(rows: list[dict], parity: float = 0.05) -> dict:
    """Pass/fail of the timing checks, per size over its timing passes (rows without a
    `pass` are one pass):

    * parity: the export is off its Numba variant by more than `parity` in EVERY pass;
    * loss: the ratio to the baseline has its CI wholly below 1 in EVERY pass;
    * bit failures: a wrong output after timing in ANY pass.

    With one pass this is the single measurement's verdict. With more, a size fails parity
    or loses only when the failure repeats: a CI covers one measurement's sampling noise,
    and a repeat moves small kernels' ratios by more than that, at the same buffer address
    as much as at another (docs/methodology.md). Sizes that fail in some
    passes only are listed apart (`unrepeated_*`), and `pass_spread` gives the measured
    pass-to-pass noise. Failure entries are the first pass's row with `passes`: every
    pass's row of that size (`pass_values` formats them).
    """
    from sweeper.analyze.select import below_baseline

    groups = size_groups(rows)
    n_passes = max((len(g) for g in groups.values()), default=0)

    def split(bad):
        every, some = [], []
        for g in groups.values():
            hits = [bad(r) for r in g]
            if any(hits):
                (every if all(hits) else some).append({**g[0], "passes": g})
        return every, some

    off, off_some = split(lambda r: abs(r["vs_numba"] - 1) > parity)
    loses, loses_some = split(below_baseline)
    wrong = [r for r in rows if not r["bit_exact_after_timing"]]
    spread = pass_spread(groups.values())
    for r in loses:
        r["within_noise"] = within_noise(r, spread)
    return {
        "sizes": len(groups),
        "passes": n_passes,
        "parity_failures": off,
        "baseline_losses": loses,
        "unrepeated_parity_failures": off_some,
        "unrepeated_losses": loses_some,
        "bit_failures": wrong,
        "max_parity_dev": max((abs(r["vs_numba"] - 1) for r in rows), default=0.0),
        "min_ratio": min((r["ratio"] for r in rows), default=float("nan")),
        "pass_spread": spread,
        "ok": not (off or loses or wrong),
    }


def within_noise(loss: dict, spread: dict | None) -> bool:
    """Whether a repeated loss is no larger than the pass-to-pass noise: its highest ratio
    over the passes at least 1 / (1 + the p95 of the movement between passes). Such a size
    reads as a tie with the baseline that two passes both put below 1; the loss still fails
    verify (the rule is the interval rule), the label says how to read it. False with one
    pass (no measured noise)."""
    if not spread:
        return False
    best = max(float(x["ratio"]) for x in loss.get("passes") or [loss])
    return best >= 1 / (1 + spread["p95"])


def pass_values(failure: dict, what: str) -> list[str]:
    """A timing_verdict failure's value in each of its passes: the ratio to the baseline
    with its CI (what="ratio") or the export's time over Numba's (what="parity")."""
    if what == "parity":
        return [f"{float(x['vs_numba']):.3f}x of Numba" for x in failure.get("passes") or [failure]]
    return [
        f"{x['ratio']:.3f}x [{x['ratio_lo']:.3f}, {x['ratio_hi']:.3f}]"
        for x in failure.get("passes") or [failure]
    ]


def size_groups(rows: list[dict]) -> dict[tuple, list[dict]]:
    """(dtype, ws_bytes) -> that size's rows, one per timing pass, in the rows' order."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["dtype"], r["ws_bytes"]), []).append(r)
    return groups


def pass_spread(groups) -> dict | None:
    """Pass-to-pass noise of the ratio to the baseline: over sizes timed in two or more
    passes, |ratio of a later pass / ratio of pass 1 - 1| (median, p95, max). None with one
    pass."""
    devs = [abs(r["ratio"] / g[0]["ratio"] - 1) for g in groups for r in g[1:]]
    if not devs:
        return None
    q = np.quantile(np.asarray(devs), [0.5, 0.95])
    return {"median": float(q[0]), "p95": float(q[1]), "max": float(max(devs)), "n": len(devs)}


VERIFY_COLUMNS = (
    "mode", "dtype", "n", "ws_bytes", "config", "gbps", "vs_numba", "ratio", "ratio_lo",
    "ratio_hi",
)  # fmt: skip
_VERIFY_NUMBERS = ("n", "ws_bytes", "gbps", "vs_numba", "ratio", "ratio_lo", "ratio_hi")


def load_verify(run_dir: str | Path) -> pd.DataFrame | None:
    """`<run_dir>/verify_timing.csv` (what `sweeper verify` wrote), or None without one;
    SchemaError naming the column when it is damaged (cut, a column gone, a value that is not
    a positive number, a size listed twice in one pass)."""
    import pandas as pd

    from sweeper.analyze.store import read_table
    from sweeper.dtypes import ITEMSIZE
    from sweeper.errors import SchemaError
    from sweeper.files import file_bytes
    from sweeper.ops import bytes_per_element
    from sweeper.records import check_derived

    path = Path(run_dir) / VERIFY_CSV
    fix = "run `sweeper verify` again to rewrite it"
    vt = read_table(path, VERIFY_COLUMNS, fix)
    if vt is None:
        return None
    if vt.empty:
        raise SchemaError(path, None, f"no rows; {fix}")
    for col in _VERIFY_NUMBERS:
        x = pd.to_numeric(vt[col], errors="coerce").to_numpy(dtype=float)
        if not (np.isfinite(x) & (x > 0)).all():
            raise SchemaError(path, col, f"a value is missing or not a positive number; {fix}")
    if not vt["dtype"].isin(list(ITEMSIZE)).all():
        raise SchemaError(path, "dtype", f"an unknown dtype; {fix}")
    ws = vt["n"].astype("int64") * vt["dtype"].map(bytes_per_element).astype("int64")
    if not (ws == vt["ws_bytes"].astype("int64")).all():
        raise SchemaError(
            path,
            "ws_bytes",
            f"not n x the op's bytes per element (relu: 2 x the dtype's size); {fix}",
        )
    key = [c for c in ("pass", "mode", "dtype", "ws_bytes") if c in vt.columns]
    if vt.duplicated(key).any():
        raise SchemaError(path, "ws_bytes", f"a size is listed twice in one pass; {fix}")
    check_derived(path, file_bytes(path))
    return vt
