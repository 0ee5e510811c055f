"""A BridgeJob the controller cannot decode stops nothing but itself (issue 37, item 8).

deploy/crd.yaml refuses backendOptions nested deeper than a few levels (test_crd.py), but a BridgeJob
stored before it, or through a CRD an operator loosened, is still served by the apiserver, nested
2,000 levels deep, beyond what Python decodes. Such objects are made here on a private control plane
(tools/kube-control-plane.sh in a run dir of its own, so the shared apiserver's CRD stays the one of
deploy/), whose BridgeJob CRD is deploy/crd.yaml with backendOptions loosened back to what it was
before issue 37. Against it, the controller as a process:

* becomes ready although its first LIST carries the object (it used to fail that LIST in a loop);
* writes the status of another namespace's BridgeJob, created before and after the object;
* records a Warning Event "Undecodable" on the object, and counts it in bridge_undecodable_objects;
* skips one that arrives through the WATCH the same way;
* restarted, becomes ready again.
"""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

import pytest

from conftest import COLLECTIONS, REPO, private_service, read_env_file
from controller_support import GROUP, PLURAL, VERSION, controller_env, crds, free_port

DEPTH = 2000
LABEL = "bridge-test/undecodable"
KUBE_PORTS = ("BRIDGE_KUBE_API_PORT", "BRIDGE_KUBE_ETCD_PORT", "BRIDGE_KUBE_ETCD_PEER_PORT",
              "BRIDGE_KUBE_CONTROLLER_MANAGER_PORT", "BRIDGE_KUBE_SCHEDULER_PORT")


@pytest.fixture(scope="module")
def kube():
    """A private control plane with the loosened CRD; (kubeconfig path, api client)."""
    if not os.path.exists(os.path.join(REPO, "tools", "kube-control-plane.sh")):
        pytest.skip("tools/kube-control-plane.sh is missing")
    with private_service("kube-control-plane.sh", "kube", dict((name, str(free_port())) for name in KUBE_PORTS)) as env_file:
        env = read_env_file(env_file)
        from kubernetes import client, config

        api_client = config.new_client_from_config(env["KUBECONFIG"])
        extensions = client.ApiextensionsV1Api(api_client)
        for body in crds():
            if body["spec"]["names"]["plural"] == PLURAL:
                spec = body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
                spec["properties"]["backendOptions"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
            extensions.create_custom_resource_definition(body)
        for body in crds():
            wait_for(lambda name=body["metadata"]["name"]: extensions.read_custom_resource_definition(name),
                     lambda crd: any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or []),
                     timeout=60, interval=0.2)
        yield env["KUBECONFIG"], api_client


def wait_for(read, check, timeout=120, interval=0.5):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = read()
        except Exception as error:  # pylint: disable=broad-exception-caught  # not up yet: try again
            last = error
        else:
            if check(last):
                return last
        time.sleep(interval)
    raise AssertionError("timed out; last seen: %r" % (last,))


def deep_bridgejob_json(name, run):
    """A BridgeJob whose backendOptions.slurm is nested DEPTH levels, as JSON text: Python's encoder
    stops near 1,000 levels, the apiserver reads up to 10,000."""
    job = {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "BridgeJob",
           "metadata": {"name": name, "labels": {LABEL: run}},
           "spec": {"backend": {"type": "slurm", "url": "http://127.0.0.1:9", "credentialsSecretRef": {"name": "none"}},
                    "script": "#!/bin/bash\ntrue\n", "backendOptions": {"slurm": "DEEP"}}}
    return json.dumps(job).replace('"DEEP"', '{"a":' * DEPTH + "1" + "}" * DEPTH)


def post_raw(api_client, namespace, text):
    url = "%s/apis/%s/%s/namespaces/%s/%s" % (api_client.configuration.host, GROUP, VERSION, namespace, PLURAL)
    headers = {"Content-Type": "application/json"}
    api_client.update_params_for_auth(headers, None, ["BearerToken"])
    response = api_client.rest_client.pool_manager.request("POST", url, body=text.encode(), headers=headers)
    assert response.status == 201, response.data[:2000]


