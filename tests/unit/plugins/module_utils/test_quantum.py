"""QuantumClient against a STUB of IAM and the Qiskit Runtime API (tests/unit/quantum_stub.py) and
against hand-written answers (tests/unit/fixtures/quantum/handwritten).

Neither the service nor its simulator is reachable here: every answer below is written from the
fact sheets and the qiskit-ibm-runtime 0.51.0 source, except the results under
fixtures/quantum/runtime_encoder, which qiskit-ibm-runtime's own RuntimeEncoder wrote (README there).
Arrays are built byte by byte as numpy.save lays them out; no numpy, no qiskit.
"""

import json
import struct
import urllib.parse
import zlib

import httpx
import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._backend import ShapeError
from ansible_collections.bridge.hpc.plugins.module_utils._errors import (
    AuthFailed,
    ConnectionFailed,
    MalformedResponse,
    NotFound,
    Rejected,
    ServerError,
    SpecError,
)
from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec
from ansible_collections.bridge.hpc.plugins.module_utils.quantum import client as quantum_client
from ansible_collections.bridge.hpc.plugins.module_utils.quantum import results as quantum_results
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.client import (
    QuantumClient,
    _devices,
    _job_list,
    error_text,
    token_lifetime,
)
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.compile import compile_job
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.fit import normalize_status, normalize_usage
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.qasm import circuit_shape
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.results import (
    decode_ndarray,
    decode_results,
    parse_npy,
    summarize_results,
)
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.states import normalize_job
from quantum_stub import (
    API_KEY,
    BELL,
    CRN,
    IAT,
    StubRuntime,
    bit_array,
    float64s,
    jwt,
    ndarray_tag,
    npy,
    primitive_result,
)
from recorded import recorded


def spec(**params):
    params.setdefault("script", BELL)
    params.setdefault("identity", "bell-1")
    params.setdefault("queue", "ibm_kingston")
    options = params.pop("quantum", None)
    if options is not None:
        params["backend_options"] = {"quantum": options}
    return normalize_spec(params, QuantumClient)


@pytest.fixture
def stub():
    return StubRuntime()


class Clock(object):
    def __init__(self, now=IAT):
        self.now = now

    def __call__(self):
        return self.now


# ---------------------------------------------------------------- IAM, headers, errors

def test_the_api_key_becomes_a_bearer_token_sent_with_the_crn_and_api_version(stub):
    client = stub.client()
    client.devices()
    (iam_method, iam_url), (method, url) = stub.requests
    assert (iam_method, iam_url) == ("POST", "https://iam.test/identity/token")
    assert urllib.parse.parse_qs(stub.bodies[0]) == {
        "grant_type": ["urn:ibm:params:oauth:grant-type:apikey"], "apikey": [API_KEY]}
    assert (method, url) == ("GET", "https://quantum.test/api/v1/backends")
    seen = []

    def spy(request):
        seen.append(request)
        return stub.handle(request)

    client.transport.http._transport = httpx.MockTransport(spy)
    client.devices()
    headers = seen[0].headers
    assert headers["authorization"] == "Bearer " + jwt(serial=1)
    assert headers["service-crn"] == CRN
    assert headers["ibm-api-version"] == "2026-04-15" == client.api_version
    assert headers["accept"] == "application/json"
    assert stub.tokens_issued == 1, "the token is cached"


def test_the_token_is_renewed_at_80_percent_of_its_jwt_lifetime(stub):
    clock = Clock()
    client = stub.client(clock=clock)
    client.devices()
    clock.now += 0.79 * 3600
    client.devices()
    assert stub.tokens_issued == 1
    clock.now += 0.02 * 3600
    client.devices()
    assert stub.tokens_issued == 2


def test_token_lifetime_reads_the_jwt_then_expires_in_then_expiration():
    assert token_lifetime({"access_token": jwt(lifetime=1000), "expires_in": 99}, 0) == (jwt(lifetime=1000), 800)
    assert token_lifetime({"access_token": "opaque", "expires_in": 100}, 0) == ("opaque", 80)
    assert token_lifetime({"access_token": "opaque", "expiration": 1100}, 1000) == ("opaque", 80)
    assert token_lifetime({"access_token": "opaque"}, 0) == ("opaque", None)
    with pytest.raises(ShapeError):
        token_lifetime({"token": "x"}, 0)


def test_a_refused_token_is_renewed_once_then_the_request_is_sent_again(stub):
    client = stub.client()
    client.devices()
    stub.refuse_tokens.add(jwt(serial=1))
    assert [device["name"] for device in client.devices()] == ["ibm_kingston", "ibm_small", "ibm_paused"]
    assert stub.tokens_issued == 2
    stub.refuse_tokens.add(jwt(serial=2))
    stub.refuse_tokens.add(jwt(serial=3))
    with pytest.raises(AuthFailed, match="Invalid credentials") as failed:
        client.devices()
    assert failed.value.status == 401 and stub.tokens_issued == 3


def test_a_wrong_api_key_is_auth_failed_with_iams_reason_and_never_the_key(stub):
    client = stub.client(api_key="wr0ng-key-9")
    with pytest.raises(AuthFailed) as failed:
        client.devices()
    assert "Provided API key could not be found" in str(failed.value)
    assert "wr0ng-key-9" not in json.dumps(failed.value.to_dict()) + str(failed.value)
    assert not stub.api_requests()


@pytest.mark.parametrize("missing, variable", [("api_key", "QUANTUM_API_KEY"), ("service_crn", "QUANTUM_SERVICE_CRN")])
def test_missing_credentials_fail_before_any_request(stub, missing, variable):
    client = stub.client(**{missing: None})
    with pytest.raises(AuthFailed, match="%s \\(or %s\\)" % (missing, variable)):
        client.get("d1")
    assert not stub.requests


