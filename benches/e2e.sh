#!/usr/bin/env bash
# End-to-end throughput and latency of trivial jobs through the real binaries, and the same
# workload on a private single-node Slurm when one is installed.
#
#   cargo build --release --workspace && bash benches/e2e.sh [--slurm] [--tuned]
#
# For each system, in one run:
#   serial:  N jobs (`--wrap true`, one leaf each) submitted by a serial shell loop, one CLI
#            process per job, then the queue polled every 0.2 s until it is empty;
#   array:   one array of A tasks of `true`, polled the same way;
#   latency: L jobs one at a time on the idle system; each job script writes $EPOCHREALTIME at
#            its first and its last instruction; submit -> start is the first stamp minus the
#            time before the submitting command ran, end -> recorded the time from the last
#            stamp until the queue command no longer lists the job (polled every 2 ms, one
#            process per poll, so this includes a queue command's own run time).
# Every job must end COMPLETED (flexacct / the Slurm job's exit stamp): a count is printed.
#
# Flex runs on the a100-40gb-x2 testbed (14 leaves) from a private state directory and socket.
# Slurm (--slurm, needs root, slurm-wlm and munge) runs munged, slurmctld and one slurmd on
# loopback with private ports and directories, one node with 64 CPUs and 14 `mig` GRES (the
# same 14 slots), jobs asking `--gres=mig:1`; everything is stopped at the end. --tuned applies
# Slurm's high-throughput guide (no scheduling per submission, the main and backfill loops every
# second, purged finished jobs); MaxArraySize is raised to fit A.
#
# Sizes: E2E_N (1000), E2E_ARRAY (10000), E2E_LAT (50); FLEX_BIN (target/release).
set -euo pipefail
cd "$(dirname "$0")/.."

slurm=0
tuned=0
for a in "$@"; do
  case "$a" in
    --slurm) slurm=1 ;;
    --tuned) slurm=1 tuned=1 ;;
    *) echo "e2e.sh: unknown argument $a (--slurm, --tuned)" >&2; exit 2 ;;
  esac
done
N=${E2E_N:-1000}
A=${E2E_ARRAY:-10000}
L=${E2E_LAT:-50}
BIN=$(realpath "${FLEX_BIN:-target/release}")
for b in flexd flexsub flexq flexacct; do
  [ -x "$BIN/$b" ] || { echo "e2e.sh: $BIN/$b missing: cargo build --release --workspace" >&2; exit 2; }
done

WORK=$(mktemp -d /tmp/flex-e2e.XXXXXX)
chmod 755 "$WORK"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

now() { echo "$EPOCHREALTIME"; }
# Seconds between two $EPOCHREALTIME stamps, and a rate.
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
rate() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.1f", n / s }'; }
# p50 / p90 / p99 of the milliseconds on stdin.
pcts() {
  sort -g | awk '{ v[NR] = $1 } END {
    i50 = int((NR - 1) * 0.5 + 0.5) + 1; i90 = int((NR - 1) * 0.9 + 0.5) + 1
    i99 = int((NR - 1) * 0.99 + 0.5) + 1
    printf "p50 %.2f  p90 %.2f  p99 %.2f  (ms, %d jobs)", v[i50], v[i90], v[i99], NR }'
}

# --- the workloads, for a system given as functions: submit_one, submit_array, queue_empty,
# --- listed JOB, submit_script FILE (prints the id), completed SINCE (count)

