#!/usr/bin/env bash
# Session-2 first device call: the whole GPU test suite at this commit, then `sweeper verify`
# of the shipped hot policy, then a resume of the cold run (bracket refinement). Each step is
# time-boxed; logs and the updated run folders land in $OUT.
#   scripts/device_call1.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh || exit 1
export SWEEPER_CACHE=/tmp/swcache
timeout 200 ./scripts/gpu_tests.sh -q 2>&1 | tail -25
R=results/h200/hot-2
/usr/bin/time -f "verify wall %e s" timeout -s INT 250 python3 -m sweeper verify "$R/policy.json" \
  2>&1 | tail -40 | tee "$OUT/verify.txt"
/usr/bin/time -f "cold-1 resume wall %e s" timeout -s INT 110 python3 -m sweeper run --resume \
  --run-dir results/h200/cold-1 2>&1 | tail -15 | tee "$OUT/cold1_resume.txt"
cp "$R/verify_timing.csv" "$OUT/" 2>/dev/null
tar czf "$OUT/cold-1.tgz" -C results/h200 cold-1
