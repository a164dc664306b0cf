#!/usr/bin/env bash
# The decision mutations of docs/mutation-testing.md, each applied to a copy of the
# tree; the test that holds the decision (the table's "caught by") must fail on each. Exit status 1 if one survives.
# The mutations run side by side, one per core ($JOBS, default nproc); their lines are
# printed in the order below.
#   tools/decision_mutations.sh
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
JOBS=${JOBS:-$(nproc)}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
count=0

check() {  # N NAME FILE OLD NEW TESTFILE: one mutation in $WORK/N; prints its line
  local n=$1 name=$2 file=$3 old=$4 new=$5 test=$6 copy="$WORK/$1/tree"
  mkdir -p "$copy"
  cp -r "$ROOT"/sweeper "$ROOT"/tests "$ROOT"/sweeps "$ROOT"/results "$ROOT"/tools "$ROOT"/examples \
    "$ROOT"/pyproject.toml "$copy"/
  ln -s "$ROOT/kernels" "$copy/sweeper_kernels"
  if ! "$PY" - "$copy/$file" "$old" "$new" <<'PYCODE'
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
if text.count(old) != 1:
    sys.exit(f"{path}: the line to mutate is not there once: {old!r}")
open(path, "w").write(text.replace(old, new))
PYCODE
  then
    echo "MISSING   $name: update the mutation to the code ($file)"
    return
  fi
  if (cd "$copy" && PYTHONPATH="$copy" timeout 600 "$PY" -m pytest -q -x -p no:cacheprovider \
      "$test" > "$WORK/$n/log" 2>&1); then
    echo "SURVIVED  $name ($test)"
  else
    echo "caught    $name: $(grep -m1 -E '^(FAILED|ERROR)' "$WORK/$n/log")"
  fi
  rm -rf "$copy"
}

mutate() {  # NAME FILE OLD NEW TESTFILE: starts the check once a core is free
  count=$((count + 1))
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
  check "$count" "$@" > "$WORK/$count.out" 2>&1 &
}

mutate "the dense band's start rounded inward" sweeper/plan/ladder.py \
  "return min(_floor(self.l2 // 4), self.cap)" "return min(_ceil(self.l2 // 4), self.cap)" \
  tests/unit/test_plan.py::test_the_dense_band_is_rounded_outward_to_the_32_byte_grain
mutate "tie tolerance 2% -> 3%" sweeper/analyze/select.py \
  "DEFAULT_TOLERANCE = 0.02" "DEFAULT_TOLERANCE = 0.03" \
  tests/unit/test_select.py::test_the_tie_tolerance_is_2_percent_inclusive
mutate "below_baseline: < 1 -> <= 1" sweeper/analyze/select.py \
  "float(hi) < 1.0" "float(hi) <= 1.0" \
  tests/unit/test_select.py::test_below_the_baseline_means_the_whole_ci_is_under_1
mutate "brackets up to 2x the plan resolution accepted" sweeper/analyze/policy.py \
  "step = l2 / int(res)" "step = 2 * l2 / int(res)" \
  tests/unit/test_policy.py::test_a_boundary_is_placed_only_in_a_bracket_no_wider_than_the_resolution
mutate "the ratio bootstrap resamples the two sides independently" sweeper/stats.py \
  "return point, _resample_medians(num, counts) / _resample_medians(den, counts)" \
  "return point, _resample_medians(num, counts) / _resample_medians(den, counts[::-1])" \
  tests/unit/test_stats.py::test_the_ratio_ci_is_paired_so_drift_shared_by_both_sides_cancels
mutate "CI level 95% -> 90%" sweeper/stats.py \
  "num: np.ndarray, den: np.ndarray, *, seed: int = 0, level: float = 0.95" \
  "num: np.ndarray, den: np.ndarray, *, seed: int = 0, level: float = 0.90" \
  tests/unit/test_stats.py::test_the_ci_level_is_95_percent
mutate "a bracket exactly at the resolution refused" sweeper/analyze/bands.py \
  "sizes[i] - sizes[i - 1] > max_bracket * (1 + 1e-12)" "sizes[i] - sizes[i - 1] >= max_bracket" \
  tests/unit/test_policy.py::test_a_boundary_is_placed_only_in_a_bracket_no_wider_than_the_resolution
