#!/usr/bin/env bash
# desync_test.sh BACKEND PROGRAM DISTTRACE [CUDA_EMULATION_SO]
#
# BACKEND: gloo, shm, mpi, nccl (on the CPU emulation of CUDA and NCCL given
# as the last argument, see tests/nccl/emulation), or a path to a plugin .so
# (a third-party backend).
#
# Runs desync_program on 3 real processes (started here with env://; mpi:
# under mpirun) in each scenario with DIST_DEBUG=detail and
# DIST_TRACE_DIR, and checks every rank's error and disttrace's verdict on
# the dumps. Mismatches must fail every rank at once: their runs get a 30 s
# timeout and must end well before it. Skipped and stopped ranks are bounded
# by a 3 s timeout.
set -uo pipefail
backend=$1
program=$(realpath "$2")
disttrace=$(realpath "$3")
root=${TEST_TMPDIR:-$(mktemp -d)}
[[ $backend == */* ]] && backend=$(realpath "$backend")
if [[ $backend == nccl ]]; then
  # As tests/nccl/emulation/run_emulated.sh: the emulation stands in for
  # libcudart.so.13 and libnccl.so.2; one emulated GPU per rank.
  emulation="$root/cuda_emulation"
  mkdir -p "$emulation"
  cp -L "$4" "$emulation/libcudart.so.13"
  ln -sf libcudart.so.13 "$emulation/libnccl.so.2"
  export LD_LIBRARY_PATH="$emulation${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export DIST_CUDA_EMULATION_DEVICES=3 DESYNC_DEVICE=cuda
fi
dev=""  # what the messages add for the buffers' device
[[ $backend == nccl ]] && dev=", cuda"
label=${backend##*/}
failures=0
fail() { echo "FAIL [$label $scenario]: $*"; failures=$((failures + 1)); }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits for the listed pids, killing them all after $1 seconds.
wait_bounded() {
  local limit=$1; shift
  local deadline=$((SECONDS + limit))
  while (( SECONDS < deadline )); do
    local alive=0
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    (( alive )) || return 0
    sleep 0.1
  done
  for pid in "$@"; do kill -CONT "$pid" 2>/dev/null; kill -KILL "$pid" 2>/dev/null; done
  return 1
}

# run SCENARIO TIMEOUT: starts the 3 ranks; outputs in $dir/out.
run() {
  local timeout=$2
  export DIST_DEBUG=detail DIST_TIMEOUT=$timeout DIST_TRACE_DIR=$dir DIST_BACKEND=$backend
  export MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port)
  local start=$SECONDS
  if [[ $backend == mpi ]]; then
    local root_flags=()
    [[ "$(id -u)" == "0" ]] && root_flags=(--allow-run-as-root)
    # The stopped rank is continued once the others reported their error;
    # they wait for it in MPI_Finalize.
    timeout 90 mpirun "${root_flags[@]}" --oversubscribe -np 3 \
      --mca btl self,vader,tcp --mca btl_tcp_if_include lo --mca pml ob1 \
      -x DIST_DEBUG -x DIST_TIMEOUT -x DIST_TRACE_DIR -x DIST_BACKEND -x MASTER_ADDR \
      -x MASTER_PORT -x DESYNC_EXIT_ZERO="$([[ $1 == stop ]] && echo 1)" \
      "$program" "$1" > "$dir/out" 2>&1 &
    local launcher=$!
    if [[ $1 == stop ]]; then
      local deadline=$((SECONDS + 60))
      while (( SECONDS < deadline )) && [[ $(grep -c 'FAILED' "$dir/out") -lt 2 ]]; do
        sleep 0.1
      done
      local pid
      pid=$(sed -n 's/.*stopping before all_reduce #3 (pid \([0-9]*\)).*/\1/p' "$dir/out")
      [[ -n $pid ]] && kill -CONT "$pid"
    fi
    wait_bounded 90 "$launcher" || fail "mpirun did not finish within 90 s"
  else
    local pids=()
    for rank in 0 1 2; do
      RANK=$rank LOCAL_RANK=$rank WORLD_SIZE=3 "$program" "$1" > "$dir/out.$rank" 2>&1 &
      pids+=($!)
    done
    if [[ $1 == stop || $1 == stuck ]]; then
      wait_bounded 60 "${pids[0]}" "${pids[1]}" || fail "ranks 0,1 did not finish within 60 s"
      kill -CONT "${pids[2]}"
    fi
    wait_bounded 60 "${pids[@]}" || fail "the ranks did not finish within 60 s"
    cat "$dir"/out.* > "$dir/out"
  fi
  elapsed=$((SECONDS - start))
}

