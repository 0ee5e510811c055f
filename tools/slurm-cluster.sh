#!/usr/bin/env bash
# Install, start, stop and inspect real single-node Slurm clusters for tests and the demo.
#
#   tools/slurm-cluster.sh start|stop|status|env|token VERSION [USER [LIFESPAN]]
#
# VERSION is 22.05 (Debian 12 packages on the host), 24.11 (trixie chroot) or 26.05 (sid chroot);
# `start`, `stop` and `status` also take `all`. `token VERSION [USER [LIFESPAN]]` prints a fresh JWT
# for USER (default bridge), e.g. for the second test user, valid for LIFESPAN seconds (default
# 86400; a few seconds for the tests of tokens that expire).
#
# Facts this script relies on are in docs real-services.md sections 1 and 2. Every process it starts
# is recorded as "PID STARTTIME" so that a stale pid file (other boot, other session) never matches
# a live process; it never kills by name. Everything listens on 127.0.0.1 only.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUN_BASE=${BRIDGE_RUN:-$REPO/.run}
# Canonical, because it is compared with /proc/mounts and /proc/PID/root.
CACHE=$(realpath -m "${XDG_CACHE_HOME:-$HOME/.cache}/bridge/chroots")
MIRROR=http://deb.debian.org/debian
VERSIONS=(22.05 24.11 26.05)
PACKAGES=(slurmctld slurmd slurm-client slurmrestd slurm-wlm-jwt-plugin munge)
# Keeps systemd out of the chroots: the trixie/sid Slurm packages create their users via sysusers.
CHROOT_EXTRA=(systemd-standalone-sysusers)
JOB_USER=bridge
OTHER_USER=bridgeother
REST_USER=slurmrestd          # slurmrestd refuses root and SlurmUser
TIMEOUT=${BRIDGE_SLURM_TIMEOUT:-30}
export DEBIAN_FRONTEND=noninteractive
# The env file this script writes holds SLURM_JWT, and users source it into their shell (set -a;
# . .run/slurm-VERSION/env). Slurm's daemons and commands read SLURM_* from their environment: with
# SLURM_JWT set they take AuthType to be auth/jwt, and slurmctld exits at start with "AuthType
# change requires restart of all Slurm daemons" (then `start` fails in `scontrol token`). Every
# command here gets SLURM_CONF explicitly and slurmrestd its SLURM_JWT=daemon, so none is inherited.
unset "${!SLURM_@}"

die() { echo "slurm-cluster: $*" >&2; exit 1; }
log() { echo "slurm-cluster: $*" >&2; }
# shellcheck source=tools/lib/procs.sh
source "$REPO/tools/lib/procs.sh"
# shellcheck source=tools/lib/host-packages.sh
source "$REPO/tools/lib/host-packages.sh"
# shellcheck source=tools/lib/rootfs.sh
source "$REPO/tools/lib/rootfs.sh"

# ---------------------------------------------------------------------------------------------
# Per-version settings. Sets the globals used by everything below.
#   ROOT  chroot directory ("" = host)       D     state dir as seen by Slurm (inside ROOT)
#   HD    the same dir as seen from the host  CONF  slurm.conf path as seen by Slurm
#   RUN   per-version run dir on the host (pids, daemon stdout, env file, link to HD)
# ---------------------------------------------------------------------------------------------
select_version() {
  VERSION=$1
  case $VERSION in
    22.05) SUITE=""; CTLD_PORT=6817; SLURMD_PORT=6818; REST_PORT=6820; CLUSTER=c2205
           # 22.05 has one static plugin per API version and dies if asked for slurmdbd ones.
           REST_PLUGINS=openapi/v0.0.38,openapi/v0.0.37,openapi/v0.0.36 ;;
    24.11) SUITE=trixie; CTLD_PORT=6827; SLURMD_PORT=6828; REST_PORT=6830; CLUSTER=c2411
           # data_parser era: one plugin serves every version; without slurmdbd it must be named.
           REST_PLUGINS=openapi/slurmctld ;;
    26.05) SUITE=sid; CTLD_PORT=6837; SLURMD_PORT=6838; REST_PORT=6840; CLUSTER=c2605
           REST_PLUGINS=openapi/slurmctld ;;
    *) die "unknown version '$VERSION' (expected 22.05, 24.11 or 26.05)" ;;
  esac
  RUN=$RUN_BASE/slurm-$VERSION
  PID_DIR=$RUN/pids
  PROCS_LOG_PREFIX="Slurm $VERSION: "
  if [[ -n $SUITE ]]; then
    ROOT=$CACHE/$SUITE
    D=/var/lib/bridge-slurm
    HD=$ROOT$D
  else
    ROOT=""
    HD=$RUN/slurm
    D=$HD
  fi
  CONF=$D/etc/slurm.conf
  URL=http://127.0.0.1:$REST_PORT
}

