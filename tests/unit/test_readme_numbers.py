"""Every number the README states about a shipped run is derived from that run's files.

Two ways to state one (tools/doc_numbers.py has the derivations, `RunFiles`):

* a generated block, `<!-- generated: NAME ARG... -->` ... `<!-- end -->`, written by
  `python tools/doc_numbers.py --write`; `test_the_generated_blocks_are_current` fails when
  a run's files and the block disagree;
* a sentence of prose: add it to CLAIMS below as (file, a function of the runs' files that
  returns the exact text the file must contain). `test_every_claim_holds` checks it.

`test_no_number_in_a_results_section_is_underived` scans the README's results sections
(headings with "Results") for numbers outside the blocks and fails on any that no claim
covers: a new figure about a run needs a block or a claim. docs/*.md can use both ways too:
a block anywhere in them, a claim here with its file.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("doc_numbers", ROOT / "tools/doc_numbers.py")
dn = importlib.util.module_from_spec(_spec)
sys.modules["doc_numbers"] = dn
_spec.loader.exec_module(dn)

from sweeper.units import MiB  # noqa: E402


def _l2_mib() -> str:
    l2 = {dn.run_files(r).manifest["device"]["l2_bytes"] for r in ("hot-7", "aw-4", "cold-6")}
    (only,) = l2  # the three runs are of one GPU
    return f"L2 = {only / MiB:g} MiB"


# (file, derive): derive() is the exact text the file states
CLAIMS: list[tuple[str, callable]] = [
    ("README.md", _l2_mib),
]


@pytest.mark.parametrize("file, derive", CLAIMS, ids=[f"{f}:{d.__name__}" for f, d in CLAIMS])
def test_every_claim_holds(file, derive):
    text = derive()
    assert text in (ROOT / file).read_text(), f"{file} does not say {text!r}"


def test_the_generated_blocks_are_current():
    assert not dn.stale_blocks(), "run `python tools/doc_numbers.py --write`"


def test_the_readme_has_the_headline_blocks():
    text = (ROOT / "README.md").read_text()
    specs = {m.group(2) for m in dn._BLOCK.finditer(text)}
    assert {"ratio-table hot-7 aw-4 cold-6", "run-facts hot-7 aw-4 cold-6"} <= specs, specs


def test_a_changed_number_in_a_block_is_caught():
    text = (ROOT / "README.md").read_text()
    assert "| fp32 | [hot](results/h200/hot-7/REPORT.md) | " in text
    planted = text.replace(
        "| fp32 | [hot](results/h200/hot-7/REPORT.md) | ",
        "| fp32 | [hot](results/h200/hot-7/REPORT.md) | 9",
    )
    assert dn.stale_in(planted) == ["ratio-table hot-7 aw-4 cold-6"]
    assert "bands per dtype: fp32 7, fp16 8" in text.lower()
    assert dn.stale_in(text.replace("fp16 8, bf16 7", "fp16 7, bf16 7", 1)) == [
        "run-facts hot-7 aw-4 cold-6"
    ]


# a number standing alone (not in hot-7, fp32 or H200), with its unit suffix: 1.23x, 2.5%, 976 s
_NUMBER = re.compile(r"(?<![\w.-])\d+(?:[.,]\d+)*(?:x|%)?(?![\w-]|[.,]\d)")
_LINK_TARGET = re.compile(r"\]\([^)]*\)")
_CODE = re.compile(r"`[^`]*`")


def results_sections(text: str) -> list[str]:
    """The text of every `## ...Results...` section, up to the next `## ` heading."""
    parts = re.split(r"^(?=## )", text, flags=re.M)
    return [p for p in parts if p.startswith("## ") and "Results" in p.splitlines()[0]]


def underived(readme: str) -> list[str]:
    """Numbers in the README's results sections, outside the generated blocks, that no claim
    of CLAIMS states."""
    covered = " ".join(derive() for f, derive in CLAIMS if f == "README.md")
    out = []
    for sec in results_sections(dn.outside_blocks(readme)):
        prose = _CODE.sub(" ", _LINK_TARGET.sub("]", sec))
        for line in prose.splitlines():
            for n in _NUMBER.findall(line):
                if not re.search(rf"(?<![\w.-]){re.escape(n)}(?![\w-]|[.,]\d)", covered):
                    out.append(f"{n!r} in: {line.strip()[:90]}")
    return out


def test_no_number_in_a_results_section_is_underived():
    readme = (ROOT / "README.md").read_text()
    assert results_sections(readme), "the README has no results section"
    assert not underived(readme)


def test_the_scan_sees_an_underived_number():
    readme = (ROOT / "README.md").read_text()
    planted = readme.replace(
        "## Results on the H200\n", "## Results on the H200\n\nThe header is 1.23x torch.\n"
    )
    assert [u.split()[0] for u in underived(planted)] == ["'1.23x'"]
    assert [u.split()[0] for u in underived(readme.replace("L2 = 60", "L2 = 61"))] == ["'61'"]


@pytest.mark.parametrize("run", ["hot-7", "aw-4", "cold-6"])
def test_the_derivations_agree_with_verifys_own_printout(run):
    """The figures tools/doc_numbers.py derives from verify_timing.csv are the ones
    `sweeper verify` printed into verify.txt from the same timings (its verdict's rule: a size
    loses when its CI is below 1 in every pass)."""
    r = dn.run_files(run)
    text = r.verify_text
    head = re.search(
        r"timing \((\S+)\): (\d+) sizes x (\d+) passes; export vs its Numba variant: max "
        r"deviation ([\d.]+)%; vs baseline: min ratio ([\d.]+)x",
        text,
    )
    assert head, text[:300]
    assert head.group(1) == r.mode
    assert int(head.group(2)) == r.sizes and int(head.group(3)) == r.passes
    assert f"{100 * r.max_vs_numba:.1f}" == head.group(4)
    assert f"{r.min_ratio:.3f}" == head.group(5)
    spread = re.search(r"moved by a median ([\d.]+)%, p95 ([\d.]+)%, max ([\d.]+)%", text)
    assert [f"{100 * x:.2f}" for x in r.pass_spread] == list(spread.groups())
    loses = [(d, int(b)) for d, b in re.findall(r"^LOSES (\w+) (\d+) B:", text, re.M)]
    once = [(d, int(b)) for d, b in re.findall(r"^lost once (\w+) (\d+) B:", text, re.M)]
    assert sorted(loses) == r.losses
    assert sorted(once) == r.losses_in_one_pass


def test_cells_count_every_row_of_the_trial_log():
    """A cell is one row of trials.jsonl: candidate, baseline and copy rows, one per config,
    size and mode; the candidate cells are part of them."""
    r = dn.run_files("hot-7")
    roles = {role for role, _ in r.trial_counts}
    assert roles == {"candidate", "baseline", "copy"}
    per_size = {role: n for (role, _), n in r.trial_counts.items() if role != "candidate"}
    assert per_size == {"baseline": r.sizes, "copy": r.sizes}
    assert r.cells == r.candidate_cells + 2 * r.sizes
