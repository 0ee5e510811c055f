#!/usr/bin/env bash
# Install, start, stop and inspect a real single-node Ray head (Jobs REST API) for tests and the demo.
#
#   tools/ray-cluster.sh start|stop|status|env
#
# Ray is installed once into its own virtualenv (${XDG_CACHE_HOME:-~/.cache}/bridge/ray-venv, not
# the collection's .venv) from locks/ray.txt, and made anew only when that lock changes. The head has 2 CPUs,
# no GPU, one custom resource "bridge_test": 1, and its dashboard (Jobs API) on 127.0.0.1:8265.
# The env file <run>/ray/env (mode 0600) holds RAY_ADDRESS (the dashboard URL, read by the bridge.hpc
# modules and plugins as by the Ray CLI), RAY_URL (the same, for the tests and bench), RAY_VERSION,
# RAY_PYTHON, RAY_TOKEN and, for a token head only, RAY_AUTH_TOKEN (the same token, as the modules
# read it): `set -a; . .run/ray/env; set +a` is enough for `ansible localhost -m bridge.hpc.ray_job_info`.
#
# One head per run dir (${BRIDGE_RUN:-<repo>/.run}/ray). Read by `start` only, e.g. for a second
# head in another run dir: BRIDGE_RAY_DASHBOARD_PORT (8265), BRIDGE_RAY_GCS_PORT (6379),
# BRIDGE_RAY_CLIENT_PORT (10001), BRIDGE_RAY_AGENT_PORT (52365); BRIDGE_RAY_AUTH=token (token
# auth; the token is kept in <run>/ray/auth_token and written to RAY_TOKEN);
# BRIDGE_RAY_JOB_START_TIMEOUT (seconds a job may stay PENDING before it FAILS; Ray's default 900).
#
# Facts this script relies on are in docs real-services.md section 3. It never runs `ray stop`
# (that kills every Ray on the machine) and never kills by name: it records, as "PID STARTTIME",
# every process of this head's session and stops exactly those (and their descendants).
# Ray's GCS and raylet ports listen on all interfaces (Ray ignores a loopback node address);
# only the dashboard honours 127.0.0.1.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUN_BASE=${BRIDGE_RUN:-$REPO/.run}
RUN=$RUN_BASE/ray
LOCK=$REPO/locks/ray.txt
RAY_PIN=$(sed -n 's/^ray\(\[[^]]*\]\)\?==\([^ ]*\).*/\2/p' "$LOCK")
VENV=${XDG_CACHE_HOME:-$HOME/.cache}/bridge/ray-venv
DASH_PORT=${BRIDGE_RAY_DASHBOARD_PORT:-8265}
GCS_PORT=${BRIDGE_RAY_GCS_PORT:-6379}
CLIENT_PORT=${BRIDGE_RAY_CLIENT_PORT:-10001}
AGENT_PORT=${BRIDGE_RAY_AGENT_PORT:-52365}
AUTH=${BRIDGE_RAY_AUTH:-none}
START_TIMEOUT=${BRIDGE_RAY_JOB_START_TIMEOUT:-}
TIMEOUT=${BRIDGE_RAY_TIMEOUT:-60}
PIDS=$RUN/pids
export RAY_USAGE_STATS_ENABLED=0
# Explicit: with RAY_AUTH_MODE unset, `ray start` turns token auth on whenever a token exists
# (~/.ray/auth_token, RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH). The env file sourced into the caller's
# shell exports RAY_ADDRESS and RAY_AUTH_TOKEN: neither may reach `ray start` and the head's processes.
export RAY_AUTH_MODE=disabled
unset RAY_ADDRESS RAY_AUTH_TOKEN RAY_AUTH_TOKEN_PATH RAY_JOB_START_TIMEOUT_SECONDS

die() { echo "ray-cluster: $*" >&2; exit 1; }
log() { echo "ray-cluster: $*" >&2; }
# shellcheck source=tools/lib/procs.sh
source "$REPO/tools/lib/procs.sh"
# shellcheck source=tools/lib/service.sh
source "$REPO/tools/lib/service.sh"

