"""Arrays on the kubernetes backend: the Indexed Job an array renders to (dense indexes through the
downward API, a sparse set through the /bin/sh wrapper, which runs here under the real /bin/sh), its
status read from completedIndexes and failedIndexes, and the requests a poll makes (apiserver stub).
"""

import subprocess

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec
from ansible_collections.bridge.hpc.plugins.module_utils.k8s.client import K8sClient
from ansible_collections.bridge.hpc.plugins.module_utils.k8s.compile import SPARSE_WRAPPER, compile_job, index_runs
from ansible_collections.bridge.hpc.plugins.module_utils.k8s.states import normalize_job

from k8s_stub import ApiServerStub

IMAGE = {"kubernetes": {"image": "localhost/bridge/busybox:latest"}}


def spec(**params):
    params.setdefault("script", "#!/bin/sh -e\necho $BRIDGE_ARRAY_INDEX\n")
    params.setdefault("identity", "sweep:1")
    params.setdefault("backend_options", IMAGE)
    return normalize_spec(params, K8sClient)


@pytest.fixture
def stub():
    return ApiServerStub(namespaces=("default", "research"))


# ---------------------------------------------------------------- rendering

def test_a_dense_array_is_an_indexed_job_whose_index_comes_from_the_downward_api():
    rendered = compile_job(spec(array={"indexes": "0-4", "parallelism": 2}, environment={"BRIDGE_ARRAY_INDEX": "x", "A": "1"}),
                           "default")
    job = rendered["job"]
    assert "backoffLimit" not in job["spec"]
    assert {k: job["spec"][k] for k in ("completionMode", "completions", "parallelism", "backoffLimitPerIndex")} == {
        "completionMode": "Indexed", "completions": 5, "parallelism": 2, "backoffLimitPerIndex": 0}
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["/bin/sh", "-e", "/bridge/job/script"]
    assert container["env"] == [
        {"name": "A", "value": "1"},
        {"name": "BRIDGE_ARRAY_INDEX", "valueFrom": {"fieldRef": {
            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}]
    assert job["metadata"]["annotations"]["bridge.dev/array-indexes"] == "0-4"
    # The index set is the Job's; its Pods carry the array label instead, which plain lookups leave out.
    assert "bridge.dev/array-indexes" not in job["spec"]["template"]["metadata"]["annotations"]
    assert job["spec"]["template"]["metadata"]["labels"]["bridge.dev/array"] == "true"
    assert "bridge.dev/array" not in job["metadata"]["labels"]
    assert sorted(rendered["config_map"]["data"]) == ["script"]


def test_a_sparse_array_maps_completion_indexes_through_a_wrapper_and_runs_them_all_at_once_unless_limited():
    rendered = compile_job(spec(array={"indexes": "3,7,20-22"}, backend_options={"kubernetes": dict(
        IMAGE["kubernetes"], backoff_limit=1)}), "default")
    job = rendered["job"]
    assert (job["spec"]["completions"], job["spec"]["parallelism"], job["spec"]["backoffLimitPerIndex"]) == (5, 5, 1)
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:2] == ["/bin/sh", "-c"] and container["command"][3:] == [
        "bridge-array", "/bin/sh", "-e", "/bridge/job/script"]
    assert "/bridge/job/indexes" in container["command"][2]
    assert all(entry["name"] != "BRIDGE_ARRAY_INDEX" for entry in container["env"])
    assert rendered["config_map"]["data"]["indexes"] == "3 3 1\n7 7 1\n20 22 1\n"


def test_index_runs_are_the_canonical_text_as_start_end_step_lines():
    assert index_runs("0-98:2,101") == "0 98 2\n101 101 1\n"
    assert index_runs("5") == "5 5 1\n"


@pytest.mark.parametrize("text, expected", [
    ("3,7,20-22", ["3", "7", "20", "21", "22"]),
    ("0-98:2,101", [str(i) for i in range(0, 99, 2)] + ["101"]),
])
def test_the_wrapper_gives_each_completion_index_its_asked_index_under_a_real_sh(tmp_path, text, expected):
    (tmp_path / "indexes").write_text(index_runs(text))
    wrapper = SPARSE_WRAPPER % (tmp_path, "indexes")
    seen = []
    for completion in range(len(expected)):
        done = subprocess.run(["/bin/sh", "-c", wrapper, "bridge-array", "/bin/sh", "-c", 'echo "$BRIDGE_ARRAY_INDEX $0"', "arg0"],
                              env={"JOB_COMPLETION_INDEX": str(completion), "PATH": "/usr/bin:/bin"},
                              capture_output=True, text=True, check=True)
        seen.append(done.stdout.split()[0])
        assert done.stdout.split()[1] == "arg0", "the script's own arguments pass through"
    assert seen == expected
    past = subprocess.run(["/bin/sh", "-c", wrapper, "bridge-array", "/bin/true"], capture_output=True, text=True,
                          env={"JOB_COMPLETION_INDEX": str(len(expected)), "PATH": "/usr/bin:/bin"}, check=False)
    assert past.returncode == 120 and "past the array's indexes" in past.stderr


# ---------------------------------------------------------------- status

def array_job(status, text="3,7,20-22", parallelism=5, deleting=False):
    meta = {"name": "sweep-1-abc", "namespace": "default", "uid": "u-1", "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {}, "annotations": {"bridge.dev/array-indexes": text}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:05:00Z"
    return {"metadata": meta, "spec": {"completionMode": "Indexed", "completions": 5, "parallelism": parallelism},
            "status": status}


def condition(kind, reason):
    return {"type": kind, "status": "True", "reason": reason, "message": "", "lastTransitionTime": "2026-01-01T00:03:00Z"}


def failed_pod(index, exit_code=3, reason="Error"):
    return {"metadata": {"name": "sweep-%d" % index, "creationTimestamp": "2026-01-01T00:01:00Z",
                         "annotations": {"batch.kubernetes.io/job-completion-index": str(index)}},
            "status": {"phase": "Failed", "containerStatuses": [
                {"state": {"terminated": {"exitCode": exit_code, "reason": reason}}}]}}


def test_an_array_that_runs_counts_its_active_pods_as_running():
    job = normalize_job(array_job({"active": 2, "completedIndexes": "0", "startTime": "2026-01-01T00:00:05Z"}))
    assert (job["phase"], job["terminal"], job["native_state"]) == ("running", False, "Running")
    assert job["array"]["counts"] == {"queued": 2, "running": 2, "completed": 1, "failed": 0, "cancelled": 0}
    assert job["start_time"] == "2026-01-01T00:00:05Z" and job["end_time"] is None


def test_failed_indexes_are_named_in_the_asked_numbering_with_their_pods_exit_codes():
    status = {"completedIndexes": "0,2-4", "failedIndexes": "1", "conditions": [condition("Failed", "FailedIndexes")]}
    without_pods = normalize_job(array_job(status))
    assert (without_pods["phase"], without_pods["failure_class"], without_pods["exit_code"]) == ("failed", "non_zero_exit", None)
    assert without_pods["array"]["failed_indexes"] == "7" and without_pods["reason"] == "1 of 5 tasks failed"
    job = normalize_job(array_job(status), [failed_pod(1), failed_pod(2, 0, "Completed")])
    assert (job["exit_code"], job["array"]["failures"]) == (3, [{"index": 7, "exit_code": 3, "failure_class": "non_zero_exit"}])
    assert job["end_time"] == "2026-01-01T00:03:00Z"
    oom = normalize_job(array_job(status), [failed_pod(1, 137, "OOMKilled")])
    assert (oom["failure_class"], oom["signal"]) == ("out_of_memory", 9)


def test_a_complete_array_a_timed_out_one_and_a_deleted_one():
    done = normalize_job(array_job({"completedIndexes": "0-4", "conditions": [condition("Complete", "")],
                                    "completionTime": "2026-01-01T00:04:00Z"}))
    assert (done["phase"], done["exit_code"], done["end_time"]) == ("completed", 0, "2026-01-01T00:04:00Z")
    late = normalize_job(array_job({"completedIndexes": "0", "active": 1, "conditions": [condition("Failed", "DeadlineExceeded")]}))
    assert (late["phase"], late["failure_class"], late["array"]["failed_indexes"]) == ("failed", "timeout", "7,20-22")
    gone = normalize_job(array_job({"active": 3}, deleting=True))
    assert (gone["phase"], gone["failure_class"], gone["array"]["counts"]["cancelled"]) == ("cancelled", "cancelled", 5)


def test_a_parallelism_kubernetes_filled_in_is_not_reported_as_asked():
    assert normalize_job(array_job({}))["array"]["parallelism"] is None
    assert normalize_job(array_job({}, parallelism=2))["array"]["parallelism"] == 2


# ---------------------------------------------------------------- requests

def test_a_poll_of_an_array_reads_the_job_list_only(stub):
    client = stub.client()
    job_id = client.submit(spec(array={"indexes": "3,7,20-22"}))
    stub.set_status("default", job_id, {"active": 5})
    del stub.sent[:]
    found = client.find_many(["sweep:1"])
    assert found["sweep:1"]["phase"] == "running" and found["sweep:1"]["array"]["counts"]["running"] == 5
    assert [s[1] for s in stub.sent] == ["/apis/batch/v1/namespaces/default/jobs"]


def test_a_plain_jobs_pods_are_listed_without_the_arrays_and_an_ended_arrays_once(stub):
    client = stub.client()
    array_id = client.submit(spec(array={"indexes": "3,7,20-22"}))
    plain_id = client.submit(spec(identity="plain:1", script="#!/bin/sh\ntrue\n"))
    stub.set_status("default", array_id, {"completedIndexes": "0,2-4", "failedIndexes": "1",
                                          "conditions": [condition("Failed", "FailedIndexes")]}, pods=[failed_pod(1)])
    stub.set_status("default", plain_id, {"active": 1})
    del stub.sent[:]
    found = client.find_many(["sweep:1", "plain:1"])
    selectors = [s[2].get("labelSelector") for s in stub.sent if s[1].endswith("/pods")]
    assert len(stub.sent) == 3 and selectors[0].endswith(",!bridge.dev/array")
    assert selectors[1] == "job-name in (%s)" % array_id
    assert (found["sweep:1"]["exit_code"], found["sweep:1"]["array"]["failed_indexes"]) == (3, "7")
    assert found["plain:1"]["pod"] is None, "the array's Pod is not taken for the plain Job's"


def test_check_refuses_an_array_on_a_cluster_without_backoff_limit_per_index(stub, monkeypatch):
    client = stub.client()
    client.check(spec(array={"indexes": "0-3"}))
    monkeypatch.setattr(client, "describe", lambda: {"version": "v1.28.9"})
    with pytest.raises(SpecError) as refused:
        client.check(spec(array={"indexes": "0-3"}))
    assert refused.value.field == "array.indexes" and "1.29" in str(refused.value)
    client.check(spec())