def refused_bridgejob(name, run):
    """A BridgeJob the controller refuses at once (its resultQuery is no JMESPath): a status without a backend."""
    return {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "BridgeJob", "metadata": {"name": name, "labels": {LABEL: run}},
            "spec": {"backend": {"type": "slurm", "url": "http://127.0.0.1:9", "credentialsSecretRef": {"name": "none"}},
                     "script": "#!/bin/bash\ntrue\n", "resultQuery": "{exit: exit_code"}}


def http_get(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, ""


def undecodable_count(port):
    _status, text = http_get(port, "/metrics")
    return int(next(line.split()[1] for line in text.splitlines() if line.startswith("bridge_undecodable_objects ")))


class Controller:
    def __init__(self, kubeconfig, run, tmp_path):
        self.kubeconfig, self.run, self.tmp_path = kubeconfig, run, tmp_path
        self.process, self.port, self.starts = None, None, 0

    def start(self):
        self.starts += 1
        self.port = free_port()
        log = open(self.tmp_path / ("controller-%d.log" % self.starts), "w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bridge_controller.main", "--kubeconfig", self.kubeconfig, "--selector",
             "%s=%s" % (LABEL, self.run), "--playbook-dir", os.path.join(REPO, "playbooks"), "--work-dir",
             str(self.tmp_path / "runner"), "--collections-path", COLLECTIONS, "--port", str(self.port),
             "--bind-address", "127.0.0.1", "--batch-window", "0.3"],
            stdout=log, stderr=subprocess.STDOUT, env=controller_env())

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def ready(self, timeout=60):
        return wait_for(lambda: http_get(self.port, "/readyz"), lambda answer: answer[0] == 200, timeout=timeout)

    def log(self):
        return "".join(path.read_text() for path in sorted(self.tmp_path.glob("controller-*.log")))


def test_an_undecodable_bridgejob_is_skipped_and_every_other_one_is_served(kube, tmp_path):
    kubeconfig, api_client = kube
    from kubernetes import client

    core, custom = client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)
    run = uuid.uuid4().hex[:8]
    tenant_a, tenant_b = "tenant-a-%s" % run, "tenant-b-%s" % run
    for name in (tenant_a, tenant_b):
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    post_raw(api_client, tenant_a, deep_bridgejob_json("deep", run))
    custom.create_namespaced_custom_object(GROUP, VERSION, tenant_b, PLURAL, refused_bridgejob("before", run))

    def phase(namespace, name):
        return (custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name).get("status") or {}).get("phase")

    controller = Controller(kubeconfig, run, tmp_path)
    controller.start()
    try:
        started = time.monotonic()
        controller.ready()
        assert wait_for(lambda: phase(tenant_b, "before"), lambda value: value == "Failed", timeout=60)
        served_in = time.monotonic() - started
        assert wait_for(lambda: undecodable_count(controller.port), lambda count: count == 1, timeout=10)

        events = wait_for(lambda: core.list_namespaced_event(tenant_a, field_selector="involvedObject.name=deep").items,
                          lambda items: any(e.reason == "Undecodable" for e in items), timeout=30)
        event = next(e for e in events if e.reason == "Undecodable")
        assert event.type == "Warning" and event.involved_object.kind == "BridgeJob"
        assert event.involved_object.namespace == tenant_a and event.involved_object.uid
        assert "nested too deeply to decode" in event.message

        # One more through the WATCH: skipped as well, and the next BridgeJob is served.
        post_raw(api_client, tenant_a, deep_bridgejob_json("deep-watched", run))
        custom.create_namespaced_custom_object(GROUP, VERSION, tenant_b, PLURAL, refused_bridgejob("after", run))
        assert wait_for(lambda: phase(tenant_b, "after"), lambda value: value == "Failed", timeout=60)
        assert wait_for(lambda: undecodable_count(controller.port), lambda count: count == 2, timeout=10)
        assert wait_for(lambda: core.list_namespaced_event(tenant_a, field_selector="involvedObject.name=deep-watched").items,
                        lambda items: any(e.reason == "Undecodable" for e in items), timeout=30)

        controller.stop()
        controller.start()
        controller.ready()
        assert wait_for(lambda: undecodable_count(controller.port), lambda count: count == 2, timeout=10)
        assert "RecursionError" not in controller.log()
        print("the other tenant's status %.1f s after the controller started" % served_in)
    finally:
        controller.stop()
