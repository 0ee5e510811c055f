"""The IBM Quantum modules, in-process, with the real client against the in-memory STUB of IAM and
the Qiskit Runtime API (tests/unit/quantum_stub.py): check mode submits nothing, apply, apply
again, absent, waiting, info with results, logs and metrics, device info, the neutral modules.
The stub is written from the fact sheets, not recorded from IBM Quantum."""

import json

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils.quantum.client import QuantumClient
from ansible_collections.bridge.hpc.plugins.modules import job, job_info, jobs, quantum_backend_info, quantum_job, quantum_job_info

from module_runner import Fail, run
from quantum_stub import API_KEY, BELL, CRN, IAM_URL, URL, StubRuntime, bit_array, jwt, primitive_result

pytestmark = pytest.mark.usefixtures("capture")
CONNECTION = {"url": URL, "iam_url": IAM_URL, "api_key": API_KEY, "service_crn": CRN, "retries": 0}


@pytest.fixture
def stub(monkeypatch):
    service = StubRuntime()
    build = QuantumClient.from_options.__func__
    monkeypatch.setattr(QuantumClient, "from_options", classmethod(lambda cls, get: service.attach(build(cls, get))))
    return service


def posted_jobs(stub):
    return [method for method, url in stub.api_requests() if method == "POST" and url.endswith("/jobs")]


def no_secret_in(result):
    text = json.dumps(result, default=str)
    return API_KEY not in text and jwt(serial=1) not in text


def test_check_mode_validates_against_the_device_and_submits_nothing(stub):
    outcome = run(quantum_job, dict(CONNECTION, script=BELL, identity="q-check", queue="ibm_kingston"),
                  check_mode=True, diff=True)
    assert not isinstance(outcome, Fail), outcome.result
    result = outcome.result
    assert (result["changed"], result["job_id"], result["phase"]) == (True, None, "queued")
    assert result["rendered"]["params"]["pubs"] == [[BELL]] and result["rendered"]["backend"] == "ibm_kingston"
    assert result["diff"] == {"before": {"state": "absent"}, "after": dict(result["diff"]["after"], state="present")}
    assert result["api_version"] == "2026-04-15"
    refused = run(quantum_job, dict(CONNECTION, script=BELL, identity="q-check", queue="ibm_nosuch"), check_mode=True)
    assert isinstance(refused, Fail) and refused.result["error"]["field"] == "queue"
    assert "available: ibm_kingston, ibm_paused, ibm_small" in refused.result["msg"]
    assert not posted_jobs(stub) and not stub.jobs
    assert no_secret_in(outcome.result) and no_secret_in(refused.result)


def test_apply_then_apply_again_is_unchanged(stub):
    args = dict(CONNECTION, script=BELL, name="bell", identity="q-apply", queue="ibm_kingston",
                backend_options={"quantum": {"shots": 100}})
    first = run(quantum_job, args).result
    again = run(quantum_job, args).result
    assert (first["changed"], again["changed"]) == (True, False)
    assert first["job_id"] == again["job_id"] and len(stub.jobs) == 1
    assert first["job"]["identity"] == "q-apply" and first["job"]["name"] == "bell"
    assert stub.jobs[first["job_id"]]["tags"] == ["bridge", "bridge:q-apply", "bridge-name:bell"]


def test_waiting_for_a_job_that_ran_too_long_fails_as_a_timeout(stub):
    stub.walk = ["Running", {"status": "Cancelled", "reason": "RAN TOO LONG", "reason_code": 1305}]
    outcome = run(quantum_job, dict(CONNECTION, script=BELL, identity="q-long", queue="ibm_kingston", wait=True,
                                    poll_interval=0.01, resources={"time_limit": 1}))
    assert isinstance(outcome, Fail)
    assert (outcome.result["phase"], outcome.result["failure_class"]) == ("failed", "timeout")
    assert "RAN TOO LONG" in outcome.result["msg"]
    assert stub.jobs[outcome.result["job_id"]]["cost"] == 60


