"""Issue 37 against a real kube-apiserver, as hostile tenants would try it: every request a BridgeJob
causes is made for its author, decided when it is made; the controller never lends its own identity.

The controller runs as its ServiceAccount under the shipped RBAC (deploy/rbac.yaml, nothing bound
cluster-wide beyond Bridge's own objects), with deploy/admission-policy.yaml and
deploy/author-mutation/ installed, and --namespace-selector: it serves only the namespaces an admin
labelled for this run. tenant-a and tenant-b are tenants' namespaces as deploy/tenant/tenant.yaml makes
them (the controller's RoleBinding, the Job ServiceAccount bridge-runner). Authors log in with real
ServiceAccount tokens:

* alice may create BridgeJobs, BridgeBackends, Secrets and ConfigMaps in tenant-a, but not Jobs;
* bob may also create Jobs in tenant-a;
* carol may create BridgeJobs in tenant-b, and read no Secret there;
* dave likewise in tenant-c, a namespace labelled for another controller.
"""

import os
import signal
import subprocess
import sys
import uuid

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from conftest import COLLECTIONS, REPO, kube_node_env
from controller_support import GROUP, PLURAL, VERSION, controller_env, free_port, release_all, tenant_namespace
from test_controller_chaos import account  # noqa: F401 pylint: disable=unused-import
from test_controller_e2e import kube, wait_for  # noqa: F401 pylint: disable=unused-import
from test_admission import grant
from test_crd import login

SERVED_LABEL = "bridge.dev/tenant-authors-run"
AUTHOR_RULES = [
    {"apiGroups": ["bridge.dev"], "resources": ["bridgejobs", "bridgebackends"], "verbs": ["create", "get", "list", "patch"]},
    {"apiGroups": [""], "resources": ["secrets", "configmaps"], "verbs": ["create", "get"]},
]
JOB_RULES = [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get", "list", "delete"]}]
IMAGE_OPTIONS = {"kubernetes": {"image": "localhost/bridge/busybox:latest", "image_pull_policy": "Never"}}
# What the attack of item 1 had a carol's Job print: a ServiceAccount token.
TOKEN_SCRIPT = "#!/bin/sh\ncat /var/run/secrets/kubernetes.io/serviceaccount/token || true\necho done\n"


class Author:
    """One tenant's calls, with their own token."""

    def __init__(self, env, admin, namespace, name):
        self.namespace, self.name = namespace, name
        self.user = "system:serviceaccount:%s:%s" % (namespace, name)
        api_client = login(env, admin, namespace, name)
        self.custom, self.core = client.CustomObjectsApi(api_client), client.CoreV1Api(api_client)

    def bridgejob(self, name, backend=None, namespace=None, **spec):
        spec = dict({"script": "#!/bin/sh\necho hi\n"}, **spec)
        if backend is not None:
            spec["backend"] = backend
        body = {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "BridgeJob", "metadata": {"name": name}, "spec": spec}
        return self.custom.create_namespaced_custom_object(GROUP, VERSION, namespace or self.namespace, PLURAL, body)

    def backend(self, name, spec):
        body = {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "BridgeBackend", "metadata": {"name": name}, "spec": spec}
        return self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, "bridgebackends", body)

    def secret(self, name, data):
        self.core.create_namespaced_secret(self.namespace, {"metadata": {"name": name}, "stringData": data})


