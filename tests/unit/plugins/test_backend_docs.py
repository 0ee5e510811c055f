"""Each backend's job module documents what that backend does with the job spec, and only that.

The options are one argument spec for every backend, but a user reads `ansible-doc
bridge.hpc.k8s_job` to learn what Kubernetes makes of `working_directory`, not Slurm's default.
Each backend's module extends its own part of the job_spec fragment (job_spec.for_<backend>,
generated from the field table by tools/generate_spec.py); these tests fail when a module extends
the all-backends part, when a backend's part names another backend, or leaves a field out.
"""

import importlib
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from ansible_collections.bridge.hpc.plugins.module_utils._fields import FIELDS, GROUPS, argument_spec, group_of, leaf
from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS

MODULE_PREFIX = {"kubernetes": "k8s"}
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FRAGMENT = importlib.import_module("ansible_collections.bridge.hpc.plugins.doc_fragments.job_spec").ModuleDocFragment


def options_of(text):
    return yaml.safe_load(text)["options"]


def module_docs(name):
    module = importlib.import_module("ansible_collections.bridge.hpc.plugins.modules.%s_job" % MODULE_PREFIX.get(name, name))
    return yaml.safe_load(module.DOCUMENTATION)


def documented(options, field):
    group = group_of(field)
    return options[group]["suboptions"][leaf(field)] if group else options[field.name]


def descriptions(options):
    for name, option in options.items():
        yield name, " ".join(option["description"])
        for sub, suboption in (option.get("suboptions") or {}).items():
            yield "%s.%s" % (name, sub), " ".join(suboption["description"])


def other_titles(name):
    return [backend.TITLE for other, backend in BACKENDS.items() if other != name]


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_each_backends_job_module_extends_its_own_part_of_the_spec_fragment(name):
    extends = module_docs(name)["extends_documentation_fragment"]
    assert "bridge.hpc.job_spec.for_%s" % name in extends
    assert "bridge.hpc.job_spec.lifecycle" in extends
    assert "bridge.hpc.job_spec" not in extends, "the all-backends part speaks of every backend"


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_a_backends_part_says_what_that_backend_does_with_every_field(name):
    options = options_of(getattr(FRAGMENT, "FOR_" + name.upper()))
    title = BACKENDS[name].TITLE
    for field in FIELDS:
        rule = field.backends[name]
        text = " ".join(documented(options, field)["description"])
        if rule.refused:
            assert "%s: refused" % title in text and rule.why in text, (field.name, text)
        else:
            assert "%s: %s" % (title, rule.how) in text, (field.name, text)
    assert set(options) | set(options_of(FRAGMENT.LIFECYCLE)) >= set(argument_spec())


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_a_backends_part_names_no_other_backend(name):
    options = options_of(getattr(FRAGMENT, "FOR_" + name.upper()))
    for option, text in descriptions(options):
        for title in other_titles(name):
            assert not re.search(r"\b%s\b" % re.escape(title), text), (name, option, title, text)


def test_cancel_rejected_says_per_backend_what_it_cancels():
    for name, backend in BACKENDS.items():
        text = " ".join(options_of(getattr(FRAGMENT, "FOR_" + name.upper()))["cancel_rejected"]["description"])
        assert (backend.NEVER_STARTS or "changes nothing") in text, (name, text)
    assert "cancel_rejected" not in options_of(FRAGMENT.LIFECYCLE)


def test_the_all_backends_part_is_for_the_module_that_takes_any_backend():
    job = yaml.safe_load(importlib.import_module("ansible_collections.bridge.hpc.plugins.modules.job").DOCUMENTATION)
    assert job["extends_documentation_fragment"][-2:] == ["bridge.hpc.job_spec.lifecycle", "bridge.hpc.job_spec"]
    options = options_of(FRAGMENT.DOCUMENTATION)
    for group in GROUPS:
        assert set(options[group.name]["suboptions"]) == set(leaf(f) for f in FIELDS if group_of(f) == group.name)
    for backend in BACKENDS.values():
        assert "%s: " % backend.TITLE in " ".join(options["script"]["description"])


def test_ansible_doc_shows_each_backends_module_its_own_spec_options():
    # What a user reads, through Ansible's own fragment loading: a part named job_spec.slurm would
    # be resolved to the slurm connection fragment instead (hence job_spec.for_slurm).
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".run", "collections"),
               ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false")
    modules = ["bridge.hpc.%s_job" % MODULE_PREFIX.get(name, name) for name in sorted(BACKENDS)]
    done = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-doc"), "--json"] + modules,
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    docs = json.loads(done.stdout)
    for name, module in zip(sorted(BACKENDS), modules):
        options = docs[module]["doc"]["options"]
        assert set(options) >= set(argument_spec()) | {"state", "wait", "cancel_rejected"}, module
        script = " ".join(options["script"]["description"])
        assert "%s: " % BACKENDS[name].TITLE in script
        for title in other_titles(name):
            assert not re.search(r"\b%s:" % re.escape(title), script), (module, title)
