"""A STUB of IBM Cloud IAM and the Qiskit Runtime REST API, in memory, behind httpx.MockTransport.

Written from the fact sheets (external-apis.md section 3, quantum-lsf.md part A) and the
qiskit-ibm-runtime 0.51.0 source, not from the real service: it answers the requests QuantumClient
makes with the documented shapes, and keeps what it was sent, so tests can read the exact
requests. Jobs do not run; a test moves them with `stub.jobs[id]["state"]`. Not the simulator
(tests/simulators/quantum_runtime.py), which runs circuits.

Also how to write a numpy .npy array and a RuntimeEncoder result by hand, byte by byte as
numpy.save and qiskit_ibm_runtime write them, without numpy.
"""

import base64
import json
import struct
import urllib.parse
import zlib

import httpx

from ansible_collections.bridge.hpc.plugins.module_utils.quantum.client import QuantumClient

API_KEY = "k3y-s3cret-ab12"
CRN = "crn:v1:bluemix:public:quantum-computing:us-east:a/0123456789abcdef:01234567-89ab-cdef::"
URL = "https://quantum.test/api/v1"
IAM_URL = "https://iam.test"
IAT = 1796122800  # 2026-12-01T11:00:00Z
BELL = ('OPENQASM 3.0;\ninclude "stdgates.inc";\nbit[2] meas;\nrz(pi/2) $0;\nsx $0;\nrz(pi/2) $0;\ncz $0, $1;\n'
        'meas[0] = measure $0;\nmeas[1] = measure $1;\n')


def jwt(iat=IAT, lifetime=3600, serial=0):
    def part(value):
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")
    return "%s.%s.c2lnbmF0dXJl%d" % (part({"alg": "RS256", "kid": "k"}), part({"iat": iat, "exp": iat + lifetime}), serial)


# ---------------------------------------------------------------- numpy's bytes, by hand

def npy(descr, shape, items, fortran=False, version=1):
    """The bytes numpy.save writes: magic, version, header length, the header dict padded with
    spaces and a newline to a multiple of 64 bytes, then the items (already packed)."""
    shape_text = "(%s)" % ("%d," % shape[0] if len(shape) == 1 else ", ".join(str(n) for n in shape))
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape_text)
    prefix = 10 if version == 1 else 12
    header += " " * (63 - (prefix + len(header)) % 64) + "\n"
    size = struct.pack("<H", len(header)) if version == 1 else struct.pack("<I", len(header))
    return b"\x93NUMPY" + bytes([version, 0]) + size + header.encode("latin-1") + items


def ndarray_tag(descr, shape, items, **kwargs):
    """RuntimeEncoder's ndarray: base64(zlib(numpy.save bytes))."""
    return {"__type__": "ndarray", "__value__": base64.b64encode(zlib.compress(npy(descr, shape, items, **kwargs))).decode()}


def float64s(values):
    return struct.pack("<%dd" % len(values), *values)


def bit_array(shots, num_bits):
    """RuntimeEncoder's BitArray of integer outcomes (one per shot): each shot big-endian in
    ceil(num_bits / 8) bytes, so the last byte holds clbits 0-7."""
    width = (num_bits + 7) // 8
    items = b"".join(value.to_bytes(width, "big") for value in shots)
    array = ndarray_tag("|u1", (len(shots), width), items)
    return {"__type__": "BitArray", "__value__": {"array": array, "num_bits": num_bits}}


def primitive_result(pubs, kind="SamplerPubResult", metadata=None):
    def pub(fields):
        data = {"__type__": "DataBin", "__value__": {"field_names": sorted(fields), "shape": [], "fields": fields}}
        return {"__type__": kind, "__value__": {"data": data, "metadata": {"circuit_metadata": {}}}}

    return {"__type__": "PrimitiveResult",
            "__value__": {"pub_results": [pub(fields) for fields in pubs], "metadata": metadata or {"version": 2}}}


# ---------------------------------------------------------------- the stub service

