"""Job arrays on real Slurm 22.05, 24.11 and 26.05: `bridge.hpc.slurm_job` (as `ansible localhost -m`
with the cluster's env file) submits 100 tasks that run 8 at a time; tasks 13, 42 and 77 exit 3,
each task checks that BRIDGE_ARRAY_INDEX is its SLURM_ARRAY_TASK_ID (else it exits 9). The array ends
failed with failed_indexes "13,42,77", every poll of it is one request whatever its 100 tasks, the
module run again finds it by its identity, and accounting folds its tasks the same way. Where
slurmrestd serves slurm.conf (26.05), an index at MaxArraySize is refused before anything is sent.
"""

import json
import sys
import time
import uuid

import pytest

from conftest import COLLECTIONS, RUN, adhoc_with_env_file, require_slurm

sys.path.insert(0, COLLECTIONS)

# Exit 3 on the three failing indexes, 9 when the wrapper did not hand the task its index.
SCRIPT = """#!/bin/bash
[ "$BRIDGE_ARRAY_INDEX" = "$SLURM_ARRAY_TASK_ID" ] || exit 9
case $BRIDGE_ARRAY_INDEX in 13|42|77) exit 3 ;; esac
exit 0
"""
# A test's jobs wait for the others' on this 2-CPU node; 100 short tasks end well within this.
TIMEOUT = 600


def client_of(values, **options):
    from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient

    return SlurmClient(values["SLURM_URL"], user=values.get("SLURM_USER"), token=values.get("SLURM_JWT"), **options)


def slurm_job(version, **args):
    """The module's result (`ansible localhost -m bridge.hpc.slurm_job`), asserting it succeeded."""
    done = adhoc_with_env_file("%s/slurm-%s/env" % (RUN, version), "bridge.hpc.slurm_job", "-a", json.dumps(args))
    head, _sep, body = done.stdout.partition(" => ")
    assert done.returncode == 0 and ("CHANGED" in head or "SUCCESS" in head), done.stdout + done.stderr
    return json.loads(body)


@pytest.mark.parametrize("version", ["22.05", "24.11", "26.05"])
def test_a_100_task_array_with_three_failing_tasks_is_one_failed_job(version):
    values = require_slurm(version)
    identity = "arr-%s" % uuid.uuid4().hex[:8]
    args = dict(identity=identity, script=SCRIPT, stdout="/dev/null", queue="debug",
                resources={"time_limit": 1, "memory": "64M"}, array={"indexes": "0-99", "parallelism": 8})
    submitted = slurm_job(version, **args)
    assert submitted["changed"] is True, submitted
    job_id = submitted["job_id"]
    rendered = submitted["rendered"]["job"]
    assert rendered["array"] == "0-99%8" and rendered["comment"] == "bridge:%s array=0-99" % identity
    script = submitted["rendered"].get("script") or rendered["script"]
    assert script.startswith("#!/bin/sh\n") and SCRIPT in script

    client = client_of(values)
    try:
        # The REST version and whether accounting answers are asked once per client, not per poll.
        client.api_version
        client.accounting_available()
        polls, started, deadline = 0, time.monotonic(), time.monotonic() + TIMEOUT
        while True:
            sent = client.requests_sent
            job = client.get(job_id)
            assert client.requests_sent - sent == 1, "a poll of the array took %d requests" % (client.requests_sent - sent)
            sent = client.requests_sent
            listed = client.poll_many([identity])[identity]
            assert client.requests_sent - sent == 1
            assert listed["job_id"] == job_id and listed["array"]["size"] == 100
            polls += 1
            if job["terminal"]:
                break
            assert job["phase"] in ("queued", "running"), job
            assert job["array"]["counts"]["running"] <= 8, job["array"]
            assert time.monotonic() < deadline, "array %s still %s: %s" % (job_id, job["phase"], job["array"]["counts"])
            time.sleep(1)
        assert job["phase"] == "failed" and job["exit_code"] == 3 and job["failure_class"] == "non_zero_exit", job
        array = job["array"]
        assert array["failed_indexes"] == "13,42,77" and array["indexes"] == "0-99" and array["parallelism"] == 8
        assert array["counts"] == {"queued": 0, "running": 0, "completed": 97, "failed": 3, "cancelled": 0}
        assert [f["exit_code"] for f in array["failures"]] == [3, 3, 3]
        print("Slurm %s: 100-task array %s (parallelism 8) ended after %.1f s, %d polls of 1 request each" % (
            version, job_id, time.monotonic() - started, polls))

        again = slurm_job(version, **args)
        assert again["changed"] is False and again["job_id"] == job_id and again["job"]["phase"] == "failed"
        assert again["job"]["array"]["failed_indexes"] == "13,42,77"

        if values.get("SLURM_ACCOUNTING") == "1":
            recorded = recorded_array(client, job_id)
            assert recorded["phase"] == "failed" and recorded["array"]["failed_indexes"] == "13,42,77", recorded["array"]
            assert recorded["array"]["counts"]["completed"] == 97 and recorded["identity"] == identity
    finally:
        client.close()


def recorded_array(client, job_id, timeout=60):
    """The array as accounting has it, once accounting has every task's end (it learns of them a
    moment after slurmctld)."""
    deadline = time.monotonic() + timeout
    while True:
        job = client.recorded_job(job_id)
        if job["terminal"]:
            return job
        assert time.monotonic() < deadline, "accounting has not recorded the end of array %s: %s" % (
            job_id, job["array"]["counts"])
        time.sleep(1)


@pytest.mark.parametrize("version", ["22.05", "24.11", "26.05"])
def test_max_array_size_is_checked_where_slurmrestd_serves_slurm_conf(version):
    from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
    from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec

    values = require_slurm(version)
    client = client_of(values)

    def spec(indexes):
        return normalize_spec({"script": SCRIPT, "queue": "debug", "array": {"indexes": indexes}})

    try:
        client.check(spec("0-1000"))
        if version == "26.05":
            # slurm.conf of tools/slurm-cluster.sh keeps Slurm's default MaxArraySize, 1001.
            with pytest.raises(SpecError) as err:
                client.check(spec("5,1001"))
            assert err.value.field == "array.indexes" and "MaxArraySize is 1001" in str(err.value)
        else:
            client.check(spec("5,1001"))
    finally:
        client.close()
