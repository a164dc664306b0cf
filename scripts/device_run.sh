#!/usr/bin/env bash
# One call on the lent GPU node: a (resumable) sweeper run that stops itself before the
# call's time limit, then packs the run folder into $OUT.
#   scripts/device_run.sh RUN_ID SECONDS [sweeper run options...]
# If results/h200/RUN_ID already exists (carried back from an earlier call), it is resumed.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh || exit 1
export SWEEPER_CACHE=${SWEEPER_CACHE:-/tmp/swcache}
RUN_ID=$1; SECS=$2; shift 2
if [ -f "results/h200/$RUN_ID/manifest.json" ]; then
  ARGS=(run --resume --run-dir "results/h200/$RUN_ID")
else
  ARGS=(run sweeps/h200.json --run-id "$RUN_ID" "$@")
fi
echo "+ sweeper ${ARGS[*]}  (stops after ${SECS}s with SIGINT; resumable)"
timeout -s INT "$SECS" python3 -m sweeper "${ARGS[@]}"
rc=$?
tar czf "$OUT/$RUN_ID.tgz" -C results/h200 "$RUN_ID"
echo "sweeper exit $rc"
