#!/usr/bin/env bash
# Build, start, stop and inspect a real Kubernetes node (containerd + kubelet) joined to the
# control plane of tools/kube-control-plane.sh, for tests and the demo.
#
#   tools/kube-node.sh build|start|stop [--wipe]|status|env
#   tools/kube-node.sh load-image IMAGE|TAR...   (a podman image, or a docker-archive/OCI tar)
#   tools/kube-node.sh expose PORT...|unexpose PORT...   (host services to the pods, see below)
#
# The node lives in a network namespace of its own, so that nothing it does touches the machine's
# own addresses: a veth pair links the host (HOST_ADDR 10.250.0.1/30) to the node (NODE_ADDR
# 10.250.0.2/30, its InternalIP). containerd and the kubelet run in that namespace (nsenter --net,
# which keeps the host's /sys and its cgroups); the pods are on a CNI bridge there, POD_CIDR
# 10.244.0.0/16, which the host routes via NODE_ADDR (the apiserver proxies to pods that way).
# In the node's namespace 10.0.0.1:443, the "kubernetes" Service that in-cluster clients use, is
# DNATed to HOST_ADDR:<api port>, where a socat forwarder of this script passes it on to the
# apiserver on 127.0.0.1; nothing else listens on HOST_ADDR but the forwarders of `expose`
# (HOST_ADDR:PORT -> 127.0.0.1:PORT), which let pods reach services of the host that listen on
# loopback (slurmrestd, Ray, the simulators). The node has no default route and no kube-proxy:
# other ClusterIPs do not answer.
#
# `build` makes the binaries (tools/kube-control-plane.sh build) and two images, cached as
# docker-archive tars in ${XDG_CACHE_HOME:-~/.cache}/bridge/images: the pod sandbox
# (registry.k8s.io/pause:3.10.1, tools/kube/pause/pause.go compiled here: nothing can be pulled)
# and localhost/bridge/busybox:latest (Debian's busybox-static with every applet; pods name it with
# imagePullPolicy: Never or IfNotPresent). `start` installs the Debian packages it needs, needs the
# control plane running (`tools/kube-control-plane.sh start`), and is quick when the node runs.
# `stop` removes every container and sandbox, unmounts what they mounted, deletes the network
# namespace and puts back the kernel settings the kubelet changed (vm.overcommit_memory,
# vm.panic_on_oom, kernel.panic, kernel.panic_on_oops); the pods stay in the API and start again
# with the node, as after a reboot.
# `stop --wipe` also deletes the node's dir and its Node object.
#
# The run dir is ${BRIDGE_RUN:-<repo>/.run}/kube/node: containerd's config, root, state and socket,
# the kubelet's config, root dir and pod logs, the CNI config and IPAM state, log/, pids/, and env
# (mode 0600): the control plane's env plus KUBE_NODE_NAME, KUBE_NODE_ADDR, KUBE_NODE_HOST_ADDR,
# KUBE_NODE_NETNS, KUBE_POD_CIDR, CONTAINERD_ADDRESS, KUBE_BUSYBOX_IMAGE, KUBE_PAUSE_IMAGE.
# Settings (read by `start`, remembered for the others): BRIDGE_KUBE_NODE_NAME (bridge-node, also
# the network namespace and the host-side veth), BRIDGE_KUBE_NODE_HOST_ADDR (10.250.0.1),
# BRIDGE_KUBE_NODE_ADDR (10.250.0.2), BRIDGE_KUBE_POD_CIDR (10.244.0.0/16); BRIDGE_KUBE_TIMEOUT
# (seconds to wait for each daemon, 90). One node per machine: the namespace, the addresses and
# the pod cgroups are global, so the run dir that starts the node claims it
# (/run/bridge-kube-node.NAME.owner) and a node of another run dir is neither started over nor
# torn down while it runs; a claim whose node has no live process (a machine image taken while a
# node ran keeps /run's files) is taken over, and a namespace file that no longer holds a
# namespace is made again.
#
# Facts this script relies on are in docs real-services.md section 7. Every process it starts is
# recorded as "PID STARTTIME"; it never kills by name.
set -euo pipefail
# The header lines that `usage` prints.
USAGE_LINES=2,7

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KUBE_RUN=${BRIDGE_RUN:-$REPO/.run}/kube
RUN=$KUBE_RUN/node
PKI=$KUBE_RUN/pki
PID_DIR=$RUN/pids
TIMEOUT=${BRIDGE_KUBE_TIMEOUT:-90}
IMAGE_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/bridge/images
PAUSE_IMAGE=registry.k8s.io/pause:3.10.1
BUSYBOX_IMAGE=localhost/bridge/busybox:latest
# The daemons in the order they start; stopped in the reverse one.
DAEMONS=(containerd kubelet)
PACKAGES=(containerd runc containernetworking-plugins podman busybox-static iptables socat iproute2 curl)

