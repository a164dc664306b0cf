"""The slot test (sweeper.analyze.position.segment_start): a round's first candidate sample
against its second, on synthetic hot rows and on the recorded executor A/B."""

from __future__ import annotations

import json
import lzma
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sweeper.analyze.position import segment_line, segment_start
from sweeper.run.timers import round_slots

ROOT = Path(__file__).resolve().parents[2]


def hot_rows(first_pct: float = 0.0, cells: int = 200, rounds: int = 2, noise: float = 0.005,
             seed: int = 0, base_first_pct: float = 0.0) -> pd.DataFrame:  # fmt: skip
    """Hot candidate rows timed in ABBA then BAAB halves of `rounds` rounds: the first a-slot of
    every round reads `first_pct` slower (b: `base_first_pct`)."""
    rng = np.random.default_rng(seed)
    out = []
    for c in range(cells):
        ta, tb = 8.0 * (1 + 0.1 * rng.random()), 8.0
        a, b = [], []
        for first in "AB":
            for _ in range(rounds):
                seen = {"A": 0, "B": 0}
                for side in round_slots(first):
                    t, f = (ta, first_pct) if side == "A" else (tb, base_first_pct)
                    v = t * (1 + f / 100 * (seen[side] == 0)) * math.exp(rng.normal(0, noise))
                    (a if side == "A" else b).append(v)
                    seen[side] += 1
        out.append(dict(mode="hot", role="candidate", status="ok", config=f"c{c}",
                        samples_us=a, base_samples_us=b, sample_parts=[2 * rounds] * 2))  # fmt: skip
    return pd.DataFrame(out)


def test_a_planted_first_slot_effect_is_found_and_sized():
    r = segment_start(hot_rows(first_pct=4.0))
    assert r["verdict"] == "slot effect" and r["cells"] == 200
    assert r["effect_pct"] == pytest.approx(4.0, abs=0.3)
    assert r["ci_pct"][0] < r["effect_pct"] < r["ci_pct"][1]
    assert abs(r["base_pct"]) < 0.3


def test_no_effect_none_found_and_the_baseline_is_apart():
    r = segment_start(hot_rows(base_first_pct=3.0))
    assert r["verdict"] == "none found" and abs(r["effect_pct"]) < 0.3
    assert r["base_pct"] == pytest.approx(3.0, abs=0.3)


def test_an_effect_below_the_floor_is_not_a_verdict():
    r = segment_start(hot_rows(first_pct=0.5, noise=0.001))
    assert r["ci_pct"][0] > 0 and r["verdict"] == "none found"


def test_rows_that_cannot_count_are_left_out():
    d = hot_rows(first_pct=4.0, cells=60)
    d.loc[0:9, "status"] = "mismatch"
    d.loc[10:19, "mode"] = "cold"
    d.loc[20, "sample_parts"] = [3, 3]  # does not add up to the 8 samples
    d.loc[21, "sample_parts"] = [8, 0]  # a half with no pair
    d.at[22, "samples_us"] = None
    assert segment_start(d)["cells"] == 60 - 23


def test_without_samples_not_measured():
    d = hot_rows().drop(columns=["samples_us"])
    r = segment_start(d)
    assert r["verdict"] is None
    assert segment_line(r).startswith("**Slot order: not measured.** No per-sample")
    assert segment_start(pd.DataFrame())["verdict"] is None


def test_the_line_names_verdict_effect_ci_and_baseline():
    line = segment_line(segment_start(hot_rows(first_pct=4.0)))
    assert line.startswith("**Slot order: slot effect.** ")
    assert "95% CI" in line and "200 cells" in line and "the baseline's" in line


def _trials(run: str) -> pd.DataFrame:
    with lzma.open(ROOT / run / "trials.jsonl.xz", "rt") as f:
        return pd.DataFrame([json.loads(line) for line in f])


def test_the_recorded_ab_batched_run_without_the_settle_replay_has_the_effect():
    """lab/h200/no-settle-ab/batched was timed by a batched executor with no settle replay:
    its first a-sample reads several % slow; the classic run of the same sweep has none."""
    b = segment_start(_trials("lab/h200/no-settle-ab/batched"))
    c = segment_start(_trials("lab/h200/no-settle-ab/classic"))
    assert b["verdict"] == "slot effect" and b["effect_pct"] > 3
    assert c["verdict"] == "none found" and abs(c["effect_pct"]) < 1


def test_the_recorded_ab_batched_run_with_the_settle_replay_has_none():
    """lab/h200/slot-graphs/batched, the same sweep with the settle replay (and slot graphs): no slot effect, and
    the candidates' first a-sample within a fraction of a percent of the second."""
    b = segment_start(_trials("lab/h200/slot-graphs/batched"))
    assert b["verdict"] == "none found" and abs(b["effect_pct"]) < 0.5
