"""The kubernetes backend's client against the real kube-apiserver of tools/kube-control-plane.sh,
with or without a node: what the apiserver itself decides. The ConfigMap and Job as created (the
ConfigMap owned by the Job), the lookup by identity, submits that race from two processes making
one Job, admission under the `restricted` Pod Security level (a dry run of the Job's Pod), a user
whose RBAC is what docs/kubernetes.md lists, and delete with foreground propagation.
playbooks/k8s_job.yml runs the Jobs on the node.
"""

import multiprocessing
import os
import sys
import uuid

import pytest

from conftest import COLLECTIONS
from test_controller_e2e import kube, wait_for  # noqa: F401 pylint: disable=unused-import

sys.path.insert(0, COLLECTIONS)

IMAGE = {"kubernetes": {"image": "localhost/bridge/busybox:latest", "image_pull_policy": "Never"}}


@pytest.fixture(scope="module")
def namespace(kube):
    from kubernetes import client

    env, api_client = kube
    name = "k8s-client-%s" % uuid.uuid4().hex[:8]
    client.CoreV1Api(api_client).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
        name=name, labels={"pod-security.kubernetes.io/enforce": "restricted", "bridge.dev/test": "k8s-client"})))
    yield name
    client.CoreV1Api(api_client).delete_namespace(name)


def backend(kubeconfig, namespace):
    from ansible_collections.bridge.hpc.plugins.module_utils.k8s.client import K8sClient

    return K8sClient.from_options({"kubeconfig": kubeconfig, "namespace": namespace, "retries": 0}.get)


def spec(client, identity, **params):
    from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec

    params.setdefault("script", "#!/bin/sh\necho hi\n")
    params.setdefault("backend_options", IMAGE)
    return normalize_spec(dict(params, identity=identity), client)


def test_submit_creates_a_config_map_owned_by_the_job_and_the_lookup_finds_it(kube, namespace):
    from kubernetes import client as k8s

    env, api_client = kube
    client = backend(env["KUBECONFIG"], namespace)
    job_spec = spec(client, "run:%s" % uuid.uuid4().hex[:6], resources={"cpus_per_task": 1, "memory": "64M"})
    assert client.find(job_spec["identity"]) is None
    client.check(job_spec)
    job_id = client.submit(job_spec)
    job = k8s.BatchV1Api(api_client).read_namespaced_job(job_id, namespace)
    config_map = k8s.CoreV1Api(api_client).read_namespaced_config_map(job_id, namespace)
    assert config_map.data["script"] == "#!/bin/sh\necho hi\n"
    assert [(o.kind, o.name, o.uid) for o in config_map.metadata.owner_references] == [("Job", job_id, job.metadata.uid)]
    assert job.spec.backoff_limit == 0 and job.spec.template.spec.restart_policy == "Never"
    found = client.find(job_spec["identity"])
    assert found["job_id"] == job_id and found["identity"] == job_spec["identity"] and found["namespace"] == namespace
    # The apiserver's defaulting: what was sent and what is read back agree on what Bridge set.
    assert found["native"]["job"]["spec"]["ttlSecondsAfterFinished"] == 604800


def submit_in_a_process(kubeconfig, namespace, identity, results):
    client = backend(kubeconfig, namespace)
    results.put(client.submit(spec(client, identity)))


