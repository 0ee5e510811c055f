#!/usr/bin/env bash
# Start, stop and inspect a real "login node" for tests and the demo: Debian's OpenSSH server with a
# configuration, host key and client key of its own, so that roles reach a cluster's login node the
# way they do in production (ansible.builtin.* over ssh, ansible.posix.synchronize over rsync).
#
#   tools/sshd.sh start|stop|status|env
#
# One sshd per run dir (${BRIDGE_RUN:-<repo>/.run}/sshd), listening on 127.0.0.1 only; it never
# touches /etc/ssh or the stock ssh service. Key authentication only, no root login, for the local
# accounts bridge and bridgeother (the Slurm job users; created if missing). The script makes once
# per run dir an ed25519 host key, an ed25519 client key (client/id_ed25519, mode 0600) authorized
# for both users, and client/known_hosts holding the host key, so clients keep host-key checking on.
# The env file <run>/sshd/env (mode 0600) holds BRIDGE_SSH_HOST (127.0.0.1), BRIDGE_SSH_PORT,
# BRIDGE_SSH_USER (bridge), BRIDGE_SSH_OTHER_USER (bridgeother), BRIDGE_SSH_KEY (the private key's
# path) and BRIDGE_SSH_KNOWN_HOSTS (the known_hosts path). Read by `start` only: BRIDGE_SSH_PORT
# (2222). Installs openssh-server, rsync and python3 from Debian when missing; must run as root.
# sshd's log: <run>/sshd/log/sshd.out.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUN_BASE=${BRIDGE_RUN:-$REPO/.run}
RUN=$RUN_BASE/sshd
PID_DIR=$RUN/pids
TIMEOUT=${BRIDGE_SSH_TIMEOUT:-20}
JOB_USER=bridge
OTHER_USER=bridgeother
HOST_KEY=$RUN/etc/ssh_host_ed25519_key
CLIENT_KEY=$RUN/client/id_ed25519
KNOWN_HOSTS=$RUN/client/known_hosts
# sshd reads AuthorizedKeysFile as the user logging in and, with StrictModes, refuses it unless every
# directory above it is owned by root and writable by nobody else: a checkout under /tmp (mode 1777)
# or under /root (0700) would fail at login. So the authorized keys live in a root-owned dir of
# their own under /run, one per run dir (named by a hash of its path), not in the run dir.
AUTHORIZED_KEYS=/run/bridge-sshd/$(printf '%s' "$RUN" | sha256sum | cut -c1-16)/authorized_keys

SERVICE_PROCESS=sshd
die() { echo "sshd: $*" >&2; exit 1; }
log() { echo "sshd: $*" >&2; }
# shellcheck source=tools/lib/procs.sh
source "$REPO/tools/lib/procs.sh"
# shellcheck source=tools/lib/service.sh
source "$REPO/tools/lib/service.sh"
# shellcheck source=tools/lib/host-packages.sh
source "$REPO/tools/lib/host-packages.sh"

PORT=${BRIDGE_SSH_PORT:-2222}
# `start` writes the settings it started with; the other commands read them back.
SETTINGS=$RUN/settings
if [[ ${1:-} != start && -f $SETTINGS ]]; then
  # shellcheck source=/dev/null
  source "$SETTINGS"
fi
URL=ssh://127.0.0.1:$PORT

settings() { printf '%s\n' "PORT=$PORT"; }

