"""Arrays on the LSF backend (pure): -J "name[indexes]%parallelism" with LSF's indexes starting at 1,
the command that sets BRIDGE_ARRAY_INDEX, the description that keeps the asked set, and PAC's element
records ("1234[3]") folded into one record of the array.
"""

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.client import LsfClient
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.compile import COMMAND, bsub_options, compile_job
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.states import fold_arrays, identity_of, normalize_job


def spec(**params):
    params.setdefault("script", "#!/bin/bash\necho $BRIDGE_ARRAY_INDEX\n")
    params.setdefault("identity", "sweep-1")
    params.setdefault("name", "sweep")
    return normalize_spec(params, LsfClient)


def options(job_spec):
    return dict((option, value) for option, value, _field in bsub_options(job_spec))


def command(job_spec):
    return next(p["value"] for p in compile_job(job_spec)["params"] if p["id"] == "COMMANDTORUN")


def test_indexes_from_one_go_to_lsf_as_asked():
    job_spec = spec(array={"indexes": "1-9:2,20", "parallelism": 3})
    assert options(job_spec)["-J"] == "sweep[1-9:2,20]%3"
    assert options(job_spec)["-Jd"] == "bridge:sweep-1 array=1-9:2,20%3"
    assert "BRIDGE_ARRAY_INDEX=$LSB_JOBINDEX;" in command(job_spec)
    assert compile_job(job_spec)["files"]["bridge_job.sh"] == "#!/bin/bash\necho $BRIDGE_ARRAY_INDEX\n", "sent as is"


def test_index_0_shifts_every_index_up_by_one_and_the_command_shifts_it_back():
    job_spec = spec(array={"indexes": "0-99"})
    assert options(job_spec)["-J"] == "sweep[1-100]"
    assert options(job_spec)["-Jd"] == "bridge:sweep-1 array=0-99"
    assert "BRIDGE_ARRAY_INDEX=$((LSB_JOBINDEX-1)); export BRIDGE_ARRAY_INDEX;" in command(job_spec)
    assert compile_job(job_spec)["bsub"].startswith("bsub -J 'sweep[1-100]' -Jd 'bridge:sweep-1 array=0-99' ")


def test_a_job_that_is_no_array_is_as_before():
    job_spec = spec()
    assert (options(job_spec)["-J"], options(job_spec)["-Jd"], command(job_spec)) == ("sweep", "bridge:sweep-1", COMMAND)


def test_what_lsf_cannot_take_is_refused_naming_the_field():
    with pytest.raises(SpecError) as refused:
        bsub_options(spec(name="a[1]", array={"indexes": "1-3"}))
    assert refused.value.field == "name"
    with pytest.raises(SpecError) as refused:
        bsub_options(spec(array={"indexes": [i * i for i in range(1, 80)]}))
    assert refused.value.field == "array.indexes" and "255" in str(refused.value)


def element(index, status, exit_status="", exit_info="", description="bridge:sweep-1 array=0-4%2", start=None, end=None):
    return normalize_job({"jobId": "41[%d]" % index, "jobName": "sweep[%d]" % index, "jobStatus": status,
                          "description": description, "exitStatus": exit_status, "exitInfo": exit_info,
                          "submitTimeGMT": "2026-01-01T00:00:00Z", "startTime": start, "endTime": end,
                          "exHosts": "hostA" if start else ""})


def test_elements_fold_into_one_record_of_the_array_in_the_asked_numbering():
    plain = normalize_job({"jobId": "40", "jobName": "other", "jobStatus": "DONE", "description": "bridge:other"})
    jobs = fold_arrays([plain] + [
        element(3, "EXIT", "3", start="2026-01-01T00:00:02Z", end="2026-01-01T00:00:03Z"),
        element(1, "DONE", "0", start="2026-01-01T00:00:01Z", end="2026-01-01T00:00:02Z"),
        element(2, "RUN", start="2026-01-01T00:00:02Z"),
        element(4, "PEND"), element(5, "PEND")])
    assert [job["job_id"] for job in jobs] == ["40", "41"]
    array = jobs[1]
    assert (array["identity"], array["name"], array["phase"], array["native_state"]) == ("sweep-1", "sweep", "running", "RUN")
    assert array["array"] == {"indexes": "0-4", "size": 5, "parallelism": 2,
                              "counts": {"queued": 2, "running": 1, "completed": 1, "failed": 1, "cancelled": 0},
                              "failed_indexes": "2", "failures": [{"index": 2, "exit_code": 3, "failure_class": "non_zero_exit"}]}
    assert array["start_time"] == "2026-01-01T00:00:01Z" and array["end_time"] is None and array["hosts"] == "hostA"


def test_an_ended_array_fails_with_its_lowest_failed_index_and_a_killed_one_is_cancelled():
    ended = fold_arrays([element(1, "DONE", "0", end="2026-01-01T00:00:02Z"),
                         element(2, "EXIT", "4", end="2026-01-01T00:00:05Z"),
                         element(3, "EXIT", "137", "TERM_MEMLIMIT", end="2026-01-01T00:00:04Z"),
                         element(4, "DONE", "0"), element(5, "DONE", "0")])[0]
    assert (ended["phase"], ended["terminal"], ended["exit_code"], ended["failure_class"]) == ("failed", True, 4, "non_zero_exit")
    assert ended["array"]["failed_indexes"] == "1,2" and ended["end_time"] == "2026-01-01T00:00:05Z"
    assert ended["array"]["failures"][1] == {"index": 2, "exit_code": 137, "failure_class": "out_of_memory"}
    killed = fold_arrays([element(i, "EXIT", "137", "TERM_OWNER") for i in range(1, 6)])[0]
    assert (killed["phase"], killed["failure_class"]) == ("cancelled", "cancelled")
    waiting = fold_arrays([element(i, "PEND") for i in range(1, 6)])[0]
    assert (waiting["phase"], waiting["native_state"]) == ("queued", "PEND")


def test_an_array_bridge_did_not_tag_is_numbered_as_lsf_numbers_it():
    foreign = fold_arrays([element(i, "DONE", "0", description="") for i in (2, 4)])[0]
    assert (foreign["identity"], foreign["array"]["indexes"], foreign["phase"]) == (None, "2,4", "completed")


def test_the_identity_of_an_arrays_description():
    assert identity_of("bridge:sweep-1 array=0-4%2") == "sweep-1"
    assert identity_of("bridge:plain.job:1") == "plain.job:1"