# Run a command in the cluster's filesystem (chroot or host) with its slurm.conf.
target() {
  if [[ -n $ROOT ]]; then chroot "$ROOT" env SLURM_CONF="$CONF" "$@"
  else env SLURM_CONF="$CONF" "$@"; fi
}

# ---------------------------------------------------------------------------------------------
# Process bookkeeping (starttime, recorded_alive, recorded_pid, terminate: tools/lib/procs.sh)
# ---------------------------------------------------------------------------------------------

# Start a foreground daemon detached from our session and record its pid. setsid does not fork
# here (a background job of a non-interactive shell is no group leader), so $! is the daemon.
launch() {
  local name=$1; shift
  mkdir -p "$RUN/pids" "$RUN/log"
  # 8>&- 9>&-: a daemon must not inherit our lock files, or it would hold the locks forever.
  # A daemon works in the run dir, not in the caller's: slurmrestd 22.05 calls getcwd() on every
  # submit and drops the connection once that directory is gone (a removed checkout or temp dir).
  # chroot(1) already changes into the chroot's /.
  if [[ -n $ROOT ]]; then
    setsid chroot "$ROOT" env SLURM_CONF="$CONF" "$@" </dev/null >>"$RUN/log/$name.out" 2>&1 8>&- 9>&- &
  else
    setsid env --chdir="$RUN" SLURM_CONF="$CONF" "$@" </dev/null >>"$RUN/log/$name.out" 2>&1 8>&- 9>&- &
  fi
  local pid=$!
  echo "$pid $(starttime "$pid")" >"$RUN/pids/$name.pid"
}

# Wait until "$@" succeeds; on timeout name what failed and show the log that explains it.
wait_for() {
  local what=$1 logfile=$2 pidname=$3; shift 3
  local deadline=$((SECONDS + TIMEOUT))
  until "$@" >/dev/null 2>&1; do
    if ! recorded_alive "$pidname" || ((SECONDS >= deadline)); then
      local why="did not come up within ${TIMEOUT}s"
      recorded_alive "$pidname" || why="exited"
      log "Slurm $VERSION: $what $why; last lines of $logfile and $RUN/log/$pidname.out:"
      tail -n 25 "$logfile" >&2 2>/dev/null || true
      tail -n 10 "$RUN/log/$pidname.out" >&2 2>/dev/null || true
      return 1
    fi
    sleep 0.1
  done
  # The answer may come from a daemon this run dir did not start (another BRIDGE_RUN's cluster on
  # the same ports or munge socket) while ours has exited.
  if ! recorded_alive "$pidname"; then
    log "Slurm $VERSION: $what answers, but the $pidname started here exited (is another cluster" \
      "on its port or socket?); last lines of $RUN/log/$pidname.out:"
    tail -n 10 "$RUN/log/$pidname.out" >&2 2>/dev/null || true
    return 1
  fi
}

