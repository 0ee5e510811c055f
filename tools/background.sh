#!/usr/bin/env bash
# Jobs that run beside the stages of `make test`: right after bootstrap the image checks and the
# services' start begin, niced, while the unit tests run; once those pass the static checks (sanity,
# lint, docs) begin, while the integration tests run. Their own stages then only wait for
# them (Makefile, stages `background` and `static-background`).
#
#   tools/background.sh start NAME -- COMMAND...   run COMMAND niced, in a session of its own, output
#                                                  to .run/background/NAME.log; a job NAME still
#                                                  running from an earlier run is stopped first
#   tools/background.sh wait NAME                  wait until the job NAME ends and exit with its
#                                                  status, the tail of its log shown if it failed
#   tools/background.sh stop                       stop the jobs still running (a failed `make test`
#                                                  leaves no image build behind)
#
# A job belongs to the run named in BRIDGE_BACKGROUND (`make test` sets it to a token of its own):
# `wait` takes no job of an earlier run for this one's. Files, in .run/background: NAME.pid ("PID
# STARTTIME" of the job, tools/lib/procs.sh), NAME.run (the run's token), NAME.log, NAME.rc (its exit
# status, written when it ends). The services' daemons leave the job's session (setsid), so `stop`
# ends a start half-way, never a service that is up.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
PID_DIR=$REPO/.run/background
# How much of a failed job's log `wait` shows.
TAIL_LINES=${BACKGROUND_TAIL_LINES:-60}
NICE=${BACKGROUND_NICE:-10}

log() { echo "background: $*" >&2; }
die() { log "$*"; exit 2; }
# shellcheck source=tools/lib/procs.sh
source "$REPO/tools/lib/procs.sh"

# stop_job NAME: SIGTERM to the job's session (its pid leads it), SIGKILL after 10 s.
stop_job() {
  local pid i
  pid=$(recorded_pid "$1")
  kill -TERM -- "-$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    recorded_alive "$1" || return 0
    sleep 0.1
  done
  log "SIGKILL to the job $1 (session $pid)"
  kill -KILL -- "-$pid" 2>/dev/null || true
}

start() {
  local name=${1:?usage: tools/background.sh start NAME -- COMMAND...}
  shift
  [[ ${1:-} == -- ]] && shift
  (($#)) || die "usage: tools/background.sh start NAME -- COMMAND..."
  [[ -n ${BRIDGE_BACKGROUND:-} ]] || die "start $name: BRIDGE_BACKGROUND (the run's token) is not set"
  mkdir -p "$PID_DIR"
  exec 9>"$PID_DIR/$name.lock"
  flock 9
  if recorded_alive "$name"; then
    log "stopping the job $name still running from before"
    stop_job "$name"
  fi
  rm -f "$PID_DIR/$name.pid" "$PID_DIR/$name.rc"
  echo "$BRIDGE_BACKGROUND" >"$PID_DIR/$name.run"
  # A background job of a non-interactive shell leads no process group, so setsid does not fork:
  # $! is the job, and the leader of its session.
  setsid nice -n "$NICE" "${BASH_SOURCE[0]}" run "$name" "$@" \
    </dev/null >"$PID_DIR/$name.log" 2>&1 9>&- &
  echo "$! $(starttime $!)" >"$PID_DIR/$name.pid"
  log "$name started (pid $!): $*; log: $PID_DIR/$name.log"
}

# run NAME COMMAND...: the job itself; its status lands in NAME.rc once COMMAND has ended.
run() {
  local name=$1 status=0 t0=$SECONDS
  shift
  # With the kernel's autogroups (sched_autogroup_enabled) a task's nice counts only against the
  # tasks of its own session: the job's new session is niced as a whole. A daemon the job starts
  # in a session of its own gets an autogroup of nice 0 again, and serves the tests at full speed.
  echo "$NICE" 2>/dev/null >/proc/self/autogroup || true
  # Without autogroups, a daemon keeps the job's nice: `wait` finds it by this mark.
  export BRIDGE_BACKGROUND_JOB=$name:$BRIDGE_BACKGROUND
  "$@" || status=$?
  log "$name ended with status $status after $((SECONDS - t0)) s"
  echo "$status" >"$PID_DIR/$name.rc.tmp"
  mv "$PID_DIR/$name.rc.tmp" "$PID_DIR/$name.rc"
}

# unnice NAME: the processes the job NAME left running (the services' daemons) back to nice 0, so
# that they serve the later stages at full speed also where a nice is not kept to its session.
unnice() {
  local environ pid
  while read -r environ; do
    pid=${environ#/proc/}; pid=${pid%/environ}
    renice -n 0 -p "$pid" >/dev/null 2>&1 || true
  done < <(grep -lzx "BRIDGE_BACKGROUND_JOB=$1:$BRIDGE_BACKGROUND" /proc/[0-9]*/environ 2>/dev/null || true)
}

wait_job() {
  local name=${1:?usage: tools/background.sh wait NAME} status t0=$SECONDS
  [[ -f $PID_DIR/$name.pid && $(cat "$PID_DIR/$name.run" 2>/dev/null) == "${BRIDGE_BACKGROUND:-}" &&
    -n ${BRIDGE_BACKGROUND:-} ]] || die "no job $name was started by this run (BRIDGE_BACKGROUND)"
  # The job writes NAME.rc before it exits: once it is gone, NAME.rc is there or never will be.
  while [[ ! -f $PID_DIR/$name.rc ]] && recorded_alive "$name"; do sleep 1; done
  if [[ -f $PID_DIR/$name.rc ]]; then status=$(cat "$PID_DIR/$name.rc"); else status=""; fi
  unnice "$name"
  if [[ $status == 0 ]]; then
    log "$name passed (waited $((SECONDS - t0)) s; log: $PID_DIR/$name.log)"
    return 0
  fi
  log "$name FAILED; the last $TAIL_LINES lines of $PID_DIR/$name.log:"
  tail -n "$TAIL_LINES" "$PID_DIR/$name.log" >&2 || true
  if [[ -z $status ]]; then
    log "$name ended without a status (killed?)"
    exit 1
  fi
  log "$name FAILED with status $status"
  exit "$status"
}

stop() {
  local pid_file name
  shopt -s nullglob
  for pid_file in "$PID_DIR"/*.pid; do
    name=$(basename "$pid_file" .pid)
    if recorded_alive "$name"; then
      log "stopping the job $name"
      stop_job "$name"
    fi
  done
}

case "${1:-}" in
  start) shift; start "$@" ;;
  run) shift; run "$@" ;;
  wait) shift; wait_job "$@" ;;
  stop) stop ;;
  *) sed -n '6,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
