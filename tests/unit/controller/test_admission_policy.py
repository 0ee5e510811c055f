"""deploy/admission-policy.yaml and the multi-tenant RBAC, read as files (issue 21).

tests/integration/test_admission.py checks what they do against a real kube-apiserver; these check
that they are about what they say: the CRD's resource, the backends that run with the controller's
own ServiceAccount, the ClusterRoleBinding the multi-tenant Component removes.
"""

import os
import re

import yaml

from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DEPLOY = os.path.join(REPO, "deploy")
JOB_POLICY = "bridge-jobs-within-their-authors-rights"


def objects(*path):
    with open(os.path.join(DEPLOY, *path)) as handle:
        document = yaml.safe_load(handle)
    return document["items"] if document["kind"] == "List" else [document]


def one(found, kind, name=None):
    """The one object of `kind` (and `name`, where a file holds several of the kind)."""
    matching = [item for item in found if item["kind"] == kind and name in (None, item["metadata"]["name"])]
    assert len(matching) == 1, (kind, name)
    return matching[0]


def test_the_policy_matches_creates_and_updates_of_bridgejobs_and_denies():
    crd = objects("crd.yaml")[0]
    policy_file = objects("admission-policy.yaml")
    policy = one(policy_file, "ValidatingAdmissionPolicy", JOB_POLICY)
    binding = one(policy_file, "ValidatingAdmissionPolicyBinding", JOB_POLICY)
    assert policy["apiVersion"] == binding["apiVersion"] == "admissionregistration.k8s.io/v1"
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert "matchResources" not in binding["spec"], "every namespace"
    assert policy["spec"]["failurePolicy"] == "Fail"
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == [crd["spec"]["group"]]
    assert rule["resources"] == [crd["spec"]["names"]["plural"]], "the main resource: not status or finalizers"
    assert sorted(rule["operations"]) == ["CREATE", "UPDATE"]
    assert "admission-policy.yaml" in objects("kustomization.yaml")[0]["resources"]


def test_the_policy_is_about_the_backends_that_run_with_the_controllers_own_account():
    """A backend reached without a URL falls back to the controller's own cluster and credentials
    when the BridgeJob names no Secret; the CRD's rules on url, CA and validateCerts say the same."""
    policy = one(objects("admission-policy.yaml"), "ValidatingAdmissionPolicy", JOB_POLICY)
    conditions = dict((condition["name"], condition["expression"]) for condition in policy["spec"]["matchConditions"])
    runs_as_controller = conditions["runs-with-the-controllers-service-account"]
    assert set(re.findall(r"'(\w+)'", runs_as_controller)) == set(
        name for name, backend in BACKENDS.items() if backend.URL_NAME is None)
    assert "!has(object.spec.backend.credentialsSecretRef)" in runs_as_controller
    expressions = [validation["expression"] for validation in policy["spec"]["validations"]]
    assert any("object.spec.backend.namespace == request.namespace" in expression for expression in expressions)
    assert any("authorizer.group('batch').resource('jobs').namespace(request.namespace).check('create').allowed()"
               == expression for expression in expressions)


def test_the_multi_tenant_component_removes_the_one_binding_of_the_tenant_role_in_every_namespace():
    rbac = objects("rbac.yaml")
    account = one(rbac, "ServiceAccount")["metadata"]
    cluster_wide = [item for item in rbac if item["kind"] == "ClusterRoleBinding"
                    and item["roleRef"]["name"] == "bridge-controller-tenant"]
    assert len(cluster_wide) == 1
    component = objects("multi-tenant", "kustomization.yaml")[0]
    assert component["kind"] == "Component"
    removed = [yaml.safe_load(patch["patch"]) for patch in component["patches"]]
    assert removed == [{"$patch": "delete", "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                        "metadata": {"name": cluster_wide[0]["metadata"]["name"]}}]
    tenant = objects("multi-tenant", "tenant-rolebinding.yaml")[0]
    assert tenant["kind"] == "RoleBinding" and tenant["metadata"]["namespace"]
    assert tenant["roleRef"] == cluster_wide[0]["roleRef"]
    assert tenant["subjects"] == [{"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}]


def test_the_tenant_role_holds_every_namespaced_right_and_no_cluster_scoped_one():
    """What is left cluster-wide in multi-tenant mode is only what no RoleBinding could grant or what
    concerns BridgeJobs and backend objects wherever they are (rbac.yaml says why for each): of
    namespaces, only their list and watch (labels, for namespaceSelector), never one's contents."""
    roles = dict((item["metadata"]["name"], item) for item in objects("rbac.yaml") if item["kind"] == "ClusterRole")
    cluster_resources = set(resource for rule in roles["bridge-controller"]["rules"] for resource in rule["resources"])
    assert cluster_resources == {"bridgejobs", "bridgejobs/status", "bridgejobs/finalizers", "events", "nodes",
                                 "bridgebackends", "bridgebackends/status", "clusterbridgebackends",
                                 "clusterbridgebackends/status", "namespaces"}
    namespace_verbs = [rule["verbs"] for rule in roles["bridge-controller"]["rules"] if "namespaces" in rule["resources"]]
    assert namespace_verbs == [["list", "watch"]]
    tenant_resources = set(resource for rule in roles["bridge-controller-tenant"]["rules"] for resource in rule["resources"])
    assert {"secrets", "configmaps", "jobs", "pods", "pods/log", "namespaces", "localqueues"} == tenant_resources


def test_the_backend_policy_is_about_namespaced_kubernetes_backends_without_a_secret():
    """The same rights for whoever defines a BridgeBackend whose jobs would run with the
    controller's own account; a ClusterBridgeBackend is no tenant's and is not matched."""
    name = "bridge-backends-within-their-authors-rights"
    policy_file = objects("admission-policy.yaml")
    policy = one(policy_file, "ValidatingAdmissionPolicy", name)
    binding = one(policy_file, "ValidatingAdmissionPolicyBinding", name)
    assert binding["spec"]["policyName"] == name and binding["spec"]["validationActions"] == ["Deny"]
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["bridgebackends"]
    conditions = dict((condition["name"], condition["expression"]) for condition in policy["spec"]["matchConditions"])
    runs_as_controller = conditions["runs-with-the-controllers-service-account"]
    assert set(re.findall(r"'(\w+)'", runs_as_controller)) == set(
        name for name, backend in BACKENDS.items() if backend.URL_NAME is None)
    assert "!has(object.spec.credentialsSecretRef)" in runs_as_controller
    expressions = [validation["expression"] for validation in policy["spec"]["validations"]]
    assert any("authorizer.group('batch').resource('jobs').namespace(request.namespace).check('create').allowed()"
               == expression for expression in expressions)
