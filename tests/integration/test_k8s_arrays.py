"""An array as an Indexed Job on the real Kubernetes node of tools/kube-node.sh: the sparse index set
"3,7,20-22", whose Pods get their asked index through the /bin/sh wrapper, with index 7 failing.
Kubernetes runs the other indexes on (backoffLimitPerIndex 0) and ends the Job Failed; Bridge reads
the array from the Job's completedIndexes and failedIndexes, a poll being one Job list, and the exit
code of index 7 from its Pod once the array has ended. A dense set takes its index from the downward
API.
"""

import sys
import time
import uuid

import pytest

from conftest import COLLECTIONS
from test_kube_node import api, namespace, node_env  # noqa: F401 pylint: disable=unused-import

sys.path.insert(0, COLLECTIONS)

kubernetes = pytest.importorskip("kubernetes")

SCRIPT = """#!/bin/sh
echo "index $BRIDGE_ARRAY_INDEX completion $JOB_COMPLETION_INDEX"
[ "$BRIDGE_ARRAY_INDEX" != 7 ] || exit 7
"""
WAIT = 240


def backend(node_env, namespace):  # noqa: F811
    from ansible_collections.bridge.hpc.plugins.module_utils.k8s.client import K8sClient

    return K8sClient.from_options({"kubeconfig": node_env["KUBECONFIG"], "namespace": namespace, "retries": 0}.get)


def spec(client, node_env, identity, **params):  # noqa: F811
    from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec

    image = {"kubernetes": {"image": node_env["KUBE_BUSYBOX_IMAGE"], "image_pull_policy": "Never"}}
    return normalize_spec(dict(params, identity=identity, backend_options=image), client)


def poll_until_ended(client, identity):
    """(the ended job, polls, requests those polls sent)."""
    polls, before = 0, client.requests_sent
    deadline = time.monotonic() + WAIT
    while True:
        job = client.poll_many([identity]).get(identity)
        polls += 1
        if (job and job["terminal"]) or time.monotonic() > deadline:
            return job, polls, client.requests_sent - before
        time.sleep(1)


def logs_by_index(api, namespace, job_id):  # noqa: F811
    from kubernetes import client as k8s

    core = k8s.CoreV1Api(api)
    found = {}
    for pod in core.list_namespaced_pod(namespace, label_selector="job-name=%s" % job_id).items:
        index = pod.metadata.annotations["batch.kubernetes.io/job-completion-index"]
        found.setdefault(index, core.read_namespaced_pod_log(pod.metadata.name, namespace))
    return found


def test_a_sparse_indexed_job_with_index_7_failing(node_env, api, namespace):  # noqa: F811
    from ansible_collections.bridge.hpc.plugins.module_utils import _jobs

    client = backend(node_env, namespace)
    identity = "sweep-%s" % uuid.uuid4().hex[:6]
    job_spec = spec(client, node_env, identity, script=SCRIPT, array={"indexes": "3,7,20-22", "parallelism": 2})
    result = _jobs.ensure_present(client, job_spec)
    assert result["changed"]
    job, polls, requests = poll_until_ended(client, identity)
    assert job is not None and job["terminal"], "the array did not end in %d s: %r" % (WAIT, job)
    # A poll is one Job list; the poll that sees the array ended with a failed index lists its Pods once.
    assert requests == polls + 1
    assert (job["phase"], job["exit_code"], job["failure_class"]) == ("failed", 7, "non_zero_exit")
    assert job["array"]["failed_indexes"] == "7" and job["array"]["indexes"] == "3,7,20-22"
    assert job["array"]["counts"] == {"queued": 0, "running": 0, "completed": 4, "failed": 1, "cancelled": 0}
    assert job["array"]["failures"] == [{"index": 7, "exit_code": 7, "failure_class": "non_zero_exit"}]
    native = job["native"]["job"]
    assert (native["spec"]["completionMode"], native["spec"]["backoffLimitPerIndex"]) == ("Indexed", 0)
    # Kubernetes marks the Job FailureTarget at once and Failed once its Pods are gone; a poll may
    # read it in between. Either says the failed index failed it.
    decided = {c["type"]: c.get("reason") for c in native["status"]["conditions"] if c["status"] == "True"}
    assert "FailedIndexes" in (decided.get("Failed"), decided.get("FailureTarget")), decided
    logs = logs_by_index(api, namespace, job["job_id"])
    assert logs == dict((str(k), "index %d completion %d\n" % (index, k)) for k, index in enumerate((3, 7, 20, 21, 22)))
    assert _jobs.ensure_present(client, job_spec)["changed"] is False


def test_a_dense_indexed_job_takes_its_index_from_the_downward_api(node_env, api, namespace):  # noqa: F811
    from ansible_collections.bridge.hpc.plugins.module_utils import _jobs

    client = backend(node_env, namespace)
    identity = "dense-%s" % uuid.uuid4().hex[:6]
    job_spec = spec(client, node_env, identity, script=SCRIPT.replace("!= 7", "!= 99"), array={"indexes": "0-2"})
    _jobs.ensure_present(client, job_spec)
    job, polls, requests = poll_until_ended(client, identity)
    assert (job["phase"], job["exit_code"], requests) == ("completed", 0, polls)
    assert logs_by_index(api, namespace, job["job_id"]) == dict(
        (str(k), "index %d completion %d\n" % (k, k)) for k in range(3))
