#!/usr/bin/env bash
# The test environment: creates .venv and installs sweeper with its test extras (scripts/test.sh
# runs this first; .ci/run runs it before starting the decision mutations beside the suite).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# no byte-compiling at install (about 30 s of CI for ray, pandas, matplotlib, numba...): a
# module is compiled when it is first imported
.venv/bin/python -m pip install -q --no-compile -e ".[test]"
