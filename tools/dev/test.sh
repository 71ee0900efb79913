#!/usr/bin/env bash
# The README's test command: installs what is missing, builds everything and
# runs the whole test suite (GPU tests skip with their reason without a GPU),
# then the fuzz targets (tools/dev/fuzz.sh).
# Ends with one line "tests: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."

bash tools/dev/install-deps.sh || exit 1

# Open MPI refuses root unless told; CI runs as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

log=$(mktemp)
bazel test //... --jobs="${DIST_BAZEL_JOBS:-2}" "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}

passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log" || true)
failed=$(grep -cE '^//[^ ]+ +(FAILED|TIMEOUT|NO STATUS|FAILED TO BUILD|INCOMPLETE)' "$log" || true)
if [[ $status -ne 0 && $failed -eq 0 ]]; then
  failed=1  # the build itself failed before any test ran
fi
rm -f "$log"

# The libFuzzer targets of tests/fuzz (clang-14, outside Bazel), ~20 s each,
# after replaying every saved crash; one test in the count.
if FUZZ_SECONDS="${DIST_FUZZ_SECONDS:-20}" bash tools/dev/fuzz.sh; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  status=1
fi
echo "tests: ${passed} passed, ${failed} failed"
exit $status
