"""spec.retry in the controller: attempts in status, Retrying between them, the backoff, no duplicate."""

from bridge_controller import results, retries
from bridge_controller.executor import Executor
from bridge_controller.plan import plan
from bridge_controller.status import desired_status

from ansible_collections.bridge.hpc.plugins.module_utils import _retry

from fake_backend import FatedBackend
from fakes import FakeKube, FakeRunner
from test_executor import RecordingQueue, bridgejob, settle

ENDED = "2026-12-04T00:00:00Z"
T0 = _retry.epoch(ENDED)
TIMEOUT = ("failed", {"failure_class": "timeout", "native_state": "TIMEOUT"})
EXIT_3 = ("failed", {"failure_class": "non_zero_exit", "exit_code": 3})
COMPLETED = ("completed", {})
RUNNING = ("running", {})


def setup(fates, wall=T0 + 1):
    kube = FakeKube(secrets={"ns/creds": {"user": "u", "token": "secret-token"}})
    backend = FatedBackend(fates)
    clock = {"wall": wall}
    runner = FakeRunner(backend, wallclock=lambda: clock["wall"])
    queue = RecordingQueue()
    executor = Executor(kube, kube, runner, queue, clock=lambda: 1000.0, wallclock=lambda: clock["wall"])
    kube.listeners.append(executor.observe)
    return kube, backend, queue, executor, clock


def retried(name="a", **retry):
    return bridgejob(name, retry=dict({"limit": 2, "classes": ["timeout"]}, **retry))


def conditions(obj):
    return dict((c["type"], c) for c in obj["status"]["conditions"])


def submitted(backend):
    return [spec["identity"] for spec in backend.submits]


def test_a_timed_out_attempt_is_retried_and_the_next_one_completes():
    kube, backend, queue, executor, _clock = setup([TIMEOUT, COMPLETED])
    kube.create(retried())
    settle(executor, queue)
    obj = kube.objects["ns/a"]
    assert [entry["attempt"] for entry in obj["status"]["attempts"]] == [0]
    executor.poll_due(now=2000.0)
    obj = kube.objects["ns/a"]
    status = obj["status"]
    assert status["phase"] == "Queued" and status["nextAttempt"]["identity"] == "uid-a.1"
    assert conditions(obj)["Failed"]["status"] == "False" and conditions(obj)["Failed"]["reason"] == "Retrying"
    assert "attempt 0 (job 100) failed (timeout); attempt 1 (uid-a.1) is due at" in status["message"]
    assert status["attempts"][0] == {"attempt": 0, "identity": "uid-a", "jobId": "100", "phase": "Failed",
                                     "failureClass": "timeout", "submitTime": "2026-12-01T00:00:40Z",
                                     "endTime": ENDED}
    assert plan(obj) == ("retry",)
    settle(executor, queue)
    status = kube.objects["ns/a"]["status"]
    assert submitted(backend) == ["uid-a", "uid-a.1"]
    assert status["jobId"] == "101" and "nextAttempt" not in status and status["message"] == "attempt 1 submitted"
    executor.poll_due(now=3000.0)
    status = kube.objects["ns/a"]["status"]
    assert status["phase"] == "Completed" and [entry["phase"] for entry in status["attempts"]] == ["Failed", "Completed"]
    assert executor.runner.calls[-1][0] == "poll"


def test_a_class_that_is_not_retried_fails_the_job():
    kube, backend, queue, executor, _clock = setup([EXIT_3, COMPLETED])
    kube.create(retried())
    settle(executor, queue)
    executor.poll_due(now=2000.0)
    obj = kube.objects["ns/a"]
    assert obj["status"]["phase"] == "Failed" and "nextAttempt" not in obj["status"]
    assert conditions(obj)["Failed"]["reason"] == "non_zero_exit" and submitted(backend) == ["uid-a"]


def test_the_backoff_plans_the_cr_again_when_it_has_passed():
    kube, backend, queue, executor, clock = setup([TIMEOUT, COMPLETED])
    kube.create(retried(backoffSeconds=600))
    settle(executor, queue)
    executor.poll_due(now=2000.0)
    settle(executor, queue)
    assert submitted(backend) == ["uid-a"], "not before the backoff"
    assert kube.objects["ns/a"]["status"]["nextAttempt"]["notBefore"] == "2026-12-04T00:10:00Z"
    assert queue.later and queue.later[-1][0] == "ns/a" and queue.later[-1][1] == 599
    clock["wall"] = T0 + 600
    queue.add("ns/a")
    settle(executor, queue)
    assert submitted(backend) == ["uid-a", "uid-a.1"]


