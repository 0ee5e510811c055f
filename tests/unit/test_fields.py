"""The job spec's field table crossed with every backend: each field is compiled (the request
changes when it is set) or refused naming the field and the table's reason; never dropped.
And what is generated from the table (doc fragment, CRD, docs/spec.md) is what is committed."""

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._backend import CAPABILITY_DOCS
from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._fields import (
    BY_NAME, CONDUCT_FIELDS, FIELDS, GROUPS, OPTION_LENGTH, OPTION_LEVELS, ByBridge, argument_spec, bounded_json, group_of,
    leaf)
from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec

from backend_clients import client_for

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
URL = "http://127.0.0.1:9"
QASM = "OPENQASM 3.0;\ninclude \"stdgates.inc\";\nbit[1] c;\nh $0;\nc[0] = measure $0;\n"
# What each backend's job needs besides the field under test: a script it runs, and a Kubernetes
# Job's image, an IBM Quantum job's device.
BASES = {
    "slurm": {"script": "#!/bin/bash\necho base\n"},
    "lsf": {"script": "#!/bin/bash\necho base\n"},
    "ray": {"script": "#!/bin/bash\necho base\n"},
    "kubernetes": {"script": "#!/bin/bash\necho base\n", "backend_options": {"kubernetes": {"image": "debian:12"}}},
    "quantum": {"script": QASM, "queue": "fake_device"},
}
# Fields whose sample only makes sense with another field set (in the base and the sample alike).
COMPANIONS = {
    "resources.gpu_type": {"resources": {"gpus": 1}},
    "array.parallelism": {"array": {"indexes": "0-3"}},
    "retry.classes": {"retry": {"limit": 1}},
    "retry.backoff_seconds": {"retry": {"limit": 1}},
    "output.follow": {"output": {"tail_lines": 5}},
}
# A native field of each backend's own namespace of backend_options.
BACKEND_OPTIONS = {
    "slurm": {"requeue": True},
    "lsf": {"-G": "physics"},
    "ray": {"entrypoint_num_cpus": 2},
    "kubernetes": {"image": "debian:12", "ttl_seconds_after_finished": 60},
    "quantum": {"shots": 100},
}
SAMPLE_SCRIPTS = {"quantum": QASM.replace("h $0", "x $0")}
SLURM_VERSIONS = ("v0.0.38", "v0.0.41", "v0.0.45")


def merged(*parts):
    params = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, dict) and isinstance(params.get(key), dict):
                params[key] = merged(params[key], value)
            else:
                params[key] = value
    return params


def with_field(field, backend):
    if field.name == "backend_options":
        return {"backend_options": {backend: BACKEND_OPTIONS[backend]}}
    if field.name == "script":
        return {"script": SAMPLE_SCRIPTS.get(backend, field.sample)}
    if group_of(field):
        return {group_of(field): {leaf(field): field.sample}}
    return {field.name: field.sample}


def clients(backend):
    cls = BACKENDS[backend]
    if backend != "slurm":
        return [client_for(cls, URL, URL)]
    return [cls(URL, user="bridge", token="t", api_version=version) for version in SLURM_VERSIONS]


def rendered(client, params):
    return json.dumps(client.render(normalize_spec(params, client)), sort_keys=True, default=str)


CASES = [(field, backend) for field in FIELDS for backend in sorted(BACKENDS)]


def test_every_field_names_every_registered_backend():
    for field in FIELDS:
        assert sorted(field.backends) == sorted(BACKENDS), field.name


@pytest.mark.parametrize("field, backend", CASES, ids=["%s-%s" % (field.name, backend) for field, backend in CASES])
def test_a_field_is_compiled_or_refused_with_its_reason_never_dropped(field, backend):
    rule = field.backends[backend]
    base = merged(BASES[backend], COMPANIONS.get(field.name, {}), {"identity": "cross-1"})
    changed = merged(base, with_field(field, backend))
    for client in clients(backend):
        if rule.refused:
            with pytest.raises(SpecError) as refused:
                normalize_spec(changed, client)
            # A companion the backend refuses too (IBM Quantum's GPUs under a GPU type) is named first.
            companions = ["%s.%s" % (group, key) for group, values in COMPANIONS.get(field.name, {}).items()
                          for key in values if BY_NAME["%s.%s" % (group, key)].backends[backend].refused]
            assert refused.value.field in [field.name] + companions
            assert BY_NAME[refused.value.field].backends[backend].why in str(refused.value)
            for allowed in rule.allowed:
                rendered(client, merged(base, with_field(field._replace(sample=allowed), backend)))
        elif isinstance(rule, ByBridge):
            # Bridge does it around the request: the request is the same.
            assert rendered(client, changed) == rendered(client, base), "%s changes the request" % field.name
        else:
            assert rendered(client, changed) != rendered(client, base), "%s is dropped by %s" % (field.name, backend)


