#!/usr/bin/env bash
# A real Slurm on two namespace hosts (slurm.sh: slurmctld on h1, a slurmd
# on each): `srun -N 2 -n 4 hello_allreduce` and
# `sbatch examples/slurm/allreduce.sbatch` pass with nothing exported but
# DIST_BACKEND: ranks, MASTER_ADDR and MASTER_PORT come from Slurm.
#
#   slurm_test.sh HELLO_ALLREDUCE SBATCH_SCRIPT
set -uo pipefail
here=$(dirname "$(realpath "$0")")
source "$here/hosts.sh"
source "$here/slurm.sh"
hello=$(realpath "$1")
script=$(realpath "$2")
cluster_require
slurm_require
cluster_up dcs 2
slurm_up 2
# sbatch reads the script on h1, whose /tmp is its own, and the checkout may
# live under /tmp (as a CI clone can): hand it over in the shared directory.
cp "$script" "$CLUSTER_DIR/allreduce.sbatch"
script="$CLUSTER_DIR/allreduce.sbatch"
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
unset MASTER_ADDR MASTER_PORT RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE DIST_INIT_METHOD

# Every rank checks the sum against its own reference; 4 correct lines from
# ranks on both hosts.
check() {
  local name=$1 rc=$2 output=$3 correct
  correct=$(grep -c "of 4 (gloo): all_reduce sum -> \[10, 20, ..., 80\] correct" <<<"$output")
  if [[ $rc == 0 && $correct == 4 ]]; then
    echo "ok   $name"
  else
    fail "$name (exit code $rc, $correct of 4 ranks correct)"; tail -n 20 <<<"$output"
  fi
}

output=$(on 1 env DIST_BACKEND=gloo DIST_TIMEOUT=60 DIST_LOG_LEVEL=info timeout 120 \
  srun -N 2 -n 4 --label "$hello" 2>&1)
check "srun -N 2 -n 4 hello_allreduce" $? "$output"
if grep -q "hosts the store on .*:10001" <<<"$output"; then
  echo "ok   MASTER_ADDR/MASTER_PORT default to h1 and 10000 + SLURM_JOB_ID % 20000 (job 1)"
else
  fail "rank 0 did not host the store on port 10001"; grep -i store <<<"$output"
fi

# sbatch: the job's output goes to a file both hosts see.
job=$(on 1 env DIST_PROGRAM="$hello" sbatch --parsable --output="$CLUSTER_DIR/job-%j.out" \
  "$script" 2>&1)
if [[ ! $job =~ ^[0-9]+$ ]]; then
  fail "sbatch did not submit: $job"
else
  state=""
  for _ in $(seq 600); do
    state=$(on 1 scontrol show job "$job" 2>/dev/null | grep -o "JobState=[A-Z]*" | cut -d= -f2)
    [[ $state == COMPLETED || $state == FAILED || $state == CANCELLED || $state == TIMEOUT ]] && break
    sleep 0.2
  done
  output=$(cat "$CLUSTER_DIR/job-$job.out" 2>&1)
  [[ $state == COMPLETED ]]
  check "sbatch examples/slurm/allreduce.sbatch (job $job $state)" $? "$output"
fi

if ((failures == 0)); then echo "PASS"; fi
exit $failures
