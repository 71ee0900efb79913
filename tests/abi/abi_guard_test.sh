#!/usr/bin/env bash
# The ABI guard: the headers and libdist.so must match sdk/abi/abi_v1.txt
# exactly (or the test says what changed and what to do), and must stay a
# compatible extension of the frozen 1.0 headers.
set -uo pipefail
gen=$1 gen_v1_0=$2 check=$3 describe=$4 libdist=$5 expected=$6
now="$TEST_TMPDIR/abi_now.txt"
v1_0="$TEST_TMPDIR/abi_v1_0.txt"
"$describe" "$gen" "$libdist" > "$now" || { echo "FAIL: could not describe the ABI"; exit 1; }
"$gen_v1_0" > "$v1_0" || { echo "FAIL: could not describe the frozen 1.0 ABI"; exit 1; }
status=0
"$check" --actual="$now" --expected="$expected" || status=1
"$check" --actual="$now" --baseline="$v1_0" --baseline_name="the frozen ABI 1.0 (tests/abi/v1_0)" || status=1
# The description covers the host API's functions: a sanity floor.
symbols=$(grep -c '^host symbol ' "$now")
if [[ $symbols -lt 20 ]]; then
  echo "FAIL: libdist.so exports only $symbols dist_* functions; the description expects the host API"
  status=1
fi
exit $status
