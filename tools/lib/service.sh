# shellcheck shell=bash
# What the scripts that start services for tests share besides process bookkeeping
# (tools/lib/procs.sh, sourced first): their command line, the install of a pinned virtualenv
# (tools/ray-cluster.sh, tools/quantum-runtime.sh), credentials made once per run dir, and the
# simulators' start, stop and status (tools/lsf-pac.sh, tools/quantum-runtime.sh, and the daemons of
# tools/sshd.sh and tools/s3.sh); sourced, not run.
#
# The sourcing script defines RUN (its run dir, which holds the env file), die, log and the verbs
# start, stop and status. The simulator_* functions also need its PID_DIR, URL, TIMEOUT, SETTINGS,
# settings (prints the settings it starts with), healthy, answers (the simulator answers a path that
# needs no credentials), write_env, stop_processes and launch (starts the simulator in the
# background, in a session of its own, and sets LAUNCHED to its pid). A real daemon started the same
# way (tools/sshd.sh, tools/s3.sh) sets SERVICE_PROCESS to its name: the name of its pid file
# (PID_DIR/NAME.pid), of its output (<run>/log/NAME.out) and in messages; "simulator" by default.

# ensure_venv VENV LOCK SIZE: the virtualenv VENV holds exactly LOCK (a lock of locks/, made by `make
# lock`), installed with --require-hashes; VENV/.bridge-lock holds the lock's hash, so a new lock
# makes a new venv; a lock serialises parallel starts. Python is $PYTHON, else python3.11 if on PATH,
# else python3.
ensure_venv() {
  local venv=$1 lock=$2 size=$3 want stamp=$1/.bridge-lock
  want=$(sha256sum "$lock" | cut -d' ' -f1)
  [[ -f $stamp && "$(cat "$stamp")" == "$want" && -x $venv/bin/python ]] && return 0
  mkdir -p "$(dirname "$venv")"
  exec 8>"$venv.lock"
  flock 8
  if [[ -f $stamp && "$(cat "$stamp")" == "$want" && -x $venv/bin/python ]]; then exec 8>&-; return 0; fi
  local py=${PYTHON:-} t0=$SECONDS
  if [[ -z $py ]]; then
    if command -v python3.11 >/dev/null 2>&1; then py=python3.11; else py=python3; fi
  fi
  # A new venv: pip adds, never removes, so the one of an older lock could keep what this one lacks.
  rm -rf "$venv"
  "$py" -m venv "$venv"
  log "installing ${lock#"$REPO/"} into $venv (about $size)"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --require-hashes -r "$lock" >&2 ||
    die "pip install -r $lock failed"
  "$venv/bin/python" -m pip check --disable-pip-version-check >&2 || die "pip check failed in $venv"
  echo "$want" >"$stamp"
  exec 8>&-
  log "installed ${lock#"$REPO/"} in $((SECONDS - t0))s"
}

# secret NAME BYTES: the random hex string in <run>/NAME, made (mode 0600) at its first use, so a
# credential stays the same for the life of the run dir.
secret() {
  local file=$RUN/$1
  [[ -s $file ]] || (umask 077; od -An -tx1 -N"$2" /dev/urandom | tr -d ' \n' >"$file")
  cat "$file"
}

# simulator_start: start the simulator unless a healthy one with the same settings runs; wait up to
# TIMEOUT seconds until it answers; write the env file.
simulator_start() {
  local name=${SERVICE_PROCESS:-simulator}
  mkdir -p "$RUN/log" "$PID_DIR" "$RUN/state"
  exec 9>"$RUN/.lock"
  flock 9
  local t0=$SECONDS
  if healthy; then
    write_env
    log "$name already running at $URL (env refreshed: $RUN/env)"
    exec 9>&-
    return 0
  fi
  stop_processes
  answers && die "something else answers on $URL (not the $name of $RUN); not starting a second one"
  settings >"$SETTINGS"
  launch
  echo "$LAUNCHED $(starttime "$LAUNCHED")" >"$PID_DIR/$name.pid"
  local deadline=$((SECONDS + TIMEOUT))
  until answers; do
    if ! recorded_alive "$name" || ((SECONDS >= deadline)); then
      log "the $name at $URL did not answer within ${TIMEOUT}s; last lines of $RUN/log/$name.out:"
      tail -n 15 "$RUN/log/$name.out" >&2 || true
      stop_processes
      exit 1
    fi
    sleep 0.1
  done
  write_env
  exec 9>&-
  log "$name up at $URL in $((SECONDS - t0))s; env: $RUN/env"
}

simulator_stop() {
  [[ -d $RUN ]] || return 0
  exec 9>"$RUN/.lock"
  flock 9
  stop_processes
  exec 9>&-
  log "${SERVICE_PROCESS:-simulator} stopped"
}

simulator_status() {
  local name=${SERVICE_PROCESS:-simulator}
  if recorded_alive "$name" && answers; then echo "running $URL"
  elif recorded_alive "$name"; then echo "degraded $URL (not answering; start restarts it)"
  else echo "stopped $URL"; fi
}

# service_main USAGE_LINES ARG...: run the verb ARG (start|stop|status|env); anything else prints
# the script's usage, the header comment lines USAGE_LINES (a sed range such as 2,5), and exits 2.
service_main() {
  local lines=$1
  shift
  if (($# == 1)); then
    case $1 in
      start)  start; return ;;
      stop)   stop; return ;;
      status) status; return ;;
      env)    [[ -f $RUN/env ]] || die "no env file; run: $0 start"
              cat "$RUN/env"; return ;;
    esac
  fi
  sed -n "${lines}p" "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
