"""The batch-position test (sweeper.analyze.position) on synthetic candidate rows."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from sweeper.analyze.position import position_effect, position_line

CONFIGS = [f"v16-u{u}-b{b}" for u in (1, 2, 4) for b in (128, 256, 512, 1024)]  # 12
SIZES = [1 << k for k in range(18, 26, 2)]  # 4 sizes


def rows(
    ramp_pct: float = 0.0,
    first_pct: float = 0.0,
    noise: float = 0.004,
    config_spread: float = 0.0,
    size_spread: float = 0.0,
    order: str = "shuffled",
    seed: int = 1,
    repeats: int = 3,
) -> pd.DataFrame:
    """Candidate rows: per (dtype, size) `repeats` batches of all CONFIGS; log(ratio) = size
    effect + config effect + ramp over the batch + noise. `order`: "shuffled" (a new order per
    batch), "fixed" (the same order every batch), "mostly" (fixed with a few swaps)."""
    rng = np.random.default_rng(seed)
    cfg_eff = dict(zip(CONFIGS, rng.normal(0, config_spread, len(CONFIGS)), strict=True))
    out, batch = [], 0
    for dtype in ("fp32", "fp16"):
        for n in SIZES:
            size_eff = rng.normal(0, size_spread)
            for _ in range(repeats):
                if order == "shuffled":
                    cfgs = list(rng.permutation(CONFIGS))
                else:
                    cfgs = list(CONFIGS)
                    if order == "mostly":
                        for _ in range(3):
                            i, j = rng.integers(0, len(cfgs), 2)
                            cfgs[i], cfgs[j] = cfgs[j], cfgs[i]
                k = len(cfgs)
                for pos, cfg in enumerate(cfgs):
                    y = size_eff + cfg_eff[cfg] + math.log1p(ramp_pct / 100) * pos / (k - 1)
                    y += math.log1p(first_pct / 100) * (pos == 0) + rng.normal(0, noise)
                    out.append(
                        dict(
                            mode="hot",
                            dtype=dtype,
                            n=n,
                            config=cfg,
                            role="candidate",
                            status="ok",
                            ratio=math.exp(y),
                            batch=batch,
                            batch_pos=pos,
                            batch_cells=k,
                        )  # fmt: skip
                    )
                batch += 1
    return pd.DataFrame(out)


def test_no_effect_is_none_found():
    r = position_effect(rows())
    assert r["verdict"] == "none found"
    assert r["cells"] == 2 * 4 * 3 * 12 and r["batches"] == 24
    lo, hi = r["ci_pct"]
    assert lo < 0 < hi or abs(r["effect_pct"]) < 1.0
    assert abs(r["effect_pct"]) < 0.5


@pytest.mark.parametrize("ramp", [2.0, -2.0])
def test_an_injected_2pct_ramp_is_detected_with_its_sign_and_size(ramp):
    r = position_effect(rows(ramp_pct=ramp, config_spread=0.2, size_spread=0.3))
    assert r["verdict"] == "position effect"
    assert r["effect_pct"] == pytest.approx(ramp, abs=0.4)
    lo, hi = r["ci_pct"]
    assert lo <= r["effect_pct"] <= hi and (lo > 0 if ramp > 0 else hi < 0)


def test_large_config_and_size_effects_independent_of_position_are_none_found():
    r = position_effect(rows(config_spread=0.3, size_spread=0.5))
    assert r["verdict"] == "none found"
    assert abs(r["effect_pct"]) < 0.5


def test_a_ramp_is_measured_when_configs_keep_nearly_the_same_places():
    """Config correlated with position: the fixed effects are removed from the position too,
    so the config effects neither absorb the ramp nor pass for one."""
    ramp = position_effect(rows(ramp_pct=2.0, config_spread=0.3, order="mostly", repeats=6))
    assert ramp["verdict"] == "position effect"
    assert ramp["effect_pct"] == pytest.approx(2.0, abs=0.6)
    flat = position_effect(rows(config_spread=0.3, order="mostly", repeats=6))
    assert flat["verdict"] == "none found"


def test_a_fixed_order_cannot_be_told_apart_from_config():
    r = position_effect(rows(ramp_pct=2.0, order="fixed"))
    assert r["verdict"] is None and "config" in r["why"]


def test_a_slow_first_cell_shows_in_first_vs_rest():
    r = position_effect(rows(first_pct=-3.0))
    assert r["first_vs_rest_pct"] == pytest.approx(-3.0, abs=0.5)
    assert abs(position_effect(rows())["first_vs_rest_pct"]) < 0.5


def test_rows_without_batch_fields_are_not_measured():
    d = rows().drop(columns=["batch", "batch_pos", "batch_cells"])
    r = position_effect(d)
    assert r["verdict"] is None and "one at a time" in r["why"]
    # the table's columns present but empty (a classic run read through the results table)
    d = rows().assign(batch=pd.NA, batch_pos=pd.NA, batch_cells=pd.NA)
    assert position_effect(d)["verdict"] is None
    assert position_line(position_effect(d)).startswith("**Batch position: not measured.**")


def test_only_ok_candidate_rows_count():
    d = rows(ramp_pct=2.0)
    bad = d.sample(frac=0.2, random_state=0).index
    d.loc[bad, "status"] = "mismatch"
    d.loc[bad, "ratio"] = 100.0  # would swamp the fit if it were used
    r = position_effect(d)
    assert r["cells"] == len(d) - len(bad)
    assert r["effect_pct"] == pytest.approx(2.0, abs=0.4)


def test_deterministic_and_takes_dicts():
    d = rows(ramp_pct=1.0)
    assert position_effect(d) == position_effect(d.to_dict("records"))


def test_the_line_names_verdict_effect_and_ci():
    line = position_line(position_effect(rows(ramp_pct=2.0)))
    assert line.startswith("**Batch position: position effect.** ")
    assert "95% CI" in line and "24 batches" in line
