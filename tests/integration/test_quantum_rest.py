"""The Qiskit Runtime simulator over plain REST (httpx, no qiskit): what a client without qiskit sees.

PUB circuits go as OpenQASM 3 text, as IBM's "Sampler with the REST API" page shows; results are
decoded by hand from their RuntimeEncoder JSON (BitArray and ndarray values are base64 of zlib of
numpy's .npy bytes), which is what a Bridge client has to do. The 1305 and usage-limit cases use a
private simulator in a run dir of its own, with one second of max_execution_time and of usage made
10 ms long.
"""

import ast
import base64
import json
import struct
import time
import uuid
import zlib

import httpx
import pytest

from conftest import private_service, read_env_file, require_quantum
from controller_support import free_port

APIKEY_GRANT = "urn:ibm:params:oauth:grant-type:apikey"
# A Bell state in the devices' basis gates (rz sx rz = h up to a phase) on physical qubits 0 and 1.
BELL = ('OPENQASM 3.0; include "stdgates.inc"; bit[2] meas; rz(pi/2) $0; sx $0; rz(pi/2) $0; cx $0, $1; '
        'meas[0] = measure $0; meas[1] = measure $1;')
BELL_UNMEASURED = 'OPENQASM 3.0; include "stdgates.inc"; rz(pi/2) $0; sx $0; rz(pi/2) $0; cx $0, $1;'
FINAL = ("Completed", "Failed", "Cancelled")


def token(env, api_key=None):
    form = {"grant_type": APIKEY_GRANT, "apikey": api_key or env["QUANTUM_API_KEY"]}
    return httpx.post(env["QUANTUM_IAM_URL"] + "/identity/token", data=form, timeout=30)


def client(env, crn=None, bearer=None):
    bearer = bearer or token(env).json()["access_token"]
    headers = {"Authorization": "Bearer " + bearer, "Service-CRN": crn or env["QUANTUM_SERVICE_CRN"],
               "IBM-API-Version": "2026-04-15", "Accept": "application/json"}
    return httpx.Client(base_url=env["QUANTUM_URL"], headers=headers, timeout=30)


def error_code(response):
    return response.json()["errors"][0]["code"]


def sampler_job(pubs, backend="ibm_manila", **fields):
    return dict({"program_id": "sampler", "backend": backend, "params": {"pubs": pubs, "version": 2}}, **fields)


def wait_final(api, job_id, timeout=60):
    deadline = time.time() + timeout
    while True:
        job = api.get("/jobs/%s" % job_id).json()
        if job["state"]["status"] in FINAL:
            return job
        assert time.time() < deadline, "job %s still %s" % (job_id, job["state"]["status"])
        time.sleep(0.1)


def npy(value):
    """(dtype descr, shape, data bytes) of an encoded ndarray: base64(zlib(.npy)) (NumPy's format
    docs: magic, version, header length, a dict literal, then the data)."""
    raw = zlib.decompress(base64.standard_b64decode(value["__value__"]))
    assert raw[:6] == b"\x93NUMPY"
    size, start = (struct.unpack("<H", raw[8:10])[0], 10) if raw[6] == 1 else (struct.unpack("<I", raw[8:12])[0], 12)
    header = ast.literal_eval(raw[start:start + size].decode("latin1"))
    return header["descr"], tuple(header["shape"]), raw[start + size:]


def counts(bit_array):
    """Counts of a BitArray (shots x bytes, each shot's bits packed big-endian) of at most 8 bits."""
    num_bits = bit_array["__value__"]["num_bits"]
    descr, shape, data = npy(bit_array["__value__"]["array"])
    assert descr == "|u1" and shape[-1] == 1 and num_bits <= 8
    found = {}
    for byte in data:
        key = format(byte, "0%db" % num_bits)
        found[key] = found.get(key, 0) + 1
    return found


