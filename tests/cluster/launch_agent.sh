#!/usr/bin/env bash
# Open MPI's launch agent (--mca plm_rsh_agent) for the namespace hosts of
# hosts.sh, in place of ssh: `launch_agent.sh HOST COMMAND...` runs COMMAND
# (the words ssh would hand to the remote shell) on HOST by entering its
# namespaces. $CLUSTER_DIR/holders lists "HOST PID" per host.
set -u
host=$1
shift
pid=$(awk -v h="$host" '$1 == h { print $2 }' "$CLUSTER_DIR/holders")
if [[ -z $pid ]]; then
  echo "launch_agent.sh: no host '$host' in $CLUSTER_DIR/holders" >&2
  exit 255
fi
exec /usr/bin/nsenter -t "$pid" -u -m -n -- /bin/sh -c "$*"
