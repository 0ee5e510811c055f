"""The status writer against an in-memory apiserver: a status computed from a stale CR never
overwrites a newer one, and a write without a conflict costs one request."""

import collections

import pytest

from bridge_controller.kube import Conflict
from bridge_controller.writer import STATUS_ATTEMPTS, Writer

from fakes import FakeKube

RUNNING = {"job_id": 7, "phase": "running", "native_state": "RUNNING"}
QUEUED = dict(RUNNING, phase="queued", native_state="PENDING")
SLURMRESTD_DOWN = {"reachable": False, "backend_error": {"type": "ConnectionFailed", "message": "Connection refused"}}


def bridgejob(name="a"):
    return {"metadata": {"name": name, "namespace": "ns", "uid": "uid-" + name, "generation": 1, "finalizers": []},
            "spec": {}}


def setup():
    kube = FakeKube()
    stats = collections.Counter()
    writer = Writer(kube, lambda: True, lambda name, amount=1: stats.update({name: amount}))
    return kube, writer, stats


def queued_then_running(kube, writer):
    """The CR as the watch's cache may still hold it (Queued) after the write that made it Running."""
    stale = writer.status(kube.create(bridgejob()), job=QUEUED, reachable=True, submitted=True)
    writer.status(stale, job=RUNNING, reachable=True)
    assert kube.objects["ns/a"]["status"]["phase"] == "Running"
    return stale


def conditions(obj):
    return dict((c["type"], c) for c in obj["status"]["conditions"])


def test_a_status_computed_from_a_stale_cr_keeps_the_newer_phase():
    # The chaos test's regression: slurmrestd down, the poll's status (BackendReachable False)
    # computed from a cache that still said Queued was merged over Running.
    kube, writer, stats = setup()
    stale = queued_then_running(kube, writer)
    patches, events = kube.status_patches, len(kube.events)
    written = writer.status(stale, **SLURMRESTD_DOWN)
    stored = kube.objects["ns/a"]
    assert stored["status"]["phase"] == "Running" and written["status"]["phase"] == "Running"
    assert conditions(stored)["BackendReachable"]["status"] == "False", "the observation is still written"
    assert conditions(stored)["Running"]["status"] == "True"
    assert (stats["status_conflicts"], kube.reads, kube.status_patches - patches) == (1, 1, 2)
    assert written["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert len(kube.events) == events, "no phase changed, so no event (judged from the stored CR)"


def test_a_stale_write_that_the_stored_status_already_holds_is_not_written():
    kube, writer, stats = setup()
    stale = queued_then_running(kube, writer)
    patches = kube.status_patches
    assert writer.status(stale, job=RUNNING, reachable=True) is None
    assert (stats["status_conflicts"], stats["status_noops"], kube.status_patches - patches) == (1, 1, 1)


def test_a_write_without_a_conflict_makes_one_request_and_reads_nothing():
    kube, writer, stats = setup()
    created = kube.create(bridgejob())
    written = writer.status(created, job=QUEUED, reachable=True, submitted=True)
    writer.status(written, job=RUNNING, reachable=True)
    assert (kube.status_patches, kube.reads, stats["status_conflicts"]) == (2, 0, 0)


@pytest.mark.parametrize("recreated", [False, True], ids=["deleted", "deleted and created anew"])
def test_a_cr_gone_since_it_was_read_gets_no_status(recreated):
    kube, writer, _stats = setup()
    stale = kube.create(bridgejob())
    del kube.objects["ns/a"]
    if recreated:
        kube.create(dict(bridgejob(), metadata=dict(bridgejob()["metadata"], uid="uid-other")))
    assert writer.status(stale, job=RUNNING, reachable=True) is None
    assert "status" not in kube.objects.get("ns/a", {}), "another CR's job is not written into the new one"


def test_a_cr_that_keeps_changing_is_tried_a_bounded_number_of_times():
    kube, writer, stats = setup()
    kube.create(bridgejob())
    patch = kube.patch_status

    def changed_meanwhile(obj, status):
        kube.update_spec("ns/a", pollInterval=kube.status_patches + 5)
        return patch(obj, status)

    kube.patch_status = changed_meanwhile
    with pytest.raises(Conflict):
        writer.status(kube.get("ns/a"), job=RUNNING, reachable=True)
    assert stats["status_conflicts"] == STATUS_ATTEMPTS and kube.reads == STATUS_ATTEMPTS - 1


def test_a_submitted_message_does_not_outlive_its_phase_and_each_phase_change_is_logged(caplog):
    # A user saw a Completed BridgeJob still saying "submitted", and nothing about it in the log.
    kube, writer, _stats = setup()
    completed = dict(RUNNING, phase="completed", native_state="COMPLETED", exit_code=0)
    with caplog.at_level("INFO", logger="bridge_controller.writer"):
        obj = writer.status(kube.create(bridgejob()), job=dict(QUEUED, reason="submitted"), reachable=True,
                            submitted=True, message="submitted")
        assert obj["status"]["message"] == "submitted"
        writer.status(kube.objects["ns/a"], job=dict(QUEUED, reason=None), reachable=True)
        assert kube.objects["ns/a"]["status"]["message"] == "submitted", "the same phase keeps it"
        obj = writer.status(kube.objects["ns/a"], job=completed, reachable=True)
    assert obj["status"]["phase"] == "Completed" and "message" not in obj["status"]
    lines = [record.getMessage() for record in caplog.records]
    assert lines == ["BridgeJob ns/a: new -> Queued (job 7): submitted", "BridgeJob ns/a: Queued -> Completed (job 7)"]
