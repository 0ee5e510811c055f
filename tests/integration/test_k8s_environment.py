"""The Kubernetes modules with nothing but the environment kubernetes.core, kubectl and AWX users
already have (issue 26, item 6), against the real control plane and node of tools/kube-*.sh:
- `set -a; . .run/kube/node/env; set +a` (KUBECONFIG, as kubectl reads it), then k8s_job_info;
- what AWX's own "OpenShift or Kubernetes API Bearer Token" credential injects: K8S_AUTH_HOST,
  K8S_AUTH_API_KEY (a ServiceAccount's token), K8S_AUTH_SSL_CA_CERT and K8S_AUTH_VERIFY_SSL;
- a kubeconfig list in KUBECONFIG ("a:b"), merged as kubectl merges it."""

import os

import pytest
import yaml

from conftest import RUN, adhoc_result, adhoc_with_env_file, kube_namespace, require_kube_node


def write_env(path, values):
    with os.fdopen(os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as handle:
        handle.write("".join("%s=%s\n" % item for item in values.items()))
    return str(path)


def job_info(env_file, namespace, identity="bridge-env-none"):
    done = adhoc_with_env_file(env_file, "bridge.hpc.k8s_job_info", "-a", "identity=%s namespace=%s" % (identity, namespace))
    return done, adhoc_result(done)


def test_the_node_env_file_as_it_is_reaches_the_cluster():
    require_kube_node()
    env_file = os.path.join(RUN, "kube", "node", "env")
    with open(env_file) as handle:
        text = handle.read()
    assert "KUBECONFIG=" in text and "K8S_AUTH_" not in text, "the env file is meant to name KUBECONFIG alone"
    done, result = job_info(env_file, "default")
    assert result is not None, (done.stdout + done.stderr)[-3000:]
    assert result["job"] is None


@pytest.fixture(scope="module")
def bearer(tmp_path_factory):
    """A namespace, a ServiceAccount that may read its Jobs, and a token of it: what an AWX
    administrator puts into AWX's Kubernetes bearer token credential."""
    values = require_kube_node()
    from kubernetes import client, config

    api_client = config.new_client_from_config(config_file=values["KUBECONFIG"])
    namespace = kube_namespace(values, "bridge-env")
    core, rbac = client.CoreV1Api(api_client), client.RbacAuthorizationV1Api(api_client)
    core.create_namespaced_service_account(namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="awx")))
    rbac.create_namespaced_role_binding(namespace, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "awx-view"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "awx", "namespace": namespace}]})
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=900))
    token = core.create_namespaced_service_account_token("awx", namespace, request).status.token
    yield values, namespace, token
    core.delete_namespace(namespace)


def test_what_awxs_kubernetes_bearer_token_credential_injects_reaches_the_cluster(bearer, tmp_path):
    values, namespace, token = bearer
    env_file = write_env(tmp_path / "awx.env", {
        "K8S_AUTH_HOST": values["KUBE_API"], "K8S_AUTH_API_KEY": token,
        "K8S_AUTH_SSL_CA_CERT": values["KUBE_CA_FILE"], "K8S_AUTH_VERIFY_SSL": "True"})
    done, result = job_info(env_file, namespace)
    assert result is not None, (done.stdout + done.stderr)[-3000:]
    assert result["job"] is None
    assert token not in done.stdout + done.stderr

    # The token is what is sent: a namespace its ServiceAccount may not read is refused, the token unsaid.
    done, result = job_info(env_file, "default")
    assert result is None and "forbidden" in done.stdout, done.stdout[-3000:]
    assert token not in done.stdout + done.stderr


def test_a_kubeconfig_list_in_kubeconfig_is_merged_as_kubectl_merges_it(bearer, tmp_path):
    values, namespace, token = bearer
    # The first file has a current context whose apiserver does not answer; the second the context to use.
    broken = {"apiVersion": "v1", "kind": "Config", "current-context": "nowhere",
              "clusters": [{"name": "nowhere", "cluster": {"server": "https://127.0.0.1:1"}}],
              "users": [{"name": "nobody", "user": {"token": "not-a-token"}}],
              "contexts": [{"name": "nowhere", "context": {"cluster": "nowhere", "user": "nobody"}}]}
    working = {"apiVersion": "v1", "kind": "Config", "current-context": "awx",
               "clusters": [{"name": "kube", "cluster": {"server": values["KUBE_API"],
                                                         "certificate-authority": values["KUBE_CA_FILE"]}}],
               "users": [{"name": "awx", "user": {"token": token}}],
               "contexts": [{"name": "awx", "context": {"cluster": "kube", "user": "awx", "namespace": namespace}}]}
    paths = []
    for name, document in (("first", broken), ("second", working)):
        path = tmp_path / name
        path.write_text(yaml.safe_dump(document))
        paths.append(str(path))
    env_file = write_env(tmp_path / "list.env", {"KUBECONFIG": ":".join(paths), "K8S_AUTH_CONTEXT": "awx"})
    done, result = job_info(env_file, namespace)
    assert result is not None, (done.stdout + done.stderr)[-3000:]
    assert result["job"] is None and token not in done.stdout + done.stderr
