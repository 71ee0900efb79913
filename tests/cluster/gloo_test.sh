#!/usr/bin/env bash
# gloo across two namespace hosts (tests/cluster/hosts.sh), two ranks each,
# started by distrun on each host as a user would on two machines. Both
# hosts also have a second interface (eth1), each on a network of its own
# that reaches nobody. (Their addresses sort below eth0's: of two ranks, Gloo has
# the one with the lower address wait and the other dial it, so only then
# would a wrong choice of eth1 show.)
#
#   gloo_test.sh DISTRUN HELLO_ALLREDUCE DISTBENCH
set -uo pipefail
here=$(dirname "$(realpath "$0")")
source "$here/hosts.sh"
distrun=$(realpath "$1")
hello=$(realpath "$2")
distbench=$(realpath "$3")
cluster_require
cluster_up dcg 2
cluster_add_interface dcg 1 eth1 10.212.1.1/24
cluster_add_interface dcg 2 eth1 10.212.2.2/24
failures=0
port=29500

fail() { echo "FAIL $*"; failures=$((failures + 1)); }

# run NAME ENV -- DISTRUN_FLAGS...: distrun on both hosts at once; output
# in $CLUSTER_DIR/NAME.hI, exit codes in rc1 rc2. ENV ("K=V K=V" or "")
# applies to both hosts; ENV1/ENV2 to one. PROGRAM (words) replaces
# hello_allreduce.
run() {
  local name=$1
  shift
  port=$((port + 1))
  local i pids=()
  for i in 1 2; do
    local extra="ENV$i"
    on "$i" env ${ENV:-} ${!extra:-} timeout 120 "$distrun" --nnodes 2 --node_rank $((i - 1)) -n 2 \
      --master_port "$port" "$@" ${PROGRAM:-$hello} >"$CLUSTER_DIR/$name.h$i" 2>&1 &
    pids+=($!)
  done
  wait "${pids[0]}"; rc1=$?
  wait "${pids[1]}"; rc2=$?
}

out() { cat "$CLUSTER_DIR/$1.h1" "$CLUSTER_DIR/$1.h2"; }

# Passes when both hosts exit 0 and all 4 ranks printed a correct sum
# (hello_allreduce checks the sum against its own reference).
expect_pass() {
  local name=$1 correct
  correct=$(out "$name" | grep -c "of 4 (gloo): all_reduce sum -> \[10, 20, ..., 80\] correct")
  if [[ $rc1 == 0 && $rc2 == 0 && $correct == 4 ]]; then
    echo "ok   $name"
  else
    fail "$name (exit codes $rc1 $rc2, $correct of 4 ranks correct)"; out "$name" | tail -20
  fi
}

# Fails on both hosts with a message matching the pattern.
expect_error() {
  local name=$1 pattern=$2
  local text
  text=$(out "$name")
  if [[ $rc1 != 0 && $rc2 != 0 ]] && grep -qE "$pattern" <<<"$text"; then
    echo "ok   $name: $(grep -E -m1 -o "$pattern" <<<"$text")"
  else
    fail "$name (exit codes $rc1 $rc2; wanted an error matching '$pattern')"; out "$name" | tail -20
  fi
}

# env:// with MASTER_ADDR an address; h2's ranks take eth0 (the route to
# 10.213.0.1), not eth1 nor what the host name resolves to (127.0.1.1).
ENV="DIST_LOG_LEVEL=debug" run env_addr --master_addr "$(cluster_addr 1)"
expect_pass env_addr
if grep -q "10.213.0.2.*(the route to the rendezvous host MASTER_ADDR '10.213.0.1', interface eth0)" \
    "$CLUSTER_DIR/env_addr.h2"; then
  echo "ok   h2 (eth0 and eth1) binds eth0, the interface that reaches the others"
else
  fail "h2 did not bind eth0's address"; grep -i transport "$CLUSTER_DIR/env_addr.h2"
fi

# env:// with MASTER_ADDR a host name: on h1 it resolves to 127.0.1.1, so
# h1's ranks take the address at which h2 reached h1.
ENV="DIST_LOG_LEVEL=debug" run env_name --master_addr h1
expect_pass env_name
if grep -q "10.213.0.1.*(the address at which the other hosts reach the rendezvous host" \
    "$CLUSTER_DIR/env_name.h1"; then
  echo "ok   h1 binds 10.213.0.1 although its name resolves to loopback there"
