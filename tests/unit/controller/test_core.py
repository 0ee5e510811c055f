"""The controller's pure core: CR spec mapping, plans, batches, status and conditions."""

import os

import pytest
import yaml

from bridge_controller.batches import Batches
from bridge_controller.plan import FINALIZER, plan
from bridge_controller.spec import GROUP_OPTIONS, TOP_LEVEL, backend_key, identity_of, job_params
from bridge_controller.status import desired_status, job_status, set_condition, status_patch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def bridgejob(spec=None, status=None, finalizers=(FINALIZER,), deleting=False, uid="u-1"):
    meta = {"name": "hello", "namespace": "team-a", "uid": uid, "generation": 1, "finalizers": list(finalizers)}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-30T03:00:00Z"
    base = {"backend": {"type": "slurm", "url": "http://slurm:6820", "credentialsSecretRef": {"name": "creds"}},
            "script": "#!/bin/bash\necho hi\n"}
    base.update(spec or {})
    return {"metadata": meta, "spec": base, "status": status or {}}


def test_spec_maps_to_the_collection_spec_with_the_uid_as_identity():
    obj = bridgejob({"workingDirectory": "/home/a", "backendOptions": {"slurm": {"exclusive": "user"}},
                     "resources": {"cpusPerTask": 2, "timeLimit": "01:00:00", "memoryPerCpu": "1G"}})
    params = job_params(obj)
    assert params["identity"] == identity_of(obj) == "u-1"
    assert params["working_directory"] == "/home/a" and params["name"] == "hello"
    assert params["resources"] == {"cpus_per_task": 2, "time_limit": "01:00:00", "memory_per_cpu": "1G"}
    assert params["backend_options"] == {"slurm": {"exclusive": "user"}}


def test_every_field_of_the_crd_reaches_the_collection_spec():
    """The CRD's spec properties (generated from the field table) are each mapped to the job spec."""
    obj = bridgejob({"exclusive": True, "qos": "high", "resources": {"tasksPerNode": 4, "gpuType": "a100", "gpus": 1}})
    params = job_params(obj)
    assert params["exclusive"] is True and params["qos"] == "high"
    assert params["resources"] == {"tasks_per_node": 4, "gpu_type": "a100", "gpus": 1}
    with open(os.path.join(REPO, "deploy", "crd.yaml")) as handle:
        schema = yaml.safe_load(handle)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    controller_own = {"backend", "backendRef", "placement", "script", "scriptFrom", "resultQuery", "cancel", "pollInterval"}
    assert set(schema["properties"]) - controller_own - set(GROUP_OPTIONS) == set(TOP_LEVEL)
    for group, options in GROUP_OPTIONS.items():
        assert set(schema["properties"][group]["properties"]) == set(options)


def test_groups_reach_the_collection_spec_snake_cased_and_unset_groups_stay_unset():
    obj = bridgejob({"array": {"indexes": "0-9", "parallelism": 2}, "retry": {"limit": 1, "backoffSeconds": 5},
                     "output": {"tailLines": 30}})
    params = job_params(obj)
    assert params["array"] == {"indexes": "0-9", "parallelism": 2}
    assert params["retry"] == {"limit": 1, "backoff_seconds": 5}
    assert params["output"] == {"tail_lines": 30}
    assert "array" not in job_params(bridgejob()) and job_params(bridgejob())["resources"] == {}


def test_script_from_a_config_map_is_passed_in():
    obj = bridgejob()
    del obj["spec"]["script"]
    assert job_params(obj, script="#!/bin/sh\n")["script"] == "#!/bin/sh\n"


def test_crs_of_one_backend_share_a_batch_key():
    assert backend_key(bridgejob(uid="a")) == backend_key(bridgejob(uid="b"))
    other = bridgejob({"backend": {"type": "slurm", "url": "http://other:6820", "credentialsSecretRef": {"name": "creds"}}})
    assert backend_key(other) != backend_key(bridgejob())


@pytest.mark.parametrize("obj, actions", [
    (bridgejob(finalizers=()), ("add_finalizer",)),
    (bridgejob(), ("submit",)),
    (bridgejob(status={"jobId": "4", "phase": "Running"}), ("poll",)),
    (bridgejob(status={"jobId": "4", "phase": "Completed"}), ()),
    (bridgejob({"cancel": True}, status={"jobId": "4", "phase": "Running"}), ("cancel",)),
    (bridgejob({"cancel": True}), ("cancel",)),
    (bridgejob({"cancel": True}, status={"jobId": "4", "phase": "Cancelled"}), ()),
    (bridgejob(deleting=True, status={"jobId": "4", "phase": "Running"}), ("cancel", "remove_finalizer")),
    (bridgejob(deleting=True), ("cancel", "remove_finalizer")),
    (bridgejob(deleting=True, status={"jobId": "4", "phase": "Failed"}), ("remove_finalizer",)),
    (bridgejob(deleting=True, finalizers=()), ()),
])
def test_plans(obj, actions):
    assert plan(obj) == actions