def test_submits_that_race_make_one_job(kube, namespace):
    env, _api_client = kube
    identity = "race:%s" % uuid.uuid4().hex[:6]
    results = multiprocessing.Queue()
    racers = [multiprocessing.Process(target=submit_in_a_process, args=(env["KUBECONFIG"], namespace, identity, results))
              for _racer in range(4)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(60)
    ids = [results.get(timeout=5) for _racer in racers]
    assert len(set(ids)) == 1
    client = backend(env["KUBECONFIG"], namespace)
    assert [job["job_id"] for job in client.list(identities=[identity])] == ids[:1]


def test_the_pod_passes_the_restricted_pod_security_level(kube, namespace):
    """The Job controller creates the Pod; a dry run of the same Pod shows the namespace admits it."""
    from kubernetes import client as k8s

    env, api_client = kube
    client = backend(env["KUBECONFIG"], namespace)
    template = client.render(spec(client, "psa", resources={"cpus_per_task": 1, "memory": "64M", "gpus": None}))["job"]["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": dict(template["metadata"], name="psa-dry-run"), "spec": template["spec"]}
    k8s.CoreV1Api(api_client).create_namespaced_pod(namespace, pod, dry_run="All")
    root = dict(pod, spec=dict(pod["spec"], securityContext=dict(pod["spec"]["securityContext"], runAsUser=0)))
    with pytest.raises(k8s.exceptions.ApiException) as refused:
        k8s.CoreV1Api(api_client).create_namespaced_pod(namespace, root, dry_run="All")
    assert refused.value.status == 403 and "restricted" in refused.value.body


def test_delete_propagates_in_the_foreground_and_absent_twice_changes_nothing(kube, namespace):
    from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_absent, ensure_present

    env, api_client = kube
    client = backend(env["KUBECONFIG"], namespace)
    job_spec = spec(client, "cancel:%s" % uuid.uuid4().hex[:6], script="#!/bin/sh\nsleep 600\n")
    assert ensure_present(client, job_spec)["changed"]
    assert not ensure_present(client, job_spec)["changed"]
    gone = ensure_absent(client, identity=job_spec["identity"])
    assert gone["changed"] and gone["job"]["phase"] == "cancelled" and gone["job"]["terminal"]
    assert not ensure_absent(client, identity=job_spec["identity"])["changed"]
    # The garbage collector of kube-controller-manager removes the Job, then its ConfigMap.
    from kubernetes import client as k8s

    core = k8s.CoreV1Api(api_client)

    def config_map_gone():
        try:
            core.read_namespaced_config_map(gone["job"]["job_id"], namespace)
            return False
        except k8s.exceptions.ApiException as exc:
            return exc.status == 404

    wait_for(config_map_gone, bool, timeout=60)


def test_a_user_with_the_documented_rbac_runs_jobs_and_nothing_else(kube, namespace, tmp_path):
    """A ServiceAccount bound to the Role docs/kubernetes.md lists submits, reads, lists and deletes
    Jobs; the cluster-scope checks it may not make are skipped, not failed."""
    import yaml
    from kubernetes import client as k8s

    env, api_client = kube
    core, rbac = k8s.CoreV1Api(api_client), k8s.RbacAuthorizationV1Api(api_client)
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                           "docs", "kubernetes.md")) as handle:
        rules = yaml.safe_load(handle.read().split("## RBAC a user needs", 1)[1].split("```yaml", 1)[1].split("```", 1)[0])
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "alice"}})
    rbac.create_namespaced_role(namespace, {"metadata": {"name": "bridge-jobs"}, "rules": rules["rules"]})
    rbac.create_namespaced_role_binding(namespace, {"metadata": {"name": "alice"}, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "bridge-jobs"},
        "subjects": [{"kind": "ServiceAccount", "name": "alice", "namespace": namespace}]})
    token = core.create_namespaced_service_account_token(
        "alice", namespace, {"spec": {"expirationSeconds": 600}}).status.token
    kubeconfig = tmp_path / "alice.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "alice",
        "clusters": [{"name": "c", "cluster": {"server": env["KUBE_API"], "certificate-authority": env["KUBE_CA_FILE"]}}],
        "users": [{"name": "alice", "user": {"token": token}}],
        "contexts": [{"name": "alice", "context": {"cluster": "c", "user": "alice", "namespace": namespace}}]}))
    from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_absent, ensure_present

    client = backend(str(kubeconfig), None)
    assert client.namespace == namespace
    job_spec = spec(client, "alice:%s" % uuid.uuid4().hex[:6], resources={"cpus_per_task": 1000})
    present = ensure_present(client, job_spec)
    assert present["changed"] and present["job"]["identity"] == job_spec["identity"]
    assert client.logs(present["job"]["job_id"]) == ""
    assert ensure_absent(client, identity=job_spec["identity"])["changed"]
