"""A SIMULATOR of IBM Quantum Platform's Qiskit Runtime REST API, for Bridge's tests.

It is not IBM Quantum: a stdlib HTTP server on 127.0.0.1 that speaks the Runtime API (under /api/v1)
as the shared docs describe it (docs external-apis.md §3, quantum-lsf.md §A) and really executes the
submitted Sampler and Estimator primitives with qiskit-aer, on the configuration and calibration
(noise) data of devices of qiskit_ibm_runtime.fake_provider. It also answers the three IBM Cloud
calls the official client makes first: IAM's API-key exchange, Global Search and Global Catalog.
Every behaviour names what it follows: "IBM: <page>" (quantum.cloud.ibm.com/docs pages), "client:
<file>" (the official qiskit-ibm-runtime 0.51.0, whose requests it must answer), an issue report,
or "docs silent" for a choice of this simulator.

Run it with the python of the qiskit venv (tools/quantum-runtime.sh installs and starts it):

    python tests/simulators/quantum_runtime.py --port 0 --state-dir DIR --credentials-file F

F holds "api_key=K" lines (one or more) and one "crn=CRN" line. Results are encoded here, with
numpy, zlib and QPY, not with qiskit-ibm-runtime's RuntimeEncoder: the official client decoding
them and ibm_quantum_schemas validating them are then two independent checks of this file.
"""

import argparse
import base64
import hashlib
import hmac
import io
import json
import math
import os
import secrets
import sys
import threading
import time
import traceback
import urllib.parse
import zlib
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler

import numpy
from qiskit import qasm3, qpy
from qiskit.circuit import ControlFlowOp, QuantumCircuit
from qiskit.primitives import BackendEstimatorV2, BackendSamplerV2
from qiskit.primitives.containers.estimator_pub import EstimatorPub
from qiskit.primitives.containers.sampler_pub import SamplerPub
from qiskit_aer import AerSimulator
from qiskit_ibm_runtime import fake_provider
# The simulators' shared HTTP pieces (simhttp.py, next to this file, which is run as a script).
from simhttp import AccessLogServer, InProcess, serve, write_atomically

API = "/api/v1"
JSON_TYPE = "application/json"
# IBM: "Qiskit Runtime REST API" changelog; the dates the official clients send (external-apis.md §3.1).
API_VERSIONS = ["2024-01-01", "2025-01-01", "2025-05-01", "2026-02-15", "2026-04-15"]
APIKEY_GRANT = "urn:ibm:params:oauth:grant-type:apikey"
# The official client sends QPY min(17, qiskit's QPY_VERSION) (client: json.py,
# SERVICE_MAX_SUPPORTED_QPY_VERSION); ibm_quantum_schemas accepts 13..17 (TypedQpyCircuitModelV13to17).
QPY_VERSIONS = range(13, 18)
# IBM: "Maximum execution time": the service's own job timeout caps max_execution_time (`cost`),
# 0..10800 s (external-apis.md §3.4); a job without `cost` gets the cap.
MAX_COST = 10800
# IBM: "Job limits": at most 10 million executions (circuits after broadcasting times shots).
MAX_EXECUTIONS = 10_000_000
DEFAULT_SHOTS = 4096            # quantum-lsf.md §A3: shots null -> options.default_shots, else 4096
DEFAULT_PRECISION = 0.015625    # Estimator default_precision (IBM: "Estimator options"; qiskit's too)
PROGRAMS = ("sampler", "estimator")
QUEUED, RUNNING, COMPLETED, FAILED, CANCELLED = "Queued", "Running", "Completed", "Failed", "Cancelled"
FINAL = (COMPLETED, FAILED, CANCELLED)
# Error codes: IBM's "Error code registry" (quantum.cloud.ibm.com/docs/errors; the older, longer list
# is qiskit-ibm-runtime's docs/errors.rst), named here where a behaviour uses them. Where the registry
# has no code for a case, the nearest one is used and the comment says so.
RAN_TOO_LONG = 1305     # "RAN TOO LONG" (external-apis.md §3.5)
NON_ISA = 1517          # non-ISA circuits (Qiskit/qiskit-ibm-runtime issue 1519)
INVALID_JOB = 3211      # "Job not valid" (Qiskit/qiskit-ibm-runtime issue 1979)
BAD_PAYLOAD = 3220      # "Payload not valid"
BAD_BODY = 3500         # "Body is wrong"
QASM_PARSE = 2304       # "Error parsing QASM"
TOO_MANY_QUBITS = 1109  # "The number of qubits used ... is more than the number of qubits supported"
TOO_MANY_SHOTS = 6000   # "Too many shots given ({} > {})"
JOB_TOO_LONG = 3248     # "Your job is too long"
JOB_NOT_FOUND = 3250    # "Job not found"
JOB_NOT_CANCELLED = 3208  # "Job not cancelled"
JOB_STATE = 3213        # "Job status not valid"
JOB_ACCESS = 3207       # "Job access not allowed"
SESSION_CLOSED = 4001   # "Job is part of a session that's been closed"
AER_FAILED = 5204       # "Error raised when execution on AER failed"
NOT_FOUND = 3811        # "Request not found"
BAD_DATE, BAD_LIMIT = 3903, 3216  # "Invalid date", "Limit not valid"
INTERNAL = 1000         # "API Internal error"
BACKEND_NOT_FOUND = 1007  # "Backend not found"
NOT_AUTHORIZED = 1200   # "You are not authorized to perform this action"
BAD_CREDENTIALS = 1201  # "Invalid credentials"
OVER_QUOTA = 4317       # "You have exceeded your monthly quota" (Qiskit/qiskit-ibm-runtime issue 1124)
LOG_LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}

# The devices served: small fake-provider devices (quick to transpile for and to simulate with noise)
# under ibm_* names, as real devices are named. `status` is the /backends status name (IBM API
# version >= 2025-01-01: online|paused|offline, external-apis.md §3.3). A paused device accepts jobs,
# which wait in its queue until it is back online (docs silent; IBM's status page shows queued jobs on
# paused devices); ibm_lima stays paused, so a job sent there stays Queued for as long as a test likes.
DEVICES = (
    {"name": "ibm_manila", "fake": "FakeManilaV2", "status": "online", "reason": ""},
    {"name": "ibm_nairobi", "fake": "FakeNairobiV2", "status": "online", "reason": ""},
    {"name": "ibm_lima", "fake": "FakeLimaV2", "status": "paused", "reason": "Maintenance: calibration in progress"},
)


class ApiError(Exception):
    """A Runtime API error: HTTP status, IBM error code, message and solution."""

    def __init__(self, status, code, message, solution=None):
        super().__init__(message)
        self.status, self.code, self.message, self.solution = status, code, message, solution

    def body(self):
        # The Runtime API's error body, as reported from the live service (Quantinuum/pytket-qiskit
        # issue 288: {"errors":[{"message","code","more_info"}]}), plus IBM Cloud's "trace" and
        # "status_code" (IBM Cloud API handbook "Errors"). The official client looks for
        # {"error":{"message","code"}} and falls back to the raw text (client: api/session.py), so its
        # exceptions carry this text either way.
        error = {"code": self.code, "message": self.message, "more_info": "https://quantum.cloud.ibm.com/docs/errors"}
        if self.solution:
            error["solution"] = self.solution
        return {"errors": [error], "trace": secrets.token_hex(16), "status_code": self.status}


