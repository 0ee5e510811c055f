"""Backend objects probed by the controller, against a real kube-apiserver and the real services.

ClusterBridgeBackends for each Slurm cluster that runs (22.05, 24.11, 26.05; one shared Secret) and
for the Kubernetes cluster the controller runs on (no Secret: the controller's own configuration),
and BridgeBackends for Ray and the LSF Application Center simulator (each with a Secret in its
namespace), all become Ready with the manager's version, the API version in use and their queues;
the API's table (what `kubectl get bridgebackends` prints) shows TYPE READY VERSION QUEUES. A
backend taken down (this module's own Relay to Ray, cut; never a shared service) flips to Ready
False with a BackendNotReady event and back to Ready with BackendReady; one at a port where nothing
listens is Ready False (ConnectionFailed). /metrics has the bridge_backend_* series. No token or
password in any status, event or the controller's log.

The controller caches and probes only the backend objects labelled with this module's run id
(--selector, which --backend-selector follows), so objects of other runs sharing the apiserver are
neither probed nor written by it.
"""

import signal
import socket
import urllib.request
import uuid

import pytest

from conftest import Relay, ray_env, require_lsf, require_ray, require_slurm, slurm_env
from controller_support import free_port, release_labelled, start_controller, tenant_namespace
from test_controller_e2e import GROUP, VERSION, kube, wait_for  # noqa: F401 pylint: disable=unused-import

RUN_LABEL = "bridge.dev/backend-objects-run"
SLURM_VERSIONS = ("22.05", "24.11", "26.05")
PLURALS = {"BridgeBackend": "bridgebackends", "ClusterBridgeBackend": "clusterbridgebackends"}
INTERVAL = 5


class Site:
    """This module's controller, namespace and objects."""

    def __init__(self, api_client, run, namespace, port, secrets):
        from kubernetes import client

        self.api_client, self.run, self.namespace, self.port, self.secrets = api_client, run, namespace, port, secrets
        self.custom, self.core = client.CustomObjectsApi(api_client), client.CoreV1Api(api_client)

    def create(self, kind, name, **spec):
        body = {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": kind,
                "metadata": {"name": "%s-%s" % (name, self.run), "labels": {RUN_LABEL: self.run}},
                "spec": dict(spec, probeIntervalSeconds=INTERVAL)}
        if kind == "BridgeBackend":
            return self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURALS[kind], body)
        return self.custom.create_cluster_custom_object(GROUP, VERSION, PLURALS[kind], body)

    def read(self, obj):
        meta = obj["metadata"]
        if obj["kind"] == "BridgeBackend":
            return self.custom.get_namespaced_custom_object(GROUP, VERSION, meta["namespace"], PLURALS[obj["kind"]], meta["name"])
        return self.custom.get_cluster_custom_object(GROUP, VERSION, PLURALS[obj["kind"]], meta["name"])

    def wait_ready(self, obj, status, timeout=120):
        return wait_for(lambda: self.read(obj), lambda o: ready(o).get("status") == status
                        and (o.get("status") or {}).get("observedGeneration") == o["metadata"]["generation"], timeout=timeout)

    def secret(self, name, namespace=None, **data):
        from kubernetes import client

        self.core.create_namespaced_secret(namespace or self.namespace, client.V1Secret(
            metadata=client.V1ObjectMeta(name=name), string_data=data))

    def events(self, obj):
        namespace = obj["metadata"].get("namespace") or "default"
        return [(event.reason, event.type, event.message) for event in self.core.list_namespaced_event(namespace).items
                if event.involved_object.name == obj["metadata"]["name"] and event.involved_object.kind == obj["kind"]]

    def metrics(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.port, timeout=10) as response:
            return response.read().decode()


def ready(obj):
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition["type"] == "Ready":
            return condition
    return {}


