"""A Slurm job that `scontrol requeue` puts back in the queue, on Slurm 22.05, 24.11 and 26.05: it
stays one attempt, queued with the reason "requeued by Slurm (1 restart)", and completes under its
own job id; no attempt .1 is submitted. A module of its own so that pytest-xdist's loadscope runs it
beside test_retries.py.
"""

import uuid

import pytest

from conftest import SLURM_VERSIONS, require_slurm
from test_controller_e2e import wait_for
from test_retries import attempts_of, base_args, failed, marker, scontrol, second_run_succeeds, slurm_client, slurm_job


@pytest.mark.parametrize("version", SLURM_VERSIONS)
def test_a_job_slurm_requeues_stays_queued_and_is_no_failed_attempt(version):
    values = require_slurm(version)
    identity = "retry-requeue-%s" % uuid.uuid4().hex[:8]
    args = base_args(identity, second_run_succeeds(marker("requeue"), "sleep 600"),
                     retry={"limit": 2, "classes": ["preempted", "node_failure", "non_zero_exit"]})
    submitted = slurm_job(version, **args)
    assert submitted["changed"] is True, submitted
    job_id = submitted["job_id"]
    client = slurm_client(values)
    try:
        wait_for(lambda: client.get(job_id), lambda job: job["phase"] == "running", timeout=120)
        requeued = scontrol(values, version, "requeue", job_id)
        assert requeued.returncode == 0, requeued.stdout + requeued.stderr
        queued = wait_for(lambda: client.get(job_id), lambda job: job["phase"] != "running", timeout=60, interval=0.5)
        assert queued["phase"] == "queued" and not queued["terminal"], queued
        assert queued["reason"].startswith("requeued by Slurm (1 restart)"), queued["reason"]
        # The task meanwhile: the same job, queued; no attempt .1.
        seen = slurm_job(version, **args)
        assert seen["changed"] is False and seen["job_id"] == job_id and seen["phase"] in ("queued", "running"), seen
        # Slurm holds a requeued batch job until its BeginTime, two minutes on; start it now.
        released = scontrol(values, version, "update", "JobId=%s" % job_id, "StartTime=now")
        assert released.returncode == 0, released.stdout + released.stderr
        done = slurm_job(version, timeout=200, **dict(args, wait=True, wait_timeout=150))
        assert not failed(done) and done["phase"] == "completed", done
        assert done["job_id"] == job_id and attempts_of(done) == [(0, identity, "completed", None)]
        assert client.find(identity + ".1") is None
        print("Slurm %s: job %s requeued (%s), then completed under the same id" % (version, job_id, queued["reason"]))
    finally:
        client.cancel(job_id)
        client.close()
