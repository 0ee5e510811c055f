"""Retries by failure class: _retry.decide, and the lifecycle of _jobs over attempts (FatedBackend)."""

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils import _retry
from ansible_collections.bridge.hpc.plugins.module_utils._arrays import array_job
from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._fields import RETRY_CLASSES
from ansible_collections.bridge.hpc.plugins.module_utils._jobs import (
    ensure_absent,
    ensure_many_absent,
    ensure_many_present,
    ensure_present,
)
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec

from fake_backend import FatedBackend

ENDED = "2026-12-04T00:00:00Z"
T0 = _retry.epoch(ENDED)
TIMEOUT = ("failed", {"failure_class": "timeout", "native_state": "TIMEOUT"})
EXIT_3 = ("failed", {"failure_class": "non_zero_exit", "exit_code": 3})
COMPLETED = ("completed", {})
RUNNING = ("running", {})


def spec(**retry):
    params = {"script": "#!/bin/bash\ntrue\n", "identity": "run-1", "retry": dict({"limit": 2}, **retry)}
    return normalize_spec(params)


def failed(identity="run-1", failure_class="timeout", end=ENDED, **extra):
    job = {"job_id": "7", "identity": identity, "phase": "failed", "terminal": True, "failure_class": failure_class,
           "end_time": end, "exit_code": None}
    job.update(extra)
    return job


class Clock(object):
    """Monotonic and wall time together; sleeping moves both."""

    def __init__(self, wall=T0 + 1):
        self.wall = wall
        self.slept = []

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.wall += seconds

    def monotonic(self):
        return self.wall

    def time(self):
        return self.wall

    def args(self):
        return dict(sleep=self.sleep, clock=self.monotonic, wallclock=self.time)


# ------------------------------------------------------------------ pure


def test_attempt_identities_keep_attempt_0_and_suffix_the_others():
    assert _retry.attempt_identity("run-1", 0) == "run-1"
    assert _retry.attempt_identity("run-1", 2) == "run-1.2"
    assert _retry.attempt_identities(spec()) == ["run-1", "run-1.1", "run-1.2"]


def test_lookup_names_follow_the_job_name_or_each_attempt_identity():
    assert _retry.lookup_keys(spec()) == (["run-1", "run-1.1", "run-1.2"], ["run-1", "run-1.1", "run-1.2"])
    named = normalize_spec({"script": "#!/bin/sh\n", "identity": "run-1", "name": "sweep", "retry": {"limit": 1}})
    assert _retry.lookup_keys(named) == (["run-1", "run-1.1"], ["sweep", "sweep"])
    attempt = _retry.attempt_spec(named, 1)
    assert attempt["identity"] == "run-1.1" and attempt["name"] == "sweep"
    assert _retry.attempt_spec(spec(), 1)["name"] == "run-1.1"
    assert _retry.attempt_spec(spec(), 0) == spec()


def test_decide_submits_attempt_0_when_nothing_is_found():
    decision = _retry.decide(spec(), {}, T0)
    assert (decision.action, decision.attempt, decision.job) == (_retry.SUBMIT, 0, None)


def test_decide_waits_for_a_running_attempt():
    running = dict(failed("run-1.1"), phase="running", terminal=False)
    decision = _retry.decide(spec(classes=["timeout"]), {"run-1": failed(), "run-1.1": running}, T0)
    assert (decision.action, decision.attempt) == (_retry.WAIT, 1)


def test_decide_submits_the_next_attempt_once_its_backoff_passed():
    found = {"run-1": failed()}
    backoff = spec(classes=["timeout"], backoff_seconds=60)
    waiting = _retry.decide(backoff, found, T0 + 59)
    assert (waiting.action, waiting.attempt, waiting.due) == (_retry.BACKOFF, 1, T0 + 60)
    due = _retry.decide(backoff, found, T0 + 60)
    assert (due.action, due.attempt) == (_retry.SUBMIT, 1)