die() { echo "kube-node: $*" >&2; exit 1; }
log() { echo "kube-node: $*" >&2; }
PROCS_LOG_PREFIX="kube-node: "
# shellcheck source=tools/lib/procs.sh
source "$REPO/tools/lib/procs.sh"
# shellcheck source=tools/lib/kube.sh
source "$REPO/tools/lib/kube.sh"
# shellcheck source=tools/lib/host-packages.sh
source "$REPO/tools/lib/host-packages.sh"

SETTINGS=$RUN/settings
NODE_NAME=${BRIDGE_KUBE_NODE_NAME:-bridge-node}
HOST_ADDR=${BRIDGE_KUBE_NODE_HOST_ADDR:-10.250.0.1}
NODE_ADDR=${BRIDGE_KUBE_NODE_ADDR:-10.250.0.2}
POD_CIDR=${BRIDGE_KUBE_POD_CIDR:-10.244.0.0/16}
if [[ ${1:-} != start && -f $SETTINGS ]]; then
  # shellcheck source=/dev/null
  source "$SETTINGS"
fi
NETNS=$NODE_NAME
VETH=$NODE_NAME
SOCK=$RUN/containerd/containerd.sock
# Which run dir owns the network namespace: the namespace and its addresses are machine-wide, and a
# node started from another checkout (another BRIDGE_RUN) must not be torn down from this one.
owner_file() { echo "/run/bridge-kube-node.$NETNS.owner"; }
# The "kubernetes" Service (first address of the apiserver's --service-cluster-ip-range).
SERVICE_RANGE=10.0.0.0/24
KUBERNETES_SERVICE=10.0.0.1

# In the node's network namespace. Not `ip netns exec`: it remounts /sys, which hides the cgroup
# hierarchy the kubelet and runc work in.
in_node() { nsenter --net="/run/netns/$NETNS" "$@"; }
# The namespace file holds a namespace (is its bind mount). A file that outlived its mount, as in a
# machine image taken while a node ran (/run is on disk there), makes `ip netns add` fail with
# "File exists" and every `nsenter --net` with "Invalid argument".
netns_alive() { nsenter --net="/run/netns/$NETNS" true 2>/dev/null; }
ctr_node() { ctr --address "$SOCK" --namespace k8s.io "$@"; }