run_workloads() {
  local name=$1
  local t0 t1 t2 id i
  # serial loop
  t0=$(now)
  for ((i = 0; i < N; i++)); do submit_one; done
  t1=$(now)
  while ! queue_empty; do sleep 0.2; done
  t2=$(now)
  local serial_sub serial_done
  serial_sub=$(rate "$N" "$(elapsed "$t0" "$t1")")
  serial_done=$(rate "$N" "$(elapsed "$t0" "$t2")")
  # array
  t0=$(now)
  submit_array
  t1=$(now)
  while ! queue_empty; do sleep 0.2; done
  t2=$(now)
  local array_done array_ack
  array_done=$(rate "$A" "$(elapsed "$t0" "$t2")")
  array_ack=$(elapsed "$t0" "$t1")
  # latency, one job at a time
  local lat="$WORK/lat-$name"
  mkdir -p "$lat"
  : > "$lat/start" ; : > "$lat/end"
  for ((i = 0; i < L; i++)); do
    cat > "$lat/job.sh" <<EOF
#!/bin/bash
echo \$EPOCHREALTIME > $lat/s.tmp; mv $lat/s.tmp $lat/s$i
echo \$EPOCHREALTIME > $lat/e.tmp; mv $lat/e.tmp $lat/e$i
EOF
    t0=$(now)
    id=$(submit_script "$lat/job.sh")
    until [ -e "$lat/e$i" ]; do sleep 0.001; done
    while listed "$id"; do sleep 0.002; done
    t1=$(now)
    awk -v a="$t0" -v b="$(cat "$lat/s$i")" 'BEGIN { printf "%.3f\n", (b - a) * 1000 }' >> "$lat/start"
    awk -v a="$(cat "$lat/e$i")" -v b="$t1" 'BEGIN { printf "%.3f\n", (b - a) * 1000 }' >> "$lat/end"
  done
  local ok
  ok=$(completed)
  printf '%s\n' \
    "$name: serial loop of $N: $serial_sub submissions/s, $serial_done jobs/s completed end to end" \
    "$name: array of $A: acknowledged in ${array_ack} s, $array_done jobs/s completed end to end" \
    "$name: submit -> job's first instruction: $(pcts < "$lat/start")" \
    "$name: job's last instruction -> gone from the queue: $(pcts < "$lat/end")" \
    "$name: $ok of $((N + A + L)) jobs ended COMPLETED"
  echo "$serial_done $array_done" > "$WORK/rates-$name"
}

# --- Flex

flex_start() {
  mkdir -p "$WORK/flex"
  cat > "$WORK/flex/flexd.toml" <<EOF
[limits]
max_queued_per_user = 1000000
EOF
  FLEX_LOG=warn "$BIN/flexd" --config "$WORK/flex/flexd.toml" --socket "$WORK/flex/sock" \
    --state-dir "$WORK/flex/state" --topology a100-40gb-x2.toml --force-topology \
    2> "$WORK/flex/flexd.log" &
  PIDS+=($!)
  export FLEX_SOCKET="$WORK/flex/sock"
  for ((i = 0; i < 300; i++)); do
    "$BIN/flexq" -h >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "e2e.sh: flexd did not start:" >&2; cat "$WORK/flex/flexd.log" >&2; exit 1
}

flex_workloads() {
  local since
  since=$(date +%s)
  cd "$WORK/flex"
  submit_one() { "$BIN/flexsub" --parsable -t 10 -o /dev/null --wrap true >/dev/null; }
  submit_array() { "$BIN/flexsub" --parsable -t 10 -o /dev/null --array="0-$((A - 1))" --wrap true >/dev/null; }
  queue_empty() { [ -z "$("$BIN/flexq" -h)" ]; }
  listed() { [ -n "$("$BIN/flexq" -h -t PD,R -j "$1")" ]; }
  submit_script() { "$BIN/flexsub" --parsable -t 10 -o /dev/null "$1"; }
  completed() { "$BIN/flexacct" -S "$since" -n -P -o State | grep -c '^COMPLETED$' || true; }
  run_workloads flex
  cd - >/dev/null
}

# --- Slurm

