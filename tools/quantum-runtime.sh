#!/usr/bin/env bash
# Install, start, stop and inspect the IBM Qiskit Runtime SIMULATOR (tests/simulators/quantum_runtime.py)
# for tests and the demo. It is not IBM Quantum: it executes circuits with qiskit-aer on fake devices.
#
#   tools/quantum-runtime.sh start|stop|status|env
#
# The simulator and the official client (qiskit-ibm-runtime, for the tests) run in a virtualenv of
# their own, ${XDG_CACHE_HOME:-~/.cache}/bridge/qiskit-venv, installed once from the binary wheels of
# locks/qiskit.txt (whose input, locks/qiskit.in, says why those versions) and made anew only when that
# lock changes. One simulator per run dir
# (${BRIDGE_RUN:-<repo>/.run}/quantum), on 127.0.0.1 only. The env file <run>/quantum/env (mode 0600)
# holds QUANTUM_URL (http://127.0.0.1:PORT/api/v1), QUANTUM_IAM_URL, QUANTUM_API_KEY,
# QUANTUM_SERVICE_CRN, QUANTUM_DEVICES (operational ones first), QUANTUM_PYTHON (the venv's python)
# and, for the official client, IAM_URL, GLOBAL_SEARCH_URL and GLOBAL_CATALOG_URL. The API key and
# the CRN are made once per run dir and reach the simulator in a 0600 file, not on its command line.
# Read by `start` only: BRIDGE_QUANTUM_PORT (8290), BRIDGE_QUANTUM_TOKEN_TTL (3600 s),
# BRIDGE_QUANTUM_QUEUE_SECONDS (0.2: least time a job stays Queued), BRIDGE_QUANTUM_RUN_SECONDS (0.2)
# and BRIDGE_QUANTUM_SHOT_SECONDS (0.00005): a job stays Running RUN + SHOT x shots seconds, one job
# at a time per device; BRIDGE_QUANTUM_SECOND (1.0: real seconds in one second of max_execution_time
# and of usage), BRIDGE_QUANTUM_USAGE_LIMIT (usage seconds the instance may use; empty: unlimited).
# <run>/quantum/log/access.log has one line per request (time, method, path, status).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUN_BASE=${BRIDGE_RUN:-$REPO/.run}
RUN=$RUN_BASE/quantum
PID_DIR=$RUN/pids
TIMEOUT=${BRIDGE_QUANTUM_TIMEOUT:-60}
VENV=${XDG_CACHE_HOME:-$HOME/.cache}/bridge/qiskit-venv
LOCK=$REPO/locks/qiskit.txt

die() { echo "quantum-runtime: $*" >&2; exit 1; }
log() { echo "quantum-runtime: $*" >&2; }
# shellcheck source=tools/lib/procs.sh
source "$REPO/tools/lib/procs.sh"
# shellcheck source=tools/lib/service.sh
source "$REPO/tools/lib/service.sh"

PORT=${BRIDGE_QUANTUM_PORT:-8290}
TOKEN_TTL=${BRIDGE_QUANTUM_TOKEN_TTL:-3600}
QUEUE_SECONDS=${BRIDGE_QUANTUM_QUEUE_SECONDS:-0.2}
RUN_SECONDS=${BRIDGE_QUANTUM_RUN_SECONDS:-0.2}
SHOT_SECONDS=${BRIDGE_QUANTUM_SHOT_SECONDS:-0.00005}
SECOND=${BRIDGE_QUANTUM_SECOND:-1.0}
USAGE_LIMIT=${BRIDGE_QUANTUM_USAGE_LIMIT:-}

# `start` writes the settings it started with; the other commands read them back.
SETTINGS=$RUN/settings
if [[ ${1:-} != start && -f $SETTINGS ]]; then
  # shellcheck source=/dev/null
  source "$SETTINGS"
fi
BASE=http://127.0.0.1:$PORT
URL=$BASE/api/v1

settings() {
  printf '%s\n' "PORT=$PORT" "TOKEN_TTL=$TOKEN_TTL" "QUEUE_SECONDS=$QUEUE_SECONDS" "RUN_SECONDS=$RUN_SECONDS" \
    "SHOT_SECONDS=$SHOT_SECONDS" "SECOND=$SECOND" "USAGE_LIMIT=$USAGE_LIMIT" "LOCK=$(sha256sum "$LOCK" | cut -c1-16)"
}

