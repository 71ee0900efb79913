#!/usr/bin/env bash
# A host lost mid-job: three namespace hosts, two ranks each, run verified
# all-reduces in a loop; once every rank has done a few, h2's link is cut
# (ip link set ... down). Every rank on h1 and h3 must fail within the
# timeout with an error that names ranks 2 and 3, the ranks on h2.
# The job runs flat (DIST_HIERARCHICAL=off): hierarchically, the error comes
# from the leaders' group, which counts its ranks its own way and names h2
# by its leader, through a map (hierarchical_test.sh covers that mode).
#
#   link_cut_test.sh DISTRUN ALLREDUCE_LOOP
set -uo pipefail
here=$(dirname "$(realpath "$0")")
source "$here/hosts.sh"
distrun=$(realpath "$1")
loop=$(realpath "$2")
cluster_require
cluster_up dcl 3
failures=0
timeout_s=15  # generous: a step takes milliseconds, even on a loaded machine
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

declare -a pids
for i in 1 2 3; do
  on "$i" env DIST_TIMEOUT=${timeout_s}s DIST_HIERARCHICAL=off timeout 120 "$distrun" --nnodes 3 --node_rank $((i - 1)) \
    -n 2 --master_addr "$(cluster_addr 1)" --master_port 29600 --grace 30s \
    "$loop" 3000 20 >"$CLUSTER_DIR/h$i.log" 2>&1 &
  pids[$i]=$!
done

# Every rank has completed step 3.
for _ in $(seq 600); do
  (( $(cat "$CLUSTER_DIR"/h*.log | grep -c " step 3 correct") == 6 )) && break
  for i in 1 2 3; do kill -0 "${pids[$i]}" 2>/dev/null || break 2; done
  sleep 0.1
done
if (( $(cat "$CLUSTER_DIR"/h*.log | grep -c " step 3 correct") != 6 )); then
  fail "the job did not get going"; tail -n 20 "$CLUSTER_DIR"/h*.log; exit 1
fi
cut_at=$(date +%s.%N)
cluster_link_down dcl 2
echo "cut h2's link"

# Every surviving rank reports its error; bounded, not measured: the
# timeout plus the grace to compare notes, generously.
limit=$((timeout_s * 2 + 5))
for _ in $(seq $((limit * 10))); do
  (( $(cat "$CLUSTER_DIR"/h1.log "$CLUSTER_DIR"/h3.log | grep -c "all_reduce failed") >= 4 )) && break
  sleep 0.1
done
took=$(awk -v a="$cut_at" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
echo "the surviving ranks reported within ${took}s of the cut (timeout ${timeout_s}s)"
for r in 0 1 4 5; do
  line=$(grep -h "^\[$r\] rank $r: all_reduce failed" "$CLUSTER_DIR"/h*.log)
  if [[ -z $line ]]; then
    fail "rank $r reported no failure within ${limit}s of the cut"
  elif grep -qE "ranks that reported no failure within [^:]*: 2,3 " <<<"$line"; then
    echo "ok   rank $r names ranks 2 and 3: ${line:0:300}..."
  else
    fail "rank $r's error does not name ranks 2 and 3: $line"
  fi
done
# Their distrun ends too (rank 0 first lets the store linger for the
# unreachable ranks, up to the timeout).
for i in 1 3; do
  wait "${pids[$i]}"
  rc=$?
  [[ $rc != 0 ]] || fail "distrun on h$i exited 0 although its ranks failed"
done
kill "${pids[2]}" 2>/dev/null
if ((failures == 0)); then echo "PASS"; fi
exit $failures
