#!/bin/bash
# shm against raw Gloo (tcp on 127.0.0.1), side by side in the same
# processes, with distbench: all_reduce float32 sum, 8 B .. 64 MiB, 2 and 4
# ranks. Prints distbench's table per world size and a summary of
# time_ratio = shm time / Gloo time (< 1: shm is faster).
#
#   plugins/backends/shm/bench/compare_with_gloo.sh [OUT_DIR] [extra distbench flags]
set -euo pipefail
cd "$(dirname "$0")/../../../.."
out="${1:-/tmp/shm-vs-gloo}"
shift || true
mkdir -p "$out"
bazel build //tools:distbench >/dev/null
distbench=bazel-bin/tools/distbench/distbench
for n in 2 4; do
  echo "== $n ranks"
  "$distbench" -n "$n" --backend shm --baseline --baseline_library gloo --op all_reduce \
    -b 8 -e 64M -f 2 -w 3 --iters 10 --rounds 3 --csv "$out/np$n.csv" "$@" |
    grep -v '^distbench:' | tee "$out/np$n.txt"
done
echo "== summary (time_ratio = shm / gloo)"
for n in 2 4; do
  awk -F, -v n="$n" 'NR > 1 && $15 != "" {
      r = $15 + 0; s += log(r); k++;
      if (max == "" || r > max) { max = r; at = $4 }
      if (min == "" || r < min) { min = r; mat = $4 } }
    END { printf "%d ranks: %d sizes, geometric mean %.3f, best %.3f (%s B), worst %.3f (%s B)\n",
          n, k, exp(s / k), min, mat, max, at }' "$out/np$n.csv"
done
