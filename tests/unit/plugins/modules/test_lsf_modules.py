"""The LSF modules, in-process, with the real client against the LSF PAC SIMULATOR.

tests/simulators/lsf_pac.py, not a real Application Center: these show the modules and the
client work together over HTTP (check mode reads the queues and submits nothing, apply, apply
again, info filters, cluster info), not that real PAC answers so.
"""

import time

import pytest

from ansible_collections.bridge.hpc.plugins.modules import lsf_cluster_info, lsf_job, lsf_job_info

from module_runner import Fail, run

pytestmark = pytest.mark.usefixtures("capture")
SCRIPT = "#!/bin/bash\necho hi\n"


@pytest.fixture
def connection(lsf_pac):
    return {"url": lsf_pac["url"], "user": lsf_pac["user"], "password": lsf_pac["password"], "retries": 0}


def submitted(lsf_pac):
    return sorted(lsf_pac["simulator"].cluster.jobs)


def test_check_mode_validates_against_the_queues_and_submits_nothing(lsf_pac, connection):
    before = submitted(lsf_pac)
    outcome = run(lsf_job, dict(connection, script=SCRIPT, identity="m-check", queue="short"), check_mode=True,
                  diff=True)
    assert not isinstance(outcome, Fail), outcome.result
    assert outcome.result["changed"] is True and outcome.result["job_id"] is None
    assert outcome.result["rendered"]["bsub"].startswith("bsub -J m-check")
    refused = run(lsf_job, dict(connection, script=SCRIPT, identity="m-check", queue="short",
                                resources={"time_limit": 5}), check_mode=True)
    assert isinstance(refused, Fail) and refused.result["error"]["field"] == "resources.time_limit"
    assert submitted(lsf_pac) == before
    assert connection["password"] not in repr(outcome.result) + repr(refused.result)


def test_apply_then_apply_again_is_unchanged_and_waits_for_the_exit_code(connection):
    args = dict(connection, script="#!/bin/bash\nexit 3\n", identity="m-apply", wait=True, poll_interval=0.1,
                wait_timeout=20)
    first = run(lsf_job, args)
    assert isinstance(first, Fail) and first.result["changed"] is True
    assert (first.result["phase"], first.result["exit_code"], first.result["failure_class"]) == (
        "failed", 3, "non_zero_exit")
    assert isinstance(first.result["job_id"], str)
    again = run(lsf_job, dict(args, wait=False))
    assert again.result["changed"] is False and again.result["job_id"] == first.result["job_id"]


def test_absent_kills_a_running_job(connection):
    run(lsf_job, dict(connection, script="#!/bin/bash\nsleep 60\n", identity="m-kill"))
    outcome = run(lsf_job, dict(connection, identity="m-kill", state="absent", wait=True, poll_interval=0.1))
    assert outcome.result["changed"] is True and outcome.result["failure_class"] == "cancelled"
    assert run(lsf_job, dict(connection, identity="m-kill", state="absent")).result["changed"] is False


def test_job_info_reads_one_job_and_filters_the_list(connection):
    job_id = run(lsf_job, dict(connection, script=SCRIPT, identity="m-info", queue="short")).result["job_id"]
    one = run(lsf_job_info, dict(connection, job_id=job_id)).result
    assert one["job"]["identity"] == "m-info" and "native" not in one["job"]
    assert run(lsf_job_info, dict(connection, identity="m-nosuch")).result["job"] is None
    in_short = run(lsf_job_info, dict(connection, queue="short", include_native=True)).result["jobs"]
    assert job_id in [job["job_id"] for job in in_short]
    assert all(job["queue"] == "short" and job["native"] for job in in_short)
    deadline = time.monotonic() + 20
    while run(lsf_job_info, dict(connection, job_id=job_id)).result["job"]["phase"] != "completed":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    completed = run(lsf_job_info, dict(connection, name="m-info", phases=["completed"])).result["jobs"]
    assert [job["job_id"] for job in completed] == [job_id]


def test_cluster_info_gathers_queues_and_hosts(connection):
    result = run(lsf_cluster_info, connection).result
    assert {"normal", "short", "closed"} <= set(queue["name"] for queue in result["queues"])
    assert result["hosts"] and "native" not in result["hosts"][0]
    only_queues = run(lsf_cluster_info, dict(connection, gather=["queues"])).result
    assert "hosts" not in only_queues


def test_a_wrong_password_fails_typed_without_echoing_it(connection):
    outcome = run(lsf_cluster_info, dict(connection, password="wr0ng-password"))
    assert isinstance(outcome, Fail) and outcome.result["error"]["type"] == "AuthFailed"
    assert "wr0ng-password" not in repr(outcome.result)
