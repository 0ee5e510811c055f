"""Slurm job arrays: the submit body (array, comment, the /bin/sh wrapper that sets
BRIDGE_ARRAY_INDEX), one job folded from the records slurmctld and accounting keep per task, one
request per poll whatever the array's size, and MaxArraySize where slurmrestd serves slurm.conf.

Records follow the shapes of tests/unit/fixtures/slurm (array_job_id, array_task_id,
array_task_string of slurmctld; array{job_id, task_id, task} of accounting); the real answers are
checked by tests/integration/test_slurm_arrays.py on Slurm 22.05, 24.11 and 26.05.
"""

import os
import subprocess

import httpx
import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._backend import rfc3339
from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec
from ansible_collections.bridge.hpc.plugins.module_utils._transport import Transport
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.arrays import fold, pending_indexes
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.compile import SCRIPT_END, array_script, compile_job
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.states import identity_of, normalize_job

from slurm_stub import Stub, recorded_job

IDENTITY = "arr-1"
ARRAY_ID = 500
FAILING = (13, 42, 77)


def nv(value):
    if value is None:
        return {"set": False, "infinite": False, "number": 0}
    return {"set": True, "infinite": False, "number": value}


def spec(**params):
    given = {"script": "#!/bin/bash\necho $BRIDGE_ARRAY_INDEX\n", "identity": IDENTITY,
             "array": {"indexes": "0-99", "parallelism": 8}}
    given.update(params)
    return normalize_spec(given)


def live_task(index, state="COMPLETED", exit_code=0, pending="", job_id=None, asked="0-99"):
    """slurmctld's record (v0.0.42 shape) of task `index` of array ARRAY_ID; index None is the
    record of the tasks still pending (`pending`)."""
    return {"job_id": job_id or (ARRAY_ID if index is None else ARRAY_ID + 1 + index), "name": IDENTITY,
            "comment": "bridge:%s array=%s" % (IDENTITY, asked), "job_state": [state],
            "array_job_id": nv(ARRAY_ID), "array_task_id": nv(index), "array_task_string": pending,
            "array_max_tasks": nv(8),
            "exit_code": {"status": ["ERROR" if exit_code else "SUCCESS"], "return_code": nv(exit_code)},
            "submit_time": nv(1796000000), "start_time": nv(None if state == "PENDING" else 1796000010 + (index or 0)),
            "end_time": nv(1796000020 + (index or 0) if state in ("COMPLETED", "FAILED", "CANCELLED") else None),
            "user_name": "bridge", "partition": "debug"}


def ended_array():
    return [live_task(index, "FAILED" if index in FAILING else "COMPLETED", 3 if index in FAILING else 0)
            for index in range(100)]


def accounting_task(index, state="COMPLETED", exit_code=0, pending=None, comment=True):
    job = recorded_job(ARRAY_ID if index is None else ARRAY_ID + 1 + index, IDENTITY, state=state, comment=comment)
    if comment:
        job["comment"]["job"] += " array=0-99"
    job["array"] = {"job_id": ARRAY_ID, "task_id": nv(index), "task": pending,
                    "limits": {"max": {"running": {"tasks": 8}}}}
    if exit_code:
        job["exit_code"] = {"status": ["ERROR"], "return_code": nv(exit_code)}
    return job


# ---------------------------------------------------------------- the submit body

@pytest.mark.parametrize("version", ["v0.0.38", "v0.0.42", "v0.0.45"])
def test_an_array_is_asked_for_with_its_indexes_and_parallelism(version):
    body = compile_job(spec(), version)
    job = body["job"]
    assert job["array"] == "0-99%8"
    assert job["comment"] == "bridge:arr-1 array=0-99"
    script = body["script"] if version == "v0.0.38" else job["script"]
    assert script.startswith("#!/bin/sh\n") and "BRIDGE_ARRAY_INDEX=$SLURM_ARRAY_TASK_ID" in script
    assert "#!/bin/bash\necho $BRIDGE_ARRAY_INDEX\n" in script