def test_a_controller_killed_during_the_backoff_submits_the_next_attempt_once():
    kube, backend, queue, executor, clock = setup([TIMEOUT, RUNNING])
    kube.create(retried(backoffSeconds=600))
    settle(executor, queue)
    executor.poll_due(now=2000.0)
    clock["wall"] = T0 + 600
    # The old controller submitted attempt 1 and died before writing its status.
    job = {"identity": "uid-a", "script": "#!/bin/bash\necho a\n", "name": "a", "retry": {"limit": 2, "classes": ["timeout"]}}
    executor.runner.run("submit", {"type": "slurm"}, {}, jobs=[job])
    assert submitted(backend) == ["uid-a", "uid-a.1"]
    fresh_queue = RecordingQueue()
    fresh = Executor(kube, kube, FakeRunner(backend, wallclock=lambda: clock["wall"]), fresh_queue, clock=lambda: 1000.0,
                     wallclock=lambda: clock["wall"])
    kube.listeners.append(fresh.observe)
    for key in kube.keys():
        fresh_queue.add(key)
    settle(fresh, fresh_queue)
    status = kube.objects["ns/a"]["status"]
    assert submitted(backend) == ["uid-a", "uid-a.1"], "the attempt found by its identity, not submitted again"
    assert status["jobId"] == "101" and "nextAttempt" not in status
    fresh.poll_due(now=2000.0)
    assert kube.objects["ns/a"]["status"]["phase"] == "Running"


def test_cancel_during_the_backoff_cancels_the_job_and_no_attempt_follows():
    kube, backend, queue, executor, clock = setup([TIMEOUT, COMPLETED])
    kube.create(retried(backoffSeconds=600))
    settle(executor, queue)
    executor.poll_due(now=2000.0)
    kube.update_spec("ns/a", cancel=True)
    settle(executor, queue)
    status = kube.objects["ns/a"]["status"]
    assert status["phase"] == "Cancelled" and "nextAttempt" not in status
    assert "waited for its backoff" in status["reason"]
    clock["wall"] = T0 + 600
    queue.add("ns/a")
    settle(executor, queue)
    assert submitted(backend) == ["uid-a"]


def test_cancel_cancels_the_latest_attempt():
    kube, backend, queue, executor, _clock = setup([TIMEOUT, RUNNING])
    kube.create(retried())
    settle(executor, queue)
    executor.poll_due(now=2000.0)
    settle(executor, queue)
    kube.update_spec("ns/a", cancel=True)
    settle(executor, queue)
    assert backend.cancels == ["101"] and kube.objects["ns/a"]["status"]["phase"] == "Cancelled"


def test_status_attempts_keep_the_latest_twenty():
    records = [_retry.record(attempt, {"job_id": str(attempt), "phase": "failed"}) for attempt in range(30)]
    job = {"job_id": "29", "phase": "failed", "terminal": True, "failure_class": "timeout", "attempts": records}
    obj = retried()
    obj["spec"]["retry"]["limit"] = 40
    outcome = retries.observed(obj, "submit", results.Outcome({"job": job}, results.DONE), T0)
    assert [entry["attempt"] for entry in outcome.observed["attempts"]] == list(range(10, 30))
    status = desired_status({}, 1, now="2026-12-04T00:00:00Z", **outcome.observed)
    assert status["phase"] == "Failed" and len(status["attempts"]) == 20


def test_a_cr_without_retry_has_no_attempts():
    kube, backend, queue, executor, _clock = setup([COMPLETED])
    kube.create(bridgejob("plain"))
    settle(executor, queue)
    executor.poll_due(now=2000.0)
    status = kube.objects["ns/plain"]["status"]
    assert status["phase"] == "Completed" and "attempts" not in status and "nextAttempt" not in status


