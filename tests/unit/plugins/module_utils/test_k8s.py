"""The kubernetes backend (module_utils/k8s/): the manifests it renders, byte for byte; the
failure classes it reads from Job and Pod statuses (fixtures/kubernetes, hand-written in the
apiserver's shapes, and recorded from the real cluster where that ran); validation that names the
field; and its calls, through the real `kubernetes` client, against an apiserver stub (k8s_stub.py).
"""

import glob
import json
import os

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._backend import interpreter
from ansible_collections.bridge.hpc.plugins.module_utils._errors import AuthFailed, ConnectionFailed, ServerError, SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_absent, ensure_present
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec
from ansible_collections.bridge.hpc.plugins.module_utils.k8s.client import K8sClient
from ansible_collections.bridge.hpc.plugins.module_utils.k8s.compile import compile_job, identity_hash, job_name
from ansible_collections.bridge.hpc.plugins.module_utils.k8s.states import normalize_job

from k8s_stub import ApiServerStub, node, status
from recorded import FIXTURES

IMAGE = {"kubernetes": {"image": "localhost/bridge/busybox:latest"}}


def spec(**params):
    params.setdefault("script", "#!/bin/sh -e\necho hi\n")
    params.setdefault("identity", "step:1")
    params.setdefault("backend_options", IMAGE)
    return normalize_spec(params, K8sClient)


# ---------------------------------------------------------------- rendering

def test_render_is_byte_exact():
    rendered = compile_job(spec(name="step-one", environment={"B": 2, "A": "x y"}, queue="team-a", qos="batch-low",
                                resources={"cpus_per_task": 2, "memory": "1G", "gpus": 1, "time_limit": "00:10:00"}),
                           "research")
    labels = {"bridge.dev/identity-hash": identity_hash("step:1"),
              "app.kubernetes.io/managed-by": "bridge", "kueue.x-k8s.io/queue-name": "team-a"}
    annotations = {"bridge.dev/identity": "step:1", "bridge.dev/name": "step-one"}
    name = "step-1-" + identity_hash("step:1")[:12]
    limits = {"cpu": "2", "memory": "1024Mi", "nvidia.com/gpu": "1"}
    assert rendered == {
        "namespace": "research",
        "config_map": {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "research",
                         "labels": {"bridge.dev/identity-hash": identity_hash("step:1"),
                                    "app.kubernetes.io/managed-by": "bridge"},
                         "annotations": {"bridge.dev/identity": "step:1"}},
            "data": {"script": "#!/bin/sh -e\necho hi\n"}},
        "job": {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "research", "labels": labels, "annotations": annotations},
            "spec": {
                "backoffLimit": 0, "ttlSecondsAfterFinished": 604800, "activeDeadlineSeconds": 600, "suspend": True,
                "template": {
                    "metadata": {"labels": labels, "annotations": annotations},
                    "spec": {
                        "restartPolicy": "Never",
                        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                                            "seccompProfile": {"type": "RuntimeDefault"}},
                        "containers": [{
                            "name": "job", "image": "localhost/bridge/busybox:latest",
                            "command": ["/bin/sh", "-e", "/bridge/job/script"],
                            "workingDir": "/bridge/work",
                            "env": [{"name": "A", "value": "x y"}, {"name": "B", "value": "2"}],
                            "volumeMounts": [{"name": "script", "mountPath": "/bridge/job", "readOnly": True},
                                             {"name": "work", "mountPath": "/bridge/work"}],
                            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                                                "runAsNonRoot": True},
                            "resources": {"requests": limits, "limits": limits}}],
                        "volumes": [{"name": "script", "configMap": {"name": name, "defaultMode": 0o555}},
                                    {"name": "work", "emptyDir": {}}],
                        "priorityClassName": "batch-low",
                        "automountServiceAccountToken": False}}}}}
    # What goes over the wire is this JSON, keys in this order: what `rendered` shows is what is sent.
    assert json.loads(json.dumps(rendered)) == rendered


