"""bridge_controller.backend_objects: what a BridgeBackend or ClusterBridgeBackend says, read purely."""

import pytest

from bridge_controller import backend_objects as bo
from bridge_controller.spec import backend_of


def namespaced(name="slurm-a", own="team-a", generation=1, status=None, **spec):
    spec.setdefault("type", "slurm")
    obj = {"apiVersion": "bridge.dev/v1alpha1", "kind": "BridgeBackend",
           "metadata": {"name": name, "namespace": own, "generation": generation, "uid": "u-" + name}, "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj


def cluster(name="slurm-site", generation=1, status=None, **spec):
    obj = namespaced(name, None, generation, status, **spec)
    obj["kind"] = "ClusterBridgeBackend"
    del obj["metadata"]["namespace"]
    return obj


QUEUE = {"name": "debug", "state": "UP", "usable": True, "default": True, "max_time_minutes": 60, "max_nodes": 2,
         "cpus_per_node": 4, "memory_mb_per_node": 7900, "gpus_per_node": 0, "gpu_types": [], "features": ["ib"],
         "qubits": None, "pending": 3, "running": 1}


def test_ref_names_say_the_kind_and_for_the_namespaced_kind_the_namespace():
    assert bo.ref_name(namespaced()) == "BridgeBackend/team-a/slurm-a"
    assert bo.ref_name(cluster()) == "ClusterBridgeBackend/slurm-site"


def test_a_bridgebackends_connection_has_spec_backend_ofs_keys_and_reads_its_secret_in_its_own_namespace():
    obj = namespaced(url="http://slurm:6820", apiVersion="v0.0.42", credentialsSecretRef={"name": "slurm"},
                     caConfigMapRef={"name": "ca"})
    connection = bo.connection_of(obj, "team-a")
    job = {"metadata": {"namespace": "team-a"}, "spec": {"backend": {}}}
    assert set(connection) == set(backend_of(job)) | {"secret_namespace", "ca_namespace", "secret_owner"}
    assert connection == {"type": "slurm", "url": "http://slurm:6820", "api_version": "v0.0.42", "iam_url": None,
                          "validate_certs": True, "job_namespace": None, "secret": "slurm",
                          "ca": {"name": "ca", "key": "ca.crt"}, "login": None, "namespace": "team-a",
                          "secret_namespace": "team-a", "ca_namespace": "team-a", "secret_owner": "tenant"}
    # The probe has no BridgeJob: the object's own namespace.
    assert bo.connection_of(obj, None)["namespace"] == "team-a"


def test_a_cluster_backends_secret_is_the_shared_one_or_the_one_of_each_bridgejobs_namespace():
    shared = cluster(url="http://slurm:6820", credentialsSecretRef={"name": "slurm", "namespace": "bridge-system"},
                     caConfigMapRef={"name": "ca", "namespace": "bridge-system", "key": "bundle.pem"})
    connection = bo.connection_of(shared, "team-b")
    assert (connection["secret"], connection["secret_namespace"], connection["secret_owner"]) == (
        "slurm", "bridge-system", "platform")
    assert (connection["ca"], connection["ca_namespace"]) == ({"name": "ca", "key": "bundle.pem"}, "bridge-system")
    assert connection["namespace"] == "team-b"
    per_tenant = cluster(url="http://slurm:6820", credentialsSecretRef={"name": "slurm"})
    assert (bo.connection_of(per_tenant, "team-b")["secret_namespace"], bo.connection_of(per_tenant, "team-b")["secret_owner"]) == (
        "team-b", "tenant")
    assert bo.connection_of(per_tenant, None)["secret_namespace"] is None
    kube = cluster(type="kubernetes", namespace="batch")
    assert (bo.connection_of(kube, "team-b")["job_namespace"], bo.connection_of(kube, "team-b")["secret"]) == ("batch", None)


@pytest.mark.parametrize("selector, labels, admitted", [
    (None, {}, True),
    ({}, {}, True),
    ({"matchLabels": {"team": "a"}}, {"team": "a", "x": "y"}, True),
    ({"matchLabels": {"team": "a"}}, {"team": "b"}, False),
    ({"matchExpressions": [{"key": "env", "operator": "In", "values": ["dev", "prod"]}]}, {"env": "dev"}, True),
    ({"matchExpressions": [{"key": "env", "operator": "In", "values": ["dev", "prod"]}]}, {}, False),
    ({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]}, {}, True),
    ({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]}, {"env": "prod"}, False),
    ({"matchExpressions": [{"key": "hpc", "operator": "Exists"}]}, {"hpc": ""}, True),
    ({"matchExpressions": [{"key": "hpc", "operator": "Exists"}]}, {}, False),
    ({"matchExpressions": [{"key": "legacy", "operator": "DoesNotExist"}]}, {}, True),
    ({"matchExpressions": [{"key": "legacy", "operator": "DoesNotExist"}]}, {"legacy": "1"}, False),
])
def test_admits_follows_label_selector_semantics(selector, labels, admitted):
    obj = cluster(url="http://slurm:6820", namespaceSelector=selector) if selector is not None else cluster(url="http://s:1")
    assert (bo.admits(obj, labels, "team-x") is None) is admitted


