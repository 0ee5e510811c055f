"""_placement: which candidate and queue a job goes to, and the reason each other one was not taken."""

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._backend import queue_record
from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._fields import FIELDS
from ansible_collections.bridge.hpc.plugins.module_utils._placement import misfit, place
from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec

SCRIPT = "#!/bin/bash\ntrue\n"
CIRCUIT = "OPENQASM 3.0;\ninclude \"stdgates.inc\";\nqubit[%d] q;\nbit[%d] c;\nh q[0];\nc = measure q;\n"


def partition(name, **values):
    record = dict(state="UP", usable=True, max_time_minutes=30, max_nodes=2, cpus_per_node=4, memory_mb_per_node=4000,
                  gpus_per_node=0, features=["ib"], pending=0, running=0)
    record.update(values)
    return queue_record(name=name, **record)


def candidate(name, backend_type="slurm", queues=None, ready=True, reason=None, allowed_queues=None):
    return {"name": name, "type": backend_type, "ready": ready, "reason": reason,
            "queues": queues if queues is not None else [partition("debug", default=True)],
            "allowed_queues": allowed_queues}


def spec(**params):
    params.setdefault("script", SCRIPT)
    return normalize_spec(params)


# ---------------------------------------------------------------- misfit

def test_a_job_within_every_limit_fits():
    assert misfit(spec(resources={"nodes": 2, "tasks_per_node": 2, "cpus_per_task": 2, "memory": "3G",
                                  "time_limit": 30}, constraints="ib"), "slurm", partition("debug")) is None


def test_unknown_limits_let_a_job_pass():
    unknown = queue_record(name="q", state="UP", usable=True)
    assert misfit(spec(resources={"nodes": 64, "gpus": 8, "memory": "1T", "time_limit": "30-00"}), "slurm", unknown) is None


@pytest.mark.parametrize("params, queue, reason", [
    ({"resources": {"time_limit": 60}}, {},
     "resources.time_limit: 60 minutes requested; 'debug' allows at most 30"),
    ({"resources": {"nodes": 3}}, {},
     "resources.nodes: 3 nodes requested; 'debug' allows at most 2 per job"),
    ({"resources": {"cpus_per_task": 8}}, {},
     "resources.cpus_per_task: 8 CPUs per node requested (tasks per node x cpus_per_task); the largest node of "
     "'debug' has 4"),
    ({"resources": {"tasks_per_node": 5}}, {},
     "resources.tasks_per_node: 5 CPUs per node requested (tasks per node x cpus_per_task); the largest node of "
     "'debug' has 4"),
    ({"resources": {"tasks": 10, "nodes": 2}}, {},
     "resources.tasks: 5 CPUs per node requested (tasks per node x cpus_per_task); the largest node of 'debug' has 4"),
    ({"resources": {"memory": "8G"}}, {},
     "resources.memory: 8192 MiB per node requested; the largest node of 'debug' has 4000 MiB"),
    ({"resources": {"memory_per_cpu": "2G", "cpus_per_task": 3}}, {},
     "resources.memory_per_cpu: 6144 MiB per node requested; the largest node of 'debug' has 4000 MiB"),
    ({"resources": {"gpus": 2}}, {},
     "resources.gpus: 2 GPUs per node requested; the nodes of 'debug' have at most 0"),
    ({"resources": {"gpus": 2, "gpu_type": "h100"}}, {"gpus_per_node": 4, "gpu_types": ["a100"]},
     "resources.gpu_type: 'h100' requested; 'debug' offers a100"),
    ({"constraints": "ib&(a100|h100)"}, {},
     "constraints: feature(s) a100, h100 not offered by 'debug'; its features: ib"),
    ({}, {"usable": False, "state": "DOWN"}, "queue: 'debug' takes no jobs now (DOWN)"),
])
def test_each_misfit_names_the_field_and_what_the_queue_offers(params, queue, reason):
    assert misfit(spec(**params), "slurm", partition("debug", **queue)) == reason


def test_a_gpu_type_is_matched_regardless_of_case():
    queue = partition("gpu", gpus_per_node=4, gpu_types=["A100"])
    assert misfit(spec(resources={"gpus": 1, "gpu_type": "a100"}), "slurm", queue) is None


def test_a_backend_without_queues_is_named_as_the_cluster():
    cluster = queue_record(name=None, state="ready", usable=True, default=True, max_nodes=1, cpus_per_node=2,
                           gpus_per_node=0)
    assert misfit(spec(resources={"gpus": 1}), "ray", cluster) == (
        "resources.gpus: 1 GPUs per node requested; the nodes of the Ray cluster have at most 0")


