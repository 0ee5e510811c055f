#!/usr/bin/env bash
# k8s-in-slurm: one ephemeral single-node Kubernetes cluster for the life of one Slurm job.
#
#   (as the batch script)     k8s-in-slurm.sh            brings the cluster up, publishes it, waits
#   k8s-in-slurm.sh teardown JOB_DIR                     tears down what JOB_DIR recorded (idempotent)
#   k8s-in-slurm.sh reap JOB_DIR PID STARTTIME           waits for PID to end, then tears down
#
# Self-contained: the compute node needs this file, the binaries named below and root (see the
# role's README for what a site must allow), nothing of the Bridge repository. Settings come from
# the job's environment (the role bridge.hpc.k8s_in_slurm sets them):
#   KSI_NAME             cluster name, published as K8S_CLUSTER_NAME
#   KSI_IDENTITY         the job's Bridge identity, written to JOB_DIR/identity once the dir is its own
#   KSI_DIR              parent dir; the job's dir is KSI_DIR/ksi-<job id> (env, kubeconfig, logs,
#                        pki, state, containerd and kubelet dirs)
#   KSI_BIN_DIR          etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl
#   KSI_CONTAINERD       containerd binary (containerd); KSI_CTR (ctr); KSI_RUNC (runc)
#   KSI_CNI_BIN_DIR      CNI plugins: bridge, host-local, loopback, portmap (/usr/lib/cni)
#   KSI_IMAGES           image tars (docker-archive or OCI) to import, one per line
#   KSI_PAUSE_IMAGE      the sandbox image's name, among KSI_IMAGES (registry.k8s.io/pause:3.10.1)
#   KSI_POD_CIDR         pod addresses inside the job's network namespace (10.246.0.0/16)
#   KSI_MANIFESTS_B64    base64 of a multi-document YAML applied once the cluster is Ready
#   KSI_MANIFEST_TIMEOUT seconds to wait for the applied objects (300)
#   KSI_READY_TIMEOUT    seconds each daemon may take to come up (120)
#   KSI_COMMAND          run (bash -c) once Ready with K8S_CLUSTER_* and KUBECONFIG set; the job
#                        ends when it ends, with its exit code
#   KSI_LIFETIME_SECONDS seconds after the start at which the cluster tears itself down (the time
#                        limit minus a grace period): slurmrestd v0.0.38 cannot ask for a warning
#                        signal to the batch shell, so the job keeps its own clock as well
#
# Every process started is recorded as "PID STARTTIME" in JOB_DIR/pids; teardown only touches what
# the job recorded or what lies under JOB_DIR (pids, mounts, its network namespace and veth, its
# cgroups /ksi-<job id>, its pod network namespaces). Nothing is killed by name.
set -uo pipefail

log() { echo "$(date -u +%H:%M:%S.%3N) $*" >>"$JOB_DIR/log/ksi.log"; }
die() { log "FATAL: $*"; echo "k8s-in-slurm: $*" >&2; echo "failed: $*" >"$JOB_DIR/state"; exit 1; }

# ---------------------------------------------------------------------------------------------
# Names and addresses: all derived from the job id, written to JOB_DIR/settings for teardown
# ---------------------------------------------------------------------------------------------
derive_names() {
  local job=$1 slot=$(($1 % 16384))
  NETNS=ksi-$job
  VETH=ksi-$job
  CGROUP_ROOT=/ksi-$job
  NODE_NAME=ksi-$job
  # One /30 per job in 10.251.0.0/16, away from tools/kube-node.sh's 10.250.0.0/30; two jobs share
  # a /30 only if their ids differ by a multiple of 16384 and they run on the same node at once,
  # which the start refuses.
  HOST_ADDR=10.251.$((slot / 64)).$((slot % 64 * 4 + 1))
  NODE_ADDR=10.251.$((slot / 64)).$((slot % 64 * 4 + 2))
}

starttime() {
  local s f
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  read -ra f <<<"${s##*) }"
  [[ ${f[0]} != Z ]] || return 1
  echo "${f[19]}"
}
alive() { [[ -n ${2:-} && "$(starttime "$1" 2>/dev/null)" == "$2" ]]; }
recorded() { local pid st; read -r pid st <"$JOB_DIR/pids/$1.pid" 2>/dev/null && alive "$pid" "$st"; }

