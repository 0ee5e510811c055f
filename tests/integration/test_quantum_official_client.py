"""The unmodified official qiskit-ibm-runtime client against a Qiskit Runtime simulator of this
module's own, started by tools/quantum-runtime.sh (tests/simulators/quantum_runtime.py) on a free port:
its access log holds the client's calls only, and no other test's job holds a device that a
scenario waits on.

The client lives in the qiskit venv, not in the project venv: quantum_official_client.py runs every
scenario there once (QUANTUM_PYTHON, about 10 s) and reports facts as JSON; the tests below read
them. Raw results were validated against ibm_quantum_schemas inside each scenario.
"""

import json
import os
import subprocess

import pytest

from conftest import private_service, read_env_file, require_quantum
from controller_support import free_port

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def simulator():
    """(env file values, access log path) of the module's simulator."""
    require_quantum()  # the shared one runs: the qiskit venv is installed
    with private_service("quantum-runtime.sh", "quantum", {"BRIDGE_QUANTUM_PORT": str(free_port())}) as env_file:
        yield read_env_file(env_file), os.path.join(os.path.dirname(env_file), "log", "access.log")


@pytest.fixture(scope="module")
def quantum(simulator):  # pylint: disable=redefined-outer-name
    return simulator[0]


@pytest.fixture(scope="module")
def facts(quantum):
    env = dict(os.environ, **quantum)
    completed = subprocess.run([quantum["QUANTUM_PYTHON"], os.path.join(HERE, "quantum_official_client.py")],
                               env=env, capture_output=True, text=True, timeout=600, check=False)
    assert completed.returncode == 0, completed.stderr[-4000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def scenario(facts, name):
    assert "error" not in facts[name], "scenario %s failed in the client:\n%s" % (name, facts[name].get("error"))
    return facts[name]


def test_service_construction_lists_the_devices(facts, quantum):
    found = scenario(facts, "service")
    assert found["backends"] == quantum["QUANTUM_DEVICES"].split(",")
    assert found["operational"] == {"ibm_manila": True, "ibm_nairobi": True, "ibm_lima": False}
    assert found["least_busy"] in ("ibm_manila", "ibm_nairobi")
    assert found["usage"]["instance_id"] == quantum["QUANTUM_SERVICE_CRN"]
    assert found["usage"]["usage_limit_reached"] is False


def test_sampler_bell_state_counts_are_close_to_half_and_half(facts):
    found = scenario(facts, "sampler")
    counts = found["counts"]
    assert found["status"] == "DONE" and found["shots"] == 2000 == sum(counts.values())
    # A noisy device: most shots are 00 or 11, in about equal parts.
    bell = counts.get("00", 0) + counts.get("11", 0)
    assert bell > 0.8 * 2000
    assert 0.4 < counts.get("00", 0) / bell < 0.6
    assert found["spans"] == 1


def test_estimator_expectation_values_of_a_bell_state(facts):
    found = scenario(facts, "estimator")
    zz, xx, zi = found["evs"]
    assert zz > 0.7 and xx > 0.7 and abs(zi) < 0.15
    assert all(0 < s < 0.05 for s in found["stds"])


def test_session_and_batch_carry_their_id_and_mode(facts):
    session = scenario(facts, "session")
    assert session["job_sessions"] == [session["session_id"]] * 2
    assert (session["mode"], session["backend"]) == ("dedicated", "ibm_nairobi")
    assert session["shots"] == [500, 500]
    assert session["state_after_close"] == "closed"
    batch = scenario(facts, "batch")
    assert batch["job_sessions"] == [batch["session_id"]] * 2 and batch["mode"] == "batch"
    assert batch["statuses"] == ["DONE", "DONE"] and batch["usage_time"] >= 1


def test_cancel_a_queued_and_a_running_job(facts):
    found = scenario(facts, "cancel")
    assert found["queued"] == ["QUEUED", "CANCELLED"]
    assert found["running"] == ["RUNNING", "CANCELLED"]
    assert found["result_of_cancelled"][0] == "RuntimeInvalidStateError"
    # A second cancel is a 409, which the client turns into RuntimeInvalidStateError.
    assert found["cancel_again"][0] == "RuntimeInvalidStateError" and "409" in found["cancel_again"][1]
    assert found["job_after_delete"][0] == "RuntimeJobNotFound"


def test_logs_tags_and_job_lookup(facts):
    found = scenario(facts, "logs_and_tags")
    assert found["found"] == [found["job"]]
    assert "completed" in found["logs"] and "running on ibm_manila" in found["logs"]
    assert sorted(found["tags_after_update"]) == sorted([found["tag"], "second"])
    assert (found["program"], found["backend"]) == ("sampler", "ibm_manila")
    assert found["metrics_usage"]["status"] == "completed" and found["usage"] >= 1


def test_non_isa_circuit_is_refused_by_the_client_and_by_the_simulator(facts):
    found = scenario(facts, "non_isa")
    assert found["client_side"][0] == "IBMInputValueError"
    name, status, message = found["server_side"]
    assert (name, status) == ("RequestsApiError", 400)
    assert '"code": 1517' in message and "non-ISA" in message


def test_wrong_api_key_is_refused(facts):
    found = scenario(facts, "wrong_key")
    assert found["refused"] is not None and found["refused"][0] == "InvalidAccountError"


def test_every_result_validated_against_ibm_quantum_schemas(facts):
    validated = [scenario(facts, "sampler")["job"], scenario(facts, "estimator")["job"],
                 scenario(facts, "logs_and_tags")["validated"]]
    validated += scenario(facts, "session")["jobs"] + scenario(facts, "batch")["jobs"]
    assert len(set(validated)) == 7


def test_access_log_shows_the_client_s_calls(facts, simulator):  # pylint: disable=redefined-outer-name
    """The official client's call sequence (quantum-lsf.md §A1) reached the simulator, one line each."""
    assert facts
    with open(simulator[1]) as handle:
        lines = [line.split() for line in handle]
    seen = {tuple(line[1:]) for line in lines}
    for call in [("POST", "/identity/token", "200"), ("POST", "/v3/resources/search", "200"),
                 ("GET", "/api/v1/backends", "200"), ("GET", "/api/v1/instances/usage", "200"),
                 ("GET", "/api/v1/backends/ibm_manila/configuration", "200"), ("POST", "/api/v1/jobs", "200"),
                 ("POST", "/api/v1/sessions", "200"), ("POST", "/api/v1/jobs", "400"),
                 ("POST", "/identity/token", "400")]:
        assert call in seen, call
    assert any(call[0] == "GET" and call[1].startswith("/catalog/") for call in seen)
