"""Issues 21 and 37 against a real kube-apiserver (v1.34, --authorization-mode=Node,RBAC): a BridgeJob
never lets its author act as the controller.

deploy/admission-policy.yaml and deploy/author-mutation/ are applied (and stay: the other tests create
BridgeJobs as the admin, whom they let through) and checked with two authors, ServiceAccounts of a
fresh tenant namespace: alice may create BridgeJobs and Jobs there, bob only BridgeJobs. deploy/ is
rendered with kustomize, with and without its Components, and its RBAC applied under names of its
own (its own ServiceAccount, ClusterRoles and bindings) with deploy/tenant/tenant.yaml for tenant-a.
"""

import copy
import os
import shutil
import subprocess
import time
import uuid

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient

from test_crd import DEPLOY, GROUP, PLURAL, VERSION, apply, login, manifests, rejection, sample, unavailable
from test_crd import admin, deployed, kube  # noqa: F401 pylint: disable=unused-import
from controller_support import install_admission

POLICY = "bridge-jobs-within-their-authors-rights"
EVERY_NAMESPACE = "bridge-controller-tenant-every-namespace"
CONTROLLER = ("bridge-system", "bridge-controller")
# What a tenant's author is given in their namespace: BridgeJobs, and for alice also Jobs.
AUTHOR_RULES = [{"apiGroups": ["bridge.dev"], "resources": ["bridgejobs", "bridgebackends"], "verbs": ["create", "get", "patch"]}]
BACKEND_POLICY = "bridge-backends-within-their-authors-rights"
AUTHORS_POLICY = "bridge-authors-recorded"
JOB_RULES = [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create"]}]


def grant(rbac, namespace, account, name, rules):  # pylint: disable=redefined-outer-name
    rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": rules})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]})


def kubernetes_job(name, **backend):
    body = sample("kubernetes.yaml", "BridgeJob")
    body["metadata"]["name"] = name
    body["spec"]["backend"].update(backend)
    return body


@pytest.fixture(scope="module")
def tenants(kube, deployed):  # pylint: disable=redefined-outer-name
    """deploy/admission-policy.yaml applied; namespaces tenant-a-<id> and tenant-b-<id>; in tenant-a the
    authors alice (BridgeJobs and Jobs) and bob (BridgeJobs only), logged in with their tokens."""
    install_admission(deployed)
    core, rbac = client.CoreV1Api(deployed), client.RbacAuthorizationV1Api(deployed)
    run = uuid.uuid4().hex[:8]
    ctx = type("Tenants", (), {})()
    ctx.a, ctx.b = "tenant-a-%s" % run, "tenant-b-%s" % run
    ctx.run = run
    for namespace in (ctx.a, ctx.b):
        core.create_namespace({"metadata": {"name": namespace, "labels": {"bridge.dev/test": "admission"}}})
    try:
        for author in ("alice", "bob"):
            core.create_namespaced_service_account(ctx.a, {"metadata": {"name": author}})
            grant(rbac, ctx.a, author, "%s-bridgejobs" % author, AUTHOR_RULES)
        grant(rbac, ctx.a, "alice", "alice-jobs", JOB_RULES)
        for namespace in (ctx.a, ctx.b):
            core.create_namespaced_secret(namespace, {"metadata": {"name": "slurm-credentials"},
                                                      "stringData": {"user": "u", "token": "t"}})
        ctx.alice = client.CustomObjectsApi(login(kube, deployed, ctx.a, "alice"))
        ctx.bob = client.CustomObjectsApi(login(kube, deployed, ctx.a, "bob"))
        ctx.admin = client.CustomObjectsApi(deployed)
        ctx.bob_name = "system:serviceaccount:%s:bob" % ctx.a
        # The apiserver loads a new policy, and serves a new CRD's kind, a moment after it is written.
        deadline = time.time() + 60
        while True:
            try:
                ctx.bob.create_namespaced_custom_object(GROUP, VERSION, ctx.a, PLURAL, kubernetes_job("probe"), dry_run="All")
            except ApiException as error:
                if error.status == 403 and POLICY in error.body:
                    break
                if error.status not in (403, 404) or time.time() > deadline:
                    raise
            assert time.time() < deadline, "the policy did not refuse bob within 60 s"
            time.sleep(0.5)
        yield ctx
    finally:
        for namespace in (ctx.a, ctx.b):
            core.delete_namespace(namespace)


def create(api, namespace, body):
    return api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)