# Detached from the job: a new session whose parent (this subshell) exits at once, so
# proctrack/linuxproc, which kills the batch script's descendants, never signals it. Only teardown
# stops these, in order.
launch() {
  local name=$1; shift
  (
    setsid env --chdir="$JOB_DIR" "$@" </dev/null >>"$JOB_DIR/log/$name.log" 2>&1 &
    pid=$!
    echo "$pid $(starttime "$pid")" >"$JOB_DIR/pids/$name.pid"
  )
  log "started $name ($(cat "$JOB_DIR/pids/$name.pid"))"
}

wait_for() {
  local what=$1 name=$2 deadline=$((SECONDS + ${KSI_READY_TIMEOUT:-120})); shift 2
  until "$@" >/dev/null 2>&1; do
    if [[ $name != - ]] && ! recorded "$name"; then
      tail -n 20 "$JOB_DIR/log/$name.log" >>"$JOB_DIR/log/ksi.log" 2>/dev/null
      die "$what: $name exited (log: $JOB_DIR/log/$name.log)"
    fi
    ((SECONDS < deadline)) || die "$what: not within ${KSI_READY_TIMEOUT:-120}s"
    sleep 0.3
  done
  log "$what: ok after ${SECONDS}s"
}

port_in_use() { [[ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]]; }
# A port free on 127.0.0.1 now, below the ephemeral range so outgoing connections do not take it.
free_port() {
  local p i
  for ((i = 0; i < 200; i++)); do
    p=$((20000 + RANDOM % 12000))
    grep -qx "$p" "$JOB_DIR/ports" 2>/dev/null && continue
    port_in_use "$p" && continue
    echo "$p" >>"$JOB_DIR/ports"
    echo "$p"
    return 0
  done
  die "no free port on 127.0.0.1 in 20000-31999"
}

# ---------------------------------------------------------------------------------------------
# Checks before anything is started
# ---------------------------------------------------------------------------------------------
# The kubelet's kernel settings (its setupKernelTunables). With protectKernelDefaults it only
# checks them: they are machine-wide, and this job leaves the host's settings as they are.
KERNEL_TUNABLES="vm.overcommit_memory=1 vm.panic_on_oom=0 kernel.panic=10 kernel.panic_on_oops=1 kernel.keys.root_maxkeys=1000000 kernel.keys.root_maxbytes=25000000"

