"""The real Kubernetes node of tools/kube-node.sh: containerd + a kubelet in a network namespace of
their own, joined to the control plane of tools/kube-control-plane.sh (with kube-scheduler and
kube-controller-manager). Pods run busybox (localhost/bridge/busybox:latest, never pulled), reach
the apiserver through the "kubernetes" Service and host services through `tools/kube-node.sh expose`.

Skipped when the node is not running (tools/kube-node.sh start), failed under BRIDGE_REQUIRE_SERVICES=1.
Every test works in a namespace of its own, deleted at the end (the controller-manager finalizes it).
"""

import http.server
import os
import subprocess
import threading
import time
import uuid

import pytest

from conftest import REPO, RUN, read_env_file, required

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client, config  # noqa: E402  (after the importorskip)

NODE_SCRIPT = os.path.join(REPO, "tools", "kube-node.sh")
# Generous: a pod start takes seconds here, but the machine is shared.
WAIT = 180


@pytest.fixture(scope="module")
def node_env():
    message = "the Kubernetes node is not running: tools/kube-control-plane.sh start && tools/kube-node.sh start"
    status = subprocess.run([NODE_SCRIPT, "status"], capture_output=True, text=True, check=False)
    values = read_env_file(os.path.join(RUN, "kube", "node", "env"))
    if not status.stdout.startswith("node ") or " running " not in status.stdout:
        values = None
    return required(values, message)


@pytest.fixture(scope="module")
def api(node_env):
    return config.new_client_from_config(node_env["KUBECONFIG"])


@pytest.fixture
def namespace(api):
    core = client.CoreV1Api(api)
    name = "node-test-%s" % uuid.uuid4().hex[:8]
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    # Pods need the "default" ServiceAccount, which the controller-manager creates.
    wait_until(lambda: core.read_namespaced_service_account("default", name), "the default ServiceAccount")
    yield name
    core.delete_namespace(name)


def wait_until(read, what, timeout=WAIT):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = read()
        except client.ApiException as error:
            if error.status != 404:
                raise
            last = None
        if last:
            return last
        time.sleep(1)
    pytest.fail("timed out waiting for %s (last: %r)" % (what, last))


def busybox_pod(env, name, command, **spec):
    container = {
        "name": "main",
        "image": env["KUBE_BUSYBOX_IMAGE"],
        "imagePullPolicy": "Never",   # nothing can be pulled: the image was loaded into containerd
        "command": ["/bin/sh", "-c", command],
    }
    container.update(spec.pop("container", {}))
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": dict({"restartPolicy": "Never", "containers": [container]}, **spec),
    }
    return body


def finished(core, namespace, name):
    pod = core.read_namespaced_pod(name, namespace)
    if pod.status.phase in ("Succeeded", "Failed"):
        return pod
    return None


def kubectl(env, *args):
    return subprocess.run([env["KUBECTL"], "--kubeconfig", env["KUBECONFIG"]] + list(args),
                          capture_output=True, text=True, check=False, timeout=60)


def test_node_is_ready_at_its_own_address(node_env, api):
    node = client.CoreV1Api(api).read_node(node_env["KUBE_NODE_NAME"])
    ready = [c for c in node.status.conditions if c.type == "Ready"]
    assert ready and ready[0].status == "True", node.status.conditions
    internal = [a.address for a in node.status.addresses if a.type == "InternalIP"]
    assert internal == [node_env["KUBE_NODE_ADDR"]] == ["10.250.0.2"], node.status.addresses
    # Never one of the machine's own addresses (the kubelet would pick its LAN address by itself).
    own = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True, check=True).stdout
    for address in node.status.addresses:
        if address.type in ("InternalIP", "ExternalIP"):
            assert " %s/" % address.address not in own, (address, own)


def test_pod_runs_and_kubectl_logs_returns_its_output(node_env, api, namespace):
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(namespace, busybox_pod(node_env, "hello", "echo hello from $(hostname); uname -s"))
    pod = wait_until(lambda: finished(core, namespace, "hello"), "pod hello to finish")
    assert pod.status.phase == "Succeeded", pod.status
    assert pod.spec.node_name == node_env["KUBE_NODE_NAME"]
    assert pod.status.pod_ip.startswith(node_env["KUBE_POD_CIDR"].split(".0.0/")[0] + ".")
    # Through the apiserver to the kubelet at the node's InternalIP.
    logs = kubectl(node_env, "-n", namespace, "logs", "hello")
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.splitlines() == ["hello from hello", "Linux"]


def test_job_script_from_configmap_fails_with_backoff_limit_exceeded(node_env, api, namespace):
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map(namespace, {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "script"},
        "data": {"run.sh": "echo running the script\nexit 3\n"},
    })
    pod_spec = busybox_pod(node_env, "unused", "sh /script/run.sh")["spec"]
    pod_spec["containers"][0]["volumeMounts"] = [{"name": "script", "mountPath": "/script"}]
    pod_spec["volumes"] = [{"name": "script", "configMap": {"name": "script"}}]
    client.BatchV1Api(api).create_namespaced_job(namespace, {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "exits-3"},
        "spec": {"backoffLimit": 0, "template": {"spec": pod_spec}},
    })

    def failed_condition():
        job = client.BatchV1Api(api).read_namespaced_job("exits-3", namespace)
        for condition in job.status.conditions or []:
            if condition.type == "Failed" and condition.status == "True":
                return condition
        return None

    condition = wait_until(failed_condition, "job exits-3 to fail")
    assert condition.reason == "BackoffLimitExceeded", condition
    pods = core.list_namespaced_pod(namespace, label_selector="job-name=exits-3").items
    assert pods, "the Job made no pod"
    terminated = pods[0].status.container_statuses[0].state.terminated
    assert terminated is not None and terminated.exit_code == 3, pods[0].status
    logs = kubectl(node_env, "-n", namespace, "logs", pods[0].metadata.name)
    assert logs.stdout.strip() == "running the script", logs.stderr