def job_record(job_id, body, status="Queued", created="2026-12-01T11:00:00Z"):
    return {"id": job_id, "backend": body.get("backend"), "state": {"status": status}, "status": status,
            "program": {"id": body["program_id"]}, "created": created, "cost": body.get("cost", 0),
            "tags": body.get("tags", []), "session_id": body.get("session_id"), "private": False}


class StubRuntime(object):
    """IAM and the Runtime API in one MockTransport handler; `requests` lists every (method, url)."""

    def __init__(self, devices=None):
        self.devices = devices or {
            "ibm_kingston": {"qubits": 156, "operational": True, "status": "online"},
            "ibm_small": {"qubits": 2, "operational": True, "status": "online"},
            "ibm_paused": {"qubits": 127, "operational": False, "status": "paused"},
        }
        self.jobs = {}
        self.results = {}
        self.logs = {}
        self.sessions = {}
        self.requests = []
        self.bodies = []
        self.usage = {"usage_limit_reached": False, "usage_limit_seconds": 600, "usage_consumed_seconds": 42}
        self.tokens_issued = 0
        self.refuse_tokens = set()
        self.fail_next = []   # (method, path prefix, httpx.Response or Exception) consumed in order
        self.counter = 0
        # States a new job walks through, one per read of it (GET /jobs/{id}); a state is a
        # status or a whole state object ({"status": "Cancelled", "reason_code": 1305}).
        self.walk = []

    def client(self, **options):
        options.setdefault("api_key", API_KEY)
        options.setdefault("service_crn", CRN)
        return self.attach(QuantumClient(URL, iam_url=IAM_URL, retries=0, **options))

    def attach(self, client):
        """Point a client's network at this stub; its own headers (IBM-API-Version, Accept) stay."""
        transport = httpx.MockTransport(self.handle)
        for part in (client.transport, client.iam):
            real = part.http
            part.http = httpx.Client(base_url=part.base_url, transport=transport, headers=real.headers)
            real.close()
        return client

    def api_requests(self):
        return [(method, url) for method, url in self.requests if url.startswith(URL)]

    def handle(self, request):
        url = str(request.url)
        self.requests.append((request.method, url))
        body = request.content.decode() if request.content else ""
        self.bodies.append(body)
        for index, (method, prefix, outcome) in enumerate(self.fail_next):
            if request.method == method and request.url.path.startswith(prefix):
                del self.fail_next[index]
                if isinstance(outcome, Exception):
                    raise outcome
                return outcome
        if url.startswith(IAM_URL):
            return self.iam(request, body)
        auth = request.headers.get("authorization", "")
        if not auth.startswith("Bearer ") or auth[7:] in self.refuse_tokens or request.headers.get("service-crn") != CRN:
            return httpx.Response(401, json={"errors": [{"code": 1201, "message": "Invalid credentials."}]})
        return self.api(request, body)

    def iam(self, request, body):
        form = urllib.parse.parse_qs(body)
        if form.get("apikey") != [API_KEY] or form.get("grant_type") != ["urn:ibm:params:oauth:grant-type:apikey"]:
            return httpx.Response(400, json={"errorCode": "BXNIM0415E", "errorMessage": "Provided API key could not be found."})
        self.tokens_issued += 1
        return httpx.Response(200, json={"access_token": jwt(serial=self.tokens_issued), "refresh_token": "not_supported",
                                         "token_type": "Bearer", "expires_in": 3600, "expiration": IAT + 3600})

    def api(self, request, body):
        path = request.url.path[len("/api/v1"):]
        parts = [urllib.parse.unquote(part) for part in path.strip("/").split("/")]
        method = request.method
        if path == "/backends":
            return httpx.Response(200, json={"devices": [
                {"name": name, "status": {"name": device["status"]}, "qubits": device["qubits"], "queue_length": 0,
                 "processor_type": {"family": "Heron", "revision": "r2"}} for name, device in self.devices.items()]})
        if parts[0] == "backends" and len(parts) == 3:
            device = self.devices.get(parts[1])
            if device is None:
                return httpx.Response(404, json={"errors": [{"code": 1007, "message": "Backend not found."}]})
            if parts[2] == "status":
                return httpx.Response(200, json={"state": device["operational"], "status": "active" if device["operational"]
                                                 else "maintenance", "length_queue": 0, "backend_version": "1.0.0"})
            if parts[2] == "configuration":
                return httpx.Response(200, json={"backend_name": parts[1], "backend_version": "1.0.0", "n_qubits": device["qubits"],
                                                 "basis_gates": ["cz", "id", "rz", "sx", "x"], "simulator": False,
                                                 "max_shots": 100000, "online_date": "2024-01-01T00:00:00Z"})
            if parts[2] == "properties":
                return httpx.Response(200, json={"backend_name": parts[1], "qubits": [], "gates": [], "general": []})
        if path == "/instances/usage":
            return httpx.Response(200, json=self.usage)
        if path == "/jobs" and method == "POST":
            payload = json.loads(body)
            self.counter += 1
            job_id = "d6147q3traac73bef%03d" % self.counter
            self.jobs[job_id] = job_record(job_id, payload, created="2026-12-01T11:%02d:00Z" % self.counter)
            self.jobs[job_id]["walk"] = list(self.walk)
            return httpx.Response(200, json={"id": job_id, "backend": payload.get("backend")})
        if path == "/jobs" and method == "GET":
            query = request.url.params
            tags = query.get_list("tags")
            jobs = [dict((k, v) for k, v in job.items() if k != "walk")
                    for job in sorted(self.jobs.values(), key=lambda job: job["created"], reverse=True)
                    if all(tag in job["tags"] for tag in tags)
                    and (not query.get("backend") or job["backend"] == query.get("backend"))
                    and (query.get("pending") is None or (job["state"]["status"] in ("Queued", "Running")) == (query.get("pending") == "true"))]
            offset, limit = int(query.get("offset", 0)), int(query.get("limit", 200))
            return httpx.Response(200, json={"jobs": jobs[offset:offset + limit], "count": len(jobs)})
        if parts[0] == "jobs" and len(parts) >= 2:
            job = self.jobs.get(parts[1])
            if job is None:
                return httpx.Response(404, json={"errors": [{"code": 1291, "message": "Job not found."}]})
            if len(parts) == 2:
                if job.get("walk") and job["state"]["status"] in ("Queued", "Running"):
                    step = job["walk"].pop(0)
                    job["state"] = step if isinstance(step, dict) else {"status": step}
                    job["status"] = job["state"]["status"]
                return httpx.Response(200, json=dict((k, v) for k, v in job.items() if k != "walk"))
            if parts[2] == "cancel":
                if job["state"]["status"] not in ("Queued", "Running"):
                    return httpx.Response(409, json={"errors": [{"code": 3213, "message": "Job status not valid"}]})
                job["state"] = {"status": "Cancelled"}
                job["status"] = "Cancelled"
                return httpx.Response(204)
            if parts[2] == "results":
                return httpx.Response(200, text=self.results.get(parts[1], ""), headers={"content-type": "application/json"})
            if parts[2] == "logs":
                if parts[1] not in self.logs:
                    return httpx.Response(404, json={"errors": [{"message": "Logs not found"}]})
                return httpx.Response(200, text=self.logs[parts[1]], headers={"content-type": "text/plain"})
            if parts[2] == "metrics":
                return httpx.Response(200, json={"timestamps": {"created": job["created"], "running": "2026-12-01T11:30:00Z",
                                                                "finished": None}, "usage": {"quantum_seconds": 2, "status": "pending"}})
        if path == "/sessions" and method == "POST":
            payload = json.loads(body)
            session_id = "s%03d" % (len(self.sessions) + 1)
            self.sessions[session_id] = dict(payload, accepting_jobs=True)
            return httpx.Response(200, json={"id": session_id})
        if parts[0] == "sessions" and method == "PATCH":
            self.sessions[parts[1]].update(json.loads(body))
            return httpx.Response(204)
        return httpx.Response(404, json={"errors": [{"message": "no route %s %s" % (method, path)}]})