def test_names_are_dns_labels_and_distinct_for_identities_differing_in_case_or_punctuation():
    names = set(job_name(identity) for identity in ("Step:1", "step:1", "step.1", "x" * 128, "::a"))
    assert len(names) == 5
    for name in names:
        assert len(name) <= 63 and __import__("re").match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", name), name


def test_the_interpreter_line_is_read_as_the_kernel_reads_it():
    assert interpreter("#!/usr/bin/env python3\nprint(1)\n") == ["/usr/bin/env", "python3"]
    assert interpreter("#! /bin/bash -e -u\n") == ["/bin/bash", "-e -u"]
    with pytest.raises(SpecError, match="^script: "):
        interpreter("#!\n")


def test_memory_per_cpu_is_multiplied_and_gpu_type_selects_nodes():
    job = compile_job(spec(resources={"cpus_per_task": 4, "memory_per_cpu": "512M", "gpus": 2, "gpu_type": "A100"},
                           backend_options={"kubernetes": {"image": "i", "node_selector": {"zone": "a"}}}),
                      "ns", gpu_resource="amd.com/gpu")["job"]["spec"]["template"]["spec"]
    assert job["containers"][0]["resources"]["limits"] == {"cpu": "4", "memory": "2048Mi", "amd.com/gpu": "2"}
    assert job["nodeSelector"] == {"zone": "a", "nvidia.com/gpu.product": "A100"}


@pytest.mark.parametrize("params, field", [
    (dict(backend_options={}), "backend_options.kubernetes.image"),
    (dict(backend_options={"kubernetes": {"image": "i", "imagePullPolicy": "Never"}}), "backend_options.kubernetes.imagePullPolicy"),
    (dict(backend_options={"kubernetes": {"image": "i", "backoff_limit": "2"}}), "backend_options.kubernetes.backoff_limit"),
    (dict(backend_options={"kubernetes": {"image": "i", "labels": {"bridge.dev/identity-hash": "x"}}}),
     "backend_options.kubernetes.labels.bridge.dev/identity-hash"),
    (dict(resources={"tasks": 2}), "resources.tasks"),
    (dict(resources={"nodes": 2}), "resources.nodes"),
    (dict(resources={"tasks_per_node": 4}), "resources.tasks_per_node"),
    (dict(stdout="/tmp/out"), "stdout"),
    (dict(account="physics"), "account"),
    (dict(constraints="avx512"), "constraints"),
])
def test_what_a_job_cannot_be_is_refused_naming_the_field(params, field):
    with pytest.raises(SpecError) as refused:
        compile_job(spec(**params), "ns")
    assert refused.value.field == field


# ---------------------------------------------------------------- reading statuses

def fixture_cases():
    for path in sorted(glob.glob(os.path.join(FIXTURES, "kubernetes", "*", "job_*.json"))):
        yield os.path.relpath(path, os.path.join(FIXTURES, "kubernetes"))


ANY = object()  # the Job controller deletes a Pod past its deadline: it may be gone, or killed by either signal
EXPECTED = {
    # case: (phase, failure_class, exit_code, native_state)
    "completed": ("completed", None, 0, "Complete"),
    "exit3": ("failed", "non_zero_exit", 3, "Failed"),
    "deadline": ("failed", "timeout", ANY, "Failed"),
    "oom": ("failed", "out_of_memory", 137, "Failed"),
    "evicted": ("failed", "node_failure", 137, "Failed"),
    "running": ("running", None, None, "Running"),
    "unschedulable": ("queued", "rejected", None, "Pending"),
    "insufficient": ("queued", None, None, "Pending"),
    "imagepull": ("queued", "rejected", None, "Pending"),
    "suspended": ("queued", None, None, "Suspended"),
    "deleting": ("cancelled", "cancelled", None, "Deleting"),
}