def test_an_arrays_record_across_attempts_fits_the_crd_status_schema():
    import os

    import yaml

    from ansible_collections.bridge.hpc.plugins.module_utils._arrays import array_job
    from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec
    from bridge_controller.status import array_status

    spec = normalize_spec({"script": "#!/bin/sh\n", "identity": "sweep", "array": {"indexes": "0-9"},
                           "retry": {"limit": 1, "classes": ["non_zero_exit", "timeout"]}})
    tasks = dict((index, {"phase": "completed", "exit_code": 0}) for index in range(10))
    tasks[3] = {"phase": "failed", "failure_class": "non_zero_exit", "exit_code": 3, "end_time": ENDED}
    first = array_job({"job_id": "5", "identity": "sweep"}, tasks, tuple(range(10)))
    second = array_job({"job_id": "6", "identity": "sweep.1"}, {3: {"phase": "failed", "failure_class": "timeout"}}, (3,))
    found = {"sweep": first, "sweep.1": second}
    job = _retry.with_attempts(spec, found, second, _retry.decide(spec, found, T0 + 1))
    status = array_status(job["array"])
    assert status["retriedIndexes"] == "3" and status["failures"] == [{"index": 3, "exitCode": None, "failureClass": "timeout",
                                                                       "attempt": 1}]
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    with open(os.path.join(repo, "deploy", "crd.yaml")) as handle:
        crd = yaml.safe_load(handle)
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["array"]
    assert set(status) <= set(schema["properties"]), set(status) - set(schema["properties"])
    assert set(status["failures"][0]) <= set(schema["properties"]["failures"]["items"]["properties"])
    attempts = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["attempts"]
    records = [dict(record, attempt=attempt) for attempt, record in enumerate(job["attempts"] * 15)]
    entries = [retries.status_entry(record) for record in retries.trimmed(records)]
    for entry in entries:
        assert set(entry) <= set(attempts["items"]["properties"]), set(entry) - set(attempts["items"]["properties"])
        assert all(set(failure) <= set(attempts["items"]["properties"]["failures"]["items"]["properties"])
                   for failure in entry["failures"])
    assert "retriedIndexes" in entries[0] and "attempt" in entries[0]["failures"][0]


def array_fate(indexes, failing=(), running=(), timed_out=()):
    """The fate of an array attempt running `indexes`: `failing` exit 3, `timed_out` time out,
    `running` still run, the others completed (a FatedBackend fate from _arrays.array_job's record)."""
    from ansible_collections.bridge.hpc.plugins.module_utils._arrays import array_job

    tasks = dict((index, {"phase": "completed", "exit_code": 0, "end_time": ENDED}) for index in indexes)
    for index in running:
        tasks[index] = {"phase": "running", "start_time": ENDED}
    for index in failing:
        tasks[index] = {"phase": "failed", "failure_class": "non_zero_exit", "exit_code": 3, "end_time": ENDED}
    for index in timed_out:
        tasks[index] = {"phase": "failed", "failure_class": "timeout", "end_time": ENDED}
    job = array_job({}, tasks, tuple(indexes))
    return job["phase"], dict((key, job.get(key)) for key in ("array", "exit_code", "failure_class", "reason", "end_time"))


def array_retried(limit=1):
    return bridgejob("a", array={"indexes": "0-99"}, retry={"limit": limit, "classes": ["non_zero_exit"]})


def test_a_poll_of_a_retried_arrays_attempt_counts_every_index_of_the_array():
    kube, backend, queue, executor, _clock = setup([array_fate(range(100), failing=(13, 42, 77)),
                                                    array_fate((13, 42, 77), running=(13, 42, 77))])
    kube.create(array_retried())
    settle(executor, queue)
    executor.poll_due(now=2000.0)
    status = kube.objects["ns/a"]["status"]
    assert status["array"]["counts"] == {"queued": 0, "running": 0, "completed": 97, "failed": 3, "cancelled": 0}
    assert status["nextAttempt"]["identity"] == "uid-a.1"
    settle(executor, queue)
    assert submitted(backend) == ["uid-a", "uid-a.1"] and backend.submits[1]["array"]["text"] == "13,42,77"
    executor.poll_due(now=3000.0)
    status = kube.objects["ns/a"]["status"]
    # Attempt 1 runs the three failed indexes again: the other 97 stay completed.
    assert (status["phase"], status["jobId"]) == ("Running", "101")
    array = status["array"]
    assert (array["indexes"], array["size"], array["failedIndexes"], array["retriedIndexes"]) == ("0-99", 100, "", "13,42,77")
    assert array["counts"] == {"queued": 0, "running": 3, "completed": 97, "failed": 0, "cancelled": 0}
    assert array["failures"] == []
    assert [(entry["attempt"], entry["indexes"], entry["failedIndexes"]) for entry in status["attempts"]] == [
        (0, "0-99", "13,42,77"), (1, "13,42,77", "")]
    # Attempt 1 ends with index 42 failing again, the last attempt allowed.
    phase, extra = array_fate((13, 42, 77), failing=(42,))
    backend.jobs["101"] = backend._job("101", "uid-a.1", phase, fated=True, **extra)
    executor.poll_due(now=4000.0)
    status = kube.objects["ns/a"]["status"]
    assert (status["phase"], status["failureClass"], status["exitCode"]) == ("Failed", "non_zero_exit", 3)
    assert "nextAttempt" not in status
    array = status["array"]
    assert array["counts"] == {"queued": 0, "running": 0, "completed": 99, "failed": 1, "cancelled": 0}
    assert (array["failedIndexes"], array["retriedIndexes"]) == ("42", "13,42,77")
    assert array["failures"] == [{"index": 42, "attempt": 1, "exitCode": 3, "failureClass": "non_zero_exit"}]