def test_waiting_for_a_job_that_completes(stub):
    stub.walk = ["Running", "Completed"]
    outcome = run(quantum_job, dict(CONNECTION, script=BELL, identity="q-ok", queue="ibm_kingston", wait=True,
                                    poll_interval=0.01))
    assert not isinstance(outcome, Fail), outcome.result
    assert outcome.result["phase"] == "completed" and outcome.result["failure_class"] is None


def test_absent_cancels_a_queued_job_once(stub):
    job_id = run(quantum_job, dict(CONNECTION, script=BELL, identity="q-cancel", queue="ibm_kingston")).result["job_id"]
    predicted = run(quantum_job, dict(CONNECTION, identity="q-cancel", state="absent"), check_mode=True).result
    assert predicted["changed"] is True and stub.jobs[job_id]["state"]["status"] == "Queued"
    cancelled = run(quantum_job, dict(CONNECTION, identity="q-cancel", state="absent")).result
    assert (cancelled["changed"], cancelled["phase"], cancelled["failure_class"]) == (True, "cancelled", "cancelled")
    assert run(quantum_job, dict(CONNECTION, job_id=job_id, state="absent")).result["changed"] is False


def test_a_shell_script_is_refused_naming_the_field(stub):
    outcome = run(quantum_job, dict(CONNECTION, script="#!/bin/bash\necho hi\n", queue="ibm_kingston"))
    assert isinstance(outcome, Fail) and outcome.result["error"]["field"] == "script"
    assert not stub.requests


def test_job_info_reads_one_job_with_results_logs_and_metrics(stub):
    job_id = run(quantum_job, dict(CONNECTION, script=BELL, identity="q-info", queue="ibm_kingston")).result["job_id"]
    stub.jobs[job_id]["state"] = {"status": "Completed"}
    stub.results[job_id] = json.dumps(primitive_result([{"meas": bit_array([3, 3, 0], 2)}]))
    stub.logs[job_id] = "a\nb\n"
    result = run(quantum_job_info, dict(CONNECTION, identity="q-info", results=True, logs=True, metrics=True,
                                        max_bitstrings=2)).result
    one = result["job"]
    assert one["job_id"] == job_id and "native" not in one and "native" not in one["metrics"]
    assert one["results"]["pubs"][0]["data"]["meas"] == {"num_bits": 2, "shape": [], "shots": 3, "counts": {"00": 1, "11": 2}}
    assert (one["log"], one["metrics"]["usage_status"]) == ("a\nb\n", "pending")
    assert result["jobs"] == [one]
    assert run(quantum_job_info, dict(CONNECTION, identity="q-none")).result["job"] is None


def test_job_info_lists_and_filters(stub):
    ids = [run(quantum_job, dict(CONNECTION, script=BELL, identity="q-%d" % n, name="sweep", queue="ibm_kingston")).result["job_id"]
           for n in range(3)]
    stub.jobs[ids[0]]["state"] = {"status": "Failed", "reason": "boom"}
    listed = run(quantum_job_info, dict(CONNECTION, name="sweep", include_native=True)).result["jobs"]
    assert sorted(job["job_id"] for job in listed) == sorted(ids) and all(job["native"] for job in listed)
    failed = run(quantum_job_info, dict(CONNECTION, phases=["failed"], results=True)).result["jobs"]
    assert [(job["job_id"], job["reason"], "results" in job) for job in failed] == [(ids[0], "boom", False)]
    assert len(run(quantum_job_info, dict(CONNECTION, limit=2)).result["jobs"]) == 2


def test_backend_info_reads_devices_with_status_configuration_and_usage(stub):
    result = run(quantum_backend_info, CONNECTION).result
    small = next(device for device in result["devices"] if device["name"] == "ibm_small")
    assert (small["qubits"], small["operational"], small["basis_gates"], small["processor_type"]) == (
        2, True, ["cz", "id", "rz", "sx", "x"], "Heron r2")
    assert "native" not in small
    assert result["usage"] == {"limit_reached": False, "limit_seconds": 600, "consumed_seconds": 42, "remaining_seconds": 558}
    one = run(quantum_backend_info, dict(CONNECTION, devices=["ibm_paused"], gather=["status"], include_native=True)).result
    assert [device["operational"] for device in one["devices"]] == [False] and "usage" not in one
    assert one["devices"][0]["native"]["status"]["status"] == "maintenance"
    missing = run(quantum_backend_info, dict(CONNECTION, devices=["ibm_x"]))
    assert isinstance(missing, Fail) and missing.result["error"]["type"] == "NotFound"


