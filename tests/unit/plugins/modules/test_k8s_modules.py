"""The Kubernetes modules in-process, with the real client and the real `kubernetes` library
against the apiserver stub (k8s_stub.py): check mode, apply, again, absent twice, logs, and a
kubeconfig that never shows."""

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils.k8s.client import K8sClient
from ansible_collections.bridge.hpc.plugins.modules import job, k8s_job, k8s_job_info

from k8s_stub import ApiServerStub, node
from module_runner import Fail, run

pytestmark = pytest.mark.usefixtures("capture")
SCRIPT = "#!/bin/sh\necho hi\n"
KUBECONFIG = "apiVersion: v1\nkind: Config\nusers:\n- {name: u, user: {token: s3cret-t0ken}}\n"
ARGS = {"script": SCRIPT, "identity": "m:1", "namespace": "research", "kubeconfig_content": KUBECONFIG,
        "backend_options": {"kubernetes": {"image": "localhost/bridge/busybox:latest"}}}


@pytest.fixture
def stub(monkeypatch):
    server = ApiServerStub(namespaces=("research",), nodes=[node("node-1")])
    seen = []

    def from_options(cls, get):
        seen.append(dict((name, get(name)) for name in ("namespace", "kubeconfig_content", "context")))
        return server.client(get("namespace"))

    monkeypatch.setattr(K8sClient, "from_options", classmethod(from_options))
    server.seen = seen
    return server


def test_check_apply_again_absent_twice(stub):
    predicted = run(k8s_job, ARGS, check_mode=True, diff=True)
    assert not isinstance(predicted, Fail), predicted.result
    assert predicted.result["changed"] and predicted.result["job_id"] is None and not stub.objects["jobs"]
    assert predicted.result["rendered"]["job"]["spec"]["backoffLimit"] == 0
    applied = run(k8s_job, ARGS, diff=True)
    assert applied.result["changed"] and applied.result["phase"] == "queued"
    assert applied.result["job_id"] in [name for _ns, name in stub.objects["jobs"]]
    again = run(k8s_job, ARGS)
    assert not again.result["changed"] and again.result["job_id"] == applied.result["job_id"]
    absent = run(k8s_job, dict(ARGS, state="absent"))
    assert absent.result["changed"] and absent.result["phase"] == "cancelled" and not stub.objects["jobs"]
    assert not run(k8s_job, dict(ARGS, state="absent")).result["changed"]
    assert stub.seen[0]["kubeconfig_content"] == KUBECONFIG
    for outcome in (predicted, applied, again, absent):
        assert "s3cret" not in repr(outcome.result)


def test_a_refused_request_names_the_field(stub):
    refused = run(k8s_job, dict(ARGS, resources={"cpus_per_task": 1000}))
    assert isinstance(refused, Fail) and refused.result["error"]["field"] == "resources.cpus_per_task"
    refused = run(k8s_job, dict(ARGS, backend_options={}))
    assert isinstance(refused, Fail) and refused.result["error"]["field"] == "backend_options.kubernetes.image"
    assert not stub.objects["jobs"]


def test_info_reads_one_job_with_its_log_and_lists(stub):
    job_id = run(k8s_job, ARGS).result["job_id"]
    one = run(k8s_job_info, {"namespace": "research", "identity": "m:1", "logs": True}).result
    assert one["job"]["job_id"] == job_id and one["log"] == "" and "native" not in one["job"]
    listed = run(k8s_job_info, {"namespace": "research", "phases": ["queued"], "include_native": True}).result
    assert [j["job_id"] for j in listed["jobs"]] == [job_id] and listed["jobs"][0]["native"]["job"]
    assert run(k8s_job_info, {"namespace": "research", "identity": "nope"}).result["job"] is None


def test_the_neutral_job_module_runs_kubernetes_without_a_url(stub):
    outcome = run(job, dict(ARGS, backend="kubernetes", identity="m:2"))
    assert not isinstance(outcome, Fail), outcome.result
    assert outcome.result["changed"] and outcome.result["api_version"] == "batch/v1"
