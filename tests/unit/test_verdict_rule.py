"""verify's loss rule (`timing_verdict`): a size loses to the baseline only where the ratio's
CI lies wholly below 1, in every timing pass. A point ratio below 1 whose CI reaches 1 is not a
loss, and a CI whose upper end is exactly 1 reaches it. The shipped verify files hold both
cases, measured; the last test reads them."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from sweeper.analyze.verdict import load_verify, pass_values, timing_verdict

ROOT = Path(__file__).resolve().parents[2]
WS = 1 << 20
BELOW_1 = math.nextafter(1.0, 0.0)  # the largest float below 1


def _row(lo, ratio, hi, p=1, vs_numba=1.0, ws=WS):
    return {"pass": p, "dtype": "fp32", "ws_bytes": ws, "n": ws // 8, "vs_numba": vs_numba,
            "ratio": ratio, "ratio_lo": lo, "ratio_hi": hi, "baseline": "torch",
            "bit_exact_after_timing": True}  # fmt: skip


def _sizes(failures):
    return [r["ws_bytes"] for r in failures]


@pytest.mark.parametrize(
    "lo, ratio, hi, loses",
    [
        (0.95, 0.97, 1.01, False),  # the point below 1, the CI holding 1
        (0.95, 0.97, 1.0, False),  # the CI ends exactly at 1
        (0.95, 0.97, BELOW_1, True),  # wholly below 1, by one float step
        (0.95, 0.97, 0.99, True),
        (0.99, 1.02, 1.05, False),  # only the CI's lower end below 1
        (1.0, 1.0, 1.0, False),
        (0.95, 0.97, math.nan, False),  # an unknown upper end is not known to be below
    ],
    ids=[
        "ci-holds-1",
        "hi-exactly-1",
        "hi-one-step-below-1",
        "wholly-below",
        "lo-below-1",
        "all-at-1",
        "hi-nan",
    ],  # fmt: skip
)
def test_one_pass_loses_only_where_the_whole_ci_is_below_1(lo, ratio, hi, loses):
    v = timing_verdict([_row(lo, ratio, hi)])
    assert _sizes(v["baseline_losses"]) == ([WS] if loses else [])
    assert v["unrepeated_losses"] == [] and v["ok"] is not loses
    assert v["min_ratio"] == ratio  # the point ratio is reported, not judged


def test_with_two_passes_a_loss_needs_the_whole_ci_below_1_in_both():
    a, b, c, d = WS, 2 * WS, 3 * WS, 4 * WS
    rows = [
        _row(0.95, 0.97, 0.99, p=1, ws=a), _row(0.96, 0.98, BELOW_1, p=2, ws=a),  # loses twice
        _row(0.95, 0.97, 0.99, p=1, ws=b), _row(0.96, 0.98, 1.0, p=2, ws=b),  # pass 2 reaches 1
        _row(0.95, 0.97, 1.01, p=1, ws=c), _row(0.96, 0.98, 1.0, p=2, ws=c),  # never wholly below
        _row(0.99, 1.01, 1.03, p=1, ws=d), _row(0.95, 0.97, 0.99, p=2, ws=d),  # pass 2 only
    ]  # fmt: skip
    v = timing_verdict(rows)
    assert _sizes(v["baseline_losses"]) == [a] and not v["ok"]
    assert [r["pass"] for r in v["baseline_losses"][0]["passes"]] == [1, 2]
    assert _sizes(v["unrepeated_losses"]) == [b, d]
    ok = timing_verdict(rows[2:])
    assert ok["ok"] and ok["baseline_losses"] == [] and _sizes(ok["unrepeated_losses"]) == [b, d]


def test_a_parity_failure_is_judged_apart_from_the_loss_rule():
    # off Numba by 6% with the baseline beaten; on Numba with a CI ending at 1: neither loses
    v = timing_verdict([_row(1.1, 1.2, 1.3, vs_numba=1.06, ws=WS), _row(0.9, 0.95, 1.0, ws=2 * WS)])
    assert _sizes(v["parity_failures"]) == [WS] and v["baseline_losses"] == []
    assert v["unrepeated_losses"] == [] and not v["ok"]


@pytest.mark.parametrize("run", ["hot-7", "aw-4", "cold-6"])
def test_the_shipped_verifies_do_not_count_a_point_ratio_below_1_as_a_loss(run):
    """Each shipped verify has sizes whose point ratio is below 1 in both passes while a CI
    reaches 1 (aw-4's fp16 at 100 KiB: pass 1's CI ends at exactly 1.0); none is a repeated
    loss, and one whose CI reaches 1 in every pass is not a loss in any pass."""
    vt = load_verify(ROOT / "results/h200" / run)
    v = timing_verdict(vt.to_dict("records"))
    assert v["passes"] == 2
    g = vt.groupby(["dtype", "ws_bytes"])
    point_below = g["ratio"].max() < 1  # the point ratio below 1 in every pass
    reaches_1_some = g["ratio_hi"].max() >= 1
    reaches_1_every = g["ratio_hi"].min() >= 1
    looks_like_a_loss = set(point_below[point_below & reaches_1_some].index)
    never_below = set(point_below[point_below & reaches_1_every].index)
    assert looks_like_a_loss  # the case this test is about is in the data
    losses = {(r["dtype"], r["ws_bytes"]) for r in v["baseline_losses"]}
    unrepeated = {(r["dtype"], r["ws_bytes"]) for r in v["unrepeated_losses"]}
    assert not looks_like_a_loss & losses
    assert not never_below & (losses | unrepeated)
    for r in v["baseline_losses"]:
        assert all(x["ratio_hi"] < 1 for x in r["passes"])
    if run == "aw-4":
        assert ("fp16", 102400) in looks_like_a_loss
        assert vt[(vt["dtype"] == "fp16") & (vt["ws_bytes"] == 102400)]["ratio_hi"].min() == 1.0


def test_off_numba_by_exactly_the_parity_is_not_a_parity_failure():
    # 1.25 and 0.25 are exact in binary: |1.25 - 1| is the parity itself, not more
    rows = [_row(1.1, 1.2, 1.3, vs_numba=1.25), _row(1.1, 1.2, 1.3, vs_numba=1.2500001, ws=2 * WS)]
    v = timing_verdict(rows, parity=0.25)
    assert _sizes(v["parity_failures"]) == [2 * WS]


def test_no_rows_is_an_empty_passing_verdict():
    v = timing_verdict([])
    assert (v["sizes"], v["passes"], v["max_parity_dev"], v["ok"]) == (0, 0, 0.0, True)
    assert math.isnan(v["min_ratio"]) and v["pass_spread"] is None


def test_a_parity_failure_in_one_pass_only_is_unrepeated_and_the_largest_deviation_reported():
    rows = [
        _row(1.1, 1.2, 1.3, p=1, vs_numba=1.07), _row(1.1, 1.2, 1.3, p=2, vs_numba=1.01),
        _row(1.1, 1.2, 1.3, p=1, vs_numba=0.90, ws=2 * WS),
        _row(1.1, 1.2, 1.3, p=2, vs_numba=0.93, ws=2 * WS),
    ]  # fmt: skip
    v = timing_verdict(rows)
    assert set(v) == {
        "sizes", "passes", "parity_failures", "baseline_losses", "unrepeated_parity_failures",
        "unrepeated_losses", "bit_failures", "max_parity_dev", "min_ratio", "pass_spread", "ok",
    }  # fmt: skip
    assert _sizes(v["unrepeated_parity_failures"]) == [WS]
    assert _sizes(v["parity_failures"]) == [2 * WS]
    assert v["max_parity_dev"] == pytest.approx(0.10)  # |0.90 - 1|, below 1 counts as well
    assert v["min_ratio"] == 1.2


def test_each_pass_of_a_failure_is_written_out():
    a = _row(0.95, 0.97, 0.99, p=1, vs_numba=1.0625)
    b = _row(0.9, 0.96, 0.98, p=2, vs_numba=0.875)
    v = timing_verdict([a, b])
    (loss,) = v["baseline_losses"]
    assert pass_values(loss, "ratio") == ["0.970x [0.950, 0.990]", "0.960x [0.900, 0.980]"]
    assert pass_values(loss, "parity") == ["1.062x of Numba", "0.875x of Numba"]
    # a row of one pass, as a single timing writes it: its own value
    assert pass_values(a, "parity") == ["1.062x of Numba"]
    assert pass_values(a, "ratio") == ["0.970x [0.950, 0.990]"]


def test_the_pass_to_pass_spread_is_each_later_pass_against_the_first():
    rows = [_row(1.0, 1.00, 1.1, p=1), _row(1.0, 1.02, 1.1, p=2), _row(1.0, 0.97, 1.1, p=3),
            _row(1.0, 2.00, 2.1, p=1, ws=2 * WS), _row(1.0, 2.02, 2.1, p=2, ws=2 * WS)]  # fmt: skip
    s = timing_verdict(rows)["pass_spread"]
    # |1.02/1 - 1| = 0.02, |0.97/1 - 1| = 0.03, |2.02/2 - 1| = 0.01
    assert s["n"] == 3 and s["max"] == pytest.approx(0.03)
    assert s["median"] == pytest.approx(0.02) and s["p95"] == pytest.approx(0.029)


def test_a_repeated_loss_within_the_pass_to_pass_noise_is_labelled_and_still_fails():
    """The p95 of the movement between passes here is 4% (sizes c and d move 4%); size a
    loses twice by at most 0.4% (inside it), size b by 6% and 9% (outside): both fail."""
    a, b, c, d = WS, 2 * WS, 3 * WS, 4 * WS
    rows = [
        _row(0.985, 0.99, 0.995, p=1, ws=a), _row(0.99, 0.996, 0.998, p=2, ws=a),
        _row(0.93, 0.94, 0.95, p=1, ws=b), _row(0.90, 0.91, 0.92, p=2, ws=b),
        _row(1.0, 1.00, 1.1, p=1, ws=c), _row(1.0, 1.04, 1.1, p=2, ws=c),
        _row(1.0, 1.00, 1.1, p=1, ws=d), _row(1.0, 1.04, 1.1, p=2, ws=d),
    ]  # fmt: skip
    v = timing_verdict(rows)
    assert v["pass_spread"]["p95"] == pytest.approx(0.04, abs=0.002) and not v["ok"]
    assert {r["ws_bytes"]: r["within_noise"] for r in v["baseline_losses"]} == {a: True, b: False}
    one = timing_verdict([_row(0.985, 0.99, 0.995)])  # one pass: no noise measured
    assert one["baseline_losses"][0]["within_noise"] is False


_VERIFY = (
    "pass,mode,dtype,n,ws_bytes,config,gbps,vs_numba,ratio,ratio_lo,ratio_hi\n"
    "1,hot,fp32,8192,65536,a,55.7,0.995,1.077,1.076,1.078\n"
)


@pytest.mark.parametrize(
    "text, message",
    [
        (_VERIFY.split("\n")[0] + "\n", "no rows"),
        (_VERIFY.replace("55.7", "fast"), "field 'gbps': a value is missing or not a positive number"),
        (_VERIFY.replace("55.7", "0"), "field 'gbps': a value is missing or not a positive number"),
        (_VERIFY.replace("55.7", "-55.7"), "field 'gbps': a value is missing or not a positive number"),
        (_VERIFY.replace(",ratio_hi\n", "\n").replace(",1.078\n", "\n"), "field 'ratio_hi': column missing"),
    ],
    ids=["header-only", "not-a-number", "zero", "negative", "column-gone"],
)  # fmt: skip
def test_a_damaged_verify_table_names_the_file_the_field_and_the_fix(tmp_path, text, message):
    from sweeper.errors import SchemaError
    from sweeper.runfolder import VERIFY_CSV

    path = tmp_path / VERIFY_CSV
    path.write_text(text)
    with pytest.raises(SchemaError) as e:
        load_verify(tmp_path)
    assert str(e.value) == f"{path}: {message}; run `sweeper verify` again to rewrite it"


def test_one_size_in_two_modes_of_one_pass_is_not_a_size_listed_twice(tmp_path):
    from sweeper.runfolder import VERIFY_CSV

    (tmp_path / VERIFY_CSV).write_text(
        _VERIFY + _VERIFY.split("\n")[1].replace("hot", "cold") + "\n"
    )
    vt = load_verify(tmp_path)
    assert sorted(vt["mode"]) == ["cold", "hot"]
