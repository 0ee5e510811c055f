#!/usr/bin/env bash
# Build the Bridge execution environment (ee/execution-environment.yml) with ansible-builder 3 and
# podman, offline, and run playbooks in it the way AWX does.
#
#   tools/ee-image.sh build        build (or find) the image; prints its name on stdout
#   tools/ee-image.sh check        build, then check the image (make build-check)
#   tools/ee-image.sh collections  put the artifacts ee/requirements.yml names into ee/collections
#   tools/ee-image.sh run DIR [ANSIBLE-RUNNER-ARG...]
#                                  `ansible-runner run DIR` with process isolation in the image
#                                  (podman, host network); e.g. -p demo.yml
#   tools/ee-image.sh stream DIR [ANSIBLE-RUNNER-ARG...]
#                                  `ansible-runner transmit DIR | podman run IMAGE ansible-runner
#                                  worker | ansible-runner process DIR`: the private data dir goes
#                                  into the container as a stream, as AWX's receptor sends a job
#
# The build, where neither a registry nor Galaxy can be reached and pip and apt cannot reach their
# indexes from inside a container (tools/lib/images.sh):
#   1. the collections: bridge.hpc's artifact (`ansible-galaxy collection build`) and ansible.posix's,
#      built from the copy tools/bootstrap.sh unpacked from the `ansible` wheel, in ee/collections;
#      ee/requirements.yml installs them as files, with --offline;
#   2. `ansible-builder create` writes the build context (.run/ee/context);
#   3. the wheels of locks/ee.txt (what the EE's base stage installs, with --require-hashes, before
#      anything else: ee/execution-environment.yml) and of locks/ee-builder.txt (ansible-builder's
#      own bindep, pyyaml and packaging in its builder stage) are downloaded on the host and offered
#      to pip in the build through a pip.conf, as its only index (tools/lib/images.sh); the ranges
#      ansible-builder then installs (ansible-core, ansible-runner, the collections' requirements
#      that `ansible-builder introspect` reads from their meta/execution-environment.yml) are
#      already met by the lock, so nothing else is installed;
#   4. bindep's packages for this platform (`bindep -l newline` of the introspected bindep.txt: what
#      the build's `apt-get install` will ask for) are downloaded on the host, `apt-get install
#      --download-only` in a chroot of the base image's rootfs (so apt resolves them against exactly
#      what the base holds), and the build gets apt's lists and the .debs as volumes: its `apt-get
#      install` finds everything it needs and downloads nothing. Recommends stay out, as in
#      Debian's slim images (an apt.conf.d mounted for the build only);
#   5. podman builds the context on the base of `tools/controller-image.sh base`, --network=none.
#
# Cache, under ~/.cache/bridge/images (tools/lib/images.sh): base-KEY.tar, wheels-KEY/ and
# debs-KEY/ (KEY = hash of the base and the package list). The image is localhost/bridge-ee:KEY
# with KEY = hash of the generated context (the Containerfile, ansible-builder's scripts, the
# collections' FILES.json and MANIFEST.json, which hold the checksum of every file they ship), of
# the base image id, of the wheel and .deb sets and of the build steps here: a warm `build` builds
# no image, wheel or .deb, only the collection artifacts its key is taken from (4 s in all here;
# docs/awx.md has the cold and warm times).
#
# `check` runs the image offline as an arbitrary uid of group root (as OpenShift and AWX's container
# groups run it): the collections listed, their Python requirements imported, ssh and rsync, ansible-doc
# of a module; its Python packages exactly locks/ee.txt's; then a playbook through `run` and through `stream`, whose bridge.hpc module must fail
# with the collection's own message about its missing URL (tests/integration/test_execution_environment.py
# runs real jobs through both).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
EE_DIR=$REPO/ee
EE_FILE=$EE_DIR/execution-environment.yml
RUN_DIR=$REPO/.run/ee   # build files, not a service's: never under BRIDGE_RUN
VENV_BIN=${BRIDGE_VENV:-$REPO/.venv}/bin
# What the build's `apt-get install` runs with, and what the chroot resolves the packages with.
APT_BUILD_CONF='APT::Install-Recommends "false";'
# How `run` and `stream` start the image: services on the host's 127.0.0.1 are reachable.
CONTAINER_OPTIONS=(--network=host --runtime=runc)

die() { echo "ee-image: $*" >&2; exit 1; }
log() { printf 'ee-image: [%3ds] %s\n' "$SECONDS" "$*" >&2; }
# shellcheck source=tools/lib/host-packages.sh
source "$REPO/tools/lib/host-packages.sh"
# shellcheck source=tools/lib/rootfs.sh
source "$REPO/tools/lib/rootfs.sh"
# shellcheck source=tools/lib/images.sh
source "$REPO/tools/lib/images.sh"
CONTAINER_OPTIONS+=("${ULIMITS[@]}")

