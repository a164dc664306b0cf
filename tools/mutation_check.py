"""Compare a mutmut run with the documented equivalent mutants.

    python tools/mutation_check.py RESULTS.txt docs/mutation-testing.md [PATTERN ...]

RESULTS.txt is `mutmut results --all true`. A mutant that survived, had no test or was
suspicious fails the check unless docs/mutation-testing.md lists it (a table row starting
"| `name` |"); a listed mutant that was killed fails it too (the list would be wrong).
Listed mutants of modules the run did not mutate (another set's) are left aside; with
PATTERNs (the run's mutant filter), only the matching listed mutants are checked.
"""

from __future__ import annotations

import fnmatch
import re
import sys
from pathlib import Path

NOT_KILLED = {"survived", "no tests", "suspicious"}


def _module(name: str) -> str:
    """The module of a mutant's name (`sweeper.stats.x_f__mutmut_1` -> `sweeper.stats`)."""
    return re.split(r"\.x[_ǁ]", name, maxsplit=1)[0]


def main() -> int:
    results, doc, *patterns = sys.argv[1:]
    status = {}
    for line in Path(results).read_text().splitlines():
        m = re.match(r"^\s*(\S+):\s+(.+?)\s*$", line)
        if m:
            status[m[1]] = m[2]
    listed = set(re.findall(r"^\|\s*`([^`]+)`\s*\|", Path(doc).read_text(), flags=re.M))
    # the doc lists the mutants of every set; this run's set is the modules in its results
    modules = {_module(n) for n in status}
    listed = {n for n in listed if _module(n) in modules}
    if patterns:
        listed = {n for n in listed if any(fnmatch.fnmatch(n, p) for p in patterns)}
    run = {n: s for n, s in status.items() if s != "not checked"}
    alive = sorted(n for n, s in run.items() if s in NOT_KILLED)
    undocumented = [n for n in alive if n not in listed]
    stale = sorted(n for n in listed if run.get(n) not in NOT_KILLED)
    killed = sum(s in ("killed", "timeout") for s in run.values())
    print(
        f"{len(run)} mutants run: {killed} killed, {len(alive)} not killed "
        f"({len(alive) - len(undocumented)} documented as equivalent)"
    )
    for n in undocumented:
        print(f"  NOT KILLED, NOT DOCUMENTED: {n} ({run[n]}); `mutmut show {n}`")
    for n in stale:
        print(f"  DOCUMENTED BUT {run.get(n, 'not run').upper()}: {n}")
    return 1 if undocumented or stale else 0


if __name__ == "__main__":
    sys.exit(main())
