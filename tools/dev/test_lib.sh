# Shared by tools/dev/test.sh and tools/dev/test-deep.sh (sourced, not run):
# Bazel runs whose PASSED/FAILED lines are counted, and the summary line.
# Every test counts once per configuration it runs in; one that passed
# having run nothing (no GPU) counts as skipped, not passed.

# Open MPI refuses root unless told; CI runs as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

jobs="${DIST_BAZEL_JOBS:-2}"
passed=0
failed=0
skipped=0
status=0

# Whether the test `label` passed having run nothing: its log says
# DIST_SKIPPED (the conformance kit on a GPU backend without a GPU), or
# GoogleTest skipped every test it has. Reads the latest run's log.
ran_nothing() {
  local path=${1#//}
  local log="bazel-testlogs/${path/://}/test.log"
  grep -qE '^DIST_SKIPPED:|^\[  PASSED  \] 0 tests' "$log" 2>/dev/null
}

# Runs `bazel test ARGS...` and counts its results.
bazel_stage() {
  local log
  log=$(mktemp)
  bazel test --jobs="$jobs" "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local ok bad
  ok=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log" || true)
  bad=$(grep -cE '^//[^ ]+ +(FAILED|TIMEOUT|NO STATUS|FAILED TO BUILD|INCOMPLETE)' "$log" || true)
  if [[ $rc -ne 0 && $bad -eq 0 ]]; then
    bad=1  # the build itself failed before any test ran
  fi
  [[ $rc -ne 0 ]] && status=1
  local label skip=0
  while read -r label; do
    if ran_nothing "$label"; then skip=$((skip + 1)); fi
  done < <(grep -oE '^//[^ ]+ +(\(cached\) )?PASSED' "$log" | cut -d' ' -f1)
  passed=$((passed + ok - skip))
  skipped=$((skipped + skip))
  failed=$((failed + bad))
  rm -f "$log"
}

# Runs a command that is one test in the count.
one_test() {
  if "$@"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    status=1
  fi
}

# Prints the summary line ("LABEL: N passed, N failed, N skipped") and
# exits with the stages' status.
finish() {
  echo "$1: ${passed} passed, ${failed} failed, ${skipped} skipped"
  exit $status
}
