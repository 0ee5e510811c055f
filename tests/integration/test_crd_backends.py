"""deploy/crd-backends.yaml against a real kube-apiserver: BridgeBackend and ClusterBridgeBackend are
served with their names and printer columns, take valid objects with their defaults filled in, and
refuse bad ones with a message naming the field.

The control plane and the namespace are test_crd.py's fixtures (a fresh namespace per run).
"""

import uuid

import pytest
from kubernetes import client

from test_crd import BACKEND_CRD_NAMES, GROUP, VERSION, rejection
from test_crd import admin, deployed, kube, namespace  # noqa: F401 pylint: disable=unused-import

PLURALS = {"BridgeBackend": "bridgebackends", "ClusterBridgeBackend": "clusterbridgebackends"}
RUN = uuid.uuid4().hex[:6]
LABELS = {"bridge.dev/test": "crd-backends-%s" % RUN}


def body(kind, name, **spec):
    return {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": kind,
            "metadata": {"name": "%s-%s" % (name, RUN), "labels": LABELS}, "spec": spec}


def create(objects, namespace, kind, name, dry_run=None, **spec):  # pylint: disable=redefined-outer-name
    obj = body(kind, name, **spec)
    if kind == "BridgeBackend":
        return objects.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURALS[kind], obj, dry_run=dry_run)
    return objects.create_cluster_custom_object(GROUP, VERSION, PLURALS[kind], obj, dry_run=dry_run)


@pytest.fixture(scope="module")
def objects(deployed):  # pylint: disable=redefined-outer-name
    custom = client.CustomObjectsApi(deployed)
    yield custom
    for item in custom.list_cluster_custom_object(GROUP, VERSION, "clusterbridgebackends",
                                                  label_selector="bridge.dev/test=%s" % LABELS["bridge.dev/test"])["items"]:
        custom.delete_cluster_custom_object(GROUP, VERSION, "clusterbridgebackends", item["metadata"]["name"])


def test_both_kinds_are_established_with_names_scopes_and_printer_columns(deployed):  # pylint: disable=redefined-outer-name
    extensions = client.ApiextensionsV1Api(deployed)
    served = dict((name, extensions.read_custom_resource_definition(name)) for name in BACKEND_CRD_NAMES)
    local, site = served["bridgebackends.bridge.dev"], served["clusterbridgebackends.bridge.dev"]
    assert (local.spec.names.kind, local.spec.scope, local.spec.names.short_names) == ("BridgeBackend", "Namespaced", ["bbe"])
    assert (site.spec.names.kind, site.spec.scope, site.spec.names.short_names) == ("ClusterBridgeBackend", "Cluster", ["cbbe"])
    for crd in served.values():
        assert crd.spec.names.categories == ["bridge"]
        version = crd.spec.versions[0]
        assert version.subresources.status is not None
        assert [(c.name, c.json_path) for c in version.additional_printer_columns] == [
            ("Type", ".spec.type"), ("Ready", '.status.conditions[?(@.type=="Ready")].status'),
            ("Version", ".status.version"), ("Queues", ".status.queueCount"), ("Age", ".metadata.creationTimestamp")]


@pytest.mark.parametrize("kind", ["BridgeBackend", "ClusterBridgeBackend"])
def test_a_backend_object_takes_its_defaults_and_the_table_shows_its_status(objects, deployed, namespace, kind):  # pylint: disable=redefined-outer-name
    created = create(objects, namespace, kind, "slurm", type="slurm", url="http://slurm.example.org:6820",
                     credentialsSecretRef={"name": "slurm"},
                     caConfigMapRef={"name": "ca"} if kind == "BridgeBackend" else {"name": "ca", "namespace": "bridge-system"})
    spec = created["spec"]
    assert (spec["validateCerts"], spec["probeIntervalSeconds"], spec["caConfigMapRef"]["key"]) == (True, 60, "ca.crt")
    name = created["metadata"]["name"]
    status = {"status": {"observedGeneration": 1, "manager": "Slurm", "version": "25.05.1", "apiVersion": "v0.0.42",
                         "lastProbeTime": "2026-12-03T18:00:00Z", "queueCount": 2,
                         "queues": [{"name": "debug", "state": "UP", "usable": True, "default": True, "maxTimeMinutes": 60,
                                     "cpusPerNode": 4, "gpuTypes": [], "features": ["ib"], "pending": 0, "running": 1},
                                    {"state": "ready", "usable": True}],
                         "conditions": [{"type": "Ready", "status": "True", "reason": "Probed", "message": "ok",
                                         "lastTransitionTime": "2026-12-03T18:00:00Z", "observedGeneration": 1}]}}
    if kind == "BridgeBackend":
        objects.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURALS[kind], name, status)
        path = "/apis/%s/%s/namespaces/%s/%s/%s" % (GROUP, VERSION, namespace, PLURALS[kind], name)
    else:
        objects.patch_cluster_custom_object_status(GROUP, VERSION, PLURALS[kind], name, status)
        path = "/apis/%s/%s/%s/%s" % (GROUP, VERSION, PLURALS[kind], name)
    table = deployed.call_api(path, "GET", header_params={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
                              response_type="object", auth_settings=["BearerToken"], _return_http_data_only=True)
    assert [column["name"] for column in table["columnDefinitions"]] == ["Name", "Type", "Ready", "Version", "Queues", "Age"]
    assert table["rows"][0]["cells"][:5] == [name, "slurm", "True", "25.05.1", 2]
    if kind == "BridgeBackend":
        objects.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURALS[kind], name)