class IamError(Exception):
    """An IAM error: {"context", "errorCode", "errorMessage"} (the shape IAM answers with, as quoted
    in IBM-Cloud/bluemix-go issue 87 and watson-developer-cloud/food-coach issue 28)."""

    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message

    def body(self):
        context = {"requestId": secrets.token_hex(16), "requestType": "incoming.Identity_Token",
                   "url": "http://127.0.0.1", "startTime": iso(time.time())}
        return {"context": context, "errorCode": self.code, "errorMessage": self.message}


def iso(ts):
    # Docs silent on the exact format; IBM's examples show UTC ISO 8601 with milliseconds and Z.
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z" if ts else None


def parse_iso(text, name):
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise ApiError(400, BAD_DATE, "Invalid %s %r: give an ISO 8601 date and time." % (name, text))


# ---------------------------------------------------------------------------------------------
# Tokens: IAM API-key exchange (IBM Cloud docs "Generating an IBM Cloud IAM token by using an API
# key"; external-apis.md §3.2). The access token is a JWT with integer iat and exp, which the official
# client's token manager needs (quantum-lsf.md §A2); signed HS256 with a key of this process only, so
# a token is valid here exactly when this IAM issued it and it has not expired.
# ---------------------------------------------------------------------------------------------
def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Iam(object):
    def __init__(self, api_keys, account, ttl):
        self.api_keys = [k for k in api_keys if k]
        self.account = account
        self.ttl = int(ttl)
        self.key = secrets.token_bytes(32)

    def exchange(self, form):
        # IAM answers 400 for a bad grant and for an unknown key (BXNIM0415E "Provided API key could
        # not be found", as quoted in IBM-Cloud/terraform-provider-ibm issue 3561); the code for a
        # missing property is docs silent.
        grant = form.get("grant_type", "")
        if grant != APIKEY_GRANT:
            raise IamError(400, "BXNIM0106E", "Validation of property 'grant_type' with value '%s' failed." % grant)
        apikey = form.get("apikey", "")
        if not apikey:
            raise IamError(400, "BXNIM0109E", "Property missing or empty: apikey.")
        if not any(hmac.compare_digest(apikey.encode(), k.encode()) for k in self.api_keys):
            raise IamError(400, "BXNIM0415E", "Provided API key could not be found.")
        now = int(time.time())
        claims = {"iam_id": "IBMid-bridge-simulator", "sub": "bridge-simulator", "account": {"bss": self.account},
                  "iat": now, "exp": now + self.ttl, "iss": "bridge-quantum-runtime-simulator",
                  "grant_type": APIKEY_GRANT, "scope": "ibm openid"}
        head = b64url(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "bridge-simulator"}).encode())
        body = b64url(json.dumps(claims).encode())
        sig = b64url(hmac.new(self.key, ("%s.%s" % (head, body)).encode(), hashlib.sha256).digest())
        # The token response fields (external-apis.md §3.2); no refresh grant is simulated.
        return {"access_token": "%s.%s.%s" % (head, body, sig), "refresh_token": "not_supported",
                "token_type": "Bearer", "expires_in": self.ttl, "expiration": now + self.ttl, "scope": "ibm openid"}

    def check(self, headers):
        """Raise ApiError 401 unless the request carries a Bearer token this IAM issued, unexpired."""
        auth = headers.get("Authorization") or ""
        scheme, token = auth.partition(" ")[::2]
        # The official client falls back to "Authorization: apikey <key>" when IAM fails (client:
        # api/auth.py); whether today's API takes that is docs silent: refused, 401 like any other.
        if scheme.lower() != "bearer" or token.count(".") != 2:
            raise ApiError(401, BAD_CREDENTIALS, "Invalid credentials: send Authorization: Bearer <IAM access token>.",
                           "Exchange your API key for a token at IAM's /identity/token first.")
        head, body, sig = token.split(".")
        good = b64url(hmac.new(self.key, ("%s.%s" % (head, body)).encode(), hashlib.sha256).digest())
        if not hmac.compare_digest(sig.encode(), good.encode()):
            raise ApiError(401, BAD_CREDENTIALS, "Invalid credentials: the token was not issued by this IAM.")
        try:
            exp = json.loads(unb64url(body))["exp"]
        except (ValueError, KeyError):
            raise ApiError(401, BAD_CREDENTIALS, "Invalid credentials: malformed token.")
        if exp <= time.time():
            raise ApiError(401, BAD_CREDENTIALS, "Invalid credentials: the token has expired.", "Get a new token from IAM.")


# ---------------------------------------------------------------------------------------------
# Encoding (client: json.py RuntimeEncoder/RuntimeDecoder tags {"__type__", "__value__"}; the result
# shape ibm_quantum_schemas describes, quantum-lsf.md §A3)
# ---------------------------------------------------------------------------------------------
def packed(data):
    return base64.standard_b64encode(zlib.compress(data)).decode()


def unpacked(text, what):
    try:
        return zlib.decompress(base64.standard_b64decode(text))
    except (ValueError, zlib.error):
        raise ApiError(400, BAD_PAYLOAD, "Invalid %s: not base64 of zlib-compressed data." % what)


def ndarray_value(array):
    # ndarray: base64(zlib(np.save)); an object array as a list (client: json.py).
    array = numpy.asarray(array)
    if array.dtype == object:
        return {"__type__": "ndarray", "__value__": array.tolist()}
    buff = io.BytesIO()
    numpy.save(buff, array, allow_pickle=False)
    return {"__type__": "ndarray", "__value__": packed(buff.getvalue())}


def bit_array_value(bits):
    # BitArray {"array": packed uint8 ndarray, "num_bits"} (client: json.py).
    return {"__type__": "BitArray", "__value__": {"array": ndarray_value(bits.array), "num_bits": bits.num_bits}}


def datetime_value(ts):
    return {"__type__": "datetime", "__value__": datetime.fromtimestamp(ts, timezone.utc).isoformat()}


def decode_tagged(obj):
    """json object_hook for job params: the tags the official client sends in pubs."""
    kind = obj.get("__type__")
    if kind is None:
        return obj
    value = obj.get("__value__")
    if kind == "QuantumCircuit":
        data = unpacked(value, "QuantumCircuit")
        # QPY header: b"QISKIT" then the format version byte (qiskit qpy "File Header").
        if data[:6] != b"QISKIT" or data[6] not in QPY_VERSIONS:
            raise ApiError(400, BAD_PAYLOAD, "Unsupported QPY data (version %s); send QPY %d to %d."
                           % (data[6] if len(data) > 6 else "?", QPY_VERSIONS[0], QPY_VERSIONS[-1]))
        circuits = qpy.load(io.BytesIO(data))
        if len(circuits) != 1:
            raise ApiError(400, BAD_PAYLOAD, "A QuantumCircuit value must hold exactly one circuit.")
        return circuits[0]
    if kind == "ndarray":
        if isinstance(value, list):
            return numpy.array(value)
        return numpy.load(io.BytesIO(unpacked(value, "ndarray")), allow_pickle=False)
    if kind == "ObservablesArray":
        return value
    if kind in ("datetime", "set", "complex"):
        return {"datetime": lambda v: v, "set": set, "complex": lambda v: complex(v[0], v[1])}[kind](value)
    # Docs silent on what the service does with other tags in params; the simulator refuses them.
    raise ApiError(400, BAD_PAYLOAD, "Unsupported encoded value of type %r in params." % kind)