@pytest.mark.parametrize("path", list(fixture_cases()))
def test_failure_classes_from_job_and_pod_statuses(path):
    with open(os.path.join(FIXTURES, "kubernetes", path)) as handle:
        body = json.load(handle)["body"]
    job = normalize_job(body["job"], body["pods"])
    case = os.path.basename(path)[len("job_"):-len(".json")]
    phase, failure_class, exit_code, native_state = EXPECTED[case]
    assert (job["phase"], job["failure_class"], job["native_state"]) == (phase, failure_class, native_state)
    assert exit_code is ANY or job["exit_code"] == exit_code
    assert job["identity"] == body["job"]["metadata"]["annotations"]["bridge.dev/identity"]
    if case in ("unschedulable", "insufficient"):
        assert job["reason"].startswith("Unschedulable: 0/")


def test_an_identity_annotation_without_its_hash_label_is_not_bridges():
    with open(os.path.join(FIXTURES, "kubernetes", "handwritten", "job_running.json")) as handle:
        native = json.load(handle)["body"]["job"]
    native["metadata"]["annotations"]["bridge.dev/identity"] = "someone-else"
    assert normalize_job(native)["identity"] is None


# ---------------------------------------------------------------- against the apiserver stub

@pytest.fixture
def stub():
    return ApiServerStub(namespaces=("default", "research"), nodes=[node("node-1", cpu="4", memory="8026164Ki")])


def posts(stub, kind):
    return [sent for sent in stub.sent if sent[0] == "POST" and sent[1].endswith("/" + kind)]


def test_submit_creates_the_config_map_owned_by_the_job(stub):
    client = stub.client("research")
    job_id = client.submit(spec())
    config_map = stub.objects["configmaps"][("research", job_id)]
    job = stub.objects["jobs"][("research", job_id)]
    assert config_map["data"]["script"] == "#!/bin/sh -e\necho hi\n"
    assert config_map["metadata"]["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "Job", "name": job_id,
                                                          "uid": job["metadata"]["uid"], "blockOwnerDeletion": False}]
    assert posts(stub, "jobs")[0][3] == client.render(spec())["job"]


def test_a_create_that_races_finds_the_job_and_makes_no_second_one(stub):
    client = stub.client()
    first = client.submit(spec())
    assert client.submit(spec()) == first
    assert len(stub.objects["jobs"]) == 1 and len(posts(stub, "jobs")) == 2


def test_a_job_of_that_name_for_another_identity_is_not_taken_for_ours(stub):
    client = stub.client()
    job_id = client.submit(spec())
    stub.objects["jobs"][("default", job_id)]["metadata"]["annotations"]["bridge.dev/identity"] = "other"
    with pytest.raises(Exception, match="that Bridge did not make"):
        client.submit(spec())


def test_a_create_is_never_retried_but_a_read_is(stub):
    client = stub.client(retries=3)
    stub.faults.append(("POST", r"/jobs$", status(503, "ServiceUnavailable", "etcd is busy")))
    with pytest.raises(ServerError) as failed:
        client.submit(spec())
    assert failed.value.temporary and len(posts(stub, "jobs")) == 1
    stub.faults.extend([("GET", r"/jobs$", status(503, "ServiceUnavailable", "busy"))] * 2)
    assert client.find("step:1") is None
    assert len([s for s in stub.sent if s[0] == "GET" and s[1].endswith("/jobs")]) == 3


def test_a_500_is_not_sent_again_as_no_client_of_bridge_sends_it_again(stub):
    client = stub.client(retries=3)
    stub.faults.append(("GET", r"/jobs$", status(500, "InternalError", "etcd hiccup")))
    with pytest.raises(ServerError) as failed:
        client.find("step:1")
    assert failed.value.temporary, "the controller tries the step again later"
    assert len([s for s in stub.sent if s[0] == "GET" and s[1].endswith("/jobs")]) == 1


def test_find_many_is_one_job_list_and_one_pod_list_by_identity_hash(stub):
    client = stub.client()
    for identity in ("a", "b:1", "c"):
        client.submit(spec(identity=identity))
    del stub.sent[:]
    found = client.find_many(["a", "b:1", "nope"])
    assert sorted(found) == ["a", "b:1"]
    assert [s[1] for s in stub.sent] == ["/apis/batch/v1/namespaces/default/jobs", "/api/v1/namespaces/default/pods"]
    assert stub.sent[0][2]["labelSelector"].startswith("bridge.dev/identity-hash in (")