def test_an_api_version_that_is_no_date_is_refused():
    with pytest.raises(SpecError, match="api_version: 'v2' is not an IBM-API-Version date"):
        QuantumClient("https://quantum.test/api/v1", api_version="v2")


@pytest.mark.parametrize("body, expected", [
    ({"errors": [{"code": 1007, "message": "Backend not found.", "solution": "Check the name.", "more_info": "u"}],
      "trace": "t", "status_code": 400}, "Backend not found. (code 1007); Check the name."),
    ({"errors": [{"message": "a"}, {"message": "b", "code": 2}]}, "a; b (code 2)"),
    ({"error": {"message": "Job tags exceed the maximum", "code": 1204}}, "Job tags exceed the maximum (code 1204)"),
    ({"error": "plain words"}, "plain words"),
    ({"errorCode": "BXNIM0415E", "errorMessage": "Provided API key could not be found."},
     "Provided API key could not be found. (code BXNIM0415E)"),
    ({"message": "Too many requests"}, "Too many requests"),
    ({"title": "Bad Request"}, "Bad Request"),
    ({"jobs": []}, None),
    ([1], None),
])
def test_error_text_reads_every_error_shape(body, expected):
    assert error_text(body) == expected


@pytest.mark.parametrize("response, error, text", [
    (httpx.Response(404, json={"errors": [{"code": 1291, "message": "Job not found."}]}), NotFound, "Job not found. (code 1291)"),
    (httpx.Response(409, json={"error": {"message": "Usage exceeds the instance limit"}}), Rejected, "Usage exceeds"),
    # A body that is not the service's JSON error may be any page of the server a URL points at.
    (httpx.Response(400, text="Bad pubs: circuit 0 is not OpenQASM 3\nmore"), Rejected, "Bad Request"),
    (httpx.Response(403, json={"errors": [{"message": "Forbidden"}]}), AuthFailed, "not authorized: Forbidden"),
    (httpx.Response(500, text="<html><body>Authorization: Bearer abc</body></html>"), ServerError, "Internal Server Error"),
])
def test_error_answers_become_typed_errors_with_the_services_reason(stub, response, error, text):
    client = stub.client()
    client.devices()  # the server has answered as the Runtime API: its words may be said
    stub.fail_next.append(("GET", "/api/v1/jobs/d1", response))
    with pytest.raises(error) as failed:
        client.get("d1")
    assert text in failed.value.reason and "Bearer" not in str(failed.value)
    assert "circuit 0" not in str(failed.value)
    assert failed.value.temporary is (error is ServerError)


def test_neither_the_api_key_nor_the_bearer_token_appears_in_an_error(stub):
    client = stub.client()
    client.devices()
    token = jwt(serial=1)
    echo = {"errors": [{"message": "echo %s %s" % (API_KEY, token)}]}
    stub.fail_next.append(("GET", "/api/v1/jobs/d1", httpx.Response(400, json=echo)))
    with pytest.raises(Rejected) as failed:
        client.get("d1")
    assert API_KEY not in str(failed.value) and token not in str(failed.value)
    assert "********" in failed.value.reason


def test_a_lost_connection_to_iam_is_connection_failed(stub):
    client = stub.client()
    stub.fail_next.append(("POST", "/identity/token", httpx.ConnectError("refused")))
    with pytest.raises(ConnectionFailed) as failed:
        client.devices()
    assert "IBM Cloud IAM" in str(failed.value) and failed.value.temporary


# ---------------------------------------------------------------- OpenQASM 3

@pytest.mark.parametrize("text, qubits", [
    (BELL, 2),
    ("OPENQASM 3.0;\nqubit[5] q;\nbit[5] c;\nh q[0];\n", 5),
    ("OPENQASM 3;\nqubit a;\nqubit b;\nqubit[3] r;\n", 5),
    ("OPENQASM 3;\nqreg q[4];\ncreg c[4];\n", 4),
    ("OPENQASM 3;\nconst uint n = 7;\nqubit[n] q;\n", 7),
    ("OPENQASM 3;\nconst int[32] n = 3;\nqubit[n] q;\n", 3),
    ("OPENQASM 3;\nqubit[2 * m] q;\n", None),
    ("OPENQASM 3;\nx $0;\nmeasure $126;\n", 127),
    ("OPENQASM 3;\n// qubit[99] commented;\n/* qubit[50] r;\n x $200; */\nqubit[2] q;\n", 2),
    ("OPENQASM 3;\ngate g(t) a, b { rz(t) a; }\ndef f(qubit[8] p) -> bit { return measure p[0]; }\nqubit[3] q;\n", 3),
    ("OPENQASM 3;\nbit[2] c;\n", 0),
])
def test_qubit_counting(text, qubits):
    assert circuit_shape(text)["qubits"] == qubits


def test_circuit_shape_reads_registers_and_inputs():
    text = ("OPENQASM 3.0;\ninclude \"stdgates.inc\";\ninput float[64] theta;\ninput angle phi;\nbit[2] meas;\n"
            "bit flag = 0;\ncreg old[3];\nrz(theta) $0;\n")
    assert circuit_shape(text) == {"qubits": 1, "clbits": {"meas": 2, "flag": 1, "old": 3},
                                   "inputs": ["theta", "phi"]}


@pytest.mark.parametrize("script, message", [
    ("#!/bin/bash\necho hi\n", "a script with a #! line"),
    ("OPENQASM 2.0;\ninclude \"qelib1.inc\";\nqreg q[1];\n", "is OpenQASM 2"),
    ("   \n", "needs an OpenQASM 3 circuit"),
    ("OPENQASM 3;\nqubit[2] q;\nx $0;\n", "addresses physical qubits \\(\\$n\\) and declares qubits too"),
])
def test_the_script_must_be_openqasm_3(script, message):
    with pytest.raises(SpecError, match=message) as refused:
        spec(script=script)
    assert refused.value.field == "script"


