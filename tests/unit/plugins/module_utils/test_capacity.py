"""capacity(): each backend's queue_records from the answers recorded from its real service (or
simulator), and the number of requests one capacity() sends, which must not grow with the jobs."""

import copy
import json

import httpx
import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._backend import QUEUE_KEYS
from ansible_collections.bridge.hpc.plugins.module_utils._transport import Transport
from ansible_collections.bridge.hpc.plugins.module_utils.k8s import fit as k8s_fit
from ansible_collections.bridge.hpc.plugins.module_utils.lsf import fit as lsf_fit
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.answers import records as lsf_records
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.client import LsfClient
from ansible_collections.bridge.hpc.plugins.module_utils.quantum import fit as quantum_fit
from ansible_collections.bridge.hpc.plugins.module_utils.ray import fit as ray_fit
from ansible_collections.bridge.hpc.plugins.module_utils.ray.client import RayClient
from ansible_collections.bridge.hpc.plugins.module_utils.ray.states import normalize_job as ray_job
from ansible_collections.bridge.hpc.plugins.module_utils.slurm import fit as slurm_fit
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.states import normalize_job as slurm_job

from k8s_stub import ApiServerStub, node
from quantum_stub import StubRuntime
from recorded import recorded

SLURM_VERSIONS = ("v0.0.38", "v0.0.40", "v0.0.42", "v0.0.45")
RELEASES = {"v0.0.38": "22.05.8", "v0.0.40": "24.11.5", "v0.0.42": "24.11.5", "v0.0.45": "26.05.5"}


def body(manager, version, case):
    return recorded(manager, version, case)["body"]


def assert_records(records):
    for record in records:
        assert tuple(sorted(record)) == tuple(sorted(QUEUE_KEYS))
        assert isinstance(record["usable"], bool) and isinstance(record["default"], bool)
        assert isinstance(record["gpu_types"], list) and isinstance(record["features"], list)
        json.dumps(record)  # plain data, as status and hostvars need


# ---------------------------------------------------------------- Slurm

@pytest.mark.parametrize("version", SLURM_VERSIONS)
def test_slurm_partitions_from_recorded_answers(version):
    partitions = [slurm_fit.normalize_partition(p) for p in body("slurm", version, "partitions")["partitions"]]
    nodes = [slurm_fit.normalize_node(n) for n in body("slurm", version, "nodes")["nodes"]]
    jobs = [slurm_job(j) for j in body("slurm", version, "jobs_list")["jobs"]]
    records = slurm_fit.queue_records(partitions, nodes, jobs)
    assert_records(records)
    by_name = dict((r["name"], r) for r in records)
    assert sorted(by_name) == ["batch", "debug"]
    debug = by_name["debug"]
    # The recorded clusters: one node "vm" of 2 CPUs and 4000 MB in both partitions, no GPUs;
    # debug has MaxTime=30.
    assert debug["state"] == "UP" and debug["usable"] is True
    assert debug["max_time_minutes"] == 30 and debug["cpus_per_node"] == 2 and debug["memory_mb_per_node"] == 4000
    assert debug["gpus_per_node"] == 0 and debug["gpu_types"] == [] and debug["max_nodes"] == 1
    assert debug["qubits"] is None
    running = sum(1 for job in jobs if job["phase"] == "running" and job["partition"] == "debug")
    pending = sum(1 for job in jobs if job["phase"] == "queued" and job["partition"] == "debug")
    assert (debug["running"], debug["pending"]) == (running, pending)
    # v0.0.38 and v0.0.45 say which partition is the default; 24.11's v0.0.40-44 do not.
    assert debug["default"] is (version in ("v0.0.38", "v0.0.45"))


def test_slurm_without_jobs_has_unknown_counts_and_counts_each_partition_a_pending_job_names():
    partitions = [slurm_fit.normalize_partition(p) for p in body("slurm", "v0.0.45", "partitions")["partitions"]]
    nodes = [slurm_fit.normalize_node(n) for n in body("slurm", "v0.0.45", "nodes")["nodes"]]
    assert [(r["pending"], r["running"]) for r in slurm_fit.queue_records(partitions, nodes)] == [(None, None)] * 2
    jobs = [{"phase": "queued", "partition": "debug,batch"}, {"phase": "running", "partition": "batch"},
            {"phase": "completed", "partition": "batch"}]
    records = dict((r["name"], r) for r in slurm_fit.queue_records(partitions, nodes, jobs))
    assert (records["debug"]["pending"], records["debug"]["running"]) == (1, 0)
    assert (records["batch"]["pending"], records["batch"]["running"]) == (1, 1)


