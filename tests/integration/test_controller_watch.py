"""bridge_controller.watch against the real kube-apiserver of tools/kube-control-plane.sh.

The watcher talks to the apiserver through a TCP relay the test can cut, so "the watch connection
dropped" is a real severed TCP connection, not a mock. Checked here:

* every create/modify/delete reaches the handler, across many server-side watch timeouts
  (`timeoutSeconds=2`) and across a cut connection, by resuming from the last resourceVersion
  (one LIST in total);
* a resourceVersion the apiserver no longer has is answered, on kube-apiserver 1.34, with a 200
  stream whose first event is ERROR/410 (Expired); the watcher then relists and reports what
  changed while it was away (DELETED, MODIFIED, ADDED);
* `stop()` returns promptly from an idle watch.

The CRD is deploy/crd.yaml when it exists; until then a minimal one (schema
x-kubernetes-preserve-unknown-fields) is created, only if no bridgejobs CRD is installed. Each test
uses a fresh namespace: a deleted one lingers (Terminating) until kube-controller-manager has
emptied it.
"""

import os
import sys
import threading
import time
import uuid

import kubernetes
import pytest
import yaml
from kubernetes.client.rest import ApiException

from conftest import REPO, RUN, Relay, read_env_file

sys.path.insert(0, os.path.join(REPO, "controller"))

from bridge_controller.watch import BridgeJobWatcher, object_key  # noqa: E402  pylint: disable=wrong-import-position

GROUP, VERSION, PLURAL = "bridge.dev", "v1alpha1", "bridgejobs"
CRD_NAME = "bridgejobs.bridge.dev"
CRD_PATH = os.path.join(REPO, "deploy", "crd.yaml")
PATIENCE = 60.0

FALLBACK_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": CRD_NAME, "labels": {"app.kubernetes.io/managed-by": "bridge-test-fallback"}},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": PLURAL, "singular": "bridgejob", "kind": "BridgeJob", "listKind": "BridgeJobList",
                  "shortNames": ["bj"]},
        "versions": [{"name": VERSION, "served": True, "storage": True, "subresources": {"status": {}},
                      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}],
    },
}


def require_kube():
    """KUBECONFIG/KUBE_API of the running control plane; skip (fail under make test) without one."""
    values = read_env_file(os.path.join(RUN, "kube", "env"))
    message = "the Kubernetes control plane is not running: tools/kube-control-plane.sh start"
    if values is not None:
        try:
            kubernetes.client.VersionApi(api_client(values["KUBECONFIG"])).get_code(_request_timeout=5)
            return values
        except Exception as error:  # an env file left by a stopped control plane
            message = "%s (%s at %s: %s)" % (message, type(error).__name__, values.get("KUBE_API"), error)
    if os.environ.get("BRIDGE_REQUIRE_SERVICES") == "1":
        pytest.fail(message)
    pytest.skip(message)
    return None


def api_client(kubeconfig, host=None):
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    if host:
        configuration.host = host
    return kubernetes.client.ApiClient(configuration)


class CountingApi:
    """CustomObjectsApi wrapper that records the LIST and WATCH requests the watcher makes."""

    def __init__(self, api):
        self.api = api
        self.lists = 0
        self.watches = 0

    def list_namespaced_custom_object(self, *args, **kwargs):
        if kwargs.get("watch"):
            self.watches += 1
        else:
            self.lists += 1
        return self.api.list_namespaced_custom_object(*args, **kwargs)


class Recorder:
    """The watcher's handler: every (kind, key, resourceVersion), and a way to wait for some."""

    def __init__(self):
        self.events = []
        self.cond = threading.Condition()

    def __call__(self, kind, obj):
        with self.cond:
            self.events.append((kind, object_key(obj), obj["metadata"].get("resourceVersion")))
            self.cond.notify_all()

    def wait_for(self, expected):
        """Wait until every (kind, key, rv) in `expected` was seen (rv None matches any)."""
        def seen_all():
            return all(any(kind == e[0] and key == e[1] and (rv is None or rv == e[2]) for e in self.events)
                       for kind, key, rv in expected)
        with self.cond:
            assert self.cond.wait_for(seen_all, PATIENCE), "missing: %s\nseen: %s" % (
                [item for item in expected if item not in self.events], self.events)

    def snapshot(self):
        with self.cond:
            return list(self.events)