def test_a_wrong_api_key_fails_typed_without_echoing_it(stub):
    outcome = run(quantum_backend_info, dict(CONNECTION, api_key="wr0ng-k3y"))
    assert isinstance(outcome, Fail) and outcome.result["error"]["type"] == "AuthFailed"
    assert "wr0ng-k3y" not in json.dumps(outcome.result)


def test_the_neutral_modules_run_quantum_jobs(stub):
    one = run(job, dict(CONNECTION, backend="quantum", script=BELL, identity="n-1", queue="ibm_kingston")).result
    assert one["changed"] is True and one["job"]["device"] == "ibm_kingston"
    batch = run(jobs, dict(CONNECTION, backend="quantum", jobs=[
        {"identity": "n-1", "script": BELL, "queue": "ibm_kingston"},
        {"identity": "n-2", "script": BELL, "queue": "ibm_small", "backend_options": {"quantum": {"shots": 10}}},
        {"identity": "n-3", "script": "#!/bin/sh\n", "queue": "ibm_small"}]))
    assert isinstance(batch, Fail) and batch.result["failed_count"] == 1
    assert [item["changed"] for item in batch.result["results"]] == [False, True, False]
    assert batch.result["results"][2]["error"]["field"] == "jobs[2].script"
    assert len(stub.jobs) == 2


def test_job_info_reads_a_summary_of_the_results_of_finished_jobs_only(stub):
    # What the BridgeJob controller's poll asks for: one results request per completed job.
    for identity in ("s-done", "s-queued", "s-unreadable"):
        run(quantum_job, dict(CONNECTION, script=BELL, identity=identity, queue="ibm_kingston"))
    by_identity = dict((stub.jobs[job_id]["tags"][1][len("bridge:"):], job_id) for job_id in stub.jobs)
    stub.jobs[by_identity["s-done"]]["state"] = {"status": "Completed"}
    stub.results[by_identity["s-done"]] = json.dumps(primitive_result([{"meas": bit_array([3, 3, 0], 2)}]))
    stub.jobs[by_identity["s-unreadable"]]["state"] = {"status": "Completed"}
    stub.results[by_identity["s-unreadable"]] = "Traceback (most recent call last):\n  boom\n"
    before = len(stub.api_requests())
    result = run(job_info, dict(CONNECTION, backend="quantum", identities=["s-done", "s-queued", "s-unreadable"],
                                results_summary=True)).result
    found = result["jobs"]
    assert found["s-done"]["results_summary"] == {"pubs": [{"registers": {"meas": {
        "shots": 3, "outcomes": 2, "counts": {"11": 2, "00": 1}}}}], "truncated": False}
    assert "results_summary" not in found["s-queued"]
    assert "results answered" in found["s-unreadable"]["results_summary"]["error"]
    reads = [url for method, url in stub.api_requests()[before:] if url.endswith("/results")]
    assert len(reads) == 2
    assert no_secret_in(result)


def test_the_neutral_modules_take_the_credentials_as_one_dictionary(stub):
    # The playbooks/bridgejob_*.yml run by hand pass `credentials` whatever the backend.
    connection = dict(CONNECTION, credentials={"api_key": API_KEY, "service_crn": CRN})
    del connection["api_key"], connection["service_crn"]
    batch = run(jobs, dict(connection, backend="quantum", jobs=[{"identity": "c-1", "script": BELL, "queue": "ibm_kingston"}]))
    assert not isinstance(batch, Fail), batch.result
    assert batch.result["results"][0]["changed"] is True and no_secret_in(batch.result)
    wrong = run(jobs, dict(connection, backend="quantum", credentials={"api_key": API_KEY, "token": "t"},
                           jobs=[{"identity": "c-2", "script": BELL, "queue": "ibm_kingston"}]))
    assert isinstance(wrong, Fail) and wrong.result["error"]["field"] == "credentials"
    assert "unexpected keys token" in wrong.result["msg"] and no_secret_in(wrong.result)