BAD = [
    # (kind, spec, the field the answer names, words of its message)
    ("BridgeBackend", {"type": "pbs", "url": "http://x:1"}, "spec.type", "Unsupported value"),
    ("BridgeBackend", {"type": "slurm", "credentialsSecretRef": {"name": "s"}}, "spec.url", "is required for backend.type slurm"),
    ("ClusterBridgeBackend", {"type": "lsf", "url": "http://x:1"}, "spec.credentialsSecretRef", "is required for backend.type lsf"),
    ("BridgeBackend", {"type": "ray", "url": "http://x:1", "apiVersion": "v0.0.42"}, "spec.apiVersion", "only applies to backend.type slurm"),
    ("BridgeBackend", {"type": "ray", "url": "ftp://x"}, "spec.url", "is not an http:// or https:// URL"),
    ("BridgeBackend", {"type": "kubernetes", "url": "https://elsewhere:6443"}, "spec.url", "without credentialsSecretRef"),
    ("ClusterBridgeBackend", {"type": "kubernetes", "validateCerts": False}, "spec.validateCerts", "without credentialsSecretRef"),
    ("BridgeBackend", {"type": "ray", "url": "http://x:1", "probeIntervalSeconds": 1}, "spec.probeIntervalSeconds", "greater than or equal to 5"),
    ("ClusterBridgeBackend", {"type": "ray", "url": "http://x:1", "caConfigMapRef": {"name": "ca"}}, "spec.caConfigMapRef.namespace", "Required value"),
    ("ClusterBridgeBackend", {"type": "slurm", "url": "http://x:1", "credentialsSecretRef": {"name": "s", "namespace": "bridge-system"},
                              "probeCredentialsSecretRef": {"name": "p", "namespace": "bridge-system"}},
     "spec.probeCredentialsSecretRef", "only applies when credentialsSecretRef names no namespace"),
    ("ClusterBridgeBackend", {"type": "ray", "url": "http://x:1", "namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In"}]}},
     "spec.namespaceSelector.matchExpressions[0].values", "In and NotIn need values"),
    ("ClusterBridgeBackend", {"type": "ray", "url": "http://x:1", "namespaceSelector": {"matchExpressions": [
        {"key": "team", "operator": "Exists", "values": ["a"]}]}}, "spec.namespaceSelector.matchExpressions[0].values", "Exists and DoesNotExist take none"),
    ("ClusterBridgeBackend", {"type": "ray", "url": "http://x:1", "namespaceSelector": {"matchExpressions": [
        {"key": "team", "operator": "Near"}]}}, "spec.namespaceSelector.matchExpressions[0].operator", "Unsupported value"),
    ("BridgeBackend", {"type": "ray", "url": "http://x:1", "namespaceSelector": {}}, None, 'unknown field "spec.namespaceSelector"'),
]


@pytest.mark.parametrize("kind, spec, field, words", BAD, ids=["%s-%s" % (case[0], case[2]) for case in BAD])
def test_a_bad_backend_object_is_refused_naming_the_field(objects, namespace, kind, spec, field, words):  # pylint: disable=redefined-outer-name
    obj = body(kind, "bad", **spec)
    if kind == "BridgeBackend":
        call = objects.create_namespaced_custom_object
        args = (GROUP, VERSION, namespace, PLURALS[kind], obj)
    else:
        call = objects.create_cluster_custom_object
        args = (GROUP, VERSION, PLURALS[kind], obj)
    if field is None:
        # An unknown field is pruned unless the request asks for strict field validation (kubectl's default).
        status, message, _fields = rejection(call, *args, field_validation="Strict")
    else:
        status, message, fields = rejection(call, *args)
        assert field in fields, (fields, message)
    assert status == 422 or (field is None and status == 400), message
    assert words in message, message


def test_status_is_validated_and_separate_from_spec(objects, namespace):  # pylint: disable=redefined-outer-name
    created = create(objects, namespace, "BridgeBackend", "status", type="ray", url="http://ray.example.org:8265")
    name = created["metadata"]["name"]
    ignored = objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, "bridgebackends", name,
                                                     {"status": {"version": "1.0"}})
    assert "status" not in ignored, "the main resource does not write status"
    status, message, fields = rejection(objects.patch_namespaced_custom_object_status, GROUP, VERSION, namespace, "bridgebackends",
                                        name, {"status": {"queues": [{"name": "q%d" % i} for i in range(65)]}})
    assert status == 422 and "status.queues" in fields, message
    status, message, fields = rejection(objects.patch_namespaced_custom_object_status, GROUP, VERSION, namespace, "bridgebackends",
                                        name, {"status": {"conditions": [{"type": "Ready", "status": "Maybe", "reason": "R",
                                                                          "message": "", "lastTransitionTime": "2026-12-03T18:00:00Z"}]}})
    assert status == 422 and "status.conditions[0].status" in fields, message
    # A spec change bumps the generation (the probe then probes again at once).
    changed = objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, "bridgebackends", name,
                                                     {"spec": {"url": "http://ray2.example.org:8265"}})
    assert changed["metadata"]["generation"] == 2