@pytest.fixture(scope="module")
def site(kube, tmp_path_factory):  # pylint: disable=redefined-outer-name
    env, api_client = kube
    from kubernetes import client

    run = uuid.uuid4().hex[:8]
    namespace = "backend-objects-%s" % run
    tenant_namespace(api_client, namespace)
    secrets = [value for value in [(slurm_env(v) or {}).get("SLURM_JWT") for v in SLURM_VERSIONS]
               + [(ray_env() or {}).get("RAY_TOKEN")] if value]
    tmp_path = tmp_path_factory.mktemp("backend-objects")
    log_path = tmp_path / "controller.log"
    port = free_port()
    with open(log_path, "w") as log:
        process = start_controller(env["KUBECONFIG"], "%s=%s" % (RUN_LABEL, run), tmp_path / "runner", log, port)
    site = Site(api_client, run, namespace, port, secrets)  # pylint: disable=redefined-outer-name
    try:
        yield site
    finally:
        process.send_signal(signal.SIGTERM)
        returncode = process.wait(timeout=120)
        release_labelled(api_client, "%s=%s" % (RUN_LABEL, run))
        for item in site.custom.list_cluster_custom_object(GROUP, VERSION, "clusterbridgebackends",
                                                           label_selector="%s=%s" % (RUN_LABEL, run))["items"]:
            site.custom.delete_cluster_custom_object(GROUP, VERSION, "clusterbridgebackends", item["metadata"]["name"])
        client.CoreV1Api(api_client).delete_namespace(namespace)
    log = log_path.read_text()
    for secret in site.secrets:
        assert secret not in log
    assert returncode == 0, log[-4000:]


def check_no_secret(site, obj):  # pylint: disable=redefined-outer-name
    text = repr(site.read(obj)) + repr(site.events(obj))
    for secret in site.secrets:
        assert secret not in text


def test_slurm_clusters_are_ready_with_version_api_version_and_partitions(site):  # pylint: disable=redefined-outer-name
    running = [(version, slurm_env(version)) for version in SLURM_VERSIONS if slurm_env(version)]
    if not running:
        require_slurm("22.05")
    objects = []
    for version, slurm in running:
        name = "slurm-%s-%s" % (version.replace(".", ""), site.run)
        site.secret(name, user=slurm["SLURM_USER"], token=slurm["SLURM_JWT"])
        # One Secret for every tenant, named with its namespace (here this module's, not bridge-system).
        objects.append((version, slurm, site.create("ClusterBridgeBackend", "slurm-%s" % version.replace(".", ""), type="slurm",
                                                    url=slurm["SLURM_URL"],
                                                    credentialsSecretRef={"name": name, "namespace": site.namespace})))
    for version, slurm, obj in objects:
        probed = site.wait_ready(obj, "True")
        status = probed["status"]
        assert ready(probed)["reason"] == "Probed"
        assert status["manager"] == "Slurm"
        assert status["version"].startswith(version), (version, status["version"])
        assert status["apiVersion"] in slurm["SLURM_API_VERSIONS"].split(","), status["apiVersion"]
        assert status["queueCount"] >= 1 and len(status["queues"]) == min(status["queueCount"], 64)
        assert all(queue.get("name") and queue.get("state") for queue in status["queues"])
        # slurm-cluster.sh's default partition is debug; the REST API of 24.11 (v0.0.42) does not say
        # which partition is the default (slurm/fit.py), so none is.
        defaults = [queue["name"] for queue in status["queues"] if queue.get("default")]
        assert defaults == ([] if version == "24.11" else ["debug"]), (version, defaults)
        wait_for(lambda: site.events(obj), lambda events: ("BackendReady", "Normal") in [e[:2] for e in events], timeout=30)
        check_no_secret(site, obj)


def test_ray_lsf_and_kubernetes_are_ready(site):  # pylint: disable=redefined-outer-name
    ray, lsf = require_ray(), require_lsf()
    ray_spec = {"type": "ray", "url": ray["RAY_URL"]}
    if ray.get("RAY_TOKEN"):
        site.secret("ray", token=ray["RAY_TOKEN"])
        ray_spec["credentialsSecretRef"] = {"name": "ray"}
    site.secret("lsf", user=lsf["LSF_USER"], password=lsf["LSF_PASSWORD"])
    site.secrets.append(lsf["LSF_PASSWORD"])
    ray_obj = site.create("BridgeBackend", "ray", **ray_spec)
    lsf_obj = site.create("BridgeBackend", "lsf", type="lsf", url=lsf["LSF_PAC_URL"], credentialsSecretRef={"name": "lsf"})
    # No Secret: the controller's own cluster, reached as its --kubeconfig says.
    kube_obj = site.create("ClusterBridgeBackend", "kubernetes", type="kubernetes", namespace=site.namespace)
    for obj, manager in ((ray_obj, "Ray"), (lsf_obj, "LSF"), (kube_obj, "Kubernetes")):
        probed = site.wait_ready(obj, "True")
        status = probed["status"]
        assert status["manager"] == manager, status
        assert status["queueCount"] >= 1, status
        if manager in ("Ray", "Kubernetes"):
            assert status["version"], status
        check_no_secret(site, obj)
    # Ray has no queue to choose: one record for the whole cluster, without a name.
    assert [queue.get("name") for queue in site.read(ray_obj)["status"]["queues"]] == [None]


