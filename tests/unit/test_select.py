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
        row("fp32", 1 << 20, "stream", 5000.0, status="above-ceiling"),
        row("fp32", 1 << 20, "u4", 4000.0, status="mismatch"),
        row("fp32", 1 << 20, "stcs", 4500.0, status="above-peak"),
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


@pytest.mark.parametrize("tol", [-1, 1, 1.5, float("nan")])
def test_a_tolerance_outside_0_to_1_is_refused(tol):
    with pytest.raises(
        SweeperError, match=rf"--tolerance {tol}: a relative GB/s difference in \[0, 1\)"
    ):
        select(frame([row("fp32", 1 << 20, "plain", 1.0)]), tolerance=tol)


def test_a_tolerance_just_below_1_is_taken():
    assert len(select(frame([row("fp32", 1 << 20, "plain", 1.0)]), tolerance=0.999)) == 1


def test_write_selection(tmp_path):
    rows = [row("fp32", 1 << 20, "plain", 1000.0), row("fp32", 1 << 20, "stream", 900.0)]
    sel = select(frame(rows))
    csv, md = write_selection(tmp_path, sel, 1 << 22, "r1", "v4-u1-ld.def-st.def-b256-onepass")
    back = pd.read_csv(csv)
    assert back.loc[0, "config"] == "plain"
    assert set(back["baseline"]) == {"v4-u1-ld.def-st.def-b256-onepass"}  # named in every row
    text = md.read_text()
    assert "`plain`" in text and "0.250" in text and not math.isnan(back.loc[0, "margin"])
    assert "Baseline: `v4-u1-ld.def-st.def-b256-onepass`." in text
    assert "| vs v4-u1-ld.def-st.def-b256-onepass [95% CI] |" in text


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


# ---- the shipped run, rebuilt: selection.csv and selection.md as committed ------------------


def test_the_shipped_cold_run_reselects_to_its_committed_selection(tmp_path):
    """select() on cold-6's trials gives its committed selection.csv value for value and
    renders its selection.md byte for byte (both were written by `sweeper select` and are the
    files its report and policy rest on)."""
    from pathlib import Path

    from sweeper.analyze.select import to_markdown
    from sweeper.analyze.store import load_run

    run = Path(__file__).parents[2] / "results/h200/cold-6"
    from sweeper.analyze.select import searched

    data = load_run(run)
    sel = select(searched(data.results, data.manifest))  # as `sweeper select` does
    want = pd.read_csv(run / "selection.csv")
    base = data.manifest["baseline"]
    got = pd.read_csv(__import__("io").StringIO(sel.assign(baseline=base).to_csv(index=False)))
    pd.testing.assert_frame_equal(got, want)
    md = to_markdown(sel, data.manifest["device"]["l2_bytes"], data.manifest["run_id"], base)
    assert md == (run / "selection.md").read_text()


@pytest.mark.parametrize(
    "other_lo, best_hi, tied",
    [(1.0, 2.0, True), (2.0, 2.0, True), (2.1, 2.0, False), (None, 2.0, False),
     (1.0, None, False), (math.nan, 2.0, False), (1.0, math.nan, False)],
)  # fmt: skip
def test_a_slower_config_ties_only_when_both_time_cis_are_known_and_overlap(
    other_lo, best_hi, tied
):
    from sweeper.analyze.select import tied_with

    best = {"gbps": 1000.0, "time_hi_us": best_hi}
    other = {"gbps": 800.0, "time_lo_us": other_lo}  # 20% slower: outside the tolerance
    assert tied_with(best, other, 0.02) is tied


# ---- simplicity, criterion by criterion (module docstring, 2a-2e) ---------------------------

BASE = dict(vec_bytes=16, unroll=2, load_hint="default", store_hint="default", block=256, grid="onepass")  # fmt: skip