@pytest.mark.parametrize("classes, failure_class, action", [
    (None, "timeout", _retry.DONE),                 # the default classes: node_failure, preempted
    (None, "preempted", _retry.SUBMIT),
    (None, "node_failure", _retry.SUBMIT),
    (["timeout"], "timeout", _retry.SUBMIT),
    (["timeout"], "non_zero_exit", _retry.DONE),
    (["non_zero_exit"], "non_zero_exit", _retry.SUBMIT),
    (["non_zero_exit"], "cancelled", _retry.DONE),  # cancelled by someone: never retried
])
def test_decide_retries_only_the_listed_classes(classes, failure_class, action):
    retry = {} if classes is None else {"classes": classes}
    assert _retry.decide(spec(**retry), {"run-1": failed(failure_class=failure_class)}, T0).action == action


def test_decide_stops_after_the_last_allowed_attempt_and_after_a_completed_one():
    found = {"run-1": failed(), "run-1.1": failed("run-1.1"), "run-1.2": failed("run-1.2")}
    last = _retry.decide(spec(classes=["timeout"]), found, T0)
    assert (last.action, last.attempt) == (_retry.DONE, 2) and "last of 3" in last.reason
    found["run-1.1"] = dict(found["run-1.1"], phase="completed", failure_class=None)
    del found["run-1.2"]
    assert _retry.decide(spec(classes=["timeout"]), found, T0).action == _retry.DONE


def test_a_backoff_counts_from_the_end_and_without_one_from_the_start():
    assert _retry.started_of({"end_time": "2026-12-04T00:00:10Z", "start_time": ENDED}) == T0 + 10
    assert _retry.started_of({"start_time": ENDED}) == T0
    assert _retry.epoch("2026-12-04T01:00:00+01:00") == T0
    assert _retry.epoch("2026-12-04T00:00:00.250Z") == T0
    assert _retry.epoch(None) is None and _retry.epoch("yesterday") is None


def test_an_array_runs_only_its_failed_indexes_of_a_retried_class_again():
    array_spec = normalize_spec({"script": "#!/bin/sh\n", "identity": "sweep", "array": {"indexes": "0-9"},
                                 "retry": {"limit": 1, "classes": ["timeout"]}})
    tasks = dict((index, {"phase": "completed", "exit_code": 0}) for index in range(10))
    tasks[3] = {"phase": "failed", "failure_class": "timeout", "end_time": ENDED}
    tasks[7] = {"phase": "failed", "failure_class": "non_zero_exit", "exit_code": 3, "end_time": ENDED}
    job = array_job({"job_id": "5", "identity": "sweep"}, tasks, tuple(range(10)))
    decision = _retry.decide(array_spec, {"sweep": job}, T0 + 1)
    assert (decision.action, decision.indexes) == (_retry.SUBMIT, (3,))
    attempt = _retry.attempt_spec(array_spec, 1, decision.indexes)
    assert attempt["array"]["text"] == "3" and attempt["array"]["size"] == 1 and attempt["identity"] == "sweep.1"
    # Attempt 1 completes, but index 7 (non_zero_exit) was never run again: the array failed.
    again = array_job({"job_id": "6", "identity": "sweep.1"}, {3: {"phase": "completed", "exit_code": 0}}, (3,))
    found = {"sweep": job, "sweep.1": again}
    final = _retry.with_attempts(array_spec, found, again, _retry.decide(array_spec, found, T0 + 2))
    assert final["phase"] == "failed" and final["failure_class"] == "non_zero_exit" and "7" in final["reason"]
    assert final["exit_code"] == 3
    assert [record["attempt"] for record in final["attempts"]] == [0, 1]
    assert [(record["indexes"], record["failed_indexes"]) for record in final["attempts"]] == [("0-9", "3,7"), ("3", "")]
    # The array record covers every index, each as the attempt that ran it last left it.
    array = final["array"]
    assert (array["indexes"], array["size"], array["failed_indexes"], array["retried_indexes"]) == ("0-9", 10, "7", "3")
    assert array["counts"] == {"queued": 0, "running": 0, "completed": 9, "failed": 1, "cancelled": 0}
    assert array["failures"] == [{"index": 7, "exit_code": 3, "failure_class": "non_zero_exit", "attempt": 0}]


