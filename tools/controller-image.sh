#!/usr/bin/env bash
# Build the controller image from deploy/Containerfile with podman, and run it the way
# deploy/deployment.yaml runs it.
#
#   tools/controller-image.sh build     build (or find) the image; prints its name on stdout
#   tools/controller-image.sh check     build, then run the image's checks (make build-check)
#   tools/controller-image.sh base      build (or find) the local base image; prints its name
#
# The base image (Debian bookworm minbase + python3.11, since no registry can be reached here), the
# wheels built on the host and the offline podman build are tools/lib/images.sh's; the build passes
# --build-arg BASE=<that base>.
#
# Cache, under ~/.cache/bridge/images: base-KEY.tar and wheels-KEY/ (tools/lib/images.sh),
# bridge-controller-KEY.tar (`podman save`, what a node loads). The image is
# localhost/bridge-controller:VERSION-KEY with KEY = hash of the Containerfile, of every file its COPY
# lines copy, of the base image id, of the wheel set and of the build steps here: a warm `build`
# finds it and builds nothing.
#
# `check` runs, each in a fresh container with --network=none, read-only root, uid:gid and volumes
# (tmpfs) of the Deployment, its env and args, all capabilities dropped, no new privileges:
#   1. `bridge-controller --help` (the ENTRYPOINT), and `ssh -V` (a Slurm login node's output);
#   2. the Deployment's args parsed by the installed controller: a playbook dir that holds
#      bridgejob_{submit,poll,cancel}.yml, the image's Python, the containerPort, HOME/ANSIBLE_* on
#      volumes; ansible-playbook --syntax-check of the 3 playbooks with the installed collection;
#      AnsibleRunner (as main.py builds it) runs bridgejob_poll.yml (bridge.hpc.job_info) against a
#      stub of Ray's GET /api/jobs/ inside the container, the token handed over through the pipe;
#   3. its Python packages are exactly those of locks/controller.txt (tools/lib/lock_check.py).
# podman runs with runc and ulimits it can set here (tools/lib/images.sh).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
CONTAINERFILE=$REPO/deploy/Containerfile
DEPLOYMENT=$REPO/deploy/deployment.yaml

die() { echo "controller-image: $*" >&2; exit 1; }
log() { printf 'controller-image: [%3ds] %s\n' "$SECONDS" "$*" >&2; }
# shellcheck source=tools/lib/host-packages.sh
source "$REPO/tools/lib/host-packages.sh"
# shellcheck source=tools/lib/rootfs.sh
source "$REPO/tools/lib/rootfs.sh"
# shellcheck source=tools/lib/images.sh
source "$REPO/tools/lib/images.sh"

# The wheel dir on stdout: every wheel of the lock the Containerfile installs from.
ensure_wheels() { wheel_dir "$REPO/locks/controller.txt"; }

# The COPY sources (relative to the context) of the Containerfile, one a line.
copy_sources() {
  awk '$1 == "COPY" && $2 !~ /^--from=/ { for (i = 2; i < NF; i++) print $i }' "$CONTAINERFILE"
}

# The image's name on stdout; built unless an image of the same key exists.
ensure_image() {
  local base wheels key version name src
  base=$(ensure_base)
  wheels=$(ensure_wheels)
  key=$( {
    sha256sum "$CONTAINERFILE" | cut -d' ' -f1
    declare -f ensure_image ensure_wheels wheel_dir build_image   # how it is built
    podman image inspect --format '{{.Id}}' "$base"
    basename "$wheels"
    while read -r src; do
      [[ -e $REPO/$src ]] || die "COPY $src: no such file or directory in $REPO"
      (cd "$REPO" && find "$src" -type f -print0 | sort -z | xargs -0 sha256sum)
    done < <(copy_sources)
  } | sha256sum | cut -c1-16)
  version=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$REPO/controller/bridge_controller/__init__.py")
  name=localhost/bridge-controller:$version-$key
  if image_exists "$name"; then
    log "$name is built (key unchanged)"
  else
    log "building $name from $CONTAINERFILE on $base"
    build_image "$name" dev.bridge.image-key "$key" "$CACHE/build.log" \
      --build-arg "BASE=$base" --volume "$wheels:/root/.config/pip:ro" -f "$CONTAINERFILE" "$REPO"
  fi
  if [[ ! -s $CACHE/bridge-controller-$key.tar ]]; then
    rm -f "$CACHE"/bridge-controller-*.tar
    podman save --quiet --format docker-archive -o "$CACHE/bridge-controller-$key.tar.tmp" "$name" >/dev/null
    mv "$CACHE/bridge-controller-$key.tar.tmp" "$CACHE/bridge-controller-$key.tar"
  fi
  echo "$name"
}

