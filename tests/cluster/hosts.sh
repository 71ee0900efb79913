# Sourced by the cluster tests: makes "hosts" on this machine, each with its
# own network namespace (eth0 on a bridge shared by the hosts), hostname
# (UTS namespace), /dev/shm, /tmp and /etc/hosts (mount namespace), so that
# nothing is shared that real hosts would not share. Each host's /etc/hosts
# maps its own name to 127.0.1.1, as Debian's installer writes it, and the
# other hosts' names to their addresses.
#
#   cluster_require                 # skips the test (exit 0, reason printed) without root/namespaces
#   cluster_up ID N                 # hosts h1..hN at 10.213.0.1..N; ID (<= 5 chars) keeps names apart
#   cluster_add_interface ID I NAME ADDR  # a second interface on host I, on its own bridge
#   on I CMD...                     # runs CMD on host I (nsenter into its namespaces)
#   daemon_on I LOG CMD...          # starts CMD in the background on host I, stopped on exit
#   cluster_addr I                  # 10.213.0.I
#   cluster_link_down ID I          # cuts host I off the bridge
#   cluster_track PID...            # stops these processes first on exit
#   $CLUSTER_DIR                    # a directory every host sees; holders lists "hI PID"
#
# Only addresses inside these namespaces are used; the root namespace gets
# none, so no traffic leaves them. Everything is removed on exit (trap),
# and leftovers of an earlier killed run with the same ID before starting.
export PATH="/usr/sbin:/sbin:$PATH"
CLUSTER_SUBNET=10.213.0
declare -a CLUSTER_HOLDER=()
CLUSTER_ID=""
CLUSTER_N=0
CLUSTER_EXTRA_BRIDGES=()

cluster_skip() {
  echo "SKIP: $*"
  exit 0
}

cluster_require() {
  [[ $(id -u) == 0 ]] || cluster_skip "the cluster tests need root (network namespaces); run as root"
  for tool in ip unshare nsenter; do
    command -v "$tool" >/dev/null || cluster_skip "'$tool' is missing (apt-get install iproute2 util-linux)"
  done
  local probe="dcprobe$$"
  ip netns add "$probe" 2>/dev/null || cluster_skip "cannot create a network namespace here (ip netns add failed)"
  if ! ip netns exec "$probe" unshare --uts --mount --propagation private true 2>/dev/null; then
    ip netns del "$probe"
    cluster_skip "cannot create UTS and mount namespaces here (unshare --uts --mount failed)"
  fi
  ip netns del "$probe"
}

cluster_addr() { echo "$CLUSTER_SUBNET.$1"; }

# Removes whatever an ID left behind; safe to call twice.
cluster_clean() {
  local id=$1 pid ns link
  for pid in "${CLUSTER_HOLDER[@]}"; do
    [[ -n $pid ]] && kill "$pid" 2>/dev/null
  done
  [[ -n ${CLUSTER_DIR:-} && -d $CLUSTER_DIR ]] && rm -rf "$CLUSTER_DIR"
  # Whatever still runs on a host (started there by this test): TERM, a
  # moment, then KILL.
  local namespaces=() pids=()
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    [[ $ns == "${id}h"* ]] && namespaces+=("$ns")
  done
  for ns in "${namespaces[@]}"; do pids+=($(ip netns pids "$ns" 2>/dev/null)); done
  if ((${#pids[@]} > 0)); then
    kill "${pids[@]}" 2>/dev/null
    for _ in $(seq 30); do
      kill -0 "${pids[@]}" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "${pids[@]}" 2>/dev/null
  fi
  for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null; done
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    [[ $link == "${id}"* ]] && ip link del "$link" 2>/dev/null
  done
  return 0
}

# Processes to stop before the hosts go (daemons the test started).
declare -a CLUSTER_DAEMONS=()
cluster_track() { CLUSTER_DAEMONS+=("$@"); }

cluster_down() {
  local pid
  for pid in "${CLUSTER_DAEMONS[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${CLUSTER_DAEMONS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  done
  CLUSTER_DAEMONS=()
  [[ -n $CLUSTER_ID ]] && cluster_clean "$CLUSTER_ID"
  CLUSTER_HOLDER=()
}

cluster_up() {
  local id=$1 n=$2 i j
  CLUSTER_ID=$id
  CLUSTER_N=$n
  cluster_clean "$id"
  trap cluster_down EXIT
  trap 'cluster_down; exit 143' TERM INT
  # A directory every host sees (the hosts' /tmp and /dev/shm are their
  # own); short, for socket paths (108 bytes at most), and removed on exit.
  CLUSTER_DIR=$(mktemp -d "/var/tmp/dist-cluster-$id.XXXXXX")
  ip link add "${id}br" type bridge
  ip link set "${id}br" up
  for ((i = 1; i <= n; i++)); do
    ip netns add "${id}h$i"
    ip link add "${id}v$i" type veth peer name eth0 netns "${id}h$i"
    ip link set "${id}v$i" master "${id}br" up
    ip -n "${id}h$i" addr add "$(cluster_addr "$i")/24" dev eth0
    ip -n "${id}h$i" link set eth0 up
    ip -n "${id}h$i" link set lo up
    {
      echo "127.0.0.1 localhost"
      echo "127.0.1.1 h$i"
      for ((j = 1; j <= n; j++)); do
        [[ $j != "$i" ]] && echo "$(cluster_addr "$j") h$j"
      done
    } >"$CLUSTER_DIR/hosts.h$i"
    # The holder keeps the host's namespaces alive; `on` enters them.
    ip netns exec "${id}h$i" unshare --uts --mount --propagation private sh -c "
      hostname h$i &&
      mount -t tmpfs -o size=512m tmpfs /dev/shm &&
      mount -t tmpfs tmpfs /tmp &&
      mount --bind '$CLUSTER_DIR/hosts.h$i' /etc/hosts &&
      exec sleep 100000" &
    CLUSTER_HOLDER[$i]=$!
    echo "h$i ${CLUSTER_HOLDER[$i]}" >>"$CLUSTER_DIR/holders"
  done
  export CLUSTER_DIR
  # Ready when every host has its own hostname.
  for ((i = 1; i <= n; i++)); do
    for _ in $(seq 100); do
      [[ $(nsenter -t "${CLUSTER_HOLDER[$i]}" -u hostname 2>/dev/null) == "h$i" ]] && break
      sleep 0.1
    done
    [[ $(nsenter -t "${CLUSTER_HOLDER[$i]}" -u hostname) == "h$i" ]] || {
      echo "FAIL: host h$i did not come up"; exit 1; }
  done
}

on() {
  local i=$1
  shift
  nsenter -t "${CLUSTER_HOLDER[$i]}" -u -m -n -- "$@"
}

# Starts a daemon on host I, output to LOG; its pid is tracked (stopped
# first on exit).
daemon_on() {
  local i=$1 log=$2
  shift 2
  (exec nsenter -t "${CLUSTER_HOLDER[$i]}" -u -m -n -- "$@" >"$log" 2>&1) &
  cluster_track $!
}

cluster_add_interface() {
  local id=$1 i=$2 name=$3 addr=$4
  ip link add "${id}b$i" type bridge
  ip link set "${id}b$i" up
  ip link add "${id}x$i" type veth peer name "$name" netns "${id}h$i"
  ip link set "${id}x$i" master "${id}b$i" up
  ip -n "${id}h$i" addr add "$addr" dev "$name"
  ip -n "${id}h$i" link set "$name" up
}

cluster_link_down() {
  ip link set "$1v$2" down
}