def test_check_names_the_namespace_the_queue_and_the_resources(stub):
    with pytest.raises(SpecError) as refused:
        stub.client("nosuch").check(spec())
    assert refused.value.field == "namespace" and "'nosuch' does not exist" in str(refused.value)
    with pytest.raises(SpecError, match="Kueue is not installed") as refused:
        stub.client().check(spec(queue="team-a"))
    assert refused.value.field == "queue"
    stub.kueue = True
    with pytest.raises(SpecError, match="LocalQueue 'team-a' does not exist"):
        stub.client().check(spec(queue="team-a"))
    stub.local_queues[("default", "team-a")] = {"metadata": {"name": "team-a", "namespace": "default"}}
    stub.client().check(spec(queue="team-a"))
    with pytest.raises(SpecError, match="1000 CPUs requested, but the largest node has 4 allocatable") as refused:
        stub.client().check(spec(resources={"cpus_per_task": 1000}))
    assert refused.value.field == "resources.cpus_per_task"
    with pytest.raises(SpecError) as refused:
        stub.client().check(spec(resources={"memory": "64G"}))
    assert refused.value.field == "resources.memory"
    with pytest.raises(SpecError) as refused:
        stub.client().check(spec(resources={"gpus": 1}))
    assert refused.value.field == "resources.gpus"
    with pytest.raises(SpecError) as refused:
        stub.client().check(spec(backend_options={"kubernetes": {"image": "i", "node_selector": {"gpu": "yes"}}}))
    assert refused.value.field == "backend_options.kubernetes.node_selector"


def test_check_skips_what_the_user_may_not_read(stub):
    stub.faults.append(("GET", r"/nodes$", status(403, "Forbidden", 'nodes is forbidden: User "alice" cannot list')))
    stub.client().check(spec(resources={"cpus_per_task": 1000}))


def test_present_absent_lifecycle_deletes_with_foreground_propagation(stub):
    client = stub.client()
    first = ensure_present(client, spec(), check_mode=True)
    assert first["changed"] and not stub.objects["jobs"]
    applied = ensure_present(client, spec())
    assert applied["changed"] and applied["job"]["phase"] == "queued"
    assert not ensure_present(client, spec())["changed"]
    gone = ensure_absent(client, identity="step:1")
    assert gone["changed"] and gone["job"]["phase"] == "cancelled" and gone["job"]["terminal"]
    assert [s[3] for s in stub.sent if s[0] == "DELETE"] == [{"propagationPolicy": "Foreground"}]
    assert not ensure_absent(client, identity="step:1")["changed"]


def test_logs_come_from_the_newest_pod(stub):
    client = stub.client()
    job_id = client.submit(spec())
    assert client.logs(job_id) == ""
    with open(os.path.join(FIXTURES, "kubernetes", "handwritten", "job_completed.json")) as handle:
        pod = json.load(handle)["body"]["pods"][0]
    stub.set_status("default", job_id, {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1}, [pod])
    stub.logs[pod["metadata"]["name"]] = "#!/bin/sh -e\necho hi\nhi\n"
    assert client.logs(job_id) == "#!/bin/sh -e\necho hi\nhi\n"
    job = client.get(job_id)
    assert (job["phase"], job["exit_code"], job["pod"]) == ("completed", 0, pod["metadata"]["name"])


def test_an_unreachable_apiserver_is_a_temporary_connection_error(stub):
    import urllib3

    client = stub.client()

    def refuse(*_args, **_kwargs):
        raise urllib3.exceptions.MaxRetryError(None, "/version", "Connection refused")

    stub.route = refuse
    with pytest.raises(ConnectionFailed) as failed:
        client.describe()
    assert failed.value.temporary


BAD_KUBECONFIG = """apiVersion: v1
kind: Config
users:
- name: alice
  user:
    token: sup3r-s3cret-t0ken
  bad: [unclosed
"""


