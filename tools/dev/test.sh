#!/usr/bin/env bash
# The README's test command: installs what is missing, builds everything and
# runs the whole test suite (GPU tests skip with their reason without a GPU),
# replays every saved fuzz input and crash (tools/dev/fuzz.sh with
# FUZZ_SECONDS=0) and checks the format (tools/dev/format.sh --check). About
# 18 minutes on 2 cores from a fresh clone (README.md, "Two commands").
#
# The sanitizer and fuzzing stages are the second command,
# tools/dev/test-deep.sh; .ci/run runs both.
# Ends with one line "tests: N passed, N failed, N skipped" (a test counts once per
# configuration; one that ran nothing, without a GPU, counts as skipped).
set -uo pipefail
cd "$(dirname "$0")/../.."

bash tools/dev/install-deps.sh || exit 1
source tools/dev/test_lib.sh

bazel_stage //... "$@"

# The libFuzzer targets (clang-14, outside Bazel) on their saved corpus and
# crashes, each input once: one test in the count.
one_test env FUZZ_SECONDS=0 bash tools/dev/fuzz.sh
# Every tracked C/C++ file is formatted with the root .clang-format
# (clang-format-14); one test in the count.
format_check() {
  bash tools/dev/format.sh --check && echo "format: every C/C++ file is formatted"
}
one_test format_check

finish tests