def test_the_finalizer_comes_before_any_side_effect():
    assert plan(bridgejob(finalizers=(), status={})) == ("add_finalizer",)
    assert plan(bridgejob({"cancel": True}, finalizers=())) == ("add_finalizer",)


def test_a_backend_is_polled_at_the_shortest_poll_interval_of_its_crs():
    batches = Batches(clock=lambda: 1000.0)
    batches.track("slurm-a", "ns/slow", 30)
    batches.track("slurm-a", "ns/fast", 7)
    assert batches.seconds_to_next_poll() == 30, "the first poll waits the first CR's interval"
    assert batches.due_polls(now=1029.0) == []
    assert batches.due_polls(now=1030.0) == [("slurm-a", ["ns/fast", "ns/slow"])]
    assert batches.changed_in_flight("ns/fast") and batches.seconds_to_next_poll(now=1030.0) == 7
    assert batches.finish(["ns/fast", "ns/slow"]) == {"ns/fast"}, "what changed while polled"
    batches.untrack("ns/fast")
    assert batches.due_polls(now=1037.0) == [("slurm-a", ["ns/slow"])]
    assert batches.seconds_to_next_poll(now=1037.0) == 30
    batches.untrack("ns/slow")
    assert batches.seconds_to_next_poll() is None


def test_submits_and_cancels_are_batched_per_action_and_backend_up_to_max_batch():
    batches = Batches(max_batch=2)
    for key in ("ns/a", "ns/b", "ns/c"):
        batches.add("submit", "slurm-a", key)
    batches.add("cancel", "slurm-a", "ns/d")
    batches.add("submit", "ray-b", "ns/e")
    assert batches.take() == [("submit", "slurm-a", ["ns/a", "ns/b"]), ("submit", "slurm-a", ["ns/c"]),
                              ("cancel", "slurm-a", ["ns/d"]), ("submit", "ray-b", ["ns/e"])]
    assert batches.take() == [] and batches.finish(["ns/a"]) == set()
    assert not batches.changed_in_flight("ns/a") and batches.changed_in_flight("ns/b")
    assert batches.finish(["ns/b", "ns/c"]) == {"ns/b"}


JOB = {"job_id": 42, "phase": "running", "native_state": "RUNNING", "reason": None, "exit_code": None,
       "failure_class": None, "submit_time": "2026-11-30T03:00:00Z", "start_time": "2026-11-30T03:00:01Z", "end_time": None}


def test_status_from_a_running_job():
    status = desired_status({}, 1, job=JOB, reachable=True, now="T1")
    assert status["phase"] == "Running" and status["jobId"] == "42" and status["observedGeneration"] == 1
    kinds = dict((c["type"], c["status"]) for c in status["conditions"])
    assert kinds == {"Submitted": "True", "Running": "True", "Succeeded": "False", "Failed": "False",
                     "Cancelled": "False", "BackendReachable": "True"}


def test_last_transition_time_moves_only_when_a_condition_flips():
    first = desired_status({}, 1, job=JOB, reachable=True, now="T1")
    again = desired_status(first, 1, job=JOB, reachable=True, now="T2")
    assert status_patch(first, again) is None
    done = desired_status(first, 1, job=dict(JOB, phase="completed", exit_code=0), reachable=True, now="T3")
    times = dict((c["type"], c["lastTransitionTime"]) for c in done["conditions"])
    assert times["Submitted"] == "T1" and times["Running"] == "T3" and times["Succeeded"] == "T3"
    assert times["BackendReachable"] == "T1" and done["phase"] == "Completed"


def test_an_unreachable_backend_keeps_the_last_known_job_state():
    first = desired_status({}, 1, job=JOB, reachable=True, now="T1")
    down = desired_status(first, 1, reachable=False, backend_error={"type": "ConnectionFailed", "message": "refused"},
                          now="T2")
    assert down["phase"] == "Running" and down["jobId"] == "42"
    reachable = [c for c in down["conditions"] if c["type"] == "BackendReachable"][0]
    assert (reachable["status"], reachable["reason"], reachable["lastTransitionTime"]) == ("False", "ConnectionFailed", "T2")


