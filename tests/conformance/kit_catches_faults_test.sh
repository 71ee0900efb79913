#!/usr/bin/env bash
# The conformance kit must fail a wrong backend, and say what is wrong: runs
# it on liar_backend.cc in each of its fault modes and checks the exit code
# and the failing rows.
set -uo pipefail
kit=$1
plugin=$2
failures=0

run() {  # mode, then the patterns that must appear in the output
  local mode=$1; shift
  local out="$TEST_TMPDIR/$mode.log"
  DIST_TEST_LIAR=$mode "$kit" --plugin="$plugin" -n 2 --quick --only_failures \
      --skip_sections=mismatched --timeout_s=100 --op_timeout_ms=10000 >"$out" 2>&1
  local code=$?
  if [[ $code -ne 1 ]]; then
    echo "FAIL: mode $mode: the kit exited with $code; want 1 (checks failed)"; failures=$((failures + 1))
  fi
  if ! tail -n 1 "$out" | grep -Eq '^[0-9]+ passed, [1-9][0-9]* failed$'; then
    echo "FAIL: mode $mode: last line is not 'N passed, M failed' with M > 0: $(tail -n 1 "$out")"
    failures=$((failures + 1))
  fi
  for pattern in "$@"; do
    if ! grep -Eq -- "$pattern" "$out"; then
      echo "FAIL: mode $mode: no output line matches: $pattern"; failures=$((failures + 1))
    fi
  done
  if [[ $failures -ne 0 ]]; then echo "--- output of mode $mode:"; cat "$out"; fi
}

# Declared but broken, and undeclared but working.
run caps 'all_reduce out-of-place +float16 +sum .*FAIL' \
         'all_reduce: undeclared dtype fails +int8 .*FAIL +rank 0: INTERNAL: succeeded, but must fail'
# Wrong data: named element, expected and actual values.
run data 'all_reduce out-of-place +int32 +sum +7 +FAIL +rank 0: INTERNAL: wrong result: element 0: expected -?[0-9]+, got -?[0-9]+ \(1 of 7 elements differ\)'

# And the honest backend passes (the same binary without a fault).
if ! "$kit" --plugin="$plugin" -n 2 --quick --only_failures --skip_sections=mismatched \
    --timeout_s=100 >"$TEST_TMPDIR/honest.log" 2>&1; then
  echo "FAIL: the liar without a fault did not pass:"; cat "$TEST_TMPDIR/honest.log"
  failures=$((failures + 1))
fi
[[ $failures -eq 0 ]] && echo "PASS: the kit caught every injected fault"
exit $((failures > 0))