mutate "the band edge at the first measured size, not the bracket's midpoint" \
  sweeper/analyze/policy.py "lo = 0 if k == 0 else (sizes[i - 1] + sizes[i]) // 2" \
  "lo = 0 if k == 0 else sizes[i]" \
  tests/unit/test_policy.py::test_a_boundary_is_placed_only_in_a_bracket_no_wider_than_the_resolution
mutate "a tie ignores the targets' floors" sweeper/analyze/policy.py \
  "keep = meets or keep" "keep = keep" \
  tests/unit/test_policy.py::test_a_tie_never_trades_away_a_floor_that_a_tied_config_meets
mutate "a round's moves decided from every climbed cell, not the rounds before it" \
  sweeper/run/runner.py "if r.get(CLIMB_ROUND, 0) <= rounds]," "if True]," \
  tests/unit/test_search.py::test_a_climb_interrupted_in_any_round_resumes_as_one_run_in_one_go
mutate "a resume ignores a grid whose configs changed" sweeper/run/runner.py \
  'if grid is not None and manifest.get("grid_hash", grid) != grid:' \
  'if False and manifest.get("grid_hash", grid) != grid:' \
  tests/unit/test_runner.py::test_resume_refuses_a_grid_whose_configs_changed
mutate "verify's loss rule on the point ratio, not the interval" sweeper/analyze/verdict.py \
  "loses, loses_some = split(below_baseline)" \
  'loses, loses_some = split(lambda r: r["ratio"] < 1)' \
  tests/unit/test_verdict_rule.py::test_one_pass_loses_only_where_the_whole_ci_is_below_1
mutate "the Python export's band edge: rel < below -> <=" sweeper/export/templates/relu_policy.py.tmpl \
  'if band["below"] is None or rel < band["below"]:' \
  'if band["below"] is None or rel <= band["below"]:' \
  tests/unit/test_dispatch_edges.py::test_the_python_export_serves_the_policy_at_every_band_edge
mutate "the CUDA header's choice at a band edge: rel < hi -> <=" sweeper/export/cuda.py \
  "out.append(f'  if (rel < {_num(b[\"hi_rel\"])}) return \"{b[\"config\"]}\";')" \
  "out.append(f'  if (rel <= {_num(b[\"hi_rel\"])}) return \"{b[\"config\"]}\";')" \
  tests/unit/test_dispatch_edges.py::test_the_cuda_header_serves_the_policy_at_every_band_edge
mutate "outputs not poisoned before they are checked" sweeper/run/executor.py \
  "        for y in ys:
            self._poison(y)" "        for y in ys:
            pass" tests/unit/test_guards_simulated.py::test_each_cheat_is_caught_by_its_guard
mutate "the canary call not redirected" sweeper/run/batched.py \
  "check(set_kernel(ex, node, canary))" "check(set_kernel(ex, node, params))" \
  tests/unit/test_cell_graphs.py::test_a_canary_launch_sets_one_call_to_the_canary_for_that_launch_only
mutate "the canary's output never counted" sweeper/run/batched.py \
  "        if canary:  # its output, written by the canary call, counted after the rounds" \
  "        if False:  # its output, written by the canary call, counted after the rounds" \
  tests/unit/test_cell_graphs.py::test_a_segment_counts_the_canarys_own_output_after_its_rounds
mutate "a batched segment's output not poisoned before its rounds" sweeper/run/batched.py \
  "        g.child(self._poison_graph(b, key, hf.sa))" "        pass" \
  tests/unit/test_cell_graphs.py::test_a_segment_counts_the_canarys_own_output_after_its_rounds
mutate "a derived file's record not compared" sweeper/records.py \
  'if have != {"count": rec["count"], "sha256": rec["sha256"]}:' 'if False:' \
  tests/unit/test_archive_run.py::test_derived_files_are_recorded_once_read_back
mutate "a pooled run times its confirmation rounds as candidate cells" sweeper/run/runner.py \
  'role = "confirm" if phase == CONFIRM else "candidate"
        sent = []' 'role = "candidate"
        sent = []' \
  tests/unit/test_pool.py::test_a_pooled_run_times_each_confirmation_round_as_the_run_did
wait
status=0
for n in $(seq 1 "$count"); do
  cat "$WORK/$n.out"
  grep -q -E '^(MISSING|SURVIVED)' "$WORK/$n.out" && status=1
done
exit $status