expect_out() {  # every listed rank printed "rank R: FAILED OPERATION: TEXT"
  local text=$1; shift
  for rank in "$@"; do
    grep -qF "rank $rank: FAILED ${operation:-operation #3}: $text" "$dir/out" ||
      fail "rank $rank did not report: $text"
  done
}

expect_trace() {  # disttrace's text and --json verdict [of group $3]
  local kind=$1 text=$2 group=${3:-default}
  "$disttrace" "$dir" > "$dir/trace.txt" 2>&1
  local status=$?
  grep -qF "$text" "$dir/trace.txt" || fail "disttrace did not say: $text"
  "$disttrace" --json "$dir" > "$dir/trace.json" 2>&1
  python3 - "$dir/trace.json" "$kind" "$group" <<'PY' || fail "disttrace --json verdict is not $kind"
import json, sys
data = json.load(open(sys.argv[1]))
groups = {g["name"]: g for g in data["groups"]}
sys.exit(0 if groups[sys.argv[3]]["verdict"] == sys.argv[2] else 1)
PY
  if [[ $kind == consistent ]]; then
    [[ $status == 0 ]] || fail "disttrace exited $status on a consistent job"
  else
    [[ $status == 1 ]] || fail "disttrace exited $status, expected 1 (a problem found)"
  fi
}

