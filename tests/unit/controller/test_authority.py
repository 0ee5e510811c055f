"""Every runner call is made for a BridgeJob's recorded author, only as far as they may go themselves
(authority.py): what is asked, what a denial does, and that the controller's identity is never lent."""

import json

import pytest

from bridge_controller import authority
from bridge_controller.authority import AUTHOR, AUTHOR_GROUPS, Authority, Refused, author_of
from bridge_controller.executor import Executor
from bridge_controller.plan import FINALIZER

from fake_backend import FakeBackend
from fakes import FakeKube, FakeRunner
from test_executor import RecordingQueue, settle


def bridgejob(backend, namespace="tenant-a", name="job", **spec):
    return {"metadata": {"name": name, "namespace": namespace, "uid": "uid-" + name, "generation": 1},
            "spec": dict({"backend": backend, "script": "#!/bin/sh\ntrue\n"}, **spec)}


def executor_with(secrets=None, config_maps=None):
    kube = FakeKube(secrets=secrets or {}, config_maps=config_maps)
    kube.author = "alice"
    runner = FakeRunner(FakeBackend())
    queue = RecordingQueue()
    executor = Executor(kube, kube, runner, queue, clock=lambda: 1000.0)
    kube.listeners.append(executor.observe)
    return kube, runner, queue, executor


def reachable(obj):
    return dict((c["type"], c) for c in obj["status"]["conditions"])["BackendReachable"]


def test_the_author_is_what_admission_recorded_and_none_recorded_is_refused():
    obj = bridgejob({"type": "slurm"})
    obj["metadata"]["annotations"] = {AUTHOR: "system:serviceaccount:tenant-a:ci",
                                      AUTHOR_GROUPS: "system:serviceaccounts\nsystem:authenticated"}
    assert author_of(obj) == ("system:serviceaccount:tenant-a:ci", ["system:serviceaccounts", "system:authenticated"])
    with pytest.raises(Refused) as refused:
        author_of(bridgejob({"type": "slurm"}))
    assert refused.value.reason == authority.AUTHOR_UNKNOWN and "kubectl auth whoami" in str(refused.value)


def test_a_bridgejob_without_an_author_sends_nothing():
    kube, runner, queue, executor = executor_with({"tenant-a/creds": {"user": "u", "token": "t"}})
    obj = bridgejob({"type": "slurm", "url": "http://127.0.0.1:6820", "credentialsSecretRef": {"name": "creds"}})
    obj["metadata"]["annotations"] = {AUTHOR: ""}
    kube.create(obj)
    settle(executor, queue)
    assert not runner.calls
    assert reachable(kube.objects["tenant-a/job"])["reason"] == authority.AUTHOR_UNKNOWN


def test_an_author_who_may_not_read_the_secret_gets_nothing_sent_with_it():
    kube, runner, queue, executor = executor_with({"tenant-a/creds": {"user": "u", "token": "t"}})
    kube.denied.add(("alice", "get", "secrets", "tenant-a"))
    kube.create(bridgejob({"type": "slurm", "url": "http://127.0.0.1:6820", "credentialsSecretRef": {"name": "creds"}}))
    settle(executor, queue)
    obj = kube.objects["tenant-a/job"]
    assert not runner.calls and FINALIZER in obj["metadata"]["finalizers"]
    condition = reachable(obj)
    assert condition["reason"] == authority.FORBIDDEN
    assert condition["message"] == ("'alice' may not get Secret 'creds' in namespace 'tenant-a', which this BridgeJob's "
                                    "backend hands over as its credentials")
    assert ("alice", (), "get", "", "secrets", "tenant-a", "creds") in kube.reviews


def test_a_kubernetes_job_is_created_only_where_its_author_may_create_jobs():
    kube, runner, queue, executor = executor_with()
    kube.denied.add(("alice", "create", "jobs", "tenant-a"))
    kube.create(bridgejob({"type": "kubernetes"}))
    settle(executor, queue)
    assert not runner.calls
    condition = reachable(kube.objects["tenant-a/job"])
    assert condition["reason"] == authority.FORBIDDEN
    assert condition["message"].startswith("'alice' may not create Jobs (batch) in namespace 'tenant-a'")