def test_restricted_pod_reads_the_api_with_in_cluster_credentials(node_env, api):
    core = client.CoreV1Api(api)
    name = "node-restricted-%s" % uuid.uuid4().hex[:8]
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
        name=name, labels={"pod-security.kubernetes.io/enforce": "restricted"})))
    try:
        core.create_namespaced_service_account(name, {"metadata": {"name": "reader"}})
        rbac = client.RbacAuthorizationV1Api(api)
        rbac.create_namespaced_role(name, {
            "metadata": {"name": "read-configmaps"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]})
        rbac.create_namespaced_role_binding(name, {
            "metadata": {"name": "reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-configmaps"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": name}]})
        restricted = {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
            "runAsUser": 65534,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        # What an in-cluster client does: the Service address from the environment, the projected
        # token as bearer. busybox's wget speaks TLS but checks no certificate: the CA bundle is
        # only checked to be there.
        script = (
            "set -e; d=/var/run/secrets/kubernetes.io/serviceaccount; grep -q 'BEGIN CERTIFICATE' $d/ca.crt;"
            " echo $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT; cat $d/namespace; echo;"
            " wget -q -O - --no-check-certificate --header \"Authorization: Bearer $(cat $d/token)\""
            " https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT/api/v1/namespaces/$(cat $d/namespace)/configmaps/kube-root-ca.crt"
            " | grep -q '\"name\": *\"kube-root-ca.crt\"' && echo read the ConfigMap kube-root-ca.crt")
        core.create_namespaced_pod(name, busybox_pod(
            node_env, "in-cluster", script, serviceAccountName="reader", container={"securityContext": restricted}))
        pod = wait_until(lambda: finished(core, name, "in-cluster"), "pod in-cluster to finish")
        logs = kubectl(node_env, "-n", name, "logs", "in-cluster").stdout
        assert pod.status.phase == "Succeeded", (pod.status, logs)
        assert logs.splitlines() == ["10.0.0.1:443", name, "read the ConfigMap kube-root-ca.crt"]
        # A pod that breaks the namespace's level is refused by PodSecurity admission.
        with pytest.raises(client.ApiException) as refused:
            core.create_namespaced_pod(name, busybox_pod(node_env, "privileged", "true",
                                                         container={"securityContext": {"privileged": True}}))
        assert refused.value.status == 403 and "restricted" in refused.value.body
    finally:
        core.delete_namespace(name)


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello from the host\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_pod_reaches_an_exposed_host_port(node_env, api, namespace):
    """A service of the host on 127.0.0.1 (as slurmrestd, Ray or the simulators listen), exposed to
    the pods at KUBE_NODE_HOST_ADDR."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        exposed = subprocess.run([NODE_SCRIPT, "expose", str(port)], capture_output=True, text=True,
                                 check=False, timeout=120)
        assert exposed.returncode == 0, exposed.stderr
        core = client.CoreV1Api(api)
        url = "http://%s:%d/" % (node_env["KUBE_NODE_HOST_ADDR"], port)
        core.create_namespaced_pod(namespace, busybox_pod(node_env, "reach-host", "wget -q -O - " + url))
        pod = wait_until(lambda: finished(core, namespace, "reach-host"), "pod reach-host to finish")
        logs = kubectl(node_env, "-n", namespace, "logs", "reach-host")
        assert pod.status.phase == "Succeeded", (pod.status, logs.stdout, logs.stderr)
        assert logs.stdout.strip() == "hello from the host"
    finally:
        subprocess.run([NODE_SCRIPT, "unexpose", str(port)], check=False, timeout=60)
        server.shutdown()
        server.server_close()


def test_apiserver_proxies_to_a_pod_port(node_env, api, namespace):
    """The host routes the pod network via the node, so the apiserver's pods/proxy reaches a pod
    (how the controller's metrics are read)."""
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(namespace, busybox_pod(
        node_env, "web", "mkdir -p /tmp/www && echo proxied > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www",
        restartPolicy="Always", container={"ports": [{"containerPort": 8080}]}))

    def running():
        pod = core.read_namespaced_pod("web", namespace)
        return pod if pod.status.phase == "Running" else None

    wait_until(running, "pod web to run")

    def proxied():
        got = kubectl(node_env, "get", "--raw", "/api/v1/namespaces/%s/pods/web:8080/proxy/index.html" % namespace)
        return got.stdout if got.returncode == 0 else None

    assert wait_until(proxied, "the apiserver to proxy to pod web", timeout=60).strip() == "proxied"
