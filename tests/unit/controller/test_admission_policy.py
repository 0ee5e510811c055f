"""deploy/admission-policy.yaml, deploy/author-mutation/ and the RBAC, read as files (issues 21, 37).

tests/integration/test_admission.py and test_tenant_authors.py check what they do against a real
kube-apiserver; these check that they are about what they say: the CRD's resource, the backends
whose Jobs run as the namespace's Job ServiceAccount, the author annotations the controller reads,
nothing bound in a tenant's namespace by default.
"""

import os
import re

import yaml

from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS
from bridge_controller.authority import AUTHOR, AUTHOR_GROUPS, DEFAULT_JOB_SERVICE_ACCOUNT

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


def test_the_policy_is_about_the_backends_whose_jobs_run_as_the_namespaces_job_service_account():
    """A backend reached without a URL runs on the controller's own cluster, as the namespace's Job
    ServiceAccount, when the BridgeJob names no Secret; the CRD's rules on url, CA and validateCerts
    keep that connection fixed."""
    policy = one(objects("admission-policy.yaml"), "ValidatingAdmissionPolicy", JOB_POLICY)
    conditions = dict((condition["name"], condition["expression"]) for condition in policy["spec"]["matchConditions"])
    runs_as_job_account = conditions["runs-as-the-namespaces-job-service-account"]
    assert set(re.findall(r"'(\w+)'", runs_as_job_account)) == set(
        name for name, backend in BACKENDS.items() if backend.URL_NAME is None)
    assert "!has(object.spec.backend.credentialsSecretRef)" in runs_as_job_account
    expressions = [validation["expression"] for validation in policy["spec"]["validations"]]
    assert any("object.spec.backend.namespace == request.namespace" in expression for expression in expressions)
    assert any("authorizer.group('batch').resource('jobs').namespace(request.namespace).check('create').allowed()"
               == expression for expression in expressions)


def test_nothing_is_bound_in_a_tenants_namespace_by_default_and_cluster_wide_is_a_component():
    rbac = objects("rbac.yaml")
    account = one(rbac, "ServiceAccount")["metadata"]
    assert [item["roleRef"]["name"] for item in rbac if item["kind"] == "ClusterRoleBinding"] == ["bridge-controller"]
    component = objects("cluster-wide", "kustomization.yaml")[0]
    assert component["kind"] == "Component" and component["resources"] == ["tenant-everywhere.yaml"]
    everywhere = one(objects("cluster-wide", "tenant-everywhere.yaml"), "ClusterRoleBinding")
    assert everywhere["roleRef"]["name"] == "bridge-controller-tenant"
    tenant = objects("tenant", "tenant.yaml")
    binding = one(tenant, "RoleBinding", "bridge-controller-tenant")
    assert binding["roleRef"]["name"] == "bridge-controller-tenant"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}]
    runner = one(tenant, "ServiceAccount")
    assert runner["metadata"]["name"] == DEFAULT_JOB_SERVICE_ACCOUNT and runner["automountServiceAccountToken"] is False
    runner_binding = one(tenant, "RoleBinding", DEFAULT_JOB_SERVICE_ACCOUNT)
    assert runner_binding["roleRef"]["name"] == "bridge-runner"
    assert runner_binding["subjects"] == [{"kind": "ServiceAccount", "name": DEFAULT_JOB_SERVICE_ACCOUNT,
                                           "namespace": runner["metadata"]["namespace"]}]
    assert len(set(item["metadata"]["namespace"] for item in tenant)) == 1