def hundred(failing, attempt_identity="sweep", job_id="5", indexes=tuple(range(100))):
    tasks = dict((index, {"phase": "completed", "exit_code": 0, "end_time": ENDED}) for index in indexes)
    for index in failing:
        tasks[index] = {"phase": "failed", "failure_class": "non_zero_exit", "exit_code": 3, "end_time": ENDED}
    return array_job({"job_id": job_id, "identity": attempt_identity}, tasks, indexes, 8)


def test_an_array_retried_alone_ends_completed_with_every_index_counted():
    array_spec = normalize_spec({"script": "#!/bin/sh\n", "identity": "sweep", "array": {"indexes": "0-99", "parallelism": 8},
                                 "retry": {"limit": 1, "classes": ["non_zero_exit"]}})
    first = hundred((13, 42, 77))
    decision = _retry.decide(array_spec, {"sweep": first}, T0 + 1)
    assert (decision.action, decision.indexes) == (_retry.SUBMIT, (13, 42, 77))
    attempt = _retry.attempt_spec(array_spec, 1, decision.indexes)
    assert (attempt["array"]["text"], attempt["array"]["size"], attempt["array"]["parallelism"]) == ("13,42,77", 3, 8)
    # While attempt 1 waits, its three indexes count queued, the 97 others completed.
    waiting = array_job({"job_id": "6", "identity": "sweep.1"}, {}, (13, 42, 77), 8)
    found = {"sweep": first, "sweep.1": waiting}
    job = _retry.with_attempts(array_spec, found, waiting, _retry.decide(array_spec, found, T0 + 2))
    assert job["phase"] == "queued" and job["job_id"] == "6"
    assert job["array"]["counts"] == {"queued": 3, "running": 0, "completed": 97, "failed": 0, "cancelled": 0}
    assert job["array"]["failed_indexes"] == "" and job["array"]["failures"] == []
    done = hundred((), "sweep.1", "6", (13, 42, 77))
    found = {"sweep": first, "sweep.1": done}
    final = _retry.with_attempts(array_spec, found, done, _retry.decide(array_spec, found, T0 + 3))
    assert final["phase"] == "completed" and final["exit_code"] == 0 and final["job_id"] == "6"
    array = final["array"]
    assert (array["indexes"], array["size"], array["parallelism"]) == ("0-99", 100, 8)
    assert array["counts"] == {"queued": 0, "running": 0, "completed": 100, "failed": 0, "cancelled": 0}
    assert (array["failed_indexes"], array["retried_indexes"], array["failures"]) == ("", "13,42,77", [])
    assert [(r["attempt"], r["phase"], r["indexes"], r["failed_indexes"]) for r in final["attempts"]] == [
        (0, "failed", "0-99", "13,42,77"), (1, "completed", "13,42,77", "")]


def test_an_index_failing_in_every_attempt_is_failed_in_the_last():
    array_spec = normalize_spec({"script": "#!/bin/sh\n", "identity": "sweep", "array": {"indexes": "0-99"},
                                 "retry": {"limit": 2, "classes": ["non_zero_exit"]}})
    found = {"sweep": hundred((13, 42, 77)), "sweep.1": hundred((42,), "sweep.1", "6", (13, 42, 77))}
    decision = _retry.decide(array_spec, found, T0 + 1)
    assert (decision.action, decision.attempt, decision.indexes) == (_retry.SUBMIT, 2, (42,))
    found["sweep.2"] = hundred((42,), "sweep.2", "7", (42,))
    decision = _retry.decide(array_spec, found, T0 + 2)
    assert decision.action == _retry.DONE
    final = _retry.with_attempts(array_spec, found, decision.job, decision)
    assert final["phase"] == "failed" and final["exit_code"] == 3 and final["job_id"] == "7"
    array = final["array"]
    assert array["counts"] == {"queued": 0, "running": 0, "completed": 99, "failed": 1, "cancelled": 0}
    assert (array["failed_indexes"], array["retried_indexes"]) == ("42", "13,42,77")
    assert array["failures"] == [{"index": 42, "exit_code": 3, "failure_class": "non_zero_exit", "attempt": 2}]


