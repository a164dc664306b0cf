"""The tracked tree as a user reads it: every relative link resolves, the kernels layer stands
alone, and nothing narrates how the project was developed."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def tracked() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return [ROOT / p for p in out.splitlines() if (ROOT / p).exists()]


def text_files(suffixes=(".md", ".py", ".sh", ".toml", ".cuh", ".ipynb", ".tmpl", ".txt")):
    return [p for p in tracked() if p.suffix in suffixes or p.name in ("run", ".gitignore")]


_MD_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_every_relative_link_in_markdown_resolves():
    broken = []
    for p in text_files((".md",)):
        for target in _MD_LINK.findall(p.read_text()):
            if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                continue
            if not (p.parent / target).exists():
                broken.append(f"{p.relative_to(ROOT)} -> {target}")
    assert not broken, broken


_PATH = re.compile(
    r"(?<![\w./:-])((?:sweeper|kernels|scripts|tools|tests|docs|results|sweeps|notebooks|lab)"
    r"/[\w./-]*\w)"
)


def _run_folder_file(rel: Path) -> bool:
    """A file inside a run or study folder (results/<gpu>/<run>/..., lab/<gpu>/<study>/...):
    the record of what that run measured, which names what it was made from."""
    return rel.parts[0] in ("results", "lab") and len(rel.parts) > 3


def test_every_repository_path_named_in_docs_exists():
    """Paths like `scripts/sweep.sh` or `results/h200/hot-7/REPORT.md` in the docs, code,
    comments and templates name files that exist (generated files of a run folder excepted)."""
    generated = re.compile(r"(\.svg|results\.csv|<|\*)")
    missing = []
    docs = [
        p
        for p in text_files((".md", ".py", ".sh", ".cuh", ".tmpl"))
        if not _run_folder_file(p.relative_to(ROOT))
        and not (p.is_relative_to(ROOT / "tests") and p.suffix == ".py")  # fixtures name temp paths
    ]
    for p in docs:
        text = p.read_text()
        for m in _PATH.finditer(text):
            name = m.group(1)
            if generated.search(text[m.start() : m.end() + 2]) or (ROOT / name).exists():
                continue
            missing.append(f"{p.relative_to(ROOT)}: {name}")
    assert not missing, missing


# the product runs and the one record that results/ holds; everything else is lab/ or history
PRODUCT_RUNS = {"hot-7", "aw-4", "cold-6"}
RECORDS = {"gpu-suite"}
_SCRIPT = {".py", ".sh", ".ipynb", ".cu"}


def test_results_holds_the_product_runs_only():
    folders = {
        p.relative_to(ROOT / "results") for p in (ROOT / "results").glob("*/*") if p.is_dir()
    }
    assert folders, "no run folders under results/"
    stray = sorted(str(f) for f in folders if f.name not in PRODUCT_RUNS | RECORDS)
    assert not stray, f"not a product run (move it to lab/): {stray}"
    names = {f.name for f in folders}
    assert names >= PRODUCT_RUNS, PRODUCT_RUNS - names
    scripts = [
        str(p.relative_to(ROOT))
        for p in tracked()
        if p.is_relative_to(ROOT / "results")
        and (p.suffix in _SCRIPT or (p.stat().st_mode & 0o111 and p.is_file()))
        and not p.name.startswith("relu_policy.")  # the exported header and its Python twin
    ]
    assert not scripts, f"scripts belong in tools/ or lab/tools/: {scripts}"


def doc_files() -> list[Path]:
    """The documents a user reads: README, CONTRIBUTING, docs/, the results and lab indexes,
    examples' and notebooks' notes (a run folder's own REPORT.md is a record, not a doc)."""
    return [
        p
        for p in text_files((".md",))
        if not _run_folder_file(p.relative_to(ROOT)) and p.name != "CHANGELOG.md"
    ]


# 7-40 hex digits with a letter and a digit: a commit, unless it is one of these
_HEX = re.compile(r"(?<![\w-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w-])")
NOT_COMMITS = {
    "c3e620e4ee88",  # sweeps/h200.json's plan hash (results/h200/README.md)
}


def test_no_doc_line_cites_a_commit():
    """A doc speaks about the tree as it is: a fact with its number and the command that
    measures it, never a commit that holds an earlier state (provenance.json records those)."""
    hits = []
    for p in doc_files():
        for i, line in enumerate(p.read_text().splitlines(), 1):
            for h in _HEX.findall(line):
                if h not in NOT_COMMITS:
                    hits.append(f"{p.relative_to(ROOT)}:{i}: {h}")
    assert not hits, hits


def test_the_tracked_tree_stays_small():
    total = sum(p.stat().st_size for p in tracked() if p.is_file())
    assert total <= 30 * 10**6, f"{total / 10**6:.1f} MB tracked (at most 30 MB)"


_NARRATIVE = re.compile(
    r"\b(session|lease|lent|device call|call [1-9]\b|park\.sh|our h200)", re.IGNORECASE
)


def test_nothing_tracked_narrates_the_development():
    hits = []
    for p in [*text_files(), *tracked()]:
        rel = str(p.relative_to(ROOT))
        if _NARRATIVE.search(rel):
            hits.append(rel)
        if p.suffix in (".gz", ".png", ".pdf") or rel.startswith("results/") and p.suffix == ".csv":
            continue
        if p == Path(__file__):
            continue
        for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            if _NARRATIVE.search(line):
                hits.append(f"{rel}:{i}: {line.strip()[:100]}")
    assert not hits, hits


@pytest.mark.parametrize(
    "pattern, home",
    [
        (r"^\s*DTYPES\b.*=\s*[\(\[{]", "kernels/dtypes.py"),
        (r"^\s*ITEMSIZE\b.*=\s*\{", "kernels/dtypes.py"),
        (r"^\s*(KiB|MiB|GiB)\s*=", "sweeper/units.py"),
        (r"^def (fmt_bytes|fmt_mib|_mib|_bytes|_fmt_bytes)\(", "sweeper/units.py"),
        (r"^def ok_candidates\(", "sweeper/analyze/select.py"),
        (r'^\s*Hint\("load", "cs"', "kernels/hints.py"),
        (r"^(MANIFEST|TRIALS|POLICY|REPORT|SELECTION_CSV|VERIFY_CSV)\s*=", "sweeper/runfolder.py"),
    ],
)
def test_each_fact_has_one_definition(pattern, home):
    where = [
        str(p.relative_to(ROOT))
        for p in tracked()
        if p.suffix == ".py" and not p.is_relative_to(ROOT / "tests")
        and not p.is_relative_to(ROOT / "results")
        and re.search(pattern, p.read_text(), flags=re.M)
    ]  # fmt: skip
    assert where == [home], where


# code a user runs or reads beside the docs; lab/tools are the probes that made the studies,
# and their docstrings name the runs they read (as the studies' provenance.json does)
_USER_CODE = ("tools", "scripts", "notebooks", "examples")
_RUN_NAME = re.compile(r"\b((?:hot|cold|aw|after-write)-\d+|aw-fp32(?:-\d+)?)\b")


def test_every_run_named_is_a_folder_here():
    """A run name (hot-N, cold-N, aw-N) in a doc, an index or the code a user runs names a
    folder under results/ or lab/. A run or study folder's own files are the record of what it
    measured and read (its provenance.json says where those runs live) and are not read here."""
    runs = {p.name for top in ("results", "lab") for p in (ROOT / top).glob("*/*") if p.is_dir()}
    stray = []
    code = [
        p
        for p in text_files((".py", ".sh", ".ipynb"))
        if p.relative_to(ROOT).parts[0] in _USER_CODE
    ]
    for p in [*doc_files(), *code]:
        rel = p.relative_to(ROOT)
        for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            for name in _RUN_NAME.findall(line):
                if name not in runs:
                    stray.append(f"{rel}:{i}: {name}")
    assert not stray, stray


def test_importing_sweeper_silences_numbas_low_occupancy_warning_unless_set():
    import os
    import subprocess
    import sys

    code = "import os, sweeper; print(os.environ['NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS'])"
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "0", out.stderr
    env["NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS"] = "1"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "1", out.stderr
