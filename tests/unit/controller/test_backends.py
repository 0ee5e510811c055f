"""The CRD and docs/bridgejob.md agree with the collection's registry (_registry.BACKENDS), which the
controller imports (bridge_controller/backends.py).

The CRD and docs/bridgejob.md are text: each keeps its own copy of the backend names, credential
keys and job phases, and these tests fail when one of them disagrees with the registry.
"""

import os
import re

import pytest
import yaml

from ansible_collections.bridge.hpc.plugins.module_utils._backend import PHASES
from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS
from bridge_controller import backends
from bridge_controller.status import PHASE_BY_JOB_PHASE

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def needs_url(backend):
    """A backend reached through a URL names it (URL_NAME); an in-cluster one would set None."""
    return backend.URL_NAME is not None


def backend_schema():
    with open(os.path.join(REPO, "deploy", "crd.yaml")) as handle:
        crd = yaml.safe_load(handle)
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema["properties"]["spec"]["properties"]["backend"]


def rule_about(field, reason=None):
    rules = [rule for rule in backend_schema()["x-kubernetes-validations"]
             if rule.get("fieldPath") == "." + field and reason in (None, rule.get("reason"))]
    assert len(rules) == 1, "one rule about backend.%s, not %d" % (field, len(rules))
    return rules[0]


def named_backends(rule):
    return set(re.findall(r"'(\w+)'", rule["rule"]))


def test_a_credential_is_read_from_its_secret_key_and_handed_over_as_its_module_option():
    assert backends.credential_keys("slurm") == (("user", "user"), ("token", "token"))
    assert backends.credential_keys("quantum") == (("api_key", "apiKey"), ("service_crn", "serviceCrn"))
    assert backends.credential_keys("kubernetes") == (("kubeconfig_content", "kubeconfig"),)
    assert backends.credential_keys("pbs") == (), "a type the CRD refuses has no credentials"


def test_the_crds_backend_types_are_the_registry():
    assert sorted(backend_schema()["properties"]["type"]["enum"]) == sorted(BACKENDS)


def test_the_crds_phases_are_pending_and_the_phases_of_the_collections_jobs():
    with open(os.path.join(REPO, "deploy", "crd.yaml")) as handle:
        crd = yaml.safe_load(handle)
    status = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert status["properties"]["phase"]["enum"] == ["Pending"] + [PHASE_BY_JOB_PHASE[phase] for phase in PHASES]


def test_the_crd_requires_a_url_exactly_for_the_backends_that_have_one():
    assert "url" not in backend_schema()["required"], "a backend without a URL must be expressible"
    rule = rule_about("url", "FieldValueRequired")
    expected = "!(self.type in [%s]) || has(self.url)" % ", ".join(
        "'%s'" % name for name in sorted(BACKENDS) if needs_url(BACKENDS[name]))
    assert rule["rule"] == expected
    assert rule["reason"] == "FieldValueRequired"


def test_the_crds_per_backend_rules_name_registered_backends_with_what_they_declare():
    for rule in backend_schema()["x-kubernetes-validations"]:
        assert named_backends(rule) <= set(BACKENDS), rule["rule"]
    # apiVersion is the version of the manager's API, for backends that speak several.
    assert named_backends(rule_about("apiVersion")) == set(
        name for name, backend in BACKENDS.items() if "api_versions" in backend.CAPABILITIES)
    # iamUrl is the connection option iam_url, for the backends that declare it.
    assert named_backends(rule_about("iamUrl")) == set(
        name for name, backend in BACKENDS.items() if "iam_url" in backend.connection_options())
    # A backend that must have a Secret must have keys to put in it.
    assert all(BACKENDS[name].CREDENTIALS for name in named_backends(rule_about("credentialsSecretRef")))


def test_backend_namespace_is_allowed_exactly_for_the_backends_whose_jobs_live_in_a_namespace():
    namespaced = set(name for name in BACKENDS if backends.namespaced(name))
    assert namespaced == {"kubernetes"}
    assert named_backends(rule_about("namespace")) == namespaced


def test_the_controllers_own_connection_is_fixed_exactly_for_the_backends_reached_without_a_url():
    """A backend with no URL (kubernetes) falls back to the controller's own cluster and credentials
    when the BridgeJob names no Secret: there its url, CA and validateCerts are not the author's."""
    in_cluster = set(name for name, backend in BACKENDS.items() if not needs_url(backend))
    assert in_cluster
    for field in ("url", "caConfigMapRef", "validateCerts"):
        rule = rule_about(field, "FieldValueForbidden")
        assert named_backends(rule) == in_cluster, rule["rule"]
        assert "has(self.credentialsSecretRef)" in rule["rule"], rule["rule"]
        assert "without credentialsSecretRef" in rule["message"], rule["message"]