@pytest.mark.parametrize(
    "simpler, other",
    [
        ({}, {"load_hint": "cs"}),  # a: fewer non-default hints
        ({}, {"store_hint": "cs"}),
        ({"load_hint": "cs"}, {"load_hint": "cs", "store_hint": "cs"}),
        ({"unroll": 1, "load_hint": "cs"}, {"unroll": 1, "load_hint": "cs", "store_hint": "wt"}),
        ({"unroll": 8}, {"unroll": 1, "store_hint": "cs"}),  # a outranks b
        ({"unroll": 1}, {"unroll": 2}),  # b: smaller unroll
        ({"unroll": 2, "grid": "stride4"}, {"unroll": 4}),  # b outranks c
        ({"grid": "onepass"}, {"grid": "stride4"}),  # c: onepass before grid-stride
        ({"grid": "onepass"}, {"grid": "flat"}),
        ({"grid": "stride4", "vec_bytes": 16}, {"grid": "flat", "vec_bytes": 16, "block": 128}),
        ({"grid": "onepass", "vec_bytes": 16}, {"grid": "stride1", "vec_bytes": 4}),  # c before d
        ({"vec_bytes": 4}, {"vec_bytes": 8}),  # d: smaller vectors
        ({"vec_bytes": 8, "block": 1024}, {"vec_bytes": 16, "block": 256}),  # d before e
        ({"block": 256}, {"block": 512}),  # e: block closest to 256
        ({"block": 256}, {"block": 128}),
        ({"block": 128}, {"block": 512}),  # equally far from 256 in log2: the smaller
        ({"block": 512}, {"block": 1024}),
    ],
)
def test_simplicity_decides_criterion_by_criterion(simpler, other):
    a = {**BASE, **simpler, "config": "a"}
    b = {**BASE, **other, "config": "a"}
    assert simplicity_key(a) < simplicity_key(b)


def test_simplicity_reads_missing_fields_as_their_defaults():
    """No hints, unroll 1, block 256 when a field is absent; an absent grid is not onepass."""
    full = {**BASE, "unroll": 1, "config": "x"}
    bare = {"vec_bytes": 16, "grid": "onepass", "config": "x"}
    assert simplicity_key(bare) == simplicity_key(full)
    for hint in ("", "default", "none", "nan", "<NA>"):
        assert simplicity_key({**full, "load_hint": hint}) == simplicity_key(full)
    assert simplicity_key({**full, "grid": "onepass"}) < simplicity_key(
        {k: v for k, v in full.items() if k != "grid"}
    )
    assert simplicity_key({**full, "config": "a"}) < simplicity_key({**full, "config": "b"})
    assert simplicity_key({**full, "block": "junk"}) == simplicity_key(full)


# ---- select(): order, copy, schema, reasons ----------------------------------------------


def test_select_does_not_depend_on_the_row_order():
    rows = [
        row(dt, ws, c, g)
        for dt in ("fp32", "fp16")
        for ws, c, g in [(1 << 20, "stream", 1000.0), (1 << 20, "plain", 990.0), (2 << 20, "stream", 1000.0), (2 << 20, "plain", 995.0), (3 << 20, "u4", 1200.0), (3 << 20, "plain", 1000.0)]
    ]  # fmt: skip
    a = select(frame(rows))
    b = select(frame(rows[::-1]))
    pd.testing.assert_frame_equal(a, b)
    assert list(a["dtype"]) == ["fp16"] * 3 + ["fp32"] * 3  # groups, then sizes, sorted
    assert list(a["ws_bytes"]) == [1 << 20, 2 << 20, 3 << 20] * 2


def test_select_columns():
    sel = select(frame([row("fp32", 1 << 20, "plain", 1000.0)]))
    assert list(sel.columns) == [
        "mode", "pattern", "dtype", "n", "ws_bytes", "config", "gbps", "pct_copy", "copy_gbps",
        "ratio", "ratio_lo", "ratio_hi", "fastest", "fastest_gbps", "runner_up",
        "runner_up_gbps", "margin", "tied", "n_tied", "n_configs", "reason",
        "vec_bytes", "unroll", "load_hint", "store_hint", "block", "grid",
    ]  # fmt: skip
    r = sel.iloc[0]
    assert r.n == (1 << 20) // 8 and r.fastest_gbps == 1000.0 and r.runner_up == ""
    assert math.isnan(r.runner_up_gbps) and math.isnan(r.margin) and math.isnan(r.pct_copy)


