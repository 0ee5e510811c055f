#!/usr/bin/env bash
# Build, start, stop and inspect a real single-node Kubernetes control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler) for tests and the demo; tools/kube-node.sh adds a node
# (containerd + kubelet) that runs pods.
#
#   tools/kube-control-plane.sh build|start|stop [--wipe]|status|env|bindir
#   tools/kube-control-plane.sh gomod [KUBE_VERSION [ETCD_VERSION]]   (maintainers: re-pin)
#
# The binaries (the control plane's, kubelet and kubectl) are built from source through the Go
# module proxy out of the wrapper modules tools/kube/apiserver and tools/kube/etcd and cached in
# ${XDG_CACHE_HOME:-~/.cache}/bridge/kube/<hash of their go.mod/go.sum>/bin (`bindir` prints it), so
# only the first build is slow (about 7 minutes on 2 busy cores for etcd and kube-apiserver, plus
# ~1 GB of module downloads; the other four take about 5 more minutes; the Go caches, GOMODCACHE
# and GOCACHE at their defaults, grow by ~4 GB). A start then takes 5-7 s. kubectl is linked at
# ${BRIDGE_RUN:-<repo>/.run}/bin/kubectl.
#
# The run dir is ${BRIDGE_RUN:-<repo>/.run}/kube: pki/ (CA, serving cert, client certs of the admin
# in system:masters, of the controller-manager, the scheduler and the apiserver towards kubelets,
# service-account keys; made once, missing client certs added at a start), etcd/ (data), log/,
# *.kubeconfig and env (mode 0600: KUBECONFIG, KUBECTL, KUBE_API, KUBE_VERSION, KUBE_CA_FILE,
# KUBE_ADMIN_CERT, KUBE_ADMIN_KEY). The apiserver has the ServiceAccount and PodSecurity admission
# plugins (pods get a projected token; the controller-manager makes every namespace's "default"
# ServiceAccount and kube-root-ca.crt ConfigMap, collects garbage and finalizes deleted namespaces)
# and the Node and RBAC authorizers. `stop` stops the node first (tools/kube-node.sh stop) and keeps
# the data; `stop --wipe` deletes the run dir. Everything listens on 127.0.0.1; ports (read by
# `start`, remembered for the others): BRIDGE_KUBE_API_PORT (6443), BRIDGE_KUBE_ETCD_PORT (2479),
# BRIDGE_KUBE_ETCD_PEER_PORT (2480), BRIDGE_KUBE_CONTROLLER_MANAGER_PORT (10257),
# BRIDGE_KUBE_SCHEDULER_PORT (10259). Also: BRIDGE_KUBE_TIMEOUT (seconds to wait for each daemon,
# 90), BRIDGE_KUBE_BUILD_PROCS (go build -p, 2; the build runs under nice -n 10).
#
# Facts this script relies on are in docs real-services.md sections 4 and 7. Every process it
# starts is recorded as "PID STARTTIME" so that a stale pid file never matches a live process; it
# never kills by name.
set -euo pipefail
# The header lines that `usage` prints.
USAGE_LINES=2,8

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUN=${BRIDGE_RUN:-$REPO/.run}/kube
MODS=$REPO/tools/kube
CACHE_BASE=${XDG_CACHE_HOME:-$HOME/.cache}/bridge/kube
# Bump when the way the binaries are built changes (flags, ldflags): it is part of the cache key.
RECIPE=2
TIMEOUT=${BRIDGE_KUBE_TIMEOUT:-90}
PID_DIR=$RUN/pids
PKI=$RUN/pki
# Stable links to the built binaries that users call (kubectl), whatever the cache key.
BIN_LINKS=${BRIDGE_RUN:-$REPO/.run}/bin
# Started in this order, stopped in the reverse one.
DAEMONS=(etcd kube-apiserver kube-controller-manager kube-scheduler)
# What the wrapper module tools/kube/apiserver builds (k8s.io/kubernetes/cmd/NAME).
KUBE_TOOLS=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet)

die() { echo "kube-control-plane: $*" >&2; exit 1; }
log() { echo "kube-control-plane: $*" >&2; }
# shellcheck source=tools/lib/procs.sh
source "$REPO/tools/lib/procs.sh"
# shellcheck source=tools/lib/kube.sh
source "$REPO/tools/lib/kube.sh"