def encode_result(program, result, pubs, spans):
    """The PrimitiveResult JSON text of a finished job (ibm_quantum_schemas sampler/estimator
    version_0_1 PrimitiveResultWrapperModel)."""
    pub_results = []
    for pub, pub_result in zip(pubs, result):
        data = pub_result.data
        names = list(data)
        if program == "sampler":
            # field_types "BitArray" for measured registers (quantum-lsf.md §A3: guess, schema accepts it).
            fields = {n: bit_array_value(data[n]) for n in names}
            types = ["BitArray"] * len(names)
            metadata = {"circuit_metadata": pub.circuit.metadata or {}}
            kind = "SamplerPubResult"
        else:
            # Estimator data are ndarrays, scalars included: qiskit's BackendEstimatorV2 gives a float
            # stds for a scalar pub, which the schema refuses (quantum-lsf.md §A3).
            fields = {n: ndarray_value(data[n]) for n in names}
            if "ensemble_standard_error" not in fields and "stds" in fields:
                # ensemble_standard_error is reported when ZNE is off (ibm_quantum_schemas estimator data_bin.py).
                fields["ensemble_standard_error"] = ndarray_value(data["stds"])
                names.append("ensemble_standard_error")
            types = ["ndarray"] * len(names)
            metadata = {"circuit_metadata": pub.circuit.metadata or {},
                        "target_precision": float(pub_result.metadata.get("target_precision", DEFAULT_PRECISION)),
                        "shots": int(pub_result.metadata.get("shots", 0))}
            kind = "PubResult"
        pub_results.append({"__type__": kind, "__value__": {
            "data": {"__type__": "DataBin", "__value__": {"field_names": names, "field_types": types,
                                                          "shape": list(data.shape), "fields": fields}},
            "metadata": metadata}})
    metadata = {"version": 2}
    if program == "sampler":
        metadata["execution"] = {"execution_spans": {"__type__": "ExecutionSpans", "__value__": {"spans": spans}}}
    return json.dumps({"__type__": "PrimitiveResult", "__value__": {"pub_results": pub_results, "metadata": metadata}})


def sampler_spans(pubs, start, stop):
    # One DoubleSliceSpan for the whole job: data_slices {pub index: [shape + (shots,), arg start,
    # arg stop, shot start, shot stop]} (ibm_quantum_schemas sampler execution_span.py).
    slices = {}
    for index, pub in enumerate(pubs):
        size = int(numpy.prod(pub.shape)) if pub.shape else 1
        slices[str(index)] = [list(pub.shape) + [pub.shots], 0, size, 0, pub.shots]
    span = {"start": datetime_value(start), "stop": datetime_value(stop), "data_slices": slices}
    return [{"__type__": "DoubleSliceSpan", "__value__": span}]


# ---------------------------------------------------------------------------------------------
# Devices
# ---------------------------------------------------------------------------------------------
class Device(object):
    def __init__(self, spec):
        self.name = spec["name"]
        self.status = spec["status"]
        self.reason = spec["reason"]
        self.fake = getattr(fake_provider, spec["fake"])()
        self.target = self.fake.target
        folder = os.path.join(os.path.dirname(fake_provider.__file__), "backends", self.fake.dirname)
        # The fake provider's JSON is what the service sent (quantum-lsf.md §A4); served under our name.
        with open(os.path.join(folder, self.fake.conf_filename)) as handle:
            self.configuration = dict(json.load(handle), backend_name=self.name)
        with open(os.path.join(folder, self.fake.props_filename)) as handle:
            self.properties = dict(json.load(handle), backend_name=self.name)
        # simulator false: the client then checks ISA circuits, reads properties and opens sessions
        # (quantum-lsf.md §A5), as with a real device.
        self.configuration["simulator"] = False
        self.max_shots = int(self.configuration.get("max_shots") or 100000)
        self._aer = None
        self._aer_lock = threading.Lock()

    @property
    def operational(self):
        return self.status == "online"

    def aer(self):
        # AerSimulator.from_backend: the device's coupling map, basis gates and noise model from its
        # calibration (qiskit-aer docs "Device backend noise model simulations").
        with self._aer_lock:
            if self._aer is None:
                self._aer = AerSimulator.from_backend(self.fake)
            return self._aer

    def summary(self, queue_length):
        # GET /backends items with IBM-API-Version >= 2025-01-01 (external-apis.md §3.3); the client
        # reads name, class and physical_qubits, and status.name in least_busy (client:
        # qiskit_runtime_service.py).
        processor = self.configuration.get("processor_type") or {}
        return {"name": self.name, "status": {"name": self.status, "reason": self.reason},
                "qubits": self.configuration["n_qubits"], "queue_length": queue_length,
                "processor_type": {"family": processor.get("family"), "revision": processor.get("revision")}}

    def status_view(self, queue_length):
        # GET /backends/{name}/status: state (bool, operational), status ("active" expected by the
        # client), length_queue, backend_version (client: api/rest/cloud_backend.py). The status text
        # of a paused device is docs silent: "maintenance".
        return {"backend_name": self.name, "state": self.operational,
                "status": "active" if self.operational else "maintenance", "message": self.reason,
                "length_queue": queue_length, "backend_version": self.configuration.get("backend_version", "1.0.0")}


def pub_shots(pub):
    """Shots a PUB takes: its shots for each element of its shape; an Estimator PUB measures with
    ceil(1 / precision^2) shots (qiskit BackendEstimatorV2; IBM: "Estimator options" precision)."""
    size = int(numpy.prod(pub.shape)) if pub.shape else 1
    shots = pub.shots if isinstance(pub, SamplerPub) else math.ceil(1.0 / pub.precision ** 2)
    return size * shots


def isa_problem(circuit, target):
    """Why `circuit` is not an ISA circuit of `target`, or None (the rule of the client's own check,
    client: utils/utils.py is_isa_circuit: every instruction, on its physical qubits, is in the target)."""
    return _isa_walk(circuit, target, {qubit: index for index, qubit in enumerate(circuit.qubits)})


def _isa_walk(circuit, target, index):
    for instruction in circuit.data:
        operation = instruction.operation
        qargs = tuple(index[q] for q in instruction.qubits)
        if operation.name == "barrier":
            continue
        if isinstance(operation, ControlFlowOp):
            if operation.name not in target.operation_names:
                return "The instruction %s is not supported by the target." % operation.name
            for block in operation.blocks:
                problem = _isa_walk(block, target, {q: qargs[i] for i, q in enumerate(block.qubits)})
                if problem:
                    return problem
            continue
        if not target.instruction_supported(operation.name, qargs):
            return "The instruction %s on qubits %s is not supported by the target." % (operation.name, qargs)
    return None


# ---------------------------------------------------------------------------------------------
# Jobs and sessions
# ---------------------------------------------------------------------------------------------
def new_id():
    # IBM job and session ids look like "d6147q3traac73bef6f0": 20 lowercase base-32 characters
    # (external-apis.md §3.4 example).
    return base64.b32encode(secrets.token_bytes(15)).decode().lower()[:20]


