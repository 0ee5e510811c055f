#!/usr/bin/env bash
# Start, stop and inspect the LSF Application Center SIMULATOR (tests/simulators/lsf_pac.py) for
# tests and the demo. It is not LSF: PAC cannot be installed here (tests/simulators/README.md).
#
#   tools/lsf-pac.sh start|stop|status|env
#
# One simulator per run dir (${BRIDGE_RUN:-<repo>/.run}/lsf), on 127.0.0.1 only. The env file
# <run>/lsf/env (mode 0600) holds LSF_PAC_URL (http://127.0.0.1:PORT/platform/), LSF_USER,
# LSF_PASSWORD, LSF_OTHER_USER, LSF_OTHER_PASSWORD and LSF_QUEUES; passwords are made once per run
# dir. Read by `start` only: BRIDGE_LSF_PAC_PORT (8080, PAC's default http port),
# BRIDGE_LSF_TOKEN_TTL (3600 s), BRIDGE_LSF_MINUTE_SECONDS (60: seconds in one run-limit minute),
# BRIDGE_LSF_CLEAN_PERIOD (3600 s), BRIDGE_LSF_HOST_SLOTS (4). Run as root, it creates the local
# accounts bridge and bridgeother if missing and runs each job as its LSF user's account, as LSF
# does; otherwise jobs run as the user who runs this script. The simulator kills them when it
# stops. <run>/lsf/log/access.log has one line per request (time, method, path, status).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUN_BASE=${BRIDGE_RUN:-$REPO/.run}
RUN=$RUN_BASE/lsf
PID_DIR=$RUN/pids
PYTHON=${PYTHON:-python3}
TIMEOUT=${BRIDGE_LSF_TIMEOUT:-20}
JOB_USER=bridge
OTHER_USER=bridgeother

die() { echo "lsf-pac: $*" >&2; exit 1; }
log() { echo "lsf-pac: $*" >&2; }
# shellcheck source=tools/lib/procs.sh
source "$REPO/tools/lib/procs.sh"
# shellcheck source=tools/lib/service.sh
source "$REPO/tools/lib/service.sh"

PORT=${BRIDGE_LSF_PAC_PORT:-8080}
TOKEN_TTL=${BRIDGE_LSF_TOKEN_TTL:-3600}
MINUTE_SECONDS=${BRIDGE_LSF_MINUTE_SECONDS:-60}
CLEAN_PERIOD=${BRIDGE_LSF_CLEAN_PERIOD:-3600}
HOST_SLOTS=${BRIDGE_LSF_HOST_SLOTS:-4}
# `start` writes the settings it started with; the other commands read them back.
SETTINGS=$RUN/settings
if [[ ${1:-} != start && -f $SETTINGS ]]; then
  # shellcheck source=/dev/null
  source "$SETTINGS"
fi
URL=http://127.0.0.1:$PORT/platform/

settings() {
  printf '%s\n' "PORT=$PORT" "TOKEN_TTL=$TOKEN_TTL" "MINUTE_SECONDS=$MINUTE_SECONDS" \
    "CLEAN_PERIOD=$CLEAN_PERIOD" "HOST_SLOTS=$HOST_SLOTS"
}

password() { secret "password.$1" 12; }

# ws/ping needs no token (docs external-apis.md §2.1).
answers() { [[ "$(curl -s -o /dev/null -m 5 -w '%{http_code}' "${URL}ws/ping" 2>/dev/null || true)" == 200 ]]; }
same_settings() { [[ -f $SETTINGS && "$(cat "$SETTINGS")" == "$(settings)" ]]; }
healthy() { recorded_alive simulator && same_settings && answers; }

write_env() {
  (umask 077
   cat >"$RUN/env.tmp" <<EOF
LSF_PAC_URL=$URL
LSF_USER=$JOB_USER
LSF_PASSWORD=$(password "$JOB_USER")
LSF_OTHER_USER=$OTHER_USER
LSF_OTHER_PASSWORD=$(password "$OTHER_USER")
LSF_QUEUES=normal,short,inactive,closed
EOF
  )
  mv -f "$RUN/env.tmp" "$RUN/env"
}

# Job processes run in sessions of their own, as children of the simulator: "PID STARTTIME" of
# every descendant, so that what outlives a killed simulator is still found.
descendants() {
  awk -v root="$1" '
    { parent[$1] = $2 }
    END { keep[root] = 1; changed = 1
          while (changed) { changed = 0
            for (p in parent) if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; print p; changed = 1 } } }
  ' < <(ps -e -o pid=,ppid=)
}

stop_processes() {
  recorded_alive simulator || { rm -f "$PID_DIR/simulator.pid"; return 0; }
  local pid p st left=() kids=()
  pid=$(recorded_pid simulator)
  for p in $(descendants "$pid"); do st=$(starttime "$p" 2>/dev/null) && kids+=("$p $st"); done
  # SIGTERM: the simulator kills its jobs' process groups and exits.
  terminate 10 "$pid"
  for p in "${kids[@]}"; do
    read -r pid st <<<"$p"
    [[ "$(starttime "$pid" 2>/dev/null)" == "$st" ]] && left+=("$pid")
  done
  terminate 2 "${left[@]}"
  rm -f "$PID_DIR/simulator.pid"
}

# Started by simulator_start (tools/lib/service.sh), under the run dir's lock.
launch() {
  # Jobs run as the LSF user's local account when the simulator runs as root, as LSF runs them.
  if [[ $(id -u) == 0 ]]; then
    for u in "$JOB_USER" "$OTHER_USER"; do id "$u" >/dev/null 2>&1 || useradd -m -s /bin/bash "$u"; done
  fi
  # Passwords go in a 0600 file, not on the command line, where every local user could read them.
  (umask 077; printf '%s\n' "$JOB_USER:$(password "$JOB_USER")" "$OTHER_USER:$(password "$OTHER_USER")" >"$RUN/users")
  setsid env --chdir="$RUN" "$PYTHON" -u "$REPO/tests/simulators/lsf_pac.py" --port "$PORT" \
    --state-dir "$RUN/state" --users-file "$RUN/users" --access-log "$RUN/log/access.log" \
    --token-ttl "$TOKEN_TTL" --minute-seconds "$MINUTE_SECONDS" --clean-period "$CLEAN_PERIOD" \
    --host-slots "$HOST_SLOTS" </dev/null >>"$RUN/log/simulator.out" 2>&1 9>&- &
  LAUNCHED=$!
}

start() { simulator_start; }
stop() { simulator_stop; }
status() { simulator_status; }

service_main 2,5 "$@"