# `start` writes its ports to <run>/kube/settings; the other commands read them back.
SETTINGS=$RUN/settings
API_PORT=${BRIDGE_KUBE_API_PORT:-6443}
ETCD_PORT=${BRIDGE_KUBE_ETCD_PORT:-2479}
ETCD_PEER_PORT=${BRIDGE_KUBE_ETCD_PEER_PORT:-2480}
CONTROLLER_MANAGER_PORT=${BRIDGE_KUBE_CONTROLLER_MANAGER_PORT:-10257}
SCHEDULER_PORT=${BRIDGE_KUBE_SCHEDULER_PORT:-10259}
if [[ ${1:-} != start && -f $SETTINGS ]]; then
  # shellcheck source=/dev/null
  source "$SETTINGS"
fi
API=https://127.0.0.1:$API_PORT
ETCD_URL=http://127.0.0.1:$ETCD_PORT

# ---------------------------------------------------------------------------------------------
# Wrapper modules and the binary cache
# ---------------------------------------------------------------------------------------------
kube_version() { awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$MODS/apiserver/go.mod"; }
etcd_version() { awk '$1 == "go.etcd.io/etcd/server/v3" && $2 ~ /^v/ { print $2; exit }' "$MODS/etcd/go.mod"; }

cache_key() {
  local f
  for f in apiserver/go.mod apiserver/go.sum etcd/go.mod etcd/go.sum; do
    [[ -f $MODS/$f ]] || die "missing $MODS/$f"
  done
  { echo "recipe=$RECIPE"; cat "$MODS"/apiserver/go.{mod,sum} "$MODS"/etcd/go.{mod,sum}; } |
    sha256sum | cut -c1-16
}
BIN_DIR() { echo "$CACHE_BASE/$(cache_key)/bin"; }

# Regenerate the wrapper go.mod files (then `go mod tidy`). The replace list is read from the
# go.mod that the proxy serves for k8s.io/kubernetes: its "k8s.io/X => ./staging/src/k8s.io/X"
# lines become "k8s.io/X => k8s.io/X v0.MINOR.PATCH".
gomod() {
  local kv=${1:-$(kube_version)} ev=${2:-$(etcd_version)} mod staging goline godebug
  [[ $kv =~ ^v1\.[0-9]+\.[0-9]+$ ]] || die "KUBE_VERSION must look like v1.34.4, not '$kv'"
  [[ $ev =~ ^v3\.[0-9]+\.[0-9]+$ ]] || die "ETCD_VERSION must look like v3.6.16, not '$ev'"
  mod=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$kv" |
        sed -n 's/^\s*"GoMod": "\(.*\)",\?$/\1/p')
  [[ -f $mod ]] || die "could not download the go.mod of k8s.io/kubernetes@$kv"
  staging=$(sed -n 's#^\s*\(k8s\.io/[^ ]*\) => \./staging/src/k8s\.io/.*#\1#p' "$mod")
  [[ -n $staging ]] || die "no staging replace lines in $mod"
  goline=$(grep -m1 '^go ' "$mod")
  godebug=$(grep '^godebug' "$mod" || true)
  mkdir -p "$MODS/apiserver" "$MODS/etcd"
  {
    echo "// Wrapper module: builds $(echo "${KUBE_TOOLS[*]}" | sed 's/ /, /g; s/\(.*\), /\1 and /') $kv from the Go module proxy."
    echo "// Generated by tools/kube-control-plane.sh gomod; edit there, not here."
    echo "module bridge.invalid/tools/kube/apiserver"
    echo
    echo "$goline"
    [[ -n $godebug ]] && { echo; echo "$godebug"; }
    echo
    local t
    for t in "${KUBE_TOOLS[@]}"; do echo "tool k8s.io/kubernetes/cmd/$t"; done
    echo
    echo "require k8s.io/kubernetes $kv"
    echo
    echo "replace ("
    local m
    for m in $staging; do printf '\t%s => %s v0%s\n' "$m" "$m" "${kv#v1}"; done
    echo ")"
  } >"$MODS/apiserver/go.mod"
  {
    echo "// Wrapper module: builds etcd $ev from the Go module proxy."
    echo "// Generated by tools/kube-control-plane.sh gomod; edit there, not here."
    echo "module bridge.invalid/tools/kube/etcd"
    echo
    echo "go 1.24.0"
    echo
    echo "tool go.etcd.io/etcd/server/v3"
    echo
    echo "require go.etcd.io/etcd/server/v3 $ev"
  } >"$MODS/etcd/go.mod"
  rm -f "$MODS/apiserver/go.sum" "$MODS/etcd/go.sum"
  (cd "$MODS/apiserver" && go mod tidy) || die "go mod tidy failed in $MODS/apiserver"
  (cd "$MODS/etcd" && go mod tidy) || die "go mod tidy failed in $MODS/etcd"
  log "wrote $MODS/{apiserver,etcd}/go.{mod,sum} for kube $kv, etcd $ev"
}