# Ray puts unix sockets below <temp dir>/session_<date>_<pid>/sockets/ and a socket path may not
# exceed 107 bytes, so the temp dir must stay short: <run>/ray/tmp when that is short enough, else
# a directory in /tmp named after the run dir (one head per run dir).
temp_dir() {
  if ((${#RUN} <= 32)); then echo "$RUN/tmp"
  else echo "/tmp/bridge-ray-$(id -u)-$(echo -n "$RUN" | sha256sum | cut -c1-8)"; fi
}
TEMP=$(temp_dir)

# `start` writes the settings it started with to <run>/ray/settings; the other commands read them
# back, so `status` and `stop` need no environment.
SETTINGS=$RUN/settings
if [[ ${1:-} != start && -f $SETTINGS ]]; then
  # shellcheck source=/dev/null
  source "$SETTINGS"
fi
[[ $AUTH == none || $AUTH == token ]] || die "BRIDGE_RAY_AUTH must be none or token, not '$AUTH'"
URL=http://127.0.0.1:$DASH_PORT
MARKER=BRIDGE_RAY_HEAD=$RUN
HEADER=$RUN/auth_header   # "Authorization: Bearer <token>" for curl -H @file (keeps it out of ps)

settings() {
  printf '%s\n' "DASH_PORT=$DASH_PORT" "GCS_PORT=$GCS_PORT" "CLIENT_PORT=$CLIENT_PORT" \
    "AGENT_PORT=$AGENT_PORT" "AUTH=$AUTH" "START_TIMEOUT=$START_TIMEOUT"
}

# ---------------------------------------------------------------------------------------------
# Installation
# ---------------------------------------------------------------------------------------------
ensure_installed() { ensure_venv "$VENV" "$LOCK" "240 MiB"; }

# ---------------------------------------------------------------------------------------------
# Process bookkeeping (starttime, terminate: tools/lib/procs.sh)
# ---------------------------------------------------------------------------------------------
# "PID STARTTIME" lines of recorded processes that are still the same processes.
recorded_alive_list() {
  local pid st
  [[ -f $PIDS ]] || return 0
  while read -r pid st; do
    [[ -n $pid && "$(starttime "$pid" 2>/dev/null)" == "$st" ]] && echo "$pid $st"
  done <"$PIDS"
  return 0
}

# The processes of this head: every process that carries our marker in its environment (`ray start`
# passes MARKER to everything it starts: daemons, workers, job entrypoints, even orphaned ones),
# whose command line mentions the temp dir (gcs_server, raylet, dashboard, agents, monitors) or, at
# start, whose session is the one `ray start` ran in; plus all their descendants (workers rename
# themselves "ray::..." and job entrypoints start new sessions). Prints PIDs.
head_processes() {
  local sid=${1:-} p roots=()
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [[ $p == "$$" || $p == "$BASHPID" ]] && continue
    if grep -qaF -- "$TEMP/" "/proc/$p/cmdline" 2>/dev/null ||
       grep -qzxF -- "$MARKER" "/proc/$p/environ" 2>/dev/null; then roots+=("$p"); continue; fi
    if [[ -n $sid ]]; then
      local s f
      s=$(cat "/proc/$p/stat" 2>/dev/null) || continue
      read -ra f <<<"${s##*) }"
      [[ ${f[3]} == "$sid" ]] && roots+=("$p")
    fi
  done
  ((${#roots[@]})) || return 0
  awk -v roots="${roots[*]}" '
    BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) { keep[r[i]] = 1; print r[i] } }
    { parent[$1] = $2 }
    END { changed = 1
          while (changed) { changed = 0
            for (p in parent) if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; print p; changed = 1 } } }
  ' < <(ps -e -o pid=,ppid=)
}

# Rewrite the pid file: the recorded processes still alive plus every current head process.
record_processes() {
  local sid=${1:-} p st
  mkdir -p "$RUN"
  {
    recorded_alive_list
    for p in $(head_processes "$sid"); do
      st=$(starttime "$p" 2>/dev/null) && echo "$p $st"
    done
  } | sort -u -n >"$PIDS.tmp"
  mv -f "$PIDS.tmp" "$PIDS"
}

stop_processes() {
  [[ -f $PIDS ]] || [[ -d $TEMP ]] || return 0
  local pids=() p _
  # Refresh first so workers and job processes started since `start` are included.
  record_processes
  # GCS last: the other daemons report to it on SIGTERM and hang for long if it is already gone.
  local gcs=()
  while read -r p _; do
    if grep -qaF /ray/gcs/gcs_server "/proc/$p/cmdline" 2>/dev/null; then gcs+=("$p"); else pids+=("$p"); fi
  done < <(recorded_alive_list)
  terminate 10 "${pids[@]}"
  terminate 10 "${gcs[@]}"
  # Anything that appeared while the head shut down (a worker being restarted).
  mapfile -t pids < <(head_processes)
  terminate 2 "${pids[@]}"
  rm -f "$PIDS"
  return 0
}

# ---------------------------------------------------------------------------------------------
# Health
# ---------------------------------------------------------------------------------------------
auth_args() { [[ $AUTH == token && -f $HEADER ]] && printf '%s\n' -H "@$HEADER"; return 0; }

http_code() {
  local a
  mapfile -t a < <(auth_args)
  curl -s -o /dev/null -m 10 -w '%{http_code}' "${a[@]}" "$URL$1" 2>/dev/null || true
}

# The token for BRIDGE_RAY_AUTH=token: made once per run dir, like `ray get-auth-token --generate`
# (64 hex digits).
ensure_token() {
  [[ -s $RUN/auth_token ]] || (umask 077; od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$RUN/auth_token")
  (umask 077; echo "Authorization: Bearer $(cat "$RUN/auth_token")" >"$HEADER")
}

api_answers() { [[ "$(http_code /api/version)" == 200 ]]; }
jobs_api_answers() { [[ "$(http_code /api/jobs/)" == 200 ]]; }

# The head's daemons are among the live recorded processes. Workers and job processes come and go,
# so only these are required.
recorded_ok() {
  [[ -s $PIDS ]] || return 1
  local d
  for d in /ray/gcs/gcs_server /raylet/raylet dashboard/dashboard.py; do
    own_daemon_alive "$d" || return 1
  done
}

own_daemon_alive() {
  local pid st
  while read -r pid st; do
    grep -qaF -- "$1" "/proc/$pid/cmdline" 2>/dev/null && return 0
  done < <(recorded_alive_list)
  return 1
}

# A head started with other settings (ports, auth, timeout) is not the one asked for.
same_settings() { [[ -f $SETTINGS && "$(cat "$SETTINGS")" == "$(settings)" ]]; }

healthy() { recorded_ok && same_settings && api_answers && jobs_api_answers; }

# ---------------------------------------------------------------------------------------------
# start
# ---------------------------------------------------------------------------------------------
write_env() {
  local version a token=""
  mapfile -t a < <(auth_args)
  [[ $AUTH == token ]] && token=$(cat "$RUN/auth_token")
  version=$(curl -s -m 10 "${a[@]}" "$URL/api/version" |
    "$VENV/bin/python" -c 'import json, sys; print(json.load(sys.stdin)["ray_version"])') ||
    die "cannot read the Ray version from $URL/api/version"
  (umask 077
   cat >"$RUN/env.tmp" <<EOF
RAY_ADDRESS=$URL
RAY_URL=$URL
RAY_VERSION=$version
RAY_PYTHON=$VENV/bin/python
RAY_TOKEN=$token
EOF
   # Only for a token head: an exported RAY_AUTH_TOKEN makes a later `ray start` turn token auth on.
   if [[ -n $token ]]; then echo "RAY_AUTH_TOKEN=$token" >>"$RUN/env.tmp"; fi
  )
  mv -f "$RUN/env.tmp" "$RUN/env"
}

start_head() {
  mkdir -p "$RUN/log"
  [[ -d $TEMP ]] && rm -rf --one-file-system "$TEMP"
  mkdir -p "$TEMP"
  # setsid: the head's processes share one new session, recorded below. `ray start` forks the
  # daemons and returns; 8>&- 9>&-: they must not inherit our lock files.
  local rc=0 extra_env=(RAY_AUTH_MODE=disabled)
  if [[ $AUTH == token ]]; then
    ensure_token
    extra_env=(RAY_AUTH_MODE=token "RAY_AUTH_TOKEN_PATH=$RUN/auth_token")
  fi
  [[ -n $START_TIMEOUT ]] && extra_env+=("RAY_JOB_START_TIMEOUT_SECONDS=$START_TIMEOUT")
  settings >"$SETTINGS"
  # Job entrypoints inherit PATH and the working directory of `ray start`: with the venv first on
  # PATH, `python` in an entrypoint is RAY_PYTHON (which can `import ray`), and a job without a
  # working_dir starts in <run>/ray/cwd rather than wherever this script was called from.
  mkdir -p "$RUN/cwd"
  cd "$RUN/cwd"
  setsid env "${extra_env[@]}" "$MARKER" PATH="$VENV/bin:$PATH" VIRTUAL_ENV="$VENV" "$VENV/bin/ray" start --head \
    --node-ip-address 127.0.0.1 \
    --port "$GCS_PORT" --ray-client-server-port "$CLIENT_PORT" \
    --dashboard-agent-listen-port "$AGENT_PORT" \
    --dashboard-host 127.0.0.1 --dashboard-port "$DASH_PORT" --include-dashboard true \
    --num-cpus 2 --num-gpus 0 --resources '{"bridge_test": 1}' \
    --object-store-memory 200000000 \
    --disable-usage-stats \
    --temp-dir "$TEMP" \
    </dev/null >"$RUN/log/ray-start.out" 2>&1 8>&- 9>&- &
  local launcher=$!
  wait "$launcher" || rc=$?
  # The session id is the pid of the setsid'ed `ray start` (it forks no further before setsid).
  record_processes "$launcher"
  if ((rc != 0)); then
    log "ray start failed (exit $rc); last lines of $RUN/log/ray-start.out:"
    tail -n 25 "$RUN/log/ray-start.out" >&2
    return 1
  fi
  local deadline=$((SECONDS + TIMEOUT))
  until api_answers && jobs_api_answers; do
    if ((SECONDS >= deadline)); then
      log "dashboard at $URL did not answer /api/version and /api/jobs/ within ${TIMEOUT}s;" \
          "logs: $TEMP/session_latest/logs"
      tail -n 15 "$TEMP/session_latest/logs/dashboard.log" >&2 2>/dev/null || true
      return 1
    fi
    sleep 0.2
  done
  record_processes "$launcher"
}

start() {
  mkdir -p "$RUN"
  exec 9>"$RUN/.lock"
  flock 9
  local t0=$SECONDS
  ensure_installed
  if healthy; then
    write_env
    log "Ray already running at $URL (env refreshed: $RUN/env)"
    exec 9>&-
    return 0
  fi
  stop_processes          # leftovers of a half-started or crashed head
  if [[ "$(http_code /api/version)" != 000 ]]; then
    die "something else answers on $URL (not the head of $RUN); not starting a second one"
  fi
  start_head || { stop_processes; exit 1; }
  write_env
  exec 9>&-
  log "Ray $RAY_PIN up at $URL in $((SECONDS - t0))s; env: $RUN/env"
}

stop() {
  [[ -d $RUN ]] || return 0
  exec 9>"$RUN/.lock"
  flock 9
  stop_processes
  rm -rf --one-file-system "$TEMP"
  rm -f "$HEADER"
  exec 9>&-
  log "Ray stopped"
}

status() {
  if recorded_ok && api_answers; then echo "running $URL"
  elif [[ -n "$(recorded_alive_list)" ]]; then echo "degraded $URL (not answering; start restarts it)"
  else echo "stopped $URL"; fi
}

service_main 2,9 "$@"