mismatch="where ranks 0,1 called all_reduce(sum, 1024 x float32$dev)"
scenarios="ok other_op count dtype subgroup p2p skip stop stuck"
# Under mpirun the ranks that gave up wait in MPI_Finalize for the stopped one,
# which then cannot finish its own pending MPI operation; on the emulated
# NCCL their abort of an operation a stopped peer is inside can block (seen
# in 1 run of 2), which is the nccl tests' business, not this one's.
[[ $backend == mpi || $backend == nccl ]] && scenarios=${scenarios% stuck}
for scenario in $scenarios; do
  dir="$root/$backend-$scenario"
  mkdir -p "$dir"
  case $scenario in
    ok)
      run ok 30s
      [[ $(grep -c ': ok$' "$dir/out") == 3 ]] || fail "not every rank succeeded"
      expect_trace consistent "group 'default': ranks 0,1,2 agree on every operation recorded (last: barrier #4, completed)"
      ;;
    other_op|count|dtype)
      run $scenario 30s
      case $scenario in
        other_op) called="broadcast(root 0, 2048 x float32$dev)" ;;
        count) called="all_reduce(sum, 2048 x float32$dev)" ;;
        dtype) called="all_reduce(sum, 1024 x int32$dev)" ;;
      esac
      expect_out "all_reduce #3 on group 'default': rank 2 called $called $mismatch" 0 1 2
      # At once: a check that waited out the 30 s timeout would fail here.
      (( elapsed < 20 )) || fail "the mismatch took ${elapsed}s, as if it waited for the timeout"
      expect_trace mismatch "group 'default': all_reduce #3: rank 2 called $called $mismatch"
      ;;
    subgroup)
      run subgroup 30s
      operation="subgroup operation #1" expect_out "all_reduce #1 on group 'default.1': rank 1 called all_reduce(sum, 2048 x float32$dev) where rank 0 called all_reduce(sum, 1024 x float32$dev)" 1 2
      grep -qF "rank 0: ok (not in the subgroup)" "$dir/out" || fail "rank 0 did not stay out"
      (( elapsed < 20 )) || fail "the mismatch took ${elapsed}s, as if it waited for the timeout"
      expect_trace mismatch "group 'default.1': all_reduce #1: rank 1 called all_reduce(sum, 2048 x float32$dev) where rank 0 called all_reduce(sum, 1024 x float32$dev)" default.1
      ;;
    p2p)
      run p2p 5s
      recv="recv(from 0, tag 5, 2048 x float32$dev)" send="send(to 2, tag 5, 1024 x float32$dev)"
      # Whichever side posts second fails at once naming both calls.
      grep -qF "rank 2 called $recv where rank 0 called $send" "$dir/out" ||
        grep -qF "rank 0 called $send where rank 2 called $recv" "$dir/out" ||
        fail "no rank named both sides of the mismatched send/recv"
      expect_trace p2p_failed "group 'default': the collectives agree; rank "
      ;;
    skip)
      run skip 3s
      expect_out "all_reduce #3 on group 'default': rank 2 did not reach it within 3s (ranks 0,1 did" 0 1
      expect_trace divergence "group 'default': all_reduce #3 entered by ranks 0,1; rank 2 never entered it (its last operation: broadcast #2, completed)"
      ;;
    stop)
      run stop 3s
      expect_out "all_reduce #3 on group 'default': rank 2 did not reach it within 3s (ranks 0,1 did" 0 1
      grep -qF "rank 2: FAILED operation #3: all_reduce #3 on group 'default'" "$dir/out" ||
        fail "the continued rank 2 did not fail its late all_reduce #3"
      expect_trace late "group 'default': all_reduce #3: rank 2 entered it"
      grep -qF "after the others had given up (its last operation: broadcast #2, completed)" \
        "$dir/trace.txt" || fail "disttrace did not name rank 2's last operation"
      ;;
    stuck)
      run stuck 3s
      expect_trace stuck "group 'default': rank 2 is stuck inside all_reduce #3 (started "
      # Three outcomes are right. Usually ranks 0,1 give up on all_reduce #3.
      # But where one exchange suffices (kvstore: each rank publishes its
      # bytes once), rank 2's worker may have published before the stop; then
      # ranks 0,1 complete #3 and time out in barrier #4 naming rank 2.
      if grep -qE "rank [01]: FAILED barrier #4: barrier #4 on group 'default': rank 2 did not reach it" \
          "$dir/out"; then
        for rank in 0 1; do
          grep -qE "rank $rank: FAILED barrier #4: .*rank 2 did not reach it" "$dir/out" ||
            fail "rank $rank did not report barrier #4 failing for rank 2"
        done
        grep -qF "before its dump, never completed) while ranks 0,1 completed it" \
          "$dir/trace.txt" || fail "disttrace did not say that ranks 0,1 completed it"
      elif grep -qE "rank [01]: FAILED barrier #4: " "$dir/out"; then
        # Or in between (seen with gloo): rank 2 sent all one rank needed
        # before it stopped, so that rank completed #3 and failed in barrier
        # #4, either on the failure the other one reported for #3 or, when
        # its own wait ran out first, naming the ranks that never reached #4.
        for rank in 0 1; do
          grep -qE "rank $rank: FAILED (operation #3|barrier #4): .*(all_reduce #3|ranks? [0-9,]+ did not reach it)" \
            "$dir/out" || fail "rank $rank did not report all_reduce #3 or barrier #4 failing"
        done
        grep -qE "before its dump, never completed\) while rank [01] completed it, rank [01] gave up on it" \
          "$dir/trace.txt" || fail "disttrace did not say which of ranks 0,1 completed it"
      else
        for rank in 0 1; do
          grep -qE "rank $rank: FAILED operation #3: .*all_reduce" "$dir/out" ||
            fail "rank $rank did not report its all_reduce #3 failing"
        done
        grep -qF "before its dump, never completed) while ranks 0,1 gave up on it" \
          "$dir/trace.txt" || fail "disttrace did not say that ranks 0,1 gave up"
      fi
      ;;
  esac
  if (( failures > 0 )); then
    echo "--- output of $scenario:"; cat "$dir/out"
    echo "--- disttrace:"; cat "$dir/trace.txt" 2>/dev/null
    break
  fi
  echo "PASS [$label $scenario] (${elapsed}s): $(head -n1 "$dir/trace.txt")"
done
exit $((failures > 0))