def test_no_script_is_needed_when_every_pub_has_its_circuit():
    compiled = compile_job(spec(script=None, quantum={"pubs": [{"circuit": BELL}, {"circuit": BELL, "shots": 10}]}))
    assert compiled["params"]["pubs"] == [[BELL], [BELL, None, 10]]
    with pytest.raises(SpecError, match="^script: a quantum job needs"):
        spec(script=None, quantum={"pubs": [{"circuit": BELL}, {"shots": 10}]})


def test_other_backends_still_need_a_program():
    with pytest.raises(SpecError, match="interpreter line"):
        normalize_spec({"script": BELL}, BACKENDS["slurm"])
    with pytest.raises(SpecError, match="interpreter line"):
        normalize_spec({"script": BELL})


# ---------------------------------------------------------------- compiling the spec

def test_a_sampler_job_is_the_script_as_one_pub_on_the_device_tagged_with_its_identity():
    assert compile_job(spec(name="bell", resources={"time_limit": "00:05:00"})) == {
        "program_id": "sampler", "backend": "ibm_kingston",
        "params": {"pubs": [[BELL]], "version": 2},
        "tags": ["bridge", "bridge:bell-1", "bridge-name:bell"], "cost": 300}


def test_every_sampler_option_compiles():
    compiled = compile_job(spec(quantum={
        "shots": 4000, "options": {"default_shots": 100, "dynamical_decoupling": {"enable": True}},
        "session": "s-1", "log_level": "info", "private": True,
        "pubs": [{"shots": 10}, {"circuit": "OPENQASM 3;\ninput float[64] t;\nbit[1] c;\nrz(t) $0;\nc[0] = measure $0;\n",
                                 "parameter_values": {"t": [0.1, 0.2]}}]}))
    assert compiled["params"] == {
        "pubs": [[BELL, None, 10], ["OPENQASM 3;\ninput float[64] t;\nbit[1] c;\nrz(t) $0;\nc[0] = measure $0;\n",
                                    {"t": [0.1, 0.2]}]],
        "version": 2, "shots": 4000, "options": {"default_shots": 100, "dynamical_decoupling": {"enable": True}}}
    assert (compiled["session_id"], compiled["log_level"], compiled["private"]) == ("s-1", "info", True)


def test_an_estimator_job_has_observables_precision_and_resilience():
    compiled = compile_job(spec(quantum={
        "primitive": "estimator", "precision": 0.02, "resilience_level": 1,
        "pubs": [{"observables": {"ZZ": 1.0, "XX": -0.5}}, {"observables": ["IZ", {"ZI": 2}], "precision": 0.1}]}))
    assert compiled["program_id"] == "estimator"
    assert compiled["params"] == {"pubs": [[BELL, {"ZZ": 1.0, "XX": -0.5}], [BELL, ["IZ", {"ZI": 2}], None, 0.1]],
                                  "version": 2, "precision": 0.02, "resilience_level": 1}