def test_a_circuit_wider_than_the_device_does_not_fit():
    device = queue_record(name="ibm_manila", state="online", usable=True, qubits=5)
    wide = normalize_spec({"script": CIRCUIT % (7, 7), "queue": "ibm_manila"}, BACKENDS["quantum"])
    narrow = normalize_spec({"script": CIRCUIT % (2, 2), "queue": "ibm_manila"}, BACKENDS["quantum"])
    assert misfit(wide, "quantum", device) == "script: the circuit is 7 qubits wide; 'ibm_manila' has 5 qubits"
    assert misfit(narrow, "quantum", device) is None


# ---------------------------------------------------------------- place

def test_first_fit_takes_the_first_candidate_and_its_default_queue_first():
    queues = [partition("batch", max_time_minutes=None), partition("debug", default=True)]
    result = place({"script": SCRIPT}, [candidate("a", queues=queues), candidate("b")])
    assert (result["backend"], result["type"], result["queue"], result["policy"]) == ("a", "slurm", "debug", "FirstFit")
    assert result["rejected"] == [] and result["waiting"] == []


def test_first_fit_records_why_the_earlier_ones_were_not_taken():
    queues = [partition("debug", default=True), partition("long", max_time_minutes=None)]
    result = place({"script": SCRIPT, "resources": {"time_limit": 120}}, [candidate("a"), candidate("b", queues=queues)])
    assert (result["backend"], result["queue"]) == ("b", "long")
    assert result["rejected"] == [
        {"backend": "a", "queue": "debug", "reason": "resources.time_limit: 120 minutes requested; 'debug' allows at most 30"},
        {"backend": "b", "queue": "debug", "reason": "resources.time_limit: 120 minutes requested; 'debug' allows at most 30"},
    ]


def test_least_queued_takes_the_fewest_pending_then_running_then_candidate_order():
    busy = candidate("busy", queues=[partition("debug", default=True, pending=5)])
    running = candidate("running", queues=[partition("debug", default=True, pending=None, running=3)])
    idle = candidate("idle", queues=[partition("debug", default=True, pending=0, running=1)])
    also_idle = candidate("also-idle", queues=[partition("debug", default=True, pending=0, running=1)])
    result = place({"script": SCRIPT}, [busy, running, idle, also_idle], "LeastQueued")
    assert (result["backend"], result["queue"], result["policy"]) == ("idle", "debug", "LeastQueued")
    result = place({"script": SCRIPT}, [busy, running], "LeastQueued")
    # None pending counts as 0.
    assert result["backend"] == "running"


def test_least_queued_compares_the_queues_of_one_candidate_too():
    queues = [partition("debug", default=True, pending=4), partition("batch", pending=1)]
    assert place({"script": SCRIPT}, [candidate("a", queues=queues)], "LeastQueued")["queue"] == "batch"
    assert place({"script": SCRIPT}, [candidate("a", queues=queues)], "FirstFit")["queue"] == "debug"


def test_a_candidate_not_ready_is_rejected_with_its_reason():
    result = place({"script": SCRIPT}, [candidate("down", ready=False, reason="ConnectionFailed: refused"), candidate("up")])
    assert result["backend"] == "up"
    assert result["rejected"] == [{"backend": "down", "queue": None, "reason": "not ready: ConnectionFailed: refused"}]


def test_never_probed_candidates_hold_the_choice_when_they_could_change_it():
    never = candidate("never", ready=None)
    result = place({"script": SCRIPT}, [never, candidate("up")])
    assert result["backend"] is None and result["waiting"] == ["never"]
    # After the first fit, FirstFit's choice cannot change.
    result = place({"script": SCRIPT}, [candidate("up"), never])
    assert result["backend"] == "up" and result["waiting"] == []
    # LeastQueued waits for every candidate.
    result = place({"script": SCRIPT}, [candidate("up"), never], "LeastQueued")
    assert result["backend"] is None and result["waiting"] == ["never"]
    # Fitting nowhere while one was never probed is waiting, not unplaceable.
    result = place({"script": SCRIPT, "resources": {"gpus": 1}}, [candidate("up"), never])
    assert result["backend"] is None and result["waiting"] == ["never"] and len(result["rejected"]) == 1


def test_fitting_nowhere_gives_every_reason():
    result = place({"script": SCRIPT, "resources": {"gpus": 1}}, [candidate("a"), candidate("b", ready=False)])
    assert result["backend"] is None and result["queue"] is None and result["type"] is None and not result["waiting"]
    assert [r["backend"] for r in result["rejected"]] == ["a", "b"]
    assert result["rejected"][0]["reason"].startswith("resources.gpus: ")


