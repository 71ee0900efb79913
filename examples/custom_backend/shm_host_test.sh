#!/bin/bash
# The example host, 4 ranks, DIST_BACKEND=shm: every rank must report the
# shm backend and a correct result.
set -euo pipefail
distrun="$1"
host="$2"
out="$(DIST_BACKEND=shm DIST_TIMEOUT=60000 timeout 90 "$distrun" -n 4 "$host" 2>&1)" || {
  echo "$out"
  echo "FAIL: distrun exited with $?"
  exit 1
}
echo "$out"
for rank in 0 1 2 3; do
  grep -q "rank $rank of 4 on backend 'shm': .* correct" <<<"$out" || {
    echo "FAIL: rank $rank did not report a correct result on shm"
    exit 1
  }
done
echo PASS
