"""Derived identities are pinned: a job submitted once is found again after an upgrade.

The identities below are what Bridge derives today (GOLDEN) and what Bridge 0.1.0 derived for the
same specs (LEGACY, computed with 0.1.0's _spec.py). A change of GOLDEN makes every user's
`state: present` without an explicit identity submit a second job: it must never happen.
"""

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils import _fields, _spec
from ansible_collections.bridge.hpc.plugins.module_utils._fields import Compiles, Field
from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_present, lookup_keys
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec

from fake_backend import FakeBackend

SPECS = [
    {"script": "#!/bin/bash\necho hello\n"},
    {"script": "#!/bin/bash\necho hello\n", "name": "hello"},
    {"script": "#!/bin/bash\nsrun ./a.out\n", "name": "mpi", "queue": "debug", "account": "proj1", "qos": "normal",
     "resources": {"nodes": 2, "tasks": 8, "cpus_per_task": 2, "memory": "4G", "time_limit": "1:00:00"}},
    {"script": "#!/bin/bash\necho $X\n", "name": "env", "environment": {"X": "1", "B": True}, "working_directory": "/srv",
     "stdout": "/srv/out.%j", "stderr": "/srv/err.%j", "constraints": "a100&ib"},
    {"script": "#!/usr/bin/env python3\nprint(1)\n", "name": "gpu",
     "resources": {"gpus": 2, "gpu_type": "a100", "memory_per_cpu": 512}, "backend_options": {"slurm": {"exclusive": "user"}}},
]
GOLDEN = ["bridge-757ea0f91275cddb", "hello-9db5f2d1861c0cc1", "mpi-d6fba1e6bf4eec5d", "env-64cdd62c6a80f2cd",
          "gpu-3ccfd5de060af8ef"]
LEGACY = ["bridge-26481ba02fd6dd7a", "hello-4231e0136a190f39", "mpi-f6f6a9c393f822df", "env-9a81d7ebde17a06c",
          "gpu-49d3f583b25cbc44"]


def module_params(params):
    """`params` as a module receives them: every option present, unset ones None or their default."""
    full = dict((name, option.get("default")) for name, option in _spec.JOB_SPEC_OPTIONS.items())
    full.update(params)
    resources = dict((name, None) for name in _spec.RESOURCE_OPTIONS)
    resources.update(params.get("resources") or {})
    full["resources"] = resources
    return full


@pytest.mark.parametrize("params, golden, legacy", list(zip(SPECS, GOLDEN, LEGACY)))
def test_derived_identities_are_pinned_and_look_up_the_0_1_0_identity_too(params, golden, legacy):
    spec = normalize_spec(module_params(params))
    assert spec["identity"] == golden
    assert spec["identity_aliases"] == (legacy,)
    # The same spec given with only the fields it sets (a BridgeJob, a direct call) is the same job.
    assert normalize_spec(dict(params))["identity"] == golden


def test_what_does_not_change_what_runs_does_not_change_the_identity():
    base = normalize_spec({"script": "#!/bin/bash\necho hi\n", "resources": {"memory": "4G"}})
    same = normalize_spec({"script": "#!/bin/bash\necho hi\n", "resources": {"memory": 4096, "gpus": None},
                           "environment": {}, "backend_options": {"slurm": {}}, "exclusive": False, "qos": ""})
    assert same["identity"] == base["identity"]


def test_a_field_added_later_leaves_the_identity_of_specs_that_do_not_set_it(monkeypatch):
    # As derive_identity sees a spec: before its name defaults to its identity.
    specs = [dict(spec, name=None if spec["name"] == spec["identity"] else spec["name"])
             for spec in (normalize_spec(module_params(params)) for params in SPECS)]
    added = Field("priority", "priority", dict(type="int"), ["A field of a later release."], None,
                  dict((name, Compiles("C(priority)")) for name in _fields.BY_NAME["name"].backends), 5)
    monkeypatch.setattr(_spec, "FIELDS", _fields.FIELDS + (added,))
    for spec, golden in zip(specs, GOLDEN):
        spec["priority"] = None  # what the new field normalizes to when a spec does not set it
        assert _spec.derive_identity(spec) == golden
    specs[0]["priority"] = 5
    assert _spec.derive_identity(specs[0]) != GOLDEN[0]


def test_a_spec_that_sets_a_field_0_1_0_lacked_has_no_legacy_alias():
    spec = normalize_spec({"script": "#!/bin/bash\necho hi\n", "exclusive": True})
    assert spec["identity_aliases"] == ()


def test_an_explicit_identity_has_no_alias():
    assert normalize_spec({"script": "#!/bin/bash\necho hi\n", "identity": "run-1"})["identity_aliases"] == ()


def test_an_upgrade_finds_the_job_0_1_0_submitted_and_submits_nothing():
    spec = normalize_spec(module_params(SPECS[1]))
    backend = FakeBackend()
    backend.submit(dict(spec, identity=LEGACY[1], identity_aliases=()))
    result = ensure_present(backend, spec)
    assert result["changed"] is False and len(backend.submits) == 1
    assert result["job"]["identity"] == LEGACY[1]


def test_a_defaulted_name_is_looked_up_under_each_identity_it_would_have_been():
    spec = normalize_spec(module_params(SPECS[0]))
    assert lookup_keys(spec) == ([GOLDEN[0], LEGACY[0]], [GOLDEN[0], LEGACY[0]])
    named = normalize_spec(module_params(SPECS[1]))
    assert lookup_keys(named) == ([GOLDEN[1], LEGACY[1]], ["hello", "hello"])