# ---------------------------------------------------------------------------------------------
# Installation
# ---------------------------------------------------------------------------------------------
# Build $CACHE/$SUITE once. It is built in a temp dir and renamed only when complete, so a
# half-built chroot is never taken as done; the marker records the package list it holds.
ensure_chroot() {
  local pkgs=("${PACKAGES[@]}" "${CHROOT_EXTRA[@]}") want marker=$ROOT/.bridge-chroot
  want="${pkgs[*]}"
  [[ -f $marker && "$(cat "$marker")" == "$want" ]] && return 0
  mkdir -p "$CACHE"
  exec 8>"$CACHE/.$SUITE.lock"
  flock 8
  if [[ -f $marker && "$(cat "$marker")" == "$want" ]]; then exec 8>&-; return 0; fi
  if [[ -f $marker ]]; then            # built before with another package list: top it up
    log "updating chroot $ROOT to: $want"
    mount_root "$ROOT"
    chroot "$ROOT" apt-get install -y -q --no-install-recommends "${pkgs[@]}" >/dev/null ||
      { chroot "$ROOT" apt-get update -q >/dev/null &&
        chroot "$ROOT" apt-get install -y -q --no-install-recommends "${pkgs[@]}" >/dev/null; }
    chroot "$ROOT" apt-get clean
    echo "$want" >"$marker"
    exec 8>&-
    return 0
  fi
  local old
  for old in "$CACHE/.$SUITE.build."* "$ROOT"; do  # leftovers of an interrupted build
    [[ -e $old ]] && { log "removing incomplete chroot $old"; remove_tree "$old"; }
  done
  local tmp t0=$SECONDS blog=$CACHE/.$SUITE.build.log
  tmp=$(mktemp -d "$CACHE/.$SUITE.build.XXXXXX")
  trap 'remove_tree "'"$tmp"'"' EXIT
  chmod 755 "$tmp"       # mktemp made it 0700: _apt, munge and the job users must traverse /
  log "building $SUITE chroot (debootstrap, a few dozen seconds) in $tmp"
  debootstrap_tree "$tmp" "$SUITE" "$MIRROR" "$blog" "${pkgs[@]}"
  rm -f "$blog"
  echo "$want" >"$tmp/.bridge-chroot"
  mv -T "$tmp" "$ROOT"
  trap - EXIT
  exec 8>&-
  log "built $ROOT in $((SECONDS - t0))s"
}

# useradd in the cluster's filesystem. Job users get the host's uid/gid when free so files
# written by jobs in a chroot have the same owner seen from the host.
ensure_user() {
  local name=$1 kind=$2 uid="" gid=""
  target getent passwd "$name" >/dev/null && return 0
  if [[ -n $ROOT && $kind == job ]]; then
    uid=$(id -u "$name"); gid=$(id -g "$name")
    target getent group "$gid" >/dev/null || target groupadd -g "$gid" "$name"
    target getent passwd "$uid" >/dev/null && uid=""
  fi
  if [[ $kind == job ]]; then
    target useradd -m -s /bin/bash ${uid:+-u "$uid"} ${gid:+-g "$gid"} "$name"
  else
    target useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$name"
  fi
}

ensure_installed() {
  # Users exist on the host for every version: chroot uids are copied from there.
  local u
  for u in "$JOB_USER" "$OTHER_USER"; do id "$u" >/dev/null 2>&1 || useradd -m -s /bin/bash "$u"; done
  if [[ -z $ROOT ]]; then
    apt_install_host "${PACKAGES[@]}"
  else
    ensure_chroot
    cp /etc/hosts "$ROOT/etc/hosts"
  fi
  ensure_user "$JOB_USER" job
  ensure_user "$OTHER_USER" job
  ensure_user "$REST_USER" system
}

