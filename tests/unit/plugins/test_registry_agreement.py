"""What the collection says about its backends agrees with the registry (_registry.BACKENDS).

Module docs, doc fragments, action groups, the playbooks' environment variables and the user docs
are text that cannot import the registry; these tests fail when a backend is added, renamed or
changed in one place only.
The controller imports the registry; the CRD is tested against it in tests/unit/controller.
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
# The third module reads what the manager runs jobs on; IBM Quantum has devices, not a cluster;
# Kubernetes' nodes and queues are the inventory plugin's (and kubernetes.core.k8s_info's).
SERVICE_INFO_SUFFIX = {"quantum": "_backend_info", "kubernetes": None}
# Module names start with the backend's name, or with the short name its community uses.
MODULE_PREFIX = {"kubernetes": "k8s"}


def role_modules(name):
    prefix = MODULE_PREFIX.get(name, name)
    modules = []
    for suffix in ROLE_SUFFIXES:
        if suffix == "_cluster_info":
            suffix = SERVICE_INFO_SUFFIX.get(name, suffix)
        if suffix:
            modules.append(prefix + suffix)
    return modules


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
    assert groups[name] == role_modules(name)
    for module in role_modules(name):
        assert os.path.exists(os.path.join(REPO, "plugins", "modules", module + ".py"))
    assert os.path.exists(os.path.join(REPO, "plugins", "action", MODULE_PREFIX.get(name, name) + "_job.py")), \
        "script_file is read on the controller"
    assert os.path.exists(os.path.join(REPO, "docs", "%s.md" % name))


def inventory_options(plugin):
    """An inventory plugin's options, merged with those of this collection's fragments it extends
    (per option, the plugin's keys win: how ansible-doc and the plugin loader merge them)."""
    docs = yaml.safe_load(plugin.DOCUMENTATION)
    options = {}
    for slug in docs.get("extends_documentation_fragment") or []:
        if slug.startswith("bridge.hpc."):
            options.update(documented_options(fragment(slug.split(".")[-1]).DOCUMENTATION))
    for name, spec in docs["options"].items():
        options[name] = dict(options.get(name) or {}, **spec)
    return options


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_each_backends_inventory_plugin_documents_its_connection(name):
    """The inventory plugin of a backend (plugins/inventory/<name>.py, where there is one) has the
    backend's connection options, with their types, defaults and environment variables."""
    if not os.path.exists(os.path.join(REPO, "plugins", "inventory", "%s.py" % name)):
        pytest.skip("backend %s has no inventory plugin" % name)
    backend = BACKENDS[name]
    plugin = importlib.import_module("ansible_collections.bridge.hpc.plugins.inventory.%s" % name)
    documented = inventory_options(plugin)
    assert documented["plugin"]["choices"] == ["bridge.hpc.%s" % name] == [plugin.InventoryModule.NAME]
    for option, spec in backend.connection_options().items():
        assert documented[option]["type"] == spec["type"], option
        assert documented[option].get("default") == spec.get("default"), option
        variables = [item["name"] for item in documented[option].get("env") or []]
        # The plugin loader takes the last of an option's variables that is set, ENV the first.
        assert variables == list(reversed(backend.ENV.get(option, ()))), option
    for secret in backend.SECRETS:
        assert re.search(r"never part of (a result or )?an error message", " ".join(documented[secret]["description"]),
                         re.IGNORECASE), secret
    assert plugin.InventoryModule.MANAGER == backend.TITLE
    assert plugin.InventoryModule.URL_ENV == (backend.ENV["url"][0] if backend.URL_NAME else None)


def test_the_playbooks_read_from_the_environment_exactly_what_each_backends_modules_read():
    """playbooks/vars/backends_from_env.yml gives the backend-neutral modules, which have no
    environment fallbacks, each backend's ENV: every option's variables, first set first."""
    with open(os.path.join(REPO, "playbooks", "vars", "backends_from_env.yml")) as handle:
        variables = yaml.safe_load(handle)
    assert list(variables) == ["bridge_env_backends"]
    settings = variables["bridge_env_backends"]
    assert sorted(settings) == sorted(BACKENDS)
    for name, backend in BACKENDS.items():
        assert settings[name] == dict((option, "{{ %s }}" % " or ".join(
            "lookup('ansible.builtin.env', '%s')" % variable for variable in names)) for option, names in backend.ENV.items())


# The modules that take the login node a Slurm job's output is read on (_login.LOGIN_OPTIONS).
LOGIN_MODULES = ("slurm_job", "job", "jobs", "job_info")


def test_the_login_fragment_documents_the_login_option_and_no_connection_fragment_repeats_it():
    """`login` is one doc fragment (bridge.hpc.login), not a connection option of any backend: the
    connection fragments and inventory plugins stay as the registry says, and the modules that read
    a Slurm job's output extend the login fragment."""
    from ansible_collections.bridge.hpc.plugins.module_utils._login import LOGIN_OPTIONS

    documented = documented_options(fragment("login").DOCUMENTATION)
    assert sorted(documented) == sorted(LOGIN_OPTIONS) == ["login"]
    suboptions = documented["login"]["suboptions"]
    spec = LOGIN_OPTIONS["login"]["options"]
    assert sorted(suboptions) == sorted(spec)
    for name, option in spec.items():
        assert suboptions[name]["type"] == option["type"], name
        assert suboptions[name].get("default") == option.get("default"), name
        assert suboptions[name].get("required", False) == option.get("required", False), name
        if option.get("no_log"):
            assert "Never logged" in " ".join(suboptions[name]["description"]), name
    for name in ["connection"] + sorted(BACKENDS):
        assert "login" not in documented_options(fragment(name).DOCUMENTATION), name
    for module in LOGIN_MODULES:
        docs = yaml.safe_load(importlib.import_module("ansible_collections.bridge.hpc.plugins.modules.%s" % module).DOCUMENTATION)
        assert "bridge.hpc.login" in docs["extends_documentation_fragment"], module
