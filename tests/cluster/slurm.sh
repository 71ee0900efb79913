# Sourced after hosts.sh: a real Slurm (Debian's slurm-wlm 22.05 and munge)
# on the namespace hosts: slurmctld on h1, one slurmd per host, no cgroups
# (proctrack/linuxproc, task/none). Everything lives under
# $CLUSTER_DIR/slurm; SLURM_CONF points the commands at it.
#
#   slurm_require                   # skips without slurm-wlm/munge
#   slurm_up N                      # after cluster_up ID N; waits until every node is idle
#   on 1 srun ...                   # h1 is the login node
slurm_require() {
  for tool in slurmctld slurmd srun sbatch sinfo munged; do
    command -v "$tool" >/dev/null ||
      cluster_skip "'$tool' is missing (apt-get install slurm-wlm munge; tools/dev/install-deps.sh does)"
  done
}

slurm_up() {
  local n=$1 i nodes=""
  local dir="$CLUSTER_DIR/slurm"
  mkdir -p "$dir/state" "$dir/log" "$dir/munge"
  for ((i = 1; i <= n; i++)); do mkdir -p "$dir/spool/h$i"; done
  chmod 700 "$dir/munge"
  # munge: one key for the cluster, one daemon (its socket is a file every
  # host sees, as if each host ran its own with the same key).
  head -c 1024 /dev/urandom >"$dir/munge/munge.key"
  chmod 400 "$dir/munge/munge.key"
  munged -f --socket="$dir/munge/socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/seed" || { echo "FAIL: munged did not start"; exit 1; }
  cluster_track "$(cat "$dir/munge/munged.pid")"
  for ((i = 1; i <= n; i++)); do
    nodes+="NodeName=h$i NodeAddr=$(cluster_addr "$i") CPUs=2 State=UNKNOWN"$'\n'
  done
  cat >"$dir/slurm.conf" <<CONF
ClusterName=distci
SlurmctldHost=h1($(cluster_addr 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
SlurmctldTimeout=30
SlurmdTimeout=30
$nodes
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
  # slurmd loads a cgroup plugin even when nothing uses cgroups; naming
  # v1 skips the version autodetection, which fails on this kind of machine
  # (a tmpfs on /sys/fs/cgroup with v1 controllers under it).
  cat >"$dir/cgroup.conf" <<CONF
CgroupPlugin=cgroup/v1
CgroupAutomount=no
CONF
  export SLURM_CONF="$dir/slurm.conf"
  daemon_on 1 "$dir/log/slurmctld.out" slurmctld -D -f "$SLURM_CONF"
  for ((i = 1; i <= n; i++)); do
    daemon_on "$i" "$dir/log/slurmd.h$i.out" slurmd -D -f "$SLURM_CONF"
  done
  local pid
  for _ in $(seq 300); do
    [[ $(on 1 sinfo -h -o %t 2>/dev/null | sort -u) == idle ]] && return 0
    for pid in "${CLUSTER_DAEMONS[@]}"; do kill -0 "$pid" 2>/dev/null || break 2; done
    sleep 0.2
  done
  echo "FAIL: the Slurm nodes did not become idle (a daemon ended, or 60 s passed):"
  on 1 sinfo 2>&1
  tail -n 20 "$dir"/log/*
  exit 1
}