else
  fail "h1 did not bind 10.213.0.1"; grep -i transport "$CLUSTER_DIR/env_name.h1"
fi

# The store hosted by distrun on h1 (--store_port): it listens on every
# interface (h1 is a name), and h2's ranks use it, not a store of rank 0's.
store=$((port + 101))
ENV="DIST_LOG_LEVEL=info" run store_port --master_addr h1 --store_port "$store"
expect_pass store_port
if grep -qF "via env://?external=1&master_port=$store " "$CLUSTER_DIR/store_port.h2" &&
    ! grep -qF "rank 0 hosts the store" "$CLUSTER_DIR/store_port.h1"; then
  echo "ok   h2's ranks use the store distrun hosts on h1"
else
  fail "store_port: the ranks did not use distrun's store"; grep -i store "$CLUSTER_DIR/store_port.h1" "$CLUSTER_DIR/store_port.h2"
fi

run tcp --master_addr h1 --init_method "tcp://$(cluster_addr 1):$((port + 1))"
expect_pass tcp

# file:// on a directory both hosts see (each host's /tmp is its own).
run file --master_addr h1 --init_method "file://$CLUSTER_DIR/file_rendezvous"
expect_pass file

# One host playing both nodes: distrun twice on h1, with MASTER_ADDR
# loopback and with h1's name (which resolves to loopback there). The ranks
# find that they all run on h1 and keep loopback.
for master in 127.0.0.1 h1; do
  port=$((port + 1))
  pids=()
  for node in 0 1; do
    on 1 timeout 120 "$distrun" --nnodes 2 --node_rank $node -n 2 --master_addr $master \
      --master_port "$port" "$hello" >"$CLUSTER_DIR/one_host_$master.$node" 2>&1 &
    pids+=($!)
  done
  wait "${pids[0]}"; rc1=$?
  wait "${pids[1]}"; rc2=$?
  cat "$CLUSTER_DIR/one_host_$master.0" >"$CLUSTER_DIR/one_host_$master.h1"
  cat "$CLUSTER_DIR/one_host_$master.1" >"$CLUSTER_DIR/one_host_$master.h2"
  expect_pass "one_host_$master"
done

# Wrong interfaces, as a user would name them.
ENV="DIST_GLOO_IFNAME=lo" run ifname_lo --master_addr h1
expect_error ifname_lo "would publish the loopback address 127.0.0.1 \(from DIST_GLOO_IFNAME=lo\) but only 2 of 4 ranks run on this host"
ENV="DIST_TIMEOUT=5s" ENV1="DIST_GLOO_IFNAME=eth1" run ifname_eth1 --master_addr h1
expect_error ifname_eth1 "connect: Network is unreachable"

# Broadcasts from rank 1 on h1 to its own host's rank and to h2's, from
# 4 B (no clear-to-send, broadcast_direct.h) to 1 MiB (after one); every
# byte must arrive (--check: distbench exits 1 on a wrong result).
PROGRAM="$distbench --op broadcast --root 1 -b 4 -e 1M -f 4 --check -w 2 --iters 10 --rounds 2" \
  run broadcast_across_hosts --master_addr h1
# grep without -q: with pipefail, a grep that stops at the first match
# leaves `cat` writing into a closed pipe (SIGPIPE), failing the check.
if [[ $rc1 == 0 && $rc2 == 0 ]] && out broadcast_across_hosts | grep -E " 1048576 +262144 .* 0 *$" >/dev/null; then
  echo "ok   broadcast_across_hosts"
else
  fail "broadcast_across_hosts (exit codes $rc1 $rc2)"; out broadcast_across_hosts | tail -20
fi

# The shm backend cannot span hosts: the error names both.
ENV="DIST_TIMEOUT=20s" run shm --master_addr h1 --backend shm
expect_error shm "rank 0 runs on \[host=h1 .*\] and rank [23] on \[host=h2 "

if ((failures == 0)); then echo "PASS"; fi
exit $failures