def ensure_crd(client):
    """Install deploy/crd.yaml (create or replace), or the fallback CRD if none is installed yet."""
    extensions = kubernetes.client.ApiextensionsV1Api(client)
    if os.path.exists(CRD_PATH):
        with open(CRD_PATH) as handle:
            body = next(doc for doc in yaml.safe_load_all(handle) if doc and doc.get("kind") == "CustomResourceDefinition")
        for attempt in range(5):
            try:
                extensions.create_custom_resource_definition(body)
                break
            except ApiException as error:
                if error.status != 409:
                    raise
            # Replace (PUT), not merge: no field of an earlier (fallback) definition may survive.
            current = extensions.read_custom_resource_definition(CRD_NAME)
            body["metadata"]["resourceVersion"] = current.metadata.resource_version
            try:
                extensions.replace_custom_resource_definition(CRD_NAME, body)
                break
            except ApiException as error:
                if error.status != 409 or attempt == 4:  # 409: another test replaced it meanwhile
                    raise
    else:
        try:
            extensions.create_custom_resource_definition(FALLBACK_CRD)
        except ApiException as error:
            if error.status != 409:
                raise
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        crd = extensions.read_custom_resource_definition(CRD_NAME)
        conditions = {c.type: c.status for c in (crd.status.conditions or [])}
        if conditions.get("Established") == "True" and conditions.get("NamesAccepted") == "True":
            return
        time.sleep(0.2)
    pytest.fail("CRD %s not Established: %s" % (CRD_NAME, conditions))


@pytest.fixture(scope="module")
def kube():
    values = require_kube()
    admin = api_client(values["KUBECONFIG"])
    ensure_crd(admin)
    return values, admin


@pytest.fixture
def namespace(kube):
    admin = kube[1]
    name = "bridge-watch-%s" % uuid.uuid4().hex[:8]
    kubernetes.client.CoreV1Api(admin).create_namespace({"metadata": {"name": name, "labels": {"bridge.dev/test": "watch"}}})
    yield name
    objects = kubernetes.client.CustomObjectsApi(admin)
    for item in objects.list_namespaced_custom_object(GROUP, VERSION, name, PLURAL)["items"]:
        try:
            objects.delete_namespaced_custom_object(GROUP, VERSION, name, PLURAL, item["metadata"]["name"])
        except ApiException as error:
            if error.status != 404:
                raise


@pytest.fixture
def relay(kube):
    relay = Relay.to(kube[0]["KUBE_API"])
    yield relay
    relay.close()


class Cluster:
    """Writes BridgeJobs through the admin client (not through the relay) and returns what changed."""

    def __init__(self, admin, namespace):
        self.api = kubernetes.client.CustomObjectsApi(admin)
        self.namespace = namespace

    def create(self, name):
        body = {
            "apiVersion": "%s/%s" % (GROUP, VERSION),
            "kind": "BridgeJob",
            "metadata": {"name": name},
            "spec": {
                "backend": {"type": "slurm", "url": "https://slurm.invalid:6820", "credentialsSecretRef": {"name": "slurm-credentials"}},
                "script": "#!/bin/bash\ntrue\n",
            },
        }
        created = self.api.create_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, body)
        return ("ADDED", "%s/%s" % (self.namespace, name), created["metadata"]["resourceVersion"])

    def modify(self, name, value):
        # A label change: metadata stays mutable whatever the CRD's immutability rules on spec.
        # The client sends a dict body to custom objects as a JSON merge patch.
        patch = {"metadata": {"labels": {"bridge.dev/touched": str(value)}}}
        patched = self.api.patch_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name, patch)
        return ("MODIFIED", "%s/%s" % (self.namespace, name), patched["metadata"]["resourceVersion"])

    def delete(self, name):
        self.api.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)
        return ("DELETED", "%s/%s" % (self.namespace, name), None)


def wait_until(predicate):
    deadline = time.monotonic() + PATIENCE
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def start_watcher(kube, relay, namespace, **options):
    values = kube[0]
    proxied = api_client(values["KUBECONFIG"], host="https://127.0.0.1:%d" % relay.port)
    api = CountingApi(kubernetes.client.CustomObjectsApi(proxied))
    recorder = Recorder()
    options.setdefault("retry_cap", 1.0)
    watcher = BridgeJobWatcher(api, recorder, namespace=namespace, **options)
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    assert watcher.wait_synced(PATIENCE)
    return watcher, thread, api, recorder


def stop_watcher(watcher, thread):
    watcher.stop()
    thread.join(PATIENCE)
    assert not thread.is_alive()