class Job(object):
    def __init__(self, body, device, pubs, params, cost):
        self.id = new_id()
        self.program = body["program_id"]
        self.device = device
        self.pubs = pubs
        self.params = params
        self.cost = cost
        self.tags = list(body.get("tags") or [])
        self.session_id = body.get("session_id")
        self.private = bool(body.get("private"))
        self.log_level = LOG_LEVELS.get(str(body.get("log_level") or "WARNING").upper(), 30)
        self.created = time.time()
        self.started = self.finished = None
        self.status = QUEUED
        self.reason = self.reason_code = None
        self.result = None
        self.results_read = False
        self.quantum_seconds = 0
        self.logs = []
        self.cancelled = threading.Event()
        self.log("INFO", "Job %s queued on %s." % (self.id, device.name))

    @property
    def shots(self):
        return sum(pub_shots(pub) for pub in self.pubs)

    def log(self, level, message):
        # GET /jobs/{id}/logs is text (external-apis.md §3.3); lines below the job's log_level (client
        # default WARNING) are not kept (docs silent on the line format).
        if LOG_LEVELS[level] >= self.log_level:
            self.logs.append("%s %s: %s" % (iso(time.time()), level, message))

    def view(self, exclude_params=True):
        # GET /jobs/{id} (external-apis.md §3.5; client: runtime_job_v2.py, qiskit_runtime_service.py
        # _decode_job). Top-level status says "Cancelled - Ran too long" for reason_code 1305.
        state = {"status": self.status}
        if self.reason:
            state["reason"] = self.reason
        if self.reason_code:
            state["reason_code"] = self.reason_code
        top = "Cancelled - Ran too long" if self.reason_code == RAN_TOO_LONG else self.status
        view = {"id": self.id, "backend": self.device.name, "state": state, "status": top,
                "program": {"id": self.program}, "created": iso(self.created), "end_time": iso(self.finished),
                "cost": self.cost, "tags": self.tags, "session_id": self.session_id, "user_id": "bridge-simulator",
                "private": self.private, "runtime": "", "estimated_running_time_seconds": None,
                "usage": {"quantum_seconds": self.quantum_seconds, "seconds": self.quantum_seconds}}
        # Private jobs never return their params (external-apis.md §3.4).
        if not exclude_params and not self.private:
            view["params"] = self.params
        return view

    def metrics(self):
        # GET /jobs/{id}/metrics: timestamps{created,running,finished}, usage{quantum_seconds,
        # qpu_charge_time_seconds, status}; usage.status stays "pending" until the job is final
        # (external-apis.md §3.3; client: runtime_job_v2.py usage()). The final word is docs silent.
        final = self.status in FINAL
        return {"timestamps": {"created": iso(self.created), "running": iso(self.started), "finished": iso(self.finished)},
                "bss": {"seconds": self.quantum_seconds},
                "usage": {"quantum_seconds": self.quantum_seconds, "seconds": self.quantum_seconds,
                          "qpu_charge_time_seconds": self.quantum_seconds, "status": "completed" if final else "pending"},
                "executions": self.shots, "num_circuits": len(self.pubs),
                "num_qubits": [p.circuit.num_qubits for p in self.pubs],
                "circuit_depths": [p.circuit.depth() for p in self.pubs], "qiskit_version": "qiskit_ibm_runtime-0.51.0"}


class Session(object):
    def __init__(self, mode, device, max_ttl):
        self.id = new_id()
        self.mode = mode
        self.device = device
        self.max_ttl = max_ttl
        self.accepting = True
        self.closed = None
        self.created = time.time()
        self.timestamps = [{"status": "open", "timestamp": iso(self.created)}]

    def state(self, jobs):
        # IBM: "Run jobs in a session" / client session.py status(): open (no job started yet),
        # active, inactive (nothing left to run), closed; closed once it stops accepting jobs and has
        # none left.
        mine = [j for j in jobs if j.session_id == self.id]
        pending = any(j.status not in FINAL for j in mine)
        if self.closed or (not self.accepting and not pending and mine):
            return "closed"
        if not any(j.started for j in mine):
            return "open"
        return "active" if pending else "inactive"

    def view(self, jobs, second):
        mine = [j for j in jobs if j.session_id == self.id]
        started = [j.started for j in mine if j.started]
        finished = [j.finished for j in mine if j.finished and j.started]
        # elapsed_time: a batch counts its jobs' quantum time, a dedicated session the time from its
        # first job's start to its last job's end (client: session.py usage()).
        if self.mode == "batch":
            elapsed = sum(j.quantum_seconds for j in mine)
        else:
            elapsed = math.ceil((max(finished) - min(started)) / second) if started and finished else 0
        return {"id": self.id, "backend_name": self.device.name, "mode": self.mode, "state": self.state(jobs),
                # interactive_ttl is docs silent (plan-dependent); not enforced here.
                "accepting_jobs": self.accepting and not self.closed, "max_ttl": self.max_ttl, "interactive_ttl": 1,
                "active_ttl": self.max_ttl, "elapsed_time": elapsed, "started_at": iso(min(started) if started else None),
                "activated_at": iso(min(started) if started else None), "closed_at": iso(self.closed),
                "last_job_started": iso(max(started) if started else None),
                "last_job_completed": iso(max(finished) if finished else None), "timestamps": self.timestamps}


def found(table, key, code, what, solution=None):
    """table[key], or a 404 with `code` ("Job not found: ID.")."""
    if key not in table:
        raise ApiError(404, code, "%s not found: %s." % (what, key), solution)
    return table[key]


