#!/usr/bin/env bash
# Mutation testing of sweeper's decision core (the modules in pyproject's [tool.mutmut]:
# the planner's ladder, selection, band segmentation, the timing statistics).
#   tools/mutation.sh            every mutant of the decision core (2080; 26 minutes on 2 cores)
#   tools/mutation.sh --quick    the mutants of the tie, below-baseline and CI rules and the band
#                                edges, with their tests (tools/mutmut-quick.toml), in a copy of the
#                                tree (before merging a change to the decision core; CI runs
#                                tools/decision_mutations.sh)
#   tools/mutation.sh --files    the second set (tools/mutmut-files.toml): the plan file, verify's
#                                verdict and the Python export, in a copy of the tree
#   tools/mutation.sh --plan-doc the fourth set (tools/mutmut-plandoc.toml): the plan file's
#                                validation (validate_plan_doc) with the plan file's tests
#   tools/mutation.sh --policy [PATTERN ...]
#                                the third set (tools/mutmut-policy.toml): the policy file's rules,
#                                in a copy of the tree (PATTERNs: mutmut's mutant names, e.g.
#                                "sweeper.analyze.policy.x_config_at*"; default: its listed rules)
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
if [ "${1:-}" = "--quick" ] || [ "${1:-}" = "--files" ] || [ "${1:-}" = "--policy" ] ||
   [ "${1:-}" = "--plan-doc" ]; then
  case "$1" in
    --quick) SET=tools/mutmut-quick.toml ;;
    --files) SET=tools/mutmut-files.toml ;;
    --policy) SET=tools/mutmut-policy.toml ;;
    --plan-doc) SET=tools/mutmut-plandoc.toml ;;
  esac
  shift
  # a copy of the tracked tree whose pyproject carries that set's [tool.mutmut]
  root=$PWD
  work=$(mktemp -d)
  echo "the copy: $work (removed when every mutant is killed or listed; \`mutmut show\` works there)"
  git ls-files -z | xargs -0 cp --parents -t "$work"
  "$PY" - "$work/pyproject.toml" "$SET" <<'SPLICE'
import re, sys
path, extra = sys.argv[1], open(sys.argv[2]).read()
text = open(path).read()
block = extra[re.search(r"^\[tool\.mutmut\]", extra, re.M).start():]
text = re.sub(r"\[tool\.mutmut\].*?(?=^\[|\Z)", lambda m: block + "\n", text, flags=re.S | re.M)
open(path, "w").write(text)
SPLICE
  cd "$work"
  case "$PY" in /*) ;; *) PY="$root/$PY" ;; esac
  if [ "$SET" = tools/mutmut-quick.toml ]; then
    :  # WHAT: the quick set's patterns, above
  elif [ "$SET" = tools/mutmut-plandoc.toml ]; then
    WHAT=("sweeper.plan.planfile.x_validate_plan_doc*")
  elif [ "$SET" = tools/mutmut-policy.toml ]; then
    # the rules a policy file's bands are held to and the choice of config at a size, or PATTERNs
    WHAT=("$@")
    [ ${#WHAT[@]} -gt 0 ] || WHAT=(
      "sweeper.analyze.policy.x_config_at*" "sweeper.analyze.policy.x__pick_at*"
      "sweeper.analyze.policy.x__validate_rel_edges*" "sweeper.analyze.policy.x__validate_bands*"
      "sweeper.analyze.policy.x__validate_brackets*"
    )
  else
    # every function of the three but the plan file's validation (validate_plan_doc: every
    # test loads a plan, so with these tests its 511 mutants take hours; --plan-doc runs
    # them with the plan file's tests)
    WHAT=(
      "sweeper.analyze.verdict.*" "sweeper.export.python.*" "sweeper.plan.planfile.x__*"
      "sweeper.plan.planfile.x_estimate*" "sweeper.plan.planfile.x_load_plan*"
      "sweeper.plan.planfile.x_make_plan*" "sweeper.plan.planfile.x_plan_from_doc*"
      "sweeper.plan.planfile.x_spec_snapshot*" "sweeper.plan.planfile.x_summarize*"
      "sweeper.plan.planfile.x_write_plan*" "sweeper.plan.planfile.xǁ*"
    )
  fi
fi
rm -rf mutants
"$PY" -m mutmut run --max-children "$(nproc)" "${WHAT[@]}" > mutants.log 2>&1 || {
  tail -c 2000 mutants.log; exit 1; }
"$PY" -m mutmut results --all true > mutants/results.txt
"$PY" tools/mutation_check.py mutants/results.txt docs/mutation-testing.md "${WHAT[@]}"
if [ -n "${work:-}" ]; then rm -rf "$work"; fi
