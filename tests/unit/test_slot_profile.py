"""lab/tools/slot_profile.py: a recorded cold or after-write sample's slot in its held round, read
back from the trial log; a profile planted in aw-4's trial records is found again."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from sweeper.analyze.store import with_records

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("slot_profile", ROOT / "lab/tools/slot_profile.py")
sp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sp)


def test_the_round_is_the_timers():
    """The tool's slot order is the one Bench.time_pair_blocked queues, candidate as A."""
    from sweeper.run.timers import round_slots

    src = (ROOT / "sweeper/run/timers.py").read_text()
    assert "slots = round_slots(first) * 2" in src and round_slots("A") * 2 == sp.ROUND
    assert 'before, launch = (before_a, a) if s == "A" else (before_b, b)' in src
    assert (sp.A_SLOTS, sp.B_SLOTS) == ((0, 3, 4, 7), (1, 2, 5, 6))


def _planted(planted_run, a_profile, b_profile, cells=40):
    """aw-4's first after-write candidate cells, as a run recorded in rounds of 8 records
    them: every sample replaced by side time x the slot's factor, two halves of two rounds
    each, and a manifest without `harness.blocked_samples_per_hold` (aw-4 held one sample at
    a time)."""

    def plant(t):
        return {**t, "sample_parts": [8, 8],
                "samples_us": [10.0 * a_profile[i % 4] for i in range(16)],
                "base_samples_us": [12.0 * b_profile[i % 4] for i in range(16)]}  # fmt: skip

    def manifest(m):
        del m["harness"]["blocked_samples_per_hold"]
        return m

    return planted_run("aw-4", plant, cells, manifest=manifest)


def test_a_planted_profile_is_read_back_per_side(planted_run):
    run = _planted(planted_run, (1.10, 1.14, 1.12, 1.0), (1.07, 1.08, 1.0, 1.0))
    rows = sp.profile([str(run)])
    assert rows and sum(r["cells"] for r in rows) == 40
    for r in rows:
        assert r["mode"] == "after-write"
        assert r["a_vs_last"] == pytest.approx({"slot0": 1.10, "slot3": 1.14, "slot4": 1.12})
        assert r["b_vs_last"] == pytest.approx({"slot1": 1.07, "slot2": 1.08, "slot5": 1.0})
    text = sp.markdown(rows)
    assert (
        "| after-write | fp32 | (0, 8] MiB | 40 | " in text
        and "| 1.100 1.140 1.120 | 1.070 1.080 1.000 |" in text
    )


def test_a_half_that_is_not_whole_rounds_is_left_out():
    assert sp.slot_means([1.0] * 6, [6]) is None
    assert sp.slot_means([1.0] * 8, [4, 3]) is None
    assert list(sp.slot_means([1, 2, 3, 4, 3, 4, 5, 6], [4, 4])) == [2, 3, 4, 5]


def test_a_run_held_one_sample_at_a_time_has_no_slots(planted_run):
    run = _planted(planted_run, (1.0,) * 4, (1.0,) * 4, cells=2)
    m = json.loads((run / "manifest.json").read_text())
    assert "blocked_samples_per_hold" not in m["harness"]  # recorded in rounds of 8
    m["harness"]["blocked_samples_per_hold"] = 1
    m.pop("records", None)  # and its records made again for the edited fields
    (run / "manifest.json").write_text(json.dumps(with_records(run, m)))
    with pytest.raises(SystemExit, match="held 1 at a time, not in rounds of 8"):
        sp.profile([str(run)])
