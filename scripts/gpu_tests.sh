#!/usr/bin/env bash
# The whole GPU test suite, on a GPU machine: ./scripts/gpu_tests.sh [pytest args]
# (name test paths, e.g. tests/gpu/test_verify_gpu.py, to run only those)
# On our H200 node (no internet, numpy 2.5 in the image) it uses the carried numpy<2.5 wheel
# (scripts/device_env.sh); elsewhere it runs in .venv like scripts/test.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -d .whl ]; then
  source scripts/device_env.sh || exit 1
  PY=python3
else
  PY=.venv/bin/python
fi
OUTDIR=${OUT:-.}
# The whole GPU suite unless a test path is named (session 5 named one file, and since
# tests/gpu came first as well, the whole suite ran).
WHAT=(tests/gpu)
for a in "$@"; do case "$a" in tests/*) WHAT=() ;; esac; done
$PY -m pytest "${WHAT[@]}" -v -rA -p no:cacheprovider "$@" 2>&1 | tee "$OUTDIR/gpu_tests.log"
exit "${PIPESTATUS[0]}"
