#!/usr/bin/env bash
# The GPU test suite, on a machine with a CUDA GPU: ./scripts/gpu_tests.sh [pytest args]
# Runs tests/gpu, or only the test paths named. With a wheelhouse folder (SWEEPER_WHEELHOUSE,
# default .whl/) it uses the machine's python3 (scripts/wheelhouse.sh), else a .venv with the
# test extra and torch. The log is written to $OUT/gpu_tests.log when OUT is set.
set -uo pipefail
cd "$(dirname "$0")/.."
export NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0
if [ -d "${SWEEPER_WHEELHOUSE:-.whl}" ]; then
  source scripts/wheelhouse.sh || exit 1
  PY=python3
else
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/python -m pip install -q -e ".[test,torch]"
  PY=.venv/bin/python
fi
WHAT=(tests/gpu)
for a in "$@"; do case "$a" in tests/*) WHAT=() ;; esac; done
$PY -m pytest "${WHAT[@]}" -v -rA -p no:cacheprovider "$@" 2>&1 | tee "${OUT:-.}/gpu_tests.log"
exit "${PIPESTATUS[0]}"
