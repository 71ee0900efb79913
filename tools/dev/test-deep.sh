#!/usr/bin/env bash
# The second test command: the suite again under AddressSanitizer and
# UndefinedBehaviorSanitizer (.bazelrc --config=asan), its threaded parts
# under ThreadSanitizer (--config=tsan), and the fuzz targets
# (tools/dev/fuzz.sh, DIST_FUZZ_SECONDS each, default 20). About 40 minutes
# on 2 cores after tools/dev/test.sh (README.md, "Two commands"); .ci/run runs
# both. Ends with one line "deep: N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/../.."

bash tools/dev/install-deps.sh || exit 1
source tools/dev/test_lib.sh

# ASan + UBSan over the whole suite but the two tests that compile a plain
# program against the installed library and the two that load it into
# Debian's Python (an instrumented libdist.so needs an instrumented
# program; they test packaging and bindings, not memory safety), and,
# to keep CI well inside its time, repeats that run no code of dist's that
# another instrumented test does not: the desync check on the backends
# other than gloo (the check is the core's), the conformance kit at 4 ranks
# (it runs at 2 and 3), and the benchmark tool's test.
ASAN_EXCLUDED=(-//tests/install:install_test -//examples/plugin_template:out_of_tree_build_test
               -//tests/trace:desync_mpi_test -//tests/trace:desync_shm_test
               -//tests/trace:desync_kvstore_test -//tests/trace:desync_nccl_emulated_test
               -//tests/conformance:gloo_conformance_np4 -//tests/conformance:mpi_conformance_np4
               -//tests/conformance:mpich_conformance_np4 -//tests/conformance:shm_conformance_np4
               -//tests/tools/distbench:distbench_test
               -//tests/python:python_test -//tests/python:torch_test)
bazel_stage --config=asan --build_tests_only "$@" -- //... "${ASAN_EXCLUDED[@]}"

# TSan over the threaded parts: the core, the store server and client, the
# gloo and shm communicators, the SDK runtime (with the template on it),
# the reducer and the survival monitor. The suppressions (third-party
# code only) are a file, whose path must be absolute since tests run in
# their runfiles.
TSAN_TARGETS=(//tests/core/... //tests/rendezvous:store_test //tests/rendezvous:tcp_store_fault_test
              //tests/rendezvous:core_rendezvous_test //tests/shm/... //tests/ddp:gradient_reducer_test
              //tests/gloo/... //tests/sdk:runtime_test //tests/conformance:kvstore_conformance_np3
              //tests/survival/...)
tsan_options="halt_on_error=1:second_deadlock_stack=1:report_signal_unsafe=0"
tsan_options+=":suppressions=$PWD/tools/dev/sanitizers/tsan.supp"
bazel_stage --config=tsan --test_env=TSAN_OPTIONS="$tsan_options" "$@" -- "${TSAN_TARGETS[@]}"

# The libFuzzer targets after replaying every saved crash, ~20 s each: one
# test in the count.
one_test env FUZZ_SECONDS="${DIST_FUZZ_SECONDS:-20}" bash tools/dev/fuzz.sh

finish deep
