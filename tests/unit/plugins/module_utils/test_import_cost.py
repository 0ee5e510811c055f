"""What a module run imports: every module imports the backend registry, so a backend's heavy
library (the kubernetes client, about a fifth of a second of CPU) is imported by the first client
of that backend, not by the modules of the others."""

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
COLLECTIONS = os.path.join(REPO, ".run", "collections")


def imported_after(statement):
    """The top-level packages a fresh interpreter has imported after `statement`."""
    code = "import sys; sys.path.insert(0, %r); %s; print(' '.join(sorted(set(m.split('.')[0] for m in sys.modules))))" % (
        COLLECTIONS, statement)
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split()


@pytest.mark.parametrize("module", ["_module", "_registry", "_jobs"])
def test_the_shared_module_utils_do_not_import_the_kubernetes_client(module):
    assert "kubernetes" not in imported_after(
        "import ansible_collections.bridge.hpc.plugins.module_utils.%s" % module)


def test_a_kubernetes_client_imports_it_when_made():
    packages = imported_after("from ansible_collections.bridge.hpc.plugins.module_utils.k8s.client import K8sClient; "
                              "K8sClient(url='https://127.0.0.1:1', api_key='t')")
    assert "kubernetes" in packages
