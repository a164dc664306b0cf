#!/usr/bin/env bash
# The shipped H200 results in one device call (see results/h200/README.md for the command):
# timer tests, a full hot run (4 dtypes), a second hot fp32 run (reproducibility), a quick
# cold run (fp32, fp16), then policy + verify of the hot run. Each step is time-boxed and
# resumable; everything lands in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh || exit 1
export SWEEPER_CACHE=/tmp/swcache
python3 scripts/compile_bench.py 2>&1 | tail -1 | tee "$OUT/compile_bench.log"
python3 scripts/compile_bench.py --expect-cached 2>&1 | tail -1 | tee -a "$OUT/compile_bench.log"
python3 -m pytest -q -p no:cacheprovider tests/gpu/test_measure_gpu.py 2>&1 | tail -3 | tee "$OUT/timer_tests.log"
run() {  # RUN_ID SECONDS ARGS...
  local id=$1 secs=$2; shift 2
  /usr/bin/time -f "$id wall %e s" timeout -s INT "$secs" python3 -m sweeper run sweeps/h200.json --run-id "$id" "$@" 2>&1 | tail -12
}
run hot-2 260 --modes hot
run hot-3 60 --modes hot --dtypes fp32
run cold-1 90 --modes cold --dtypes fp32,fp16 --quick
R=results/h200/hot-2
python3 -m sweeper select "$R" > /dev/null && python3 -m sweeper policy build "$R" 2>&1 | tail -30
timeout 75 python3 -m sweeper verify "$R/policy.json" 2>&1 | tail -25 | tee "$R/verify.txt"
tar czf "$OUT/runs.tgz" -C results/h200 hot-2 hot-3 cold-1
