#!/usr/bin/env bash
# The main job, on a machine with a CUDA GPU:
#   ./scripts/sweep.sh [sweeper run options, e.g. --modes hot,cold --time-limit 500]
#   RESUME=results/<gpu>/<run-id> ./scripts/sweep.sh [--time-limit 500]   # continue a run
# Sets up (a .venv with sweeper; or, with a wheelhouse folder, the machine's python3, see
# scripts/wheelhouse.sh), uses the plan in sweeps/ for the detected GPU (without one it stops
# and names the `sweeper plan --gpu ...` to run first), runs the default grid, then builds
# selection, policy, export, verify (2 passes; the policy is then built again at the tie
# tolerance verify measured and verified again, and kept only if it passes where the first
# did), plots and report in the run folder, whose path it prints last.
# A run that stops before it finishes (--time-limit) builds nothing from its partial cells:
# the script says how to resume it and exits with status 3.
# When the last verify fails, the plots and report are still built and the status is 4.
set -euo pipefail
cd "$(dirname "$0")/.."
export NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0
if [ -d "${SWEEPER_WHEELHOUSE:-.whl}" ]; then
  source scripts/wheelhouse.sh
  SW=(python3 -m sweeper)
else
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/python -m pip install -q -e ".[cuda,torch]"
  SW=(.venv/bin/python -m sweeper)
fi
if [ -n "${RESUME:-}" ]; then
  RUN=$RESUME
  "${SW[@]}" run --resume --run-dir "$RUN" "$@"
else
  RUN_ID=${RUN_ID:-$(date -u +%Y%m%d-%H%M%S)}
  "${SW[@]}" run --run-id "$RUN_ID" "$@"
  RUN=$(ls -d results/*/"$RUN_ID")
fi
STATUS=$("${SW[0]}" -c 'import json, sys; print(json.load(open(sys.argv[1]))["status"])' "$RUN/manifest.json")
if [ "$STATUS" != complete ]; then
  echo "$RUN: the run is $STATUS; continue it with RESUME=$RUN ./scripts/sweep.sh" >&2
  exit 3
fi
VERIFY=0
"${SW[@]}" select "$RUN"
"${SW[@]}" policy build "$RUN"
"${SW[@]}" export "$RUN/policy.json" --format cuda -o "$RUN/relu_policy.cuh"
"${SW[@]}" export "$RUN/policy.json" --format python -o "$RUN/relu_policy.py"
"${SW[@]}" verify "$RUN/policy.json" --passes 2 || { VERIFY=$?; echo "verify FAILED (see above)"; }
# The tie tolerance is then what that verify measured, per range of working set
# (docs/export.md): the policy is built again at it, and verified again if its header's code
# changed (comment lines aside). Where the first policy passed its verify and the rebuilt one
# fails its own, the first is kept: its files and the manifest as they were after its verify.
KEEP="$RUN/.verified"
rm -rf "$KEEP" && mkdir "$KEEP"
FIRST=$VERIFY
for f in manifest.json policy.json relu_policy.cuh relu_policy.py verify_timing.csv; do
  if [ -e "$RUN/$f" ]; then cp -p "$RUN/$f" "$KEEP/$f"; fi
done
if "${SW[@]}" policy build "$RUN" --tolerance verify > /dev/null; then
  "${SW[@]}" export "$RUN/policy.json" --format cuda -o "$RUN/relu_policy.cuh" --force
  "${SW[@]}" export "$RUN/policy.json" --format python -o "$RUN/relu_policy.py" --force
  if ! cmp -s <(grep -v '^ *//' "$KEEP/relu_policy.cuh") <(grep -v '^ *//' "$RUN/relu_policy.cuh"); then
    VERIFY=0
    "${SW[@]}" verify "$RUN/policy.json" --passes 2 || { VERIFY=$?; echo "verify FAILED (see above)"; }
    if [ "$VERIFY" -ne 0 ] && [ "$FIRST" -eq 0 ]; then
      cp -p "$KEEP"/* "$RUN"/
      VERIFY=0
      echo "the policy rebuilt at verify's tolerance failed its verify; the policy at the default tolerance, which passed its own, is kept" >&2
    fi
  fi
else
  echo "the policy keeps the default tolerance (no verify timing of two passes)" >&2
fi
rm -rf "$KEEP"
"${SW[@]}" plot "$RUN"
"${SW[@]}" report "$RUN"
echo "$RUN"
if [ "$VERIFY" -ne 0 ]; then
  echo "$RUN: verify failed (status $VERIFY); the report says where" >&2
  exit 4
fi
