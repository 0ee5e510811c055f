"""awx/inventory_sources/ (docs/awx.md, Inventory sources): one file per backend that AWX syncs
as an inventory source Sourced from a Project, with the backend's Bridge credential on the source.
Each file names its backend's plugin, has a name that plugin accepts, holds no secret, and the
plugin's URL and credential options are ones the backend's credential type injects."""

import glob
import importlib
import os

import pytest
import yaml

from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCES = os.path.join(REPO, "awx", "inventory_sources")
SECRET_OPTIONS = ("token", "password", "api_key", "kubeconfig")


def load(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def source_of(name):
    found = [path for path in glob.glob(os.path.join(SOURCES, "*.yml")) if load(path)["plugin"] == "bridge.hpc.%s" % name]
    assert len(found) == 1, (name, found)
    return found[0]


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_each_backend_has_an_inventory_source_its_credential_configures(name):
    path = source_of(name)
    plugin = importlib.import_module("ansible_collections.bridge.hpc.plugins.inventory.%s" % name)
    assert path.endswith(plugin.InventoryModule.FILE_SUFFIXES), "the plugin's verify_file would not take %s" % path
    options = yaml.safe_load(plugin.DOCUMENTATION)["options"]
    settings = load(path)
    assert set(settings) <= set(options), set(settings) - set(options)
    assert not set(settings) & set(SECRET_OPTIONS), "secrets come from the credential, not the project"
    injected = set(load(os.path.join(REPO, "awx", "credential_types", "%s.yml" % name))["injectors"]["env"])
    # Where the backend is and who connects: what the source cannot do without.
    # A backend reached without a URL (kubernetes: a kubeconfig, or the K8S_AUTH_HOST of AWX's own
    # Kubernetes credential type instead of its Bridge type) does not need its url injected.
    needed = ("url",) if BACKENDS[name].URL_NAME else ()
    for option in needed + ("kubeconfig",) + tuple(BACKENDS[name].CREDENTIALS):
        variables = [entry["name"] for entry in (options.get(option) or {}).get("env") or []]
        if variables:
            assert injected & set(variables), "%s: option %s is not injected (%s)" % (name, option, variables)
    assert any(injected & set(entry["name"] for entry in (options.get(option) or {}).get("env") or [])
               for option in ("url", "kubeconfig"))
