#!/usr/bin/env bash
# The tree that travels to the lent GPU node is capped at 64 MiB (.whl included), and the
# shipped results alone are close to that. Park the run folders a device call does not need
# outside the checkout, and bring them back afterwards:
#   scripts/park.sh out [RUN ...]   # move results/h200/* except the named RUNs to $PARK
#   scripts/park.sh in              # move everything parked back
# PARK defaults to /tmp/sweeper-park. Nothing is deleted; `in` refuses to overwrite.
set -euo pipefail
cd "$(dirname "$0")/.."
PARK=${PARK:-/tmp/sweeper-park}
case "${1:-}" in
  out)
    shift
    mkdir -p "$PARK"
    for d in results/h200/*/; do
      name=$(basename "$d")
      keep=0
      for k in "$@"; do [ "$k" = "$name" ] && keep=1; done
      [ "$keep" = 1 ] && continue
      [ -e "$PARK/$name" ] && { echo "park: $PARK/$name exists; run 'scripts/park.sh in' first" >&2; exit 1; }
      mv "$d" "$PARK/$name"
    done
    du -sh --exclude=.git --exclude=.venv . ;;
  in)
    for d in "$PARK"/*/; do
      [ -d "$d" ] || continue
      name=$(basename "$d")
      [ -e "results/h200/$name" ] && { echo "park: results/h200/$name exists; not overwritten" >&2; exit 1; }
      mv "$d" "results/h200/$name"
    done ;;
  *) echo "usage: scripts/park.sh out [RUN ...] | in" >&2; exit 2 ;;
esac