def test_without_parallelism_the_array_is_its_indexes_and_a_job_without_array_is_as_before():
    assert compile_job(spec(array={"indexes": [0, 2, 4, 6, 9]}), "v0.0.42")["job"]["array"] == "0-6:2,9"
    plain = compile_job(spec(array=None), "v0.0.42")["job"]
    assert "array" not in plain and plain["comment"] == "bridge:arr-1"
    assert plain["script"] == "#!/bin/bash\necho $BRIDGE_ARRAY_INDEX\n"


def test_backend_options_cannot_set_the_array_bridge_sets():
    with pytest.raises(SpecError) as err:
        compile_job(spec(backend_options={"slurm": {"array": "0-3"}}), "v0.0.42")
    assert err.value.field == "backend_options.slurm.array"
    assert compile_job(spec(array=None, backend_options={"slurm": {"array": "0-3"}}), "v0.0.42")["job"]["array"] == "0-3"


def test_indexes_too_long_for_the_comment_are_refused_naming_the_field():
    sparse = [index * index for index in range(400)]
    with pytest.raises(SpecError) as err:
        compile_job(spec(array={"indexes": sparse}), "v0.0.42")
    assert err.value.field == "array.indexes" and "1024" in str(err.value)


def test_the_identity_of_an_array_comment_is_what_precedes_the_indexes():
    assert identity_of("bridge:arr-1 array=0-99") == "arr-1"
    assert identity_of("bridge:arr-1") == "arr-1"


def run_task(script, index, stdin=""):
    """The wrapper of `script` run as Slurm runs a task: /bin/sh with SLURM_ARRAY_TASK_ID."""
    env = dict(os.environ, SLURM_ARRAY_TASK_ID=str(index))
    env.pop("BRIDGE_ARRAY_INDEX", None)
    return subprocess.run(["/bin/sh", "-c", array_script(script)], input=stdin, env=env, capture_output=True, text=True,
                          timeout=30, check=False)


def test_the_wrapper_runs_a_bash_script_with_its_index_its_stdin_and_its_exit_code():
    done = run_task("#!/bin/bash\nread line\necho \"index=$BRIDGE_ARRAY_INDEX slurm=$SLURM_ARRAY_TASK_ID "
                    "bash=${BASH_VERSION:+yes} in=$line '$HOME'\"\nexit 3\n", 42, stdin="hello\n")
    assert done.returncode == 3, done.stderr
    assert done.stdout == "index=42 slurm=42 bash=yes in=hello '%s'\n" % os.environ.get("HOME", "")


def test_the_wrapper_runs_a_python_script_with_its_interpreter_and_argument():
    done = run_task("#!/usr/bin/env python3\nimport os, sys\nprint(os.environ['BRIDGE_ARRAY_INDEX'], sys.version_info[0])\n", 7)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "7 3\n"
    argument = run_task("#!/bin/bash -e\nfalse\necho not reached\n", 1)
    assert argument.returncode == 1 and argument.stdout == ""


def test_the_wrapper_ends_the_script_where_the_script_has_no_such_line():
    script = "#!/bin/sh\ncat <<'%s'\n$NOT_EXPANDED `nor this`\n%s\necho \"done $BRIDGE_ARRAY_INDEX\"" % (
        SCRIPT_END, SCRIPT_END)
    assert "%s_1" % SCRIPT_END in array_script(script)
    done = run_task(script, 0)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "$NOT_EXPANDED `nor this`\ndone 0\n"


# ---------------------------------------------------------------- one job of an array's records

def folded_one(natives, forgotten=None):
    jobs = fold([normalize_job(native) for native in natives], forgotten)
    assert len(jobs) == 1
    return jobs[0]


def test_an_ended_array_with_failed_tasks_is_one_failed_job():
    job = folded_one(ended_array())
    assert job["job_id"] == str(ARRAY_ID) and job["identity"] == IDENTITY
    assert job["phase"] == "failed" and job["terminal"] is True
    assert job["exit_code"] == 3 and job["failure_class"] == "non_zero_exit" and job["native_state"] == "FAILED"
    array = job["array"]
    assert array["indexes"] == "0-99" and array["size"] == 100 and array["parallelism"] == 8
    assert array["failed_indexes"] == "13,42,77"
    assert array["counts"] == {"queued": 0, "running": 0, "completed": 97, "failed": 3, "cancelled": 0}
    assert [f["index"] for f in array["failures"]] == [13, 42, 77]
    assert job["start_time"] == rfc3339(1796000010) and job["end_time"] == rfc3339(1796000020 + 99)
    assert "array_task" not in job