# ---------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------
write_config() {
  local host
  host=$(hostname -s)
  mkdir -p "$HD"/{etc,state,spool,log,run}
  target chown slurm:slurm "$D/state" "$D/log" "$D/run"
  if [[ ! -s $HD/jwt_hs256.key ]]; then
    (umask 077; head -c 32 /dev/urandom >"$HD/jwt_hs256.key")
  fi
  target chown slurm:slurm "$D/jwt_hs256.key"
  chmod 0600 "$HD/jwt_hs256.key"
  cat >"$HD/etc/slurm.conf" <<EOF
# Written by tools/slurm-cluster.sh; rewritten on every start.
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmUser=slurm
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
CredType=cred/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$D/jwt_hs256.key
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Without a default a job gets the whole node's memory and the next one waits.
DefMemPerCPU=500
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
# Finished jobs stay visible to GET /job/{id} this long (then 404/500).
MinJobAge=300
InactiveLimit=0
KillWait=5
Waittime=0
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=30:00 DefaultTime=10:00 State=UP
PartitionName=batch Nodes=$host Default=NO MaxTime=1-00:00:00 DefaultTime=1:00:00 MaxNodes=1 State=UP
EOF
  # Newer slurmd dies in a chroot on this kernel unless cgroup support is switched off.
  [[ -n $ROOT ]] && echo "CgroupPlugin=disabled" >"$HD/etc/cgroup.conf"
  if [[ -n $ROOT ]]; then
    ln -sfn "$HD" "$RUN/slurm"
    echo "Slurm state of this cluster lives inside the chroot: $HD (= $D in the chroot)" >"$RUN/README"
  fi
  return 0
}

# ---------------------------------------------------------------------------------------------
# Health
# ---------------------------------------------------------------------------------------------
DAEMONS=(munged slurmctld slurmd slurmrestd)

rest_answers() { # any HTTP answer counts; 401 without a token is fine
  local code
  code=$(curl -s -o /dev/null -m 10 -w '%{http_code}' "$URL/slurm/v0.0.00/ping" 2>/dev/null) || true
  [[ -n $code && $code != 000 ]]
}

# slurmctld can be alive yet wedged: 24.11 and 26.05 deadlock when a REST DELETE of another
# user's job is refused (an assoc_mgr lock is left held) and then every RPC that reads jobs or
# partitions times out; `scontrol ping` still answers, so ask for the job list.
ctld_answers() { timeout 5 chroot "${ROOT:-/}" env SLURM_CONF="$CONF" squeue -h -o %i >/dev/null 2>&1; }

healthy() {
  local d
  for d in "${DAEMONS[@]}"; do recorded_alive "$d" || return 1; done
  rest_answers && ctld_answers
}

munge_ok() { target munge -n | target unmunge; }

node_up() { [[ "$(target sinfo -h -N -o %t 2>/dev/null | head -n1)" =~ ^(idle|mix|alloc)$ ]]; }

# ---------------------------------------------------------------------------------------------
# start / stop
# ---------------------------------------------------------------------------------------------
# Called in a condition, where set -e is off: every step that can fail returns by itself.
start_daemons() {
  [[ -n $ROOT ]] && mount_root "$ROOT"
  write_config

  # munged: each chroot has its own /run, hence its own socket; the host one uses the default.
  local md=${ROOT}/run/munge
  mkdir -p "$md"
  target chown munge:munge /run/munge
  chmod 0755 "$md"
  launch munged setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged -F
  wait_for "munged" "$RUN/log/munged.out" munged munge_ok || return 1

  launch slurmctld /usr/sbin/slurmctld -D
  wait_for "slurmctld" "$HD/log/slurmctld.log" slurmctld target scontrol ping || return 1

  launch slurmd /usr/sbin/slurmd -D
  wait_for "slurmd (node idle)" "$HD/log/slurmd.log" slurmd node_up || return 1

  # SLURM_JWT=daemon: without it slurmrestd rejects every request (401). -u: it binds as root,
  # then drops to an unprivileged user.
  launch slurmrestd env SLURM_JWT=daemon /usr/sbin/slurmrestd -a rest_auth/jwt -s "$REST_PLUGINS" \
    -u "$REST_USER" "127.0.0.1:$REST_PORT"
  wait_for "slurmrestd" "$RUN/log/slurmrestd.out" slurmrestd rest_answers
}