# The two artifacts of ee/requirements.yml in ee/collections, built anew (a tarball's mtimes differ
# each time; its FILES.json does not): bridge.hpc's from this tree, and ansible.posix's from the tree
# tools/bootstrap.sh unpacked from the `ansible` wheel, with a galaxy.yml made of its MANIFEST.json
# (the wheel leaves out some files its FILES.json names, so that tree is no artifact as it is).
ensure_collections() {
  local out=$EE_DIR/collections tmp posix source
  posix=$REPO/.run/collections/ansible_collections/ansible/posix
  [[ -f $posix/MANIFEST.json ]] || die "no ansible.posix in $posix: run tools/bootstrap.sh"
  mkdir -p "$out"
  tmp=$(mktemp -d "$out/.build.XXXXXX")
  cp -a "$posix" "$tmp/posix"
  rm -f "$tmp/posix/.bridge-from-wheel" "$tmp/posix/FILES.json"
  "$VENV_BIN/python" - "$tmp/posix" <<'EOF'
import json, os, sys, yaml
manifest = os.path.join(sys.argv[1], "MANIFEST.json")
info = json.load(open(manifest))["collection_info"]
with open(os.path.join(sys.argv[1], "galaxy.yml"), "w") as handle:
    yaml.safe_dump(dict((key, value) for key, value in info.items() if value not in (None, [])), handle)
os.remove(manifest)
EOF
  for source in "$REPO" "$tmp/posix"; do
    "$VENV_BIN/ansible-galaxy" collection build --force --output-path "$tmp" "$source" >"$tmp/build.log" 2>&1 ||
      { cat "$tmp/build.log" >&2; rm -rf "$tmp"; die "ansible-galaxy collection build $source failed"; }
  done
  mv "$tmp"/bridge-hpc-*.tar.gz "$out/bridge-hpc.tar.gz"
  mv "$tmp"/ansible-posix-*.tar.gz "$out/ansible-posix.tar.gz"
  rm -rf "$tmp"
}

# The build context on stdout: `ansible-builder create`, anew each time (it takes a second).
ensure_context() {
  local context=$RUN_DIR/context
  rm -rf "$context"
  mkdir -p "$RUN_DIR"
  "$VENV_BIN/ansible-builder" create -f "$EE_FILE" --context "$context" \
    --output-filename Containerfile >"$RUN_DIR/create.log" 2>&1 ||
    { cat "$RUN_DIR/create.log" >&2; die "ansible-builder create failed"; }
  echo "$context"
}

# introspect OUT_DIR: the collections' requirements as the build's builder stage reads them, into
# OUT_DIR/requirements.txt and OUT_DIR/bindep.txt.
introspect() {
  "$VENV_BIN/ansible-builder" introspect --write-pip "$1/requirements.txt" --write-bindep "$1/bindep.txt" \
    "$REPO/.run/collections" >/dev/null || die "ansible-builder introspect failed"
}

# debs_dir PACKAGE...: apt's lists, the .debs of PACKAGEs and of what they need beyond the base, and
# the apt.conf.d of the build, in a cached dir (printed); built in a chroot of the base's rootfs.
debs_dir() {
  local key dir tmp base_tar
  key=$( { base_key; echo "$APT_BUILD_CONF"; printf '%s\n' "$@"; declare -f debs_dir; } | sha256sum | cut -c1-16)
  dir=$CACHE/debs-$key
  if [[ ! -f $dir/.complete ]]; then
    log "downloading the .debs of $* (apt-get in a chroot of the base)"
    base_tar=$(base_tarball) || exit 1
    tmp=$(mktemp -d "$CACHE/.debs.XXXXXX")
    trap 'remove_tree "'"$tmp"'"' EXIT
    tar -C "$tmp" -xf "$base_tar"
    cp /etc/resolv.conf /etc/hosts "$tmp/etc/"
    echo "$APT_BUILD_CONF" >"$tmp/etc/apt/apt.conf.d/99bridge-ee-build"
    mount_root "$tmp"
    { chroot "$tmp" apt-get update -q && chroot "$tmp" apt-get install -y -q --download-only "$@"
    } >"$CACHE/.debs.log" 2>&1 || { tail -n 20 "$CACHE/.debs.log" >&2; die "apt-get --download-only $* failed"; }
    umount_root "$tmp"
    rm -rf "$dir"
    mkdir -p "$dir/cache" "$dir/lists"
    cp -a "$tmp/var/cache/apt/archives" "$dir/cache/"
    rm -rf "$dir/cache/archives/partial" "$dir/cache/archives/lock"
    find "$tmp/var/lib/apt/lists" -maxdepth 1 -type f ! -name lock -exec cp -a {} "$dir/lists/" \;
    cp -a "$tmp/etc/apt/apt.conf.d" "$dir/apt.conf.d"
    remove_tree "$tmp"
    trap - EXIT
    rm -f "$CACHE/.debs.log"
    touch "$dir/.complete"
  fi
  echo "$dir"
}

