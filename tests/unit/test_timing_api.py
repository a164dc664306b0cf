"""The timing layer's public API is what other code uses: no module outside the timing modules
imports one of their private names or reaches into an executor's or bench's private
attributes (verify, audit, tools and lab scripts use the documented names,
docs/timing.md)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TIMING = {"sweeper.run.executor", "sweeper.run.timers", "sweeper.run.batched", "sweeper.run.fresh"}
PRIVATE_ATTR = re.compile(r"\b(?:ex|executor|bench|batched|classic)\._[a-z]\w*")


def _sources():
    for top in ("sweeper", "tools", "lab", "benchmarks"):
        for path in sorted((ROOT / top).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            if module not in TIMING:
                yield module, path


def test_no_module_imports_a_private_name_of_the_timing_modules():
    bad = []
    for module, path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in TIMING:
                bad += [f"{module}: {a.name}" for a in node.names if a.name.startswith("_")]
    assert not bad, bad


def test_no_module_reaches_into_an_executor_or_bench():
    bad = []
    for module, path in _sources():
        for i, line in enumerate(path.read_text().splitlines(), 1):
            bad += [f"{module}:{i}: {m}" for m in PRIVATE_ATTR.findall(line)]
    assert not bad, bad


def test_the_scan_sees_a_private_reach():
    assert PRIVATE_ATTR.findall("t = ex.bench._event(0); ex._bufs")