# ------------------------------------------------------------------ the policy as served

def test_the_policy_type_checks_against_the_crd(tenants, deployed):  # pylint: disable=redefined-outer-name
    """The apiserver type-checks the expressions against the BridgeJob schema in the background and
    writes warnings into the policy's status."""
    registration = client.AdmissionregistrationV1Api(deployed)
    for name in (POLICY, BACKEND_POLICY, AUTHORS_POLICY):
        deadline = time.time() + 30
        while True:
            policy = registration.read_validating_admission_policy(name)
            if policy.status and policy.status.observed_generation == policy.metadata.generation:
                break
            assert time.time() < deadline, "the status of %s was not written: %s" % (name, policy.status)
            time.sleep(0.5)
        assert not (policy.status.type_checking and policy.status.type_checking.expression_warnings), (
            name, policy.status.type_checking)


def test_an_author_who_may_not_create_jobs_cannot_have_the_controller_create_one(tenants):
    status, message, _fields = rejection(create, tenants.bob, tenants.a, kubernetes_job("bobs"))
    assert status == 403, message
    assert "ValidatingAdmissionPolicy '%s'" % POLICY in message, message
    assert "'%s' may not create Jobs (batch) in namespace '%s'" % (tenants.bob_name, tenants.a) in message, message
    assert "runs its Job for its\nauthor as the namespace's Job ServiceAccount" in message or \
        "runs its Job for its author as the namespace's Job ServiceAccount" in message, message


def test_an_author_who_may_create_jobs_may_have_the_controller_create_one(tenants):
    created = create(tenants.alice, tenants.a, kubernetes_job("alices"))
    assert created["spec"]["backend"] == {"type": "kubernetes", "validateCerts": True}
    own = create(tenants.alice, tenants.a, kubernetes_job("alices-own-namespace", namespace=tenants.a))
    assert own["spec"]["backend"]["namespace"] == tenants.a


def test_a_job_of_the_controllers_stays_in_the_bridgejobs_namespace(tenants):
    status, message, _fields = rejection(create, tenants.alice, tenants.a, kubernetes_job("elsewhere", namespace=tenants.b))
    assert status == 422, message
    assert ("spec.backend.namespace: '%s' is not this BridgeJob's namespace '%s'" % (tenants.b, tenants.a)) in message, message
    # Not even the admin: a Job elsewhere is a kubeconfig Secret's business, not the controller's.
    status, message, _fields = rejection(create, tenants.admin, tenants.a, kubernetes_job("elsewhere", namespace="kube-system"))
    assert status == 422 and "is not this BridgeJob's namespace" in message, message


def test_bridgejobs_that_do_not_run_with_the_controllers_account_are_not_its_concern(tenants):
    slurm = sample("slurm.yaml", "BridgeJob")
    slurm["metadata"]["name"] = "bobs-slurm"
    assert create(tenants.bob, tenants.a, slurm)["spec"]["backend"]["type"] == "slurm"
    # Another cluster, with a kubeconfig bob had to have (the Secret need not exist to be admitted).
    other = kubernetes_job("bobs-other-cluster", credentialsSecretRef={"name": "other-cluster"}, namespace="batch",
                           url="https://other-cluster.example.org:6443")
    assert create(tenants.bob, tenants.a, other)["spec"]["backend"]["namespace"] == "batch"