# The FILES.json and MANIFEST.json of every artifact in ee/collections: what they hold, by checksum.
collections_digest() {
  local artifact
  for artifact in "$EE_DIR"/collections/*.tar.gz; do
    tar -xzOf "$artifact" MANIFEST.json FILES.json
  done | sha256sum | cut -c1-16
}

# The image's name on stdout; built unless an image of the same key exists.
ensure_image() {
  local base context work wheels debs key name packages
  # ensure_image runs in a command substitution, where errexit does not hold: each step stops it.
  base=$(ensure_base) || exit 1
  ensure_collections || exit 1
  context=$(ensure_context) || exit 1
  work=$RUN_DIR/introspect
  rm -rf "$work"; mkdir -p "$work"
  introspect "$work"
  wheels=$(wheel_dir "$REPO/locks/ee.txt" "$REPO/locks/ee-builder.txt") || exit 1
  mapfile -t packages < <("$VENV_BIN/bindep" -f "$work/bindep.txt" -l newline || true)
  debs=$(debs_dir "${packages[@]}") || exit 1
  key=$( {
    (cd "$context" && find . -type f ! -path './_build/collections/*' -print0 | sort -z | xargs -0 sha256sum)
    collections_digest
    "$VENV_BIN/ansible-builder" --version
    podman image inspect --format '{{.Id}}' "$base"
    basename "$wheels"; basename "$debs"
    declare -f ensure_image ensure_collections ensure_context introspect debs_dir wheel_dir build_image
  } | sha256sum | cut -c1-16)
  name=localhost/bridge-ee:$key
  if image_exists "$name"; then
    log "$name is built (key unchanged)"
  else
    log "building $name from $EE_FILE on $base"
    # apt's lists and cache are copies: the build's apt-get writes its locks and caches there.
    rm -rf "$RUN_DIR/apt"; mkdir -p "$RUN_DIR/apt"
    cp -a "$debs/cache" "$debs/lists" "$RUN_DIR/apt/"
    build_image "$name" dev.bridge.ee-key "$key" "$RUN_DIR/build.log" \
      --build-arg "EE_BASE_IMAGE=$base" \
      --volume "$wheels:/root/.config/pip:ro" \
      --volume "$RUN_DIR/apt/cache:/var/cache/apt" \
      --volume "$RUN_DIR/apt/lists:/var/lib/apt/lists" \
      --volume "$debs/apt.conf.d:/etc/apt/apt.conf.d:ro" \
      -f "$context/Containerfile" "$context"
    rm -rf "$RUN_DIR/apt"
  fi
  echo "$name"
}

# The newest image built here (of any key), without building: for `run` and `stream`.
built_image() {
  local name
  name=$(podman images --filter label=dev.bridge.ee-key --format '{{.Repository}}:{{.Tag}}' | head -n 1)
  [[ -n $name ]] || die "no EE image is built: tools/ee-image.sh build"
  echo "$name"
}

# run_isolated IMAGE DIR ANSIBLE-RUNNER-ARG...: ansible-runner's process isolation. ansible-runner
# mounts DIR as /runner and makes DIR/artifacts/IDENT (the events, its callback plugin) mode 0700 as
# the user it runs as, so the container runs as that user, as ansible-runner itself runs docker
# (--user=<its uid>). In AWX the job's data reaches the container as a stream instead, and the image's
# own user runs it: see run_streamed.
run_isolated() {
  local image=$1 dir=$2 option_args=() option
  shift 2
  for option in "${CONTAINER_OPTIONS[@]}" "--user=$(id -u)"; do option_args+=("--container-option=$option"); done
  "$VENV_BIN/ansible-runner" run "$dir" --process-isolation --process-isolation-executable podman \
    --container-image "$image" "${option_args[@]}" "$@"
}

# run_streamed IMAGE DIR ANSIBLE-RUNNER-ARG...: transmit | worker (in the image) | process; the
# artifacts (rc, status, job_events/) land in DIR/artifacts/IDENT as with `run` (--ident IDENT).
run_streamed() {
  local image=$1 dir=$2 ident=() previous="" arg
  shift 2
  for arg in "$@"; do
    [[ $previous == --ident ]] && ident=(--ident "$arg")
    previous=$arg
  done
  "$VENV_BIN/ansible-runner" transmit "$dir" "$@" |
    podman run --rm -i "${CONTAINER_OPTIONS[@]}" "$image" ansible-runner worker |
    "$VENV_BIN/ansible-runner" process "$dir" "${ident[@]}"
}

check_image() {
  local image=$1 work out
  work=$(mktemp -d "${TMPDIR:-/tmp}/bridge-ee-check.XXXXXX")
  trap 'rm -rf "'"$work"'"' EXIT
  local run=("${PODMAN[@]}" run --rm --network=none "${ULIMITS[@]}" --user 4242:0 "$image")
  out=$("${run[@]}" ansible-galaxy collection list --format json) || die "ansible-galaxy collection list in $image"
  "$HOST_PYTHON" - "$out" <<'EOF' || die "collections in $image: $out"
import json, sys
found = {name: info["version"] for path in json.loads(sys.argv[1]).values() for name, info in path.items()}
assert found.get("bridge.hpc") and found.get("ansible.posix"), found
print("ee-image: ok: collections %s" % ", ".join("%s %s" % item for item in sorted(found.items())), file=sys.stderr)
EOF
  "${run[@]}" bash -c 'python3 -c "import httpx, kubernetes, boto3, ansible_runner" && ssh -V 2>&1 && rsync --version | head -n 1 &&
    ansible-doc -t module bridge.hpc.slurm_job | head -n 1 && id' >&2 ||
    die "the collections' requirements in $image"
  log "ok: httpx, kubernetes, boto3, ssh, rsync and ansible-doc in $image as uid 4242"
  # Its Python packages are exactly locks/ee.txt's, beside the base's own pip and setuptools.
  local pins
  mapfile -t pins < <("$HOST_PYTHON" "$REPO/tools/locks.py" pins "$REPO/locks/ee.txt")
  "${PODMAN[@]}" run --rm -i --network=none "${ULIMITS[@]}" --user 4242:0 "$image" \
    python3 - --allow pip --allow setuptools "${pins[@]}" <"$REPO/tools/lib/lock_check.py" >&2 ||
    die "$image does not hold exactly locks/ee.txt"
  mkdir -p "$work/isolated/project" "$work/isolated/env"
  cat >"$work/isolated/project/check.yml" <<'EOF'
- name: A bridge.hpc module in the EE
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Ray's cluster without a URL
      bridge.hpc.ray_cluster_info:
      register: info
      ignore_errors: true
    - name: The collection's own message
      ansible.builtin.assert:
        that: "'RAY_ADDRESS' in info.msg"
EOF
  mkdir -p "$work/isolated/inventory"
  echo 'localhost ansible_connection=local' >"$work/isolated/inventory/hosts"
  cp -a "$work/isolated" "$work/streamed"
  run_isolated "$image" "$work/isolated" -p check.yml --ident isolated >"$work/isolated.out" 2>&1 ||
    { cat "$work/isolated.out" >&2; die "the check playbook through ansible-runner --process-isolation"; }
  log "ok: a playbook through ansible-runner --process-isolation (podman)"
  if ! run_streamed "$image" "$work/streamed" -p check.yml --ident streamed >"$work/streamed.out" 2>&1 ||
    [[ $(cat "$work/streamed/artifacts/streamed/rc" 2>/dev/null) != 0 ]]; then
    cat "$work/streamed.out" >&2; die "the check playbook through ansible-runner transmit | worker | process"
  fi
  log "ok: a playbook through ansible-runner transmit | worker (in the image) | process"
}

case "${1:-}" in
  build|check) ensure_podman; "$REPO/tools/bootstrap.sh"; lock_image_cache ;;
esac
case "${1:-}" in
  build) ensure_image ;;
  check)
    image=$(ensure_image)
    check_image "$image"
    log "passed: $image"
    ;;
  collections) ensure_collections ;;
  run)
    (($# >= 2)) || die "usage: tools/ee-image.sh run DIR [ANSIBLE-RUNNER-ARG...]"
    run_isolated "$(built_image)" "${@:2}"
    ;;
  stream)
    (($# >= 2)) || die "usage: tools/ee-image.sh stream DIR [ANSIBLE-RUNNER-ARG...]"
    run_streamed "$(built_image)" "${@:2}"
    ;;
  *) sed -n '2,14p' "${BASH_SOURCE[0]}" >&2; exit 2 ;;
esac
