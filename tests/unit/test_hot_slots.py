"""lab/tools/hot_slots.py --recorded: a recorded hot sample's slot in its A B B A round, read back
from the trial log; a planted order effect is found again, and what it did to the ratio."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("hot_slots", ROOT / "lab/tools/hot_slots.py")
hs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hs)


def test_the_round_is_the_hot_timers():
    """The hot timer's round is A B B A, or B A A B where side b goes first, so a side's
    samples alternate between two slots: one after itself, one after the other side."""
    from sweeper.run.timers import round_slots

    assert "slots = round_slots(first)\n" in (ROOT / "sweeper/run/timers.py").read_text()
    assert (round_slots("A"), round_slots("B")) == ("ABBA", "BAAB")


def test_a_half_with_side_b_first_reads_each_sides_places_from_its_slots():
    """In a B A A B half side A's samples after itself are its slot 2 (odd samples), side B's
    its slot 0 (even ones)."""
    a = [1.0, 2.0, 1.0, 2.0]  # slot 1 (after B), slot 2 (after A), ...
    b = [3.0, 4.0, 3.0, 4.0]  # slot 0 (after B), slot 3 (after A), ...
    ((ha, hb, a0, a3, b1, b2),) = hs.halves(a, b, [4], ("b",))
    assert list(a0) == [2.0, 2.0] and list(a3) == [1.0, 1.0]
    assert list(b1) == [4.0, 4.0] and list(b2) == [3.0, 3.0]
    ((_, _, a0, a3, b1, b2),) = hs.halves(a, b, [4], ("a",))
    assert list(a0) == [1.0, 1.0] and list(b2) == [4.0, 4.0]


def _planted(planted_run, after_other_a=1.05, after_other_b=1.03, cells=30):
    """hot-7's first hot candidate cells at 20-40 MiB with every sample replaced, in a run
    that put side A first in both halves (the manifest's `halves_first_side` set so): two
    halves of four rounds; side A's slot 3 and the first round's slot 0 (both after side B)
    slow by after_other_a, side B's slot 1 (after side A) slow by after_other_b."""
    half_a = [10.0 * (after_other_a if i == 0 or i % 2 else 1.0) for i in range(8)]
    half_b = [12.0 * (after_other_b if i % 2 == 0 else 1.0) for i in range(8)]

    def plant(t):
        return {**t, "sample_parts": [8, 8], "samples_us": half_a * 2,
                "base_samples_us": half_b * 2}  # fmt: skip

    def a_first(m):
        return {**m, "harness": {**m["harness"], "halves_first_side": ["a", "a"]}}

    return planted_run(
        "hot-7",
        plant,
        cells,
        pick=lambda t: 20 * 2**20 < t["ws_bytes"] <= 40 * 2**20,
        manifest=a_first,
    )


def test_the_slots_and_the_ratio_they_moved_are_read_back(planted_run):
    rows = hs.recorded(str(_planted(planted_run)))
    assert sum(r["cells"] for r in rows) == 30
    for r in rows:
        assert r["a3_over_a0"] == pytest.approx(1.05)
        assert r["b1_over_b2"] == pytest.approx(1.03)
        # side A's median takes the slow cluster (5 of 8), side B's the middle (4 of 8):
        # the ratio from each side's samples after itself is 1.05 / 1.015 of the recorded
        assert r["own_over_recorded"] == pytest.approx(1.05 / 1.015, abs=1e-4)  # rounded to 4


def test_without_an_order_effect_nothing_moves(planted_run):
    rows = hs.recorded(str(_planted(planted_run, 1.0, 1.0)))
    assert rows and all(
        (r["a3_over_a0"], r["b1_over_b2"], r["own_over_recorded"]) == (1.0, 1.0, 1.0) for r in rows
    )