def test_an_attempts_status_entry_gives_back_its_record():
    _phase, extra = array_fate(range(10), failing=(3,))
    array_record = _retry.record(0, dict(extra, job_id="5", identity="uid-a", phase="failed"))
    plain = _retry.record(1, {"job_id": "6", "identity": "uid-a.1", "phase": "running"})
    for record in (array_record, plain):
        assert retries.attempt_record(retries.status_entry(record)) == record
    entry = retries.status_entry(array_record)
    assert entry["failures"] == [{"index": 3, "exitCode": 3, "failureClass": "non_zero_exit"}]
    assert (entry["indexes"], entry["failedIndexes"], entry["counts"]["completed"]) == ("0-9", "3", 9)


def test_an_ended_attempt_keeps_its_entry_over_what_a_later_lookup_finds():
    # Polled live, attempt 0's failure has its exit code; the submit batch's lookup of attempt 1
    # finds attempt 0 in accounting, which on Slurm 22.05 reports none.
    _phase, extra = array_fate(range(10), failing=(3,))
    seen = _retry.record(0, dict(extra, job_id="5", identity="uid-a", phase="failed"))
    found = dict(seen, exit_code=None, failures=[dict(seen["failures"][0], exit_code=None)])
    queued = _retry.record(1, {"job_id": "6", "identity": "uid-a.1", "phase": "queued"})
    obj = array_retried()
    obj["status"] = {"attempts": [retries.status_entry(seen)]}
    assert retries.known_records(obj, [found, queued]) == [seen, queued]
    # An entry without an array's fields (a controller that kept none) gives way to the lookup's.
    obj["status"] = {"attempts": [retries.status_entry(dict((key, seen[key]) for key in _retry.ATTEMPT_KEYS + ("attempt",)))]}
    assert retries.known_records(obj, [found, queued]) == [found, queued]


def test_the_oldest_entry_kept_of_an_array_stands_for_the_attempts_dropped():
    # Attempt 0 of 100 tasks fails 0-9; attempt 1 runs them again and 9 fails; attempts 2 to 29 run 9 alone.
    records = [_retry.record(0, dict(array_fate(range(100), failing=range(10))[1], phase="failed")),
               _retry.record(1, dict(array_fate(range(10), failing=(9,))[1], phase="failed"))]
    records += [_retry.record(attempt, dict(array_fate((9,), failing=(9,))[1], phase="failed")) for attempt in range(2, 30)]
    kept = retries.trimmed(records)
    assert [record["attempt"] for record in kept] == list(range(10, 30))
    assert (kept[0]["indexes"], kept[0]["retried_indexes"], kept[1]["indexes"]) == ("0-99", "0-9", "9")
    whole = _retry.merged_array(records, {"parallelism": None})
    assert _retry.merged_array(kept, {"parallelism": None}) == whole
    assert whole["counts"] == {"queued": 0, "running": 0, "completed": 99, "failed": 1, "cancelled": 0}
    assert (whole["failed_indexes"], whole["retried_indexes"], whole["failures"][0]["attempt"]) == ("9", "0-9", 29)


def test_an_array_whose_first_attempt_left_a_failure_not_retried_fails_when_its_last_completes():
    kube, backend, queue, executor, _clock = setup([array_fate(range(10), failing=(7,), timed_out=(3,)), array_fate((3,))])
    kube.create(bridgejob("a", array={"indexes": "0-9"}, retry={"limit": 1, "classes": ["timeout"]}))
    settle(executor, queue)
    executor.poll_due(now=2000.0)
    settle(executor, queue)
    assert backend.submits[1]["array"]["text"] == "3"
    executor.poll_due(now=3000.0)
    status = kube.objects["ns/a"]["status"]
    # Index 7 (exit 3, a class that is not retried) never ran again: the array failed, as the modules say.
    assert (status["phase"], status["failureClass"], status["exitCode"]) == ("Failed", "non_zero_exit", 3)
    assert "indexes 7 of attempt 0" in status["reason"]
    assert status["array"]["counts"] == {"queued": 0, "running": 0, "completed": 9, "failed": 1, "cancelled": 0}
    assert status["array"]["failures"] == [{"index": 7, "attempt": 0, "exitCode": 3, "failureClass": "non_zero_exit"}]
