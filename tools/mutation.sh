#!/usr/bin/env bash
# Mutation testing of sweeper's decision core (the modules in pyproject's [tool.mutmut]:
# the planner's ladder, selection, band segmentation, the timing statistics).
#   tools/mutation.sh            every mutant of the decision core (2080; 26 minutes on 2 cores)
#   tools/mutation.sh --quick    the mutants of the tie, below-baseline and CI rules and the band
#                                edges (CI runs this; the bracket rule is tools/decision_mutations.sh)
#   tools/mutation.sh --files    the second set (tools/mutmut-files.toml): the plan file, verify's
#                                verdict and the Python export, in a copy of the tree
# A mutant that no test kills must be listed in docs/mutation-testing.md with why it is
# equivalent; any other survivor makes this script fail.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
WHAT=()
if [ "${1:-}" = "--quick" ]; then
  WHAT=(
    "sweeper.analyze.select.x_tied_with*" "sweeper.analyze.select.x_below_baseline*"
    "sweeper.analyze.select.x_tied_set*" "sweeper.plan.ladder.xǁBoundsǁdense*"
    "sweeper.stats.x_ci_tails*"
  )
fi
if [ "${1:-}" = "--files" ]; then
  # a copy of the tracked tree whose pyproject carries the second set's [tool.mutmut]
  root=$PWD
  work=$(mktemp -d)
  echo "the copy: $work (removed when every mutant is killed or listed; \`mutmut show\` works there)"
  git ls-files -z | xargs -0 cp --parents -t "$work"
  "$PY" - "$work/pyproject.toml" tools/mutmut-files.toml <<'SPLICE'
import re, sys
path, extra = sys.argv[1], open(sys.argv[2]).read()
text = open(path).read()
block = extra[re.search(r"^\[tool\.mutmut\]", extra, re.M).start():]
text = re.sub(r"\[tool\.mutmut\].*?(?=^\[|\Z)", lambda m: block + "\n", text, flags=re.S | re.M)
open(path, "w").write(text)
SPLICE
  cd "$work"
  case "$PY" in /*) ;; *) PY="$root/$PY" ;; esac
  # every function of the three but the plan file's validation (validate_plan_doc: every test
  # loads a plan, so its 511 mutants take hours; test_plan.py corrupts each field instead)
  WHAT=(
    "sweeper.analyze.verdict.*" "sweeper.export.python.*" "sweeper.plan.planfile.x__*"
    "sweeper.plan.planfile.x_estimate*" "sweeper.plan.planfile.x_load_plan*"
    "sweeper.plan.planfile.x_make_plan*" "sweeper.plan.planfile.x_plan_from_doc*"
    "sweeper.plan.planfile.x_spec_snapshot*" "sweeper.plan.planfile.x_summarize*"
    "sweeper.plan.planfile.x_write_plan*" "sweeper.plan.planfile.xǁ*"
  )
fi
rm -rf mutants
"$PY" -m mutmut run --max-children "$(nproc)" "${WHAT[@]}" > mutants.log 2>&1 || {
  tail -c 2000 mutants.log; exit 1; }
"$PY" -m mutmut results --all true > mutants/results.txt
"$PY" tools/mutation_check.py mutants/results.txt docs/mutation-testing.md "${WHAT[@]}"
if [ -n "${work:-}" ]; then rm -rf "$work"; fi