class Runtime(object):
    """The service's state: devices, jobs, sessions, usage; one executor thread per device, which
    runs one job at a time, as a QPU does."""

    def __init__(self, queue_seconds=0.2, run_seconds=0.2, shot_seconds=0.00005, second=1.0, usage_limit=None):
        self.devices = {spec["name"]: Device(spec) for spec in DEVICES}
        self.jobs = {}
        self.sessions = {}
        self.usage_consumed = 0
        self.queue_seconds, self.run_seconds, self.shot_seconds = queue_seconds, run_seconds, shot_seconds
        self.second = second
        self.usage_limit = usage_limit
        self.lock = threading.Condition()
        self.stopping = False
        self.threads = [threading.Thread(target=self._executor, args=(d,), name="qpu-" + d.name, daemon=True)
                        for d in self.devices.values()]

    def start(self):
        for thread in self.threads:
            thread.start()

    def shutdown(self):
        with self.lock:
            self.stopping = True
            for job in self.jobs.values():
                job.cancelled.set()
            self.lock.notify_all()
        for thread in self.threads:
            thread.join(5)

    def device(self, name):
        return found(self.devices, name, BACKEND_NOT_FOUND, "Backend", "Verify that the correct backend name was specified.")

    def queue_length(self, device):
        return sum(1 for j in self.jobs.values() if j.device is device and j.status == QUEUED)

    def usage(self, crn):
        # GET /instances/usage (client: qiskit_runtime_service.py usage(), reads usage_limit_reached,
        # usage_limit_seconds or usage_allocation_seconds, usage_consumed_seconds).
        with self.lock:
            view = {"instance_id": crn, "usage_consumed_seconds": self.usage_consumed,
                    "usage_limit_reached": self.limit_reached()}
            if self.usage_limit is not None:
                view["usage_limit_seconds"] = self.usage_limit
                view["usage_remaining_seconds"] = max(self.usage_limit - self.usage_consumed, 0)
            return view

    def limit_reached(self):
        return self.usage_limit is not None and self.usage_consumed >= self.usage_limit

    # ------------------------------------------------------------------ submit
    def submit(self, body):
        """POST /jobs (external-apis.md §3.4): validated here, as IBM's job validation service checks
        a job before it is queued (IBM: "Job limits")."""
        if not isinstance(body, dict):
            raise ApiError(400, BAD_PAYLOAD, "The request body must be a JSON object.")
        program = body.get("program_id")
        if program not in PROGRAMS:
            # The client maps 404 to RuntimeProgramNotFound (client: qiskit_runtime_service.py _run); the
            # registry has no "program not found": "Payload not valid".
            raise ApiError(404, BAD_PAYLOAD, "Program not found: %r (programs: %s)." % (program, ", ".join(PROGRAMS)))
        params = body.get("params")
        if not isinstance(params, dict) or not isinstance(params.get("pubs"), list) or not params["pubs"]:
            raise ApiError(400, BAD_PAYLOAD, "params.pubs must be a non-empty list of PUBs.")
        tags = body.get("tags") or []
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise ApiError(400, BAD_PAYLOAD, "tags must be a list of strings.")
        cost = body.get("cost")
        if cost is None:
            cost = MAX_COST
        if not isinstance(cost, int) or isinstance(cost, bool) or not 0 < cost <= MAX_COST:
            raise ApiError(400, BAD_PAYLOAD, "cost (max_execution_time) must be whole seconds from 1 to %d." % MAX_COST)
        with self.lock:
            if self.limit_reached():
                # IBM answers 409 when the instance's usage limit is reached (external-apis.md §3.3),
                # code 4317 "You have exceeded your monthly quota" (Qiskit/qiskit-ibm-runtime issue 1124).
                raise ApiError(409, OVER_QUOTA, "You have exceeded your instance's usage limit (%s seconds)." % self.usage_limit,
                               "Wait for the next usage period or ask for more time for this instance.")
            session = self._session_for(body)
            name = body.get("backend") or (session.device.name if session else self._least_busy())
        if name not in self.devices:
            # 400, not the 404 of GET /backends/{name}: the client reads a 404 from POST /jobs as
            # "program not found" (client: qiskit_runtime_service.py _run); status docs silent.
            raise ApiError(400, BACKEND_NOT_FOUND, "Backend not found: %s." % name,
                           "Verify that the correct backend name was specified.")
        device = self.devices[name]
        if session and session.device is not device:
            raise ApiError(400, INVALID_JOB, "The job's backend %s is not the backend of session %s (%s)."
                           % (device.name, session.id, session.device.name))
        # Decoding, PUB coercion and the ISA check import and inspect circuits: done outside the lock.
        pubs = self._pubs(program, params, device)
        job = Job(body, device, pubs, params, cost)
        with self.lock:
            if session and not (session.accepting and not session.closed):
                # Status docs silent: 409, as for other requests that conflict with a state.
                raise ApiError(409, SESSION_CLOSED, "Session %s is closed and does not accept jobs." % session.id)
            self.jobs[job.id] = job
            self.lock.notify_all()
        response = {"id": job.id, "backend": device.name}
        if job.session_id:
            response["session_id"] = job.session_id
        if job.private:
            response["private"] = True
        return response

    def _session_for(self, body):
        return self.session(body["session_id"]) if body.get("session_id") else None

    def _least_busy(self):
        # A job without backend goes to the least busy device it may use (external-apis.md §3.4).
        online = [d for d in self.devices.values() if d.operational]
        return min(online, key=self.queue_length).name

    def _pubs(self, program, params, device):
        try:
            raw = json.loads(json.dumps(params["pubs"]), object_hook=decode_tagged)
        except ApiError:
            raise
        except Exception as exc:  # pylint: disable=broad-exception-caught
            # Whatever qpy or numpy raise on bad data is the client's error, not the simulator's.
            raise ApiError(400, BAD_PAYLOAD, "Invalid PUB encoding: %s: %s" % (type(exc).__name__, exc))
        options = params.get("options") or {}
        pubs = []
        for index, item in enumerate(raw):
            item = list(item) if isinstance(item, (list, tuple)) else [item]
            if not item:
                raise ApiError(400, INVALID_JOB, "PUB %d is empty." % index)
            item[0] = self._circuit(item[0], index)
            try:
                if program == "sampler":
                    pub = self._sampler_pub(item, params, options)
                else:
                    pub = self._estimator_pub(item, params, options)
            except Exception as exc:  # pylint: disable=broad-exception-caught
                # qiskit's PUB coercion raises ValueError, TypeError or QiskitError for bad PUBs.
                raise ApiError(400, INVALID_JOB, "Invalid PUB %d: %s" % (index, exc))
            self._check_fits(pub, index, device)
            pubs.append(pub)
        executions = sum(pub_shots(p) for p in pubs)
        if executions > MAX_EXECUTIONS:
            raise ApiError(400, JOB_TOO_LONG, "The job has %d executions; at most %d are allowed." % (executions, MAX_EXECUTIONS),
                           "Split the job or use fewer shots (IBM: Job limits).")
        return pubs

    @staticmethod
    def _circuit(value, index):
        # A PUB circuit is QPY (what the official client sends) or OpenQASM 3 text (IBM: "Sampler with
        # the REST API", quantum-lsf.md intro).
        if isinstance(value, QuantumCircuit):
            return value
        if isinstance(value, str):
            try:
                return qasm3.loads(value)
            except Exception as exc:  # pylint: disable=broad-exception-caught
                raise ApiError(400, QASM_PARSE, "PUB %d: the OpenQASM 3 circuit does not parse: %s" % (index, exc))
        raise ApiError(400, INVALID_JOB, "PUB %d: the circuit must be OpenQASM 3 text or an encoded QuantumCircuit." % index)

    @staticmethod
    def _sampler_pub(item, params, options):
        # [circuit, parameter_values?, shots?] (external-apis.md §3.4); shots null or missing:
        # params.shots, options.default_shots, else 4096 (quantum-lsf.md §A3).
        shots = item[2] if len(item) > 2 and item[2] is not None else \
            params.get("shots") or options.get("default_shots") or DEFAULT_SHOTS
        values = item[1] if len(item) > 1 else None
        if isinstance(values, numpy.ndarray) and values.size == 0:
            values = None
        return SamplerPub.coerce((item[0], values, int(shots)))

    @staticmethod
    def _estimator_pub(item, params, options):
        # [circuit, observables, parameter_values?, precision?]; precision null: params.precision,
        # options.default_precision, else 0.015625 (external-apis.md §3.4).
        if len(item) < 2:
            raise ValueError("an Estimator PUB needs observables")
        values = item[2] if len(item) > 2 else None
        if isinstance(values, numpy.ndarray) and values.size == 0:
            values = None
        precision = item[3] if len(item) > 3 and item[3] is not None else \
            params.get("precision") or options.get("default_precision") or DEFAULT_PRECISION
        return EstimatorPub.coerce((item[0], item[1], values, float(precision)))

    @staticmethod
    def _check_fits(pub, index, device):
        circuit = pub.circuit
        if circuit.num_qubits > device.target.num_qubits:
            # The client's own words for this case (client: utils/utils.py is_isa_circuit).
            raise ApiError(400, TOO_MANY_QUBITS, "PUB %d: the circuit has %d qubits but the target system %s has %d qubits."
                           % (index, circuit.num_qubits, device.name, device.target.num_qubits),
                           "Use a device with enough qubits.")
        problem = isa_problem(circuit, device.target)
        if problem:
            # IBM's text for non-ISA circuits, code 1517 (as reported in Qiskit/qiskit-ibm-runtime issue
            # 1519, where it surfaced as a Failed job); refused at submit here, as the job validation
            # service checks jobs before they queue (IBM: "Job limits").
            raise ApiError(400, NON_ISA, "Circuits do not match the target definition (non-ISA circuits). PUB %d: %s"
                           % (index, problem),
                           "Transpile your circuits for the target before submitting a primitive query, for "
                           "example with generate_preset_pass_manager(optimization_level=1, target=backend.target).")
        if getattr(pub, "shots", None) and pub.shots > device.max_shots:
            # The device's max_shots (its configuration); registry 6000.
            raise ApiError(400, TOO_MANY_SHOTS, "Too many shots given (%d > %d) in PUB %d for %s."
                           % (pub.shots, device.max_shots, index, device.name))

    # ------------------------------------------------------------------ execution
    def _next(self, device):
        now = time.time()
        queued = [j for j in self.jobs.values() if j.device is device and j.status == QUEUED
                  and now - j.created >= self.queue_seconds]
        if not queued or not device.operational:
            return None

        # Jobs of a dedicated session that is already active go first: a session holds its device
        # between jobs (IBM: "Execution modes: session").
        def rank(job):
            session = self.sessions.get(job.session_id)
            active = session is not None and session.mode == "dedicated" and session.state(self.jobs.values()) == "active"
            return (0 if active else 1, job.created)
        return min(queued, key=rank)

    def _executor(self, device):
        while True:
            with self.lock:
                job = None
                while not self.stopping:
                    job = self._next(device)
                    if job:
                        break
                    self.lock.wait(0.05)
                if self.stopping:
                    return
                job.status, job.started = RUNNING, time.time()
                job.log("INFO", "Job %s running on %s." % (job.id, device.name))
            self._run(job)

    def _run(self, job):
        # Simulated QPU time: run_seconds plus shot_seconds per shot; max_execution_time (`cost`) is
        # wall time for simulators (IBM: "Maximum execution time"), scaled by `second`.
        busy = self.run_seconds + self.shot_seconds * job.shots
        limit = job.cost * self.second
        if job.cancelled.wait(min(busy, limit)):
            return self._finish(job, None)
        outcome = None
        if busy < limit:
            try:
                outcome = self._execute(job)
            except Exception:  # pylint: disable=broad-exception-caught
                outcome = ("failed", traceback.format_exc())
        if time.time() - job.started >= limit:
            outcome = ("timeout", None)
        self._finish(job, outcome)

    def _execute(self, job):
        sim = job.device.aer()
        if job.program == "sampler":
            result = BackendSamplerV2(backend=sim).run(job.pubs).result()
        else:
            result = BackendEstimatorV2(backend=sim).run(job.pubs).result()
        stop = time.time()
        spans = sampler_spans(job.pubs, job.started, stop) if job.program == "sampler" else []
        return ("done", encode_result(job.program, result, job.pubs, spans))

    def _finish(self, job, outcome):
        with self.lock:
            now = time.time()
            used = math.ceil((now - job.started) / self.second) if job.started else 0
            job.quantum_seconds = used
            self.usage_consumed += used
            if job.status == CANCELLED or outcome is None:
                # Cancelled while running: the result is dropped.
                job.finished = job.finished or now
            elif outcome[0] == "timeout":
                # IBM: "Maximum execution time": forcibly cancelled; state Cancelled, reason_code 1305
                # "RAN TOO LONG" (external-apis.md §3.5).
                job.status, job.reason, job.reason_code = CANCELLED, "RAN TOO LONG", RAN_TOO_LONG
                job.result = "Job %s ran longer than its maximum execution time of %d seconds." % (job.id, job.cost)
                job.log("ERROR", job.result)
            elif outcome[0] == "failed":
                job.status, job.reason, job.reason_code = FAILED, "Error raised when execution on AER failed.", AER_FAILED
                job.result = outcome[1]
                job.log("ERROR", outcome[1].strip().splitlines()[-1])
            else:
                job.status, job.result = COMPLETED, outcome[1]
                job.log("INFO", "Job %s completed." % job.id)
            job.finished = job.finished or now
            self.lock.notify_all()

    # ------------------------------------------------------------------ job verbs
    def job(self, job_id):
        return found(self.jobs, job_id, JOB_NOT_FOUND, "Job")

    def cancel(self, job_id):
        with self.lock:
            job = self.job(job_id)
            if job.status in FINAL:
                # The client maps 409 to RuntimeInvalidStateError (client: runtime_job_v2.py cancel()).
                raise ApiError(409, JOB_NOT_CANCELLED, "Job %s is %s and cannot be cancelled." % (job.id, job.status))
            self._cancel(job, "Cancelled by the user.")

    def _cancel(self, job, why):
        job.status, job.reason = CANCELLED, None
        job.finished = time.time()
        job.cancelled.set()
        job.log("INFO", "Job %s cancelled: %s" % (job.id, why))
        self.lock.notify_all()

    def results(self, job_id):
        # GET /jobs/{id}/results: the result text of a completed job; 200 with the error text for a
        # failed or timed-out job, which the client reads from its last "Traceback" (client:
        # runtime_job_v2.py _error_msg_from_job_response). Results of a private job are readable once
        # (external-apis.md §3.6).
        with self.lock:
            job = self.job(job_id)
            if job.status not in FINAL:
                raise ApiError(404, JOB_STATE, "Job %s has no results yet: it is %s." % (job.id, job.status))
            if job.status == CANCELLED and job.reason_code != RAN_TOO_LONG:
                return "Job %s was cancelled." % job.id
            if job.private and job.results_read:
                raise ApiError(403, JOB_ACCESS, "The results of private job %s were already read." % job.id)
            job.results_read = True
            return job.result

    def find(self, query):
        # GET /jobs (external-apis.md §3.3): limit (default 200), offset, pending, program, backend,
        # tags (every one), session_id, created_after/before, sort ASC|DESC (newest first by default).
        try:
            limit = int(query.get("limit", ["200"])[-1])
            offset = int(query.get("offset", ["0"])[-1])
        except ValueError:
            raise ApiError(400, BAD_LIMIT, "limit and offset must be whole numbers.")
        one = {k: v[-1] for k, v in query.items()}
        tags = set(query.get("tags", []))
        after = parse_iso(one["created_after"], "created_after") if "created_after" in one else None
        before = parse_iso(one["created_before"], "created_before") if "created_before" in one else None
        pending = {"true": True, "false": False}.get(one.get("pending", "").lower())
        with self.lock:
            jobs = [j for j in self.jobs.values()
                    if (pending is None or pending == (j.status not in FINAL))
                    and one.get("program") in (None, j.program) and one.get("backend") in (None, j.device.name)
                    and one.get("session_id") in (None, j.session_id) and tags <= set(j.tags)
                    and (after is None or j.created >= after) and (before is None or j.created <= before)]
            jobs.sort(key=lambda j: j.created, reverse=one.get("sort", "DESC").upper() != "ASC")
            exclude = one.get("exclude_params", "true").lower() != "false"
            return {"jobs": [j.view(exclude) for j in jobs[offset:offset + limit]], "count": len(jobs)}

    def delete(self, job_id):
        with self.lock:
            job = self.job(job_id)
            if job.status not in FINAL:
                # DELETE /jobs/{id}: the job must be terminal (external-apis.md §3.3).
                raise ApiError(409, JOB_STATE, "Job %s is %s: cancel it before deleting it." % (job.id, job.status))
            del self.jobs[job.id]

    # ------------------------------------------------------------------ sessions
    def open_session(self, body):
        # POST /sessions {"mode":"dedicated"|"batch","backend","instance","max_ttl"?} -> {"id",...}
        # (external-apis.md §3.3; client: api/rest/runtime_session.py create).
        if not isinstance(body, dict) or body.get("mode", "dedicated") not in ("dedicated", "batch"):
            raise ApiError(400, BAD_BODY, "mode must be dedicated or batch.")
        device = self.device(body.get("backend") or "")
        # The default max_ttl depends on the plan (docs silent here): 8 hours. It is reported, not enforced.
        max_ttl = body.get("max_ttl") or 28800
        session = Session(body.get("mode", "dedicated"), device, max_ttl)
        with self.lock:
            self.sessions[session.id] = session
            return session.view(self.jobs.values(), self.second)

    def session(self, session_id):
        return found(self.sessions, session_id, NOT_FOUND, "Session")

    def session_view(self, session_id):
        with self.lock:
            return self.session(session_id).view(self.jobs.values(), self.second)

    def update_session(self, session_id, body):
        # PATCH /sessions/{id} {"accepting_jobs": false}: close gracefully, queued jobs still run.
        with self.lock:
            session = self.session(session_id)
            if not isinstance(body, dict) or not isinstance(body.get("accepting_jobs"), bool):
                raise ApiError(400, BAD_BODY, "Send {\"accepting_jobs\": false}.")
            if session.closed and body["accepting_jobs"]:
                raise ApiError(409, SESSION_CLOSED, "Session %s is closed." % session.id)
            session.accepting = body["accepting_jobs"]
            if not session.accepting:
                session.timestamps.append({"status": "pending_closed", "timestamp": iso(time.time())})

    def close_session(self, session_id):
        # DELETE /sessions/{id}/close: close now and cancel its queued jobs (external-apis.md §3.3).
        with self.lock:
            session = self.session(session_id)
            if not session.closed:
                session.closed, session.accepting = time.time(), False
                session.timestamps.append({"status": "closed", "timestamp": iso(session.closed)})
            for job in self.jobs.values():
                if job.session_id == session.id and job.status == QUEUED:
                    self._cancel(job, "Session %s was closed." % session.id)


