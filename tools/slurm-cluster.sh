#!/usr/bin/env bash
# Install, start, stop and inspect real single-node Slurm clusters for tests and the demo.
#
#   tools/slurm-cluster.sh start|install VERSION [--no-accounting]
#   tools/slurm-cluster.sh stop|status|env VERSION
#   tools/slurm-cluster.sh token VERSION [USER [LIFESPAN]]
#
# VERSION is 22.05 (Debian 12 packages on the host), 24.11 (trixie chroot) or 26.05 (sid chroot);
# `start`, `install`, `stop` and `status` also take `all`. `token VERSION [USER [LIFESPAN]]` prints
# a fresh JWT for USER (default bridge), e.g. for the second test user, valid for LIFESPAN seconds
# (default 86400; a few seconds for the tests of tokens that expire). `install` only installs
# (packages, chroot, users) and starts nothing: it needs the network, `start` does not once it ran.
#
# Facts this script relies on are in docs real-services.md sections 1 and 2. Every process it starts
# is recorded as "PID STARTTIME" so that a stale pid file (other boot, other session) never matches
# a live process; it never kills by name. Clients and daemons talk over 127.0.0.1; slurmrestd and
# MariaDB listen there only, while slurmctld, slurmd and slurmdbd bind their ports on every address
# (Slurm has no bind address for them; CommunicationParameters=NoInAddrAny binds the address the
# host name resolves to instead, which need not be a loopback one).
#
# Accounting (on unless --no-accounting, which keeps the setup without slurmdbd exactly):
# - One MariaDB server for all clusters (Debian's mariadb-server, run from the host's binaries with
#   --no-defaults, so never the system's instance): datadir, socket, pid file, tmpdir and logs under
#   $BRIDGE_RUN/mariadb, TCP on 127.0.0.1:3307 only. The chroots share the host's network namespace,
#   so their slurmdbd reaches it over TCP like the host's. A cluster that starts with accounting
#   leaves a mark in mariadb/users/; `stop` removes it, and the last one out stops MariaDB.
# - Each cluster has its own slurmdbd (DbdPort 6819, 6829, 6839 beside its other ports) and its own
#   database slurm_acct_<ClusterName> (StorageLoc); slurmdbd.conf (with the database password) is
#   owned by SlurmUser, mode 0600. Before slurmctld starts, the cluster, the account `bridge` and
#   the users root, bridge and bridgeother (associations in `bridge`) are added if missing.
#   AccountingStorageEnforce stays unset: a user without an association may still submit.
# - Each cluster's job table gets the index on job_name that docs/slurm.md asks of sites (Bridge's
#   identity lookup searches accounting by job name); the env file names it for bench/slurm_lookup.py.
# - slurm.conf: AccountingStoreFlags=job_comment (Bridge reads its job identity back from the
#   comment), JobAcctGatherType=jobacct_gather/linux (MaxRSS, CPU time), which works with
#   ProctrackType=proctrack/linuxproc here, JobCompType=jobcomp/none.
# - slurmrestd also loads the slurmdbd plugin: 22.05 openapi/dbv0.0.38 (/slurmdb/v0.0.38/...),
#   24.11 and 26.05 openapi/slurmdbd (/slurmdb/v0.0.4x/... for every data_parser version).
# - The env file tells which mode runs: SLURM_ACCOUNTING=1|0, and SLURM_DB_API_VERSIONS.
# - The ClusterID in a state dir that ran without accounting or with another database (a chroot's
#   state is shared by every run dir, each with its own MariaDB) is dropped, so that slurmctld takes
#   the database's: 24.11 and 26.05 refuse to start on a mismatch.
# BRIDGE_SLURM_MIN_JOB_AGE (default 300) sets MinJobAge, how long slurmctld keeps a finished job.
# A start whose accounting mode or MinJobAge differs from the running cluster's restarts it.
#
# Cost of accounting, measured on 2 cores (in tools/lib/slurm-sandbox.sh, beside a CI run):
#   once: mariadb-server + slurmdbd on the host 26 s (apt, downloads included); slurmdbd added to an
#   existing chroot 4 s each; a fresh MariaDB datadir 1-3 s.
#   start (seconds)          22.05      24.11      26.05    (--no-accounting: 1.2-1.7)
#     fresh database           7-10       10-11      11-12    (datadir, schema, registration)
#     warm (database exists)   3.0-3.8    1.7-2.2    2.0-2.8
#     already running          0.3-0.4    0.1-0.3    0.2-0.3  (--no-accounting: 0.2)
#   `start all`: 20 s with a fresh database, 5.3 s warm (--no-accounting: 2.4 s).
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
ACCOUNTING=1                  # --no-accounting sets 0
MIN_JOB_AGE=${BRIDGE_SLURM_MIN_JOB_AGE:-300}
MAX_JOB_COUNT=20000
# Accounting adds slurmdbd to each cluster's filesystem and one MariaDB server on the host.
ACCT_PACKAGES=(slurmdbd)
DB_PACKAGES=(mariadb-server)
MDB=$RUN_BASE/mariadb
MARIADB_PORT=3307
DB_USER=slurm                 # MariaDB account of every slurmdbd; its password is $MDB/db.pass
ACCOUNT=bridge                # the Slurm account the test users are associated with
JOB_NAME_INDEX=bridge_job_name
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
    22.05) SUITE=""; CTLD_PORT=6817; SLURMD_PORT=6818; DBD_PORT=6819; REST_PORT=6820; CLUSTER=c2205
           # 22.05 has one static plugin per API version and dies if asked for slurmdbd ones
           # while there is no slurmdbd; with one, dbv0.0.38 serves /slurmdb/v0.0.38/.
           REST_PLUGINS=openapi/v0.0.38,openapi/v0.0.37,openapi/v0.0.36
           REST_DB_PLUGINS=openapi/dbv0.0.38 ;;
    24.11) SUITE=trixie; CTLD_PORT=6827; SLURMD_PORT=6828; DBD_PORT=6829; REST_PORT=6830; CLUSTER=c2411
           # data_parser era: one plugin serves every version; without slurmdbd it must be named.
           REST_PLUGINS=openapi/slurmctld
           REST_DB_PLUGINS=openapi/slurmdbd ;;
    26.05) SUITE=sid; CTLD_PORT=6837; SLURMD_PORT=6838; DBD_PORT=6839; REST_PORT=6840; CLUSTER=c2605
           REST_PLUGINS=openapi/slurmctld
           REST_DB_PLUGINS=openapi/slurmdbd ;;
    *) die "unknown version '$VERSION' (expected 22.05, 24.11 or 26.05)" ;;
  esac
  JOB_TABLE=slurm_acct_$CLUSTER.${CLUSTER}_job_table   # StorageLoc slurm_acct_<ClusterName>
  if ((ACCOUNTING)); then
    DAEMONS=(munged slurmdbd slurmctld slurmd slurmrestd)
    REST_PLUGINS+=,$REST_DB_PLUGINS
  else
    DAEMONS=(munged slurmctld slurmd slurmrestd)
  fi
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
  # 7>&- 8>&- 9>&-: a daemon must not inherit our lock files, or it would hold the locks forever.
  # A daemon works in the run dir, not in the caller's: slurmrestd 22.05 calls getcwd() on every
  # submit and drops the connection once that directory is gone (a removed checkout or temp dir).
  # chroot(1) already changes into the chroot's /.
  if [[ -n $ROOT ]]; then
    setsid chroot "$ROOT" env SLURM_CONF="$CONF" "$@" </dev/null >>"$RUN/log/$name.out" 2>&1 7>&- 8>&- 9>&- &
  else
    setsid env --chdir="$RUN" SLURM_CONF="$CONF" "$@" </dev/null >>"$RUN/log/$name.out" 2>&1 7>&- 8>&- 9>&- &
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
# Packages of $ROOT's dpkg database that are not installed (dpkg-query reads it without a chroot).
chroot_missing() {
  local p
  for p in "$@"; do
    dpkg-query --admindir="$ROOT/var/lib/dpkg" -W -f='${Status}\n' "$p" 2>/dev/null |
      grep -q '^install ok installed$' || echo "$p"
  done
}