def test_who_changes_the_spec_must_hold_the_rights_but_a_label_or_finalizer_is_no_job(tenants):
    name = "alices-to-change"
    create(tenants.alice, tenants.a, kubernetes_job(name))
    status, message, _fields = rejection(tenants.bob.patch_namespaced_custom_object, GROUP, VERSION, tenants.a, PLURAL, name,
                                         {"spec": {"pollInterval": 5}})
    assert status == 403 and "may not create Jobs (batch)" in message, message
    labelled = tenants.bob.patch_namespaced_custom_object(GROUP, VERSION, tenants.a, PLURAL, name,
                                                          {"metadata": {"labels": {"team": "b"}}})
    assert labelled["metadata"]["labels"]["team"] == "b"
    assert tenants.alice.patch_namespaced_custom_object(GROUP, VERSION, tenants.a, PLURAL, name,
                                                        {"spec": {"pollInterval": 5}})["spec"]["pollInterval"] == 5


def test_the_schema_keeps_the_controllers_own_connection(tenants):
    """The CRD's rule, also for an author who may create Jobs: without a Secret, no url."""
    body = kubernetes_job("alices-url", url="https://attacker.example.org")
    status, message, fields = rejection(create, tenants.alice, tenants.a, body)
    assert status == 422 and "spec.backend.url" in fields, message
    assert "is forbidden for backend.type kubernetes without credentialsSecretRef" in message
    body["spec"]["backend"]["credentialsSecretRef"] = {"name": "other-cluster"}
    create(tenants.alice, tenants.a, body)


def kubernetes_backend(name, **spec):
    return {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "BridgeBackend", "metadata": {"name": name},
            "spec": dict({"type": "kubernetes"}, **spec)}


def create_backend(api, namespace, body):
    return api.create_namespaced_custom_object(GROUP, VERSION, namespace, "bridgebackends", body)


def test_a_kubernetes_bridgebackend_without_a_secret_needs_an_author_who_may_create_its_jobs(tenants):
    """Every BridgeJob naming such a backend runs its Job with the controller's ServiceAccount: who
    defines it must hold the right to create those Jobs, as for a BridgeJob that says it in line."""
    deadline = time.time() + 60
    while True:  # the apiserver loads a new policy a moment after it is written
        try:
            create_backend(tenants.bob, tenants.a, kubernetes_backend("bobs-node", namespace=tenants.a))
        except ApiException as error:
            if error.status == 403 and BACKEND_POLICY in error.body:
                break
            raise
        tenants.admin.delete_namespaced_custom_object(GROUP, VERSION, tenants.a, "bridgebackends", "bobs-node")
        assert time.time() < deadline, "the backend policy did not refuse bob within 60 s"
        time.sleep(0.5)
    status, message, _fields = rejection(create_backend, tenants.bob, tenants.a, kubernetes_backend("bobs-node"))
    assert status == 403, message
    assert "'%s' may not create Jobs (batch) in namespace '%s'" % (tenants.bob_name, tenants.a) in message, message
    assert create_backend(tenants.alice, tenants.a, kubernetes_backend("alices-node"))["spec"]["type"] == "kubernetes"
    status, message, _fields = rejection(create_backend, tenants.alice, tenants.a,
                                         kubernetes_backend("alices-elsewhere", namespace=tenants.b))
    assert status == 422 and "is not this BridgeBackend's namespace" in message, message
    # With a kubeconfig Secret of bob's own, the controller's rights are not involved.
    other = kubernetes_backend("bobs-other-cluster", credentialsSecretRef={"name": "other-cluster"},
                               url="https://other-cluster.example.org:6443")
    assert create_backend(tenants.bob, tenants.a, other)["spec"]["url"].startswith("https://other-cluster")


# ------------------------------------------------------------------ RBAC: one binding per tenant