def test_a_kubernetes_job_runs_with_the_namespaces_job_service_account_token_never_the_controllers():
    kube, runner, queue, executor = executor_with()
    handed = []
    run = runner.run

    def recording(action, backend, credentials, **kwargs):
        handed.append(credentials)
        return run(action, backend, credentials, **kwargs)

    runner.run = recording
    kube.create(bridgejob({"type": "kubernetes"}))
    settle(executor, queue)
    assert runner.calls and runner.calls[0][0] == "submit"
    kubeconfig = json.loads(handed[0]["kubeconfig"])
    assert kubeconfig["users"] == [{"name": "system:serviceaccount:tenant-a:bridge-runner",
                                    "user": {"token": "sa-token-tenant-a-bridge-runner"}}]
    assert kubeconfig["clusters"][0]["cluster"] == {"server": "https://127.0.0.1:6443"}


def test_without_the_job_service_account_a_kubernetes_bridgejob_is_refused():
    kube, runner, queue, executor = executor_with()
    kube.service_accounts = set()
    kube.create(bridgejob({"type": "kubernetes"}))
    settle(executor, queue)
    assert not runner.calls
    condition = reachable(kube.objects["tenant-a/job"])
    assert condition["reason"] == authority.NO_CREDENTIALS
    assert "ServiceAccount 'bridge-runner' of namespace 'tenant-a'" in condition["message"]


@pytest.mark.parametrize("data", [{"note": "x"}, {"kubeconfig": ""}, {"kubeconfig": "  \n"}])
def test_a_secret_without_a_kubeconfig_lends_nothing(data):
    kube, runner, queue, executor = executor_with({"tenant-a/kc": data})
    kube.create(bridgejob({"type": "kubernetes", "namespace": "tenant-b", "credentialsSecretRef": {"name": "kc"}}))
    settle(executor, queue)
    assert not runner.calls
    condition = reachable(kube.objects["tenant-a/job"])
    assert condition["reason"] == authority.NO_CREDENTIALS
    assert "never with the controller's own" in condition["message"]


def test_the_script_config_map_needs_its_authors_right_to_read_it():
    kube, runner, queue, executor = executor_with({"tenant-a/creds": {"user": "u", "token": "t"}},
                                                  {"tenant-a/scripts": {"run.sh": "#!/bin/sh\ntrue\n"}})
    kube.denied.add(("alice", "get", "configmaps", "tenant-a"))
    obj = bridgejob({"type": "slurm", "url": "http://127.0.0.1:6820", "credentialsSecretRef": {"name": "creds"}},
                    scriptFrom={"configMapKeyRef": {"name": "scripts", "key": "run.sh"}})
    del obj["spec"]["script"]
    kube.create(obj)
    settle(executor, queue)
    assert not runner.calls
    assert reachable(kube.objects["tenant-a/job"])["message"].startswith("'alice' may not get ConfigMap 'scripts'")


def test_an_allowed_answer_is_reused_briefly_a_denied_one_never():
    kube = FakeKube()
    now = [0.0]
    judge = Authority(kube, clock=lambda: now[0])
    author = ("alice", ["g"])
    assert judge.may(author, "get", "secrets", "tenant-a", "creds")
    assert judge.may(author, "get", "secrets", "tenant-a", "creds")
    assert len(kube.reviews) == 1
    now[0] += authority.ALLOWED_FOR + 1
    kube.denied.add(("alice", "get", "secrets", "tenant-a"))
    assert not judge.may(author, "get", "secrets", "tenant-a", "creds")
    assert not judge.may(author, "get", "secrets", "tenant-a", "creds")
    assert len(kube.reviews) == 3


def test_a_probe_uses_a_tenants_secret_only_while_the_backends_author_may_read_it():
    kube = FakeKube()
    judge = Authority(kube)
    backend = {"type": "slurm", "secret": "ops", "secret_namespace": "tenant-a", "secret_owner": "tenant"}
    obj = {"kind": "BridgeBackend", "metadata": {"name": "b", "namespace": "tenant-a", "annotations": {AUTHOR: "bob"}}}
    judge.check_probe(obj, backend)
    kube.denied.add(("bob", "get", "secrets", "tenant-a"))
    judge._allowed.clear()  # pylint: disable=protected-access
    with pytest.raises(Refused) as refused:
        judge.check_probe(obj, backend)
    assert refused.value.reason == authority.FORBIDDEN
    assert str(refused.value) == ("'bob' may not get Secret 'ops' in namespace 'tenant-a', which this BridgeBackend hands "
                                  "over as its credentials")
    judge.check_probe(obj, dict(backend, secret_owner="platform"))  # a ClusterBridgeBackend's: not the author's to read
