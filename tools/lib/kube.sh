# shellcheck shell=bash
# What tools/kube-control-plane.sh and tools/kube-node.sh share: daemon launch and wait, the
# certificates signed by the control plane's CA, kubeconfig files; sourced, not run, after
# tools/lib/procs.sh.
#
# The sourcing script defines log, die, RUN (the daemons' logs go to $RUN/log, its env file is
# $RUN/env), PID_DIR, TIMEOUT, DAEMONS (the names of its daemons), USAGE_LINES (the sed range of
# its header comment that is its usage) and the verbs build, start, stop, status and more_verbs
# (see kube_main).

# launch NAME COMMAND...: start a daemon in a session of its own, log in $RUN/log/NAME.log, record
# it as NAME. setsid does not fork here (a background job of a non-interactive shell is no group
# leader), so $! is the daemon (or nsenter, which execs it).
launch() {
  local name=$1; shift
  mkdir -p "$PID_DIR" "$RUN/log"
  [[ -f $RUN/log/$name.log ]] && mv -f "$RUN/log/$name.log" "$RUN/log/$name.log.1"
  # In the run dir, not the caller's: a daemon must outlive the directory it was started from.
  setsid env --chdir="$RUN" "$@" </dev/null >"$RUN/log/$name.log" 2>&1 7>&- 8>&- 9>&- &
  local pid=$!
  echo "$pid $(starttime "$pid")" >"$PID_DIR/$name.pid"
}

# wait_for WHAT NAME COMMAND...: until COMMAND succeeds, as long as the daemon NAME lives, at most
# TIMEOUT seconds; on failure show the end of its log.
wait_for() {
  local what=$1 pidname=$2; shift 2
  local deadline=$((SECONDS + TIMEOUT))
  until "$@" >/dev/null 2>&1; do
    if ! recorded_alive "$pidname" || ((SECONDS >= deadline)); then
      local why="did not come up within ${TIMEOUT}s"
      recorded_alive "$pidname" || why="exited"
      log "$what $why; last lines of $RUN/log/$pidname.log:"
      tail -n 25 "$RUN/log/$pidname.log" >&2 2>/dev/null || true
      return 1
    fi
    sleep 0.2
  done
}

# sign NAME SUBJ EXT: NAME.key + NAME.crt signed by ca.crt/ca.key, all in the current directory.
sign() {
  local name=$1 subj=$2 ext=$3
  openssl req -new -nodes -newkey rsa:2048 -keyout "$name.key" -subj "$subj" -out "$name.csr" 2>/dev/null
  printf '%s\n' "basicConstraints=critical,CA:FALSE" "subjectKeyIdentifier=hash" \
    "authorityKeyIdentifier=keyid,issuer" "$ext" >"$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
    -sha256 -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext" ca.srl
}

# ensure_client_cert PKI NAME SUBJ: a client certificate PKI/NAME.{crt,key} signed by the CA in
# PKI, made once (the key is renamed into place last, so a half-made pair is made again).
ensure_client_cert() {
  local pki=$1 name=$2 subj=$3
  [[ -f $pki/$name.key && -f $pki/$name.crt ]] && return 0
  (
    set -e
    cd "$pki"
    umask 077
    rm -f "$name.key" "$name.crt"
    sign ".$name" "$subj" "$(printf '%s\n' \
      "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=clientAuth")"
    mv -f ".$name.crt" "$name.crt"
    mv -f ".$name.key" "$name.key"
  ) || { log "generating the client certificate $pki/$name.crt with openssl failed"; return 1; }
}

# write_kubeconfig OUT SERVER PKI NAME: a kubeconfig for SERVER trusting PKI/ca.crt and
# authenticating with PKI/NAME.{crt,key}, written to OUT (mode 0600) atomically.
write_kubeconfig() {
  local out=$1 server=$2 pki=$3 name=$4 b64="base64 -w0"
  (umask 077
   cat >"$out.tmp" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: bridge
  cluster:
    server: $server
    certificate-authority-data: $($b64 "$pki/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $($b64 "$pki/$name.crt")
    client-key-data: $($b64 "$pki/$name.key")
contexts:
- name: bridge
  context:
    cluster: bridge
    user: $name
    namespace: default
current-context: bridge
KUBECONFIG
  )
  mv -f "$out.tmp" "$out"
}

# write_private FILE: stdin to FILE, mode 0600 (env files hold key paths), replaced atomically.
write_private() {
  (umask 077; cat >"$1.tmp")
  mv -f "$1.tmp" "$1"
}

# How many of DAEMONS are alive.
alive_count() {
  local d n=0
  for d in "${DAEMONS[@]}"; do recorded_alive "$d" && n=$((n + 1)); done
  echo "$n"
}

usage() { sed -n "${USAGE_LINES}p" "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

# kube_main ARG...: run the verb ARG. build, start, stop [--wipe], status and env are the same in
# both scripts; any other verb goes to more_verbs VERB ARG... A wrong argument count calls usage
# (which prints the script's usage and exits 2).
kube_main() {
  local cmd=${1:-}
  (($#)) && shift
  case $cmd in
    build|start|status) (($# == 0)) || usage; "$cmd" ;;
    stop) (($# <= 1)) || usage; stop "$@" ;;
    env)  (($# == 0)) || usage
          [[ -f $RUN/env ]] || die "no env file; run: $0 start"
          cat "$RUN/env" ;;
    *) more_verbs "$cmd" "$@" ;;
  esac
}
