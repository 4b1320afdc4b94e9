#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for trying `fp8wb sweep --slurm` and for the
# tests: munged, slurmctld and slurmd (Debian's slurm-wlm and munge) with every file they
# use (configuration, munge key and socket, spool, logs, pid files) under one folder,
# $FP8WB_SLURM_DIR (default $TMPDIR/fp8wb-slurm); nothing in /etc is changed.
#
#   scripts/slurm-local.sh start    start the daemons, wait until the node is idle
#                                   (--if-installed: without slurm-wlm, say so and exit 0)
#   scripts/slurm-local.sh status   what runs, the node and the queue
#   scripts/slurm-local.sh stop     stop the daemons this script started
#   scripts/slurm-local.sh env      the line to paste so sbatch/squeue find the cluster
#
# After `start`, point Slurm's commands at the cluster: export SLURM_CONF=<dir>/slurm.conf
# (`env` prints it). The daemons run as root (SlurmUser=root), as they must to start jobs
# for any user; run the script as root.
set -euo pipefail

DIR="${FP8WB_SLURM_DIR:-${TMPDIR:-/tmp}/fp8wb-slurm}"
CONF="$DIR/slurm.conf"
SOCKET="$DIR/munge/munge.socket"
export SLURM_CONF="$CONF"

IF_INSTALLED=0
need() {
  for c in "$@"; do
    if ! command -v "$c" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$c" ]; then
      echo "slurm-local: $c not found: install Debian's slurm-wlm and munge" \
        "(apt-get install slurm-wlm munge)" >&2
      if [ "$IF_INSTALLED" = 1 ]; then
        echo "slurm-local: no cluster started; the Slurm tests skip" >&2
        exit 0
      fi
      exit 3
    fi
  done
}
sbin() { if command -v "$1" >/dev/null 2>&1; then command -v "$1"; else echo "/usr/sbin/$1"; fi; }

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

write_conf() {
  local host cpus mem
  host="$(hostname -s)"
  cpus="$(nproc)"
  mem="$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)"
  cat >"$CONF" <<EOF
# Written by scripts/slurm-local.sh: a one-node cluster on $host.
ClusterName=fp8wb-local
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCKET
SlurmctldPort=${FP8WB_SLURMCTLD_PORT:-16817}
SlurmdPort=${FP8WB_SLURMD_PORT:-16818}
StateSaveLocation=$DIR/ctld
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=300
KillWait=5
Waittime=0
MaxArraySize=100001
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

start() {
  need munged slurmctld slurmd sbatch squeue sinfo
  if [ "$(id -u)" -ne 0 ]; then
    echo "slurm-local: the daemons run as root (SlurmUser=root): run this as root" >&2
    exit 1
  fi
  mkdir -p "$DIR"/{munge,ctld,spool,log}
  chmod 700 "$DIR/munge"
  if alive "$DIR/slurmctld.pid" && alive "$DIR/slurmd.pid"; then
    echo "slurm-local: already running ($CONF)"
    return 0
  fi
  write_conf
  if [ ! -f "$DIR/munge/munge.key" ]; then
    dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$DIR/munge/munge.key"
  fi
  if ! alive "$DIR/munge/munged.pid"; then
    # --force: the folders above may be world-writable (/tmp), which munged otherwise refuses.
    "$(sbin munged)" --force --key-file="$DIR/munge/munge.key" --socket="$SOCKET" \
      --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/log/munged.log" \
      --seed-file="$DIR/munge/munged.seed"
  fi
  alive "$DIR/slurmctld.pid" || "$(sbin slurmctld)" -f "$CONF" -c
  alive "$DIR/slurmd.pid" || "$(sbin slurmd)" -f "$CONF"
  # Ready when the node takes jobs.
  for _ in $(seq 1 60); do
    local state
    state="$(sinfo -h -N -o '%t' 2>/dev/null | head -n1 || true)"
    case "$state" in
      idle* | mix* | alloc*)
        echo "slurm-local: running, node $(hostname -s) $state; export SLURM_CONF=$CONF"
        return 0
        ;;
    esac
    sleep 1
  done
  echo "slurm-local: the node did not come up; logs in $DIR/log:" >&2
  tail -n 20 "$DIR"/log/*.log >&2 || true
  exit 1
}

stop_one() {
  local name="$1" pidfile="$2"
  if alive "$pidfile"; then
    local pid
    pid="$(cat "$pidfile")"
    kill "$pid"
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
    echo "slurm-local: stopped $name ($pid)"
  fi
  rm -f "$pidfile"
}

stop() {
  stop_one slurmd "$DIR/slurmd.pid"
  stop_one slurmctld "$DIR/slurmctld.pid"
  stop_one munged "$DIR/munge/munged.pid"
}

status() {
  local rc=0
  for d in "munged:$DIR/munge/munged.pid" "slurmctld:$DIR/slurmctld.pid" "slurmd:$DIR/slurmd.pid"; do
    if alive "${d#*:}"; then echo "${d%%:*}: running ($(cat "${d#*:}"))"; else
      echo "${d%%:*}: not running"
      rc=1
    fi
  done
  if [ "$rc" -eq 0 ]; then
    sinfo -N || true
    squeue || true
  fi
  return "$rc"
}

if [ "${2:-}" = "--if-installed" ]; then IF_INSTALLED=1; fi
case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  *)
    echo "usage: $0 start|stop|status|env" >&2
    exit 2
    ;;
esac