def kustomize(kubectl, directory, components=()):
    """`kubectl kustomize` of an overlay of deploy/ with `components` (directories of deploy/), as an
    operator writes it (outside deploy/: kustomize refuses an overlay inside its base's directory)."""
    kubectl = shutil.which(kubectl or "kubectl")
    if not kubectl:
        unavailable("no kubectl to render deploy/ with (tools/kube-control-plane.sh build links one)")
    with open(os.path.join(directory, "kustomization.yaml"), "w") as handle:
        yaml.safe_dump({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                        "resources": [os.path.relpath(DEPLOY, directory)],
                        "components": [os.path.relpath(os.path.join(DEPLOY, name), directory) for name in components]}, handle)
    rendered = subprocess.run([kubectl, "kustomize", directory], capture_output=True, text=True, check=True).stdout
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


def renamed(doc, suffix, namespaces):
    """doc under names of this test: every RBAC name gets the suffix, namespaces are mapped."""
    doc = copy.deepcopy(doc)
    doc["metadata"]["name"] += suffix
    if "namespace" in doc["metadata"]:
        doc["metadata"]["namespace"] = namespaces[doc["metadata"]["namespace"]]
    if "roleRef" in doc:
        doc["roleRef"]["name"] += suffix
    for subject in doc.get("subjects", []):
        subject["name"] += suffix
        subject["namespace"] = namespaces[subject["namespace"]]
    for rule in doc.get("rules", []):
        if "resourceNames" in rule:
            rule["resourceNames"] = [name + suffix for name in rule["resourceNames"]]
    return doc


RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


def test_the_default_install_binds_nothing_in_tenant_namespaces_and_cluster_wide_is_an_explicit_overlay(kube, tmp_path):  # pylint: disable=redefined-outer-name
    default = [doc for doc in kustomize(kube.get("KUBECTL"), str(tmp_path)) if doc["kind"] in RBAC_KINDS]
    assert EVERY_NAMESPACE not in [doc["metadata"]["name"] for doc in default]
    bindings = [doc for doc in default if doc["kind"] == "ClusterRoleBinding"]
    assert [doc["roleRef"]["name"] for doc in bindings] == ["bridge-controller"]
    wide = kustomize(kube.get("KUBECTL"), str(tmp_path), components=("cluster-wide", "author-mutation"))
    assert EVERY_NAMESPACE in [doc["metadata"]["name"] for doc in wide]
    assert "MutatingAdmissionPolicy" in [doc["kind"] for doc in wide]


@pytest.fixture(scope="module")
def tenant_rbac(kube, tenants, deployed, tmp_path_factory):  # pylint: disable=redefined-outer-name
    """The RBAC of deploy/ as installed, and deploy/tenant/tenant.yaml for tenant-a, for a ServiceAccount
    bridge-controller-<id> of a namespace of its own; yields its username and an API client logged
    in as it."""
    rendered = kustomize(kube.get("KUBECTL"), str(tmp_path_factory.mktemp("default-rbac")))
    rbac_objects = [doc for doc in rendered if doc["kind"] in RBAC_KINDS]
    cluster_roles = set(doc["metadata"]["name"] for doc in rbac_objects if doc["kind"] == "ClusterRole")
    assert {"bridge-controller", "bridge-controller-tenant", "bridge-runner"} <= cluster_roles
    tenant = manifests(os.path.join(DEPLOY, "tenant", "tenant.yaml"))
    suffix = "-" + tenants.run
    system = "bridge-mt-%s" % tenants.run
    namespaces = {CONTROLLER[0]: system, tenant[0]["metadata"]["namespace"]: tenants.a}
    core, dynamic = client.CoreV1Api(deployed), DynamicClient(deployed)
    core.create_namespace({"metadata": {"name": system, "labels": {"bridge.dev/test": "admission"}}})
    created = []
    try:
        for doc in rbac_objects + tenant:
            doc = renamed(doc, suffix, namespaces)
            apply(dynamic, doc)
            created.append(doc)
        account = CONTROLLER[1] + suffix
        yield "system:serviceaccount:%s:%s" % (system, account), login(kube, deployed, system, account), suffix
    finally:
        for doc in created:
            if "namespace" not in doc["metadata"]:
                dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"]).delete(name=doc["metadata"]["name"])
        core.delete_namespace(system)