# ---------------------------------------------------------------------------------------------
# The control plane this node joins
# ---------------------------------------------------------------------------------------------
control_plane_env() {
  local env=$KUBE_RUN/env
  [[ -f $env ]] || die "no control plane env ($env); run: tools/kube-control-plane.sh start"
  KUBE_API=$(sed -n 's/^KUBE_API=//p' "$env")
  KUBECTL=$(sed -n 's/^KUBECTL=//p' "$env")
  API_PORT=${KUBE_API##*:}
  [[ -n $KUBECTL && -x $KUBECTL ]] || die "no kubectl in $env; run: tools/kube-control-plane.sh start"
}
kubectl_admin() { "$KUBECTL" --kubeconfig "$KUBE_RUN/admin.kubeconfig" --request-timeout=10s "$@"; }

# ---------------------------------------------------------------------------------------------
# Images: built once into docker-archive tars, keyed by what goes into them
# ---------------------------------------------------------------------------------------------
pause_tar() {
  echo "$IMAGE_CACHE/pause-$({ go version; cat "$REPO/tools/kube/pause/pause.go"; } | sha256sum | cut -c1-16).tar"
}
busybox_tar() {
  echo "$IMAGE_CACHE/busybox-$(dpkg-query -W -f='${Version}' busybox-static | sha256sum | cut -c1-16).tar"
}

# import_rootfs DIR NAME TAR CHANGE...: `podman import` the tree DIR as the image NAME and save it
# as the docker-archive TAR (what `ctr images import` reads); atomic, podman's copy removed again.
import_rootfs() {
  local dir=$1 name=$2 tar=$3; shift 3
  local changes=() c
  for c in "$@"; do changes+=(--change "$c"); done
  tar -C "$dir" -cf "$dir.tar" . &&
  podman import -q "${changes[@]}" "$dir.tar" "$name" >/dev/null &&
  podman save -q --format docker-archive -o "$tar.tmp" "$name" &&
  podman rmi -f "$name" >/dev/null &&
  mv -f "$tar.tmp" "$tar"
}

build_images() {
  local pause busybox tmp t0=$SECONDS
  pause=$(pause_tar)
  busybox=$(busybox_tar)
  [[ -f $pause && -f $busybox ]] && return 0
  mkdir -p "$IMAGE_CACHE"
  exec 7>"$IMAGE_CACHE/.build.lock"
  flock 7
  tmp=$(mktemp -d "$IMAGE_CACHE/.build.XXXXXX")
  # shellcheck disable=SC2064
  trap "rm -rf '$tmp'" EXIT
  if [[ ! -f $pause ]]; then
    log "building the pod sandbox image $PAUSE_IMAGE"
    mkdir -p "$tmp/pause"
    (cd "$tmp" && CGO_ENABLED=0 nice -n 10 go build -trimpath -buildvcs=false -ldflags "-s -w" \
       -o "$tmp/pause/pause" "$REPO/tools/kube/pause/pause.go") || die "building pause.go failed"
    import_rootfs "$tmp/pause" "$PAUSE_IMAGE" "$pause" 'ENTRYPOINT ["/pause"]' 'USER 65535:65535' ||
      die "making the image $PAUSE_IMAGE with podman failed"
  fi
  if [[ ! -f $busybox ]]; then
    log "building the test image $BUSYBOX_IMAGE from busybox-static"
    local r=$tmp/busybox applet
    mkdir -p "$r/bin" "$r/etc" "$r/tmp" "$r/root" "$r/home"
    chmod 1777 "$r/tmp"
    cp /bin/busybox "$r/bin/busybox"
    for applet in $(/bin/busybox --list); do
      [[ -e $r/bin/$applet ]] || ln -s busybox "$r/bin/$applet"
    done
    printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'nobody:x:65534:65534:nobody:/home:/bin/sh' >"$r/etc/passwd"
    printf '%s\n' 'root:x:0:' 'nogroup:x:65534:' >"$r/etc/group"
    import_rootfs "$r" "$BUSYBOX_IMAGE" "$busybox" 'CMD ["/bin/sh"]' 'ENV PATH=/bin' ||
      die "making the image $BUSYBOX_IMAGE with podman failed"
  fi
  rm -rf "$tmp"
  trap - EXIT
  exec 7>&-
  log "images built in $((SECONDS - t0))s ($IMAGE_CACHE)"
}

# Import unless containerd has the image already.
load_tar() {
  local tar=$1 name=${2:-}
  if [[ -n $name ]] && ctr_node images ls -q | grep -qxF "$name"; then return 0; fi
  ctr_node images import "$tar" >/dev/null || die "ctr images import $tar failed"
}

# load-image IMAGE|TAR...: a tar file is imported as it is; anything else is a podman image,
# saved as a docker-archive first.
load_image() {
  (($#)) || die "load-image needs an image or a tar file"
  recorded_alive containerd || die "the node is not running; run: $0 start"
  local a tmp
  for a in "$@"; do
    if [[ -f $a ]]; then
      load_tar "$a"
    else
      tmp=$(mktemp "$RUN/.image.XXXXXX")
      podman save -q --format docker-archive -o "$tmp" "$a" || { rm -f "$tmp"; die "podman save $a failed"; }
      load_tar "$tmp"
      rm -f "$tmp"
    fi
    log "loaded $a"
  done
}

build() {
  "$REPO/tools/kube-control-plane.sh" build
  apt_install_host "${PACKAGES[@]}"
  build_images
}

# ---------------------------------------------------------------------------------------------
# Network: the namespace, the veth pair, the routes, the DNAT of the kubernetes Service
# ---------------------------------------------------------------------------------------------
ensure_rule() { in_node iptables -w -t nat -C "$@" 2>/dev/null || in_node iptables -w -t nat -A "$@"; }

# node_alive RUN_DIR: the node of that run dir runs, starts or stops: a process it recorded
# (containerd, kubelet, a forwarder) is alive, or a start or stop holds its lock.
node_alive() {
  local f
  [[ -e $1/.lock ]] && ! flock -n "$1/.lock" true && return 0
  for f in "$1"/pids/*.pid; do
    [[ -e $f ]] || continue
    f=${f##*/}
    PID_DIR=$1/pids recorded_alive "${f%.pid}" && return 0
  done
  return 1
}

# Ours: claimed by this run dir, by none, or by a node that is gone: its run dir removed, or none
# of its processes alive (the claim outlives them in a machine image taken while the node ran).
network_is_ours() {
  local owner
  owner=$(cat "$(owner_file)" 2>/dev/null) || return 0
  [[ $owner == "$RUN" ]] || ! node_alive "$owner"
}

check_network_is_ours() {
  local owner
  owner=$(cat "$(owner_file)" 2>/dev/null) || return 0
  if network_is_ours; then
    [[ $owner == "$RUN" ]] || log "taking over the network namespace $NETNS from $owner (no process of its node is alive)"
    return 0
  fi
  die "the network namespace $NETNS belongs to the node of $owner; stop it there first" \
    "(BRIDGE_RUN=${owner%/kube/node} tools/kube-node.sh stop): one node runs on a machine"
}

ensure_network() {
  check_network_is_ours
  echo "$RUN" >"$(owner_file)"
  if [[ -e /run/netns/$NETNS ]] && ! netns_alive; then
    log "/run/netns/$NETNS holds no namespace (left from a node that did not stop): making it again"
    ip netns del "$NETNS"
    # A veth whose peer was in the lost namespace, if one is left, is no link to the new one.
    ip link del "$VETH" 2>/dev/null || true
  fi
  [[ -e /run/netns/$NETNS ]] || ip netns add "$NETNS"
  if ! ip link show "$VETH" >/dev/null 2>&1; then
    ip link add "$VETH" type veth peer name eth0 netns "$NETNS"
  fi
  ip addr replace "$HOST_ADDR/30" dev "$VETH"
  ip link set "$VETH" up
  in_node ip link set lo up
  in_node ip addr replace "$NODE_ADDR/30" dev eth0
  in_node ip link set eth0 up
  # Only the Service range leaves the node (for the DNAT below): no default route, so a pod
  # cannot reach anything but the node, HOST_ADDR and the Service address.
  in_node ip route replace "$SERVICE_RANGE" via "$HOST_ADDR"
  in_node sysctl -qw net.ipv4.ip_forward=1
  local rule=(-d "$KUBERNETES_SERVICE/32" -p tcp --dport 443 -j DNAT --to-destination "$HOST_ADDR:$API_PORT")
  ensure_rule PREROUTING "${rule[@]}"     # from the pods
  ensure_rule OUTPUT "${rule[@]}"         # from the kubelet
  ip route replace "$POD_CIDR" via "$NODE_ADDR" dev "$VETH"
}

remove_network() {
  ip route del "$POD_CIDR" via "$NODE_ADDR" 2>/dev/null || true
  ip link del "$VETH" 2>/dev/null || true
  if [[ -e /run/netns/$NETNS ]]; then ip netns del "$NETNS" || log "could not delete netns $NETNS"; fi
  rm -f "$(owner_file)"
}

# ---------------------------------------------------------------------------------------------
# Forwarders HOST_ADDR:PORT -> 127.0.0.1:PORT (socat), recorded as forward-PORT
# ---------------------------------------------------------------------------------------------
forward() {
  local port=$1
  if ! [[ $port =~ ^[0-9]+$ ]] || ((port < 1 || port > 65535)); then die "not a port: '$port'"; fi
  recorded_alive "forward-$port" && return 0
  launch "forward-$port" socat "TCP-LISTEN:$port,bind=$HOST_ADDR,reuseaddr,fork" "TCP:127.0.0.1:$port"
  wait_for "the forwarder $HOST_ADDR:$port" "forward-$port" bash -c "exec 3<>/dev/tcp/$HOST_ADDR/$port"
}

forwarded_ports() {
  local f
  for f in "$PID_DIR"/forward-*.pid; do
    [[ -e $f ]] || continue
    f=${f##*/forward-}; echo "${f%.pid}"
  done
}

unforward() {
  local port=$1
  [[ -f $PID_DIR/forward-$port.pid ]] || return 0
  recorded_alive "forward-$port" && terminate 5 "$(recorded_pid "forward-$port")"
  rm -f "$PID_DIR/forward-$port.pid"
}

expose() {
  (($#)) || die "expose needs at least one port"
  if ! netns_alive || ! ip link show "$VETH" >/dev/null 2>&1; then
    die "the node is not running; run: $0 start"
  fi
  local p
  for p in "$@"; do forward "$p" || die "could not forward $HOST_ADDR:$p"; done
  log "pods reach 127.0.0.1:{$(IFS=,; echo "$*")} of the host at $HOST_ADDR"
}

# ---------------------------------------------------------------------------------------------
# Configuration files
# ---------------------------------------------------------------------------------------------
write_configs() {
  mkdir -p "$RUN/containerd" "$RUN/cni/net.d" "$RUN/kubelet/root" "$RUN/kubelet/pki" "$RUN/pod-logs"
  cat >"$RUN/containerd/config.toml" <<EOF
# Written by tools/kube-node.sh: containerd of the node $NODE_NAME, apart from any system one.
version = 2
root = "$RUN/containerd/root"
state = "$RUN/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]

[grpc]
  address = "$SOCK"

# Managed binaries (none here), /opt/containerd by default.
[plugins."io.containerd.internal.v1.opt"]
  path = "$RUN/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Without it every sandbox fails here ("can't get final child's PID from pipe: EOF"): the
  # process lacks CAP_SYS_RESOURCE, so runc may not lower oom_score_adj below its own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$RUN/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$RUN/containerd/runc"
EOF
  # containerd adds the loopback interface itself (/usr/lib/cni/loopback).
  cat >"$RUN/cni/net.d/10-$NODE_NAME.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$NODE_NAME",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {
        "type": "host-local", "dataDir": "$RUN/cni/ipam",
        "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  # The apiserver's serving certificate names 10.0.0.1, which the node DNATs to it.
  write_kubeconfig "$RUN/kubelet/kubeconfig" "https://$KUBERNETES_SERVICE:443" "$RUN/kubelet/pki" "kubelet"
  # Image GC and eviction loose: the kubelet cannot read the filesystem stats of this VM's disk.
  # resolvConf empty: the host's resolver is out of the pods' reach, so they get none.
  cat >"$RUN/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failSwapOn: false
address: $NODE_ADDR
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
containerRuntimeEndpoint: unix://$SOCK
podLogsDir: $RUN/pod-logs
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $PKI/ca.crt
authorization:
  mode: Webhook
clusterDomain: cluster.local
resolvConf: ""
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 10Mi
serializeImagePulls: false
EOF
}

ensure_kubelet_identity() {
  local pki=$RUN/kubelet/pki
  mkdir -p "$pki"
  chmod 0700 "$pki"
  cp -f "$PKI/ca.crt" "$pki/ca.crt"
  # The Node authorizer lets system:node:NAME read and write what concerns the node NAME.
  if [[ ! -f $pki/kubelet.crt ]] || ! openssl x509 -noout -subject -in "$pki/kubelet.crt" |
       grep -q "CN *= *system:node:$NODE_NAME\b"; then
    rm -f "$pki/kubelet.crt" "$pki/kubelet.key"
    (umask 077; cp "$PKI/ca.key" "$pki/ca.key")
    ensure_client_cert "$pki" kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" ||
      { rm -f "$pki/ca.key"; die "making the kubelet's certificate failed"; }
    rm -f "$pki/ca.key"
  fi
}

# ---------------------------------------------------------------------------------------------
# Kernel settings the kubelet changes for the whole machine (its setupKernelTunables: without
# protectKernelDefaults it sets them, with it it refuses to start unless they are set already);
# saved before its first start and put back by stop.
# ---------------------------------------------------------------------------------------------
KERNEL_TUNABLES=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops)

save_kernel_tunables() {
  [[ -f $RUN/kernel-tunables ]] && return 0
  local k
  for k in "${KERNEL_TUNABLES[@]}"; do echo "$k=$(sysctl -n "$k")"; done >"$RUN/kernel-tunables.tmp"
  mv -f "$RUN/kernel-tunables.tmp" "$RUN/kernel-tunables"
}

restore_kernel_tunables() {
  [[ -f $RUN/kernel-tunables ]] || return 0
  local k v
  while IFS='=' read -r k v; do sysctl -qw "$k=$v" || log "could not set $k back to $v"; done <"$RUN/kernel-tunables"
  rm -f "$RUN/kernel-tunables"
}

# ---------------------------------------------------------------------------------------------
# start / stop / status
# ---------------------------------------------------------------------------------------------
containerd_ok() { ctr --address "$SOCK" version; }
kubelet_ok() { [[ "$(in_node curl -sf -m 3 http://127.0.0.1:10248/healthz)" == ok ]]; }
node_ready() {
  [[ "$(kubectl_admin get node "$NODE_NAME" \
        -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]]
}
all_alive() {
  local d
  for d in "${DAEMONS[@]}"; do recorded_alive "$d" || return 1; done
  recorded_alive "forward-$API_PORT" && netns_alive
}

write_env() {
  { cat "$KUBE_RUN/env"
    cat <<EOF
KUBE_NODE_NAME=$NODE_NAME
KUBE_NODE_ADDR=$NODE_ADDR
KUBE_NODE_HOST_ADDR=$HOST_ADDR
KUBE_NODE_NETNS=$NETNS
KUBE_POD_CIDR=$POD_CIDR
CONTAINERD_ADDRESS=$SOCK
KUBE_PAUSE_IMAGE=$PAUSE_IMAGE
KUBE_BUSYBOX_IMAGE=$BUSYBOX_IMAGE
EOF
  } | write_private "$RUN/env"
}

start_daemons() {
  local bin
  bin=$("$REPO/tools/kube-control-plane.sh" bindir)
  launch containerd nsenter --net="/run/netns/$NETNS" containerd --config "$RUN/containerd/config.toml"
  wait_for "containerd" containerd containerd_ok || return 1
  load_tar "$(pause_tar)" "$PAUSE_IMAGE"
  load_tar "$(busybox_tar)" "$BUSYBOX_IMAGE"
  save_kernel_tunables
  # --node-ip: the InternalIP the apiserver reaches the kubelet at (logs, exec, port-forward);
  # without it the kubelet would pick an address of its own.
  launch kubelet nsenter --net="/run/netns/$NETNS" "$bin/kubelet" \
    --config="$RUN/kubelet/config.yaml" \
    --kubeconfig="$RUN/kubelet/kubeconfig" \
    --root-dir="$RUN/kubelet/root" \
    --cert-dir="$RUN/kubelet/pki" \
    --hostname-override="$NODE_NAME" \
    --node-ip="$NODE_ADDR"
  wait_for "the kubelet (/healthz)" kubelet kubelet_ok || return 1
  wait_for "the node $NODE_NAME (Ready)" kubelet node_ready
}

start() {
  mkdir -p "$RUN"
  exec 9>"$RUN/.lock"
  flock 9
  control_plane_env
  check_network_is_ours
  local t0=$SECONDS
  if all_alive && node_ready; then
    write_env
    log "node $NODE_NAME already running (env refreshed: $RUN/env)"
    exec 9>&-
    return 0
  fi
  stop_previous          # leftovers of a half-started or crashed node
  build
  local t1=$SECONDS
  printf '%s\n' "NODE_NAME=$NODE_NAME" "HOST_ADDR=$HOST_ADDR" "NODE_ADDR=$NODE_ADDR" \
    "POD_CIDR=$POD_CIDR" >"$SETTINGS"
  ensure_kubelet_identity
  write_configs
  ensure_network
  { forward "$API_PORT" && start_daemons; } || { stop_node; exit 1; }
  write_env
  exec 9>&-
  log "node $NODE_NAME Ready at $NODE_ADDR in $((SECONDS - t1))s (total $((SECONDS - t0))s); env: $RUN/env"
}

# Every container and sandbox of the node's containerd: tasks killed and deleted (their shims
# exit), containers deleted, and what only the CRI teardown would remove: the network namespaces
# the sandboxes had, unmounted and deleted, and libcni's cached results of their networks (in
# /var/lib/cni/results whatever the CNI config says: containerd 1.6 has no setting for it).
remove_containers() {
  containerd_ok >/dev/null 2>&1 || return 0
  local id netns=() ns
  for id in $(ctr_node containers ls -q); do
    ns=$(ctr_node containers info "$id" 2>/dev/null | python3 -c '
import json, sys
spec = json.load(sys.stdin).get("Spec") or {}
for n in spec.get("linux", {}).get("namespaces", []):
    if n.get("type") == "network" and n.get("path"):
        print(n["path"])' 2>/dev/null) || true
    [[ -n $ns ]] && netns+=("$ns")
    ctr_node tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
    rm -f /var/lib/cni/results/*-"$id"-*
  done
  for id in $(ctr_node tasks ls -q); do ctr_node tasks rm -f "$id" >/dev/null 2>&1 || true; done
  for id in $(ctr_node containers ls -q); do ctr_node containers rm "$id" >/dev/null 2>&1 || true; done
  for ns in "${netns[@]}"; do
    [[ $ns == /var/run/netns/* || $ns == /run/netns/* ]] || continue
    umount "$ns" 2>/dev/null || true
    rm -f "$ns"
  done
}

# Mounts under the run dir (volumes of pods, container rootfs, sandbox /dev/shm), deepest first.
unmount_all() {
  local m
  awk -v p="$RUN/" 'index($2, p) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" || log "could not unmount $m"
  done
}

# The pod cgroups the kubelet made (cgroupfs driver): empty once the containers are gone.
remove_cgroups() {
  local d
  for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [[ -d $d ]] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  return 0
}

stop_node() {
  local p ours=""
  network_is_ours && ours=1
  recorded_alive kubelet && terminate 20 "$(recorded_pid kubelet)"
  rm -f "$PID_DIR/kubelet.pid"
  restore_kernel_tunables
  if recorded_alive containerd; then remove_containers; terminate 20 "$(recorded_pid containerd)"; fi
  rm -f "$PID_DIR/containerd.pid"
  for p in $(forwarded_ports); do unforward "$p"; done
  unmount_all
  # The pod cgroups and the network belong to whichever node runs: only its own run dir removes them.
  if [[ -n $ours ]]; then
    remove_cgroups
    remove_network
  fi
  # Every sandbox is gone, so are the addresses host-local handed out.
  rm -rf "$RUN/cni/ipam"
  # The shims' sockets are under /run/containerd/s whatever containerd's state dir; empty now.
  rmdir /run/containerd/s /run/containerd 2>/dev/null || true
}

# stop_node with the settings the node was started with (start reads the environment's).
stop_previous() {
  if [[ -f $SETTINGS ]]; then
    (
      # shellcheck source=/dev/null
      source "$SETTINGS"
      NETNS=$NODE_NAME VETH=$NODE_NAME
      stop_node
    )
  else
    stop_node
  fi
}

stop() {
  local wipe=${1:-}
  [[ -z $wipe || $wipe == --wipe ]] || die "unknown option '$wipe' (stop takes only --wipe)"
  [[ -d $RUN ]] || return 0
  exec 9>"$RUN/.lock"
  flock 9
  stop_node
  if [[ -n $wipe ]]; then
    if [[ -f $KUBE_RUN/env ]]; then
      control_plane_env
      kubectl_admin delete node "$NODE_NAME" --ignore-not-found >/dev/null 2>&1 ||
        log "could not delete the Node $NODE_NAME (is the control plane running?)"
    fi
    find "$RUN" -mindepth 1 -maxdepth 1 ! -name .lock -exec rm -rf {} +
    log "stopped; $RUN wiped"
  else
    log "stopped (containers and sandboxes removed; images and pods kept)"
  fi
  exec 9>&-
}

status() {
  local n
  n=$(alive_count)
  if ((n == ${#DAEMONS[@]})) && [[ -f $KUBE_RUN/env ]] && control_plane_env && node_ready; then
    echo "node $NODE_NAME running $NODE_ADDR (host side $HOST_ADDR; forwarded: $(forwarded_ports | xargs))"
  elif ((n > 0)); then
    echo "node $NODE_NAME degraded ($n of ${#DAEMONS[@]} daemons alive or not Ready; start restarts it)"
  else
    echo "node $NODE_NAME stopped"
  fi
}

more_verbs() {
  local verb=$1 p
  shift
  case $verb in
    load-image) load_image "$@" ;;
    expose)     control_plane_env; expose "$@" ;;
    unexpose)   (($#)) || usage; for p in "$@"; do unforward "$p"; done ;;
    *) usage ;;
  esac
}

kube_main "$@"
