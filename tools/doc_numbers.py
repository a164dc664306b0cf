#!/usr/bin/env python3
"""The numbers the docs state about the shipped runs, derived from the runs' own files.

    python tools/doc_numbers.py --check     # exit 1 and name each stale block
    python tools/doc_numbers.py --write     # rewrite every generated block in place

A generated block in a Markdown file (README.md, docs/*.md, results/*/README.md,
lab/README.md) is

    <!-- generated: NAME ARG... -->
    ...lines this tool writes...
    <!-- end -->

where NAME is a key of BLOCKS (e.g. `ratio-table hot-7 aw-4 cold-6`, `run-facts hot-7`) and
each ARG a run folder under results/<gpu>/. The derivations (`RunFiles`) read verify_timing.csv,
verify.txt, policy.json, manifest.json and trials.jsonl.xz and nothing else; the unit test
tests/unit/test_readme_numbers.py uses them for the claims written as prose, and asserts the
blocks are current. Needs pandas and numpy only (no GPU, no CUDA wheels).
"""

from __future__ import annotations

import argparse
import json
import lzma
import re
import sys
from collections import Counter
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from sweeper.dtypes import DTYPES
from sweeper.units import MiB

ROOT = Path(__file__).resolve().parents[1]


def run_dir(name: str) -> Path:
    """results/<gpu>/<name> (the one folder of that name under results/)."""
    hits = [p for p in (ROOT / "results").glob(f"*/{name}") if p.is_dir()]
    if len(hits) != 1:
        raise SystemExit(f"doc_numbers: no single run folder results/*/{name} ({len(hits)} found)")
    return hits[0]


@dataclass(frozen=True)
class RunFiles:
    """One shipped run folder and what its files say."""

    name: str

    @property
    def path(self) -> Path:
        return run_dir(self.name)

    @cached_property
    def verify(self) -> pd.DataFrame:
        """verify_timing.csv: one row per (pass, dtype, size)."""
        return pd.read_csv(self.path / "verify_timing.csv")

    @cached_property
    def verify_text(self) -> str:
        return (self.path / "verify.txt").read_text()

    @cached_property
    def policy(self) -> dict:
        return json.loads((self.path / "policy.json").read_text())

    @cached_property
    def manifest(self) -> dict:
        return json.loads((self.path / "manifest.json").read_text())

    @cached_property
    def trial_counts(self) -> Counter:
        """(role, status) -> rows of trials.jsonl.xz (one row is one cell)."""
        c: Counter = Counter()
        with lzma.open(self.path / "trials.jsonl.xz", "rt") as f:
            for line in f:
                t = json.loads(line)
                c[(t.get("role"), t.get("status"))] += 1
        return c

    # --- what the docs state -------------------------------------------------------------

    @property
    def mode(self) -> str:
        (mode,) = set(self.verify["mode"])
        return mode

    @property
    def passes(self) -> int:
        return int(self.verify["pass"].nunique())

    @property
    def sizes(self) -> int:
        """Sizes (dtype, working set) the run measured and its verify timed."""
        return len(self.verify.groupby(["dtype", "ws_bytes"]))

    @property
    def cells(self) -> int:
        """Every row of the trial log: candidate, baseline and copy cells."""
        return sum(self.trial_counts.values())

    @property
    def candidate_cells(self) -> int:
        return sum(n for (role, _), n in self.trial_counts.items() if role == "candidate")

    @property
    def all_ok(self) -> bool:
        return all(status == "ok" for _, status in self.trial_counts)

    @property
    def run_seconds(self) -> int:
        """`sweeper run`'s time over all its segments (manifest timing.total_s)."""
        return round(self.manifest["timing"]["total_s"])

    def bands(self, dtype: str) -> int:
        return len(self.policy["dtypes"][dtype]["bands"])

    @property
    def bit_exact(self) -> tuple[int, int]:
        m = re.search(r"^(\d+)/(\d+) bit-exact cases ok$", self.verify_text, re.M)
        if not m:
            raise SystemExit(f"doc_numbers: {self.name}/verify.txt has no bit-exact line")
        return int(m.group(1)), int(m.group(2))

    @property
    def max_vs_numba(self) -> float:
        """The exported header's largest deviation from its Numba config, any size, any pass."""
        return float((self.verify["vs_numba"] - 1).abs().max())

    def _by_size(self) -> pd.core.groupby.DataFrameGroupBy:
        return self.verify.groupby(["dtype", "ws_bytes"])

    @property
    def losses(self) -> list[tuple[str, int]]:
        """Sizes that lose to the baseline: the ratio's whole CI below 1 in every pass."""
        below = self.verify.assign(below=self.verify["ratio_hi"] < 1.0)
        g = below.groupby(["dtype", "ws_bytes"])["below"].all()
        return sorted(k for k, v in g.items() if v)

    @property
    def losses_in_one_pass(self) -> list[tuple[str, int]]:
        """Sizes whose CI lies below 1 in some pass but not in every pass."""
        below = self.verify.assign(below=self.verify["ratio_hi"] < 1.0)
        g = below.groupby(["dtype", "ws_bytes"])["below"]
        some, every = g.any(), g.all()
        return sorted(k for k in some.index if some[k] and not every[k])

    @property
    def pass_spread(self) -> tuple[float, float, float]:
        """|ratio of a later pass / ratio of pass 1 - 1| over sizes: median, p95, max."""
        v = self.verify.sort_values("pass")
        first = v.groupby(["dtype", "ws_bytes"])["ratio"].transform("first")
        dev = (v["ratio"] / first - 1).abs()[v["pass"] != v["pass"].min()].to_numpy()
        q = np.quantile(dev, [0.5, 0.95])
        return float(q[0]), float(q[1]), float(dev.max())

    @property
    def min_ratio(self) -> float:
        return float(self.verify["ratio"].min())

    def dtypes(self) -> list[str]:
        return [d for d in DTYPES if d in set(self.verify["dtype"])]


