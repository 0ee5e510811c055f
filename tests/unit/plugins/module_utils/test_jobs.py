from ansible_collections.bridge.hpc.plugins.module_utils._jobs import (
    ensure_absent,
    ensure_present,
    outcome,
)
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec

from fake_backend import FakeBackend

SPEC = normalize_spec({"script": "#!/bin/bash\ntrue\n", "name": "t"})
NO_SLEEP = dict(sleep=lambda s: None)


def test_present_submits_once_then_finds_the_same_job():
    backend = FakeBackend()
    first = ensure_present(backend, SPEC)
    second = ensure_present(backend, SPEC)
    assert first["changed"] is True and second["changed"] is False
    assert len(backend.submits) == 1
    assert first["job"]["job_id"] == second["job"]["job_id"]
    assert first["diff"]["before"] == {"state": "absent"}


def test_check_mode_predicts_without_submitting_but_still_validates():
    backend = FakeBackend()
    result = ensure_present(backend, SPEC, check_mode=True, wait=True)
    assert result["changed"] is True
    assert backend.submits == [] and backend.preflights == 1
    assert result["job"]["job_id"] is None and result["job"]["phase"] == "queued"


def test_wait_until_completed():
    backend = FakeBackend()
    result = ensure_present(backend, SPEC, wait=True, poll_interval=0.01, **NO_SLEEP)
    assert result["job"]["phase"] == "completed" and result["failed"] is False


def test_waited_failure_fails_the_task_with_the_exit_code():
    backend = FakeBackend(progression=("queued", "failed"), final={"exit_code": 3, "failure_class": "non_zero_exit"})
    result = ensure_present(backend, SPEC, wait=True, **NO_SLEEP)
    assert result["failed"] is True
    assert "exit code 3" in result["msg"] and "non_zero_exit" in result["msg"]


def test_wait_timeout_leaves_the_job_and_fails():
    backend = FakeBackend(progression=("queued", "running"))
    ticks = iter(range(0, 1000, 10))
    result = ensure_present(backend, SPEC, wait=True, wait_timeout=30, clock=lambda: next(ticks), **NO_SLEEP)
    assert result["failed"] is True and "after waiting 30 seconds" in result["msg"]
    assert backend.cancels == []


def test_hopeless_job_is_cancelled_and_reported_rejected():
    backend = FakeBackend(progression=("queued",))
    job_id = backend.submit(SPEC)
    backend.jobs[job_id].update(failure_class="rejected", reason="PartitionTimeLimit")
    plain_get = backend.get

    def get_pending_forever(jid):
        job = plain_get(jid)
        if job["phase"] == "queued":
            job.update(failure_class="rejected", reason="PartitionTimeLimit")
        return job

    backend.get = get_pending_forever
    result = ensure_present(backend, SPEC, wait=True, **NO_SLEEP)
    assert result["failed"] is True and "PartitionTimeLimit" in result["msg"]
    assert backend.cancels == [job_id]
    assert result["job"]["failure_class"] == "rejected" and result["job"]["phase"] == "failed"


def test_absent_cancels_a_running_job_once():
    backend = FakeBackend(progression=("running",))
    job_id = backend.submit(SPEC)
    first = ensure_absent(backend, identity=SPEC["identity"])
    second = ensure_absent(backend, identity=SPEC["identity"])
    assert first["changed"] is True and second["changed"] is False
    assert backend.cancels == [job_id]


def test_absent_in_check_mode_writes_nothing():
    backend = FakeBackend(progression=("running",))
    job_id = backend.submit(SPEC)
    result = ensure_absent(backend, job_id=job_id, check_mode=True)
    assert result["changed"] is True and backend.cancels == []
    assert result["diff"]["after"]["phase"] == "cancelled"


def test_absent_of_unknown_job_is_unchanged():
    assert ensure_absent(FakeBackend(), job_id=999)["changed"] is False


def test_outcome_of_signal():
    failed, msg = outcome({"job_id": 1, "phase": "failed", "failure_class": "timeout", "signal": 15, "exit_code": None}, False, 10)
    assert failed and "timeout" in msg and "signal 15" in msg


def batch(*names):
    return [normalize_spec({"script": "#!/bin/bash\ntrue\n", "identity": name}) for name in names]


def test_a_batch_is_looked_up_once_and_submits_only_what_is_missing():
    from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_many_present

    backend = FakeBackend()
    backend.submit(batch("b")[0])
    results = ensure_many_present(backend, batch("a", "b", "c"))
    assert [r["changed"] for r in results] == [True, False, True]
    assert backend.lookups == 1 and len(backend.submits) == 3
    assert results[0]["job"]["job_id"] is not None and results[0]["job"]["phase"] == "queued"


def test_one_refused_item_does_not_stop_the_batch():
    from ansible_collections.bridge.hpc.plugins.module_utils._errors import Rejected
    from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_many_present

    backend = FakeBackend()
    plain_submit = backend.submit

    def refuse_b(spec):
        if spec["identity"] == "b":
            raise Rejected("no", "submit", "job", "b", "Fake", "fake://")
        return plain_submit(spec)

    backend.submit = refuse_b
    results = ensure_many_present(backend, batch("a", "b", "c"))
    assert [r["failed"] for r in results] == [False, True, False]
    assert results[1]["error"]["type"] == "Rejected"


def test_batch_check_mode_submits_nothing():
    from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_many_present

    backend = FakeBackend()
    results = ensure_many_present(backend, batch("a", "b"), check_mode=True)
    assert all(r["changed"] for r in results) and backend.submits == []


def test_batch_cancel_waits_with_one_read_per_poll():
    from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_many_absent

    backend = FakeBackend(progression=("running",))
    for spec in batch("a", "b"):
        backend.submit(spec)
    results = ensure_many_absent(backend, ["a", "b", "gone"], wait=True, **NO_SLEEP)
    assert [r["changed"] for r in results] == [True, True, False]
    assert [r["job"]["phase"] for r in results[:2]] == ["cancelled", "cancelled"]
    assert results[2]["job"] is None
    again = ensure_many_absent(backend, ["a", "b"])
    assert not any(r["changed"] for r in again)