# An SSH server greets first with "SSH-2.0-..." (RFC 4253 §4.2): a banner is proof enough.
answers() {
  local banner
  banner=$(timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT && head -c 8 <&3" 2>/dev/null) || return 1
  [[ $banner == SSH-2.0* ]]
}
same_settings() { [[ -f $SETTINGS && "$(cat "$SETTINGS")" == "$(settings)" ]]; }
healthy() { recorded_alive sshd && same_settings && answers; }

# ---------------------------------------------------------------------------------------------
# Keys and configuration: made once per run dir
# ---------------------------------------------------------------------------------------------
# The path above is made to pass StrictModes; this says which directory does not, should /run be
# mounted or owned differently, instead of a mere "Permission denied" at login.
check_authorized_keys_path() {
  local dir=$AUTHORIZED_KEYS owner mode
  while [[ -n $dir ]]; do
    read -r owner mode < <(stat -c '%u %a' "$dir")
    [[ $owner == 0 ]] || die "$dir is owned by uid $owner; sshd's StrictModes needs root-owned parents of $AUTHORIZED_KEYS"
    (( (8#$mode & 8#022) == 0 )) || die "$dir has mode $mode (group/world-writable); sshd's StrictModes refuses $AUTHORIZED_KEYS below it"
    (( (8#$mode & 8#001) != 0 )) || die "$dir has mode $mode; the users $JOB_USER and $OTHER_USER cannot reach $AUTHORIZED_KEYS"
    dir=${dir%/*}
  done
}

ensure_keys() {
  mkdir -p "$RUN/etc" "$RUN/client"
  install -d -m 0755 -o root -g root /run/bridge-sshd "${AUTHORIZED_KEYS%/*}" "$AUTHORIZED_KEYS"
  chmod 700 "$RUN/etc" "$RUN/client"
  [[ -s $HOST_KEY ]] || ssh-keygen -q -t ed25519 -N '' -C "bridge-login-node" -f "$HOST_KEY"
  [[ -s $CLIENT_KEY ]] || ssh-keygen -q -t ed25519 -N '' -C "bridge-client" -f "$CLIENT_KEY"
  chmod 600 "$HOST_KEY" "$CLIENT_KEY"
  local u
  for u in "$JOB_USER" "$OTHER_USER"; do
    install -m 0644 -o root -g root "$CLIENT_KEY.pub" "$AUTHORIZED_KEYS/$u"
  done
  # ssh writes a host on the default port bare and any other as [host]:port.
  local host=127.0.0.1
  [[ $PORT == 22 ]] || host="[127.0.0.1]:$PORT"
  (umask 022; echo "$host $(cut -d' ' -f1,2 "$HOST_KEY.pub")" >"$KNOWN_HOSTS")
}

write_config() {
  cat >"$RUN/etc/sshd_config" <<EOF
# Written by tools/sshd.sh; rewritten at every start.
Port $PORT
ListenAddress 127.0.0.1
HostKey $HOST_KEY
PidFile none
AuthorizedKeysFile $AUTHORIZED_KEYS/%u
StrictModes yes
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitEmptyPasswords no
PermitRootLogin no
AllowUsers $JOB_USER $OTHER_USER
# PAM for account and session only: with UsePAM no, sshd refuses accounts whose password is locked
# ("!" in /etc/shadow, as useradd leaves them), even for key authentication.
UsePAM yes
X11Forwarding no
PrintMotd no
LogLevel VERBOSE
# Ansible copies module files over sftp (or scp) before it runs them.
Subsystem sftp internal-sftp
EOF
  /usr/sbin/sshd -t -f "$RUN/etc/sshd_config" || die "sshd rejected $RUN/etc/sshd_config"
}

write_env() {
  (umask 077
   cat >"$RUN/env.tmp" <<EOF
BRIDGE_SSH_HOST=127.0.0.1
BRIDGE_SSH_PORT=$PORT
BRIDGE_SSH_USER=$JOB_USER
BRIDGE_SSH_OTHER_USER=$OTHER_USER
BRIDGE_SSH_KEY=$CLIENT_KEY
BRIDGE_SSH_KNOWN_HOSTS=$KNOWN_HOSTS
EOF
  )
  mv -f "$RUN/env.tmp" "$RUN/env"
}

# ---------------------------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------------------------
stop_processes() {
  # SIGTERM ends the listener; sessions already open end with their clients.
  if recorded_alive sshd; then terminate 10 "$(recorded_pid sshd)"; fi
  rm -f "$PID_DIR/sshd.pid"
  rm -rf "${AUTHORIZED_KEYS%/*}"
}

# Started by simulator_start (tools/lib/service.sh), under the run dir's lock.
launch() {
  [[ $(id -u) == 0 ]] || die "must run as root (sshd switches to the users bridge and bridgeother)"
  # rsync for ansible.posix.synchronize; Debian's boto3 for bridge.hpc.s3_object_sync, which the
  # stage role runs on the login node with the login node's own python3.
  apt_install_host openssh-server rsync python3 python3-boto3
  local u
  for u in "$JOB_USER" "$OTHER_USER"; do id "$u" >/dev/null 2>&1 || useradd -m -s /bin/bash "$u"; done
  ensure_keys
  check_authorized_keys_path
  # sshd's privilege separation directory; the package makes it only when its service starts.
  install -d -m 0755 /run/sshd
  write_config
  # -D: stay in the foreground, so the recorded pid is the listener's; -e: log to stderr.
  setsid /usr/sbin/sshd -D -e -f "$RUN/etc/sshd_config" </dev/null >>"$RUN/log/sshd.out" 2>&1 9>&- &
  LAUNCHED=$!
}

start() { simulator_start; }
stop() { simulator_stop; }
status() { simulator_status; }

service_main 6,6 "$@"