def test_the_attempts_records_are_all_the_merge_needs():
    # The controller keeps the records in status.attempts and polls the latest attempt alone.
    array_spec = normalize_spec({"script": "#!/bin/sh\n", "identity": "sweep", "array": {"indexes": "0-99"},
                                 "retry": {"limit": 2, "classes": ["non_zero_exit"]}})
    found = {"sweep": hundred((13, 42, 77)), "sweep.1": hundred((42,), "sweep.1", "6", (13, 42, 77)),
             "sweep.2": hundred((), "sweep.2", "7", (42,))}
    latest = found["sweep.2"]
    records = [_retry.record(0, found["sweep"]), _retry.record(1, found["sweep.1"]), _retry.record(2, latest)]
    assert _retry.with_records(array_spec, records, latest) == _retry.with_attempts(array_spec, found, latest)
    # The merge of attempts 0 and 1, kept as one record, merges with attempt 2 as they would.
    earlier = dict(records[1], **_retry.merged_array(records[:2], {}))
    assert _retry.merged_array([earlier, records[2]], latest["array"]) == _retry.merged_array(records, latest["array"])


def test_one_attempt_of_an_array_keeps_its_own_record():
    array_spec = normalize_spec({"script": "#!/bin/sh\n", "identity": "sweep", "array": {"indexes": "0-99"},
                                 "retry": {"limit": 1, "classes": ["timeout"]}})
    first = hundred((13,))
    final = _retry.with_attempts(array_spec, {"sweep": first}, first, _retry.decide(array_spec, {"sweep": first}, T0))
    assert final["array"] == first["array"] and "retried_indexes" not in final["array"]


def test_an_array_whose_failures_are_none_of_the_classes_is_done():
    array_spec = normalize_spec({"script": "#!/bin/sh\n", "identity": "sweep", "array": {"indexes": "0-2"},
                                 "retry": {"limit": 1, "classes": ["timeout"]}})
    tasks = {0: {"phase": "failed", "failure_class": "non_zero_exit", "exit_code": 3}, 1: {"phase": "completed"},
             2: {"phase": "completed"}}
    job = array_job({"job_id": "5", "identity": "sweep"}, tasks, (0, 1, 2))
    assert _retry.decide(array_spec, {"sweep": job}, T0).action == _retry.DONE


def test_an_explicit_identity_leaves_room_for_the_attempt_suffix():
    with pytest.raises(SpecError) as refused:
        normalize_spec({"script": "#!/bin/sh\n", "identity": "x" * 128, "retry": {"limit": 1}})
    assert refused.value.field == "identity"


# ------------------------------------------------------------------ _jobs over attempts


def test_waiting_runs_attempts_until_one_completes():
    backend = FatedBackend([TIMEOUT, COMPLETED])
    clock = Clock()
    result = ensure_present(backend, spec(classes=["timeout"]), wait=True, poll_interval=1, **clock.args())
    assert result["failed"] is False and result["changed"] is True
    assert [submitted["identity"] for submitted in backend.submits] == ["run-1", "run-1.1"]
    assert backend.lookups == 1, "one lookup of every attempt identity, before anything is submitted"
    job = result["job"]
    assert job["identity"] == "run-1.1" and job["phase"] == "completed"
    assert [(a["attempt"], a["phase"], a["failure_class"]) for a in job["attempts"]] == [
        (0, "failed", "timeout"), (1, "completed", None)]
    assert "attempt 1 of at most 3" in result["msg"]