def test_slurm_gpus_types_features_and_drained_nodes():
    partition = {"name": "gpu", "state": "UP", "default": False, "max_time_minutes": None, "max_nodes_per_job": None,
                 "total_nodes": 3, "max_memory_per_node_mb": 64000}
    nodes = [
        {"name": "g1", "partitions": ["gpu"], "usable": True, "cpus": 32, "memory_mb": 128000,
         "gres": "gpu:a100:4(S:0-1)", "gpus": 4, "features": ["a100", "ib"]},
        {"name": "g2", "partitions": ["gpu"], "usable": True, "cpus": 16, "memory_mb": 64000,
         "gres": "gpu:h100:8", "gpus": 8, "features": ["h100"]},
        {"name": "g3", "partitions": ["gpu"], "usable": False, "cpus": 128, "memory_mb": 512000,
         "gres": "gpu:b200:8", "gpus": 8, "features": ["b200"]},
    ]
    (record,) = slurm_fit.queue_records([partition], nodes)
    assert record["gpus_per_node"] == 8 and record["gpu_types"] == ["a100", "h100"]
    assert record["features"] == ["a100", "h100", "ib"] and record["cpus_per_node"] == 32
    # MaxMemPerNode caps what one node of a job may have.
    assert record["memory_mb_per_node"] == 64000
    assert record["max_nodes"] == 2 and record["max_time_minutes"] is None
    (down,) = slurm_fit.queue_records([dict(partition, state="DOWN")], nodes)
    assert down["usable"] is False


def slurm_stub(job_count):
    """slurmrestd v0.0.45 answering from recorded answers, its job list `job_count` jobs long."""
    jobs_list = copy.deepcopy(body("slurm", "v0.0.45", "jobs_list"))
    template = jobs_list["jobs"][0]
    jobs_list["jobs"] = [dict(template, job_id=1000 + index) for index in range(job_count)]
    answers = {
        "/slurm/v0.0.45/ping/": body("slurm", "v0.0.45", "ping"),
        "/slurm/v0.0.45/partitions/": body("slurm", "v0.0.45", "partitions"),
        "/slurm/v0.0.45/nodes/": body("slurm", "v0.0.45", "nodes"),
        "/slurm/v0.0.45/jobs/": jobs_list,
    }
    sent = []

    def handle(request):
        sent.append(request.url.path)
        if request.url.path in answers:
            return httpx.Response(200, json=answers[request.url.path])
        return httpx.Response(404, text="Unable find requested URL.")
    http = httpx.Client(base_url="http://slurm.test", transport=httpx.MockTransport(handle))
    return Transport("http://slurm.test", "Slurm", secrets=["tok"], http_client=http, sleep=lambda s: None), sent


@pytest.mark.parametrize("job_count", [1, 500])
def test_slurm_capacity_is_three_requests_whatever_the_jobs(job_count):
    transport, sent = slurm_stub(job_count)
    client = SlurmClient("http://slurm.test", user="bridge", token="tok", api_version="v0.0.45", transport=transport)
    capacity = client.capacity()
    assert sent == ["/slurm/v0.0.45/partitions/", "/slurm/v0.0.45/nodes/", "/slurm/v0.0.45/jobs/"]
    assert capacity["manager"] == "Slurm" and capacity["version"] == "26.05.5" and capacity["api_version"] == "v0.0.45"
    assert_records(capacity["queues"])
    # Discovery is once per client, before the first request: a second capacity() is three more.
    client.capacity()
    assert len(sent) == 6


def test_slurm_capacity_discovers_the_version_first_when_not_given():
    transport, sent = slurm_stub(3)
    client = SlurmClient("http://slurm.test", user="bridge", token="tok", transport=transport)
    client.capacity()
    assert sent == ["/slurm/v0.0.45/ping/", "/slurm/v0.0.45/partitions/", "/slurm/v0.0.45/nodes/", "/slurm/v0.0.45/jobs/"]


# ---------------------------------------------------------------- LSF (the PAC simulator's answers)

def lsf_inventory():
    queues = [lsf_fit.normalize_queue(q) for q in lsf_records(body("lsf", "simulator", "queues"), "queue", "queues")]
    hosts = [lsf_fit.normalize_host(h) for h in lsf_records(body("lsf", "simulator", "hosts"), "host", "hosts")]
    return queues, hosts


def test_lsf_queues_from_the_simulators_answers():
    queues, hosts = lsf_inventory()
    records = dict((r["name"], r) for r in lsf_fit.queue_records(queues, hosts))
    assert_records(records.values())
    normal, short = records["normal"], records["short"]
    assert normal["state"] == "Open:Active" and normal["usable"] and normal["default"]
    assert normal["cpus_per_node"] == 4 and normal["memory_mb_per_node"] == 24105 and normal["max_nodes"] == 1
    # A host that reports its static resources without ngpus has no GPU LSF knows of.
    assert normal["gpus_per_node"] == 0
    assert short["max_time_minutes"] == 1 and short["memory_mb_per_node"] == 256 and short["cpus_per_node"] == 2
    assert not short["default"]
    assert records["inactive"]["usable"] is False and records["closed"]["usable"] is False
    assert (normal["pending"], normal["running"]) == (0, 0)