def test_allowed_queues_restrict_a_candidate():
    queues = [partition("debug", default=True), partition("batch")]
    result = place({"script": SCRIPT}, [candidate("a", queues=queues, allowed_queues=["batch"])])
    assert result["queue"] == "batch"
    result = place({"script": SCRIPT}, [candidate("a", queues=queues, allowed_queues=["gpu"]), candidate("b")])
    assert result["backend"] == "b"
    assert result["rejected"] == [{"backend": "a", "queue": None, "reason": "queue: none of the allowed queues gpu is a "
                                   "queue of a; its queues: batch, debug"}]


def test_a_queue_in_the_spec_is_the_only_one_tried():
    queues = [partition("debug", default=True), partition("batch", pending=0)]
    result = place({"script": SCRIPT, "queue": "batch"}, [candidate("a", queues=queues)])
    assert result["queue"] == "batch"
    result = place({"script": SCRIPT, "queue": "gpu"}, [candidate("a", queues=queues)])
    assert result["backend"] is None
    assert result["rejected"] == [{"backend": "a", "queue": "gpu",
                                   "reason": "queue: 'gpu' is not a queue a offers; its queues: batch, debug"}]


def refused_field(backend_type):
    """A field the table refuses for this backend type, with a value it refuses."""
    for field in FIELDS:
        rule = field.backends.get(backend_type)
        if rule is not None and rule.refused and field.sample is not None:
            return field
    return None


@pytest.mark.parametrize("backend_type", sorted(BACKENDS))
def test_a_field_the_table_refuses_rejects_the_candidate_with_the_tables_reason(backend_type):
    field = refused_field(backend_type)
    if field is None:
        pytest.skip("the table refuses no field of %s" % backend_type)
    params = {"script": CIRCUIT % (2, 2) if backend_type == "quantum" else SCRIPT,
              "backend_options": {"kubernetes": {"image": "busybox"}}}
    group, _dot, leaf = field.name.rpartition(".")
    if group:
        params[group] = {leaf: field.sample}
    else:
        params[field.name] = field.sample
    cluster = queue_record(name=None, state="ready", usable=True, default=True)
    result = place(params, [candidate("x", backend_type, queues=[cluster])])
    assert result["backend"] is None
    (rejection,) = result["rejected"]
    assert rejection["reason"].startswith("%s: not supported by the %s backend: %s" % (
        field.name, BACKENDS[backend_type].TITLE, field.backends[backend_type].why))


@pytest.mark.parametrize("backend_type", ["ray", "kubernetes"])
def test_a_two_node_job_is_refused_where_a_job_is_one_process(backend_type):
    cluster = queue_record(name=None, state="ready", usable=True, default=True, max_nodes=1)
    result = place({"script": SCRIPT, "resources": {"nodes": 2}}, [candidate("x", backend_type, queues=[cluster])])
    assert result["rejected"][0]["reason"].startswith("resources.nodes: not supported by the ")


def test_a_shell_script_is_rejected_by_a_quantum_candidate_and_placed_elsewhere():
    device = queue_record(name="ibm_manila", state="online", usable=True, qubits=5)
    result = place({"script": SCRIPT}, [candidate("ibm", "quantum", queues=[device]), candidate("hpc")])
    assert result["backend"] == "hpc"
    assert result["rejected"][0]["backend"] == "ibm" and result["rejected"][0]["reason"].startswith("script: ")


def test_a_circuit_goes_to_a_device_wide_enough():
    small = queue_record(name="ibm_manila", state="online", usable=True, qubits=5, pending=0)
    wide = queue_record(name="ibm_nairobi", state="online", usable=True, qubits=7, pending=3)
    result = place({"script": CIRCUIT % (6, 6)}, [candidate("ibm", "quantum", queues=[small, wide])])
    assert (result["backend"], result["queue"]) == ("ibm", "ibm_nairobi")


def test_an_unknown_backend_type_is_rejected_and_an_unknown_policy_refused():
    result = place({"script": SCRIPT}, [candidate("odd", "pbs")])
    assert result["rejected"][0]["reason"].startswith("backend: 'pbs' is not a backend")
    with pytest.raises(SpecError) as refused:
        place({"script": SCRIPT}, [candidate("a")], "Random")
    assert refused.value.field == "policy"


def test_a_slurm_comma_list_of_partitions_is_tried_in_its_order():
    queues = [partition("debug", default=True, max_time_minutes=30), partition("batch", max_time_minutes=1440),
              partition("long", max_time_minutes=None)]
    result = place({"script": SCRIPT, "queue": "long,batch", "resources": {"time_limit": 60}}, [candidate("a", queues=queues)])
    assert result["queue"] == "long" and result["rejected"] == []