preflight() {
  local b missing=() wrong=() kv k v
  [[ $(id -u) == 0 ]] || die "needs root (the kubelet and runc mount, create network namespaces and cgroups); runs as $(id -un)"
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
    [[ -x $BIN/$b ]] || missing+=("$BIN/$b")
  done
  for b in "$CONTAINERD" "$CTR" "$RUNC" nsenter ip iptables socat openssl ss base64; do
    command -v "$b" >/dev/null || missing+=("$b")
  done
  for b in bridge host-local loopback portmap; do [[ -x $CNI_BIN/$b ]] || missing+=("$CNI_BIN/$b"); done
  ((${#missing[@]} == 0)) || die "missing binaries: ${missing[*]}"
  for kv in $KERNEL_TUNABLES; do
    k=${kv%%=*}; v=${kv#*=}
    [[ "$(sysctl -n "$k" 2>/dev/null)" == "$v" ]] || wrong+=("$k=$(sysctl -n "$k" 2>/dev/null) (kubelet needs $v)")
  done
  ((${#wrong[@]} == 0)) || die "kernel settings differ from what a kubelet needs, and this job does not change the host's: ${wrong[*]}"
  [[ ! -e /run/netns/$NETNS ]] || die "network namespace $NETNS exists already"
  ! ip -o addr show | grep -qw "inet $HOST_ADDR/30" || die "$HOST_ADDR is in use on this node (another job's veth?)"
  ((${#JOB_DIR} <= 70)) || die "job dir '$JOB_DIR' is too long for the unix sockets under it (at most 70 characters)"
}

# ---------------------------------------------------------------------------------------------
# PKI (openssl): a CA of the job's own, the apiserver's serving certificate, client certificates
# ---------------------------------------------------------------------------------------------
sign() {
  local name=$1 subj=$2 ext=$3
  openssl req -new -nodes -newkey rsa:2048 -keyout "$name.key" -subj "$subj" -out "$name.csr" 2>/dev/null &&
  printf '%s\n' "basicConstraints=critical,CA:FALSE" "$ext" >"$name.ext" &&
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -sha256 \
    -extfile "$name.ext" -out "$name.crt" 2>/dev/null &&
  rm -f "$name.csr" "$name.ext" ca.srl
}
client() { sign "$1" "$2" "$(printf '%s\n' "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=clientAuth")"; }

make_pki() {
  (
    set -e
    umask 077
    mkdir -p "$PKI"
    cd "$PKI"
    openssl req -x509 -new -nodes -newkey rsa:2048 -keyout ca.key -out ca.crt -days 30 -sha256 \
      -subj "/CN=ksi-$JOB_ID-ca" -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
    sign apiserver "/CN=kube-apiserver" "$(printf '%s\n' \
      "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" \
      "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,IP:$HOST_ADDR,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local")"
    client admin "/O=system:masters/CN=ksi-admin"
    client kube-controller-manager "/CN=system:kube-controller-manager"
    client kube-scheduler "/CN=system:kube-scheduler"
    client apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
    client kubelet "/O=system:nodes/CN=system:node:$NODE_NAME"
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key 2>/dev/null
    openssl pkey -in sa.key -pubout -out sa.pub 2>/dev/null
    # The published bearer token: a static token of a system:masters user, readable by root only.
    TOKEN=$(head -c 32 /dev/urandom | base64 -w0 | tr -d '/+=')
    echo "$TOKEN,ksi-admin,ksi-admin,system:masters" >tokens.csv
  ) || die "making the PKI with openssl failed"
}

kubeconfig_certs() {
  local out=$1 server=$2 name=$3
  (umask 077; cat >"$out" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: $CLUSTER
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$name.crt")
    client-key-data: $(base64 -w0 "$PKI/$name.key")
contexts:
- name: $CLUSTER
  context: {cluster: $CLUSTER, user: $name, namespace: default}
current-context: $CLUSTER
EOF
  )
}

# ---------------------------------------------------------------------------------------------
# Network: the job's namespace, its veth pair, the kubernetes Service DNATed to a forwarder
# ---------------------------------------------------------------------------------------------
# nsenter, not `ip netns exec`: that remounts /sys, which hides the cgroups the kubelet works in.
in_netns() { nsenter --net="/run/netns/$NETNS" "$@"; }

make_network() {
  ip netns add "$NETNS" || die "ip netns add $NETNS failed"
  echo "$NETNS" >"$JOB_DIR/netns"
  ip link add "$VETH" type veth peer name eth0 netns "$NETNS" || die "creating the veth pair $VETH failed"
  echo "$VETH" >"$JOB_DIR/veth"
  # Only the Service range leaves the namespace; ip_forward is per namespace (the host's is untouched).
  if ! { ip addr add "$HOST_ADDR/30" dev "$VETH" && ip link set "$VETH" up &&
         in_netns ip link set lo up && in_netns ip addr add "$NODE_ADDR/30" dev eth0 &&
         in_netns ip link set eth0 up && in_netns ip route add 10.0.0.0/24 via "$HOST_ADDR" &&
         in_netns sysctl -qw net.ipv4.ip_forward=1; }; then
    die "configuring the network namespace $NETNS failed"
  fi
  local rule=(-d 10.0.0.1/32 -p tcp --dport 443 -j DNAT --to-destination "$HOST_ADDR:$API_PORT")
  if ! { in_netns iptables -w -t nat -A PREROUTING "${rule[@]}" && in_netns iptables -w -t nat -A OUTPUT "${rule[@]}"; }; then
    die "adding the DNAT of the kubernetes Service in $NETNS failed"
  fi
  log "network: $NETNS, $VETH $HOST_ADDR <-> $NODE_ADDR, pods $POD_CIDR (inside the namespace only)"
}

# ---------------------------------------------------------------------------------------------
# Daemons
# ---------------------------------------------------------------------------------------------
kcurl() { curl -sf -m 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$@"; }
kubectl_admin() { "$BIN/kubectl" --kubeconfig "$JOB_DIR/admin.kubeconfig" --request-timeout=10s "$@"; }
etcd_ok() { curl -sf -m 3 "http://127.0.0.1:$ETCD_PORT/health" | grep -q '"health":"true"'; }
api_ready() { [[ "$(kcurl "$API/readyz")" == ok ]]; }
node_ready() { [[ "$(kubectl_admin get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" == True ]]; }
default_sa() { kubectl_admin -n default get serviceaccount default; }
containerd_ok() { "$CTR" --address "$SOCK" version; }

start_control_plane() {
  mkdir -p "$JOB_DIR/etcd" && chmod 0700 "$JOB_DIR/etcd"
  launch etcd "$BIN/etcd" --name "ksi-$JOB_ID" --data-dir "$JOB_DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "ksi-$JOB_ID=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync=true --log-level=warn
  wait_for "etcd" etcd etcd_ok
  # No endpoint reconciler: the "kubernetes" Endpoints may not hold a loopback address; the node
  # reaches the apiserver through the DNAT of 10.0.0.1:443 to the forwarder.
  launch kube-apiserver "$BIN/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" \
    --cert-dir="$PKI" --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" --token-auth-file="$PKI/tokens.csv" \
    --service-account-issuer="$API" --service-account-key-file="$PKI/sa.pub" \
    --service-account-signing-key-file="$PKI/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 --allow-privileged=true --authorization-mode=Node,RBAC \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP --endpoint-reconciler-type=none --profiling=false
  wait_for "kube-apiserver /readyz" kube-apiserver api_ready
  launch forwarder socat "TCP-LISTEN:$API_PORT,bind=$HOST_ADDR,reuseaddr,fork" "TCP:127.0.0.1:$API_PORT"
  local c
  for c in kube-controller-manager kube-scheduler; do kubeconfig_certs "$JOB_DIR/$c.kubeconfig" "$API" "$c"; done
  launch kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig="$JOB_DIR/kube-controller-manager.kubeconfig" \
    --authentication-kubeconfig="$JOB_DIR/kube-controller-manager.kubeconfig" \
    --authorization-kubeconfig="$JOB_DIR/kube-controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$CM_PORT" --controllers='*' --leader-elect=false \
    --root-ca-file="$PKI/ca.crt" --service-account-private-key-file="$PKI/sa.key" \
    --use-service-account-credentials=true --service-cluster-ip-range=10.0.0.0/24 --profiling=false
  launch kube-scheduler "$BIN/kube-scheduler" \
    --kubeconfig="$JOB_DIR/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig="$JOB_DIR/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig="$JOB_DIR/kube-scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$SCHED_PORT" --leader-elect=false --profiling=false
}

write_node_configs() {
  mkdir -p "$JOB_DIR/containerd" "$JOB_DIR/cni/net.d" "$JOB_DIR/kubelet/root" "$JOB_DIR/kubelet/plugins" "$JOB_DIR/pod-logs"
  cat >"$JOB_DIR/containerd/config.toml" <<EOF
version = 2
root = "$JOB_DIR/containerd/root"
state = "$JOB_DIR/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$JOB_DIR/containerd/ttrpc.sock"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$JOB_DIR/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Without it every sandbox fails where the job lacks CAP_SYS_RESOURCE ("can't get final
  # child's PID from pipe: EOF"): runc may not lower oom_score_adj below its own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN"
    conf_dir = "$JOB_DIR/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$RUNC"
        Root = "$JOB_DIR/containerd/runc"
EOF
  # ipMasq: pods reach the forwarder as the node's address, so the host needs no route to them.
  cat >"$JOB_DIR/cni/net.d/10-ksi.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "ksi-$JOB_ID", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$JOB_DIR/cni/ipam",
            "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF
  kubeconfig_certs "$JOB_DIR/kubelet/kubeconfig" "https://10.0.0.1:443" kubelet
  # cgroupRoot: the job's own pod cgroups, apart from any other kubelet's /kubepods.
  # protectKernelDefaults: check the kernel settings, never change them (preflight did).
  cat >"$JOB_DIR/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: $CGROUP_ROOT
cgroupsPerQOS: true
protectKernelDefaults: true
failSwapOn: false
address: $NODE_ADDR
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
containerRuntimeEndpoint: unix://$SOCK
podLogsDir: $JOB_DIR/pod-logs
volumePluginDir: $JOB_DIR/kubelet/plugins
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
clusterDomain: cluster.local
resolvConf: ""
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 10Mi}
serializeImagePulls: false
EOF
}

# The kubelet's cgroupRoot in every mounted hierarchy: each cgroup v1 controller's, and the cgroup
# v2 one (/sys/fs/cgroup/unified beside v1, or /sys/fs/cgroup alone), where the kubelet also makes
# its pod cgroups. Recorded for the teardown.
make_cgroups() {
  local h
  while read -r h; do
    mkdir -p "$h$CGROUP_ROOT" && echo "$h$CGROUP_ROOT" >>"$JOB_DIR/cgroups"
  done < <(awk '$3 == "cgroup" || $3 == "cgroup2" { print $2 }' /proc/mounts | sort -u)
}

start_node() {
  launch containerd nsenter --net="/run/netns/$NETNS" "$CONTAINERD" --config "$JOB_DIR/containerd/config.toml"
  wait_for "containerd" containerd containerd_ok
  local tar
  while IFS= read -r tar; do
    [[ -n $tar ]] || continue
    "$CTR" --address "$SOCK" -n k8s.io images import "$tar" >>"$JOB_DIR/log/images.log" 2>&1 ||
      die "importing the image tar $tar failed (log: $JOB_DIR/log/images.log)"
  done <<<"${KSI_IMAGES:-}"
  make_cgroups
  launch kubelet nsenter --net="/run/netns/$NETNS" "$BIN/kubelet" \
    --config="$JOB_DIR/kubelet/config.yaml" --kubeconfig="$JOB_DIR/kubelet/kubeconfig" \
    --root-dir="$JOB_DIR/kubelet/root" --cert-dir="$JOB_DIR/kubelet/pki" \
    --hostname-override="$NODE_NAME" --node-ip="$NODE_ADDR"
  wait_for "node $NODE_NAME Ready" kubelet node_ready
  wait_for "the default ServiceAccount" kube-controller-manager default_sa
}

# ---------------------------------------------------------------------------------------------
# Publishing: the env file and the user's kubeconfig (0600)
# ---------------------------------------------------------------------------------------------
publish() {
  local token
  token=$(cut -d, -f1 "$PKI/tokens.csv")
  (umask 077
   printf '%s\n' "K8S_CLUSTER_NAME=$CLUSTER" "K8S_CLUSTER_API=$API" "K8S_CLUSTER_API_TOKEN=$token" \
     "K8S_CLUSTER_PORT=$API_PORT" "KUBECONFIG=$JOB_DIR/kubeconfig" "KSI_CA_FILE=$PKI/ca.crt" "KSI_JOB_ID=$JOB_ID" \
     "KSI_NODE_NAME=$NODE_NAME" >"$JOB_DIR/env.tmp"
   cat >"$JOB_DIR/kubeconfig.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: $CLUSTER
  cluster:
    server: $API
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: ksi-admin
  user:
    token: $token
contexts:
- name: $CLUSTER
  context: {cluster: $CLUSTER, user: ksi-admin, namespace: default}
current-context: $CLUSTER
EOF
  )
  mv -f "$JOB_DIR/kubeconfig.tmp" "$JOB_DIR/kubeconfig"
  mv -f "$JOB_DIR/env.tmp" "$JOB_DIR/env"
  log "published $JOB_DIR/env and $JOB_DIR/kubeconfig"
}

# Each applied object waited for by its kind: Pods until Running or Succeeded, Jobs until
# Complete, workloads until rolled out; anything else is there once applied.
wait_object() {
  local obj=$1 deadline=$2 phase
  case ${obj%%/*} in
    pod)
      while :; do
        phase=$(kubectl_admin get "$obj" -o jsonpath='{.status.phase}' 2>/dev/null)
        [[ $phase == Running || $phase == Succeeded ]] && return 0
        [[ $phase == Failed ]] && { log "$obj failed"; return 1; }
        ((SECONDS < deadline)) || return 1
        sleep 1
      done ;;
    job.batch) kubectl_admin wait --for=condition=Complete --timeout="$((deadline - SECONDS))s" "$obj" ;;
    deployment.apps|statefulset.apps|daemonset.apps)
      kubectl_admin rollout status --timeout="$((deadline - SECONDS))s" "$obj" ;;
    *) return 0 ;;
  esac
}

apply_manifests() {
  [[ -n ${KSI_MANIFESTS_B64:-} ]] || return 0
  base64 -d <<<"$KSI_MANIFESTS_B64" >"$JOB_DIR/manifests.yaml" || die "KSI_MANIFESTS_B64 is not base64"
  local objs obj deadline=$((SECONDS + ${KSI_MANIFEST_TIMEOUT:-300})) failed=()
  objs=$(kubectl_admin apply -f "$JOB_DIR/manifests.yaml" -o name 2>>"$JOB_DIR/log/ksi.log") ||
    die "kubectl apply of the manifests failed (log: $JOB_DIR/log/ksi.log)"
  printf '%s\n' "$objs" >"$JOB_DIR/applied"
  log "applied: $(echo "$objs" | xargs)"
  for obj in $objs; do
    wait_object "$obj" "$deadline" >>"$JOB_DIR/log/ksi.log" 2>&1 || failed+=("$obj")
  done
  ((${#failed[@]} == 0)) || die "applied objects not ready within ${KSI_MANIFEST_TIMEOUT:-300}s: ${failed[*]}"
}

# ---------------------------------------------------------------------------------------------
# Teardown: idempotent; run by the batch script's trap, by the reaper, or by hand
# ---------------------------------------------------------------------------------------------
tlog() { echo "$(date -u +%H:%M:%S.%3N) $*" >>"$JOB_DIR/log/teardown.log"; }

stop_recorded() {
  local name=$1 pid st i
  read -r pid st <"$JOB_DIR/pids/$name.pid" 2>/dev/null || return 0
  if alive "$pid" "$st"; then
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < 100; i++)); do alive "$pid" "$st" || break; sleep 0.1; done
    alive "$pid" "$st" && { kill -KILL "$pid" 2>/dev/null; tlog "SIGKILL to $name ($pid)"; }
    tlog "stopped $name ($pid)"
  fi
}

# Containers: their init pids (with start times) and pod network namespaces are read from the
# state runc keeps under the job's runc root first (ctr's delete removes it), then the tasks are
# killed and deleted through the job's containerd while it runs, and any init still alive killed.
# libcni's cached results live in /var/lib/cni/results whatever the CNI config says (containerd 1.6
# has no setting for it), named after the job's network.
remove_containers() {
  local ctr=("$CTR" --address "$SOCK" -n k8s.io) state pid st ns id inits=()
  for state in "$JOB_DIR"/containerd/runc/*/*/state.json; do
    [[ -f $state ]] || continue
    pid=$(grep -o '"init_process_pid":[0-9]*' "$state" | cut -d: -f2)
    st=$(grep -o '"init_process_start":[0-9]*' "$state" | cut -d: -f2)
    ns=$(grep -o '"type":"NEWNET","path":"[^"]*"' "$state" | sed 's/.*"path":"\(.*\)"/\1/')
    [[ -n $pid ]] && inits+=("$pid $st")
    if [[ $ns == /run/netns/cni-* || $ns == /var/run/netns/cni-* ]]; then echo "$ns" >>"$JOB_DIR/pod-netns"; fi
  done
  if "$CTR" --address "$SOCK" version >/dev/null 2>&1; then
    for id in $("${ctr[@]}" tasks ls -q 2>/dev/null); do "${ctr[@]}" tasks kill -s SIGKILL "$id" >/dev/null 2>&1; done
    for id in $("${ctr[@]}" tasks ls -q 2>/dev/null); do "${ctr[@]}" tasks rm -f "$id" >/dev/null 2>&1; done
    tlog "containerd: tasks killed and removed"
  fi
  for id in "${inits[@]}"; do
    read -r pid st <<<"$id"
    if alive "$pid" "$st"; then kill -KILL "$pid" 2>/dev/null; tlog "SIGKILL to container init $pid"; fi
  done
  rm -f /var/lib/cni/results/"ksi-$JOB_ID"-*
}

# Processes left in the job's cgroups (containers whose state is gone), then those whose command
# line names PATTERN: the shims, which double-fork away from containerd, carry the job's containerd
# address; after the daemons' ordered stop, anything naming the job dir.
kill_leftovers() {
  local pattern=$1 f pid left=()
  while read -r f; do
    [[ -d $f ]] || continue
    while read -r pid; do [[ -n $pid ]] && left+=("$pid"); done < <(find "$f" -name cgroup.procs -exec cat {} + 2>/dev/null)
  done < <(cat "$JOB_DIR/cgroups" 2>/dev/null)
  for f in /proc/[0-9]*; do
    pid=${f#/proc/}
    [[ $pid == "$$" ]] && continue
    { tr '\0' ' ' <"$f/cmdline" | grep -qF -- "$pattern"; } 2>/dev/null || continue
    case "$(readlink "$f/exe" 2>/dev/null)" in
      */bash|*/sh|*/dash) continue ;;   # this teardown, the reaper, the batch script
    esac
    left+=("$pid")
  done
  ((${#left[@]})) || return 0
  tlog "SIGKILL to leftovers: ${left[*]}"
  kill -KILL "${left[@]}" 2>/dev/null
  sleep 0.5
}

unmount_all() {
  local m ns
  awk -v p="$JOB_DIR/" 'index($2, p) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || tlog "could not unmount $m"
    tlog "unmounted $m"
  done
  # /var/run is /run: /proc/mounts names them under /run.
  while read -r ns; do
    [[ -n $ns ]] || continue
    while grep -q " $ns " /proc/mounts; do umount "$ns" 2>/dev/null || umount -l "$ns" || break; done
    if [[ -e $ns ]]; then rm -f "$ns" && tlog "removed pod network namespace $ns"; fi
  done < <(sed 's#^/var/run/#/run/#' "$JOB_DIR/pod-netns" 2>/dev/null | sort -u)
}

remove_network() {
  local veth netns
  veth=$(cat "$JOB_DIR/veth" 2>/dev/null)
  netns=$(cat "$JOB_DIR/netns" 2>/dev/null)
  if [[ -n $veth ]] && ip link show "$veth" >/dev/null 2>&1; then ip link del "$veth" && tlog "deleted veth $veth"; fi
  if [[ -n $netns && -e /run/netns/$netns ]]; then
    if ip netns del "$netns"; then tlog "deleted network namespace $netns"; else tlog "could not delete netns $netns"; fi
  fi
}

remove_cgroups() {
  local c
  while read -r c; do
    [[ -d $c ]] || continue
    find "$c" -depth -type d -exec rmdir {} + 2>/dev/null
    if [[ -d $c ]]; then tlog "could not remove cgroup $c"; else tlog "removed cgroup $c"; fi
  done < <(cat "$JOB_DIR/cgroups" 2>/dev/null)
}

# The kubelet links each container's log into /var/log/containers whatever its podLogsDir.
remove_log_links() {
  local l
  for l in /var/log/containers/*.log; do
    [[ -L $l && "$(readlink "$l")" == "$JOB_DIR/"* ]] && rm -f "$l"
  done
}

teardown() {
  exec 8>>"$JOB_DIR/teardown.lock"
  flock 8
  [[ -f $JOB_DIR/torn-down ]] && return 0
  local t0=$SECONDS why=${1:-requested}
  tlog "teardown ($why)"
  # A failure's reason stays in state for the role to report; torn-down says the rest.
  local bring_up_failed=""
  grep -q "^failed" "$JOB_DIR/state" 2>/dev/null && bring_up_failed=1
  [[ -n $bring_up_failed ]] || { echo "tearing-down" >"$JOB_DIR/state.tmp" && mv -f "$JOB_DIR/state.tmp" "$JOB_DIR/state"; }
  stop_recorded kubelet
  remove_containers
  stop_recorded containerd
  kill_leftovers "$SOCK"
  local d
  for d in kube-scheduler kube-controller-manager forwarder kube-apiserver etcd; do stop_recorded "$d"; done
  kill_leftovers "$JOB_DIR/"
  unmount_all
  remove_network
  remove_cgroups
  remove_log_links
  tlog "teardown done in $((SECONDS - t0))s"
  date -u +%Y-%m-%dT%H:%M:%SZ >"$JOB_DIR/torn-down"
  [[ -n $bring_up_failed ]] || echo "torn-down" >"$JOB_DIR/state"
}

# Teardown in a process of its own, detached like the daemons, so Slurm's SIGKILL after KillWait
# cannot cut it short; the caller waits for it while it can.
detached_teardown() {
  local why=$1
  ( setsid "$JOB_DIR/ksi.sh" teardown "$JOB_DIR" "$why" </dev/null >>"$JOB_DIR/log/teardown.log" 2>&1 & )
  # At most 5 minutes: a teardown that cannot finish must not hold the job to its time limit.
  local i
  for ((i = 0; i < 1500; i++)); do [[ -f $JOB_DIR/torn-down ]] && return 0; sleep 0.2; done
  log "teardown did not finish within 5 minutes (log: $JOB_DIR/log/teardown.log)"
}

load_settings() {
  # shellcheck source=/dev/null
  source "$JOB_DIR/settings" || { echo "k8s-in-slurm: no settings in $JOB_DIR" >&2; exit 2; }
}

# ---------------------------------------------------------------------------------------------
# The batch script
# ---------------------------------------------------------------------------------------------
run() {
  JOB_ID=${SLURM_JOB_ID:?not in a Slurm job (SLURM_JOB_ID unset)}
  [[ -n ${KSI_DIR:-} ]] || { echo "k8s-in-slurm: KSI_DIR is not set" >&2; exit 2; }
  JOB_DIR=$KSI_DIR/ksi-$JOB_ID
  # Slurm numbers jobs anew when its state is reset (another cluster, a fresh StateSaveLocation), so
  # a dir of this name is an earlier cluster's: its torn-down mark would make this cluster's teardown
  # a no-op. Keep it aside, unless a daemon it recorded still runs.
  if [[ -e $JOB_DIR ]]; then
    local f
    for f in "$JOB_DIR"/pids/*.pid; do
      [[ -f $f ]] || continue
      JOB_DIR=$JOB_DIR recorded "$(basename "$f" .pid)" && {
        echo "k8s-in-slurm: $JOB_DIR belongs to a cluster whose $(basename "$f" .pid) still runs; not reusing it" >&2; exit 1; }
    done
    mv "$JOB_DIR" "$JOB_DIR.earlier-$(date +%s)" || { echo "k8s-in-slurm: cannot move $JOB_DIR aside" >&2; exit 1; }
  fi
  mkdir -p "$JOB_DIR/log" "$JOB_DIR/pids" || { echo "k8s-in-slurm: cannot create $JOB_DIR" >&2; exit 1; }
  chmod 0700 "$JOB_DIR"
  # The role waits for this before it reads the state file: proof the dir is this job's.
  echo "${KSI_IDENTITY:-}" >"$JOB_DIR/identity"
  cp "$0" "$JOB_DIR/ksi.sh" && chmod 0700 "$JOB_DIR/ksi.sh"
  derive_names "$JOB_ID"
  CLUSTER=${KSI_NAME:-ksi-$JOB_ID}
  BIN=${KSI_BIN_DIR:?KSI_BIN_DIR is not set}
  CONTAINERD=${KSI_CONTAINERD:-containerd}
  CTR=${KSI_CTR:-ctr}
  RUNC=${KSI_RUNC:-runc}
  RUNC=$(command -v "$RUNC" || echo "$RUNC")
  CNI_BIN=${KSI_CNI_BIN_DIR:-/usr/lib/cni}
  PAUSE_IMAGE=${KSI_PAUSE_IMAGE:-registry.k8s.io/pause:3.10.1}
  POD_CIDR=${KSI_POD_CIDR:-10.246.0.0/16}
  PKI=$JOB_DIR/pki
  SOCK=$JOB_DIR/containerd/containerd.sock
  printf '%s\n' "JOB_ID=$JOB_ID" "CTR=$CTR" "SOCK=$SOCK" >"$JOB_DIR/settings"
  echo "starting" >"$JOB_DIR/state"
  log "job $JOB_ID on $(hostname -s): cluster $CLUSTER in $JOB_DIR"

  # The reaper: outlives the batch script (a SIGKILL after KillWait, a node-level kill) and then
  # runs the same teardown.
  ( setsid "$JOB_DIR/ksi.sh" reap "$JOB_DIR" "$$" "$(starttime $$)" </dev/null >/dev/null 2>&1 & )
  trap 'detached_teardown "signal TERM"; exit 143' TERM
  trap 'detached_teardown "signal INT"; exit 130' INT
  trap 'detached_teardown "exit"' EXIT

  preflight
  local t0=$SECONDS
  API_PORT=$(free_port); ETCD_PORT=$(free_port); ETCD_PEER_PORT=$(free_port)
  CM_PORT=$(free_port); SCHED_PORT=$(free_port)
  API=https://127.0.0.1:$API_PORT
  make_pki
  kubeconfig_certs "$JOB_DIR/admin.kubeconfig" "$API" admin
  make_network
  start_control_plane
  write_node_configs
  start_node
  publish
  echo "ready $((SECONDS - t0))" >>"$JOB_DIR/times"
  apply_manifests
  echo "manifests-ready $((SECONDS - t0))" >>"$JOB_DIR/times"
  echo "ready" >"$JOB_DIR/state"
  log "cluster $CLUSTER ready in $((SECONDS - t0))s at $API"

  local lifetime=${KSI_LIFETIME_SECONDS:-0}
  if [[ -n ${KSI_COMMAND:-} ]]; then
    # shellcheck source=/dev/null
    (set -a; source "$JOB_DIR/env"; exec bash -c "$KSI_COMMAND") &
    local cmd=$! rc
    if ((lifetime > 0)); then
      ( sleep $((lifetime > SECONDS ? lifetime - SECONDS : 1)); kill -TERM $$ ) &
    fi
    wait "$cmd"; rc=$?
    log "command exited with $rc"
    exit "$rc"
  fi
  if ((lifetime > 0)); then
    sleep $((lifetime > SECONDS ? lifetime - SECONDS : 1)) &
    wait $!
    log "lifetime of ${lifetime}s reached (time limit minus the grace period)"
  else
    sleep infinity &
    wait $!
  fi
}

case ${1:-run} in
  teardown)
    JOB_DIR=${2:?usage: $0 teardown JOB_DIR}
    load_settings
    teardown "${3:-requested}" ;;
  reap)
    JOB_DIR=${2:?usage: $0 reap JOB_DIR PID STARTTIME}
    while alive "$3" "$4"; do sleep 1; done
    load_settings
    teardown "the batch script ended" ;;
  run) run ;;
  *) echo "usage: $0 [teardown JOB_DIR | reap JOB_DIR PID STARTTIME]" >&2; exit 2 ;;
esac