def test_the_argument_spec_is_the_table():
    spec = argument_spec()
    assert sorted(spec) == sorted(set(field.name.split(".")[0] for field in FIELDS))
    for group in GROUPS:
        members = [leaf(field) for field in FIELDS if group_of(field) == group.name]
        assert sorted(spec[group.name]["options"]) == sorted(members)
    assert spec["exclusive"] == {"type": "bool"} and BY_NAME["exclusive"].crd == {"type": "boolean"}


def test_generated_docs_and_crd_are_what_the_table_says():
    """And the return values the modules share are what tools/returns.yml says (make spec)."""
    check = subprocess.run([sys.executable, os.path.join(REPO, "tools", "generate_spec.py"), "--check"],
                           capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stderr


def test_capabilities_do_not_repeat_the_table():
    """What spec fields a backend honours is the table's to say, not a capability's."""
    names = set(field.name for field in FIELDS) | set(leaf(field) for field in FIELDS)
    assert not names & set(CAPABILITY_DOCS)


def test_conduct_fields_leave_the_derived_identity_as_it_was():
    base = {"script": "#!/bin/bash\necho base\n", "name": "same"}
    conducted = dict(base, retry={"limit": 2, "classes": ["timeout"], "backoff_seconds": 5}, output={"tail_lines": 3, "follow": True})
    assert normalize_spec(conducted)["identity"] == normalize_spec(base)["identity"]
    assert all(BY_NAME[name] for name in CONDUCT_FIELDS)
    arrayed = dict(base, array={"indexes": "0-3"})
    assert normalize_spec(arrayed)["identity"] != normalize_spec(base)["identity"]


def admitted_depth(schema, path):
    """How many arrays and objects deep a value `schema` admits may be; fails naming `path` where a
    value may be anything (x-kubernetes-preserve-unknown-fields with nothing to bound its content)."""
    free = schema.get("x-kubernetes-preserve-unknown-fields")
    if free and (schema.get("maxItems") != 0 and "items" not in schema
                 or schema.get("maxProperties") != 0 and "additionalProperties" not in schema):
        raise AssertionError("%s admits any JSON, as deep as the apiserver stores (10,000 levels)" % path)
    if free and "maxLength" not in schema:
        raise AssertionError("%s admits strings of any length" % path)
    children = [admitted_depth(child, "%s.%s" % (path, name)) for name, child in (schema.get("properties") or {}).items()]
    if isinstance(schema.get("additionalProperties"), dict):
        children.append(admitted_depth(schema["additionalProperties"], path + ".*"))
    if schema.get("items"):
        children.append(admitted_depth(schema["items"], path + "[*]"))
    opens = schema.get("type") in ("object", "array") or (free and (schema.get("maxItems") or schema.get("maxProperties")))
    return (1 if opens else 0) + max(children or [0])


def test_no_field_a_tenant_writes_admits_json_deeper_than_the_controller_decodes():
    # Issue 37: a BridgeJob nested 2,000 levels deep under backendOptions was stored, and Python's
    # decoder (about 1,000 levels) failed the controller's LIST and WATCH on it, for every tenant.
    import yaml  # pylint: disable=import-outside-toplevel

    with open(os.path.join(REPO, "deploy", "crd.yaml")) as handle:
        crd = yaml.safe_load(handle)
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert admitted_depth(spec, "spec") <= 16
    options = spec["properties"]["backendOptions"]["properties"]
    assert sorted(options) == sorted(BACKENDS) == sorted(OPTION_LEVELS)
    for name, schema in options.items():
        assert admitted_depth(schema, "spec.backendOptions." + name) == 1 + OPTION_LEVELS[name], name
    assert bounded_json(0) == {"x-kubernetes-preserve-unknown-fields": True, "maxLength": OPTION_LENGTH, "maxItems": 0,
                               "maxProperties": 0}