def test_pending_tasks_are_counted_from_the_record_that_holds_them():
    records = [live_task(None, "PENDING", pending="10-99%8")] + [live_task(i, "RUNNING") for i in range(2, 10)] + [
        live_task(i) for i in range(2)]
    job = folded_one(records)
    assert job["phase"] == "running" and job["terminal"] is False
    assert job["array"]["counts"] == {"queued": 90, "running": 8, "completed": 2, "failed": 0, "cancelled": 0}


def test_an_array_cancelled_before_some_tasks_started_ends_cancelled():
    records = [live_task(None, "CANCELLED", pending="50-99")] + [live_task(i) for i in range(50)]
    job = folded_one(records)
    assert job["phase"] == "cancelled" and job["terminal"] is True
    assert job["array"]["counts"]["cancelled"] == 50


def test_a_hopeless_array_is_rejected():
    record = live_task(None, "PENDING", pending="0-99%8")
    record["state_reason"] = "PartitionTimeLimit"
    job = folded_one([record])
    assert job["phase"] == "queued" and job["failure_class"] == "rejected"


def test_pending_indexes_read_ranges_limits_hex_bitmaps_and_cut_text():
    assert pending_indexes("5-9%8") == ((5, 6, 7, 8, 9), True)
    assert pending_indexes("[1,3-4]") == ((1, 3, 4), True)
    assert pending_indexes("0x15") == ((0, 2, 4), True)
    assert pending_indexes("1,3,5-9...") == ((1, 3), False)
    assert pending_indexes(None) == ((), True)


def test_tasks_slurmctld_forgot_come_from_the_reader_of_forgotten_tasks():
    seen = []

    def forgotten(array_job_id, indexes):
        seen.append((array_job_id, list(indexes)))
        return dict((index, {"phase": "failed", "exit_code": 3, "failure_class": "non_zero_exit"}) for index in indexes)

    job = folded_one([live_task(i) for i in range(2, 100)], forgotten)
    assert seen == [(str(ARRAY_ID), [0, 1])]
    assert job["phase"] == "failed" and job["array"]["failed_indexes"] == "0,1"


# ---------------------------------------------------------------- the client: one request per poll

def test_get_of_an_array_is_one_request_whatever_its_size():
    stub = Stub(live=ended_array())
    client = stub.client()
    job = client.get(str(ARRAY_ID))
    assert stub.paths() == ["/slurm/v0.0.42/job/%d" % ARRAY_ID]
    assert job["phase"] == "failed" and job["array"]["failed_indexes"] == "13,42,77"


def test_get_of_one_task_id_answers_the_whole_array():
    task = live_task(5)
    stub = Stub(live=ended_array())
    stub.live.append(dict(task, job_id=9999))
    client = stub.client()
    job = client.get("9999")
    assert job["job_id"] == str(ARRAY_ID) and job["array"]["size"] == 100


def test_poll_many_and_list_show_an_array_as_one_job_with_one_request():
    stub = Stub(live=ended_array() + [dict(live_task(0), job_id=7, array_job_id=nv(0), comment="bridge:other")])
    client = stub.client()
    found = client.poll_many([IDENTITY, "other"])
    assert stub.paths() == ["/slurm/v0.0.42/jobs/"]
    assert found[IDENTITY]["array"]["failed_indexes"] == "13,42,77" and found["other"]["job_id"] == "7"
    assert "array" not in found["other"] and client.warnings == []


def test_find_many_folds_the_array_accounting_keeps():
    recorded = [accounting_task(i, "FAILED" if i in FAILING else "COMPLETED", 3 if i in FAILING else 0)
                for i in range(100)]
    stub = Stub(live=[], recorded=recorded)
    client = stub.client()
    found = client.find_many([IDENTITY])
    assert stub.paths() == ["/slurmdb/v0.0.42/jobs/"]
    job = found[IDENTITY]
    assert job["phase"] == "failed" and job["array"]["failed_indexes"] == "13,42,77" and job["source"] == "accounting"
    assert client.warnings == []


