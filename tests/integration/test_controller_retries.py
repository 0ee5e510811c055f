"""spec.retry end to end: real kube-apiserver, real Slurm 22.05, the controller as a process (logged
in as its ServiceAccount, with leader election, as deployed; test_controller_chaos.py's harness).

A BridgeJob whose first run exits 3 and whose second completes, retried on non_zero_exit after a
backoff: between the attempts it is Queued with Failed False (reason Retrying) and
status.nextAttempt; the controller is SIGKILLed (with everything it started) during the backoff
and started again after it, and Slurm then holds exactly one job per attempt identity.
"""

import time
import uuid

import pytest

from test_controller_chaos import account, assert_no_token, condition, make_setup, phase_of, slurm_client  # noqa: F401 pylint: disable=unused-import
from test_controller_e2e import kube, wait_for  # noqa: F401 pylint: disable=unused-import

BACKOFF = 20


@pytest.fixture()
def setup(kube, account, tmp_path):  # pylint: disable=redefined-outer-name
    yield from make_setup(kube, account, tmp_path, "22.05")


def jobs_of(ctx, identity):
    return [job for job in slurm_client(ctx.slurm).list() if job["identity"] == identity]


def test_a_controller_killed_during_the_backoff_submits_the_next_attempt_once(setup):
    ctx = setup
    marker = "/tmp/bridge-retry-cr-%s" % uuid.uuid4().hex[:10]
    script = "#!/bin/bash\nif [ -e %s ]; then echo again; exit 0; fi\ntouch %s\nexit 3\n" % (marker, marker)
    created = ctx.create("flaky", script, workingDirectory="/tmp", stdout="/dev/null",
                         retry={"limit": 2, "classes": ["non_zero_exit"], "backoffSeconds": BACKOFF})
    uid = created["metadata"]["uid"]
    ctx.controller.start()
    waiting = wait_for(lambda: ctx.read("flaky"), lambda o: (o.get("status") or {}).get("nextAttempt"), timeout=180,
                       interval=0.5)
    status = waiting["status"]
    assert status["phase"] == "Queued" and condition(waiting, "Failed") == "False", status
    assert [c["reason"] for c in status["conditions"] if c["type"] == "Failed"] == ["Retrying"]
    assert status["nextAttempt"]["attempt"] == 1 and status["nextAttempt"]["identity"] == uid + ".1"
    assert [(a["attempt"], a["phase"], a.get("failureClass"), a.get("exitCode")) for a in status["attempts"]] == [
        (0, "Failed", "non_zero_exit", 3)]
    killed = ctx.controller.kill()
    assert not jobs_of(ctx, uid + ".1"), "attempt 1 was submitted before its backoff passed"
    # Started again once the backoff has passed while it was down.
    time.sleep(BACKOFF + 2)
    ctx.controller.start()
    done = wait_for(lambda: ctx.read("flaky"), lambda o: phase_of(o) == "Completed", timeout=180)
    status = done["status"]
    assert "nextAttempt" not in status and condition(done, "Failed") == "False"
    assert [(a["attempt"], a["identity"], a["phase"]) for a in status["attempts"]] == [
        (0, uid, "Failed"), (1, uid + ".1", "Completed")]
    assert [job["job_id"] for job in jobs_of(ctx, uid + ".1")] == [status["jobId"]]
    assert len(jobs_of(ctx, uid)) == 1
    print("attempt 0 failed (exit 3), controller killed during the %d s backoff (%d processes), attempt 1 (job %s) "
          "submitted once by the restarted controller" % (BACKOFF, killed, status["jobId"]))
    assert_no_token(ctx)