def test_the_resolver_puts_kubernetes_jobs_in_the_bridgejobs_namespace_unless_the_backend_names_one():
    from bridge_controller.resolver import Resolver

    obj = {"metadata": {"namespace": "team-a"}, "spec": {"backend": {"type": "kubernetes"}}}
    # The controller's own cluster, as the Job ServiceAccount: no tenant's URL to hold to the allow-list.
    assert Resolver(None).connection(obj) == {"type": "kubernetes", "url": None, "api_version": None, "iam_url": None,
                                              "validate_certs": True, "namespace": "team-a", "operator_chosen": True}
    obj["spec"]["backend"]["namespace"] = "batch"
    assert Resolver(None).connection(obj)["namespace"] == "batch"
    obj["spec"]["backend"] = {"type": "slurm", "url": "http://slurm:6820"}
    assert "namespace" not in Resolver(None).connection(obj)


def bridgejob_md_backends():
    """{type: (url column, credential keys)} of the Backends table of docs/bridgejob.md."""
    with open(os.path.join(REPO, "docs", "bridgejob.md")) as handle:
        section = handle.read().split("\n## Backends\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(r"`\w+`", cells[0]):
            rows[cells[0].strip("`")] = (cells[1], tuple(re.findall(r"`(\w+)`", cells[2])))
    return rows


def test_docs_bridgejob_md_lists_every_backend_with_its_url_and_credential_keys():
    documented = bridgejob_md_backends()
    assert sorted(documented) == sorted(BACKENDS)
    for name, (url, keys) in documented.items():
        assert keys == BACKENDS[name].secret_keys(), name
        assert url.endswith(", required") == needs_url(BACKENDS[name]), name


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_the_handoff_carries_exactly_the_backends_credential_keys(name):
    from bridge_controller.handoff import handoff_document

    backend = BACKENDS[name]
    secret = {"user": "u", "token": "t", "password": "p", "ca.crt": "c", "api_key": "k", "apiKey": "k",
              "serviceCrn": "crn"}
    document = handoff_document("poll", {"type": name}, secret, identities=())
    handed = [option for option, key in zip(backend.CREDENTIALS, backend.secret_keys()) if key in secret]
    assert sorted(set(document) - {"identities"}) == sorted(handed)


def test_the_crds_backend_options_namespaces_are_the_registry():
    with open(os.path.join(REPO, "deploy", "crd.yaml")) as handle:
        crd = yaml.safe_load(handle)
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    options = spec["backendOptions"]
    assert set(options["properties"]) == set(BACKENDS)
    assert options["maxProperties"] == len(BACKENDS)


def test_the_crd_takes_a_script_without_a_shebang_exactly_for_the_backends_whose_script_is_no_program():
    with open(os.path.join(REPO, "deploy", "crd.yaml")) as handle:
        crd = yaml.safe_load(handle)
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    rules = [rule for rule in spec["x-kubernetes-validations"] if "startsWith('#!')" in rule["rule"]]
    assert len(rules) == 1 and rules[0]["fieldPath"] == ".script"
    assert named_backends(rules[0]) == set(name for name, backend in BACKENDS.items() if backend.SCRIPT != "program")
    assert "x-kubernetes-validations" not in spec["properties"]["script"], "a rule on script alone cannot see the backend"


def backend_object_crds():
    with open(os.path.join(REPO, "deploy", "crd-backends.yaml")) as handle:
        return dict((crd["spec"]["names"]["kind"], crd) for crd in yaml.safe_load(handle)["items"])


@pytest.mark.parametrize("kind", ["BridgeBackend", "ClusterBridgeBackend"])
def test_the_backend_objects_connection_is_bridgejobs_spec_backend(kind):
    """deploy/crd-backends.yaml repeats spec.backend of deploy/crd.yaml: the same types (the
    registry), the same rules word for word, the same fields."""
    spec = backend_object_crds()[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    inline = backend_schema()
    assert sorted(spec["properties"]["type"]["enum"]) == sorted(BACKENDS)
    assert spec["properties"]["type"]["enum"] == inline["properties"]["type"]["enum"]
    assert spec["x-kubernetes-validations"] == inline["x-kubernetes-validations"]
    for field in ("url", "iamUrl", "namespace", "validateCerts"):
        assert dict(spec["properties"][field], description=None) == dict(inline["properties"][field], description=None), field
    assert spec["properties"]["apiVersion"]["pattern"] == inline["properties"]["apiVersion"]["pattern"]
    own = set(spec["properties"]) - set(inline["properties"])
    extra = {"probeIntervalSeconds"} | ({"probeCredentialsSecretRef", "namespaceSelector"} if kind.startswith("Cluster") else set())
    assert own == extra