built() {
  local b t
  b=$(BIN_DIR)
  [[ -f $b/../.complete && -x $b/etcd ]] || return 1
  for t in "${KUBE_TOOLS[@]}"; do [[ -x $b/$t ]] || return 1; done
}

# Build both binaries into a temp dir next to the cache entry and rename it into place only when
# both are done, so a half-built entry is never taken as complete. One build at a time (flock).
build() {
  local quiet=${1:-} key dir kv ev
  key=$(cache_key)
  dir=$CACHE_BASE/$key
  if built; then [[ -n $quiet ]] || log "binaries up to date in $dir/bin"; return 0; fi
  command -v go >/dev/null || die "go is not on PATH"
  mkdir -p "$CACHE_BASE"
  exec 7>"$CACHE_BASE/.build.lock"
  flock 7
  if built; then exec 7>&-; log "binaries up to date in $dir/bin"; return 0; fi
  local old
  for old in "$CACHE_BASE/.$key.build."*; do [[ -e $old ]] && rm -rf "$old"; done
  kv=$(kube_version); ev=$(etcd_version)
  local tmp t0=$SECONDS blog
  tmp=$(mktemp -d "$CACHE_BASE/.$key.build.XXXXXX")
  blog=$CACHE_BASE/.$key.build.log
  # shellcheck disable=SC2064
  trap "rm -rf '$tmp'" EXIT
  chmod 0755 "$tmp"
  mkdir -p "$tmp/bin"
  log "building ${KUBE_TOOLS[*]} $kv and etcd $ev (cold: ~7 min on 2 cores; log: $blog)"
  # What hack/lib/version.sh would stamp; without it /version says v0.0.0-master.
  local minor=${kv#v1.}; minor=${minor%%.*}
  local date pkg ldflags=""
  date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$kv -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
  done
  local procs=${BRIDGE_KUBE_BUILD_PROCS:-2}
  {
    (cd "$MODS/etcd" && CGO_ENABLED=0 nice -n 10 go build -p "$procs" -trimpath -buildvcs=false \
       -ldflags "-s -w" -o "$tmp/bin/etcd" go.etcd.io/etcd/server/v3) &&
    (cd "$MODS/apiserver" && CGO_ENABLED=0 nice -n 10 go build -p "$procs" -trimpath -buildvcs=false \
       -ldflags "-s -w$ldflags" -o "$tmp/bin/" "${KUBE_TOOLS[@]/#/k8s.io/kubernetes/cmd/}")
  } >"$blog" 2>&1 || { tail -n 30 "$blog" >&2; die "build failed (log: $blog)"; }
  echo "${KUBE_TOOLS[*]} $kv, etcd $ev, built $date in $((SECONDS - t0))s" >"$tmp/.complete"
  rm -rf "$dir"
  mv -T "$tmp" "$dir"
  trap - EXIT
  rm -f "$blog"
  exec 7>&-
  log "built $dir/bin in $((SECONDS - t0))s"
}

# ---------------------------------------------------------------------------------------------
# Process bookkeeping (starttime, recorded_alive, recorded_pid, terminate: tools/lib/procs.sh)
# ---------------------------------------------------------------------------------------------

# In the reverse order of the start: the apiserver before etcd (it would log etcd errors while
# draining), its clients before the apiserver.
stop_processes() {
  local i d
  for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
    d=${DAEMONS[i]}
    recorded_alive "$d" && terminate 20 "$(recorded_pid "$d")"
    rm -f "$PID_DIR/$d.pid"
  done
  return 0
}

# ---------------------------------------------------------------------------------------------
# PKI, kubeconfig, env
# ---------------------------------------------------------------------------------------------
# Made once; in a temp dir renamed into place, so an interrupted run leaves no half PKI.
ensure_pki() {
  [[ -f $PKI/.complete ]] && return 0
  command -v openssl >/dev/null || die "openssl is not installed"
  rm -rf "$PKI" "$RUN"/.pki.*
  local tmp
  tmp=$(mktemp -d "$RUN/.pki.XXXXXX")
  (
    set -e
    cd "$tmp"
    umask 077
    openssl req -x509 -new -nodes -newkey rsa:2048 -keyout ca.key -out ca.crt -days 3650 -sha256 \
      -subj "/CN=bridge-kube-ca" -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
    sign apiserver "/CN=kube-apiserver" "$(printf '%s\n' \
      "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" \
      "subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local")"
    sign admin "/O=system:masters/CN=bridge-admin" "$(printf '%s\n' \
      "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=clientAuth")"
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key 2>/dev/null
    openssl pkey -in sa.key -pubout -out sa.pub 2>/dev/null
    rm -f ca.srl
    touch .complete
  ) || { rm -rf "$tmp"; die "generating certificates with openssl failed"; }
  chmod 0700 "$tmp"
  mv -T "$tmp" "$PKI"
}

# Client certificates added after the first PKI (an existing run dir gets them at its next start):
# the controller-manager's and the scheduler's identities, which the RBAC bootstrap policy binds,
# and the apiserver's own for the kubelets (logs, exec, port-forward, proxy).
ensure_component_certs() {
  ensure_client_cert "$PKI" kube-controller-manager "/CN=system:kube-controller-manager" ||
    die "generating the control plane's client certificates failed"
  ensure_client_cert "$PKI" kube-scheduler "/CN=system:kube-scheduler" ||
    die "generating the control plane's client certificates failed"
  ensure_client_cert "$PKI" apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" ||
    die "generating the control plane's client certificates failed"
  local c
  for c in admin kube-controller-manager kube-scheduler; do
    write_kubeconfig "$RUN/$c.kubeconfig" "$API" "$PKI" "$c"
  done
}

kcurl() { curl -sf -m 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$@"; }
ready() { [[ "$(kcurl "$API/readyz" 2>/dev/null)" == ok ]]; }
# The controller-manager and the scheduler serve /healthz to anyone, with a self-signed certificate.
healthz() { [[ "$(curl -sfk -m 3 "https://127.0.0.1:$1/healthz")" == ok ]]; }
etcd_ok() { curl -sf -m 3 "$ETCD_URL/health" | grep -q '"health":"true"'; }

# The kubectl just built, on a path that stays when the cache key changes.
link_kubectl() {
  mkdir -p "$BIN_LINKS"
  ln -sfn "$(BIN_DIR)/kubectl" "$BIN_LINKS/kubectl"
}

write_env() {
  local version
  version=$(kcurl "$API/version" | sed -n 's/^\s*"gitVersion": "\(.*\)",\?$/\1/p')
  write_private "$RUN/env" <<EOF
KUBECONFIG=$RUN/admin.kubeconfig
KUBECTL=$BIN_LINKS/kubectl
KUBE_API=$API
KUBE_VERSION=${version:-$(kube_version)}
KUBE_CA_FILE=$PKI/ca.crt
KUBE_ADMIN_CERT=$PKI/admin.crt
KUBE_ADMIN_KEY=$PKI/admin.key
EOF
}

# ---------------------------------------------------------------------------------------------
# start / stop / status
# ---------------------------------------------------------------------------------------------
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_daemons() {
  local bin p
  bin=$(BIN_DIR)
  for p in "$ETCD_PORT" "$ETCD_PEER_PORT" "$API_PORT" "$CONTROLLER_MANAGER_PORT" "$SCHEDULER_PORT"; do
    port_free "$p" || die "port 127.0.0.1:$p is already in use (set BRIDGE_KUBE_*_PORT)"
  done
  mkdir -p "$RUN/etcd"
  chmod 0700 "$RUN/etcd"
  launch etcd "$bin/etcd" --name bridge --data-dir "$RUN/etcd" \
    --listen-client-urls "$ETCD_URL" --advertise-client-urls "$ETCD_URL" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "bridge=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync=true --log-level=warn
  wait_for "etcd" etcd etcd_ok || return 1

  # No endpoint reconciler: the "kubernetes" Endpoints may not hold a loopback address (it logged
  # an error every 10 s); a node reaches the apiserver through its own DNAT of 10.0.0.1:443
  # (tools/kube-node.sh). Nodes are reached at their InternalIP only: a Hostname address of a
  # node names nothing that resolves here. Privileged containers allowed, as kubeadm does:
  # PodSecurity admission decides per namespace. MutatingAdmissionPolicy (beta in v1.34, off by
  # default) is on: deploy/author/ records each BridgeJob's author with one (docs/security.md).
  launch kube-apiserver "$bin/kube-apiserver" \
    --etcd-servers="$ETCD_URL" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" \
    --cert-dir="$PKI" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" \
    --service-account-issuer="$API" \
    --service-account-key-file="$PKI/sa.pub" \
    --service-account-signing-key-file="$PKI/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 \
    --allow-privileged=true \
    --authorization-mode=Node,RBAC \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP \
    --endpoint-reconciler-type=none \
    --feature-gates=MutatingAdmissionPolicy=true \
    --runtime-config=admissionregistration.k8s.io/v1beta1=true \
    --profiling=false
  wait_for "kube-apiserver (/readyz)" kube-apiserver ready || return 1

  # One instance each, so no leader election (it would only delay the start by a lease).
  # --use-service-account-credentials: each controller acts as its own ServiceAccount in
  # kube-system, as in kubeadm clusters, so RBAC shows what each one does.
  launch kube-controller-manager "$bin/kube-controller-manager" \
    --kubeconfig="$RUN/kube-controller-manager.kubeconfig" \
    --authentication-kubeconfig="$RUN/kube-controller-manager.kubeconfig" \
    --authorization-kubeconfig="$RUN/kube-controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$CONTROLLER_MANAGER_PORT" \
    --controllers='*' --leader-elect=false \
    --root-ca-file="$PKI/ca.crt" \
    --service-account-private-key-file="$PKI/sa.key" \
    --use-service-account-credentials=true \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --service-cluster-ip-range=10.0.0.0/24 \
    --profiling=false
  launch kube-scheduler "$bin/kube-scheduler" \
    --kubeconfig="$RUN/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig="$RUN/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig="$RUN/kube-scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT" \
    --leader-elect=false --profiling=false
  wait_for "kube-controller-manager (/healthz)" kube-controller-manager \
    healthz "$CONTROLLER_MANAGER_PORT" || return 1
  wait_for "kube-scheduler (/healthz)" kube-scheduler healthz "$SCHEDULER_PORT"
}

start() {
  mkdir -p "$RUN"
  exec 9>"$RUN/.lock"
  flock 9
  local t0=$SECONDS
  if all_alive && [[ -f $PKI/.complete ]] && ready; then
    ensure_component_certs
    link_kubectl
    write_env
    log "already running at $API (env refreshed: $RUN/env)"
    exec 9>&-
    return 0
  fi
  stop_processes           # leftovers of a half-started or crashed control plane
  build quiet
  local t1=$SECONDS
  ensure_pki
  printf '%s\n' "API_PORT=$API_PORT" "ETCD_PORT=$ETCD_PORT" "ETCD_PEER_PORT=$ETCD_PEER_PORT" \
    "CONTROLLER_MANAGER_PORT=$CONTROLLER_MANAGER_PORT" "SCHEDULER_PORT=$SCHEDULER_PORT" >"$SETTINGS"
  ensure_component_certs
  link_kubectl
  start_daemons || { stop_processes; exit 1; }
  write_env
  exec 9>&-
  log "up at $API in $((SECONDS - t1))s (total $((SECONDS - t0))s); env: $RUN/env"
}

stop() {
  local wipe=${1:-}
  [[ -z $wipe || $wipe == --wipe ]] || die "unknown option '$wipe' (stop takes only --wipe)"
  [[ -d $RUN ]] || return 0
  # A node's containers, mounts and network namespace first: they live under $RUN/node, and a
  # kubelet without an apiserver would only retry.
  if [[ -d $RUN/node ]]; then "$REPO/tools/kube-node.sh" stop || die "stopping the node failed"; fi
  exec 9>"$RUN/.lock"
  flock 9
  stop_processes
  if [[ -n $wipe ]]; then
    find "$RUN" -mindepth 1 -maxdepth 1 ! -name .lock -exec rm -rf {} +
    log "stopped; $RUN wiped"
  else
    log "stopped (data kept in $RUN; 'stop --wipe' deletes it)"
  fi
  exec 9>&-
}

all_alive() {
  local d
  for d in "${DAEMONS[@]}"; do recorded_alive "$d" || return 1; done
}

status() {
  local n b="binaries not built"
  built && b="binaries built"
  n=$(alive_count)
  if ((n == ${#DAEMONS[@]})) && [[ -f $PKI/.complete ]] && ready; then
    echo "kube $(kube_version) running $API"
  elif ((n == ${#DAEMONS[@]})); then
    echo "kube $(kube_version) degraded $API (not ready; start restarts it)"
  elif ((n > 0)); then
    echo "kube $(kube_version) degraded $API ($n of ${#DAEMONS[@]} daemons alive)"
  else
    echo "kube $(kube_version) stopped $API ($b)"
  fi
}

more_verbs() {
  case $1 in
    gomod)  (($# <= 3)) || usage; shift; gomod "$@" ;;
    bindir) (($# == 1)) || usage; built || die "binaries not built; run: $0 build"; BIN_DIR ;;
    *) usage ;;
  esac
}

kube_main "$@"