def test_find_many_reads_an_unfinished_array_once_from_slurmctld():
    recorded = [accounting_task(None, "PENDING", pending="10-99", comment=False)] + [
        accounting_task(i, "RUNNING", comment=False) for i in range(10)]
    live = [live_task(None, "PENDING", pending="10-99%8")] + [live_task(i, "RUNNING") for i in range(10)]
    stub = Stub(live=live, recorded=recorded)
    found = stub.client().find_many([IDENTITY])
    assert stub.paths() == ["/slurmdb/v0.0.42/jobs/", "/slurm/v0.0.42/job/%d" % ARRAY_ID]
    assert found[IDENTITY]["phase"] == "running" and found[IDENTITY]["array"]["counts"]["queued"] == 90


def test_tasks_slurmctld_forgot_are_read_from_accounting_once():
    recorded = [accounting_task(i, "FAILED", 3) for i in (0, 1)]
    stub = Stub(live=[live_task(i) for i in range(2, 100)], recorded=recorded)
    client = stub.client()
    job = client.get(str(ARRAY_ID))
    assert stub.paths() == ["/slurm/v0.0.42/job/%d" % ARRAY_ID, "/slurmdb/v0.0.42/jobs/",
                            "/slurmdb/v0.0.42/job/%d" % ARRAY_ID]
    assert job["phase"] == "failed" and job["array"]["failed_indexes"] == "0,1"


def test_without_accounting_forgotten_tasks_end_unknown_counted_failed_with_a_warning():
    stub = Stub(live=[live_task(i) for i in range(2, 100)], recorded=None)
    client = stub.client()
    job = client.get(str(ARRAY_ID))
    assert job["phase"] == "failed" and job["terminal"] and job["array"]["counts"]["failed"] == 2
    assert job["array"]["unknown_indexes"] == "0,1" and job["array"]["failed_indexes"] == "0,1"
    assert job["exit_code"] is None and job["failure_class"] is None
    assert job["array"]["failures"][0] == {"index": 0, "exit_code": None, "failure_class": None}
    assert any("no longer shows tasks 0,1 of array job 500" in warning and "unknown outcome" in warning
               for warning in client.warnings)


def test_a_task_pending_or_running_is_never_taken_for_forgotten():
    live = [live_task(None, "PENDING", pending="10-99%8")] + [live_task(i, "RUNNING") for i in range(2, 10)]
    stub = Stub(live=live, recorded=None)
    job = stub.client().get(str(ARRAY_ID))
    assert job["phase"] == "running" and job["array"]["counts"] == {
        "queued": 90, "running": 8, "completed": 0, "failed": 2, "cancelled": 0}
    assert job["array"]["unknown_indexes"] == "0,1"


def test_the_client_remembers_the_ends_it_saw_when_slurmctld_forgets_them():
    stub = Stub(live=[live_task(None, "PENDING", pending="10-99%8")] + [
        live_task(i, "FAILED", 3) if i == 0 else live_task(i) for i in range(10)], recorded=[])
    client = stub.client()
    first = client.get(str(ARRAY_ID))
    assert first["array"]["counts"]["completed"] == 9 and first["array"]["failed_indexes"] == "0"
    # MinJobAge later: tasks 0-9 are gone, 10-17 run.
    stub.live = [live_task(None, "PENDING", pending="18-99%8")] + [live_task(i, "RUNNING") for i in range(10, 18)]
    sent = len(stub.paths())
    again = client.get(str(ARRAY_ID))
    assert stub.paths()[sent:] == ["/slurm/v0.0.42/job/%d" % ARRAY_ID]
    assert again["array"]["counts"] == {"queued": 82, "running": 8, "completed": 9, "failed": 1, "cancelled": 0}
    assert again["array"]["failed_indexes"] == "0" and "unknown_indexes" not in again["array"]
    assert again["array"]["failures"] == [{"index": 0, "exit_code": 3, "failure_class": "non_zero_exit"}]
    assert client.warnings == []