check_image() {
  local image=$1 work
  work=$(mktemp -d "${TMPDIR:-/tmp}/bridge-image-check.XXXXXX")
  trap 'rm -rf "'"$work"'"' EXIT
  # The Deployment's container, as podman run options and args (valueFrom env gets a stand-in).
  "${BRIDGE_VENV:-$REPO/.venv}/bin/python" - "$DEPLOYMENT" "$work" >"$work/deployment.sh" <<'EOF'
import shlex, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d.get("kind") == "Deployment"]
pod = docs[0]["spec"]["template"]["spec"]
container = pod["containers"][0]
pod_sc, sc = pod.get("securityContext") or {}, container.get("securityContext") or {}
uid = sc.get("runAsUser", pod_sc.get("runAsUser"))
gid = sc.get("runAsGroup", pod_sc.get("runAsGroup"))
opts = ["--user=%s:%s" % (uid, gid)]
if sc.get("readOnlyRootFilesystem"):
    opts.append("--read-only")
if "ALL" in ((sc.get("capabilities") or {}).get("drop") or []):
    opts.append("--cap-drop=ALL")
if sc.get("allowPrivilegeEscalation") is False:
    opts.append("--security-opt=no-new-privileges")
for e in container.get("env") or []:
    opts.append("--env=%s=%s" % (e["name"], e.get("value", "image-check-" + e["name"].lower().replace("_", "-"))))
volumes = {v["name"]: v for v in pod.get("volumes") or []}
for m in container.get("volumeMounts") or []:
    assert "emptyDir" in volumes[m["name"]], "only emptyDir volumes are emulated: %s" % m["name"]
    opts.append("--volume=%s/volumes/%s:%s:rw" % (sys.argv[2], m["name"], m["mountPath"]))
def out(name, values):
    print("%s=(%s)" % (name, " ".join(shlex.quote(str(v)) for v in values)))
out("D_OPTS", opts)
out("D_ARGS", (container.get("command") or []) + (container.get("args") or []))
out("D_PORTS", [p["containerPort"] for p in container.get("ports") or []])
out("D_MOUNTS", [m["mountPath"] for m in container.get("volumeMounts") or []])
out("D_USER", ["%s:%s" % (uid, gid)])
out("D_VOLUMES", [m["name"] for m in container.get("volumeMounts") or []])
print("D_FSGROUP=%s" % shlex.quote(str(pod_sc.get("fsGroup", ""))))
EOF
  # shellcheck source=/dev/null
  . "$work/deployment.sh"
  # The volumes are emptyDirs as the kubelet makes them: mode 0777 and, with an fsGroup, group-owned
  # by it with the setgid bit. (podman's --tmpfs over a directory of the image ignores its mode=.)
  local volume
  for volume in "${D_VOLUMES[@]}"; do
    mkdir -p "$work/volumes/$volume"
    chmod 0777 "$work/volumes/$volume"
    if [[ -n $D_FSGROUP ]]; then chgrp "$D_FSGROUP" "$work/volumes/$volume"; chmod 2777 "$work/volumes/$volume"; fi
  done
  local user
  user=$(podman image inspect --format '{{.Config.User}}' "$image")
  [[ $user == "${D_USER[0]}" ]] || die "USER $user in the image, but the Deployment runs as ${D_USER[0]}"
  local run=("${PODMAN[@]}" run --rm --network=none "${ULIMITS[@]}" "${D_OPTS[@]}")
  "${run[@]}" "$image" "${D_ARGS[@]}" --help >"$work/help.txt" 2>&1 ||
    { cat "$work/help.txt" >&2; die "bridge-controller --help in $image"; }
  grep -q -- '--playbook-dir' "$work/help.txt" || die "--help printed no --playbook-dir"
  log "ok: the ENTRYPOINT runs: $image ${D_ARGS[*]} --help, as ${D_USER[0]}, read-only root, no network"
  # A Slurm backend's login node is read with OpenSSH's client (module_utils/_login.py).
  "${run[@]}" --entrypoint ssh "$image" -V >"$work/ssh.txt" 2>&1 ||
    { cat "$work/ssh.txt" >&2; die "no ssh (openssh-client) in $image"; }
  log "ok: $(head -1 "$work/ssh.txt")"
  "${run[@]}" -i --entrypoint python "$image" - "${D_PORTS[*]}" "${D_MOUNTS[*]}" "${D_ARGS[@]}" \
    <"$REPO/tools/lib/image_checks.py" >&2 || die "the checks in $image failed"
  # Its Python packages are exactly locks/controller.txt's, beside the controller's own wheel and the
  # base's installer.
  local pins
  mapfile -t pins < <("$HOST_PYTHON" "$REPO/tools/locks.py" pins "$REPO/locks/controller.txt")
  "${run[@]}" -i --entrypoint python "$image" - --allow pip --allow bridge-controller "${pins[@]}" \
    <"$REPO/tools/lib/lock_check.py" >&2 || die "$image does not hold exactly locks/controller.txt"
}

ensure_podman
lock_image_cache
case "${1:-}" in
  base) ensure_base ;;
  build) ensure_image ;;
  check)
    image=$(ensure_image)
    check_image "$image"
    log "passed: $image"
    ;;
  *) sed -n '2,8p' "${BASH_SOURCE[0]}" >&2; exit 2 ;;
esac