# ---------------------------------------------------------------------------------------------
# HTTP
# ---------------------------------------------------------------------------------------------
class Reply(object):
    def __init__(self, status=200, body=None, text=None):
        self.status, self.body, self.text = status, body, text

    def payload(self):
        if self.text is not None:
            return "text/plain", self.text.encode()
        if self.body is None:
            return None, b""
        return JSON_TYPE, json.dumps(self.body).encode()


def json_body(body):
    if not body:
        return {}
    try:
        return json.loads(body)
    except ValueError:
        raise ApiError(400, BAD_BODY, "The request body is not JSON.")


class App(object):
    def __init__(self, runtime, iam, crn):
        self.runtime, self.iam, self.crn = runtime, iam, crn
        # One instance, as Global Search lists it (quantum-lsf.md §A1 step 2): the plan id is any
        # string the catalog answers for (docs silent on real ids).
        self.plan_id = "bridge-simulator-plan"

    def route(self, method, path, query, headers, body):
        if (method, path) == ("POST", "/identity/token"):
            return self.token(headers, body)
        if (method, path) == ("POST", "/v3/resources/search"):
            return self.search(headers)
        if method == "GET" and path.startswith("/catalog/"):
            return self.catalog(path[len("/catalog/"):])
        if path == API or path.startswith(API + "/"):
            return self.api(method, path[len(API):].strip("/").split("/"), query, headers, body)
        raise ApiError(404, NOT_FOUND, "Not found: %s %s (not simulated)." % (method, path))

    def token(self, headers, body):
        # IAM takes a form body (external-apis.md §3.2; quantum-lsf.md §A1 step 1).
        if "application/x-www-form-urlencoded" not in (headers.get("Content-Type") or ""):
            raise IamError(400, "BXNIM0109E", "Content-Type must be application/x-www-form-urlencoded.")
        form = dict(urllib.parse.parse_qsl(body.decode("utf-8", "replace")))
        return Reply(200, self.iam.exchange(form))

    def search(self, headers):
        # IBM Cloud Global Search POST /v3/resources/search (quantum-lsf.md §A1 step 2): an IAM token is
        # needed; an instance is kept by the client only if doc.extensions is non-empty.
        try:
            self.iam.check(headers)
        except ApiError:
            raise IamError(401, "BXNIM0453E", "Token is not valid.")  # docs silent on Global Search's code
        item = {"crn": self.crn, "name": "bridge-quantum-simulator", "service_plan_unique_id": self.plan_id,
                "doc": {"extensions": {"virtual_private_endpoints": {}, "allocations": [d["name"] for d in DEVICES]}},
                "tags": []}
        return Reply(200, {"items": [item], "limit": 100})

    def catalog(self, plan_id):
        # IBM Cloud Global Catalog GET /{id}: overview_ui.en.display_name, metadata.pricing.type
        # (quantum-lsf.md §A1 step 3); an unknown id is 404 (the client tolerates any HTTP error).
        if plan_id != self.plan_id:
            return Reply(404, {"message": "Entry not found: %s" % plan_id})
        return Reply(200, {"id": plan_id, "name": "open", "overview_ui": {"en": {"display_name": "Open"}},
                           "metadata": {"pricing": {"type": "free"}}})

    def authorize(self, headers):
        self.iam.check(headers)
        # Service-CRN names the instance on every call (external-apis.md §3.1); another instance's
        # CRN, or none, is refused (docs silent on the code; registry 1200 "You are not authorized to
        # perform this action").
        if headers.get("Service-CRN") != self.crn:
            raise ApiError(403, NOT_AUTHORIZED, "You are not authorized to perform this action: Service-CRN does "
                           "not name an instance of this account.", "Send the CRN of your instance in Service-CRN.")

    def api(self, method, parts, query, headers, body):
        rt = self.runtime
        if (method, parts) == ("GET", ["versions"]):
            # Liveness, no auth (docs silent on auth for /versions; the health check needs none).
            return Reply(200, {"versions": API_VERSIONS})
        self.authorize(headers)
        one = {k: v[-1] for k, v in query.items()}
        if method == "GET" and parts == ["backends"]:
            with rt.lock:
                return Reply(200, {"devices": [d.summary(rt.queue_length(d)) for d in rt.devices.values()]})
        if method == "GET" and len(parts) == 3 and parts[0] == "backends":
            device = rt.device(parts[1])
            if parts[2] == "configuration":
                return Reply(200, device.configuration)
            if parts[2] == "properties":
                return Reply(200, device.properties)
            if parts[2] == "status":
                with rt.lock:
                    return Reply(200, device.status_view(rt.queue_length(device)))
        if (method, parts) == ("GET", ["instances", "usage"]):
            return Reply(200, rt.usage(self.crn))
        if parts[0] == "jobs":
            return self.jobs(method, parts[1:], query, one, body)
        if parts[0] == "sessions":
            return self.sessions(method, parts[1:], body)
        raise ApiError(404, NOT_FOUND, "Not found: %s %s/%s (not simulated)." % (method, API, "/".join(parts)))

    def jobs(self, method, rest, query, one, body):
        rt = self.runtime
        if not rest and method == "POST":
            return Reply(200, rt.submit(json_body(body)))
        if not rest and method == "GET":
            return Reply(200, rt.find(query))
        if len(rest) == 1 and method == "GET":
            # exclude_params defaults to false for one job (external-apis.md §3.3 recommends true).
            with rt.lock:
                return Reply(200, rt.job(rest[0]).view(one.get("exclude_params", "false").lower() == "true"))
        if len(rest) == 1 and method == "DELETE":
            rt.delete(rest[0])
            return Reply(204)
        if len(rest) == 2:
            verb = (method, rest[1])
            if verb == ("GET", "results"):
                return Reply(200, text=rt.results(rest[0]))
            if verb == ("POST", "cancel"):
                rt.cancel(rest[0])
                return Reply(204)
            if verb == ("GET", "logs"):
                with rt.lock:
                    return Reply(200, text="".join(line + "\n" for line in rt.job(rest[0]).logs))
            if verb == ("GET", "metrics"):
                with rt.lock:
                    return Reply(200, rt.job(rest[0]).metrics())
            if verb == ("PUT", "tags"):
                # PUT /jobs/{id}/tags {"tags":[..]} -> 204 (client: runtime_job_v2.py update_tags).
                tags = json_body(body).get("tags")
                if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
                    raise ApiError(400, BAD_PAYLOAD, "Send {\"tags\": [strings]}.")
                with rt.lock:
                    rt.job(rest[0]).tags = tags
                return Reply(204)
        raise ApiError(404, NOT_FOUND, "Not found: %s %s/jobs/%s (not simulated)." % (method, API, "/".join(rest)))

    def sessions(self, method, rest, body):
        rt = self.runtime
        if not rest and method == "POST":
            return Reply(200, rt.open_session(json_body(body)))
        if len(rest) == 1 and method == "GET":
            return Reply(200, rt.session_view(rest[0]))
        if len(rest) == 1 and method == "PATCH":
            rt.update_session(rest[0], json_body(body))
            return Reply(204)
        if len(rest) == 2 and rest[1] == "close" and method == "DELETE":
            rt.close_session(rest[0])
            return Reply(204)
        raise ApiError(404, NOT_FOUND, "Not found: %s %s/sessions/%s (not simulated)." % (method, API, "/".join(rest)))


