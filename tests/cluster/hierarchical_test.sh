#!/usr/bin/env bash
# Hierarchical collectives (core/host_hierarchy.h) on namespace hosts: gloo
# jobs of 2 hosts x 2 ranks and 2 x 4 (distrun on each host), and one whose
# ranks alternate between the hosts (started by hand), run hierarchy_check:
# all_reduce, broadcast from every root, all_gather and barrier against
# references, and bit for bit against a flat group of the same ranks. Then
# DIST_HIERARCHICAL=off runs them flat, and a rank killed mid-job makes
# every other rank fail at once (shm's and gloo's aborts pass it on).
#
#   hierarchical_test.sh DISTRUN HIERARCHY_CHECK ALLREDUCE_LOOP
set -uo pipefail
here=$(dirname "$(realpath "$0")")
source "$here/hosts.sh"
distrun=$(realpath "$1")
check=$(realpath "$2")
loop=$(realpath "$3")
cluster_require
cluster_up dch 2
failures=0
port=29700
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
out() { cat "$CLUSTER_DIR/$1".h*; }

# run NAME RANKS_PER_HOST ENV: distrun on both hosts, hierarchy_check.
run() {
  local name=$1 n=$2 env=$3 i pids=()
  port=$((port + 1))
  for i in 1 2; do
    on "$i" env DIST_LOG_LEVEL=info DIST_TIMEOUT=60s $env timeout 300 "$distrun" --nnodes 2 \
      --node_rank $((i - 1)) -n "$n" --master_addr "$(cluster_addr 1)" --master_port "$port" \
      "$check" >"$CLUSTER_DIR/$name.h$i" 2>&1 &
    pids+=($!)
  done
  wait "${pids[0]}"; rc1=$?
  wait "${pids[1]}"; rc2=$?
}

# expect NAME WORLD LAYOUT: every rank correct; LAYOUT is what rank 0
# logged ("2 hosts x 2 ranks"), or "flat" for no hierarchy.
expect() {
  local name=$1 world=$2 layout=$3 correct
  correct=$(out "$name" | grep -c "of $world: hierarchy checks correct")
  if [[ $rc1 != 0 || $rc2 != 0 || $correct != "$world" ]]; then
    fail "$name (exit codes $rc1 $rc2, $correct of $world ranks correct)"; out "$name" | tail -30
  # (grep without -q after a pipe: with pipefail, a grep that stops early
# leaves `cat` writing into a closed pipe.)
elif [[ $layout == flat ]] && out "$name" | grep "hierarchical all_reduce" >/dev/null; then
    fail "$name ran hierarchically"; out "$name" | grep hierarchical
  elif [[ $layout != flat ]] && ! out "$name" | grep "hierarchical all_reduce, broadcast, all_gather and barrier on $layout: shm within a host, gloo between 2 leaders" >/dev/null; then
    fail "$name did not run hierarchically on $layout"; out "$name" | grep -i "hierarch\|ready" | head
  else
    echo "ok   $name: $world ranks correct ($layout)"
  fi
}

run two_by_two 2 ""
expect two_by_two 4 "2 hosts x 2 ranks"
run two_by_four 4 ""
expect two_by_four 8 "2 hosts x 4 ranks"
run off 2 "DIST_HIERARCHICAL=off"
expect off 4 flat

# start NAME "H H ..." PROGRAM...: rank r on host H (the r-th word), env://.
start() {
  local name=$1 placement=($2) r
  shift 2
  port=$((port + 1))
  pids=()
  for r in "${!placement[@]}"; do
    on "${placement[$r]}" env DIST_LOG_LEVEL=info DIST_TIMEOUT=60s RANK=$r \
      WORLD_SIZE=${#placement[@]} DCH_RUN=$name MASTER_ADDR="$(cluster_addr 1)" \
      MASTER_PORT=$port timeout 300 "$@" >"$CLUSTER_DIR/$name.r$r" 2>&1 &
    pids[$r]=$!
  done
}

# expect_started NAME WORLD LAYOUT: every rank of a started job correct.
expect_started() {
  local name=$1 world=$2 layout=$3 correct=0 r
  for ((r = 0; r < world; r++)); do
    wait "${pids[$r]}" && grep -q "rank $r of $world: hierarchy checks correct" \
      "$CLUSTER_DIR/$name.r$r" && correct=$((correct + 1))
  done
  if [[ $correct == "$world" ]] && grep -q "hierarchical all_reduce.* on $layout" "$CLUSTER_DIR/$name.r0"; then
    echo "ok   $name: $world ranks correct ($layout)"
  else
    fail "$name ($correct of $world correct)"; tail -n 20 "$CLUSTER_DIR/$name".r*
  fi
}

# Ranks 0,2 on h1 and 1,3 on h2: the subgroups' ranks are not the group's.
start alternating "1 2 1 2" "$check"
expect_started alternating 4 "2 hosts x 2 ranks"
# Three ranks on h1, two on h2: through the leaders, all_gather flat.
start unequal "1 1 2 2 1" "$check"
expect_started unequal 5 "2 hosts (3+2 ranks)"

# A rank killed mid-job (rank 3, no leader: h2's ranks are 1 and 3). The
# others fail at once, well inside the 60 s timeout: h2's leader sees the
# shm peer die and aborts the leaders' group, h1's leader hears it from
# gloo and aborts h1's shm group, where rank 2 waits.
start killed "1 2 1 2" "$loop" 100000 5
for _ in $(seq 300); do
  (( $(cat "$CLUSTER_DIR"/killed.r* | grep -c " step 20 correct") == 4 )) && break
  sleep 0.1
done
for p in $(pgrep -x allreduce_loop); do
  if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "DCH_RUN=killed" &&
      tr '\0' '\n' <"/proc/$p/environ" | grep -qx "RANK=3"; then
    kill -9 "$p"
  fi
done
killed_at=$(date +%s)
for r in 0 1 2; do wait "${pids[$r]}"; done
took=$(( $(date +%s) - killed_at ))
reported=$(grep -l "all_reduce failed" "$CLUSTER_DIR"/killed.r0 "$CLUSTER_DIR"/killed.r1 "$CLUSTER_DIR"/killed.r2 | wc -l)
# Rank 1 (h2's leader) saw rank 3 die, as rank 1 of h2's shm group: its
# message says which ranks that group holds.
if [[ $reported == 3 ]] && ((took < 30)) &&
    grep -q "in group 'default.host1' ranks 0,1 are ranks 1,3, in group 'default.rail0' ranks 0,1 are ranks 0,1): shm: [a-z_]* on group 'default.host1' failed: rank 1 (pid [0-9]*) died" \
      "$CLUSTER_DIR/killed.r1"; then
  echo "ok   killed: ranks 0, 1 and 2 failed within ${took}s of the kill (timeout 60s)"
  grep -h "all_reduce failed" "$CLUSTER_DIR"/killed.r[012] | cut -c1-300
else
  fail "killed: $reported of 3 ranks reported a failure, ${took}s after the kill"
  tail -n 5 "$CLUSTER_DIR"/killed.r*
fi

if ((failures == 0)); then echo "PASS"; fi
exit $failures