def allowed(api_client, user, verb, resource, namespace=None, group="", name=None, subresource=None):
    """The apiserver's answer for a ServiceAccount's request. A request for a namespace object has
    that namespace as its namespace too (what a RoleBinding there can grant)."""
    groups = ["system:serviceaccounts", "system:serviceaccounts:" + user.split(":")[2], "system:authenticated"]
    review = client.AuthorizationV1Api(api_client).create_subject_access_review({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": groups,
                 "resourceAttributes": {"verb": verb, "group": group, "resource": resource, "namespace": namespace,
                                        "name": name, "subresource": subresource}}})
    return review.status.allowed


def test_the_controller_reads_only_where_a_tenant_binding_is_and_never_runs_jobs_itself(tenant_rbac, tenants, deployed):  # pylint: disable=redefined-outer-name
    user, controller, suffix = tenant_rbac
    runner = "bridge-runner" + suffix
    deadline = time.time() + 30
    # RBAC serves a new binding a moment after it is written.
    while not allowed(deployed, user, "get", "secrets", tenants.a):
        assert time.time() < deadline, "the tenant RoleBinding did not take effect"
        time.sleep(0.5)
    for namespace, expected in ((tenants.a, True), (tenants.b, False), ("kube-system", False)):
        assert allowed(deployed, user, "get", "secrets", namespace) is expected, namespace
        assert allowed(deployed, user, "get", "configmaps", namespace) is expected, namespace
        assert allowed(deployed, user, "create", "serviceaccounts", namespace, name=runner, subresource="token") is expected
        assert not allowed(deployed, user, "create", "serviceaccounts", namespace, name="default", subresource="token")
        # Jobs, their ConfigMaps and Pods are the Job ServiceAccount's, never the controller's.
        assert not allowed(deployed, user, "create", "jobs", namespace, group="batch"), namespace
        assert not allowed(deployed, user, "create", "configmaps", namespace), namespace
        assert not allowed(deployed, user, "get", "pods", namespace, name="x"), namespace
    runner_user = "system:serviceaccount:%s:%s" % (tenants.a, runner)
    assert allowed(deployed, runner_user, "create", "jobs", tenants.a, group="batch")
    assert not allowed(deployed, runner_user, "create", "jobs", tenants.b, group="batch")
    assert not allowed(deployed, runner_user, "get", "secrets", tenants.a)
    # What stays cluster-wide: Bridge's own objects, their events, namespaces' labels, access reviews.
    assert allowed(deployed, user, "watch", "bridgejobs", group="bridge.dev")
    assert allowed(deployed, user, "patch", "bridgejobs", tenants.b, group="bridge.dev")
    assert allowed(deployed, user, "create", "events", tenants.b)
    assert allowed(deployed, user, "create", "subjectaccessreviews", group="authorization.k8s.io")
    assert not allowed(deployed, user, "list", "nodes")
    assert not allowed(deployed, user, "list", "secrets")

    # And with its own token, as the controller would ask.
    core = client.CoreV1Api(controller)
    assert core.read_namespaced_secret("slurm-credentials", tenants.a).data["user"]
    for call, args in ((core.read_namespaced_secret, ("slurm-credentials", tenants.b)),
                       (core.read_namespaced_secret, ("slurm-credentials", "kube-system"))):
        with pytest.raises(ApiException) as caught:
            call(*args)
        assert caught.value.status == 403, caught.value.body
    listed = client.CustomObjectsApi(controller).list_cluster_custom_object(GROUP, VERSION, PLURAL)
    assert tenants.a in set(item["metadata"]["namespace"] for item in listed["items"])