def test_a_refusal_names_the_backend_the_selector_and_the_requirement_missed():
    obj = cluster(url="http://s:1", namespaceSelector={"matchLabels": {"team": "a"}, "matchExpressions": [
        {"key": "env", "operator": "In", "values": ["dev", "prod"]}, {"key": "legacy", "operator": "DoesNotExist"}]})
    why = bo.admits(obj, {"team": "a", "env": "test"}, "team-x")
    assert why == ("ClusterBridgeBackend/slurm-site admits only namespaces whose labels match its namespaceSelector "
                   "(team=a,env in (dev,prod),!legacy); namespace 'team-x' does not meet env in (dev,prod)")
    # Labels not known (yet): a selector admits nothing, rather than guess.
    assert "are not known" in bo.admits(obj, None, "team-x")
    # A BridgeBackend is its own namespace's: no selector to meet.
    assert bo.admits(namespaced(), None) is None


def test_ready_is_that_of_the_probe_of_the_current_generation():
    def status(ready, generation=1):
        return {"observedGeneration": generation, "conditions": [{"type": "Ready", "status": ready, "reason": "r", "message": "m"}]}

    assert bo.ready_of(namespaced()) is None
    assert bo.ready_of(namespaced(status=status("True"))) is True
    assert bo.ready_of(namespaced(status=status("False"))) is False
    assert bo.ready_of(namespaced(status=status("Unknown"))) is None
    assert bo.ready_of(namespaced(generation=2, status=status("True"))) is None, "probed before the spec changed"


def test_a_queue_goes_to_status_in_camel_case_and_comes_back_as_the_same_record():
    status = bo.queue_status(QUEUE)
    assert status == {"name": "debug", "state": "UP", "usable": True, "default": True, "maxTimeMinutes": 60, "maxNodes": 2,
                      "cpusPerNode": 4, "memoryMbPerNode": 7900, "gpusPerNode": 0, "gpuTypes": [], "features": ["ib"],
                      "pending": 3, "running": 1}
    assert bo.queue_record(status) == QUEUE
    unnamed = dict(QUEUE, name=None, gpu_types=[], features=[])
    assert "name" not in bo.queue_status(unnamed)
    assert bo.queue_record(bo.queue_status(unnamed)) == unnamed
    assert bo.queue_record({}) == dict((snake, [] if snake in bo.LIST_FIELDS else None) for snake, _camel in bo.QUEUE_FIELDS)


def test_the_record_keys_are_those_of_the_design_and_every_camel_name_is_in_the_crd():
    import os

    import yaml

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    with open(os.path.join(repo, "deploy", "crd-backends.yaml")) as handle:
        crds = yaml.safe_load(handle)["items"]
    for crd in crds:
        queue = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["queues"]
        assert sorted(queue["items"]["properties"]) == sorted(camel for _snake, camel in bo.QUEUE_FIELDS)
        assert queue["maxItems"] == bo.MAX_QUEUES
    assert [snake for snake, _camel in bo.QUEUE_FIELDS] == list(QUEUE)


def test_capacity_status_counts_every_queue_and_keeps_the_first_64():
    capacity = {"manager": "Slurm", "version": "25.05.1", "api_version": "v0.0.42",
                "queues": [dict(QUEUE, name="p%d" % i) for i in range(70)]}
    status = bo.capacity_status(capacity)
    assert (status["manager"], status["version"], status["apiVersion"], status["queueCount"]) == ("Slurm", "25.05.1", "v0.0.42", 70)
    assert len(status["queues"]) == 64
    obj = namespaced(status=dict(status, observedGeneration=1))
    assert bo.capacity_of(obj)["queues"][0] == dict(QUEUE, name="p0")


def test_candidate_of_is_a_placement_candidate():
    status = dict(bo.capacity_status({"manager": "Slurm", "version": "25.05.1", "api_version": "v0.0.42", "queues": [QUEUE]}),
                  observedGeneration=1, conditions=[{"type": "Ready", "status": "True", "reason": "Probed", "message": "ok"}])
    assert bo.candidate_of(cluster(status=status)) == {
        "name": "ClusterBridgeBackend/slurm-site", "type": "slurm", "ready": True, "reason": None, "queues": [QUEUE],
        "allowed_queues": None}
    down = dict(status, conditions=[{"type": "Ready", "status": "False", "reason": "ConnectionFailed", "message": "refused"}])
    candidate = bo.candidate_of(namespaced(status=down))
    assert (candidate["name"], candidate["ready"], candidate["reason"]) == ("BridgeBackend/team-a/slurm-a", False, "ConnectionFailed: refused")
    never = bo.candidate_of(namespaced())
    assert (never["ready"], never["queues"]) == (None, [])
