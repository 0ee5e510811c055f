#!/usr/bin/env bash
# Idempotent developer/CI bootstrap for the bridge.hpc collection.
#
#   tools/bootstrap.sh           create/refresh <repo>/.venv and <repo>/.run/collections
#   tools/bootstrap.sh --env     same, then print shell exports; use as:
#                                  eval "$(tools/bootstrap.sh --env)"
#   tools/bootstrap.sh --uv      print the path of uv (installed from locks/uv.txt), nothing else
#
# * The venv, BRIDGE_VENV (default <repo>/.venv), is created with $PYTHON (default: python3.11 if
#   on PATH, else python3) and synced with the lock BRIDGE_DEV_LOCK (default locks/dev.txt, made by
#   `make lock` from requirements-dev.txt and requirements.txt): `uv pip sync --require-hashes`, so it
#   holds exactly the locked versions of exactly the locked packages, each file checked against its
#   sha256. Synced again only when the lock (or the interpreter) changed since the last sync; the
#   stamp lives in <venv>/.bridge-requirements.sha256.
# * <repo>/.run/collections/ansible_collections/bridge/hpc is a symlink to the repo root,
#   so ANSIBLE_COLLECTIONS_PATH=<repo>/.run/collections finds bridge.hpc.
# * ansible.posix (galaxy.yml `dependencies`; the stage role's synchronize) is unpacked into
#   <repo>/.run/collections from the `ansible` wheel of locks/ansible.txt (its hash checked), since
#   Galaxy is not reachable here; the wheel is downloaded once into ~/.cache/bridge/wheels.
# A warm run prints nothing (except with --env or --uv).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
VENV="${BRIDGE_VENV:-$REPO/.venv}"
LOCK="${BRIDGE_DEV_LOCK:-$REPO/locks/dev.txt}"
STAMP="$VENV/.bridge-requirements.sha256"
COLL_ROOT="$REPO/.run/collections"
LINK="$COLL_ROOT/ansible_collections/bridge/hpc"

print_env=0 print_uv=0
for arg in "$@"; do
  case "$arg" in
    --env) print_env=1 ;;
    --uv) print_uv=1 ;;
    -h|--help) sed -n '2,21p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "bootstrap.sh: unknown argument: $arg" >&2; exit 2 ;;
  esac
done

log() { echo "bootstrap: $*" >&2; }

if [[ -z "${PYTHON:-}" ]]; then
  if command -v python3.11 >/dev/null 2>&1; then PYTHON=python3.11; else PYTHON=python3; fi
fi

mkdir -p "$REPO/.run"
# Serialise concurrent bootstraps (e.g. two tools/*.sh started in parallel).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$REPO/.run/.bootstrap.lock"
  flock 9
fi

# ---------------------------------------------------------------- uv
# uv syncs a fresh clone's venv from its cache in seconds, where pip takes most of a minute (a clean
# clone is what CI and every gate start from), and removes what the lock does not hold, which pip
# cannot. It lives in a venv of its own under ~/.cache/bridge, installed once from locks/uv.txt (the
# directory is named after that lock's content); pip stays the fallback when uv cannot be had.
uv_command() {
  local home partial
  home="${XDG_CACHE_HOME:-$HOME/.cache}/bridge/uv-$(sha256sum "$REPO/locks/uv.txt" | cut -c1-12)"
  if [[ ! -x $home/bin/uv ]]; then
    mkdir -p "$(dirname "$home")"
    partial="$(mktemp -d "$home.XXXXXX")" || return 1
    "$PYTHON" -m venv "$partial" >&2 &&
      "$partial/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes \
        -r "$REPO/locks/uv.txt" >&2 &&
      mv -T "$partial" "$home" 2>/dev/null
    rm -rf "$partial"
  fi
  [[ -x $home/bin/uv ]] && echo "$home/bin/uv"
}

if ((print_uv)); then
  uv_command
  exit
fi

# ---------------------------------------------------------------- venv
if ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
  "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || {
    echo "bootstrap.sh: $PYTHON is $("$PYTHON" --version 2>&1); need Python >= 3.11" >&2; exit 1; }
  log "creating $VENV with $("$PYTHON" --version 2>&1)"
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
fi

[[ -f $LOCK ]] || { echo "bootstrap.sh: no lock $LOCK (make lock writes it)" >&2; exit 1; }
want_hash="$( { "$VENV/bin/python" -c 'import sys; print(sys.version)'; cat "$LOCK"; } | sha256sum | cut -d' ' -f1)"
have_hash="$(cat "$STAMP" 2>/dev/null || true)"