def test_forgotten_ends_read_from_accounting_are_not_read_again():
    recorded = [accounting_task(i, "FAILED", 3) for i in (0, 1)]
    stub = Stub(live=[live_task(i) for i in range(2, 100)], recorded=recorded)
    client = stub.client()
    client.get(str(ARRAY_ID))
    sent = len(stub.paths())
    job = client.get(str(ARRAY_ID))
    assert stub.paths()[sent:] == ["/slurm/v0.0.42/job/%d" % ARRAY_ID]
    assert job["phase"] == "failed" and job["array"]["failed_indexes"] == "0,1" and "unknown_indexes" not in job["array"]


def test_capacity_counts_the_tasks_slurmctld_lists():
    live = [live_task(None, "PENDING", pending="10-99%8")] + [live_task(i, "RUNNING") for i in range(2)]
    stub = Stub(live=live)
    assert len(stub.client()._queue()) == 3
    assert len(stub.client().list()) == 1


# ---------------------------------------------------------------- MaxArraySize

class ConfStub(object):
    """slurmrestd with no partitions and nodes (nothing to fit) and slurm.conf's MaxArraySize."""

    def __init__(self, version, max_array_size=1001):
        self.version = version
        self.max_array_size = max_array_size
        self.sent = []

    def handle(self, request):
        self.sent.append(request.url.path)
        kind = request.url.path.strip("/").split("/")[2]
        if kind == "conf":
            return httpx.Response(200, json={"slurm_conf": {"MaxArraySize": self.max_array_size}})
        return httpx.Response(200, json={kind: []})

    def client(self):
        http = httpx.Client(base_url="http://slurm.test", transport=httpx.MockTransport(self.handle))
        transport = Transport("http://slurm.test", "Slurm", secrets=["tok"], http_client=http, sleep=lambda s: None)
        return SlurmClient("http://slurm.test", user="bridge", token="tok", api_version=self.version, transport=transport)


def test_indexes_from_max_array_size_on_are_refused_where_slurm_conf_is_served():
    stub = ConfStub("v0.0.45")
    client = stub.client()
    client.check(spec(array={"indexes": "0-1000"}))
    with pytest.raises(SpecError) as err:
        client.check(spec(array={"indexes": "0-1001"}))
    assert err.value.field == "array.indexes" and "MaxArraySize is 1001" in str(err.value)
    assert stub.sent.count("/slurm/v0.0.45/conf") == 1


def test_older_rest_versions_are_not_asked_for_slurm_conf():
    stub = ConfStub("v0.0.42")
    stub.client().check(spec(array={"indexes": "0-5000"}))
    assert "/slurm/v0.0.42/conf" not in stub.sent


def test_a_client_remembers_the_task_ends_of_its_last_arrays_only():
    from ansible_collections.bridge.hpc.plugins.module_utils.slurm import client as slurm_client

    stub = Stub(live=[], recorded=None)
    client = stub.client()
    for array in range(slurm_client.REMEMBERED_ARRAYS + 5):
        client._folded([dict(task, array_task=dict(task["array_task"], array_job_id=str(array)))
                        for task in [normalize_job(live_task(0))]])
    assert len(client._ended_tasks) == slurm_client.REMEMBERED_ARRAYS and "0" not in client._ended_tasks


def test_an_arrays_output_is_its_first_failed_tasks_file_else_its_first_tasks():
    from ansible_collections.bridge.hpc.plugins.module_utils._job_output import slurm_output_paths
    from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import output_task

    array = {"indexes": "3,7,20-22", "failures": [{"index": 7, "exit_code": 1, "failure_class": "non_zero_exit"}]}
    job = {"job_id": "40", "working_directory": "/tmp", "array": array, "native": {}}
    assert slurm_output_paths(output_task(job))["stdout"] == "/tmp/slurm-40_7.out"
    completed = dict(job, array=dict(array, failures=[]))
    assert slurm_output_paths(output_task(completed))["stdout"] == "/tmp/slurm-40_3.out"
    assert slurm_output_paths(output_task(dict(completed, stdout="out-%A-%a.txt")))["stdout"] == "/tmp/out-40-3.txt"
    plain = {"job_id": "41", "working_directory": "/tmp", "native": {}}
    assert output_task(plain) is plain and slurm_output_paths(plain)["stdout"] == "/tmp/slurm-41.out"
