"""What an operator's policy refuses of a tenant's BridgeJob (policy.py), and how the executor
reports it: nothing reaches a playbook, a condition names the field."""

import pytest

from bridge_controller.executor import Executor
from bridge_controller.policy import Policy, UrlPrefix
from bridge_controller.plan import FINALIZER

from fake_backend import FakeBackend
from fakes import FakeKube, FakeRunner
from test_executor import RecordingQueue, settle

EXEC_KUBECONFIG = """
apiVersion: v1
kind: Config
current-context: c
clusters: [{name: k, cluster: {server: "https://kube.example:6443", certificate-authority-data: QUJD}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: sh, args: [-c, "touch /tmp/x"]}}}]
contexts: [{name: c, context: {cluster: k, user: u}}]
"""
PLAIN_KUBECONFIG = EXEC_KUBECONFIG.replace(
    'exec: {apiVersion: client.authentication.k8s.io/v1, command: sh, args: [-c, "touch /tmp/x"]}', "token: abc")


def bridgejob(backend, namespace="tenant-a", name="job"):
    return {"metadata": {"name": name, "namespace": namespace, "uid": "uid-" + name, "generation": 1},
            "spec": {"backend": backend, "script": "#!/bin/sh\ntrue\n"}}


@pytest.mark.parametrize("prefix, url, allowed", [
    ("https://slurm.example:6820", "https://slurm.example:6820", True),
    ("https://slurm.example:6820", "https://slurm.example:6820/slurm/v0.0.42", True),
    ("https://slurm.example:6820", "https://SLURM.example:6820/", True),
    ("https://slurm.example", "https://slurm.example:443/x", True),
    ("https://slurm.example:6820", "http://slurm.example:6820", False),
    ("https://slurm.example:6820", "https://slurm.example:6821", False),
    ("https://slurm.example:6820", "https://slurm.example.evil:6820", False),
    ("https://slurm.example:6820", "https://slurm.example:6820@evil.example:6820", False),
    ("https://gw.example/ray", "https://gw.example/ray/api/jobs/", True),
    ("https://gw.example/ray", "https://gw.example/ray", True),
    ("https://gw.example/ray/", "https://gw.example/rays", False),
    ("https://gw.example/ray", "https://gw.example/other", False),
    ("https://gw.example/ray", "https://gw.example:99999/ray", False),
    ("https://gw.example/ray", "https://gw.example/ray/../admin", False),
    ("https://gw.example/ray", "https://gw.example/ray/%2e%2e/admin", False),
    # Dot segments are refused under any prefix: servers and proxies resolve them differently.
    ("https://gw.example", "https://gw.example/ray/../admin", False),
    # Read by the clients' parser (_urls.py): a backslash is refused, not read as userinfo (issue 37).
    ("http://127.0.0.1:8", "http://127.0.0.1:9\\@127.0.0.1:8/ok", False),
])
def test_a_url_is_allowed_by_its_scheme_host_port_and_path_never_by_its_text(prefix, url, allowed):
    assert (Policy([prefix]).url_refusal("spec.backend.url", url) is None) is allowed


@pytest.mark.parametrize("prefix", ["ftp://h", "https://", "https://user@h", "https://h?x=1", "h:80"])
def test_a_prefix_that_is_no_http_url_is_refused_at_start(prefix):
    with pytest.raises(ValueError):
        UrlPrefix(prefix)


def test_without_a_list_any_url_is_allowed_and_with_one_each_url_field_is_checked():
    assert Policy().refusal(bridgejob({"type": "slurm", "url": "http://anywhere:1"})) is None
    policy = Policy(["http://127.0.0.1:6820"])
    assert policy.refusal(bridgejob({"type": "slurm", "url": "http://127.0.0.1:6820"})) is None
    reason, message = policy.refusal(bridgejob({"type": "slurm", "url": "http://10.0.0.1:80"}))
    assert reason == "BackendURLNotAllowed" and message.startswith("spec.backend.url: http://10.0.0.1:80 is not among")
    reason, message = policy.refusal(bridgejob({"type": "quantum", "url": "http://127.0.0.1:6820",
                                                "iamUrl": "http://169.254.169.254/"}))
    assert reason == "BackendURLNotAllowed" and message.startswith("spec.backend.iamUrl:")


