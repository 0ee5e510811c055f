# shellcheck shell=bash
# Process bookkeeping of the scripts that start real services (tools/*-cluster.sh,
# tools/kube-control-plane.sh); sourced, not run. A process is recorded as "PID STARTTIME", so a
# pid the kernel has since given to another process never passes for a recorded daemon.
#
# The sourcing script defines log MESSAGE, and PID_DIR (where NAME.pid files live) before it
# calls recorded_alive or recorded_pid; PROCS_LOG_PREFIX, if set, starts terminate's message.

# Start time (field 22 of /proc/PID/stat) of a live process; fails for a gone or zombie one
# (pid 1 here reaps orphans only now and then). comm may hold spaces, so split after ')'.
starttime() {
  local s f
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  read -ra f <<<"${s##*) }"
  [[ ${f[0]} != Z ]] || return 1
  echo "${f[19]}"
}

# Alive = the pid exists and was started when we recorded it (a reused pid has another start time).
recorded_alive() {
  local pf=$PID_DIR/$1.pid pid st
  [[ -f $pf ]] || return 1
  read -r pid st <"$pf" || return 1
  [[ -n $pid && "$(starttime "$pid" 2>/dev/null)" == "$st" ]]
}

recorded_pid() { local pid _; read -r pid _ <"$PID_DIR/$1.pid"; echo "$pid"; }

# terminate SECONDS PID...: SIGTERM all together (a daemon may take seconds to exit), then
# SIGKILL what is left after SECONDS.
terminate() {
  local wait=$1; shift
  (($#)) || return 0
  kill -TERM "$@" 2>/dev/null || true
  local i p left
  for ((i = 0; i < wait * 10; i++)); do
    left=()
    for p in "$@"; do starttime "$p" >/dev/null && left+=("$p"); done
    ((${#left[@]})) || return 0
    sleep 0.1
  done
  log "${PROCS_LOG_PREFIX:-}SIGKILL to ${left[*]}"
  kill -KILL "${left[@]}" 2>/dev/null || true
}