# apt-get install PACKAGE... into the existing chroot, output to LOG. Slurm's own packages at the
# version the chroot has: sid moves on, and a newer slurmdbd would pull a new Slurm in under the
# clusters that run from this chroot. Only when the archive no longer has that version does the
# current one come, with an upgrade of the chroot's Slurm.
chroot_install() {
  local blog=$1; shift
  local ver p pinned=() apt=(chroot "$ROOT" apt-get install -y -q --no-install-recommends)
  ver=$(dpkg-query --admindir="$ROOT/var/lib/dpkg" -W -f='${Version}' slurmctld 2>/dev/null) || ver=""
  for p in "$@"; do
    if [[ -n $ver && $p == slurm* ]]; then pinned+=("$p=$ver"); else pinned+=("$p"); fi
  done
  "${apt[@]}" "${pinned[@]}" >>"$blog" 2>&1 && return 0
  chroot "$ROOT" apt-get update -q >>"$blog" 2>&1 || return 1
  "${apt[@]}" "${pinned[@]}" >>"$blog" 2>&1 && return 0
  log "Slurm $ver is gone from the $SUITE archive: installing the current one into $ROOT"
  "${apt[@]}" "$@" >>"$blog" 2>&1
}

# Build $CACHE/$SUITE once. It is built in a temp dir and renamed only when complete, so a
# half-built chroot is never taken as done; the marker says it is complete and records the package
# list it was asked for. A package missing from an existing chroot (accounting's slurmdbd in one
# built without it) is added in place; what is installed is read from dpkg, not from the marker,
# which another checkout's script may rewrite with its own list.
ensure_chroot() {
  local pkgs=("${PACKAGES[@]}" "${CHROOT_EXTRA[@]}") marker=$ROOT/.bridge-chroot missing
  ((ACCOUNTING)) && pkgs+=("${ACCT_PACKAGES[@]}")
  [[ -f $marker && -z "$(chroot_missing "${pkgs[@]}")" ]] && return 0
  mkdir -p "$CACHE"
  exec 8>"$CACHE/.$SUITE.lock"
  flock 8
  if [[ -f $marker ]]; then
    mapfile -t missing < <(chroot_missing "${pkgs[@]}")
    if ((${#missing[@]})); then
      local t0=$SECONDS blog=$CACHE/.$SUITE.install.log
      log "adding to chroot $ROOT: ${missing[*]}"
      mount_root "$ROOT"
      : >"$blog"
      chroot_install "$blog" "${missing[@]}" ||
        { tail -n 20 "$blog" >&2; die "installing ${missing[*]} into $ROOT failed (log: $blog)"; }
      chroot "$ROOT" apt-get clean
      rm -f "$blog"
      echo "${pkgs[*]}" >"$marker"
      log "added ${missing[*]} to $ROOT in $((SECONDS - t0))s"
    fi
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
  echo "${pkgs[*]}" >"$tmp/.bridge-chroot"
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
  # MariaDB runs on the host for every version (one server for all clusters).
  local host_pkgs=()
  [[ -z $ROOT ]] && host_pkgs+=("${PACKAGES[@]}")
  if ((ACCOUNTING)); then
    host_pkgs+=("${DB_PACKAGES[@]}")
    [[ -z $ROOT ]] && host_pkgs+=("${ACCT_PACKAGES[@]}")
  fi
  ((${#host_pkgs[@]})) && apt_install_host "${host_pkgs[@]}"
  if [[ -n $ROOT ]]; then
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
  local acct pass
  if ((ACCOUNTING)); then
    pass=$(db_password)
    # slurmdbd refuses a slurmdbd.conf that others may read (it holds the database password).
    (umask 077
     cat >"$HD/etc/slurmdbd.conf.tmp" <<EOF
# Written by tools/slurm-cluster.sh; rewritten on every start.
AuthType=auth/munge
# slurmrestd forwards the caller's JWT to slurmdbd for /slurmdb requests.
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$D/jwt_hs256.key
DbdHost=$host
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=slurm
LogFile=$D/log/slurmdbd.log
PidFile=$D/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$MARIADB_PORT
StorageUser=$DB_USER
StoragePass=$pass
StorageLoc=slurm_acct_$CLUSTER
EOF
    )
    target chown slurm:slurm "$D/etc/slurmdbd.conf.tmp"
    mv -f "$HD/etc/slurmdbd.conf.tmp" "$HD/etc/slurmdbd.conf"
    acct="JobAcctGatherType=jobacct_gather/linux
# Poll each task's /proc every second: at the default 30 s a job shorter than that has no MaxRSS.
JobAcctGatherFrequency=task=1
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
# Bridge keeps its job identity in the comment and reads it back from accounting.
AccountingStoreFlags=job_comment"
  else
    rm -f "$HD/etc/slurmdbd.conf"
    acct="JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none"
  fi
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
$acct
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Without a default a job gets the whole node's memory and the next one waits.
DefMemPerCPU=500
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
# Finished jobs stay visible to GET /job/{id} this long (then 404/500); BRIDGE_SLURM_MIN_JOB_AGE.
MinJobAge=$MIN_JOB_AGE
# bench/slurm_lookup.py queues 10,000 held jobs beside its own (the default allows 10,000 in all).
MaxJobCount=$MAX_JOB_COUNT
InactiveLimit=0
KillWait=5
Waittime=0
# The tests run three at a time and their jobs mostly sleep: each core takes up to four jobs
# (OverSubscribe=FORCE:4) so that one test's jobs do not queue another's on this 2-CPU node.
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=30:00 DefaultTime=10:00 OverSubscribe=FORCE:4 State=UP
PartitionName=batch Nodes=$host Default=NO MaxTime=1-00:00:00 DefaultTime=1:00:00 MaxNodes=1 OverSubscribe=FORCE:4 State=UP
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
# MariaDB: one server for every cluster's slurmdbd, in $MDB (see the header)
# ---------------------------------------------------------------------------------------------
db_password() {
  mkdir -p "$MDB"
  chmod 0755 "$MDB"       # mysql traverses it to its datadir; the password file is 0600
  [[ -s $MDB/db.pass ]] || (umask 077; od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$MDB/db.pass")
  cat "$MDB/db.pass"
}

# procs.sh's functions on MariaDB's pid dir; bash restores PID_DIR after the call.
mdb() { PID_DIR=$MDB/pids "$@"; }
mariadb_alive() { mdb recorded_alive mariadbd; }
db_sql() { mariadb --no-defaults --socket="$MDB/run/mysqld.sock" -u root --batch "$@"; }
mariadb_answers() { db_sql -e 'SELECT 1' >/dev/null 2>&1; }

# mariadb_up: mark this cluster as a user of MariaDB and start it unless it runs. Holds lock 7
# while it works; taken after a cluster's lock 9, never before.
mariadb_up() {
  mkdir -p "$MDB/users" "$MDB/pids"
  exec 7>"$MDB/.lock"
  flock 7
  touch "$MDB/users/$VERSION"
  if mariadb_alive && mariadb_answers; then exec 7>&-; return 0; fi
  mariadb_start; local rc=$?
  exec 7>&-
  return $rc
}

mariadb_start() {
  local pids=()
  mariadb_alive && pids=("$(mdb recorded_pid mariadbd)")
  mdb terminate 30 "${pids[@]}"
  rm -f "$MDB/pids/mariadbd.pid"
  # A tmpdir of its own: every mariadbd, --bootstrap included, unlinks each "#sql*" file in its
  # tmpdir when it starts, so instances sharing /tmp (a sandbox's beside the real one, or several
  # sandboxes) delete each other's live temporary tables; mariadb-install-db then aborts with
  # "Unknown table 'mysql.tmp_user_sys'".
  mkdir -p "$MDB/run" "$MDB/log" "$MDB/tmp"
  chown mysql:mysql "$MDB/run" "$MDB/log" "$MDB/tmp"
  chmod 0700 "$MDB/tmp"
  if [[ ! -d $MDB/data/mysql ]]; then   # first start: a fresh datadir, renamed when complete
    local t0=$SECONDS
    rm -rf "$MDB/data" "$MDB/data.tmp"
    mkdir -p "$MDB/data.tmp"
    chown mysql:mysql "$MDB/data.tmp"
    chmod 0700 "$MDB/data.tmp"
    mariadb-install-db --no-defaults --user=mysql --datadir="$MDB/data.tmp" --tmpdir="$MDB/tmp" \
        --skip-test-db --auth-root-authentication-method=socket >"$MDB/log/install-db.log" 2>&1 ||
      { # The server's own errors come before the ~30 lines of advice the script then prints.
        log "mariadb-install-db failed; last lines of $MDB/log/install-db.log before its advice:"
        sed '/^Installation of system tables failed/,$d' "$MDB/log/install-db.log" | tail -n 20 >&2
        return 1; }
    mv -T "$MDB/data.tmp" "$MDB/data"
    log "MariaDB datadir initialised in $((SECONDS - t0))s: $MDB/data"
  fi
  # --no-defaults: none of /etc/mysql's settings (the system instance's port, socket, datadir).
  # Small buffers, and no fsync per commit: this is a test database on a 2-core machine.
  setsid env --chdir="$MDB" /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$MDB/data" \
    --socket="$MDB/run/mysqld.sock" --pid-file="$MDB/run/mysqld.pid" --tmpdir="$MDB/tmp" \
    --port="$MARIADB_PORT" --bind-address=127.0.0.1 --skip-name-resolve \
    --log-error="$MDB/log/mariadbd.err" \
    --innodb-buffer-pool-size=128M --innodb-log-file-size=64M --innodb-lock-wait-timeout=900 \
    --innodb-flush-log-at-trx-commit=2 --max-connections=200 \
    </dev/null >>"$MDB/log/mariadbd.out" 2>&1 7>&- 8>&- 9>&- &
  local pid=$!
  echo "$pid $(starttime "$pid")" >"$MDB/pids/mariadbd.pid"
  local deadline=$((SECONDS + TIMEOUT))
  until mariadb_answers; do
    if ! mariadb_alive || ((SECONDS >= deadline)); then
      log "MariaDB did not come up on 127.0.0.1:$MARIADB_PORT; last lines of $MDB/log/mariadbd.err:"
      tail -n 20 "$MDB/log/mariadbd.err" >&2 2>/dev/null || true
      return 1
    fi
    sleep 0.1
  done
  # Every slurmdbd logs in over TCP from 127.0.0.1 (skip-name-resolve: no 'localhost' match) and
  # creates its own database slurm_acct_<cluster>.
  db_sql <<EOF || { log "MariaDB: creating the user $DB_USER failed"; return 1; }
CREATE USER IF NOT EXISTS '$DB_USER'@'127.0.0.1' IDENTIFIED BY '$(db_password)';
ALTER USER '$DB_USER'@'127.0.0.1' IDENTIFIED BY '$(db_password)';
GRANT ALL PRIVILEGES ON \`slurm\\_acct\\_%\`.* TO '$DB_USER'@'127.0.0.1';
EOF
  log "MariaDB up on 127.0.0.1:$MARIADB_PORT ($MDB)"
}

# mariadb_release: this cluster no longer uses MariaDB; the last user stops it.
mariadb_release() {
  [[ -d $MDB ]] || return 0
  mkdir -p "$MDB/users"
  exec 7>"$MDB/.lock"
  flock 7
  rm -f "$MDB/users/$VERSION"
  if [[ -z "$(ls -A "$MDB/users")" ]] && mariadb_alive; then
    mdb terminate 30 "$(mdb recorded_pid mariadbd)"
    rm -f "$MDB/pids/mariadbd.pid"
    log "MariaDB stopped (no cluster uses it)"
  fi
  exec 7>&-
}

# ---------------------------------------------------------------------------------------------
# Health
# ---------------------------------------------------------------------------------------------
ALL_DAEMONS=(munged slurmdbd slurmctld slurmd slurmrestd)

rest_answers() { # any HTTP answer counts; 401 without a token is fine
  local code
  code=$(curl -s -o /dev/null -m 10 -w '%{http_code}' "$URL/slurm/v0.0.00/ping" 2>/dev/null) || true
  [[ -n $code && $code != 000 ]]
}

# slurmctld can be alive yet wedged: 24.11 and 26.05 deadlock when a REST DELETE of another
# user's job is refused (an assoc_mgr lock is left held) and then every RPC that reads jobs or
# partitions times out; `scontrol ping` still answers, so ask for the job list.
ctld_answers() { timeout 5 chroot "${ROOT:-/}" env SLURM_CONF="$CONF" squeue -h -o %i >/dev/null 2>&1; }

# slurmdbd answers for this cluster, which exists in its database (so MariaDB answers too).
dbd_answers() {
  timeout 10 chroot "${ROOT:-/}" env SLURM_CONF="$CONF" sacctmgr -n -P show cluster format=cluster \
    2>/dev/null | grep -qxF "$CLUSTER"
}
dbd_reachable() { timeout 10 chroot "${ROOT:-/}" env SLURM_CONF="$CONF" sacctmgr -n -P show cluster >/dev/null 2>&1; }

# What a running cluster was started with; a start asking for something else restarts it.
settings() { echo "accounting=$ACCOUNTING min_job_age=$MIN_JOB_AGE max_job_count=$MAX_JOB_COUNT oversubscribe=FORCE:4"; }

healthy() {
  local d
  [[ -f $RUN/settings && "$(cat "$RUN/settings")" == "$(settings)" ]] || return 1
  for d in "${DAEMONS[@]}"; do recorded_alive "$d" || return 1; done
  if ((ACCOUNTING)); then mariadb_alive && dbd_answers || return 1; fi
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

  if ((ACCOUNTING)); then
    mariadb_up || return 1
    launch slurmdbd /usr/sbin/slurmdbd -D
    wait_for "slurmdbd" "$HD/log/slurmdbd.log" slurmdbd dbd_reachable || return 1
    register_cluster || return 1
  fi

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

# The cluster, the account and the users' associations in this cluster's database, each added only
# if missing (sacctmgr -i add fails on what exists). slurmctld needs the cluster before it starts.
register_cluster() {
  local sacctmgr=(timeout 20 chroot "${ROOT:-/}" env SLURM_CONF="$CONF" sacctmgr -i) have u
  # The state dir keeps the ClusterID slurmctld last ran with, and 23.02+ slurmctld exits with
  # "CLUSTER ID MISMATCH" when the database has another: after a run without accounting, or with
  # another database (a chroot's state is shared by every run dir, each with its own MariaDB). The
  # database is the authority; without the file slurmctld takes the id it has. accounting-db
  # records which database the state last ran with.
  local mark=$HD/state/accounting-db
  if ! dbd_answers; then
    "${sacctmgr[@]}" add cluster "$CLUSTER" >/dev/null ||
      { log "Slurm $VERSION: sacctmgr add cluster $CLUSTER failed"; return 1; }
    rm -f "$HD/state/clustername"
  elif [[ "$(cat "$mark" 2>/dev/null)" != "$MDB" ]]; then
    rm -f "$HD/state/clustername"
  fi
  echo "$MDB" >"$mark"
  have=$("${sacctmgr[@]}" -n -P show assoc cluster="$CLUSTER" format=account,user) ||
    { log "Slurm $VERSION: sacctmgr show assoc failed"; return 1; }
  if ! grep -q "^$ACCOUNT|" <<<"$have"; then
    "${sacctmgr[@]}" add account "$ACCOUNT" cluster="$CLUSTER" description="Bridge tests" \
      organization=bridge >/dev/null || { log "Slurm $VERSION: sacctmgr add account failed"; return 1; }
  fi
  for u in root "$JOB_USER" "$OTHER_USER"; do
    grep -qxF "$ACCOUNT|$u" <<<"$have" && continue
    "${sacctmgr[@]}" add user "$u" account="$ACCOUNT" cluster="$CLUSTER" >/dev/null ||
      { log "Slurm $VERSION: sacctmgr add user $u failed"; return 1; }
  done
  # What docs/slurm.md asks of a site: slurmdbd keeps no index on the job name, by which Bridge's
  # identity lookup searches, so without one every lookup reads all of the user's jobs in its window.
  # slurmdbd leaves a key it does not know alone until an upgrade changes the table's definition.
  db_sql -e "ALTER TABLE $JOB_TABLE ADD INDEX IF NOT EXISTS $JOB_NAME_INDEX (job_name(64))" ||
    { log "Slurm $VERSION: adding the job name index to $JOB_TABLE failed"; return 1; }
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

# Which /slurmdb/vX versions answer, among the /slurm ones (22.05 serves fewer).
db_api_versions() {
  local cache=$RUN/db_api_versions jwt=$1 v code list=()
  ((ACCOUNTING)) || return 0
  if [[ -s $cache && $cache -nt $RUN/pids/slurmrestd.pid ]]; then cat "$cache"; return; fi
  for v in ${2//,/ }; do
    code=$(curl -s -o /dev/null -m 15 -w '%{http_code}' -H "X-SLURM-USER-NAME: $JOB_USER" \
      -H "X-SLURM-USER-TOKEN: $jwt" "$URL/slurmdb/$v/tres") || true
    [[ $code == 200 ]] && list+=("$v")
  done
  (IFS=,; echo "${list[*]}") | tee "$cache"
}

write_env() {
  local jwt versions db_versions
  jwt=$(token "$JOB_USER") || return 1
  versions=$(api_versions "$jwt") || return 1
  db_versions=$(db_api_versions "$jwt" "$versions") || return 1
  (umask 077
   cat >"$RUN/env.tmp" <<EOF
SLURM_URL=$URL
SLURM_USER=$JOB_USER
SLURM_JWT=$jwt
SLURM_VERSION=$VERSION
SLURM_ROOT=$ROOT
SLURM_API_VERSIONS=$versions
SLURM_PARTITIONS=debug,batch
SLURM_ACCOUNTING=$ACCOUNTING
SLURM_DB_API_VERSIONS=$db_versions
EOF
   # For bench/slurm_lookup.py, which measures the lookup with and without the job name index.
   if ((ACCOUNTING)); then
     printf 'SLURM_DB_SOCKET=%s\nSLURM_DB_JOB_TABLE=%s\nSLURM_DB_JOB_NAME_INDEX=%s\n' \
       "$MDB/run/mysqld.sock" "$JOB_TABLE" "$JOB_NAME_INDEX" >>"$RUN/env.tmp"
   fi
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
  ((ACCOUNTING)) || mariadb_release
  ensure_installed
  settings >"$RUN/settings"
  # A daemon may pass its own check and exit a moment later: up means all of them, together.
  if ! start_daemons || ! healthy || ! write_env; then
    log "Slurm $VERSION: start failed; stopping what was started (logs: $RUN/log, $HD/log, $MDB/log)"
    stop_processes
    rm -f "$RUN/settings"
    mariadb_release
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
  for d in "${ALL_DAEMONS[@]}"; do recorded_alive "$d" && daemons+=("$(recorded_pid "$d")"); done
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
  # slurmctld sends what slurmdbd has not got yet when it shuts down (else it keeps it in its state
  # for the next start): slurmdbd and munged go after the others.
  for d in slurmrestd slurmd slurmctld; do recorded_alive "$d" && pids+=("$(recorded_pid "$d")"); done
  if recorded_alive slurmdbd && recorded_alive munged; then
    terminate 10 "${pids[@]}"
    pids=()
  fi
  for d in slurmdbd munged; do recorded_alive "$d" && pids+=("$(recorded_pid "$d")"); done
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
  rm -f "$RUN/settings"
  mariadb_release
  exec 9>&-
  log "Slurm $VERSION stopped"
}

install_one() {
  select_version "$1"
  ensure_installed
  log "Slurm $VERSION installed ($( ((ACCOUNTING)) && echo "with" || echo "without") accounting)"
}

status_one() {
  select_version "$1"
  # The mode the cluster was started in, not the one this command line would ask for.
  if [[ -f $RUN/settings ]]; then
    ACCOUNTING=0
    grep -q 'accounting=1' "$RUN/settings" && ACCOUNTING=1
    select_version "$1"
  fi
  local d names=() down=() how
  names=("${DAEMONS[@]}")
  for d in "${DAEMONS[@]}"; do recorded_alive "$d" || down+=("$d"); done
  # MariaDB may run for another cluster: none of this one's own daemons alive is "stopped".
  if ((${#down[@]} == ${#DAEMONS[@]})); then echo "$VERSION stopped $URL"; return 0; fi
  if ((ACCOUNTING)); then
    names+=(mariadbd)
    mariadb_alive || down+=(mariadbd)
    how="accounting: slurmdbd 127.0.0.1:$DBD_PORT, MariaDB 127.0.0.1:$MARIADB_PORT"
  else
    how="no accounting"
  fi
  if ((${#down[@]} == 0)) && rest_answers && ctld_answers && { ((!ACCOUNTING)) || dbd_answers; }; then
    echo "$VERSION running $URL ($how)"
  elif ((${#down[@]} == 0)); then echo "$VERSION degraded $URL (not answering; start restarts it; $how)"
  else
    local alive=$((${#names[@]} - ${#down[@]}))
    echo "$VERSION degraded $URL ($alive of ${#names[@]} daemons alive, down: ${down[*]}; $how)"
  fi
}

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

main() {
  (($# >= 2)) || usage
  local cmd=$1 ver=$2 vs
  shift 2
  [[ $(id -u) == 0 ]] || die "must run as root (chroot, mount, useradd)"
  if [[ $cmd =~ ^(start|install)$ ]]; then
    case ${1:-} in
      "") ;;
      --no-accounting) ACCOUNTING=0; shift ;;
      *) usage ;;
    esac
  fi
  (($# == 0)) || [[ $cmd == token && $# -le 2 ]] || usage
  [[ $MIN_JOB_AGE =~ ^[0-9]+$ ]] || die "BRIDGE_SLURM_MIN_JOB_AGE must be a number of seconds"
  if [[ $ver == all ]]; then
    [[ $cmd =~ ^(start|install|stop|status)$ ]] || die "'all' works with start, install, stop and status"
    vs=("${VERSIONS[@]}")
  else
    vs=("$ver")
  fi
  local v
  case $cmd in
    start)  for v in "${vs[@]}"; do start_one "$v"; done ;;
    install) for v in "${vs[@]}"; do install_one "$v"; done ;;
    stop)   for v in "${vs[@]}"; do stop_one "$v"; done ;;
    status) for v in "${vs[@]}"; do status_one "$v"; done ;;
    env)    select_version "$ver"; [[ -f $RUN/env ]] || die "no env file; run: $0 start $ver"
            cat "$RUN/env" ;;
    token)  select_version "$ver"; recorded_alive slurmctld || die "Slurm $ver is not running"
            token "${1:-$JOB_USER}" "${2:-}" ;;
    *) usage ;;
  esac
}

main "$@"