@pytest.fixture(scope="module")
def tenants(kube, account, tmp_path_factory):  # pylint: disable=redefined-outer-name
    env, admin = kube
    run = uuid.uuid4().hex[:8]
    core, rbac = client.CoreV1Api(admin), client.RbacAuthorizationV1Api(admin)
    ctx = type("Tenants", (), {})()
    ctx.a, ctx.b, ctx.c = ("tenant-%s-%s" % (letter, run) for letter in "abc")
    for namespace in (ctx.a, ctx.b):
        tenant_namespace(admin, namespace, labels={SERVED_LABEL: run})
    tenant_namespace(admin, ctx.c, labels={SERVED_LABEL: "another-controllers"})
    for namespace, name in ((ctx.a, "alice"), (ctx.a, "bob"), (ctx.b, "carol"), (ctx.c, "dave")):
        core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
        # carol and dave: BridgeJobs only, no Secret of theirs to read.
        grant(rbac, namespace, name, "%s-bridge" % name, AUTHOR_RULES if namespace == ctx.a else AUTHOR_RULES[:1])
    grant(rbac, ctx.a, "bob", "bob-jobs", JOB_RULES)
    ctx.alice, ctx.bob = Author(env, admin, ctx.a, "alice"), Author(env, admin, ctx.a, "bob")
    ctx.carol, ctx.dave = Author(env, admin, ctx.b, "carol"), Author(env, admin, ctx.c, "dave")
    ctx.admin, ctx.batch = client.CustomObjectsApi(admin), client.BatchV1Api(admin)
    tmp_path = tmp_path_factory.mktemp("tenant-authors")
    log_path = tmp_path / "controller.log"
    command = [sys.executable, "-m", "bridge_controller.main", "--kubeconfig", account[0],
               "--namespace-selector", "%s=%s" % (SERVED_LABEL, run),
               "--playbook-dir", os.path.join(REPO, "playbooks"), "--work-dir", str(tmp_path / "runner"),
               "--collections-path", COLLECTIONS, "--port", str(free_port()), "--bind-address", "127.0.0.1",
               "--batch-window", "0.3", "--retry-cap", "5"]
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=controller_env())
    try:
        yield ctx
    finally:
        process.send_signal(signal.SIGTERM)
        returncode = process.wait(timeout=120)
        for namespace in (ctx.a, ctx.b, ctx.c):
            release_all(ctx.admin, namespace)
            core.delete_namespace(namespace)
    text = log_path.read_text()
    assert account[1] not in text
    assert returncode == 0, text[-4000:]


def read(ctx, namespace, name):
    return ctx.admin.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)


def condition(obj, kind):
    return dict((c["type"], c) for c in (obj.get("status") or {}).get("conditions") or []).get(kind) or {}


def wait_condition(ctx, namespace, name, kind="BackendReachable", status="False"):
    return wait_for(lambda: read(ctx, namespace, name), lambda o: condition(o, kind).get("status") == status, timeout=120)


def jobs(ctx, namespace):
    return [job.metadata.name for job in ctx.batch.list_namespaced_job(namespace).items]


def test_admission_records_the_author_and_nobody_forges_or_changes_it(tenants):
    ctx = tenants
    body = {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "BridgeJob",
            "metadata": {"name": "forged", "annotations": {"bridge.dev/author": ctx.bob.user,
                                                           "bridge.dev/author-groups": "system:masters"}},
            "spec": {"backend": {"type": "ray", "url": "http://127.0.0.1:9"}, "script": "#!/bin/sh\n"}}
    created = ctx.alice.custom.create_namespaced_custom_object(GROUP, VERSION, ctx.a, PLURAL, body)
    annotations = created["metadata"]["annotations"]
    assert annotations["bridge.dev/author"] == ctx.alice.user
    assert "system:masters" not in annotations["bridge.dev/author-groups"].split("\n")
    assert "system:serviceaccounts:%s" % ctx.a in annotations["bridge.dev/author-groups"].split("\n")
    with pytest.raises(ApiException) as caught:
        ctx.alice.custom.patch_namespaced_custom_object(GROUP, VERSION, ctx.a, PLURAL, "forged",
                                                        {"metadata": {"annotations": {"bridge.dev/author": ctx.bob.user}}})
    assert caught.value.status == 403 and "change only with the spec" in caught.value.body
    # bob rewriting alice's spec becomes its author: the controller acts for whoever wrote it.
    changed = ctx.bob.custom.patch_namespaced_custom_object(GROUP, VERSION, ctx.a, PLURAL, "forged", {"spec": {"pollInterval": 7}})
    assert changed["metadata"]["annotations"]["bridge.dev/author"] == ctx.bob.user


@pytest.mark.parametrize("data", [{"note": "x"}, {"kubeconfig": ""}])
def test_a_secret_without_a_kubeconfig_lends_nothing_of_the_controllers(tenants, data):
    """Item 1: the Secret passes admission; no Job anywhere, no token in any status."""
    ctx = tenants
    name = "nokc-%s" % uuid.uuid4().hex[:6]
    ctx.alice.secret(name, data)
    for suffix, backend in (("other", {"namespace": ctx.b}), ("own", {})):
        backend = dict({"type": "kubernetes", "credentialsSecretRef": {"name": name}}, **backend)
        ctx.alice.bridgejob("%s-%s" % (name, suffix), backend, script=TOKEN_SCRIPT, backendOptions={
            "kubernetes": dict(IMAGE_OPTIONS["kubernetes"], service_account_name="carol")})
    for suffix in ("other", "own"):
        obj = wait_condition(ctx, ctx.a, "%s-%s" % (name, suffix))
        assert condition(obj, "BackendReachable")["reason"] == "CredentialsMissing", obj["status"]
        assert "never with the controller's own" in condition(obj, "BackendReachable")["message"]
        assert not obj["status"].get("jobId")
    assert jobs(ctx, ctx.a) == [] and jobs(ctx, ctx.b) == []


