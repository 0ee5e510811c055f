#!/usr/bin/env bash
# Check the changelog and build the collection's documentation site (`make docs`).
#
#   tools/docs.sh            changelog lint, plugin docs lint, then the HTML site with the guides
#                            (docs/*.md, tools/docs_guides.py): <repo>/.run/docs/html/index.html
#   tools/docs.sh lint DIR [OPTION...]
#                            only the plugin docs lint, of the collection in DIR, with more
#                            lint-collection-docs options (tests/unit/test_docs_lint.py runs it
#                            on a broken copy)
#
# Fails on:
# * a changelog fragment or changelogs/changelog.yaml that antsibull-changelog rejects, or a
#   CHANGELOG.md that is not what changelog.yaml generates (edit the fragments, not the file);
# * any markup error or reference to a module, plugin, role, option or return value that does not
#   exist, in this collection or in ansible.builtin and ansible.posix (lint-collection-docs);
# * any Sphinx warning in the generated pages (-W), e.g. a bad reference or broken RST.
# The Sphinx configuration is docs/site/conf.py; the generated RST lands in .run/docs/rst.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
"$REPO/tools/bootstrap.sh"
export PATH="${BRIDGE_VENV:-$REPO/.venv}/bin:$PATH"
# bridge.hpc (the symlink to this checkout) and ansible.posix, which the stage role links to.
export ANSIBLE_COLLECTIONS_PATH="$REPO/.run/collections"
export ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false

lint_plugin_docs() {
  # rstcheck is skipped here: sphinx-build -W checks the same generated RST.
  antsibull-docs lint-collection-docs --plugin-docs --skip-rstcheck \
    --validate-collection-refs all --disallow-unknown-collection-refs "$@"
}

if [[ ${1:-} == lint ]]; then
  shift
  lint_plugin_docs "${@:?usage: tools/docs.sh lint DIR [OPTION...]}"
  exit
fi

cd "$REPO"
OUT="$REPO/.run/docs"
mkdir -p "$OUT"

# ---------------------------------------------------------------- changelog
antsibull-changelog lint
antsibull-changelog lint-changelog-yaml --strict changelogs/changelog.yaml
antsibull-changelog generate --output "$OUT/CHANGELOG.md" --output-format md
if ! cmp -s "$OUT/CHANGELOG.md" CHANGELOG.md; then
  echo "docs: CHANGELOG.md is not what changelogs/changelog.yaml generates:" >&2
  diff -u CHANGELOG.md "$OUT/CHANGELOG.md" >&2 || true
  echo "docs: change changelogs/ (fragments, then antsibull-changelog release), not CHANGELOG.md" >&2
  exit 1
fi

# ---------------------------------------------------------------- plugin docs
lint_plugin_docs "$REPO"

# Every page anew: an incremental Sphinx build would not repeat an unchanged page's warnings.
rm -rf "$OUT/rst" "$OUT/doctrees" "$OUT/html"
mkdir -p "$OUT/rst"
chmod og-w "$OUT/rst" # antsibull-docs refuses a destination others can write to
antsibull-docs collection --use-current --squash-hierarchy --fail-on-error --dest-dir "$OUT/rst" bridge.hpc
# The guides (docs/*.md) as pages of the site, with a table of contents on its index.
python "$REPO/tools/docs_guides.py" "$OUT/rst"
sphinx-build -q -W --keep-going -b html -c "$REPO/docs/site" -d "$OUT/doctrees" "$OUT/rst" "$OUT/html"
echo "docs: $OUT/html/index.html"