@pytest.mark.parametrize("params, field, message", [
    ({"environment": {"A": "1"}}, "environment", "no environment"),
    ({"working_directory": "/tmp"}, "working_directory", "no working directory"),
    ({"stdout": "x"}, "stdout", "quantum_job_info"),
    ({"stderr": "x"}, "stderr", "logs=true"),
    ({"account": "a"}, "account", "service_crn"),
    ({"qos": "q"}, "qos", "no quality of service"),
    ({"constraints": "c"}, "constraints", "name the device"),
    ({"resources": {"nodes": 2}}, "resources.nodes", "only resources.time_limit"),
    ({"resources": {"memory": "4G"}}, "resources.memory", "only resources.time_limit"),
    ({"resources": {"gpus": 1, "gpu_type": "a100"}}, "resources.gpus", "only resources.time_limit"),
    ({"quantum": {"shot": 5}}, "backend_options.quantum.shot", "unknown option; allowed: primitive, pubs"),
    ({"quantum": {"primitive": "sampling"}}, "backend_options.quantum.primitive", "use sampler or estimator"),
    ({"quantum": {"pubs": []}}, "backend_options.quantum.pubs", "non-empty list"),
    ({"quantum": {"pubs": [{"shots": 0}]}}, "backend_options.quantum.pubs[0].shots", "1 or more"),
    ({"quantum": {"pubs": [{"observables": "ZZ"}]}}, "backend_options.quantum.pubs[0].observables", "for the estimator"),
    ({"quantum": {"pubs": [{"qubits": 2}]}}, "backend_options.quantum.pubs[0].qubits", "unknown PUB field"),
    ({"quantum": {"primitive": "estimator"}}, "backend_options.quantum.pubs[0].observables", "needs observables"),
    ({"quantum": {"primitive": "estimator", "pubs": [{"observables": "ZZZ"}]}},
     "backend_options.quantum.pubs[0].observables", "'ZZZ' has 3 Paulis but the circuit is 2 qubits wide"),
    ({"quantum": {"primitive": "estimator", "pubs": [{"observables": {"ZQ": 1}}]}},
     "backend_options.quantum.pubs[0].observables", "not a Pauli string"),
    ({"quantum": {"primitive": "estimator", "pubs": [{"observables": {"ZZ": "1"}}]}},
     "backend_options.quantum.pubs[0].observables.ZZ", "coefficient must be a number"),
    ({"quantum": {"primitive": "estimator", "pubs": [{"observables": "ZZ", "shots": 5}]}},
     "backend_options.quantum.pubs[0].shots", "takes precision"),
    ({"quantum": {"primitive": "estimator", "shots": 5, "pubs": [{"observables": "ZZ"}]}}, "backend_options.quantum.shots",
     "takes precision"),
    ({"quantum": {"precision": 0.1}}, "backend_options.quantum.precision", "takes shots"),
    ({"quantum": {"resilience_level": 1}}, "backend_options.quantum.resilience_level", "estimator only"),
    ({"quantum": {"pubs": [{"parameter_values": [1.0]}]}}, "backend_options.quantum.pubs[0].parameter_values",
     "declares no input parameters"),
    ({"quantum": {"pubs": [{"circuit": "OPENQASM 3;\ninput float[64] a;\ninput float[64] b;\nqubit q;\n"}]}},
     "backend_options.quantum.pubs[0].parameter_values", "declares inputs a, b"),
    ({"quantum": {"pubs": [{"circuit": "OPENQASM 3;\ninput float[64] a;\nqubit q;\n", "parameter_values": {"b": 1}}]}},
     "backend_options.quantum.pubs[0].parameter_values", "exactly: a"),
    ({"quantum": {"pubs": [{"circuit": "OPENQASM 3;\ninput float[64] a;\ninput float[64] b;\nqubit q;\n",
                            "parameter_values": [[1, 2, 3]]}]}},
     "backend_options.quantum.pubs[0].parameter_values", "must hold 2 values"),
    ({"quantum": {"pubs": [{"circuit": "OPENQASM 2.0;\nqreg q[1];\n"}]}}, "backend_options.quantum.pubs[0].circuit", "OpenQASM 2"),
    ({"quantum": {"session": "s1", "mode": "batch"}}, "backend_options.quantum.mode", "not both"),
    ({"quantum": {"mode": "exclusive"}}, "backend_options.quantum.mode", "use batch or session"),
    ({"quantum": {"max_ttl": 60}}, "backend_options.quantum.max_ttl", "needs mode"),
    ({"quantum": {"log_level": "loud"}}, "backend_options.quantum.log_level", "must be one of"),
    ({"quantum": {"options": "fast"}}, "backend_options.quantum.options", "dictionary of primitive options"),
    ({"quantum": ["sampler"]}, "backend_options.quantum", "must be a dictionary"),
])
def test_what_a_primitive_run_cannot_take_is_refused_naming_the_field(params, field, message):
    with pytest.raises(SpecError) as refused:
        compile_job(spec(**params))
    assert refused.value.field == field
    assert message in refused.value.reason


def test_without_a_device_the_body_names_none_and_check_refuses_it(stub):
    assert "backend" not in compile_job(spec(queue=None))
    with pytest.raises(SpecError, match="queue: name the device.*available: ibm_kingston, ibm_paused, ibm_small"):
        stub.client().check(spec(queue=None))


# ---------------------------------------------------------------- check

def test_check_reads_device_status_configuration_and_usage_once(stub):
    client = stub.client()
    client.check(spec())
    client.check(spec(identity="bell-2"))
    paths = [urllib.parse.urlparse(url).path for _method, url in stub.api_requests()]
    assert paths == ["/api/v1/backends", "/api/v1/backends/ibm_kingston/status",
                     "/api/v1/backends/ibm_kingston/configuration", "/api/v1/instances/usage"]
    assert not client.warnings


@pytest.mark.parametrize("params, field, message", [
    ({"queue": "ibm_nosuch"}, "queue", "'ibm_nosuch' is not a device of this instance; available: ibm_kingston, ibm_paused, ibm_small"),
    ({"queue": "ibm_paused"}, "queue", "device 'ibm_paused' is not operational (maintenance)"),
    ({"queue": "ibm_small", "script": "OPENQASM 3;\nqubit[3] q;\nbit[3] c;\n"}, "script",
     "the circuit is 3 qubits wide but device 'ibm_small' has 2"),
    ({"queue": "ibm_small", "quantum": {"pubs": [{}, {"circuit": "OPENQASM 3;\nbit[1] c;\nc[0] = measure $5;\n"}]}},
     "backend_options.quantum.pubs[1].circuit", "6 qubits wide"),
])
def test_check_refuses_what_the_device_cannot_run(stub, params, field, message):
    with pytest.raises(SpecError) as refused:
        stub.client().check(spec(**params))
    assert (refused.value.field, message in refused.value.reason) == (field, True), refused.value.reason


def test_check_refuses_a_spent_instance_and_warns_of_circuits_without_outcomes(stub):
    client = stub.client()
    client.check(spec(script="OPENQASM 3;\nqubit[2] q;\nh q[0];\n", resources={"time_limit": 240}))
    assert any("declares no classical bits" in warning for warning in client.warnings)
    assert any("caps a job's maximum execution time at 10800" in warning for warning in client.warnings)
    stub.usage = {"usage_limit_reached": True, "usage_limit_seconds": 600, "usage_consumed_seconds": 612}
    with pytest.raises(Rejected, match="reached its usage limit \\(612 of 600 seconds used\\)"):
        stub.client().check(spec())


# ---------------------------------------------------------------- submit, find, list, cancel

def test_submit_posts_exactly_the_rendered_body_once(stub):
    client = stub.client()
    job_id = client.submit(spec(name="bell"))
    assert [json.loads(body) for (method, url), body in zip(stub.requests, stub.bodies)
            if method == "POST" and url.endswith("/jobs")] == [client.render(spec(name="bell"))]
    job = client.get(job_id)
    assert (job["identity"], job["name"], job["phase"], job["device"], job["primitive"]) == (
        "bell-1", "bell", "queued", "ibm_kingston", "sampler")


