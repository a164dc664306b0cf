#!/usr/bin/env bash
# One call on the lent GPU node: `sweeper verify` of a shipped run's policy, time-boxed; the
# output and the timing CSV land in $OUT.
#   scripts/device_verify.sh RUN_ID [SECONDS]
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh || exit 1
export SWEEPER_CACHE=${SWEEPER_CACHE:-/tmp/swcache}
R=results/h200/$1; SECS=${2:-250}
/usr/bin/time -f "verify wall %e s" timeout -s INT "$SECS" python3 -m sweeper verify "$R/policy.json" \
  > "$OUT/verify.txt" 2>&1
rc=$?
tail -40 "$OUT/verify.txt"
cp "$R/verify_timing.csv" "$OUT/" 2>/dev/null
echo "verify exit $rc"
