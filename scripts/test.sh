#!/usr/bin/env bash
# The test command (README; .ci/run calls exactly this).
# Fresh machine: creates .venv and installs sweeper with test extras (scripts/test_env.sh),
# lints, runs the CPU and simulator suites on every core (pytest-xdist). GPU tests (marker
# `gpu`) skip themselves without a GPU; on a GPU machine they run too, all in one worker
# (scripts/gpu_tests.sh runs them alone, which is what their timing checks are recorded with).
set -euo pipefail
cd "$(dirname "$0")/.."
# Bytecode written on first import: with PYTHONDONTWRITEBYTECODE set (some images set it) and
# the install's --no-compile, every process would compile every module it imports from source
# (about 0.7 s more per interpreter start for sweeper, pandas, numpy and numba, in every
# subprocess the suite starts)
unset PYTHONDONTWRITEBYTECODE
./scripts/test_env.sh
.venv/bin/ruff check sweeper kernels tests tools lab benchmarks
.venv/bin/ruff format --check sweeper kernels tests tools lab benchmarks
# a test that needs nvcc, ptxas or nvdisasm fails here instead of skipping (tests/conftest.py)
SWEEPER_REQUIRE_TOOLS=1 .venv/bin/python -m pytest -q -n auto --dist loadgroup "$@"