@pytest.mark.parametrize("backend, field", [
    ({"type": "kubernetes", "namespace": "tenant-b"}, "spec.backend.namespace"),
    ({"type": "kubernetes", "url": "https://attacker.example"}, "spec.backend.url"),
    ({"type": "kubernetes", "caConfigMapRef": {"name": "ca"}}, "spec.backend.caConfigMapRef"),
    ({"type": "kubernetes", "validateCerts": False}, "spec.backend.validateCerts"),
])
def test_a_kubernetes_job_with_the_controllers_rights_keeps_to_its_namespace_and_the_controllers_connection(backend, field):
    reason, message = Policy().refusal(bridgejob(backend))
    assert reason in ("NamespaceNotAllowed", "ControllerConnectionFixed") and message.startswith(field + ":")


def test_a_kubernetes_job_may_name_its_own_namespace_or_any_with_a_kubeconfig_of_its_own():
    assert Policy().refusal(bridgejob({"type": "kubernetes", "namespace": "tenant-a"})) is None
    assert Policy().refusal(bridgejob({"type": "kubernetes", "validateCerts": True})) is None
    with_secret = {"type": "kubernetes", "namespace": "elsewhere", "url": "https://other:6443",
                   "credentialsSecretRef": {"name": "kubeconfig"}}
    assert Policy().refusal(bridgejob(with_secret)) is None


