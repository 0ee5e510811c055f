"""A site of backend objects and 100 placed BridgeJobs, on a real controller process, the real
kube-apiserver and the real services (issue 24, item 4).

Candidates: ClusterBridgeBackends for the three Slurm clusters (22.05, 24.11, 26.05), the LSF
simulator, Ray, and the Kubernetes node (no Secret: Jobs in the BridgeJob's namespace), all labelled
with this module's run label (the controller's --selector, and --backend-selector, so it caches,
probes and places on these objects only). One more Ray backend is taken down by pointing its URL at
a port where nothing listens (no shared service is stopped), and one admits only a labelled tenant
namespace.

100 BridgeJobs of deterministic mixed shapes (GPUs, memory, run time, nodes) with spec.placement
(selectors over the run label and the backends' type label, both policies) each end with
status.placement as the collection's pure _placement.place says over the backends' recorded status,
or Failed Unplaceable with every candidate's reason.

What "no request per BridgeJob for placement" is measured by: the controller's /metrics. Every
backend request outside a batch (submit/poll/cancel, counted as runner calls) is a probe, counted in
bridge_backend_probes_total; the probe interval is longer than the test, so the number of probes
while the 100 jobs are placed is 0, whatever the number of jobs, and bridge_placements counts the
100 choices made from the cached status alone.
"""

import re
import signal
import socket
import sys
import urllib.request
import uuid

import pytest

from conftest import COLLECTIONS, SLURM_VERSIONS, kube_node_env, lsf_env, require_ray, require_slurm, slurm_env
from controller_support import apply_object, free_port, manifest_objects, release_labelled, start_controller, tenant_namespace
from test_controller_e2e import GROUP, VERSION, kube, wait_for  # noqa: F401 pylint: disable=unused-import

sys.path.insert(0, COLLECTIONS)   # the collection this checkout's controller imports

from bridge_controller import backend_objects  # noqa: E402  pylint: disable=wrong-import-position
from bridge_controller.spec import job_params  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.bridge.hpc.plugins.module_utils import _placement  # noqa: E402  pylint: disable=wrong-import-position,import-error

RUN_LABEL = "bridge.dev/site-run"
TYPE_LABEL = "bridge.dev/site-type"
TENANT_LABEL = "bridge.dev/site-tenant"
CLUSTER, PLURAL_CLUSTER, PLURAL_JOBS = "ClusterBridgeBackend", "clusterbridgebackends", "bridgejobs"
# Longer than the test: after the first probe no status changes, so what the test reads is what
# the controller placed on, and any probe during the placements would show in the counter.
INTERVAL = 3600
IMAGE = {"kubernetes": {"image": "localhost/bridge/busybox:latest", "image_pull_policy": "Never"}}
JOBS = 100


class Site:
    def __init__(self, api_client, run, namespace, outside, port):
        from kubernetes import client

        self.api_client, self.run, self.namespace, self.outside, self.port = api_client, run, namespace, outside, port
        self.custom, self.core = client.CustomObjectsApi(api_client), client.CoreV1Api(api_client)
        self.rbac = client.RbacAuthorizationV1Api(api_client)
        self.backends = {}

    def name(self, short):
        return "%s-%s" % (short, self.run)

    def backend(self, short, backend_type, **spec):
        labels = {RUN_LABEL: self.run, TYPE_LABEL: backend_type}
        body = {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": CLUSTER,
                "metadata": {"name": self.name(short), "labels": labels},
                "spec": dict(spec, type=backend_type, probeIntervalSeconds=INTERVAL)}
        self.backends[short] = self.custom.create_cluster_custom_object(GROUP, VERSION, PLURAL_CLUSTER, body)
        return self.backends[short]

    def read_backend(self, short):
        return self.custom.get_cluster_custom_object(GROUP, VERSION, PLURAL_CLUSTER, self.name(short))

    def secret(self, name, **data):
        from kubernetes import client

        self.core.create_namespaced_secret(self.namespace, client.V1Secret(metadata=client.V1ObjectMeta(name=name),
                                                                           string_data=data))

    def job(self, name, namespace=None, **spec):
        body = {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "BridgeJob",
                "metadata": {"name": name, "labels": {RUN_LABEL: self.run}},
                "spec": dict({"script": "#!/bin/sh\ntrue\n", "pollInterval": 2, "backendOptions": IMAGE}, **spec)}
        return self.custom.create_namespaced_custom_object(GROUP, VERSION, namespace or self.namespace, PLURAL_JOBS, body)

    def jobs(self, namespace=None):
        return self.custom.list_namespaced_custom_object(GROUP, VERSION, namespace or self.namespace, PLURAL_JOBS,
                                                         label_selector="%s=%s" % (RUN_LABEL, self.run))["items"]

    def read_job(self, name, namespace=None):
        return self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace or self.namespace, PLURAL_JOBS, name)

    def metrics(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.port, timeout=10) as response:
            return response.read().decode()

    def events(self, obj):
        return [(e.reason, e.type) for e in self.core.list_namespaced_event("default").items
                if e.involved_object.name == obj["metadata"]["name"] and e.involved_object.kind == CLUSTER]


