#!/usr/bin/env bash
# Build the collection artifact, install it into a throw-away collections dir and check
# that `ansible-doc` renders every module, inventory plugin and other documented plugin
# found in the *installed* artifact.
#
#   tools/galaxy_build_check.sh        artifact left in <repo>/.run/dist/
#
# Fails if the build or install fails, if the artifact contains development-only paths
# (.venv, .run, tests/output, ...), or if any plugin's documentation does not render.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
"$REPO/tools/bootstrap.sh"
VENV="${BRIDGE_VENV:-$REPO/.venv}"
export PATH="$VENV/bin:$PATH"

DIST="$REPO/.run/dist"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/bridge-galaxy-check.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# Only the installed artifact may be visible to ansible-doc.
export ANSIBLE_COLLECTIONS_PATH="$WORK/collections"
export ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false
export ANSIBLE_NOCOLOR=1
export ANSIBLE_FORCE_COLOR=0
export ANSIBLE_DEPRECATION_WARNINGS=0

# ------------------------------------------------------------------ build
rm -rf "$DIST"
mkdir -p "$DIST"
ansible-galaxy collection build --force --output-path "$DIST" "$REPO" >"$WORK/build.log" 2>&1 || {
  cat "$WORK/build.log" >&2; echo "galaxy_build_check: build FAILED" >&2; exit 1; }
shopt -s nullglob
artifacts=("$DIST"/*.tar.gz)
shopt -u nullglob
if ((${#artifacts[@]} != 1)); then
  echo "galaxy_build_check: expected one artifact in $DIST, found ${#artifacts[@]}" >&2; exit 1
fi
artifact="${artifacts[0]}"
tar -tzf "$artifact" >"$WORK/contents.txt"
echo "built $(basename "$artifact") ($(du -h "$artifact" | cut -f1), $(grep -vc '/$' "$WORK/contents.txt") files)"

# Development-only content must not leak into the artifact.
leaked="$(grep -E '^(\./)?(\.venv|\.run|\.ansible|\.git|\.ci|\.pytest_cache|tests/output|locks)(/|$)|__pycache__|\.pyc$' "$WORK/contents.txt" || true)"
if [[ -n "$leaked" ]]; then
  echo "galaxy_build_check: artifact contains development-only paths (fix build_ignore in galaxy.yml):" >&2
  echo "$leaked" | head -20 >&2
  exit 1
fi

# ansible-galaxy builds without the readme named in galaxy.yml; Galaxy rejects that. Galaxy and
# the Ansible package read a collection's changelog from changelogs/changelog.yaml.
readme="$(sed -n 's/^readme:[[:space:]]*\([^[:space:]#]*\).*/\1/p' "$REPO/galaxy.yml")"
for required in "${readme:-<the readme galaxy.yml does not name>}" changelogs/changelog.yaml; do
  if ! grep -qxF "$required" "$WORK/contents.txt"; then
    echo "galaxy_build_check: $required is not in the artifact" >&2
    exit 1
  fi
done

# ---------------------------------------------------------------- install
# --no-deps: galaxy.yml's dependencies (ansible.posix) are on Galaxy, which is not reachable here;
# the artifact's own plugins are what this checks, and none of them imports a dependency.
ansible-galaxy collection install --offline --no-deps --force -p "$ANSIBLE_COLLECTIONS_PATH" "$artifact" \
  >"$WORK/install.log" 2>&1 || {
  cat "$WORK/install.log" >&2; echo "galaxy_build_check: install FAILED" >&2; exit 1; }

NS="$(sed -n 's/^namespace:[[:space:]]*\([A-Za-z0-9_]*\).*/\1/p' "$REPO/galaxy.yml")"
NAME="$(sed -n 's/^name:[[:space:]]*\([A-Za-z0-9_]*\).*/\1/p' "$REPO/galaxy.yml")"
INSTALLED="$ANSIBLE_COLLECTIONS_PATH/ansible_collections/$NS/$NAME"
[[ -f "$INSTALLED/MANIFEST.json" ]] || {
  echo "galaxy_build_check: $INSTALLED/MANIFEST.json missing after install" >&2; exit 1; }

# ------------------------------------------------------- enumerate plugins
# modules and inventory plugins always; other plugin types when they carry DOCUMENTATION
# (e.g. the ones that use doc fragments). filter/test plugins are skipped: one file can
# hold several plugins, documented in YAML side-car files.
targets=()
shopt -s nullglob
for f in "$INSTALLED"/plugins/modules/*.py; do
  n="$(basename "$f" .py)"; [[ "$n" == __init__ ]] && continue
  targets+=("module:$n")
done
for f in "$INSTALLED"/plugins/inventory/*.py; do
  n="$(basename "$f" .py)"; [[ "$n" == __init__ ]] && continue
  targets+=("inventory:$n")
done
for type in become cache callback cliconf connection httpapi lookup netconf shell strategy vars; do
  for f in "$INSTALLED/plugins/$type"/*.py; do
    n="$(basename "$f" .py)"; [[ "$n" == __init__ ]] && continue
    grep -q '^DOCUMENTATION' "$f" && targets+=("$type:$n")
  done
done
shopt -u nullglob

if ((${#targets[@]} == 0)); then
  echo "galaxy_build_check: no documented plugins found in the artifact (nothing to check)"
  exit 0
fi

# ------------------------------------------------------------ ansible-doc
# ansible-doc exits 0 with only a warning for a missing/broken plugin, so check the JSON
# output has the documentation, then render the text form and require a clean stderr.
fail=0
for t in "${targets[@]}"; do
  type="${t%%:*}"; fqcn="$NS.$NAME.${t#*:}"
  if ! ansible-doc -t "$type" --json "$fqcn" >"$WORK/doc.json" 2>"$WORK/doc.err" ||
    ! python - "$fqcn" "$WORK/doc.json" <<'EOF'
import json, sys
fqcn, path = sys.argv[1], sys.argv[2]
data = json.load(open(path))
doc = (data.get(fqcn) or {}).get('doc') or {}
sys.exit(0 if doc.get('short_description') or doc.get('description') else 1)
EOF
  then
    echo "FAIL  $type $fqcn: no documentation in ansible-doc --json" >&2
    cat "$WORK/doc.err" >&2
    fail=1
    continue
  fi
  if ! ansible-doc -t "$type" "$fqcn" >"$WORK/doc.txt" 2>"$WORK/doc.err" || [[ -s "$WORK/doc.err" ]] ||
    ! grep -q . "$WORK/doc.txt"; then
    echo "FAIL  $type $fqcn: ansible-doc did not render cleanly" >&2
    cat "$WORK/doc.err" >&2
    fail=1
    continue
  fi
  echo "ok    $type $fqcn"
done

if ((fail)); then
  echo "galaxy_build_check: FAILED" >&2
  exit 1
fi
echo "galaxy_build_check: ${#targets[@]} plugin(s) rendered from $(basename "$artifact")"
