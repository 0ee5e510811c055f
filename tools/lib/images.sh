# shellcheck shell=bash
# Container images built here with podman, offline: the local Debian base image, Python wheels built
# on the host, and the podman build around them. Sourced by tools/controller-image.sh and
# tools/ee-image.sh, not run. Root only (debootstrap, podman's root storage).
#
# The sourcing script defines log MESSAGE and die MESSAGE, and sources tools/lib/host-packages.sh and
# tools/lib/rootfs.sh.
#
# No registry can be reached here (docs real-services.md section 7): the base is Debian bookworm
# minbase (debootstrap) with Debian's python3.11, whose venv is /usr/local, so that, as in
# python:3.11-slim, `python` and `pip` are /usr/local/bin's and pip installs into /usr/local's
# site-packages. It is `podman import`ed from a rootfs tarball.
#
# pip cannot reach PyPI from inside a container here (tried: "certificate verify failed:
# self-signed certificate in certificate chain"): the machine's route to PyPI is trusted through a CA
# that only the host's bundle holds (`pip config list`: cert=...). So wheels are built on the host
# (`pip wheel`, the host's pip configuration, PyPI only), and builds run with --network=none and the
# wheel dir, which also holds a pip.conf (no index, find-links that dir), mounted as root's pip
# configuration dir /root/.config/pip for their RUN steps only (an image keeps an empty
# /root/.config/pip: buildah leaves the mount point).
#
# podman runs with runc (Debian's podman picks crun, which refuses this machine's hybrid cgroups:
# "cgroups in hybrid mode not supported") and with --ulimit nofile=4096:4096 --ulimit nproc=16384:16384:
# its default rlimits fail here (CAP_SYS_RESOURCE is not held).
#
# Cache, under ~/.cache/bridge/images: base-KEY.tar (the rootfs; KEY = hash of its recipe) and
# wheels-KEY/ (KEY = hash of the locks).

CACHE=$(realpath -m "${XDG_CACHE_HOME:-$HOME/.cache}/bridge/images")
MIRROR=http://deb.debian.org/debian

# Builds of other checkouts share ~/.cache/bridge/images (wheels-*, debs-*, one .debs.log), and make
# test now builds beside other stages, so overlaps last longer: one image build at a time per
# machine. Held on fd 7 until the script ends. Kept out of the functions whose text keys the images.
lock_image_cache() {
  mkdir -p "$CACHE"
  exec 7>"$CACHE/.build.lock"
  flock 7
}
SUITE=bookworm
# python3-venv brings ensurepip (pip's wheel); ca-certificates: what pip needs to reach an index;
# openssh-client: the controller reads a Slurm job's output on the cluster's login node with ssh
# (module_utils/_login.py), and an execution environment's Ansible reaches hosts with it. Builds
# run with --network=none, so the Containerfiles cannot apt-get it themselves.
BASE_PACKAGES=(python3 python3-venv ca-certificates openssh-client)
# As python:3.11-slim sets them.
BASE_CHANGES=("ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin" "ENV LANG=C.UTF-8"
              'CMD ["python3"]')
HOST_PYTHON=/usr/bin/python3.11   # the base image's Python build, so the wheels fit it
PODMAN=(podman --runtime runc)
ULIMITS=(--ulimit nofile=4096:4096 --ulimit nproc=16384:16384)
export DEBIAN_FRONTEND=noninteractive

ensure_podman() {
  [[ $(id -u) == 0 ]] || die "needs root (debootstrap, podman's root storage)"
  apt_install_host podman runc debootstrap
}

image_exists() { podman image exists "$1"; }

# The key of the base's recipe: its image tag and the name of its rootfs tarball.
base_key() {
  { declare -f debootstrap_tree base_tree; echo "$SUITE $MIRROR ${BASE_PACKAGES[*]}"
    printf '%s\n' "${BASE_CHANGES[@]}"; } | sha256sum | cut -c1-16
}

# The base image's name on stdout; built from a cached rootfs tarball, or debootstrapped first.
ensure_base() {
  local key name tar
  key=$(base_key)
  name=localhost/bridge-python:3.11-$SUITE-$key tar=$CACHE/base-$key.tar
  if ! image_exists "$name"; then
    tar=$(base_tarball) || exit 1
    mkdir -p "$CACHE"
    exec 9>"$CACHE/.base.lock"
    flock 9
    local changes=() c
    for c in "${BASE_CHANGES[@]}"; do changes+=(--change "$c"); done
    podman import --quiet "${changes[@]}" --message "Debian $SUITE minbase + python3.11 (tools/controller-image.sh)" \
      "$tar" "$name" >/dev/null
    exec 9>&-
    log "imported $name from $tar"
  fi
  echo "$name"
}