def test_lsf_hosts_unknown_leave_sizes_unknown_and_ngpus_is_read():
    queues, hosts = lsf_inventory()
    (normal,) = [r for r in lsf_fit.queue_records(queues, []) if r["name"] == "normal"]
    assert normal["usable"] and normal["cpus_per_node"] == 4 and normal["gpus_per_node"] is None
    host = {"hostName": "g1", "hostStatus": "ok", "maxJobs": "8",
            "staticResources": {"staticResource": [{"name": "ngpus", "value": "4"}, {"name": "nCpus", "value": "8"}]}}
    assert lsf_fit.normalize_host(host)["gpus"] == 4


def test_lsf_capacity_is_two_requests_after_the_logon(lsf_pac):
    client = LsfClient(lsf_pac["url"], user=lsf_pac["user"], password=lsf_pac["password"])
    try:
        capacity = client.capacity()
        first = client.requests_sent
        client.capacity()
        assert (first, client.requests_sent - first) == (3, 2)
        assert capacity["manager"] == "LSF" and capacity["version"] is None and capacity["api_version"] is None
        assert_records(capacity["queues"])
    finally:
        client.close()


# ---------------------------------------------------------------- Kubernetes

def pod(name, phase, job="j"):
    return {"metadata": {"name": name, "labels": {"job-name": job}}, "status": {"phase": phase}}


@pytest.mark.parametrize("extra_pods", [0, 300])
def test_kubernetes_without_kueue_is_one_cluster_record_in_four_requests(extra_pods):
    stub = ApiServerStub(nodes=[node("n1", cpu="3500m", memory="8Gi"),
                                node("g1", cpu="8", memory="16Gi", gpus=2, labels={"nvidia.com/gpu.product": "A100"})])
    pods = [pod("p1", "Pending"), pod("p2", "Running"), pod("p3", "Succeeded")]
    pods += [pod("x%d" % index, "Running") for index in range(extra_pods)]
    pods.append({"metadata": {"name": "bare", "labels": {"app": "web"}}, "status": {"phase": "Running"}})
    for item in pods:
        stub.objects["pods"][("default", item["metadata"]["name"])] = item
    client = stub.client()
    capacity = client.capacity()
    assert client.requests_sent == 4
    assert capacity["manager"] == "Kubernetes" and capacity["version"] == "v1.34.4"
    assert capacity["api_version"] == "batch/v1"
    (record,) = capacity["queues"]
    assert_records([record])
    assert record["name"] is None and record["usable"] and record["default"] and record["max_nodes"] == 1
    assert record["cpus_per_node"] == 8 and record["memory_mb_per_node"] == 16384 and record["gpus_per_node"] == 2
    assert record["gpu_types"] == ["A100"]
    # Pods of Jobs only (the label job-name), by phase.
    assert (record["pending"], record["running"]) == (1, 1 + extra_pods)


def test_kubernetes_with_kueue_has_a_record_per_local_queue_in_three_requests():
    stub = ApiServerStub(nodes=[node("n1")], kueue=True)
    stub.local_queues[("default", "default")] = {
        "metadata": {"name": "default", "namespace": "default"}, "spec": {"clusterQueue": "cq"},
        "status": {"pendingWorkloads": 3, "admittedWorkloads": 2, "conditions": [{"type": "Active", "status": "True"}]}}
    stub.local_queues[("default", "stopped")] = {
        "metadata": {"name": "stopped", "namespace": "default"}, "spec": {"clusterQueue": "gone"},
        "status": {"pendingWorkloads": 0, "admittedWorkloads": 0, "conditions": [{"type": "Active", "status": "False"}]}}
    client = stub.client()
    capacity = client.capacity()
    assert client.requests_sent == 3
    records = dict((r["name"], r) for r in capacity["queues"])
    assert_records(records.values())
    assert records["default"]["default"] and records["default"]["usable"]
    assert (records["default"]["pending"], records["default"]["running"]) == (3, 2)
    assert records["stopped"]["state"] == "Inactive" and not records["stopped"]["usable"]
    assert not records["stopped"]["default"] and records["stopped"]["cpus_per_node"] == 4


def test_kubernetes_nodes_unknown_leave_sizes_unknown():
    (record,) = k8s_fit.queue_records([], [], {"Pending": 2})
    assert record["usable"] and record["cpus_per_node"] is None and record["gpus_per_node"] is None
    assert (record["pending"], record["running"]) == (2, 0)
    cordoned = dict(k8s_fit.normalize_node(node("n1")), schedulable=False)
    (record,) = k8s_fit.queue_records([cordoned], [])
    assert record["usable"] is False and record["state"] == "no ready node" and record["pending"] is None


