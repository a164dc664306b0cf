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
    r"(?<![\w./:-])((?:sweeper|kernels|scripts|tools|tests|docs|results|sweeps|notebooks)"
    r"/[\w./-]*\w)"
)
# a paragraph that cites a commit ("commit 8a32559", "git show 8a32559:PATH") names paths and
# runs of that commit's tree
_CITES_COMMIT = re.compile(r"(?:commit|git show)\s+[0-9a-f]{7}")


def test_every_repository_path_named_in_docs_exists():
    """Paths like `scripts/sweep.sh` or `results/h200/hot-7/REPORT.md` in the docs, code,
    comments and templates name files that exist (generated files of a run folder excepted)."""
    generated = re.compile(r"(\.svg|results\.csv|<|\*)")
    missing = []
    docs = [
        p
        for p in text_files((".md", ".py", ".sh", ".cuh", ".tmpl"))
        if not p.is_relative_to(ROOT / "results")
        and not (p.is_relative_to(ROOT / "tests") and p.suffix == ".py")  # fixtures name temp paths
    ]
    for p in docs:
        for para in re.split(r"\n\s*\n", p.read_text()):
            if _CITES_COMMIT.search(para):
                continue
            for m in _PATH.finditer(para):
                name = m.group(1)
                if generated.search(para[m.start() : m.end() + 2]) or (ROOT / name).exists():
                    continue
                missing.append(f"{p.relative_to(ROOT)}: {name}")
    assert not missing, missing


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


def test_every_run_named_outside_history_is_a_run_folder_here():
    """A run name (hot-N, cold-N) in docs, code or a results index names a folder under
    results/, unless its paragraph cites the commit that holds it. A run folder's own files are
    the record of what it measured (a policy it timed keeps its run's name, as audit-v2's
    configs do) and are not read: its provenance.json says where that run lives."""
    runs = {p.name for p in (ROOT / "results").glob("*/*") if p.is_dir()}
    stray = []
    for p in text_files((".md", ".py", ".sh", ".cuh", ".tmpl", ".ipynb")):
        rel = p.relative_to(ROOT)
        if rel.parts[0] == "results" and len(rel.parts) > 3:  # results/<gpu>/<run>/...
            continue
        for para in re.split(r"\n\s*\n", p.read_text(errors="replace")):
            if _CITES_COMMIT.search(para):
                continue
            for name in re.findall(r"\b((?:hot|cold|after-write)-\d+)\b", para):
                if name not in runs:
                    stray.append(f"{rel}: {name}")
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
