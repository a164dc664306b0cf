#!/usr/bin/env bash
# The main job (README "Run the main job"), on a machine with a CUDA GPU:
#   ./scripts/sweep.sh [extra `sweeper run` options, e.g. --modes hot,cold]
# Sets up (a .venv with sweeper, or on an offline node with a carried .whl/ folder the
# image's python3, see scripts/device_env.sh), plans for the detected GPU unless a plan for it
# exists in sweeps/, runs the default grid, then builds selection, policy, export, verify,
# plots and report in the new run folder, whose path it prints last.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -d .whl ]; then
  source scripts/device_env.sh
  SW=(python3 -m sweeper)
else
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/python -m pip install -q -e ".[test]"
  SW=(.venv/bin/python -m sweeper)
fi
RUN_ID=${RUN_ID:-$(date -u +%Y%m%d-%H%M%S)}
"${SW[@]}" run --run-id "$RUN_ID" "$@"
RUN=$(ls -d results/*/"$RUN_ID")
"${SW[@]}" select "$RUN"
"${SW[@]}" policy build "$RUN"
"${SW[@]}" export "$RUN/policy.json" --format cuda -o "$RUN/relu_policy.cuh"
"${SW[@]}" verify "$RUN/policy.json" || echo "verify FAILED (see above)"
"${SW[@]}" plot "$RUN"
"${SW[@]}" report "$RUN"
echo "$RUN"