def test_the_table_shows_type_ready_version_and_queues(site):  # pylint: disable=redefined-outer-name
    ray = require_ray()
    spec = {"type": "ray", "url": ray["RAY_URL"]}
    if ray.get("RAY_TOKEN"):
        site.secret("table", token=ray["RAY_TOKEN"])
        spec["credentialsSecretRef"] = {"name": "table"}
    obj = site.create("BridgeBackend", "table", **spec)
    probed = site.wait_ready(obj, "True")
    table = site.api_client.call_api(
        "/apis/%s/%s/namespaces/%s/bridgebackends" % (GROUP, VERSION, site.namespace), "GET",
        header_params={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}, response_type="object",
        auth_settings=["BearerToken"], _return_http_data_only=True)
    assert [column["name"] for column in table["columnDefinitions"]] == ["Name", "Type", "Ready", "Version", "Queues", "Age"]
    row = [row["cells"] for row in table["rows"] if row["cells"][0] == obj["metadata"]["name"]][0]
    assert row[1:5] == ["ray", "True", probed["status"]["version"], 1]


def test_a_backend_taken_down_flips_to_not_ready_with_an_event_and_back(site):  # pylint: disable=redefined-outer-name
    ray = require_ray()
    relay = Relay.to(ray["RAY_URL"])
    try:
        spec = {"type": "ray", "url": relay.url}
        if ray.get("RAY_TOKEN"):
            site.secret("flip", token=ray["RAY_TOKEN"])
            spec["credentialsSecretRef"] = {"name": "flip"}
        obj = site.create("BridgeBackend", "flip", **spec)
        site.wait_ready(obj, "True")
        relay.cut()
        down = site.wait_ready(obj, "False", timeout=INTERVAL * 6 + 60)
        assert ready(down)["reason"] in ("ConnectionFailed", "Timeout"), ready(down)
        assert down["status"]["version"], "what the last probe found stays, for the same spec"
        assert wait_for(lambda: site.events(obj), lambda events: any(e[:2] == ("BackendNotReady", "Warning") for e in events),
                        timeout=30)
        relay.restore()
        site.wait_ready(obj, "True", timeout=INTERVAL * 6 + 60)
        # The event follows the status write.
        wait_for(lambda: site.events(obj), lambda events: [e[0] for e in events].count("BackendReady") >= 2, timeout=30)
    finally:
        relay.close()


def test_a_backend_where_nothing_listens_is_not_ready(site):  # pylint: disable=redefined-outer-name
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused
        obj = site.create("ClusterBridgeBackend", "nothing", type="ray", url="http://127.0.0.1:%d" % port)
        down = site.wait_ready(obj, "False")
    assert ready(down)["reason"] == "ConnectionFailed", ready(down)
    assert "version" not in down["status"]
    wait_for(lambda: site.events(obj), lambda events: ("BackendNotReady", "Warning") in [e[:2] for e in events], timeout=30)


def test_metrics_per_backend(site):  # pylint: disable=redefined-outer-name
    ray = require_ray()
    spec = {"type": "ray", "url": ray["RAY_URL"]}
    if ray.get("RAY_TOKEN"):
        site.secret("metrics", token=ray["RAY_TOKEN"])
        spec["credentialsSecretRef"] = {"name": "metrics"}
    obj = site.create("BridgeBackend", "metrics", **spec)
    probed = site.wait_ready(obj, "True")
    labels = 'kind="BridgeBackend",namespace="%s",name="%s",type="ray"' % (site.namespace, obj["metadata"]["name"])
    text = wait_for(site.metrics, lambda text: "bridge_backend_ready{%s} 1" % labels in text, timeout=30)
    assert 'bridge_backend_probes_total{%s,result="ok"} ' % labels in text
    assert "bridge_backend_probe_seconds{%s} " % labels in text
    # A queue's pending count, where the manager tells it (Ray's one record has no name).
    pending = probed["status"]["queues"][0].get("pending")
    if pending is not None:
        assert 'bridge_backend_queue_pending{%s,queue=""} ' % labels in text
