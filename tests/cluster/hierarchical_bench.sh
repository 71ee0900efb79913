#!/usr/bin/env bash
# Hierarchical against flat gloo on namespace hosts (hosts.sh), side by side
# in one run: for each layout (2 hosts x R ranks), distbench runs in turns
# with DIST_HIERARCHICAL=auto and =off (A B B A ...), every result checked;
# the table gives each mode's median time and flat/hierarchical.
# A benchmark, not a test: it asserts nothing about speed.
#
#   bazel run -c opt //tests/cluster:hierarchical_bench -- [--ranks "2 4"] [--turns 2]
#       [--ops all_reduce,broadcast,all_gather,barrier] [-b 1K] [-e 64M] [--iters 5]
set -uo pipefail
here=$(dirname "$(realpath "$0")")
source "$here/hosts.sh"
distrun=$(realpath "$1")
distbench=$(realpath "$2")
report=$(realpath "$3")
shift 3
ranks="2 4" turns=2 ops="all_reduce,broadcast,all_gather,barrier" smallest=1K largest=64M iters=5
while (($#)); do
  case $1 in
    --ranks) ranks=$2; shift 2 ;;
    --turns) turns=$2; shift 2 ;;
    --ops) ops=$2; shift 2 ;;
    -b) smallest=$2; shift 2 ;;
    -e) largest=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
cluster_require
cluster_up dcb 2
port=29800
results=$CLUSTER_DIR/results
mkdir -p "$results"

# bench MODE N TURN: distbench on both hosts, N ranks each.
bench() {
  local mode=$1 n=$2 turn=$3 i pids=()
  port=$((port + 1))
  for i in 1 2; do
    on "$i" env DIST_HIERARCHICAL="$mode" DIST_TIMEOUT=300s timeout 1200 "$distrun" --nnodes 2 \
      --node_rank $((i - 1)) -n "$n" --master_addr "$(cluster_addr 1)" --master_port "$port" \
      "$distbench" --op "$ops" -b "$smallest" -e "$largest" -f 4 --check -w 2 --iters "$iters" \
      --rounds 1 --progress=false --json "$results/$mode.$n.$turn.json" \
      >"$CLUSTER_DIR/$mode.$n.$turn.h$i" 2>&1 &
    pids+=($!)
  done
  wait "${pids[0]}" && wait "${pids[1]}" || {
    echo "distbench failed ($mode, 2 x $n, turn $turn):"; tail -n 20 "$CLUSTER_DIR/$mode.$n.$turn".h*
    exit 1
  }
}

for n in $ranks; do
  for ((turn = 0; turn < turns; turn++)); do
    # A B, then B A: neither mode always runs first.
    if ((turn % 2 == 0)); then order="auto off"; else order="off auto"; fi
    for mode in $order; do
      echo "2 hosts x $n ranks, turn $((turn + 1)) of $turns: DIST_HIERARCHICAL=$mode" >&2
      bench "$mode" "$n" "$turn"
    done
  done
done
python3 "$report" "$results"
