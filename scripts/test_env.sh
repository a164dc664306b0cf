#!/usr/bin/env bash
# The test environment: creates .venv and installs sweeper (editable) with its test extras
# (scripts/test.sh runs this first; .ci/run runs it before starting the decision mutations
# beside the suite). Installed once per pyproject.toml: .venv/.test-env holds the hash of the
# one it was installed from.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
stamp=.venv/.test-env
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# no byte-compiling at install (about 30 s of CI for ray, pandas, matplotlib, numba...): a
# module is compiled when it is first imported (scripts/test.sh and .ci/run unset
# PYTHONDONTWRITEBYTECODE, so that it is written then)
.venv/bin/python -m pip install -q --no-compile -e ".[test]"
echo "$want" > "$stamp"