def test_a_lost_submit_answer_is_looked_up_by_identity_not_sent_again(stub):
    client = stub.client()
    lost = []

    def answer_lost(request):
        response = stub.handle(request)
        if request.method == "POST" and request.url.path == "/api/v1/jobs" and not lost:
            lost.append(response)
            raise httpx.ReadTimeout("no answer")
        return response

    client.transport.http._transport = httpx.MockTransport(answer_lost)
    job_id = client.submit(spec())
    assert len(stub.jobs) == 1 and job_id in stub.jobs
    assert [method for method, url in stub.api_requests() if url.endswith("/api/v1/jobs")] == ["POST"]


@pytest.mark.parametrize("failure", [httpx.ConnectError("reset"), httpx.Response(502, text="Bad Gateway")])
def test_a_submit_that_never_arrived_says_so(stub, failure):
    client = stub.client()
    stub.fail_next.append(("POST", "/api/v1/jobs", failure))
    with pytest.raises((ConnectionFailed, ServerError), match="was not retried \\(no job with identity 'bell-1' exists now\\)"):
        client.submit(spec())
    assert not stub.jobs


def test_a_refused_submit_is_not_looked_up(stub):
    client = stub.client()
    stub.fail_next.append(("POST", "/api/v1/jobs", httpx.Response(400, json={
        "errors": [{"message": "bad pub"}], "trace": "0f", "status_code": 400})))
    with pytest.raises(Rejected, match="bad pub"):
        client.submit(spec())
    assert not [url for _method, url in stub.api_requests() if "tags=" in url]


def test_mode_opens_a_session_for_the_job_and_closes_it_to_new_jobs(stub):
    client = stub.client()
    job_id = client.submit(spec(quantum={"mode": "session", "max_ttl": 600}))
    assert stub.sessions == {"s001": {"mode": "dedicated", "backend": "ibm_kingston", "instance": CRN, "max_ttl": 600,
                                      "accepting_jobs": False}}
    assert stub.jobs[job_id]["session_id"] == "s001"
    stub.fail_next.append(("POST", "/api/v1/jobs", httpx.Response(400, json={"errors": [{"message": "no"}]})))
    with pytest.raises(Rejected):
        client.submit(spec(identity="bell-2", quantum={"mode": "batch"}))
    assert stub.sessions["s002"]["accepting_jobs"] is False, "a session whose job was refused is closed too"


def test_find_many_asks_by_tag_one_identity_alone_and_several_through_the_bridge_tag(stub):
    client = stub.client()
    first, second = client.submit(spec()), client.submit(spec(identity="bell-2"))
    stub.requests[:] = []
    assert client.find("bell-1")["job_id"] == first
    assert [urllib.parse.parse_qs(urllib.parse.urlparse(url).query)["tags"] for _m, url in stub.api_requests()] == [
        ["bridge:bell-1"]]
    stub.requests[:] = []
    found = client.find_many(["bell-1", "bell-2", "bell-3"])
    assert (found["bell-1"]["job_id"], found["bell-2"]["job_id"], "bell-3" in found) == (first, second, False)
    assert [urllib.parse.parse_qs(urllib.parse.urlparse(url).query)["tags"] for _m, url in stub.api_requests()] == [
        ["bridge"], ["bridge:bell-3"]], "identities missing from the shared page are asked for by their own tag"


def test_list_pages_through_the_jobs_and_lets_the_service_filter_pending(stub, monkeypatch):
    monkeypatch.setattr(quantum_client, "PAGE_SIZE", 2)
    client = stub.client()
    ids = [client.submit(spec(identity="j%d" % n)) for n in range(5)]
    stub.jobs[ids[0]]["state"] = {"status": "Completed"}
    stub.requests[:] = []
    assert sorted(job["job_id"] for job in client.list()) == sorted(ids)
    assert len(stub.api_requests()) == 3
    assert [job["job_id"] for job in client.list(limit=3)] == ids[::-1][:3]
    stub.requests[:] = []
    assert [job["job_id"] for job in client.list(phases=["completed"])] == [ids[0]]
    assert "pending=false" in stub.api_requests()[0][1]
    assert len(client.list(phases=["queued", "running"], device="ibm_kingston")) == 4


def test_cancel_of_a_finished_job_is_quiet_and_of_an_unknown_job_not_found(stub):
    client = stub.client()
    job_id = client.submit(spec())
    client.cancel(job_id)
    assert client.get(job_id)["phase"] == "cancelled"
    client.cancel(job_id)
    with pytest.raises(NotFound):
        client.cancel("d-nosuch")


def test_logs_are_text_and_none_kept_is_empty(stub):
    client = stub.client()
    job_id = client.submit(spec())
    assert client.logs(job_id) == ""
    stub.logs[job_id] = "one\ntwo\nthree\n"
    assert client.logs(job_id) == "one\ntwo\nthree\n"
    assert client.logs(job_id, tail_lines=2) == "two\nthree\n"


def test_metrics_and_sessions(stub):
    client = stub.client()
    job_id = client.submit(spec())
    metrics = client.metrics(job_id)
    assert (metrics["created"], metrics["running"], metrics["finished"], metrics["usage_status"]) == (
        "2026-12-01T11:01:00Z", "2026-12-01T11:30:00Z", None, "pending")
    session = client.create_session("ibm_kingston", "batch")
    client.close_session(session)
    assert stub.sessions[session] == {"mode": "batch", "backend": "ibm_kingston", "instance": CRN, "accepting_jobs": False}


