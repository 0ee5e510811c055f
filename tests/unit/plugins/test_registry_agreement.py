"""What the collection says about its backends agrees with the registry (_registry.BACKENDS).

Module docs, doc fragments, action groups and the user docs are text that cannot import the
registry; these tests fail when a backend is added, renamed or changed in one place only.
The controller's side (CRD, credential keys) is tested in tests/unit/controller.
"""

import importlib
import os
import re

import pytest
import yaml

from ansible_collections.bridge.hpc.plugins.module_utils._module import any_backend_options
from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
NEUTRAL_MODULES = ("job", "jobs", "job_info")
ROLE_SUFFIXES = ("_job", "_job_info", "_cluster_info")


def documented_options(text):
    return yaml.safe_load(text).get("options") or {}


def fragment(name):
    return importlib.import_module("ansible_collections.bridge.hpc.plugins.doc_fragments.%s" % name).ModuleDocFragment


@pytest.mark.parametrize("module", NEUTRAL_MODULES)
def test_backend_choices_of_the_neutral_modules_are_the_registry(module):
    docs = importlib.import_module("ansible_collections.bridge.hpc.plugins.modules.%s" % module).DOCUMENTATION
    assert documented_options(docs)["backend"]["choices"] == sorted(BACKENDS)


def test_the_neutral_connection_fragment_documents_every_backends_options():
    documented = documented_options(fragment("connection").DOCUMENTATION)
    options = any_backend_options()
    options.pop("backend")
    assert sorted(documented) == sorted(options)
    for name, spec in options.items():
        assert documented[name]["type"] == spec["type"], name
        assert documented[name].get("default") == spec.get("default"), name


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_each_backend_has_its_connection_fragment_modules_and_action_group(name):
    backend = BACKENDS[name]
    documented = documented_options(fragment(name).DOCUMENTATION)
    options = backend.connection_options()
    assert sorted(documented) == sorted(options)
    for option, variables in backend.ENV.items():
        for variable in variables:
            assert "E(%s)" % variable in " ".join(documented[option]["description"]), (option, variable)
    for secret in backend.SECRETS:
        assert "Never logged" in " ".join(documented[secret]["description"])
    with open(os.path.join(REPO, "meta", "runtime.yml")) as handle:
        groups = yaml.safe_load(handle)["action_groups"]
    assert groups[name] == [name + suffix for suffix in ROLE_SUFFIXES]
    for suffix in ROLE_SUFFIXES:
        assert os.path.exists(os.path.join(REPO, "plugins", "modules", name + suffix + ".py"))
    assert os.path.exists(os.path.join(REPO, "docs", "%s.md" % name))


def test_backend_options_namespaces_are_documented_as_the_registry():
    text = " ".join(documented_options(fragment("job_spec").DOCUMENTATION)["backend_options"]["description"])
    assert sorted(re.findall(r"C\((\w+)\)", text.split("Allowed namespaces")[1].split(".")[0])) == sorted(BACKENDS)
    with open(os.path.join(REPO, "docs", "spec.md")) as handle:
        line = next(line for line in handle if line.startswith("| `backend_options`"))
    assert sorted(re.findall(r"`(\w+)`", line.split("registered backend")[1].split(")")[0])) == sorted(BACKENDS)
