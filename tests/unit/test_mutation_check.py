"""tools/mutation_check.py: a run's survivors against the documented equivalent mutants, each
set of modules checked against its own listed mutants."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
DOC = """| mutant | the changed line | why |
|---|---|---|
| `sweeper.stats.x_f__mutmut_1` | x | equivalent |
| `sweeper.plan.planfile.xǁPlanǁsizes__mutmut_4` | y | another set's |
"""


def _check(tmp_path, results: str, *patterns: str):
    (tmp_path / "r.txt").write_text(results)
    (tmp_path / "doc.md").write_text(DOC)
    return subprocess.run(
        [sys.executable, str(ROOT / "tools/mutation_check.py"), str(tmp_path / "r.txt"),
         str(tmp_path / "doc.md"), *patterns],
        capture_output=True, text=True,
    )  # fmt: skip


def test_a_listed_survivor_passes_and_another_sets_list_is_left_aside(tmp_path):
    out = _check(tmp_path, "    sweeper.stats.x_f__mutmut_1: survived\n"
                           "    sweeper.stats.x_f__mutmut_2: killed\n")  # fmt: skip
    assert out.returncode == 0, out.stdout
    assert "2 mutants run: 1 killed, 1 not killed (1 documented as equivalent)" in out.stdout


def test_an_unlisted_survivor_and_a_listed_mutant_now_killed_fail(tmp_path):
    out = _check(tmp_path, "    sweeper.stats.x_f__mutmut_1: killed\n"
                           "    sweeper.stats.x_f__mutmut_3: survived\n")  # fmt: skip
    assert out.returncode == 1
    assert "NOT KILLED, NOT DOCUMENTED: sweeper.stats.x_f__mutmut_3" in out.stdout
    assert "DOCUMENTED BUT KILLED: sweeper.stats.x_f__mutmut_1" in out.stdout


def test_a_listed_mutant_that_no_longer_exists_in_its_module_fails(tmp_path):
    out = _check(tmp_path, "    sweeper.plan.planfile.x_make_plan__mutmut_1: killed\n")
    assert out.returncode == 1
    assert "DOCUMENTED BUT NOT RUN: sweeper.plan.planfile.xǁPlanǁsizes__mutmut_4" in out.stdout