token() { # token USER [LIFESPAN] -> JWT
  local out lifespan=${2:-86400}
  [[ $lifespan =~ ^[1-9][0-9]*$ ]] || die "lifespan must be a number of seconds, got '$lifespan'"
  out=$(target scontrol token username="$1" lifespan="$lifespan") || die "scontrol token failed for $1"
  echo "${out#SLURM_JWT=}"
}

# Probe which /slurm/vX versions answer (200 vs 404); cached per daemon start.
api_versions() {
  local cache=$RUN/api_versions jwt=$1 v code list=()
  if [[ -s $cache && $cache -nt $RUN/pids/slurmrestd.pid ]]; then cat "$cache"; return; fi
  for v in 46 45 44 43 42 41 40 39 38 37 36; do
    code=$(curl -s -o /dev/null -m 15 -w '%{http_code}' -H "X-SLURM-USER-NAME: $JOB_USER" \
      -H "X-SLURM-USER-TOKEN: $jwt" "$URL/slurm/v0.0.$v/ping") || true
    [[ $code == 200 ]] && list+=("v0.0.$v")
  done
  (IFS=,; echo "${list[*]}") | tee "$cache"
}

write_env() {
  local jwt versions
  jwt=$(token "$JOB_USER") || return 1
  versions=$(api_versions "$jwt") || return 1
  (umask 077
   cat >"$RUN/env.tmp" <<EOF
SLURM_URL=$URL
SLURM_USER=$JOB_USER
SLURM_JWT=$jwt
SLURM_VERSION=$VERSION
SLURM_ROOT=$ROOT
SLURM_API_VERSIONS=$versions
SLURM_PARTITIONS=debug,batch
EOF
  )
  mv -f "$RUN/env.tmp" "$RUN/env"
}

start_one() {
  select_version "$1"
  mkdir -p "$RUN"
  exec 9>"$RUN/.lock"
  flock 9
  local t0=$SECONDS
  if healthy; then
    write_env
    log "Slurm $VERSION already running at $URL (env refreshed: $RUN/env)"
    exec 9>&-
    return 0
  fi
  stop_processes          # leftovers of a half-started or crashed cluster
  ensure_installed
  # A daemon may pass its own check and exit a moment later: up means all of them, together.
  if ! start_daemons || ! healthy || ! write_env; then
    log "Slurm $VERSION: start failed; stopping what was started (logs: $RUN/log, $HD/log)"
    stop_processes
    exit 1
  fi
  exec 9>&-
  log "Slurm $VERSION up at $URL in $((SECONDS - t0))s; env: $RUN/env"
}

# Processes that belong to this cluster besides the recorded daemons: for a chroot every process
# whose root is the chroot (daemons, step daemons, job processes); on the host the slurmstepd
# processes that inherited this cluster's SLURM_CONF, and their children (the job's processes).
# "/proc/PID/NAME TARGET" for every process; one find instead of a readlink per process, as
# this runs in a polling loop.
proc_links() { find /proc/[0-9]*/"$1" -maxdepth 0 -printf '%p %l\n' 2>/dev/null || true; }

cluster_processes() {
  if [[ -n $ROOT ]]; then
    proc_links root | awk -v r="$ROOT" '$2 == r { split($1, a, "/"); print a[3] }'
    return 0
  fi
  local p stepds=()
  for p in $(proc_links exe | awk '$2 == "/usr/sbin/slurmstepd" { split($1, a, "/"); print a[3] }'); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$CONF" && stepds+=("$p")
  done
  ((${#stepds[@]})) || return 0
  printf '%s\n' "${stepds[@]}"
  awk -v roots="${stepds[*]}" '
    BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) keep[r[i]] = 1 }
    { parent[$1] = $2 }
    END { changed = 1
          while (changed) { changed = 0
            for (p in parent) if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; print p; changed = 1 } } }
  ' < <(ps -e -o pid=,ppid=)
}

