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