def test_device_details_merge_list_status_and_configuration(stub):
    devices = stub.client().device_details(["ibm_small"], ("status", "configuration", "properties"))
    assert len(devices) == 1
    device = devices[0]
    assert (device["name"], device["qubits"], device["operational"], device["status_message"], device["basis_gates"],
            device["processor_type"], device["max_shots"]) == (
        "ibm_small", 2, True, "active", ["cz", "id", "rz", "sx", "x"], "Heron r2", 100000)
    assert set(device["native"]) == {"list", "status", "configuration"} and device["properties"]["general"] == []
    with pytest.raises(NotFound, match="no such device; available: ibm_kingston, ibm_paused, ibm_small"):
        stub.client().device_details(["ibm_x"])


# ---------------------------------------------------------------- states, from the hand-written answers

@pytest.mark.parametrize("case, phase, failure_class, reason", [
    ("job_queued", "queued", None, None),
    ("job_running", "running", None, None),
    ("job_completed", "completed", None, None),
    ("job_failed", "failed", "non_zero_exit", "Error in transpilation process."),
    ("job_cancelled", "cancelled", "cancelled", None),
    ("job_ran_too_long", "failed", "timeout", "RAN TOO LONG"),
    ("job_ran_too_long_legacy", "failed", "timeout", "RAN TOO LONG"),
])
def test_states_from_hand_written_answers(case, phase, failure_class, reason):
    job = normalize_job(recorded("quantum", "handwritten", case)["body"])
    assert (job["phase"], job["failure_class"], job["reason"]) == (phase, failure_class, reason)
    assert job["terminal"] is (phase in ("completed", "failed", "cancelled"))


def test_a_job_carries_its_identity_name_times_and_codes():
    job = normalize_job(recorded("quantum", "handwritten", "job_queued")["body"])
    assert (job["identity"], job["name"], job["submit_time"], job["native_state"]) == (
        "bell-1", "bell", "2026-12-01T11:00:01Z", "Queued")
    legacy = normalize_job(recorded("quantum", "handwritten", "job_ran_too_long_legacy")["body"])
    assert (legacy["identity"], legacy["name"], legacy["reason_code"], legacy["primitive"]) == (None, None, 1305, "estimator")
    failed = normalize_job(recorded("quantum", "handwritten", "job_failed")["body"])
    assert (failed["reason_code"], failed["reason_solution"]) == (1003, "Ensure your quantum circuit is valid and well-formed.")


@pytest.mark.parametrize("state, phase, failure_class", [
    ({"status": "COMPLETED"}, "completed", None),
    ({"status": "Failed", "reason": "Job exceeded its maximum execution time"}, "failed", "timeout"),
    ({"status": "Initializing"}, "queued", None),
])
def test_states_are_read_case_insensitively_and_unknown_ones_are_never_final(state, phase, failure_class):
    job = normalize_job({"id": "d1", "state": state, "created": "2026-12-01T12:00:00+01:00"})
    assert (job["phase"], job["failure_class"], job["submit_time"]) == (phase, failure_class, "2026-12-01T11:00:00Z")


# ---------------------------------------------------------------- numpy bytes and results, without numpy

def test_npy_headers_of_both_versions_and_fortran_order():
    assert parse_npy(npy("<f8", (2,), float64s([1.5, -2.0]))).tolist() == [1.5, -2.0]
    assert parse_npy(npy("<f8", (), float64s([0.25]))).tolist() == 0.25
    assert parse_npy(npy("<i8", (2, 3), struct.pack("<6q", 0, 3, 1, 4, 2, 5), fortran=True)).tolist() == [
        [0, 1, 2], [3, 4, 5]]
    assert parse_npy(npy("|u1", (2, 2), b"\x01\x02\x03\x04", version=2)).tolist() == [[1, 2], [3, 4]]
    assert parse_npy(npy(">i4", (2,), struct.pack(">2i", -1, 7))).tolist() == [-1, 7]
    assert parse_npy(npy("<c16", (1,), struct.pack("<2d", 1.0, -0.5))).tolist() == [[1.0, -0.5]]
    assert parse_npy(npy("|b1", (3,), b"\x01\x00\x01")).tolist() == [True, False, True]


@pytest.mark.parametrize("data, message", [
    (b"PK\x03\x04", "no \\\\x93NUMPY magic"),
    (npy("|O", (1,), b"\x00"), "not a number type"),
    (npy("<f8", (3,), float64s([1.0])), "not of the size its header says"),
    (b"\x93NUMPY\x09\x00", "format version that numpy does not write"),
])
def test_npy_that_is_no_number_array_is_refused(data, message):
    with pytest.raises(ShapeError, match=message):
        parse_npy(data)


def test_a_decompression_bomb_is_refused(monkeypatch):
    monkeypatch.setattr(quantum_results, "MAX_DECODED_BYTES", 1000)
    with pytest.raises(ValueError, match="more than 1000 bytes"):
        decode_ndarray(ndarray_tag("|u1", (5000,), b"\x00" * 5000)["__value__"])


def test_hand_built_sampler_result_becomes_counts_per_register():
    body = primitive_result([{"meas": bit_array([0b11, 0b11, 0b00, 0b10], 2), "wide": bit_array([0x3ff, 1], 10)}])
    decoded = decode_results(json.dumps(body), max_bitstrings=3)
    meas, wide = decoded["pubs"][0]["data"]["meas"], decoded["pubs"][0]["data"]["wide"]
    assert meas == {"num_bits": 2, "shape": [], "shots": 4, "counts": {"00": 1, "10": 1, "11": 2}}
    assert wide == {"num_bits": 10, "shape": [], "shots": 2, "counts": {"0000000001": 1, "1111111111": 1},
                    "bitstrings": ["1111111111", "0000000001"]}
    assert decoded["format"] == "qiskit" and decoded["metadata"] == {"version": 2}