def test_copy_throughput_comes_from_the_same_pattern_else_any_pattern_else_the_row():
    ws = 1 << 20
    same = row("fp32", ws, "copy", 2000.0, role="copy")
    other = {**row("fp32", ws, "copy", 4000.0, role="copy"), "pattern": "allocating"}
    cand = row("fp32", ws, "plain", 1000.0)
    assert select(frame([cand, other, same])).iloc[0].copy_gbps == 2000.0
    assert select(frame([cand, other])).iloc[0].pct_copy == pytest.approx(25.0)
    own = {**cand, "copy_gbps": 1250.0}
    other_row = {**row("fp32", ws, "stream", 900.0), "copy_gbps": 999.0}
    got = select(frame([own, other_row])).iloc[0]
    assert got.config == "plain" and got.copy_gbps == 1250.0 and got.pct_copy == pytest.approx(80)
    bad_copy = {**row("fp32", ws, "copy", 3000.0, role="copy"), "status": "error"}
    assert math.isnan(select(frame([cand, bad_copy])).iloc[0].copy_gbps)


def test_a_config_measured_twice_at_one_size_counts_once_with_its_faster_row():
    ws = 1 << 20
    rows = [row("fp32", ws, "plain", 900.0), row("fp32", ws, "plain", 1000.0),
            row("fp32", ws, "stream", 950.0, ci=0.0)]  # fmt: skip
    r = select(frame(rows), tolerance=0.0).iloc[0]
    assert r.config == "plain" and r.gbps == 1000.0 and r.n_configs == 2
    assert r.runner_up == "stream" and r.margin == pytest.approx(1000 / 950 - 1)


def test_the_reasons():
    ws1, ws2 = 1 << 20, 2 << 20
    rows = [row("fp32", ws1, "stream", 1000.0, ci=0.0), row("fp32", ws1, "plain", 995.0, ci=0.0),
            row("fp32", ws2, "stream", 995.0, ci=0.0), row("fp32", ws2, "plain", 1000.0, ci=0.0)]  # fmt: skip
    sel = select(frame(rows))
    assert list(sel.reason) == ["tie: simpler", "fastest"]
    rows[3] = row("fp32", ws2, "plain", 990.0, ci=0.0)
    rows[2] = row("fp32", ws2, "stream", 1000.0, ci=0.0)
    sel = select(frame(rows))
    assert list(sel.reason) == ["tie: simpler", "tie: neighbour"]
    rows = [row("fp32", ws1, "stream", 1000.0, ci=0.0), row("fp32", ws1, "plain", 995.0, ci=0.0)]
    rows[0]["ratio_hi"] = 0.99  # the fastest loses to the baseline; the tied plain does not
    rows[1]["ratio_hi"] = 1.02
    assert select(frame(rows)).iloc[0].reason == "tie: simpler (fastest below baseline)"


def test_only_ok_candidates_with_a_positive_throughput_are_selectable():
    from sweeper.analyze.select import ok_candidates

    ws = 1 << 20
    rows = [row("fp32", ws, "plain", 0.5), row("fp32", ws, "stream", 900.0),
            row("fp32", ws, "u4", 900.0, status="guard"), row("fp32", ws, "copy", 9.0, role="copy")]  # fmt: skip
    rows += [{**row("fp32", ws, "stcs", 900.0), "gbps": g} for g in (0.0, -1.0, math.nan)]
    got = ok_candidates(frame(rows))
    assert sorted(got["config"]) == ["plain", "stream"]


def test_variants_reads_each_configs_fields_once_and_only_those_asked_for():
    from sweeper.analyze.select import variants

    rows = [row("fp32", 1 << 20, c, 1000.0) for c in ("plain", "stream", "u4")]
    rows.append({**row("fp32", 2 << 20, "plain", 1000.0), "block": 256.0, "unroll": 1.0})
    rows.append({**row("fp32", 2 << 20, "stcs", 1000.0), "load_hint": "", "vec_bytes": None})
    rows.append({**row("fp32", 2 << 20, "plain", 1000.0), "config": "u2", "store_hint": ""})
    got = variants(frame(rows))
    assert got["plain"] == {**VARIANTS["plain"]} and set(got) == {
        "plain",
        "stream",
        "u4",
        "stcs",
        "u2",
    }
    assert got["stream"] == VARIANTS["stream"] and got["u2"]["store_hint"] == "default"
    assert got["stcs"]["load_hint"] == "default" and got["stcs"]["vec_bytes"] == 0
    assert set(variants(frame(rows), ["stream", "u4"])) == {"stream", "u4"}
    clash = {**row("fp32", 3 << 20, "u4", 1000.0), "unroll": 2}
    with pytest.raises(SweeperError, match="config 'u4' has two different variant definitions"):
        variants(frame([*rows, clash]))