def test_a_backend_object_does_not_get_its_users_past_their_own_rights(tenants):
    """Item 2: bob's kubernetes BridgeBackend (bob may create Jobs) named by alice's BridgeJob
    (backendRef): admitted, since the object is bob's; refused by the controller, which asks for
    alice; bob's own BridgeJob on it runs, as tenant-a's Job ServiceAccount."""
    ctx = tenants
    ctx.bob.backend("bobs-node", {"type": "kubernetes"})
    ctx.alice.bridgejob("alice-via-bob", backendRef={"name": "bobs-node"}, backendOptions=IMAGE_OPTIONS)
    ctx.bob.bridgejob("bob-own", backendRef={"name": "bobs-node"}, backendOptions=IMAGE_OPTIONS)
    refused = wait_condition(ctx, ctx.a, "alice-via-bob")
    reachable = condition(refused, "BackendReachable")
    assert reachable["reason"] == "AuthorForbidden", refused["status"]
    assert reachable["message"].startswith("'%s' may not create Jobs (batch) in namespace '%s'" % (ctx.alice.user, ctx.a))
    ran = wait_for(lambda: read(ctx, ctx.a, "bob-own"), lambda o: (o.get("status") or {}).get("jobId"), timeout=120)
    if kube_node_env():
        done = wait_for(lambda: read(ctx, ctx.a, "bob-own"), lambda o: (o.get("status") or {}).get("phase") in (
            "Completed", "Failed"), timeout=180)
        assert done["status"]["phase"] == "Completed", done["status"]
    assert jobs(ctx, ctx.a) == [ran["status"]["jobId"]], "no Job for alice"


def test_an_author_who_may_not_read_a_secret_cannot_have_it_used(tenants, kube):  # pylint: disable=redefined-outer-name
    """carol may create BridgeJobs but read no Secret: naming her namespace's ops Secret gets her
    nothing sent with it (the controller could read it; she could not)."""
    ctx = tenants
    _env, admin = kube
    secret = {"metadata": {"name": "ops-only"}, "stringData": {"user": "ops", "token": "ops-token-7c1f"}}
    client.CoreV1Api(admin).create_namespaced_secret(ctx.b, secret)
    ctx.carol.bridgejob("carol-borrows", {"type": "slurm", "url": "http://127.0.0.1:9", "credentialsSecretRef": {"name": "ops-only"}})
    obj = wait_condition(ctx, ctx.b, "carol-borrows")
    reachable = condition(obj, "BackendReachable")
    assert reachable["reason"] == "AuthorForbidden", obj["status"]
    assert reachable["message"].startswith("'%s' may not get Secret 'ops-only' in namespace '%s'" % (ctx.carol.user, ctx.b))
    assert "ops-token-7c1f" not in str(obj)


def test_only_the_namespaces_an_admin_labelled_are_served(tenants):
    """Item 5: a BridgeJob's labels are its author's; namespace labels are the admin's. dave's
    namespace is labelled for another controller: this one writes nothing there."""
    ctx = tenants
    ctx.dave.bridgejob("dave-elsewhere", {"type": "ray", "url": "http://127.0.0.1:9"})
    ctx.carol.bridgejob("carol-served", {"type": "ray", "url": "http://127.0.0.1:9"})
    wait_for(lambda: read(ctx, ctx.b, "carol-served"), lambda o: (o.get("status") or {}).get("conditions"), timeout=120)
    # The watch delivered both; the one of the served namespace was handled, the other never is.
    other = read(ctx, ctx.c, "dave-elsewhere")
    assert not other.get("status") and not other["metadata"].get("finalizers"), other


def test_insecure_kubeconfig_features_need_namespaces_an_admin_chose(tmp_path):
    result = subprocess.run([sys.executable, "-m", "bridge_controller.main", "--insecure-kubeconfig-exec",
                             "--selector", "shard=trusted", "--playbook-dir", os.path.join(REPO, "playbooks"),
                             "--work-dir", str(tmp_path)], env=controller_env(), capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert "--insecure-kubeconfig-exec needs --namespace or --namespace-selector" in result.stderr