def floats(value):
    descr, shape, data = npy(value)
    assert descr == "<f8"
    return list(struct.unpack("<%dd" % (len(data) // 8), data)), shape


def pub_results(text):
    result = json.loads(text)
    assert result["__type__"] == "PrimitiveResult"
    return [pub["__value__"]["data"]["__value__"] for pub in result["__value__"]["pub_results"]]


@pytest.fixture(scope="module")
def env():
    return require_quantum()


@pytest.fixture(scope="module")
def api(env):
    with client(env) as session:
        yield session


def test_iam_mints_a_jwt_and_refuses_a_wrong_key(env):
    answer = token(env).json()
    assert answer["token_type"] == "Bearer" and answer["expires_in"] == 3600
    claims = json.loads(base64.urlsafe_b64decode(answer["access_token"].split(".")[1] + "=="))
    assert isinstance(claims["iat"], int) and claims["exp"] - claims["iat"] == 3600
    wrong = token(env, api_key="not-the-api-key")
    assert wrong.status_code == 400 and wrong.json()["errorCode"] == "BXNIM0415E"


def test_runtime_api_needs_a_bearer_token_and_the_instance_crn(env, api):
    plain = httpx.get(env["QUANTUM_URL"] + "/backends", timeout=30)
    assert plain.status_code == 401 and error_code(plain) == 1201
    forged = token(env).json()["access_token"][:-4] + "AAAA"
    with client(env, bearer=forged) as other:
        assert other.get("/backends").status_code == 401
    other_crn = env["QUANTUM_SERVICE_CRN"].replace(":a/", ":a/0")
    with client(env, crn=other_crn) as other:
        refused = other.get("/backends")
        assert refused.status_code == 403 and error_code(refused) == 1200
    devices = api.get("/backends").json()["devices"]
    assert [d["name"] for d in devices] == env["QUANTUM_DEVICES"].split(",")
    assert {d["name"]: d["status"]["name"] for d in devices}["ibm_lima"] == "paused"


def test_qasm3_sampler_pubs_run_to_completion(api):
    tag = "rest-" + uuid.uuid4().hex[:8]
    # "pubs": [[qasm], [qasm, null, 500]]: shots from options.default_shots, then from the PUB.
    job = sampler_job([[BELL], [BELL, None, 500]], tags=[tag])
    job["params"]["options"] = {"default_shots": 300}
    created = api.post("/jobs", json=job)
    assert created.status_code == 200, created.text
    job_id = created.json()["id"]
    assert created.json()["backend"] == "ibm_manila"
    final = wait_final(api, job_id)
    assert (final["state"]["status"], final["status"], final["program"]["id"]) == ("Completed",) * 2 + ("sampler",)
    assert final["tags"] == [tag] and final["params"]["pubs"][0] == [BELL]
    assert "params" not in api.get("/jobs/%s" % job_id, params={"exclude_params": "true"}).json()
    first, second = pub_results(api.get("/jobs/%s/results" % job_id).text)
    assert first["field_names"] == ["meas"] and first["field_types"] == ["BitArray"]
    found = counts(first["fields"]["meas"])
    assert sum(found.values()) == 300 and found.get("00", 0) + found.get("11", 0) > 240
    assert sum(counts(second["fields"]["meas"]).values()) == 500
    listed = api.get("/jobs", params={"tags": tag}).json()
    assert listed["count"] == 1 and listed["jobs"][0]["id"] == job_id
    assert api.get("/jobs", params={"tags": tag, "pending": "true"}).json()["count"] == 0
    metrics = api.get("/jobs/%s/metrics" % job_id).json()
    assert metrics["usage"]["status"] == "completed" and metrics["timestamps"]["running"]


def test_estimator_pub_with_observables(api):
    created = api.post("/jobs", json={"program_id": "estimator", "backend": "ibm_nairobi", "params": {
        "version": 2, "pubs": [[BELL_UNMEASURED, [{"ZZ": 1.0}, {"XX": 1.0, "ZI": 0.5}]]]}})
    assert created.status_code == 200, created.text
    final = wait_final(api, created.json()["id"])
    assert final["state"]["status"] == "Completed"
    data, = pub_results(api.get("/jobs/%s/results" % final["id"]).text)
    evs, shape = floats(data["fields"]["evs"])
    assert shape == (2,) and data["shape"] == [2]
    assert evs[0] > 0.7 and 0.5 < evs[1] < 1.3


def test_shots_default_to_4096(api):
    created = api.post("/jobs", json=sampler_job([[BELL, None, None]]))
    final = wait_final(api, created.json()["id"])
    data, = pub_results(api.get("/jobs/%s/results" % final["id"]).text)
    assert sum(counts(data["fields"]["meas"]).values()) == 4096


def test_non_isa_and_too_wide_circuits_are_refused(api):
    non_isa = api.post("/jobs", json=sampler_job([['OPENQASM 3.0; include "stdgates.inc"; bit[1] c; h $0; '
                                                   'c[0] = measure $0;']]))
    assert non_isa.status_code == 400 and error_code(non_isa) == 1517
    assert "non-ISA" in non_isa.json()["errors"][0]["message"]
    wide = api.post("/jobs", json=sampler_job([['OPENQASM 3.0; include "stdgates.inc"; bit[1] c; x $6; '
                                                'c[0] = measure $6;']]))
    assert wide.status_code == 400 and error_code(wide) == 1109
    unknown = api.post("/jobs", json=sampler_job([[BELL]], backend="ibm_nowhere"))
    assert unknown.status_code == 400 and error_code(unknown) == 1007


def test_cancel_a_queued_job_then_delete_it(api):
    created = api.post("/jobs", json=sampler_job([[BELL]], backend="ibm_lima"))
    job_id = created.json()["id"]
    assert api.get("/jobs/%s" % job_id).json()["state"]["status"] == "Queued"
    assert api.post("/jobs/%s/cancel" % job_id).status_code == 204
    assert api.get("/jobs/%s" % job_id).json()["state"]["status"] == "Cancelled"
    again = api.post("/jobs/%s/cancel" % job_id)
    assert again.status_code == 409
    assert api.put("/jobs/%s/tags" % job_id, json={"tags": ["kept"]}).status_code == 204
    assert api.get("/jobs/%s" % job_id).json()["tags"] == ["kept"]
    assert api.delete("/jobs/%s" % job_id).status_code == 204
    assert api.get("/jobs/%s" % job_id).status_code == 404


def test_batch_session_closes(api):
    session = api.post("/sessions", json={"mode": "batch", "backend": "ibm_manila"}).json()
    assert (session["mode"], session["state"], session["accepting_jobs"]) == ("batch", "open", True)
    created = api.post("/jobs", json=sampler_job([[BELL, None, 100]], session_id=session["id"]))
    assert created.json()["session_id"] == session["id"]
    assert wait_final(api, created.json()["id"])["session_id"] == session["id"]
    assert api.patch("/sessions/%s" % session["id"], json={"accepting_jobs": False}).status_code == 204
    late = api.post("/jobs", json=sampler_job([[BELL]], session_id=session["id"]))
    assert late.status_code == 409 and error_code(late) == 4001
    assert api.delete("/sessions/%s/close" % session["id"]).status_code == 204
    assert api.get("/sessions/%s" % session["id"]).json()["state"] == "closed"


@pytest.fixture(scope="module")
def private(env):
    """A second simulator: one second of max_execution_time and of usage lasts 10 ms, and the
    instance may use 10 such seconds."""
    settings = {"BRIDGE_QUANTUM_PORT": str(free_port()), "BRIDGE_QUANTUM_SECOND": "0.01",
                "BRIDGE_QUANTUM_USAGE_LIMIT": "10"}
    with private_service("quantum-runtime.sh", "quantum", settings) as env_file:
        private_env = read_env_file(env_file)
        assert private_env["QUANTUM_URL"] != env["QUANTUM_URL"]
        with client(private_env) as session:
            yield session


def test_a_job_past_its_max_execution_time_is_cancelled_with_1305(private):
    # cost 1 = 10 ms here, less than any job's QPU time.
    created = private.post("/jobs", json=sampler_job([[BELL]], cost=1))
    final = wait_final(private, created.json()["id"])
    assert final["state"] == {"status": "Cancelled", "reason": "RAN TOO LONG", "reason_code": 1305}
    assert final["status"] == "Cancelled - Ran too long"
    results = private.get("/jobs/%s/results" % final["id"])
    assert results.status_code == 200 and "maximum execution time" in results.text


def test_submits_are_refused_once_the_usage_limit_is_reached(private):
    for attempt in range(3):
        usage = private.get("/instances/usage").json()
        if usage["usage_limit_reached"]:
            break
        job = wait_final(private, private.post("/jobs", json=sampler_job([[BELL, None, 100]])).json()["id"])
        assert job["state"]["status"] == "Completed", "job %d: %s" % (attempt, job["state"])
    assert usage["usage_limit_reached"] and usage["usage_limit_seconds"] == 10
    assert usage["usage_consumed_seconds"] >= 10
    refused = private.post("/jobs", json=sampler_job([[BELL]]))
    assert refused.status_code == 409 and error_code(refused) == 4317