def test_the_controller_holds_no_right_of_jobs_and_only_the_job_service_accounts_token():
    """Cluster-wide only what concerns Bridge's own objects wherever they are (rbac.yaml says why for
    each): of namespaces, their list and watch (labels), never one's contents; in a tenant's
    namespace, Secrets and ConfigMaps by name and the token of bridge-runner alone."""
    roles = dict((item["metadata"]["name"], item) for item in objects("rbac.yaml") if item["kind"] == "ClusterRole")
    cluster_resources = set(resource for rule in roles["bridge-controller"]["rules"] for resource in rule["resources"])
    assert cluster_resources == {"bridgejobs", "bridgejobs/status", "bridgejobs/finalizers", "events", "subjectaccessreviews",
                                 "bridgebackends", "bridgebackends/status", "clusterbridgebackends",
                                 "clusterbridgebackends/status", "namespaces"}
    namespace_verbs = [rule["verbs"] for rule in roles["bridge-controller"]["rules"] if "namespaces" in rule["resources"]]
    assert namespace_verbs == [["list", "watch"]]
    tenant_rules = roles["bridge-controller-tenant"]["rules"]
    assert set(resource for rule in tenant_rules for resource in rule["resources"]) == {
        "secrets", "configmaps", "serviceaccounts/token"}
    assert all(rule["verbs"] == ["get"] for rule in tenant_rules if rule["resources"] != ["serviceaccounts/token"])
    token = [rule for rule in tenant_rules if rule["resources"] == ["serviceaccounts/token"]]
    assert token == [{"apiGroups": [""], "resources": ["serviceaccounts/token"], "resourceNames": [DEFAULT_JOB_SERVICE_ACCOUNT],
                      "verbs": ["create"]}]
    runner_resources = set(resource for rule in roles["bridge-runner"]["rules"] for resource in rule["resources"])
    assert runner_resources == {"jobs", "configmaps", "pods", "pods/log", "namespaces", "localqueues"}


def test_the_author_is_written_by_admission_and_checked_whether_or_not_it_was():
    """The annotations authority.py reads are the ones the policies write and check."""
    mutation = objects("author-mutation", "author-policy.yaml")
    policy = one(mutation, "MutatingAdmissionPolicy")
    assert one(mutation, "MutatingAdmissionPolicyBinding")["spec"]["policyName"] == policy["metadata"]["name"]
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["bridgejobs", "bridgebackends"] and sorted(rule["operations"]) == ["CREATE", "UPDATE"]
    expression = policy["spec"]["mutations"][0]["jsonPatch"]["expression"]
    assert "path: '/metadata/annotations/%s', value: request.userInfo.username" % AUTHOR.replace("/", "~1") in expression
    assert "path: '/metadata/annotations/%s', value: has(request.userInfo.groups) ? request.userInfo.groups.join('\\n')" % (
        AUTHOR_GROUPS.replace("/", "~1")) in expression
    checked = one(objects("admission-policy.yaml"), "ValidatingAdmissionPolicy", "bridge-authors-recorded")
    (rule,) = checked["spec"]["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["bridgejobs", "bridgebackends"] and checked["spec"]["failurePolicy"] == "Fail"
    variables = dict((variable["name"], variable["expression"]) for variable in checked["spec"]["variables"])
    assert "'%s'" % AUTHOR in variables["author"] and "'%s'" % AUTHOR_GROUPS in variables["groups"]
    assert "author-mutation" not in objects("kustomization.yaml")[0]["resources"], "a Component: the API may be missing"


def test_the_backend_policy_is_about_namespaced_kubernetes_backends_without_a_secret():
    """The same rights for whoever defines a BridgeBackend whose jobs run as the namespace's Job
    ServiceAccount; a ClusterBridgeBackend is no tenant's and is not matched."""
    name = "bridge-backends-within-their-authors-rights"
    policy_file = objects("admission-policy.yaml")
    policy = one(policy_file, "ValidatingAdmissionPolicy", name)
    binding = one(policy_file, "ValidatingAdmissionPolicyBinding", name)
    assert binding["spec"]["policyName"] == name and binding["spec"]["validationActions"] == ["Deny"]
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["bridgebackends"]
    conditions = dict((condition["name"], condition["expression"]) for condition in policy["spec"]["matchConditions"])
    runs_as_job_account = conditions["runs-as-the-namespaces-job-service-account"]
    assert set(re.findall(r"'(\w+)'", runs_as_job_account)) == set(
        name for name, backend in BACKENDS.items() if backend.URL_NAME is None)
    assert "!has(object.spec.credentialsSecretRef)" in runs_as_job_account
    expressions = [validation["expression"] for validation in policy["spec"]["validations"]]
    assert any("authorizer.group('batch').resource('jobs').namespace(request.namespace).check('create').allowed()"
               == expression for expression in expressions)