# The base's rootfs tarball on stdout, debootstrapped when it is not cached: also when podman still
# has the image made from it (a cold cache on a machine that keeps its images), since the EE's
# packages are resolved in a chroot of it (ee-image.sh's debs_dir).
base_tarball() {
  local tar
  tar=$CACHE/base-$(base_key).tar
  if [[ ! -s $tar ]]; then
    mkdir -p "$CACHE"
    exec 9>"$CACHE/.base.lock"
    flock 9
    [[ -s $tar ]] || base_tree "$tar"
    exec 9>&-
  fi
  echo "$tar"
}

# base_tree TARBALL: debootstrap the base's root filesystem and pack it.
base_tree() {
  local tar=$1 tmp t0=$SECONDS
  tmp=$(mktemp -d "$CACHE/.base.build.XXXXXX")
  trap 'remove_tree "'"$tmp"'"' EXIT
  chmod 755 "$tmp"
  log "building the base rootfs (debootstrap $SUITE minbase + ${BASE_PACKAGES[*]}) in $tmp"
  debootstrap_tree "$tmp" "$SUITE" "$MIRROR" "$CACHE/.base.build.log" "${BASE_PACKAGES[@]}"
  chroot "$tmp" python3 -m venv /usr/local >>"$CACHE/.base.build.log" 2>&1 ||
    die "python3 -m venv /usr/local failed (log: $CACHE/.base.build.log)"
  rm -rf "$tmp"/var/lib/apt/lists/* "$tmp"/var/cache/apt/*.bin "$tmp/etc/resolv.conf" "$tmp/etc/hosts"
  rm -f "$CACHE/.base.build.log"
  tar --numeric-owner -C "$tmp" -cf "$tar.tmp" .
  mv "$tar.tmp" "$tar"
  remove_tree "$tmp"
  trap - EXIT
  log "built $tar in $((SECONDS - t0))s"
}

# wheel_dir LOCK...: the wheel dir on stdout: every file the locks (locks/*.txt) name, downloaded on
# the host from PyPI with their hashes checked (wheels only: nothing is built), with the pip.conf
# that makes pip use that dir alone. The builds install from the same locks with --require-hashes.
wheel_dir() {
  local key dir lock
  key=$( { cat "$@"; "$HOST_PYTHON" -VV; } | sha256sum | cut -c1-16)
  dir=$CACHE/wheels-$key
  if [[ ! -f $dir/.complete ]]; then
    rm -rf "$dir"; mkdir -p "$dir"
    for lock in "$@"; do
      log "downloading the wheels of ${lock#"$REPO/"} on the host"
      "$HOST_PYTHON" -m pip download --quiet --disable-pip-version-check --require-hashes --no-deps \
        --only-binary=:all: --dest "$dir" -r "$lock" >&2 || die "pip download -r $lock failed"
    done
    printf '[global]\nno-index = true\nfind-links = /root/.config/pip\n' >"$dir/pip.conf"
    touch "$dir/.complete"
  fi
  echo "$dir"
}

# build_image NAME LABEL KEY LOG PODMAN-BUILD-ARG...: `podman build` offline (no pull, no network,
# the wheels given as a --volume in the args), tagged NAME and labelled LABEL=KEY; on success the
# older images of LABEL are removed (one in use by a container is kept).
build_image() {
  local name=$1 label=$2 key=$3 build_log=$4 t0=$SECONDS old
  shift 4
  # --layers=false: buildah's layer cache keys a RUN step by its text, not by the files mounted for
  # it; KEY is the cache.
  "${PODMAN[@]}" build --pull=never --layers=false --network=none "${ULIMITS[@]}" \
    --label "$label=$key" -t "$name" "$@" >"$build_log" 2>&1 ||
    { tail -n 30 "$build_log" >&2; die "podman build failed (log: $build_log)"; }
  log "built $name in $((SECONDS - t0))s"
  for old in $(podman images --filter "label=$label" --format '{{.Repository}}:{{.Tag}}'); do
    [[ $old == "$name" ]] || podman rmi "$old" >/dev/null 2>&1 || true
  done
}
