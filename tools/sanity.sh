#!/usr/bin/env bash
# Run `ansible-test sanity` on a fresh copy of the collection.
#
#   tools/sanity.sh                      all sanity tests, Python 3.11, ansible-test --venv
#   tools/sanity.sh --test pylint        extra args are passed to `ansible-test sanity`
#   SANITY_MODE=local tools/sanity.sh    use --local --requirements instead of --venv
#                                        (installs the sanity requirements into .venv)
#   SANITY_PYTHON=3.12 tools/sanity.sh   another Python version (default: .venv's)
#   SANITY_NO_APT=1 tools/sanity.sh      do not apt-get install shellcheck when missing
#
# ansible-test needs its cwd to be a real .../ansible_collections/<ns>/<name> directory,
# so the tracked + untracked-not-ignored files are copied (fresh every run, so deleted
# files disappear) to <repo>/.run/ansible-test/ansible_collections/bridge/hpc.
# ansible-test keeps its per-test virtualenvs under ~/.ansible/test/venv, so runs after
# the first only re-create the copy.
#
# The pip bootstrap script that ansible-test would download comes from a host that is not
# reachable here; a stand-in (ensurepip + `pip install`) is put in its cache path.
# Exit status is non-zero if any sanity test fails.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
"$REPO/tools/bootstrap.sh"
VENV="${BRIDGE_VENV:-$REPO/.venv}"
PY="$VENV/bin/python"
PYVER="${SANITY_PYTHON:-$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')}"

NS="$(sed -n 's/^namespace:[[:space:]]*\([A-Za-z0-9_]*\).*/\1/p' "$REPO/galaxy.yml")"
NAME="$(sed -n 's/^name:[[:space:]]*\([A-Za-z0-9_]*\).*/\1/p' "$REPO/galaxy.yml")"
DEST="$REPO/.run/ansible-test/ansible_collections/${NS:-bridge}/${NAME:-hpc}"

# One run at a time per checkout (the copy and tests/output are shared).
if command -v flock >/dev/null 2>&1; then
  exec 8>"$REPO/.run/.sanity.lock"
  flock 8
fi

# ------------------------------------------------------------ copy of the tree
# Keep ansible-test's delegation venv (created inside tests/output/.tmp) across runs;
# the copy always lives at the same path, so the venv stays valid.
DELEG_REL="tests/output/.tmp/delegation"
DELEG_KEEP="$REPO/.run/ansible-test-delegation"
rm -rf "$DELEG_KEEP"
if [[ -d "$DEST/$DELEG_REL" ]]; then mv "$DEST/$DELEG_REL" "$DELEG_KEEP"; fi
rm -rf "$DEST"
mkdir -p "$DEST"
(
  cd "$REPO"
  # tracked + untracked-not-ignored; skip tracked files deleted from the work tree
  git ls-files -z -co --exclude-standard |
    while IFS= read -r -d '' f; do
      if [[ -e "$f" || -L "$f" ]]; then printf '%s\0' "$f"; fi
    done |
    tar --null --no-recursion -T - -cf -
) | tar -xf - -C "$DEST"
# ansible-test walks up from its cwd to the first .git and lists files with git, which
# would find <repo>/.git (where .run/ is ignored) and skip everything: give the copy its
# own (empty, commit-less) repository; the copied .gitignore keeps tests/output/ ignored.
git -C "$DEST" init --quiet
if [[ -d "$DELEG_KEEP" ]]; then
  mkdir -p "$DEST/$(dirname "$DELEG_REL")"
  mv "$DELEG_KEEP" "$DEST/$DELEG_REL"
fi

# ------------------------------------------ stand-in for ansible-test's get-pip
PIPVER="$("$PY" - <<'EOF'
import re, types
try:
    from ansible_test._internal.python_requirements import get_venv_packages
    print(get_venv_packages(types.SimpleNamespace(version='3.11'))['pip'])
except Exception:
    import ansible_test, os
    src = open(os.path.join(os.path.dirname(ansible_test.__file__), '_internal', 'python_requirements.py')).read()
    print(re.search(r"pip='([0-9.]+)'", src).group(1))
EOF
)"
GETPIP="$HOME/.ansible/test/cache/get_pip_${PIPVER//./_}.py"
MARKER="# bridge.hpc stand-in for get-pip.py"
if [[ ! -f "$GETPIP" ]] || grep -qF "$MARKER" "$GETPIP"; then
  mkdir -p "$(dirname "$GETPIP")"
  tmp="$(mktemp "$GETPIP.XXXXXX")"
  cat >"$tmp" <<EOF
$MARKER (get-pip.py itself cannot be downloaded here).
# ansible-test runs: python get_pip_X_Y.py --disable-pip-version-check pip==X.Y --no-setuptools --no-wheel
import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ('--no-setuptools', '--no-wheel')]
subprocess.check_call([sys.executable, '-m', 'ensurepip', '--default-pip'], stdout=subprocess.DEVNULL)
subprocess.check_call([sys.executable, '-m', 'pip', 'install', '--quiet'] + args)
if '--no-setuptools' in sys.argv[1:] and not any(a.startswith('setuptools') for a in args):
    # ensurepip on Python < 3.12 also installs setuptools; real get-pip would not.
    subprocess.call([sys.executable, '-m', 'pip', 'uninstall', '--quiet', '--yes', 'setuptools'],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
EOF
  if cmp -s "$tmp" "$GETPIP"; then rm -f "$tmp"; else mv -f "$tmp" "$GETPIP"; fi
fi

# ------------------------------------------------------------------ shellcheck
# ansible-test skips the shellcheck sanity test (with a warning) when the program is
# missing; install it from Debian when we can (root + apt-get). SANITY_NO_APT=1 disables.
if ! command -v shellcheck >/dev/null 2>&1 && [[ -z "${SANITY_NO_APT:-}" ]] &&
  [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  log() { echo "sanity: $*" >&2; }
  # shellcheck source=tools/lib/host-packages.sh
  source "$REPO/tools/lib/host-packages.sh"
  # Under `make test` the services' and images' scripts install host packages at the same time:
  # apt_install_host takes them one at a time.
  apt_install_host shellcheck ||
    echo "sanity: could not install shellcheck; the shellcheck test will be skipped" >&2
fi

# ------------------------------------------------------------------ run it
if [[ "${SANITY_MODE:-venv}" == local ]]; then
  mode=(--local --requirements)
else
  mode=(--venv)
fi

cd "$DEST"
export PATH="$VENV/bin:$PATH"
set +e
ansible-test sanity "${mode[@]}" --python "$PYVER" --color no "$@" 2>&1 | tee "$REPO/.run/sanity.log"
rc=${PIPESTATUS[0]}
set -e
if ((rc != 0)); then
  echo "" >&2
  echo "==== sanity FAILED (exit $rc); failures:" >&2
  # every ERROR/FATAL block with its continuation lines (a crashing test's traceback,
  # the final list of failed tests), minus the outer delegation command line.
  # A crashing test (FATAL: Command ...) aborts the run: later tests did not run.
  awk '
    /^Running sanity test/ || /^See documentation for help/ || /^WARNING: / { inerr = 0 }
    /^(ERROR|FATAL): / { inerr = !/ANSIBLE_TEST_CONTENT_ROOT=/ }
    inerr { print }
  ' "$REPO/.run/sanity.log" >&2
  shopt -s nullglob
  for f in "$DEST"/tests/output/bot/ansible-test-sanity-*.json; do echo "  details: $f" >&2; done
fi
exit "$rc"