def test_exit_3_is_retried_only_when_non_zero_exit_is_listed():
    backend = FatedBackend([EXIT_3, COMPLETED])
    result = ensure_present(backend, spec(), wait=True, **Clock().args())
    assert result["failed"] is True and "non_zero_exit, exit code 3" in result["msg"]
    assert len(backend.submits) == 1 and "next_attempt" not in result["job"]
    backend = FatedBackend([EXIT_3, COMPLETED])
    result = ensure_present(backend, spec(classes=["non_zero_exit"]), wait=True, **Clock().args())
    assert result["failed"] is False and len(backend.submits) == 2


def test_the_last_allowed_attempt_failing_fails_the_task():
    backend = FatedBackend([TIMEOUT, TIMEOUT, TIMEOUT, COMPLETED])
    result = ensure_present(backend, spec(classes=["timeout"]), wait=True, **Clock().args())
    assert result["failed"] is True and len(backend.submits) == 3
    assert "job 102 failed (timeout" in result["msg"] and len(result["job"]["attempts"]) == 3


def test_waiting_sleeps_the_backoff_from_the_attempt_end():
    backend = FatedBackend([TIMEOUT, COMPLETED])
    clock = Clock(wall=T0 + 10)
    result = ensure_present(backend, spec(classes=["timeout"], backoff_seconds=60), wait=True, **clock.args())
    assert result["failed"] is False and 50 in clock.slept


def test_a_backoff_past_wait_timeout_fails_without_submitting():
    backend = FatedBackend([TIMEOUT, COMPLETED])
    result = ensure_present(backend, spec(classes=["timeout"], backoff_seconds=3600), wait=True, wait_timeout=60,
                            **Clock().args())
    assert result["failed"] is True and len(backend.submits) == 1
    assert "attempt 1 was due at 2026-12-04T01:00:00Z, after wait_timeout (60 seconds)" in result["msg"]


def test_without_wait_each_run_takes_one_step():
    backend = FatedBackend([TIMEOUT, COMPLETED])
    retried = spec(classes=["timeout"], backoff_seconds=60)
    clock = Clock(wall=T0 + 10)
    first = ensure_present(backend, retried, **clock.args())
    assert first["changed"] is True and first["job"]["identity"] == "run-1"
    second = ensure_present(backend, retried, **clock.args())
    assert second["changed"] is False and len(backend.submits) == 1
    assert second["job"]["next_attempt"] == {"attempt": 1, "identity": "run-1.1", "due": "2026-12-04T00:01:00Z"}
    assert "attempt 1 (run-1.1) is due at 2026-12-04T00:01:00Z" in second["msg"]
    clock.wall = T0 + 60
    third = ensure_present(backend, retried, **clock.args())
    assert third["changed"] is True and third["job"]["identity"] == "run-1.1"
    assert third["diff"]["before"]["job_id"] == "100" and third["diff"]["after"]["job_id"] == "101"
    fourth = ensure_present(backend, retried, **clock.args())
    assert fourth["changed"] is False and fourth["job"]["phase"] == "completed" and len(backend.submits) == 2


def test_check_mode_predicts_the_next_attempt_without_submitting():
    backend = FatedBackend([TIMEOUT])
    ensure_present(backend, spec(classes=["timeout"]), **Clock().args())
    predicted = ensure_present(backend, spec(classes=["timeout"]), check_mode=True, **Clock().args())
    assert predicted["changed"] is True and len(backend.submits) == 1
    assert predicted["job"]["identity"] == "run-1.1" and predicted["job"]["job_id"] is None


def test_absent_cancels_the_latest_attempt():
    backend = FatedBackend([TIMEOUT, RUNNING])
    retried = spec(classes=["timeout"])
    ensure_present(backend, retried, **Clock().args())
    ensure_present(backend, retried, **Clock().args())
    result = ensure_absent(backend, spec=retried)
    assert result["changed"] is True and backend.cancels == ["101"]
    by_identity = ensure_absent(backend, spec={"identity": "run-1", "name": None, "retry": {"limit": 2}})
    assert by_identity["changed"] is False and by_identity["job"]["phase"] == "cancelled"