class Handler(BaseHTTPRequestHandler):
    server_version = "Quantum-Runtime-Simulator/1"
    protocol_version = "HTTP/1.1"
    # As in lsf_pac.py: headers and body go in two writes; without this, Nagle's algorithm delays the
    # body of every answer on a kept-alive connection by the client's delayed ACK (docs silent).
    disable_nagle_algorithm = True

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        if self.server.verbose:
            sys.stderr.write("quantum-runtime: %s\n" % (format % args))

    def do_GET(self):
        self._serve("GET")

    def do_POST(self):
        self._serve("POST")

    def do_PUT(self):
        self._serve("PUT")

    def do_PATCH(self):
        self._serve("PATCH")

    def do_DELETE(self):
        self._serve("DELETE")

    def _serve(self, method):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            reply = self.server.app.route(method, url.path, query, self.headers, body)
        except (ApiError, IamError) as exc:
            reply = Reply(exc.status, exc.body())
        except Exception as exc:  # pylint: disable=broad-exception-caught
            # A simulator bug answers 500 with the API's error body rather than a dropped connection.
            reply = Reply(500, ApiError(500, INTERNAL, "API Internal error: %s: %s" % (type(exc).__name__, exc)).body())
        ctype, payload = reply.payload()
        self.server.access(method, url.path, reply.status)
        self.send_response(reply.status)
        if ctype:
            self.send_header("Content-Type", ctype + "; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class QuantumRuntimeSimulator(InProcess):
    """The simulator in-process: an HTTP server on 127.0.0.1 plus one executor thread per device."""

    def __init__(self, api_keys, crn, port=0, token_ttl=3600, access_log=None, verbose=False, **runtime_options):
        account = crn.split(":")[6][2:] if crn.count(":") >= 7 else "bridge"
        self.runtime = Runtime(**runtime_options)
        httpd = AccessLogServer(("127.0.0.1", port), Handler, access_log)
        httpd.app = App(self.runtime, Iam(api_keys, account, token_ttl), crn)
        httpd.verbose = verbose
        super().__init__(self.runtime, httpd, "quantum-http")
        self.url = "http://127.0.0.1:%d%s" % (self.port, API)


def read_credentials(path):
    """api_key=K lines (one or more) and one crn=CRN line."""
    keys, crn = [], None
    with open(path) as handle:
        for line in handle:
            name, sep, value = line.strip().partition("=")
            if sep and name == "api_key":
                keys.append(value)
            elif sep and name == "crn":
                crn = value
    if not keys or not crn:
        raise SystemExit("%s: needs api_key=... and crn=... lines" % path)
    return keys, crn


def main(argv=None):
    parser = argparse.ArgumentParser(description="A simulator of IBM Quantum's Qiskit Runtime REST API (tests only).")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument("--state-dir", required=True, help="where the device list (file devices) is written")
    parser.add_argument("--credentials-file", required=True,
                        help="lines api_key=K (one or more) and crn=CRN (keeps the key out of the process list)")
    parser.add_argument("--access-log", help="append one line per request: time, method, path, status")
    parser.add_argument("--token-ttl", type=int, default=3600, help="IAM token lifetime, seconds")
    parser.add_argument("--queue-seconds", type=float, default=0.2, help="least time a job stays Queued")
    parser.add_argument("--run-seconds", type=float, default=0.2, help="QPU time of a job, seconds, before shots")
    parser.add_argument("--shot-seconds", type=float, default=0.00005, help="QPU time per shot, seconds")
    parser.add_argument("--second", type=float, default=1.0,
                        help="real seconds in one second of max_execution_time and of usage")
    parser.add_argument("--usage-limit", type=int, help="usage seconds the instance may use (default: no limit)")
    parser.add_argument("--port-file", help="write the bound port here once listening")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    api_keys, crn = read_credentials(args.credentials_file)
    sim = QuantumRuntimeSimulator(api_keys, crn, port=args.port, token_ttl=args.token_ttl, access_log=args.access_log,
                                  verbose=args.verbose, queue_seconds=args.queue_seconds, run_seconds=args.run_seconds,
                                  shot_seconds=args.shot_seconds, second=args.second, usage_limit=args.usage_limit)
    os.makedirs(args.state_dir, exist_ok=True)
    # Operational devices first: the one a test should use by default is the first.
    names = [d["name"] for d in sorted(DEVICES, key=lambda d: d["status"] != "online")]
    write_atomically(os.path.join(args.state_dir, "devices"), ",".join(names) + "\n")
    serve(sim, args.port_file, "quantum-runtime simulator listening on %s\n" % sim.url)


if __name__ == "__main__":
    main()
