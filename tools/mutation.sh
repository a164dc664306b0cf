#!/usr/bin/env bash
# Mutation testing of sweeper's decision core (the modules in pyproject's [tool.mutmut]:
# the planner's ladder, selection, band segmentation, the timing statistics).
#   tools/mutation.sh            every mutant (about 1200; minutes)
#   tools/mutation.sh --quick    the mutants of the tie, below-baseline and CI rules and the band
#                                edges (CI runs this; the bracket rule is tools/decision_mutations.sh)
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
rm -rf mutants
"$PY" -m mutmut run --max-children "$(nproc)" "${WHAT[@]}" > mutants.log 2>&1 || {
  tail -c 2000 mutants.log; exit 1; }
"$PY" -m mutmut results --all true > mutants/results.txt
"$PY" tools/mutation_check.py mutants/results.txt docs/mutation-testing.md "${WHAT[@]}"