@cache
def run_files(name: str) -> RunFiles:
    """The run's files, each read once per process."""
    return RunFiles(name)


def mib(ws_bytes: int) -> str:
    return f"{ws_bytes / MiB:.2f} MiB"


def pct(x: float, digits: int = 1) -> str:
    return f"{100 * x:.{digits}f}%"


# --- blocks --------------------------------------------------------------------------------


def ratio_table(*runs: str) -> list[str]:
    """The verified header's ratio to the baseline, the lower of the passes at each size,
    lowest to highest per range of working set (the report's ranges: its first screen shows
    the same figures); one row per dtype and run."""
    from sweeper.report.summary import ranges, speedup_rows, verified_ratios

    rs = [run_files(r) for r in runs]
    l2 = {int(r.manifest["device"]["l2_bytes"]) for r in rs}
    if len(l2) != 1:
        raise SystemExit(f"one table needs one L2 size; the runs have {sorted(l2)}")
    (l2_bytes,) = l2
    heads = [label for _, _, label in ranges(l2_bytes)]
    out = ["| dtype | mode | " + " | ".join(heads) + " |", "|---|---|" + "---|" * len(heads)]
    for d in DTYPES:
        for r in rs:
            if d not in r.dtypes():
                continue
            (row,) = speedup_rows(verified_ratios(r.verify, r.mode), l2_bytes, [d])
            out.append(
                f"| {d} | [{r.mode}]({r.path.relative_to(ROOT)}/REPORT.md) | "
                + " | ".join(row[1:])
                + " |"
            )
    return out


def run_facts(*names: str) -> list[str]:
    """One item per run: what was measured, the policy's bands, and what its verify found."""
    out = []
    for name in names:
        r = run_files(name)
        rel = r.path.relative_to(ROOT)
        bands = ", ".join(f"{d} {r.bands(d)}" for d in r.dtypes())
        k, n = r.bit_exact
        lose = r.losses
        lose_txt = "none" if not lose else ", ".join(f"{d} {mib(w)}" for d, w in lose)
        med, p95, mx = r.pass_spread
        out += [
            f"- [{name}]({rel}/REPORT.md), {r.mode} mode: {r.sizes} sizes, {r.candidate_cells}"
            f" candidate cells ({r.cells} cells in all), {'all ok' if r.all_ok else 'not all ok'};"
            f" `sweeper run` took {r.run_seconds} s. Bands per dtype: {bands}.",
            f"  Verify ({r.passes} passes, [verify.txt]({rel}/verify.txt)): {k}/{n} bit-exact,"
            f" within {pct(r.max_vs_numba)} of the Numba configs; sizes that lose: {lose_txt};"
            f" below 1 by the CI in one pass only: {len(r.losses_in_one_pass)}; lowest ratio"
            f" {r.min_ratio:.3f}x; pass to pass the ratio moved by a median {pct(med, 2)},"
            f" p95 {pct(p95, 2)}, max {pct(mx, 2)}.",
        ]
    return out


BLOCKS = {"ratio-table": ratio_table, "run-facts": run_facts}

_BLOCK = re.compile(r"(<!-- generated: ([^>]*?) -->\n)(.*?)(<!-- end -->)", re.S)


def doc_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "lab" / "README.md"]
    files += sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "results").glob("*/README.md"))
    return [p for p in files if p.exists()]


def render(spec: str) -> str:
    name, *args = spec.split()
    if name not in BLOCKS:
        raise SystemExit(f"doc_numbers: unknown block {name!r} (known: {', '.join(BLOCKS)})")
    return "".join(line + "\n" for line in BLOCKS[name](*args))


def regenerate(text: str) -> str:
    return _BLOCK.sub(lambda m: m.group(1) + render(m.group(2)) + m.group(4), text)


def stale_in(text: str) -> list[str]:
    """The NAME ARG... of every block in `text` whose lines are not what the files give now."""
    return [m.group(2) for m in _BLOCK.finditer(text) if m.group(3) != render(m.group(2))]


def stale_blocks() -> list[str]:
    """'FILE: NAME ARG...' for every stale block of the doc files."""
    return [f"{p.relative_to(ROOT)}: {b}" for p in doc_files() for b in stale_in(p.read_text())]


def outside_blocks(text: str) -> str:
    """`text` with every generated block's lines taken out (what a claim list must cover)."""
    return _BLOCK.sub(lambda m: m.group(1) + m.group(4), text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--check", action="store_true", help="exit 1 when a block is stale")
    g.add_argument("--write", action="store_true", help="rewrite every block in place")
    a = ap.parse_args(argv)
    if a.check:
        stale = stale_blocks()
        for s in stale:
            print(f"stale generated block: {s} (run python tools/doc_numbers.py --write)")
        return 1 if stale else 0
    for p in doc_files():
        text = p.read_text()
        new = regenerate(text)
        if new != text:
            p.write_text(new)
            print(f"rewrote {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