# ---------------------------------------------------------------- Ray

def test_ray_cluster_from_recorded_answers():
    nodes = [ray_fit.normalize_node(n) for n in body("ray", "2.60.0", "nodes_detail")["data"]["result"]["result"]]
    jobs = [ray_job(j) for j in body("ray", "2.60.0", "jobs_list")]
    (record,) = ray_fit.queue_records(nodes, jobs)
    assert_records([record])
    assert record["name"] is None and record["usable"] and record["default"] and record["max_nodes"] == 1
    assert record["cpus_per_node"] == 2 and record["gpus_per_node"] == 0 and record["memory_mb_per_node"] == 23386
    assert record["pending"] == sum(1 for job in jobs if job["phase"] == "queued") == 3
    assert record["running"] == 0
    dead = [dict(n, state="dead") for n in nodes]
    (record,) = ray_fit.queue_records(dead)
    assert not record["usable"] and record["cpus_per_node"] is None and record["pending"] is None


@pytest.mark.parametrize("job_count", [1, 400])
def test_ray_capacity_is_three_requests_whatever_the_jobs(job_count):
    version = body("ray", "2.60.0", "version")
    nodes = body("ray", "2.60.0", "nodes_detail")
    template = body("ray", "2.60.0", "jobs_list")[0]
    jobs = [dict(template, submission_id="s-%d" % index, job_id=None) for index in range(job_count)]
    sent = []

    def handle(request):
        sent.append(request.url.path)
        answer = {"/api/version": version, "/api/v0/nodes": nodes, "/api/jobs/": jobs}[request.url.path]
        return httpx.Response(200, json=answer)
    http = httpx.Client(base_url="http://ray.test", transport=httpx.MockTransport(handle))
    transport = Transport("http://ray.test", "Ray", secrets=["tok"], http_client=http, sleep=lambda s: None)
    client = RayClient("http://ray.test", token="tok", transport=transport)
    capacity = client.capacity()
    assert sent == ["/api/version", "/api/v0/nodes", "/api/jobs/"]
    assert capacity["manager"] == "Ray" and capacity["version"] == version["ray_version"]
    assert capacity["api_version"] == version["version"]
    assert capacity["queues"][0]["pending"] + capacity["queues"][0]["running"] <= job_count


# ---------------------------------------------------------------- IBM Quantum

def test_quantum_devices_from_the_simulators_list():
    devices = [quantum_fit.normalize_device(d) for d in body("quantum", "simulator", "backends")["devices"]]
    records = dict((r["name"], r) for r in quantum_fit.queue_records(devices))
    assert_records(records.values())
    assert records["ibm_manila"]["usable"] and records["ibm_manila"]["qubits"] == 5
    assert records["ibm_nairobi"]["qubits"] == 7 and records["ibm_nairobi"]["pending"] == 0
    assert records["ibm_lima"]["state"] == "paused" and not records["ibm_lima"]["usable"]
    assert not any(r["default"] for r in records.values()) and records["ibm_manila"]["running"] is None


def test_quantum_devices_with_their_status_as_the_inventory_reads_them():
    (record,) = quantum_fit.queue_records([{"name": "old", "status": None, "operational": False, "qubits": 5,
                                            "pending_jobs": 4, "queue_length": None}])
    assert record["state"] == "not operational" and not record["usable"] and record["pending"] == 4


def test_quantum_capacity_is_one_request_after_the_token():
    stub = StubRuntime()
    client = stub.client()
    try:
        capacity = client.capacity()
        client.capacity()
        assert [(method, url.rsplit("/", 1)[-1]) for method, url in stub.requests] == [
            ("POST", "token"), ("GET", "backends"), ("GET", "backends")]
        assert capacity["manager"] == "IBM Quantum" and capacity["api_version"] == client.api_version
        assert sorted(r["name"] for r in capacity["queues"]) == ["ibm_kingston", "ibm_paused", "ibm_small"]
    finally:
        client.close()


def test_kubernetes_reads_what_a_namespaced_user_may_and_leaves_the_rest_unknown():
    from k8s_stub import status
    stub = ApiServerStub(nodes=[node("n1")], kueue=True)
    stub.faults += [("GET", r"^/api/v1/nodes$", status(403, "Forbidden", "nodes is forbidden")),
                    ("GET", r"/localqueues$", status(403, "Forbidden", "localqueues is forbidden"))]
    (record,) = stub.client().capacity()["queues"]
    assert record["name"] is None and record["usable"] and record["cpus_per_node"] is None
    assert (record["pending"], record["running"]) == (0, 0)
