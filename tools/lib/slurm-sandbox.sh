#!/usr/bin/env bash
# Run a command in private pid, network and mount namespaces in which tools/slurm-cluster.sh can
# start throwaway copies of the clusters on their usual ports, beside the real ones and unseen by
# them (for tests of the script itself):
#
#   tools/lib/slurm-sandbox.sh RUN_DIR COMMAND [ARG...]
#
# COMMAND runs with BRIDGE_RUN=RUN_DIR. The sandbox shares the host's files except what a cluster
# writes: the host's munge socket and seed dirs are fresh tmpfs mounts, and each chroot that exists
# is an overlay whose changes live in memory, with an empty /run and Slurm state dir (so the
# chroots must have been built outside: the sandbox has no network). When COMMAND ends, the kernel
# kills every process left in the pid namespace and the mounts go with the mount namespace:
# nothing outlives the sandbox. Root only.
set -euo pipefail

(($# >= 2)) || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
CACHE=$(realpath -m "${XDG_CACHE_HOME:-$HOME/.cache}/bridge/chroots")

if [[ ${BRIDGE_SLURM_SANDBOX:-} != inside ]]; then
  export BRIDGE_SLURM_SANDBOX=inside
  exec unshare --pid --fork --mount-proc --mount --propagation private --net "$0" "$@"
fi

RUN_DIR=$1; shift
mkdir -p "$RUN_DIR"
ip link set lo up
# Slurm resolves 127.0.0.1 with AF_INET + AI_ADDRCONFIG, and glibc then answers only when some
# IPv4 address other than 127.0.0.1 is configured: give the loopback a second one.
ip addr add 10.254.254.1/32 dev lo
mkdir -p /run/munge "$RUN_DIR/.sandbox"
mount -t tmpfs tmpfs /run/munge
# munged rewrites its seed file when it exits: keep the host's own.
if [[ -d /var/lib/munge ]]; then
  mount -t tmpfs -o mode=0700 tmpfs /var/lib/munge
  chown munge:munge /var/lib/munge
fi
mount -t tmpfs tmpfs "$RUN_DIR/.sandbox"
for root in "$CACHE"/trixie "$CACHE"/sid; do
  [[ -f $root/.bridge-chroot ]] || continue
  # The real clusters' proc/sys/dev mounts were copied into this namespace: unmount them, so that
  # slurm-cluster.sh mounts its own (this pid namespace's /proc). The overlay sits on the chroot
  # itself, so the script's unmounting of everything *below* the chroot leaves it in place.
  awk -v p="$root/" 'index($2, p) == 1 { print $2 }' /proc/mounts | sort -r | xargs -r -n1 umount -l
  layer=$RUN_DIR/.sandbox/$(basename "$root")
  mkdir -p "$layer/upper/run" "$layer/upper/var/lib/bridge-slurm" "$layer/work"
  # Opaque: the real cluster's munge socket, state and spool (with its job steps' sockets) below
  # these stay out of sight, so that no sandbox daemon can reach them.
  python3 -c 'import os, sys; [os.setxattr(p, "trusted.overlay.opaque", b"y") for p in sys.argv[1:]]' \
    "$layer/upper/run" "$layer/upper/var/lib/bridge-slurm"
  mount -t overlay overlay -o "lowerdir=$root,upperdir=$layer/upper,workdir=$layer/work" "$root"
done

BRIDGE_RUN=$RUN_DIR "$@"
