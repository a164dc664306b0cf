"""sweeper.report.pairing: the baseline's time next to evict_last candidates vs the others."""

import pandas as pd

from sweeper.report.pairing import evict_last_contamination
from sweeper.report.report import pairing_check

MiB = 1 << 20


def _cells(ws, hint, base_us, k):
    return [
        {
            "role": "candidate",
            "status": "ok",
            "mode": "hot",
            "dtype": "fp32",
            "ws_bytes": ws,
            "load_hint": hint,
            "base_time_us": base_us + 0.001 * i,
        }  # fmt: skip
        for i in range(k)
    ]


def _run():
    rows = []
    rows += _cells(40 * MiB, "L2::evict_last", 10.5, 3) + _cells(40 * MiB, "default", 10.0, 3)
    rows += _cells(40 * MiB, "L2::evict_last:0.75", 10.5, 1)
    rows += _cells(200 * MiB, "L2::evict_last", 50.0, 3) + _cells(200 * MiB, "cs", 50.0, 2)
    rows += _cells(8 * MiB, "L2::evict_last", 2.0, 5) + _cells(8 * MiB, "cs", 2.0, 1)  # too few
    rows.append({**_cells(40 * MiB, "default", 99.0, 1)[0], "status": "mismatch"})  # not ok
    return pd.DataFrame(rows)


def test_a_slower_baseline_next_to_evict_last_candidates_is_flagged():
    out = evict_last_contamination(_run()).set_index("ws_bytes")
    assert list(out.index) == [40 * MiB, 200 * MiB]  # 8 MiB has one 'other' cell only
    r40 = out.loc[40 * MiB]
    assert abs(r40["slowdown"] - 10.5 / 10.001) < 1e-3 and bool(r40["flagged"])
    assert (r40["cells_el"], r40["cells_other"]) == (4, 3)  # fractional hints count as el
    assert not bool(out.loc[200 * MiB, "flagged"])


def test_report_says_whether_the_run_normalized_l2_between_slots():
    text = "\n".join(pairing_check(_run(), {"harness": {"l2_normalize_between_slots": True}}))
    assert "1 flagged" in text and "demoted the cell's L2 lines" in text and "| 40" in text
    old = "\n".join(pairing_check(_run(), {}))
    assert "did NOT demote" in old and "recorded before that guard" in old
    h = {"harness": {"l2_normalize_between_slots": False, "l2_normalize_error": "needs sm_80+"}}
    assert "could not run (needs sm_80+)" in "\n".join(pairing_check(_run(), h))


def test_no_comparable_cells():
    df = pd.DataFrame(_cells(40 * MiB, "default", 1.0, 3))
    assert evict_last_contamination(df).empty
    assert "No size has cells" in "\n".join(pairing_check(df, {}))


def test_permutation_p_exact_on_a_tiny_case():
    from sweeper.report.pairing import permutation_p

    # 4 values split 2 + 2: 6 splits; only {3, 4} vs {1, 2} reaches the observed ratio
    assert permutation_p([3.0, 4.0], [1.0, 2.0]) == 1 / 6
    assert permutation_p([1.0, 2.0], [3.0, 4.0]) == 1.0  # every split is >= the smallest


def test_permutation_p_separates_a_shift_from_noise():
    import numpy as np

    from sweeper.report.pairing import permutation_p

    rng = np.random.default_rng(1)
    base = rng.normal(10.0, 0.3, 40)
    shifted = permutation_p(base[:20] * 1.05, base[20:])  # 5% slower next to el: an effect
    same = permutation_p(base[:20], base[20:])
    assert shifted < 0.01 < 0.2 < same
    # Monte Carlo branch (C(40, 20) splits > EXACT_MAX) keeps p > 0
    assert shifted > 0


def test_flagged_sizes_carry_a_p_value():
    import math
    from itertools import combinations
    from statistics import median

    out = evict_last_contamination(_run()).set_index("ws_bytes")
    # an independent brute force over the C(7, 4) = 35 splits of the 40 MiB cells
    el = [10.5, 10.501, 10.502, 10.5]
    other = [10.0, 10.001, 10.002]
    pool = el + other
    obs = median(el) / median(other)
    splits = list(combinations(range(7), 4))
    hits = sum(
        median(pool[i] for i in c) / median(pool[i] for i in range(7) if i not in c) >= obs - 1e-12
        for c in splits
    )
    assert out.loc[40 * MiB, "p"] == hits / len(splits) and hits == 3  # even-size medians tie
    assert math.isnan(out.loc[200 * MiB, "p"])  # not flagged
    text = "\n".join(pairing_check(_run(), {}))
    assert "1 flagged" in text and "0 of them with p < 0.05" in text and "| 0.086 |" in text
