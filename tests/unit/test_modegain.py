"""Hot-only gains (sweeper.analyze.modegain) and their report lines, on synthetic results."""

from __future__ import annotations

import pandas as pd
import pytest

from sweeper.analyze.modegain import HOT_ONLY_MARGIN, MIN_SIZES, hot_only_lines, mode_gains
from sweeper.report.report import hot_only, hot_only_warning

L2 = 60 * 2**20


def rows(config: str, mode: str, ratios: dict[float, float], status: str = "ok") -> list[dict]:
    """Candidate rows at working sets given in units of L2."""
    return [
        {
            "mode": mode,
            "dtype": "fp32",
            "config": config,
            "role": "candidate",
            "status": status,
            "ws_bytes": int(x * L2),
            "ratio": r,
        }  # fmt: skip
        for x, r in ratios.items()
    ]


BEYOND = (2.0, 2.5, 3.0, 4.0, 5.3)  # >= 2 x L2
INSIDE = (0.6, 0.7, 0.8)  # resident: hot gains are real there


def frame(*parts: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([r for p in parts for r in p])


@pytest.fixture
def results() -> pd.DataFrame:
    return frame(
        # the stateful cheat of the issue: 1.100x hot, 0.975x after a write
        rows("cheat", "hot", {x: 1.100 for x in BEYOND}),
        rows("cheat", "after-write", {x: 0.975 for x in BEYOND}),
        # honest: 1.5x hot inside L2, 1.1x after a write; the same beyond 2 x L2
        rows("honest", "hot", {**{x: 1.5 for x in INSIDE}, **{x: 1.02 for x in BEYOND}}),
        rows("honest", "after-write", {**{x: 1.1 for x in INSIDE}, **{x: 1.01 for x in BEYOND}}),
        # above the margin at too few sizes
        rows("sparse", "hot", {x: 1.2 for x in BEYOND[: MIN_SIZES - 1]}),
        rows("sparse", "after-write", {x: 1.0 for x in BEYOND[: MIN_SIZES - 1]}),
    )


def test_a_hot_only_gain_beyond_twice_l2_is_flagged_and_nothing_else(results):
    got = {(r["config"], r["range"]): r for r in mode_gains(results, L2)}
    cheat = got[("cheat", ">= 2 L2")]
    assert (
        cheat["flagged"] and cheat["sizes"] == len(BEYOND) and cheat["other_mode"] == "after-write"
    )
    assert cheat["excess"] == pytest.approx(1.100 / 0.975 - 1)
    assert not got[("honest", "L2/2 - L2")]["flagged"]  # +36% inside L2: real
    assert not got[("honest", ">= 2 L2")]["flagged"]
    assert not got[("sparse", ">= 2 L2")]["flagged"]
    assert [k for k, r in got.items() if r["flagged"]] == [("cheat", ">= 2 L2")]


def test_the_margin_is_the_edge():
    at = 1 + HOT_ONLY_MARGIN
    for hot, flagged in ((at * 0.999, False), (at * 1.001, True)):
        r = frame(rows("c", "hot", {x: hot for x in BEYOND}),
                  rows("c", "cold", {x: 1.0 for x in BEYOND}))  # fmt: skip
        (g,) = mode_gains(r, L2)
        assert g["flagged"] is flagged and g["other_mode"] == "cold"


def test_cells_that_are_not_ok_and_sizes_one_mode_lacks_are_left_out():
    r = frame(
        rows("c", "hot", {x: 1.3 for x in BEYOND}),
        rows("c", "after-write", {x: 1.0 for x in BEYOND[:2]}),
        rows("c", "after-write", {x: 1.0 for x in BEYOND[2:]}, status="mismatch"),
    )
    (g,) = mode_gains(r, L2)
    assert g["sizes"] == 2 and not g["flagged"]


def test_a_run_of_one_mode_says_nothing(results):
    hot = results[results["mode"] == "hot"]
    assert mode_gains(hot, L2) == [] and hot_only_lines(hot, L2) == []


def test_a_run_of_hot_mode_alone_says_the_check_was_not_made_and_an_audit_warns(results):
    hot = results[results["mode"] == "hot"]
    manifest = {"device": {"l2_bytes": L2}, "modes": ["hot"]}
    text = "\n".join(hot_only(hot, manifest))
    assert "### Hot-only gains" in text and "hot mode alone" in text
    assert "--modes hot,after-write" in text
    assert hot_only_warning(hot, manifest) == []  # not an audit: no kernel of a user's
    warning = "\n".join(hot_only_warning(hot, {**manifest, "external": [{"config": "cheat"}]}))
    assert "**Hot mode alone**" in warning and "--modes hot,after-write" in warning
    # a run of after-write alone has nothing to say about hot gains
    aw = results[results["mode"] == "after-write"]
    assert hot_only(aw, {"device": {"l2_bytes": L2}, "modes": ["after-write"]}) == []


def test_the_report_lists_the_flag_and_an_audit_warns_on_its_first_screen(results):
    manifest = {"device": {"l2_bytes": L2}, "external": [{"config": "cheat"}]}
    text = "\n".join(hot_only(results, manifest))
    assert "**1 hot-only gain(s)**" in text and "`cheat`" in text and "**hot only**" in text
    warning = "\n".join(hot_only_warning(results, manifest))
    assert "Hot-only gain" in warning and "hot 1.100x, after-write 0.975x" in warning
    honest = {"device": {"l2_bytes": L2}, "external": [{"config": "honest"}]}
    assert hot_only_warning(results, honest) == []
    assert "`honest`" in "\n".join(hot_only(results, honest))  # a user's kernel is shown


def test_the_shipped_hot_and_after_write_runs_flag_nothing():
    """hot-7 and aw-4 (the same plan, honest configs): from 2 x L2 on, every dtype-config pair
    measured at MIN_SIZES or more common sizes reads within -1.4% to +0.3% (the figure in
    docs/external-kernels.md), far inside the margin."""
    from sweeper.analyze.store import load_run

    both = pd.concat([load_run(f"results/h200/{r}").results for r in ("hot-7", "aw-4")])
    gains = mode_gains(both, 62914560)
    beyond = [g for g in gains if g["range"] == ">= 2 L2" and g["sizes"] >= MIN_SIZES]
    assert len(beyond) == 31 and not any(g["flagged"] for g in gains)
    assert round(min(g["excess"] for g in beyond), 3) == -0.014
    assert round(max(g["excess"] for g in beyond), 3) == 0.003