def test_failed_job_condition_names_the_failure_class():
    status = desired_status({}, 1, job=dict(JOB, phase="failed", exit_code=3, failure_class="non_zero_exit",
                                            reason="NonZeroExitCode"), now="T1")
    failed = [c for c in status["conditions"] if c["type"] == "Failed"][0]
    assert (failed["status"], failed["reason"], failed["message"]) == ("True", "non_zero_exit", "NonZeroExitCode")
    assert status["exitCode"] == 3


def test_set_condition_keeps_order_and_other_conditions():
    conditions = set_condition([], "BackendReachable", True, "Reachable", "", "T1", 1)
    conditions = set_condition(conditions, "Submitted", True, "Submitted", "", "T1", 1)
    assert [c["type"] for c in conditions] == ["Submitted", "BackendReachable"]


def test_fields_that_become_unknown_are_deleted_by_the_patch():
    current = {"phase": "Running", "reason": "Priority", "jobId": "4"}
    desired = {"phase": "Running", "jobId": "4"}
    assert status_patch(current, desired) == {"status": {"phase": "Running", "jobId": "4", "reason": None}}
    assert None not in desired_status({}, 1, job=JOB, now="T1").values()


def test_a_quantum_backends_iam_url_reaches_the_connection_and_splits_batches():
    from bridge_controller.resolver import Resolver

    backend = {"type": "quantum", "url": "https://q/api/v1", "credentialsSecretRef": {"name": "creds"}}
    plain = bridgejob({"backend": backend})
    private = bridgejob({"backend": dict(backend, iamUrl="https://iam.internal")})
    assert Resolver(None).connection(private) == {"type": "quantum", "url": "https://q/api/v1", "api_version": None,
                                                  "iam_url": "https://iam.internal", "validate_certs": True}
    assert Resolver(None).connection(plain)["iam_url"] is None
    assert backend_key(private) != backend_key(plain)


def test_a_finished_jobs_results_summary_becomes_status_results():
    summary = {"pubs": [{"registers": {"meas": {"shots": 100, "outcomes": 2, "counts": {"00": 52, "11": 48}}}}],
               "truncated": False}
    done = desired_status({}, 1, job=dict(JOB, phase="completed", exit_code=None, results_summary=summary), now="T1")
    assert done["results"] == summary and done["phase"] == "Completed"
    succeeded = [c for c in done["conditions"] if c["type"] == "Succeeded"][0]
    assert succeeded["status"] == "True" and succeeded["message"] == ""


@pytest.mark.parametrize("phase, job_phase", [("Completed", "running"), ("Cancelled", "queued"), ("Failed", "completed")])
def test_a_terminal_phase_is_never_left(phase, job_phase):
    # An observation that would leave it was made before the one that wrote it: a lost race.
    final = {"phase": phase, "jobId": "42", "exitCode": 3}
    status = desired_status(final, 1, job=dict(JOB, phase=job_phase), reachable=True, now="T1")
    assert (status["phase"], status["exitCode"]) == (phase, 3)
    done = desired_status(final, 1, job=dict(JOB, phase=phase.lower(), exit_code=0), now="T1")
    assert done["exitCode"] == 0, "an observation of the same phase still fills its fields in"


def test_an_arrays_record_becomes_status_array_camelcased_and_fits_the_crd_schema():
    array = {"indexes": "0-9", "size": 10, "parallelism": 2, "failed_indexes": "3",
             "counts": {"queued": 0, "running": 0, "completed": 9, "failed": 1, "cancelled": 0},
             "failures": [{"index": 3, "exit_code": 3, "failure_class": "non_zero_exit"}]}
    status = job_status({"job_id": "7", "phase": "failed", "array": array})
    assert status["array"] == {"indexes": "0-9", "size": 10, "parallelism": 2, "failedIndexes": "3",
                               "counts": array["counts"],
                               "failures": [{"index": 3, "exitCode": 3, "failureClass": "non_zero_exit"}]}
    assert "array" not in job_status({"job_id": "8", "phase": "completed"})
    with open(os.path.join(REPO, "deploy", "crd.yaml")) as handle:
        schema = yaml.safe_load(handle)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    properties = schema["properties"]["array"]["properties"]
    assert set(status["array"]) <= set(properties)
    assert set(status["array"]["failures"][0]) <= set(properties["failures"]["items"]["properties"])