def ready(obj):
    return backend_objects.ready_condition(obj) or {}


def probed(obj, status):
    return ready(obj).get("status") == status and (obj.get("status") or {}).get("observedGeneration") == obj["metadata"]["generation"]


def metric_sum(text, name):
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{") or line.startswith(name + " "))


def phase(obj):
    return (obj.get("status") or {}).get("phase")


@pytest.fixture(scope="module")
def site(kube, tmp_path_factory):  # noqa: F811 pylint: disable=redefined-outer-name
    env, api_client = kube
    from kubernetes import client

    core = client.CoreV1Api(api_client)
    run = uuid.uuid4().hex[:8]
    namespace, outside = "site-%s" % run, "site-out-%s" % run
    tenant_namespace(api_client, namespace, labels={TENANT_LABEL: run})
    tenant_namespace(api_client, outside)
    tmp_path = tmp_path_factory.mktemp("site")
    log_path = tmp_path / "controller.log"
    port = free_port()
    selector = "%s=%s" % (RUN_LABEL, run)
    with open(log_path, "w") as log:
        process = start_controller(env["KUBECONFIG"], selector, tmp_path / "runner", log, port)
    site = Site(api_client, run, namespace, outside, port)  # pylint: disable=redefined-outer-name
    try:
        yield site
    finally:
        process.send_signal(signal.SIGTERM)
        returncode = process.wait(timeout=120)
        release_labelled(api_client, selector)
        for item in site.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL_CLUSTER, label_selector=selector)["items"]:
            site.custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL_CLUSTER, item["metadata"]["name"])
        for name in (namespace, outside):
            core.delete_namespace(name)
        try:
            site.rbac.delete_cluster_role_binding("bridge-runner-nodes-%s" % run)
        except client.exceptions.ApiException:
            pass  # no node, so none was made
    assert returncode == 0, log_path.read_text()[-4000:]


