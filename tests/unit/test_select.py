"""Selection on synthetic tables with known answers: winners, ties, tie-breaking, copy %."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from sweeper.analyze.columns import COLUMNS
from sweeper.analyze.select import select, simplicity_key, write_selection
from sweeper.errors import SweeperError

VARIANTS = {
    "plain": dict(vec_bytes=16, unroll=1, load_hint="default", store_hint="default", block=256, grid="onepass"),
    "stream": dict(vec_bytes=16, unroll=1, load_hint="cs", store_hint="cs", block=256, grid="onepass"),
    "stcs": dict(vec_bytes=16, unroll=1, load_hint="default", store_hint="cs", block=256, grid="onepass"),
    "u4": dict(vec_bytes=16, unroll=4, load_hint="default", store_hint="default", block=256, grid="stride4"),
}  # fmt: skip


def row(dtype, ws, config, gbps, ci=0.002, role="candidate", status="ok", mode="hot", base=None):
    item = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1}[dtype]
    t = ws / gbps / 1e3
    base = base if base is not None else t
    r = {c: None for c in COLUMNS}
    r.update(
        run_id="r1", gpu="synth", mode=mode, pattern="preallocated", dtype=dtype,
        n=ws // (2 * item), ws_bytes=ws, role=role, config=config, status=status,
        time_us=t, time_lo_us=t * (1 - ci), time_hi_us=t * (1 + ci), gbps=gbps,
        base_time_us=base, ratio=base / t, ratio_lo=base / t * 0.99, ratio_hi=base / t * 1.01,
        n_samples=50, phase="sweep",
    )  # fmt: skip
    if role == "candidate":
        r.update(VARIANTS[config])
    return r


def frame(rows):
    return pd.DataFrame(rows, columns=list(COLUMNS))


def test_winner_copy_pct_and_runner_up():
    rows = [
        row("fp32", 1 << 20, "plain", 1000.0),
        row("fp32", 1 << 20, "stream", 1200.0),
        row("fp32", 1 << 20, "u4", 900.0),
        row("fp32", 1 << 20, "copy", 1500.0, role="copy"),
        row("fp32", 1 << 20, "torch", 1100.0, role="baseline"),
    ]
    sel = select(frame(rows))
    assert len(sel) == 1
    r = sel.iloc[0]
    assert r.config == "stream" and r.reason == "fastest"
    assert r.pct_copy == pytest.approx(80.0)
    assert r.runner_up == "plain" and r.margin == pytest.approx(0.2)
    assert r.n_configs == 3


def test_not_ok_rows_are_never_selected():
    rows = [
        row("fp32", 1 << 20, "plain", 1000.0),
        row("fp32", 1 << 20, "stream", 5000.0, status="above-peak"),
        row("fp32", 1 << 20, "u4", 4000.0, status="mismatch"),
    ]
    assert select(frame(rows)).iloc[0].config == "plain"


def test_tie_goes_to_simpler_then_neighbour():
    # size A: stream 1% faster than plain (inside 2% tolerance) -> tie -> simpler (plain).
    # size B: stream 10% faster -> stream. size C: stream and plain tied -> neighbour (stream).
    a, b, c = 1 << 20, 2 << 20, 3 << 20
    rows = [
        row("fp32", a, "plain", 1000.0), row("fp32", a, "stream", 1010.0),
        row("fp32", b, "plain", 1000.0), row("fp32", b, "stream", 1100.0),
        row("fp32", c, "plain", 1010.0), row("fp32", c, "stream", 1000.0),
    ]  # fmt: skip
    sel = select(frame(rows)).set_index("ws_bytes")
    assert sel.loc[a, "config"] == "plain" and sel.loc[a, "reason"] == "tie: simpler"
    assert sel.loc[a, "fastest"] == "stream"
    assert sel.loc[b, "config"] == "stream" and sel.loc[b, "reason"] == "fastest"
    assert sel.loc[c, "config"] == "stream" and sel.loc[c, "reason"] == "tie: neighbour"


def test_ci_overlap_is_a_tie_even_outside_tolerance():
    rows = [
        row("fp32", 1 << 20, "plain", 1000.0, ci=0.05),
        row("fp32", 1 << 20, "stream", 1060.0, ci=0.05),
    ]
    assert select(frame(rows), tolerance=0.0).iloc[0].config == "plain"
    rows = [
        row("fp32", 1 << 20, "plain", 1000.0, ci=0.001),
        row("fp32", 1 << 20, "stream", 1060.0, ci=0.001),
    ]
    assert select(frame(rows), tolerance=0.0).iloc[0].config == "stream"


def test_groups_by_mode_and_dtype():
    rows = [
        row("fp32", 1 << 20, "plain", 1000.0), row("fp32", 1 << 20, "stream", 2000.0),
        row("fp16", 1 << 20, "plain", 2000.0), row("fp16", 1 << 20, "stream", 1000.0),
        row("fp32", 1 << 20, "plain", 2000.0, mode="cold"), row("fp32", 1 << 20, "stream", 1000.0, mode="cold"),
    ]  # fmt: skip
    sel = select(frame(rows)).set_index(["mode", "dtype"])
    assert sel.loc[("hot", "fp32"), "config"] == "stream"
    assert sel.loc[("hot", "fp16"), "config"] == "plain"
    assert sel.loc[("cold", "fp32"), "config"] == "plain"


def test_simplicity_order():
    order = sorted(VARIANTS, key=lambda c: simplicity_key({**VARIANTS[c], "config": c}))
    assert order == ["plain", "u4", "stcs", "stream"]


def test_negative_tolerance_refused():
    with pytest.raises(SweeperError, match="tolerance must be >= 0, got -1"):
        select(frame([row("fp32", 1 << 20, "plain", 1.0)]), tolerance=-1)


def test_write_selection(tmp_path):
    rows = [row("fp32", 1 << 20, "plain", 1000.0), row("fp32", 1 << 20, "stream", 900.0)]
    sel = select(frame(rows))
    csv, md = write_selection(tmp_path, sel, 1 << 22, "r1")
    back = pd.read_csv(csv)
    assert back.loc[0, "config"] == "plain"
    text = md.read_text()
    assert "`plain`" in text and "0.250" in text and not math.isnan(back.loc[0, "margin"])


def test_a_tie_never_goes_to_a_config_below_the_baseline_when_a_tied_one_is_not():
    """At 8.47 MiB-like sizes the fastest config can sit 1-3% under torch with a tight CI while
    a config tied with it (inside the tolerance) does not: the tie goes to the latter, in the
    selection and in the sets the policy is segmented on. When every tied config is below,
    nothing changes (there is nothing better to choose)."""
    from sweeper.analyze.select import acceptable_sets

    ws, t_base = 1 << 20, (1 << 20) / 1000.0 / 1e3  # the baseline at 1000 GB/s
    rows = [
        row("fp32", ws, "stream", 990.0, base=t_base),  # fastest; 0.99x, CI [0.98, 1.00)
        row("fp32", ws, "plain", 985.0, base=t_base),  # tied (0.5% slower), also below
        row("fp32", ws, "u4", 980.0, base=t_base),  # tied, CI high end 0.99 * 1.01 > 1
    ]
    rows[2]["ratio_hi"] = 1.002
    sel = select(frame(rows)).iloc[0]
    assert sel.config == "u4" and sel.reason == "tie: simpler (fastest below baseline)"
    assert sel.tied == "u4" and sel.fastest == "stream"
    ((_, acc),) = acceptable_sets(frame(rows))[("hot", "preallocated", "fp32")]
    assert set(acc) == {"u4"} and acc["u4"] == pytest.approx(980.0 / 990.0)
    # every tied config below the baseline: the ordinary tie rules decide
    rows[2]["ratio_hi"] = 0.995
    sel = select(frame(rows)).iloc[0]
    assert sel.config == "plain" and sel.reason == "tie: simpler" and sel.n_tied == 3
    ((_, acc),) = acceptable_sets(frame(rows))[("hot", "preallocated", "fp32")]
    assert set(acc) == {"stream", "plain", "u4"}


# ---- the decision thresholds, at, just inside and just outside ---------------------------


@pytest.mark.parametrize(
    "slower_by, tied",
    [(0.0199, True), ("at", True), (0.0201, False)],
    ids=["just-inside", "at-the-tolerance", "just-outside"],
)
def test_the_tie_tolerance_is_2_percent_inclusive(slower_by, tied):
    """A simpler config within 2% of the fastest (CIs apart) is tied with it and is chosen;
    one more than 2% slower is not."""
    from sweeper.analyze.select import DEFAULT_TOLERANCE

    fast = 1000.0
    slow = fast * (1.0 - DEFAULT_TOLERANCE) if slower_by == "at" else fast * (1.0 - slower_by)
    assert DEFAULT_TOLERANCE == 0.02
    rows = [
        row("fp32", 8 << 20, "stream", fast, ci=0.0),
        row("fp32", 8 << 20, "plain", slow, ci=0.0),
    ]
    chosen = select(frame(rows)).iloc[0].config
    assert chosen == ("plain" if tied else "stream")


@pytest.mark.parametrize(
    "ratio_hi, below", [(0.9999, True), (1.0, False), (1.0001, False), (math.nan, False)]
)
def test_below_the_baseline_means_the_whole_ci_is_under_1(ratio_hi, below):
    from sweeper.analyze.select import below_baseline

    assert below_baseline({"ratio": 0.99, "ratio_lo": 0.98, "ratio_hi": ratio_hi}) is below