def test_hand_built_estimator_result_becomes_lists_of_floats():
    body = primitive_result([{"evs": ndarray_tag("<f8", (2,), float64s([0.5, -0.25])),
                              "stds": ndarray_tag("<f8", (), float64s([0.125]))}], kind="PubResult",
                            metadata={"resilience": {"zne": {"extrapolator": {"__type__": "ndarray", "__value__": "linear"}}},
                                      "when": {"__type__": "datetime", "__value__": "2026-12-01T11:00:00+00:00"}})
    decoded = decode_results(json.dumps(body))
    assert decoded["pubs"][0]["data"] == {"evs": [0.5, -0.25], "stds": 0.125}
    assert decoded["metadata"] == {"resilience": {"zne": {"extrapolator": "linear"}}, "when": "2026-12-01T11:00:00+00:00"}


@pytest.mark.parametrize("case, data", [
    ("results_sampler_qiskit", {"meas": {"num_bits": 2, "shape": [], "shots": 100, "counts": {"00": 50, "11": 50}}}),
    ("results_sampler_sweep_qiskit", {"meas": {"num_bits": 10, "shape": [2], "shots": 10,
                                               "counts": {"0000000001": 10, "1111111111": 10},
                                               "binding_counts": [{"0000000001": 10}, {"1111111111": 10}]}}),
    ("results_estimator_qiskit", {"evs": [1.0, 1.0, -0.02], "stds": [0.0, 0.0, 0.04998999899979995]}),
])
def test_results_encoded_by_qiskit_ibm_runtime_decode_to_what_qiskit_printed(case, data):
    decoded = decode_results(recorded("quantum", "runtime_encoder", case)["body"], max_bitstrings=0)
    assert decoded["format"] == "qiskit" and decoded["pubs"][0]["data"] == data


def test_execution_spans_decode_to_plain_data():
    decoded = decode_results(recorded("quantum", "runtime_encoder", "results_sampler_qiskit")["body"], max_bitstrings=0)
    span = decoded["metadata"]["execution"]["execution_spans"]["spans"][0]
    assert (span["start"], span["stop"], span["data_slices"]) == (
        "2026-12-01T11:02:05+00:00", "2026-12-01T11:02:09+00:00", {"0": [[1], 0, 1, 0, 100]})
    json.dumps(decoded)


def test_plain_json_results_decode_alike():
    sampler = decode_results(recorded("quantum", "handwritten", "results_sampler_json")["body"])
    assert sampler["format"] == "json"
    assert sampler["pubs"][0]["data"]["meas"] == {"num_bits": 2, "shape": [], "shots": 6, "counts": {"00": 2, "10": 1, "11": 3},
                                                  "bitstrings": ["11", "11", "00", "11", "10", "00"]}
    estimator = decode_results(recorded("quantum", "handwritten", "results_estimator_json")["body"])
    assert estimator["pubs"][0]["data"]["evs"] == -0.9374102500618965
    swept = decode_results(json.dumps({"results": [{"data": {"c": {"samples": [["0x1", "0x0"], ["0x1", "0x1"]], "num_bits": 1}}}]}))
    register = swept["pubs"][0]["data"]["c"]
    assert (register["shape"], register["counts"], register["binding_counts"]) == ([2], {"0": 1, "1": 3}, [{"0": 1, "1": 1}, {"1": 2}])


def test_results_of_a_completed_job_through_the_client(stub):
    client = stub.client()
    job_id = client.submit(spec())
    stub.results[job_id] = json.dumps(primitive_result([{"meas": bit_array([3, 0], 2)}]))
    assert client.results(job_id)["pubs"][0]["data"]["meas"]["counts"] == {"00": 1, "11": 1}
    stub.results[job_id] = "Traceback (most recent call last):\n  boom\n"
    with pytest.raises(MalformedResponse, match="results answered"):
        client.results(job_id)


@pytest.mark.parametrize("body", [
    json.dumps({"jobs": []}),
    json.dumps(primitive_result([{"meas": {"__type__": "BitArray", "__value__": {"array": ndarray_tag("<f8", (1, 1), float64s([1.0])), "num_bits": 2}}}])),
    json.dumps(primitive_result([{"meas": {"__type__": "BitArray", "__value__": {"array": ndarray_tag("|u1", (1, 1), b"\x01"), "num_bits": 12}}}])),
    json.dumps({"__type__": "PrimitiveResult", "__value__": {"pub_results": [{"__type__": "ndarray", "__value__": "eJzz9HMN8g"}]}}),
    json.dumps({"results": [{"data": {"meas": {"samples": [3], "num_bits": 2}}}]}),
    json.dumps({"__type__": "PrimitiveResult",
                "__value__": {"pub_results": [{"__type__": "ndarray", "__value__": zlib.compress(b"x").hex()}]}}),
])
def test_results_of_another_shape_are_refused(body):
    with pytest.raises((TypeError, ValueError, KeyError, AttributeError)):
        decode_results(body)


# ---------------------------------------------------------------- answers recorded from the simulator

def replayed(case):
    """httpx.Response of an answer recorded from the Qiskit Runtime SIMULATOR (not IBM Quantum)."""
    fixture = recorded("quantum", "simulator", case)
    headers = {"content-type": fixture["headers"]["content-type"]}
    if isinstance(fixture["body"], (dict, list)):
        return httpx.Response(fixture["status"], json=fixture["body"], headers=headers)
    return httpx.Response(fixture["status"], text=fixture["body"], headers=headers)


@pytest.mark.parametrize("case, phase, failure_class, end_time", [
    ("job_queued", "queued", None, False),
    ("job_completed", "completed", None, True),
    ("job_cancelled", "cancelled", "cancelled", True),
    ("job_ran_too_long", "failed", "timeout", True),
])
def test_jobs_recorded_from_the_simulator(case, phase, failure_class, end_time):
    job = normalize_job(recorded("quantum", "simulator", case)["body"])
    assert (job["phase"], job["failure_class"], job["end_time"] is not None) == (phase, failure_class, end_time)
    assert job["identity"].startswith("fixture-") and job["device"] in ("ibm_manila", "ibm_lima")


