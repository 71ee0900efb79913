#!/usr/bin/env bash
# The README's test command: installs what is missing, builds everything and
# runs the whole test suite (GPU tests skip with their reason without a GPU),
# then a part of the suite again under AddressSanitizer and the threaded
# parts under ThreadSanitizer, the fuzz targets
# (tools/dev/fuzz.sh) and the format check (tools/dev/format.sh --check).
# Ends with one line "tests: N passed, N failed" that counts every run (a
# test counts once per configuration).
set -uo pipefail
cd "$(dirname "$0")/../.."

bash tools/dev/install-deps.sh || exit 1

# Open MPI refuses root unless told; CI runs as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

log=$(mktemp)
jobs="${DIST_BAZEL_JOBS:-2}"
bazel test //... --jobs="$jobs" "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}

# AddressSanitizer + UndefinedBehaviorSanitizer (.bazelrc --config=asan) over
# the whole suite but the two tests that compile a plain program against the
# installed library (an instrumented libdist.so needs an instrumented
# program; they test packaging, not memory safety). DIST_SANITIZERS=0 skips
# the sanitizer steps (a quick local run).
ASAN_EXCLUDED=(-//tests/install:install_test -//examples/plugin_template:out_of_tree_build_test)
if [[ "${DIST_SANITIZERS:-1}" != 0 ]]; then
  bazel test --config=asan --build_tests_only --jobs="$jobs" "$@" -- //... "${ASAN_EXCLUDED[@]}" 2>&1 | tee -a "$log"
  [[ ${PIPESTATUS[0]} -ne 0 ]] && status=1
fi

# ThreadSanitizer (.bazelrc --config=tsan) over the threaded parts: the core,
# the store server and client, the gloo and shm communicators and the
# reducer. The suppressions (third-party code only) are a file, whose path
# must be absolute since tests run in their runfiles.
TSAN_TARGETS=(//tests/core/... //tests/rendezvous:store_test //tests/rendezvous:tcp_store_fault_test
              //tests/rendezvous:core_rendezvous_test //tests/shm/... //tests/ddp:gradient_reducer_test
              //tests/gloo/...)
if [[ "${DIST_SANITIZERS:-1}" != 0 ]]; then
  tsan_options="halt_on_error=1:second_deadlock_stack=1:report_signal_unsafe=0"
  tsan_options+=":suppressions=$PWD/tools/dev/sanitizers/tsan.supp"
  bazel test --config=tsan "${TSAN_TARGETS[@]}" --test_env=TSAN_OPTIONS="$tsan_options" \
    --jobs="$jobs" "$@" 2>&1 | tee -a "$log"
  [[ ${PIPESTATUS[0]} -ne 0 ]] && status=1
fi

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
# Every tracked C/C++ file is formatted with the root .clang-format
# (clang-format-14); one test in the count.
if bash tools/dev/format.sh --check; then
  echo "format: every C/C++ file is formatted"
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  status=1
fi
echo "tests: ${passed} passed, ${failed} failed"
exit $status