def test_the_batch_looks_every_attempt_up_once_and_takes_one_step_each():
    backend = FatedBackend([TIMEOUT, EXIT_3, RUNNING])
    retried = spec(classes=["timeout"])
    other = normalize_spec({"script": "#!/bin/bash\ntrue\n", "identity": "run-2", "retry": {"limit": 1}})
    first = ensure_many_present(backend, [retried, other], wallclock=lambda: T0 + 1)
    assert [item["changed"] for item in first] == [True, True] and backend.lookups == 1
    second = ensure_many_present(backend, [retried, other], wallclock=lambda: T0 + 1)
    assert backend.lookups == 2
    # run-1 timed out: attempt 1 submitted; run-2 exited 3, not a class it retries.
    assert [item["changed"] for item in second] == [True, False]
    assert second[0]["job"]["identity"] == "run-1.1" and second[0]["job"]["reason"] == "submitted"
    assert [a["attempt"] for a in second[0]["job"]["attempts"]] == [0, 1]
    assert second[1]["job"]["phase"] == "failed" and "next_attempt" not in second[1]["job"]
    cancelled = ensure_many_absent(backend, ["run-1", "run-2"], limits={"run-1": 2})
    assert [item["changed"] for item in cancelled] == [True, False] and backend.cancels == ["102"]


# ------------------------------------------------------------------ Slurm's own requeue


@pytest.mark.parametrize("native, reason", [
    ({"job_state": ["PENDING"], "restart_cnt": 2, "state_reason": "BeginTime"}, "requeued by Slurm (2 restarts): BeginTime"),
    ({"job_state": ["PREEMPTED", "REQUEUED", "COMPLETING"], "restart_cnt": 0}, "requeued by Slurm (0 restarts)"),
    ({"job_state": "REQUEUED", "restart_cnt": 1, "state_reason": "None"}, "requeued by Slurm (1 restart)"),
])
def test_a_job_slurm_requeues_is_queued_not_failed(native, reason):
    from ansible_collections.bridge.hpc.plugins.module_utils.slurm.states import normalize_job

    job = normalize_job(dict(native, job_id=42))
    assert (job["phase"], job["terminal"], job["failure_class"], job["reason"]) == ("queued", False, None, reason)
    assert _retry.decide(spec(classes=["preempted"]), {"run-1": dict(job, identity="run-1")}, T0).action == _retry.WAIT


def test_a_running_job_after_a_requeue_is_running():
    from ansible_collections.bridge.hpc.plugins.module_utils.slurm.states import normalize_job

    job = normalize_job({"job_id": 42, "job_state": ["RUNNING"], "restart_cnt": 1, "state_reason": "None"})
    assert job["phase"] == "running" and job["reason"] is None


@pytest.mark.parametrize("job_state, failure_class", [
    (["OUT_OF_MEMORY"], "out_of_memory"),
    ("OUT_OF_MEMORY", "out_of_memory"),  # v0.0.38/39: a string
    (["TIMEOUT"], "timeout"),
    (["DEADLINE"], "timeout"),
    (["NODE_FAIL"], "node_failure"),
    (["BOOT_FAIL"], "node_failure"),
    (["PREEMPTED"], "preempted"),
    (["FAILED"], "non_zero_exit"),
])
def test_a_slurm_job_ended_by_its_manager_is_retried_only_for_its_own_class(job_state, failure_class):
    # The chroot clusters have no cgroup plugin, so Slurm never kills for memory there: this is where
    # OUT_OF_MEMORY meets the retry policy.
    from ansible_collections.bridge.hpc.plugins.module_utils.slurm.states import normalize_job

    job = dict(normalize_job({"job_id": 42, "job_state": job_state, "end_time": T0}), identity="run-1")
    assert (job["phase"], job["failure_class"]) == ("failed", failure_class)
    others = [name for name in RETRY_CLASSES if name != failure_class]
    assert _retry.decide(spec(classes=[failure_class]), {"run-1": job}, T0 + 1).action == _retry.SUBMIT
    assert _retry.decide(spec(classes=others), {"run-1": job}, T0 + 1).action == _retry.DONE