# cluster_processes minus the recorded daemons
job_processes() {
  local d daemons=()
  for d in "${DAEMONS[@]}"; do recorded_alive "$d" && daemons+=("$(recorded_pid "$d")"); done
  cluster_processes | grep -vxF -f <(printf '%s\n' x "${daemons[@]}") || true
}

stop_processes() {
  local pids=() d
  # Cancel jobs first so their step daemons exit cleanly instead of being orphaned.
  if recorded_alive slurmctld && recorded_alive munged; then
    local jobs
    mapfile -t jobs < <(timeout 5 chroot "${ROOT:-/}" env SLURM_CONF="$CONF" squeue -h -o %A 2>/dev/null)
    if ((${#jobs[@]})); then
      timeout 5 chroot "${ROOT:-/}" env SLURM_CONF="$CONF" scancel "${jobs[@]}" 2>/dev/null || true
      local i
      for ((i = 0; i < 50; i++)); do
        [[ -z "$(job_processes)" ]] && break
        sleep 0.1
      done
    fi
  fi
  for d in "${DAEMONS[@]}"; do recorded_alive "$d" && pids+=("$(recorded_pid "$d")"); done
  terminate 10 "${pids[@]}"
  rm -f "$RUN"/pids/*.pid
  # What is left are job processes and slurmstepd (which ignores SIGTERM).
  local rest
  mapfile -t rest < <(cluster_processes)
  terminate 2 "${rest[@]}"
  if [[ -n $ROOT && -d $ROOT ]]; then umount_root "$ROOT"; fi
  return 0
}

stop_one() {
  select_version "$1"
  [[ -d $RUN ]] || { [[ -z $ROOT || ! -d $ROOT ]] && return 0; }
  mkdir -p "$RUN"
  exec 9>"$RUN/.lock"
  flock 9
  stop_processes
  exec 9>&-
  log "Slurm $VERSION stopped"
}

status_one() {
  select_version "$1"
  local d n=0
  for d in "${DAEMONS[@]}"; do recorded_alive "$d" && n=$((n + 1)); done
  if ((n == ${#DAEMONS[@]})) && rest_answers && ctld_answers; then echo "$VERSION running $URL"
  elif ((n == ${#DAEMONS[@]})); then echo "$VERSION degraded $URL (not answering; start restarts it)"
  elif ((n > 0)); then echo "$VERSION degraded $URL ($n of ${#DAEMONS[@]} daemons alive)"
  else echo "$VERSION stopped $URL"; fi
}

usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

main() {
  (($# >= 2)) || usage
  local cmd=$1 ver=$2 vs
  [[ $(id -u) == 0 ]] || die "must run as root (chroot, mount, useradd)"
  if [[ $ver == all ]]; then
    [[ $cmd =~ ^(start|stop|status)$ ]] || die "'all' works with start, stop and status"
    vs=("${VERSIONS[@]}")
  else
    vs=("$ver")
  fi
  local v
  case $cmd in
    start)  for v in "${vs[@]}"; do start_one "$v"; done ;;
    stop)   for v in "${vs[@]}"; do stop_one "$v"; done ;;
    status) for v in "${vs[@]}"; do status_one "$v"; done ;;
    env)    select_version "$ver"; [[ -f $RUN/env ]] || die "no env file; run: $0 start $ver"
            cat "$RUN/env" ;;
    token)  select_version "$ver"; recorded_alive slurmctld || die "Slurm $ver is not running"
            token "${3:-$JOB_USER}" "${4:-}" ;;
    *) usage ;;
  esac
}

main "$@"