slurm_start() {
  local d="$WORK/slurm" host port
  for b in munged slurmctld slurmd sbatch squeue; do
    command -v "$b" >/dev/null || { echo "e2e.sh: --slurm needs $b (slurm-wlm, munge)" >&2; exit 2; }
  done
  [ "$(id -u)" = 0 ] || { echo "e2e.sh: --slurm needs root (slurmd)" >&2; exit 2; }
  mkdir -p "$d"/{munge,state,spool,log,out}
  chmod 700 "$d/munge"
  head -c 1024 /dev/urandom > "$d/munge/key"
  chmod 600 "$d/munge/key"
  host=$(hostname -s)
  mkdir -p "$d/spool/$host"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  local sched="SchedulerType=sched/backfill"
  if [ "$tuned" = 1 ]; then
    # Slurm's high-throughput guide: no scheduling attempt per submission (defer), the main
    # loop and backfill every second instead, RPCs first when busy, finished jobs purged fast.
    sched="SchedulerType=sched/backfill
SchedulerParameters=defer,sched_interval=1,bf_interval=1,bf_continue,max_rpc_cnt=150,batch_sched_delay=1,default_queue_depth=1000
MinJobAge=2
MessageTimeout=30"
  fi
  cat > "$d/slurm.conf" <<EOF
ClusterName=flexbench
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/munge/sock
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool/%n
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd-%n.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=mig
ReturnToService=2
SlurmdParameters=config_overrides
$sched
MaxArraySize=$((A + 1))
MaxJobCount=$((A + N + L + 1000))
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MailProg=/bin/true
NodeName=$host NodeAddr=127.0.0.1 CPUs=64 Gres=mig:14 State=UNKNOWN
PartitionName=bench Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  echo "Name=mig Count=14" > "$d/gres.conf"
  export SLURM_CONF="$d/slurm.conf"
  munged -F -f --socket="$d/munge/sock" --key-file="$d/munge/key" --log-file="$d/log/munged.log" \
    --pid-file="$d/munge/pid" --seed-file="$d/munge/seed" > "$d/log/munged.out" 2>&1 &
  PIDS+=($!)
  until [ -S "$d/munge/sock" ]; do sleep 0.1; done
  slurmctld -D -i -f "$d/slurm.conf" > "$d/log/slurmctld.out" 2>&1 &
  PIDS+=($!)
  slurmd -D -f "$d/slurm.conf" > "$d/log/slurmd.out" 2>&1 &
  PIDS+=($!)
  for ((i = 0; i < 600; i++)); do
    [ "$(sinfo -h -N -o %T 2>/dev/null)" = idle ] && return 0
    sleep 0.1
  done
  echo "e2e.sh: the private Slurm did not come up:" >&2
  tail -n 20 "$d"/log/* >&2
  exit 1
}

slurm_workloads() {
  local out="$WORK/slurm/out"
  cd "$out"
  # Each job leaves a stamp with its exit status, counted at the end (no accounting daemon).
  submit_one() { sbatch --parsable -t 10 --gres=mig:1 -o /dev/null --wrap "true; echo ok > $out/j\$SLURM_JOB_ID" >/dev/null; }
  submit_array() {
    sbatch --parsable -t 10 --gres=mig:1 -o /dev/null --array="0-$((A - 1))" \
      --wrap "true; echo ok > $out/j\$SLURM_JOB_ID" >/dev/null
  }
  queue_empty() { [ -z "$(squeue -h -o %i)" ]; }
  listed() { [ -n "$(squeue -h -o %i -j "$1" 2>/dev/null)" ]; }
  submit_script() { sbatch --parsable -t 10 --gres=mig:1 -o /dev/null "$1"; }
  completed() {
    local lat=$(($(find "$WORK/lat-slurm" -name 'e[0-9]*' | wc -l)))
    echo $(($(find "$out" -name 'j*' | wc -l) + lat))
  }
  run_workloads slurm
  cd - >/dev/null
}

echo "machine: $(nproc) cores, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
flex_start
flex_workloads
if [ "$slurm" = 1 ]; then
  slurm_start
  slurm_workloads
  read -r fs fa < "$WORK/rates-flex"
  read -r ss sa < "$WORK/rates-slurm"
  echo "flex / slurm$([ "$tuned" = 1 ] && echo ' (tuned)'): serial $(awk -v a="$fs" -v b="$ss" 'BEGIN { printf "%.1f", a / b }')x, array $(awk -v a="$fa" -v b="$sa" 'BEGIN { printf "%.1f", a / b }')x jobs/s completed"
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