def test_simplicity_reads_float_fields_as_the_integers_they_are():
    a = {**BASE, "block": 512, "unroll": 4, "config": "x"}
    b = {**BASE, "block": 512.0, "unroll": 4.0, "config": "x"}
    nan = {**BASE, "block": math.nan, "unroll": math.nan, "config": "x"}
    assert simplicity_key(a) == simplicity_key(b)
    assert simplicity_key(nan) == simplicity_key({**BASE, "block": 256, "unroll": 1, "config": "x"})


def test_simplicity_edge_values():
    key = lambda **kw: simplicity_key({**BASE, "config": "x", **kw})  # noqa: E731
    assert key(block=1) < key(block=0) and key(block=1024) < key(block=-256)  # no block: last
    no_vec = {k: v for k, v in BASE.items() if k != "vec_bytes"}
    assert simplicity_key({**no_vec, "config": "x"}) < key(vec_bytes=4)
    named = {k: v for k, v in BASE.items()}
    assert simplicity_key({**named, "name": "a"}) < simplicity_key({**named, "name": "b"})


def test_acceptable_sets_are_in_size_order_and_count_a_config_once_at_its_best():
    from sweeper.analyze.select import acceptable_sets

    rows = [row("fp32", ws, "plain", g, ci=0.0) for ws, g in ((2 << 20, 1000.0), (1 << 20, 500.0))]
    rows += [
        row("fp32", 2 << 20, "stream", 990.0, ci=0.0),
        row("fp32", 2 << 20, "stream", 985.0, ci=0.0),
    ]
    sets = acceptable_sets(frame(rows))
    seq = sets[("hot", "preallocated", "fp32")]
    assert [ws for ws, _ in seq] == [1 << 20, 2 << 20]
    assert seq[1][1] == {"plain": 1.0, "stream": pytest.approx(0.99)}


def test_pct_of_copy_is_not_a_number_without_a_copy_throughput():
    ws = 1 << 20
    zero = {**row("fp32", ws, "copy", 1.0, role="copy"), "gbps": 0.0}
    got = select(frame([row("fp32", ws, "plain", 1000.0), zero])).iloc[0]
    assert got.copy_gbps == 0.0 and math.isnan(got.pct_copy)


def test_the_markdown_does_not_depend_on_the_row_order():
    from sweeper.analyze.select import to_markdown

    rows = [row(dt, ws, "plain", 1000.0) for dt in ("fp32", "fp16") for ws in (1 << 20, 2 << 20)]
    sel = select(frame(rows))
    md = to_markdown(sel, 4 << 20, "t", "torch")
    assert to_markdown(sel.iloc[::-1], 4 << 20, "t", "torch") == md
    assert "| 0.250 |" in md
    no_l2 = to_markdown(sel, None, "t", "torch")
    assert "| 0.250 |" not in no_l2 and "|  |" in no_l2


def test_write_selection_writes_the_table_without_an_index_and_titles_the_markdown(tmp_path):
    from sweeper.analyze.select import write_selection

    sel = select(frame([row("fp32", 1 << 20, "plain", 1000.0)]))
    csv, md = write_selection(tmp_path, sel, 4 << 20, "run-x", "torch")
    assert csv.read_text().splitlines()[0].startswith("mode,pattern,dtype,")
    assert md.read_text().startswith("# Selection: run-x\n")


def test_both_selection_files_are_recorded_where_they_are_written(tmp_path, monkeypatch):
    """write_selection asks for selection.csv and selection.md to be recorded (a finished
    run's manifest then holds their counts and digests; test_archive_run checks the record)."""
    import pandas as pd

    import sweeper.records
    from sweeper.analyze import select

    asked = []
    monkeypatch.setattr(sweeper.records, "record_derived", lambda *p: asked.append(p))
    monkeypatch.setattr(select, "to_markdown", lambda *a: "# selection\n")
    csv, md = select.write_selection(tmp_path, pd.DataFrame({"config": ["c"]}), None, "t", "b")
    assert asked == [(csv, md)]
    assert (csv.name, md.name) == ("selection.csv", "selection.md")
    assert "baseline" in csv.read_text().splitlines()[0]