def shapes(index):
    """A deterministic mix of job shapes, selectors and policies."""
    spec = {"resources": {"memory": "32M", "timeLimit": "5"}}
    kind = index % 10
    if kind == 0:
        # One minute: within every queue's limit, so that what refuses it is the GPU.
        spec["resources"].update(gpus=1, timeLimit="1")
    elif kind == 1:
        spec["resources"]["timeLimit"] = "45"
    elif kind == 2:
        spec["resources"]["nodes"] = 2
    elif kind == 3:
        spec["resources"]["memory"] = "64G"
    # Spread over the backends (FirstFit over all would take the first Slurm cluster each time), few on Ray.
    types = (None, ["slurm"], ["lsf"], ["kubernetes", "ray"], ["lsf", "slurm"])[index % 5]
    if index % 25 == 4:
        types = ["ray"]
    selector = {"matchLabels": {RUN_LABEL: "%s"}}
    if types:
        selector["matchExpressions"] = [{"key": TYPE_LABEL, "operator": "In", "values": types}]
    policy = ("FirstFit", "LeastQueued")[(index // 10) % 2]
    return spec, selector, policy


def expected(site, job, backends, labels):  # pylint: disable=redefined-outer-name
    """_placement.place over the candidates as the controller orders them: (this namespace's
    BridgeBackends: none here) the ClusterBridgeBackends the selector matches and that admit the
    job's namespace, by name."""
    from bridge_controller.placement import selects

    spec = job["spec"]["placement"]
    candidates = []
    for obj in sorted(backends, key=lambda o: o["metadata"]["name"]):
        if not selects(spec["selector"], obj["metadata"].get("labels")) or backend_objects.admits(obj, labels):
            continue
        candidates.append(dict(backend_objects.candidate_of(obj), name="%s/%s" % (CLUSTER, obj["metadata"]["name"])))
    # As before the choice: job_params gives the placed queue as the job's once status has one.
    params = job_params(dict(job, status={}))
    return _placement.place(params, candidates, spec.get("policy") or "FirstFit")


def test_a_site_places_100_jobs_where_they_fit(site):  # pylint: disable=redefined-outer-name,too-many-locals,too-many-statements
    ray = require_ray()
    slurms = [(version, slurm_env(version)) for version in SLURM_VERSIONS if slurm_env(version)]
    if not slurms:
        require_slurm("22.05")
    for version, slurm in slurms:
        secret = "slurm-%s" % version.replace(".", "")
        site.secret(secret, user=slurm["SLURM_USER"], token=slurm["SLURM_JWT"])
        site.backend("a-slurm-%s" % version.replace(".", ""), "slurm", url=slurm["SLURM_URL"],
                     credentialsSecretRef={"name": secret, "namespace": site.namespace})
    lsf = lsf_env()
    if lsf:
        site.secret("lsf", user=lsf["LSF_USER"], password=lsf["LSF_PASSWORD"])
        site.backend("b-lsf", "lsf", url=lsf["LSF_PAC_URL"], credentialsSecretRef={"name": "lsf", "namespace": site.namespace})
    ray_spec = {"url": ray["RAY_URL"]}
    if ray.get("RAY_TOKEN"):
        site.secret("ray", token=ray["RAY_TOKEN"])
        ray_spec["credentialsSecretRef"] = {"name": "ray", "namespace": site.namespace}
    site.backend("c-ray", "ray", **ray_spec)
    if kube_node_env():
        # Probed as the Job ServiceAccount of the namespace its Jobs run in: one the platform names,
        # and lets see the nodes (deploy/rbac.yaml's bridge-runner-nodes), so that GPUs count.
        from kubernetes.dynamic import DynamicClient

        nodes_role = [doc for doc in manifest_objects("rbac.yaml") if doc["metadata"]["name"] == "bridge-runner-nodes"]
        apply_object(DynamicClient(site.api_client), nodes_role[0])
        site.rbac.create_cluster_role_binding({
            "metadata": {"name": "bridge-runner-nodes-%s" % site.run},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "bridge-runner-nodes"},
            "subjects": [{"kind": "ServiceAccount", "name": "bridge-runner", "namespace": site.namespace}]})
        site.backend("c-kube", "kubernetes", namespace=site.namespace)
    # Taken down below; first in name order, so FirstFit would try it first.
    site.backend("0-down", "ray", **ray_spec)
    # Admits only namespaces labelled with this run as tenant: this module's namespace, not `outside`.
    site.backend("e-tenant", "ray", namespaceSelector={"matchLabels": {TENANT_LABEL: site.run}}, **ray_spec)

    for short in site.backends:
        obj = wait_for(lambda short=short: site.read_backend(short), lambda o: probed(o, "True"), timeout=120)
        assert obj["status"]["queueCount"] >= 1, obj["status"]

    # A backend taken down: its URL now a port where nothing listens. Ready flips to False, with an event.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = "http://127.0.0.1:%d" % sock.getsockname()[1]
        site.custom.patch_cluster_custom_object(GROUP, VERSION, PLURAL_CLUSTER, site.name("0-down"), {"spec": {"url": dead}})
        down = wait_for(lambda: site.read_backend("0-down"), lambda o: probed(o, "False"), timeout=120)
    assert ready(down)["reason"] == "ConnectionFailed", ready(down)
    wait_for(lambda: site.events(down), lambda events: ("BackendNotReady", "Warning") in events, timeout=30)

    backends = [site.read_backend(short) for short in site.backends]
    before = site.metrics()
    labels = site.core.read_namespace(site.namespace).metadata.labels

    jobs = []
    for index in range(JOBS):
        spec, selector, policy = shapes(index)
        selector["matchLabels"][RUN_LABEL] = site.run
        jobs.append(site.job("j%03d" % index, placement={"selector": selector, "policy": policy}, **spec))

    def all_placed():
        return [job for job in site.jobs() if (job.get("status") or {}).get("placement", {}).get("policy")]

    wait_for(all_placed, lambda placed: len(placed) == JOBS, timeout=120)
    after = site.metrics()
    # No probe while the 100 were placed (the interval is an hour): placement read the cache only.
    assert metric_sum(after, "bridge_backend_probes_total") == metric_sum(before, "bridge_backend_probes_total")
    assert metric_sum(after, "bridge_placements") + metric_sum(after, "bridge_placements_unplaceable") >= JOBS
    # The statuses placement read are still the ones this test read: nothing was re-probed.
    assert [site.read_backend(short)["metadata"]["resourceVersion"] for short in site.backends] == \
        [obj["metadata"]["resourceVersion"] for obj in backends]

    down_name = "%s/%s" % (CLUSTER, site.name("0-down"))
    counts = {}
    for job in site.jobs():
        index = int(job["metadata"]["name"][1:])
        placement = job["status"]["placement"]
        want = expected(site, job, backends, labels)
        counts[want["backend"]] = counts.get(want["backend"], 0) + 1
        if want["backend"]:
            assert placement["backend"] == {"kind": CLUSTER, "name": want["backend"].split("/", 1)[1]}, (index, placement, want)
            assert placement.get("queue") == want["queue"] and placement["type"] == want["type"], (index, placement, want)
        else:
            done = wait_for(lambda job=job: site.read_job(job["metadata"]["name"]), lambda o: phase(o) == "Failed", timeout=60)
            failed = dict((c["type"], c) for c in done["status"]["conditions"])["Failed"]
            assert failed["reason"] == "Unplaceable" and done["status"]["failureClass"] == "rejected", done["status"]
            assert "backend" not in placement
        assert [(r["backend"], r.get("queue"), r["reason"][:300]) for r in placement["rejected"]] == \
            [(r["backend"], r["queue"], r["reason"][:300]) for r in want["rejected"][:50]], index
        if down_name in [r["backend"] for r in want["rejected"]]:
            reason = [r["reason"] for r in placement["rejected"] if r["backend"] == down_name][0]
            assert reason.startswith("not ready: ConnectionFailed"), reason
        assert (placement.get("backend") or {}).get("name") != site.name("0-down")
        # Concrete facts, whatever the services' limits.
        resources = job["spec"]["resources"]
        if resources.get("gpus"):
            assert "backend" not in placement, placement
            # Every candidate that is ready names resources.gpus (some queue may refuse it first for
            # taking no jobs now).
            by_backend = {}
            for item in placement["rejected"]:
                by_backend.setdefault(item["backend"], []).append(item["reason"])
            for backend, reasons in by_backend.items():
                assert reasons[0].startswith("not ready:") or any("resources.gpus" in r for r in reasons), (backend, reasons)
        if resources.get("timeLimit") == "45" and placement.get("queue"):
            assert placement["queue"] != "debug", placement
        if resources.get("nodes") == 2 and placement.get("type"):
            assert placement["type"] not in ("ray", "kubernetes"), placement
    print("placements by backend: %r" % counts)
    assert len([name for name in counts if name]) >= 2, "the jobs spread over several backends: %r" % counts

    # A tenant namespace outside e-tenant's selector: refused by reference, never a candidate by selector.
    site.job("by-ref", namespace=site.outside, backendRef={"kind": CLUSTER, "name": site.name("e-tenant")})
    site.job("by-selector", namespace=site.outside,
             placement={"selector": {"matchLabels": {RUN_LABEL: site.run, TYPE_LABEL: "ray"}}})
    refused = wait_for(lambda: site.read_job("by-ref", site.outside), lambda o: phase(o) == "Failed", timeout=60)
    failed = dict((c["type"], c) for c in refused["status"]["conditions"])["Failed"]
    assert failed["reason"] == "NamespaceNotAllowed" and site.name("e-tenant") in failed["message"], failed
    chosen = wait_for(lambda: site.read_job("by-selector", site.outside),
                      lambda o: (o.get("status") or {}).get("placement", {}).get("policy"), timeout=60)
    placement = chosen["status"]["placement"]
    assert placement["backend"]["name"] == site.name("c-ray"), placement
    assert site.name("e-tenant") not in repr(placement["rejected"])

    # Every job ends (the placed ones run `true`).
    wait_for(site.jobs, lambda items: all(phase(o) in ("Completed", "Failed") for o in items), timeout=240, interval=3)
    finals = site.jobs()
    placed = [o for o in finals if (o["status"]["placement"]).get("backend")]
    bad = [(o["metadata"]["name"], o["status"].get("message")) for o in placed if phase(o) != "Completed"]
    assert not bad, bad
    text = site.metrics()
    # Submits are one runner call per batch, far fewer than the jobs.
    submits = metric_sum(text, "bridge_runner_calls_submit")
    assert 0 < submits < len(placed), submits
    assert re.search(r"bridge_placements \d", text)