def test_no_transition_is_missed_across_watch_timeouts_and_a_cut_connection(kube, namespace, relay):
    cluster = Cluster(kube[1], namespace)
    expected = [cluster.create("before-%d" % i) for i in range(3)]
    watcher, thread, api, recorder = start_watcher(kube, relay, namespace, watch_timeout=2)
    try:
        recorder.wait_for(expected)

        # Mutations spread over several 2 s server-side watch timeouts.
        for step in range(8):
            expected.append(cluster.create("live-%d" % step))
            expected.append(cluster.modify("before-%d" % (step % 3), step))
            if step % 3 == 2:
                expected.append(cluster.delete("live-%d" % (step - 1)))
            time.sleep(0.6)
        recorder.wait_for(expected)

        # The TCP connection under the watch is severed; changes happen while it is down.
        relay.cut()
        while_down = [cluster.create("while-down"), cluster.modify("before-0", "down"), cluster.delete("live-0"),
                      cluster.modify("while-down", "down")]
        time.sleep(1.5)
        relay.restore()
        expected.extend(while_down)
        recorder.wait_for(expected)
    finally:
        stop_watcher(watcher, thread)

    assert api.lists == 1, "the watcher relisted instead of resuming"
    assert api.watches > 3
    # Every change was reported exactly once, in resourceVersion order per object.
    changes = [event for event in recorder.snapshot() if event[0] != "DELETED"]
    assert sorted(changes) == sorted(item for item in expected if item[0] != "DELETED")
    for key in {event[1] for event in changes}:
        versions = [int(event[2]) for event in changes if event[1] == key]
        assert versions == sorted(versions)
    deleted = [event[1] for event in recorder.snapshot() if event[0] == "DELETED"]
    assert sorted(deleted) == sorted(item[1] for item in expected if item[0] == "DELETED")
    assert sorted(watcher.keys()) == sorted(
        "%s/%s" % (namespace, item["metadata"]["name"])
        for item in kubernetes.client.CustomObjectsApi(kube[1]).list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"])


def test_the_apiserver_answers_a_too_old_resource_version_with_an_error_event(kube, namespace):
    # The shape the unit tests' stub reproduces: HTTP 200, then one ERROR event with a 410 Status.
    objects = kubernetes.client.CustomObjectsApi(kube[1])
    response = objects.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, watch=True, resource_version="1",
                                                     allow_watch_bookmarks=True, timeout_seconds=5, _preload_content=False)
    try:
        assert response.status == 200
        body = b"".join(response.stream(amt=None, decode_content=False))
    finally:
        response.release_conn()
    event = yaml.safe_load(body.split(b"\n", 1)[0])
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 410
    assert event["object"]["reason"] == "Expired"


def test_expired_resource_version_relists_and_reports_what_changed_meanwhile(kube, namespace, relay):
    cluster = Cluster(kube[1], namespace)
    initial = [cluster.create(name) for name in ("stays", "changes", "goes")]
    watcher, thread, api, recorder = start_watcher(kube, relay, namespace)
    try:
        recorder.wait_for(initial)
        attempts = api.watches
        relay.cut()
        meanwhile = [cluster.delete("goes"), cluster.modify("changes", 1), cluster.modify("changes", 2), cluster.create("new")]
        # A watch attempt after the cut means the stream that was open is dead (nothing buffered in
        # it can move the resourceVersion any more).
        wait_until(lambda: api.watches > attempts)
        # Stands in for a disconnection longer than the apiserver's event window: resourceVersion 1
        # is older than anything kube-apiserver keeps, so the resumed watch gets ERROR 410.
        watcher._resource_version = "1"
        # One more attempt starting means every attempt made with the old resourceVersion failed.
        attempts = api.watches
        wait_until(lambda: api.watches > attempts)
        relay.restore()
        # The relist collapses the two label changes into one MODIFIED at the latest version.
        recorder.wait_for([meanwhile[0], meanwhile[2], meanwhile[3]])
    finally:
        stop_watcher(watcher, thread)
    assert api.lists == 2
    after = recorder.snapshot()[len(initial):]
    goes_rv = initial[2][2]  # a synthetic DELETED carries the last state the watcher knew
    assert sorted(after) == sorted([("DELETED", meanwhile[0][1], goes_rv), meanwhile[2], meanwhile[3]])
    assert sorted(watcher.keys()) == ["%s/%s" % (namespace, name) for name in ("changes", "new", "stays")]


def test_stop_returns_promptly_from_an_idle_watch(kube, namespace, relay):
    watcher, thread, api, recorder = start_watcher(kube, relay, namespace, watch_timeout=300)
    wait_until(lambda: api.watches > 0)
    time.sleep(0.5)  # let the request reach the apiserver and block in the stream
    started = time.monotonic()
    stop_watcher(watcher, thread)
    assert time.monotonic() - started < 10
    assert recorder.snapshot() == []