# ---------------------------------------------------------------------------------------------
# Installation (as tools/ray-cluster.sh installs Ray: from a lock, a flock for parallel starts)
# ---------------------------------------------------------------------------------------------
# The lock holds binary wheels only (tools/locks.py): nothing is compiled here.
ensure_installed() { ensure_venv "$VENV" "$LOCK" "420 MiB"; }

# ---------------------------------------------------------------------------------------------
# Credentials: made once per run dir
# ---------------------------------------------------------------------------------------------
api_key() { secret api_key 22; }

# crn:v1:bluemix:public:quantum-computing:<region>:a/<account>:<instance>:: (external-apis.md §3.1);
# the account is 32 hex digits and the instance a UUID, as on IBM Cloud.
service_crn() {
  local account instance
  account=$(secret account 16)
  instance=$(secret instance 16)
  printf 'crn:v1:bluemix:public:quantum-computing:us-east:a/%s:%s-%s-%s-%s-%s::\n' "$account" \
    "${instance:0:8}" "${instance:8:4}" "${instance:12:4}" "${instance:16:4}" "${instance:20:12}"
}

# ---------------------------------------------------------------------------------------------
# Health and env
# ---------------------------------------------------------------------------------------------
# GET /api/v1/versions needs no token (quantum_runtime.py: docs silent on its auth, none asked).
answers() { [[ "$(curl -s -o /dev/null -m 5 -w '%{http_code}' "$URL/versions" 2>/dev/null || true)" == 200 ]]; }
same_settings() { [[ -f $SETTINGS && "$(cat "$SETTINGS")" == "$(settings)" ]]; }
healthy() { recorded_alive simulator && same_settings && answers; }

write_env() {
  local devices
  # The simulator writes its device names, operational ones first, to <state>/devices.
  devices=$(cat "$RUN/state/devices") || die "the simulator wrote no device list ($RUN/state/devices)"
  (umask 077
   cat >"$RUN/env.tmp" <<EOF
QUANTUM_URL=$URL
QUANTUM_IAM_URL=$BASE
QUANTUM_API_KEY=$(api_key)
QUANTUM_SERVICE_CRN=$(service_crn)
QUANTUM_DEVICES=$devices
QUANTUM_PYTHON=$VENV/bin/python
IAM_URL=$BASE
GLOBAL_SEARCH_URL=$BASE
GLOBAL_CATALOG_URL=$BASE/catalog
EOF
  )
  mv -f "$RUN/env.tmp" "$RUN/env"
}

stop_processes() {
  recorded_alive simulator || { rm -f "$PID_DIR/simulator.pid"; return 0; }
  # SIGTERM: the simulator stops its HTTP server and exits; job threads die with it.
  terminate 10 "$(recorded_pid simulator)"
  rm -f "$PID_DIR/simulator.pid"
}

# Started by simulator_start (tools/lib/service.sh), under the run dir's lock.
launch() {
  # The API key and the CRN go in a 0600 file, not on the command line, where every local user could read them.
  (umask 077; printf '%s\n' "api_key=$(api_key)" "crn=$(service_crn)" >"$RUN/credentials")
  local extra=()
  [[ -n $USAGE_LIMIT ]] && extra+=(--usage-limit "$USAGE_LIMIT")
  setsid env --chdir="$RUN" "$VENV/bin/python" -u "$REPO/tests/simulators/quantum_runtime.py" --port "$PORT" \
    --state-dir "$RUN/state" --credentials-file "$RUN/credentials" --access-log "$RUN/log/access.log" \
    --token-ttl "$TOKEN_TTL" --queue-seconds "$QUEUE_SECONDS" --run-seconds "$RUN_SECONDS" \
    --shot-seconds "$SHOT_SECONDS" --second "$SECOND" "${extra[@]}" </dev/null >>"$RUN/log/simulator.out" 2>&1 8>&- 9>&- &
  LAUNCHED=$!
}

start() {
  ensure_installed
  simulator_start
}

stop() { simulator_stop; }
status() { simulator_status; }

service_main 2,5 "$@"
