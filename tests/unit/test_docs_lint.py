"""`make docs` fails on a broken reference: tools/docs.sh's plugin docs lint, run on a copy of the
collection with one module whose docs are broken on purpose."""

import os
import shutil
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# A module whose docs reference nothing else, so the copy needs no other plugin.
MODULE = "s3_object_sync"
BROKEN = "  - See M(bridge.hpc.no_such_module), O(no_such_option) and RV(no_such_value), and I(unclosed.\n"


def test_broken_references_fail_the_docs_lint(tmp_path):
    collection = tmp_path / "ansible_collections" / "bridge" / "hpc"
    shutil.copytree(os.path.join(REPO, "meta"), collection / "meta")
    shutil.copy(os.path.join(REPO, "galaxy.yml"), collection / "galaxy.yml")
    modules = collection / "plugins" / "modules"
    modules.mkdir(parents=True)
    with open(os.path.join(REPO, "plugins", "modules", MODULE + ".py")) as source:
        text = source.read()
    assert "\ndescription:\n" in text
    text = text.replace("\ndescription:\n", "\ndescription:\n" + BROKEN, 1)
    text = text.replace("\noptions:\n", "\nseealso:\n  - module: bridge.hpc.no_such_seealso\noptions:\n", 1)
    (modules / (MODULE + ".py")).write_text(text)

    # References to other collections (checked by `make docs`) cost 6 s more to check; none here.
    lint = subprocess.run(["bash", os.path.join(REPO, "tools", "docs.sh"), "lint", str(collection),
                           "--validate-collection-refs", "self"],
                          capture_output=True, text=True, timeout=300, check=False)

    assert lint.returncode != 0, lint.stdout + lint.stderr
    for problem in ("M(bridge.hpc.no_such_module): there is no module bridge.hpc.no_such_module",
                    "O(no_such_option): option name does not reference to an existing option",
                    "RV(no_such_value): return value name does not reference to an existing return value",
                    'Cannot find closing ")"',
                    "no_such_seealso"):
        assert problem in lint.stdout, lint.stdout + lint.stderr