@pytest.mark.parametrize("user, cluster, field, flag", [
    ({"exec": {"command": "sh"}}, {}, "users[0].user.exec", "exec"),
    ({"auth-provider": {"name": "gcp", "config": {"cmd-path": "sh"}}}, {}, "users[0].user.auth-provider", "exec"),
    ({"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}, {}, "users[0].user.tokenFile", "files"),
    ({"client-certificate": "/etc/ssl/c.pem"}, {}, "users[0].user.client-certificate", "files"),
    ({"client-key": "/etc/ssl/k.pem"}, {}, "users[0].user.client-key", "files"),
    ({"token": "t"}, {"certificate-authority": "/etc/ssl/ca.pem"}, "clusters[0].cluster.certificate-authority", "files"),
    ({"token": "t"}, {"insecure-skip-tls-verify": True}, "clusters[0].cluster.insecure-skip-tls-verify", "tls"),
])
def test_a_tenants_kubeconfig_may_not_run_commands_read_files_or_skip_tls_unless_the_operator_allows_it(
        user, cluster, field, flag):
    import yaml

    text = yaml.safe_dump({"clusters": [{"name": "k", "cluster": dict({"server": "https://k:6443"}, **cluster)}],
                           "users": [{"name": "ok", "user": {"token": "t"}}, {"name": "u", "user": user}][-1:],
                           "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]})
    reason, message = Policy().kubeconfig_refusal(text)
    assert reason == "InsecureKubeconfig" and message.startswith(field + " in the Secret's kubeconfig")
    assert "--insecure-kubeconfig-%s" % flag in message
    assert Policy(kubeconfig_features=[flag]).kubeconfig_refusal(text) is None
    assert "/etc/ssl" not in message, "the value is the tenant's: the field is named, not shown"


def test_every_user_of_a_kubeconfig_is_checked_not_only_the_current_contexts():
    text = PLAIN_KUBECONFIG.replace("users: [", "users: [{name: spare, user: {tokenFile: /etc/passwd}}, ")
    assert Policy().kubeconfig_refusal(text)[1].startswith("users[0].user.tokenFile")
    assert Policy().kubeconfig_refusal(PLAIN_KUBECONFIG) is None


@pytest.mark.parametrize("text", ["users: {u: {exec: {}}}", "users: [[exec]]", "users: [{user: [exec]}]", "- a", "a: [",
                                  "clusters: x"])
def test_a_kubeconfig_of_odd_shape_is_refused_since_its_loader_might_find_what_the_check_did_not(text):
    assert Policy().kubeconfig_refusal(text)[0] == "InsecureKubeconfig"


def test_a_kubeconfigs_servers_and_proxies_are_held_to_the_allowed_urls():
    policy = Policy(["https://kube.example:6443"])
    assert policy.kubeconfig_refusal(PLAIN_KUBECONFIG) is None
    proxied = PLAIN_KUBECONFIG.replace('server: "https://kube.example:6443"',
                                       'server: "https://kube.example:6443", proxy-url: "http://10.1.2.3:3128"')
    reason, message = policy.kubeconfig_refusal(proxied)
    assert reason == "BackendURLNotAllowed" and message.startswith("clusters[0].cluster.proxy-url")


def executor_with(secrets, policy=None):
    kube = FakeKube(secrets=secrets)
    runner = FakeRunner(FakeBackend())
    queue = RecordingQueue()
    executor = Executor(kube, kube, runner, queue, clock=lambda: 1000.0, policy=policy)
    kube.listeners.append(executor.observe)
    return kube, runner, queue, executor


def conditions(obj):
    return dict((c["type"], c) for c in obj["status"]["conditions"])


def test_a_refused_bridgejob_fails_with_its_reason_before_any_finalizer_or_playbook():
    kube, runner, queue, executor = executor_with({})
    kube.create(bridgejob({"type": "kubernetes", "namespace": "tenant-b"}))
    settle(executor, queue)
    obj = kube.objects["tenant-a/job"]
    assert not runner.calls and not obj["metadata"].get("finalizers")
    assert obj["status"]["phase"] == "Failed" and obj["status"]["failureClass"] == "rejected"
    failed = conditions(obj)["Failed"]
    assert failed["status"] == "True" and failed["reason"] == "NamespaceNotAllowed"
    assert failed["message"].startswith("spec.backend.namespace: 'tenant-b' is not this BridgeJob's namespace 'tenant-a'")


def test_a_url_outside_the_operators_list_is_refused_and_nothing_is_sent():
    kube, runner, queue, executor = executor_with({"tenant-a/creds": {"user": "u", "token": "t"}},
                                                  Policy(["http://127.0.0.1:6820"]))
    kube.create(bridgejob({"type": "slurm", "url": "http://127.0.0.1:9", "credentialsSecretRef": {"name": "creds"}}))
    settle(executor, queue)
    obj = kube.objects["tenant-a/job"]
    assert not runner.calls and conditions(obj)["Failed"]["reason"] == "BackendURLNotAllowed"


def test_an_insecure_kubeconfig_in_the_secret_is_never_handed_to_a_playbook_and_a_fixed_one_is():
    kube, runner, queue, executor = executor_with({"tenant-a/kc": {"kubeconfig": EXEC_KUBECONFIG}})
    kube.create(bridgejob({"type": "kubernetes", "credentialsSecretRef": {"name": "kc"}}))
    settle(executor, queue)
    obj = kube.objects["tenant-a/job"]
    assert FINALIZER in obj["metadata"]["finalizers"] and not runner.calls
    reachable = conditions(obj)["BackendReachable"]
    assert reachable["status"] == "False" and reachable["reason"] == "InsecureKubeconfig"
    assert reachable["message"].startswith("users[0].user.exec in the Secret's kubeconfig runs a command")
    assert obj["status"]["phase"] == "Pending"
    assert queue.later == [("tenant-a/job", queue.rate_limiter.cap)], "the fix is a Secret's: retried at the cap"
    kube.secrets["tenant-a/kc"] = {"kubeconfig": PLAIN_KUBECONFIG}
    queue.keys.append("tenant-a/job")
    settle(executor, queue)
    assert [call[0] for call in runner.calls] == ["submit"]


@pytest.mark.parametrize("server", ["http://127.0.0.1:9\\\\@127.0.0.1:8/ok", "https://0x7f.1:6443", "https://kube.example:6443 "])
def test_a_kubeconfig_server_the_clients_parser_refuses_is_refused_with_or_without_a_list(server):
    """Issue 37 item 3: one parser (_urls.py) for the check and the client that sends."""
    text = PLAIN_KUBECONFIG.replace('"https://kube.example:6443"', '"%s"' % server)
    for policy in (Policy(), Policy(["http://127.0.0.1:8", "https://kube.example:6443"])):
        reason, message = policy.kubeconfig_refusal(text)
        assert reason == "BackendURLNotAllowed" and message.startswith("clusters[0].cluster.server")