@pytest.mark.parametrize("content", [BAD_KUBECONFIG, "just-a-s3cret-string", """apiVersion: v1
kind: Config
current-context: nowhere
users:
- name: alice
  user: {token: sup3r-s3cret-t0ken}
"""])
def test_a_bad_kubeconfig_is_never_echoed(content):
    with pytest.raises(AuthFailed) as failed:
        K8sClient.from_options({"kubeconfig_content": content}.get)
    message = str(failed.value) + json.dumps(failed.value.to_dict())
    assert "s3cret" not in message and "kubeconfig_content" in message


def test_without_kubeconfig_the_in_cluster_service_account_is_used(monkeypatch):
    for variable in ("KUBERNETES_SERVICE_HOST", "K8S_AUTH_KUBECONFIG", "KUBECONFIG", "K8S_AUTH_HOST", "K8S_AUTH_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(AuthFailed, match="in-cluster ServiceAccount"):
        K8sClient.from_options(lambda option: None)


def test_a_kubeconfig_file_its_context_and_namespace(tmp_path):
    path = tmp_path / "config"
    path.write_text("""apiVersion: v1
kind: Config
current-context: a
clusters:
- {name: c, cluster: {server: "https://a.example:6443"}}
- {name: d, cluster: {server: "https://b.example:6443"}}
users:
- {name: u, user: {token: t0ken-t0ken}}
contexts:
- {name: a, context: {cluster: c, user: u, namespace: team-a}}
- {name: b, context: {cluster: d, user: u}}
""")
    options = {"kubeconfig": str(path)}
    client = K8sClient.from_options(options.get)
    assert (client.url, client.namespace) == ("https://a.example:6443", "team-a")
    options["context"] = "b"
    client = K8sClient.from_options(options.get)
    assert (client.url, client.namespace) == ("https://b.example:6443", "default")
    options.update(namespace="mine", url="https://proxy.example:8443")
    client = K8sClient.from_options(options.get)
    assert (client.url, client.namespace) == ("https://proxy.example:8443", "mine")
    assert client.api_client.configuration.host == "https://proxy.example:8443"


def test_the_launcher_is_nothing_for_the_one_task_and_refused_for_more(stub):
    client = stub.client()
    one = spec(script="#!/bin/sh\n$(LAUNCHER) ./a.out\n")
    assert client.render(one)["config_map"]["data"]["script"] == "#!/bin/sh\n./a.out\n"
    assert one["identity"] == "step:1"
    with pytest.raises(SpecError) as refused:
        client.render(spec(script="#!/bin/sh\n$(LAUNCHER) ./a.out\n", resources={"tasks": 4}))
    assert refused.value.field == "resources.tasks"


def test_many_absent_reports_a_job_deleted_at_once_as_cancelled(stub):
    from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_many_absent

    client = stub.client()
    client.submit(spec())
    [result] = ensure_many_absent(client, ["step:1"], wait=True, poll_interval=0.01, sleep=lambda s: None)
    assert result["changed"] and not result["failed"]
    assert (result["job"]["phase"], result["job"]["terminal"], result["job"]["failure_class"]) == ("cancelled", True, "cancelled")


# ---------------------------------------------------------------- the environment users already have
# (issue 26, item 6): K8S_AUTH_* as kubernetes.core reads them, KUBECONFIG as kubectl does.

K8S_VARIABLES = ("K8S_AUTH_KUBECONFIG", "KUBECONFIG", "K8S_AUTH_CONTEXT", "K8S_AUTH_HOST", "K8S_AUTH_API_KEY",
                 "K8S_AUTH_SSL_CA_CERT", "K8S_AUTH_VERIFY_SSL", "KUBERNETES_SERVICE_HOST")


def kubeconfig_file(path, name, server, token="t0ken-t0ken", namespace=None, current=True):
    context = {"cluster": name, "user": name}
    if namespace:
        context["namespace"] = namespace
    document = {"apiVersion": "v1", "kind": "Config",
                "clusters": [{"name": name, "cluster": {"server": server}}],
                "users": [{"name": name, "user": {"token": token}}],
                "contexts": [{"name": name, "context": context}]}
    if current:
        document["current-context"] = name
    path.write_text(json.dumps(document))
    return str(path)


def bearer(client):
    return client.api_client.configuration.auth_settings()["BearerToken"]["value"]


@pytest.fixture
def clean_env(monkeypatch):
    for variable in K8S_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    return monkeypatch


def none(option):
    """The options of a backend-neutral module (job, jobs, job_info): no environment fallbacks of their own."""
    return None


def test_kubeconfig_is_read_as_kubectl_reads_it(clean_env, tmp_path):
    clean_env.setenv("KUBECONFIG", kubeconfig_file(tmp_path / "a", "a", "https://a.example:6443", namespace="team-a"))
    client = K8sClient.from_options(none)
    assert (client.url, client.namespace) == ("https://a.example:6443", "team-a")
    # K8S_AUTH_KUBECONFIG, kubernetes.core's, comes first; an empty one (an AWX field left empty) is unset.
    clean_env.setenv("K8S_AUTH_KUBECONFIG", kubeconfig_file(tmp_path / "b", "b", "https://b.example:6443"))
    assert K8sClient.from_options(none).url == "https://b.example:6443"
    clean_env.setenv("K8S_AUTH_KUBECONFIG", "")
    assert K8sClient.from_options({"kubeconfig": ""}.get).url == "https://a.example:6443"


def test_a_kubeconfig_list_is_merged_the_first_file_winning(clean_env, tmp_path):
    first = kubeconfig_file(tmp_path / "first", "a", "https://a.example:6443")
    second = kubeconfig_file(tmp_path / "second", "b", "https://b.example:6443", namespace="team-b")
    clean_env.setenv("KUBECONFIG", "%s:%s" % (first, second))
    assert K8sClient.from_options(none).url == "https://a.example:6443"
    clean_env.setenv("K8S_AUTH_CONTEXT", "b")
    client = K8sClient.from_options(none)
    assert (client.url, client.namespace) == ("https://b.example:6443", "team-b")


def test_what_awxs_kubernetes_bearer_token_credential_injects(clean_env, tmp_path):
    """AWX's "OpenShift or Kubernetes API Bearer Token" type: K8S_AUTH_HOST, K8S_AUTH_API_KEY,
    K8S_AUTH_SSL_CA_CERT with K8S_AUTH_VERIFY_SSL=True (awx/main/models/credential/injectors.py)."""
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    clean_env.setenv("K8S_AUTH_HOST", "https://api.example:6443/")
    clean_env.setenv("K8S_AUTH_API_KEY", "s3cret-bearer")
    clean_env.setenv("K8S_AUTH_SSL_CA_CERT", str(ca))
    clean_env.setenv("K8S_AUTH_VERIFY_SSL", "False")
    client = K8sClient.from_options(none)
    configuration = client.api_client.configuration
    assert configuration.host == "https://api.example:6443" and bearer(client) == "Bearer s3cret-bearer"
    assert configuration.ssl_ca_cert == str(ca)
    # K8S_AUTH_VERIFY_SSL is not read: only validate_certs turns verification off.
    assert configuration.verify_ssl is True


def test_an_api_key_replaces_the_kubeconfigs_credentials(clean_env, tmp_path):
    path = kubeconfig_file(tmp_path / "config", "a", "https://a.example:6443", token="kubeconfig-t0ken")
    client = K8sClient.from_options({"kubeconfig": path, "api_key": "option-t0ken"}.get)
    assert bearer(client) == "Bearer option-t0ken"
    # the kubeconfig loader's hook would put its own token back before each request
    assert client.api_client.configuration.refresh_api_key_hook is None


def test_a_kubeconfig_handed_over_takes_no_apiserver_or_token_from_the_environment(clean_env, tmp_path):
    clean_env.setenv("K8S_AUTH_HOST", "https://elsewhere.example:6443")
    clean_env.setenv("K8S_AUTH_API_KEY", "env-t0ken")
    with open(kubeconfig_file(tmp_path / "c", "c", "https://c.example:6443", token="content-t0ken")) as handle:
        content = handle.read()
    client = K8sClient.from_options({"kubeconfig_content": content}.get)
    assert client.url == "https://c.example:6443" and bearer(client) == "Bearer content-t0ken"