def test_a_job_list_recorded_from_the_simulator():
    jobs, count = _job_list(recorded("quantum", "simulator", "jobs_by_tag")["body"])
    assert len(jobs) == count and all(job["identity"] for job in jobs)


def test_results_recorded_from_the_simulator():
    sampler = decode_results(recorded("quantum", "simulator", "results_sampler")["body"], max_bitstrings=0)
    meas = sampler["pubs"][0]["data"]["meas"]
    assert (meas["num_bits"], meas["shots"], sum(meas["counts"].values())) == (2, 100, 100)
    assert set(meas["counts"]) <= {"00", "01", "10", "11"}
    estimator = decode_results(recorded("quantum", "simulator", "results_estimator")["body"])
    data = estimator["pubs"][0]["data"]
    assert len(data["evs"]) == len(data["stds"]) == 3 and all(isinstance(value, float) for value in data["evs"])
    with pytest.raises(ValueError):
        decode_results(recorded("quantum", "simulator", "results_ran_too_long")["body"])


def test_devices_status_and_usage_recorded_from_the_simulator():
    devices = _devices(recorded("quantum", "simulator", "backends")["body"])
    assert [(device["name"], device["status"]) for device in devices] == [
        ("ibm_manila", "online"), ("ibm_nairobi", "online"), ("ibm_lima", "paused")]
    status = normalize_status("ibm_lima", recorded("quantum", "simulator", "backend_status_paused")["body"])
    assert (status["operational"], status["status_message"]) == (False, "maintenance")
    assert normalize_usage(recorded("quantum", "simulator", "usage")["body"])["limit_reached"] is False


@pytest.mark.parametrize("verb, method, path, case, error, text", [
    (lambda client: client.submit(spec()), "POST", "/api/v1/jobs", "submit_non_isa", Rejected, "non-ISA circuits"),
    (lambda client: client.devices(), "GET", "/api/v1/backends", "wrong_crn", AuthFailed, "Service-CRN does not name"),
    (lambda client: client.get("x"), "GET", "/api/v1/jobs/x", "job_unknown", NotFound, "Job not found"),
])
def test_refusals_recorded_from_the_simulator_are_typed(stub, verb, method, path, case, error, text):
    client = stub.client()
    stub.fail_next.append((method, path, replayed(case)))
    with pytest.raises(error, match=text):
        verb(client)


def test_cancel_and_a_wrong_key_recorded_from_the_simulator(stub):
    client = stub.client()
    stub.fail_next.append(("POST", "/api/v1/jobs/j1/cancel", replayed("cancel")))
    client.cancel("j1")
    stub.fail_next.append(("POST", "/api/v1/jobs/j1/cancel", replayed("cancel_final")))
    client.cancel("j1")
    stub.fail_next.append(("POST", "/identity/token", replayed("token_bad_key")))
    with pytest.raises(AuthFailed, match="Provided API key could not be found"):
        stub.client().devices()


def test_a_results_summary_keeps_the_most_frequent_outcomes_and_bounded_values():
    counts = dict((format(n, "05b"), n + 1) for n in range(20))
    sampler = {"pubs": [{"data": {"meas": {"num_bits": 5, "shape": [], "shots": 210, "counts": counts}}}]}
    summary = summarize_results(sampler, outcomes=3)
    assert summary == {"pubs": [{"registers": {"meas": {"shots": 210, "outcomes": 20,
                                                        "counts": {"10011": 20, "10010": 19, "10001": 18}}}}],
                       "truncated": True}
    estimator = {"pubs": [{"data": {"evs": [[0.5, -0.25], [1.0, 0.0]], "stds": [[0.1, 0.1], [0.0, 0.2]]}},
                          {"data": {"evs": 0.75, "stds": 0.01}}]}
    summary = summarize_results(estimator, values=3)
    assert summary["pubs"] == [{"evs": [0.5, -0.25, 1.0], "stds": [0.1, 0.1, 0.0], "shape": [2, 2]},
                               {"evs": [0.75], "stds": [0.01], "shape": []}]
    assert summary["truncated"] is True
    first = summarize_results(estimator, pubs=1)
    assert first["pubs"] == [{"evs": [0.5, -0.25, 1.0, 0.0], "stds": [0.1, 0.1, 0.0, 0.2], "shape": [2, 2]}]
    assert first["truncated"] is True


def test_a_results_summary_of_what_qiskit_ibm_runtime_encoded():
    decoded = decode_results(recorded("quantum", "runtime_encoder", "results_estimator_qiskit")["body"], max_bitstrings=0)
    assert summarize_results(decoded) == {
        "pubs": [{"evs": [1.0, 1.0, -0.02], "stds": [0.0, 0.0, 0.04998999899979995], "shape": [3]}], "truncated": False}


def test_only_a_completed_job_has_a_results_summary(stub):
    client = stub.client()
    job_id = client.submit(spec())
    assert client.results_summary({"job_id": job_id, "phase": "failed"}) is None
    assert client.results_summary({"job_id": job_id, "phase": "completed", "private": True}) is None
    stub.results[job_id] = json.dumps(primitive_result([{"meas": bit_array([3, 0, 3], 2)}]))
    summary = client.results_summary({"job_id": job_id, "phase": "completed"})
    assert summary["pubs"][0]["registers"]["meas"] == {"shots": 3, "outcomes": 2, "counts": {"11": 2, "00": 1}}