if [[ "$want_hash" != "$have_hash" ]]; then
  log "syncing $VENV with $LOCK"
  rm -f "$STAMP"
  uv="$(uv_command)" || uv=""
  # --compile-bytecode, as pip installs: this machine's PYTHONDONTWRITEBYTECODE=1 would otherwise
  # have every ansible-playbook compile ansible-core's modules from source again (measured: 3
  # playbook runs of 8 tasks took 12.1 s without the bytecode and 10.3 s with it).
  if [[ -z $uv ]] || ! "$uv" pip sync --quiet --no-config --require-hashes --compile-bytecode \
      --python "$VENV/bin/python" "$LOCK"; then
    # pip adds, never removes: a venv of its own, so that it too holds the lock and nothing else.
    log "uv failed or is missing: installing $LOCK with pip into a new $VENV"
    rm -rf "$VENV"
    "$PYTHON" -m venv --without-pip "$VENV"
    "$PYTHON" -m pip --python "$VENV/bin/python" install --quiet --disable-pip-version-check \
      --require-hashes --no-deps -r "$LOCK"
  fi
  echo "$want_hash" >"$STAMP"
fi

# ------------------------------------------------- collection symlink
# Relative link (4 levels up from .run/collections/ansible_collections/bridge/) so the
# checkout can be moved or cloned elsewhere.
mkdir -p "$COLL_ROOT/ansible_collections/bridge"
target="../../../.."
if [[ "$(readlink "$LINK" 2>/dev/null || true)" != "$target" ]]; then
  rm -rf "$LINK"
  ln -s "$target" "$LINK"
  log "linked $LINK -> $REPO"
fi

# ------------------------------------------------ ansible.posix from the ansible wheel
# Galaxy cannot be reached from here; the `ansible` package on PyPI ships the same collection
# tarball contents. Only ansible/posix is unpacked; the stamp names the wheel it came from.
ANSIBLE_WHEEL_VERSION=$(sed -n 's/^ansible==\([^ ]*\).*/\1/p' "$REPO/locks/ansible.txt")
WHEELS="${XDG_CACHE_HOME:-$HOME/.cache}/bridge/wheels"
wheel="$WHEELS/ansible-$ANSIBLE_WHEEL_VERSION-py3-none-any.whl"
posix="$COLL_ROOT/ansible_collections/ansible/posix"
posix_stamp="$posix/.bridge-from-wheel"
if [[ "$(cat "$posix_stamp" 2>/dev/null || true)" != "ansible-$ANSIBLE_WHEEL_VERSION" ]]; then
  if [[ ! -f $wheel ]]; then
    log "downloading ansible $ANSIBLE_WHEEL_VERSION (for ansible.posix) into $WHEELS"
    mkdir -p "$WHEELS"
    "$VENV/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps --require-hashes \
      --only-binary=:all: --dest "$WHEELS" -r "$REPO/locks/ansible.txt"
  fi
  log "unpacking ansible.posix from $(basename "$wheel")"
  unpack="$(mktemp -d "$COLL_ROOT/.posix.XXXXXX")"
  "$VENV/bin/python" - "$wheel" "$unpack" <<'PY'
import sys
import zipfile

wheel, dest = sys.argv[1], sys.argv[2]
prefix = "ansible_collections/ansible/posix/"
with zipfile.ZipFile(wheel) as archive:
    members = [name for name in archive.namelist() if name.startswith(prefix)]
    if not members:
        sys.exit("bootstrap.sh: %s holds no %s" % (wheel, prefix))
    archive.extractall(dest, members)
PY
  rm -rf "$posix"
  mkdir -p "$(dirname "$posix")"
  mv "$unpack/ansible_collections/ansible/posix" "$posix"
  rm -rf "$unpack"
  echo "ansible-$ANSIBLE_WHEEL_VERSION" >"$posix_stamp"
fi

if ((print_env)); then
  printf 'export VIRTUAL_ENV=%q\n' "$VENV"
  # shellcheck disable=SC2016  # $PATH is meant to expand in the caller's shell
  printf 'export PATH=%q:"$PATH"\n' "$VENV/bin"
  printf 'export ANSIBLE_COLLECTIONS_PATH=%q\n' "$COLL_ROOT"
  # The one warning below Bridge that is ignored where it runs Ansible (the Makefile says why).
  dsa_warning="ignore:DSA is deprecated and support will be removed in a future release:UserWarning:ansible._internal._ssh._ssh_agent"
  case ",${PYTHONWARNINGS:-}," in
    *",$dsa_warning,"*) warnings=$PYTHONWARNINGS ;;
    *) warnings=${PYTHONWARNINGS:+$PYTHONWARNINGS,}$dsa_warning ;;
  esac
  printf 'export PYTHONWARNINGS=%q\n' "$warnings"
fi
