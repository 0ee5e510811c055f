# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""IBM Quantum client for Bridge, over the Qiskit Runtime REST API (IBM Quantum Platform).

`url` is the API base, e.g. https://quantum.cloud.ibm.com/api/v1. A job is one primitive run
(program "sampler" or "estimator") on one device: its PUBs carry OpenQASM 3 text, so neither
qiskit nor numpy is needed. The quirks of the service live in this package: an API key that IBM
Cloud IAM trades for a short-lived bearer token, the Service-CRN and IBM-API-Version headers on
every call, title-case job states where "Cancelled" with reason code 1305 means the job ran out of
time, job tags as the only place a job can carry Bridge's identity (and a tag filter that matches
jobs carrying all the tags asked for), and results in one of two encodings: plain JSON (hex
samples) or qiskit_ibm_runtime's RuntimeEncoder tags, whose arrays are base64(zlib(numpy .npy
bytes)).

Protocol facts and their sources: docs/quantum.md and the shared external-apis.md section 3.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json
import re
import time

try:
    from urllib.parse import quote, urlencode
except ImportError:  # Python 2, which ansible-test still compiles module_utils for
    from urllib import quote, urlencode

from ansible_collections.bridge.hpc.plugins.module_utils._backend import (
    Backend,
    ShapeError,
    TERMINAL_PHASES,
    answer_summary,
    compilable,
    decode,
    json_of,
    manager_reason,
    newest_by_identity,
    select,
)
from ansible_collections.bridge.hpc.plugins.module_utils._errors import (
    AuthFailed,
    BridgeError,
    ConnectionFailed,
    NotFound,
    Rejected,
    ServerError,
    SpecError,
    Timeout,
    error_for_status,
)
from ansible_collections.bridge.hpc.plugins.module_utils._transport import Transport
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.compile import (
    BRIDGE_TAG,
    SESSION_MODES,
    TAG_PREFIX,
    compile_job,
    is_number,
    session_request,
)
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.fit import (
    check_device,
    check_fits,
    check_operational,
    normalize_configuration,
    normalize_device,
    normalize_status,
    normalize_usage,
    queue_records,
)
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.qasm import qasm_problem
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.results import (
    DEFAULT_MAX_BITSTRINGS,
    decode_results,
    summarize_results,
)
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.states import iso_time, normalize_job


MANAGER = "IBM Quantum"
IAM = "IBM Cloud IAM"
DEFAULT_IAM_URL = "https://iam.cloud.ibm.com"
# The IBM-API-Version qiskit-ibm-runtime 0.51.0 sends (api/rest/base.py _HEADER_API_VERSION); it
# selects the answers' schemas, so it is pinned rather than left to the service's default.
DEFAULT_API_VERSION = "2026-04-15"
IAM_GRANT_TYPE = "urn:ibm:params:oauth:grant-type:apikey"
# qiskit's jwt_token_manager renews at 80 % of a token's lifetime; so does Bridge.
TOKEN_REFRESH_FRACTION = 0.8
PAGE_SIZE = 200
# IBM Cloud IAM's error codes ("BXNIM0415E": an unknown API key).
IAM_ERROR_CODE = re.compile(r"^BXNIM\d{4}[EWI]$")


def error_text(body):
    """The service's message in an error answer: {"errors": [{"message", "code"}]}, {"error":
    {"message", "code"}}, IAM's {"errorMessage", "errorCode"}, or {"message"}; None otherwise."""
    if not isinstance(body, dict):
        return None

    def one(item):
        if isinstance(item, str):
            return item.strip() or None
        if not isinstance(item, dict):
            return None
        message = item.get("message") or item.get("errorMessage")
        if not isinstance(message, str) or not message.strip():
            return None
        code = item.get("code", item.get("errorCode"))
        text = message.strip() + (" (code %s)" % code if code not in (None, "") else "")
        solution = item.get("solution")
        if isinstance(solution, str) and solution.strip():
            text += "; %s" % solution.strip()
        return text

    messages = []
    if isinstance(body.get("errors"), list):
        messages = [text for text in (one(item) for item in body["errors"]) if text]
    if not messages and body.get("error") is not None:
        messages = [text for text in [one(body["error"])] if text]
    if not messages:
        messages = [text for text in [one(body)] if text]
    if not messages:
        messages = [body[key].strip() for key in ("detail", "title") if isinstance(body.get(key), str) and body[key].strip()]
    return "; ".join(messages) or None


def ibm_error(body, status):
    """Whether an error answer is in a format of IBM's own, which vouches for its server before
    any other answer did (a wrong API key or Service-CRN is the first answer a user sees): IBM
    Cloud's error model of the Runtime API, {"errors": [...], "trace", "status_code": the HTTP
    status}, or IAM's {"errorCode": "BXNIM0415E", "errorMessage"}. A bare {"message"}, {"error"},
    {"detail"} or {"title"} is any JSON service's."""
    if not isinstance(body, dict):
        return False
    if isinstance(body.get("errorCode"), str) and IAM_ERROR_CODE.match(body["errorCode"]):
        return True
    return (isinstance(body.get("errors"), list) and isinstance(body.get("trace"), str)
            and body.get("status_code") == status)


def _jwt_claims(token):
    """The claims of a JWT, read without checking its signature (only to learn when it expires)."""
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    try:
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        claims = json.loads(payload.decode("utf-8"))
    except (ValueError, TypeError, UnicodeDecodeError):
        return {}
    return claims if isinstance(claims, dict) else {}


def token_lifetime(answer, now):
    """(token, seconds after `now` to renew it or None) of an IAM token answer: 80 % of the lifetime
    the JWT's exp and iat claims give, else expires_in, else the absolute expiration."""
    if not isinstance(answer, dict) or not isinstance(answer.get("access_token"), str) or not answer["access_token"]:
        raise ShapeError("no access_token, so not IBM Cloud IAM's token answer")
    token = answer["access_token"]
    claims = _jwt_claims(token)
    lifetime = None
    if is_number(claims.get("exp")) and is_number(claims.get("iat")):
        lifetime = claims["exp"] - claims["iat"]
    elif is_number(answer.get("expires_in")):
        lifetime = answer["expires_in"]
    elif is_number(answer.get("expiration")):
        lifetime = answer["expiration"] - now
    elif is_number(claims.get("exp")):
        lifetime = claims["exp"] - now
    return token, (max(lifetime, 0) * TOKEN_REFRESH_FRACTION if lifetime is not None else None)


def _job_list(body):
    if not isinstance(body, dict) or not isinstance(body.get("jobs"), list):
        raise ShapeError("expected {\"jobs\": [...], \"count\": n}")
    count = body.get("count")
    if count is not None and (not isinstance(count, int) or isinstance(count, bool)):
        raise ShapeError("'count' must be a number")
    return [normalize_job(job) for job in body["jobs"]], count


def _devices(body):
    if not isinstance(body, dict) or not isinstance(body.get("devices"), list):
        raise ShapeError("expected {\"devices\": [...]}")
    return [normalize_device(device) for device in body["devices"]]


def _created(body):
    if not isinstance(body, dict) or not isinstance(body.get("id"), str) or not body["id"]:
        raise ShapeError("no job id in the answer")
    return body["id"]


def _session_id(body):
    if not isinstance(body, dict) or not isinstance(body.get("id"), str) or not body["id"]:
        raise ShapeError("no session id in the answer")
    return body["id"]


def _content_type(response):
    return (response.headers.get("content-type") or "").lower()


def _no_body(response):
    """An action's answer: 204, or a 2xx with nothing in it (an empty JSON object at most); an empty
    body labelled JSON is no JSON, and any other body is another service's."""
    text = response.text.strip()
    json_type = "json" in _content_type(response)
    if response.status_code == 204 or (not text and not json_type) or (json_type and text in ("{}", "null")):
        return None
    raise ShapeError("%s where the API answers nothing" % answer_summary(_content_type(response), response.content))


def _text_body(response):
    """A text answer (a log, results): text, or a JSON document (a JSON string as its text); never
    an HTML page, and an empty or cut body labelled JSON is no JSON."""
    kind = _content_type(response)
    if "html" in kind:
        raise ShapeError("an HTML page where the API answers text")
    if "json" in kind:
        value = json.loads(response.text)
        if isinstance(value, str):
            return value
    return response.text


def _log_text(body):
    """A log is text; JSON in its place (a JSON string aside) is another service's answer."""
    stripped = body.strip()
    if stripped[:1] in ("{", "[", '"'):
        try:
            value = json.loads(stripped)
        except ValueError:
            return body
        if not isinstance(value, str):
            raise ShapeError("a JSON %s where the API answers a log's text" % type(value).__name__)
        return value
    return body


def _object(body):
    if not isinstance(body, dict):
        raise ShapeError("expected a JSON object, got %s" % type(body).__name__)
    return body


class QuantumClient(Backend):
    """Domain verbs over the Qiskit Runtime REST API of IBM Quantum Platform."""

    NAME = "quantum"
    TITLE = MANAGER
    URL_NAME = "the Qiskit Runtime API URL (https://quantum.cloud.ibm.com/api/v1)"
    CONNECTION = dict(
        iam_url=dict(type="str"),
        api_key=dict(type="str"),
        service_crn=dict(type="str"),
        api_version=dict(type="str"),
    )
    ENV = dict(url=("QUANTUM_URL",), iam_url=("QUANTUM_IAM_URL",), api_key=("QUANTUM_API_KEY",),
               service_crn=("QUANTUM_SERVICE_CRN",))
    CREDENTIALS = ("api_key", "service_crn")
    SECRETS = ("api_key",)
    SECRET_KEYS = {"api_key": "apiKey", "service_crn": "serviceCrn"}
    CAPABILITIES = frozenset(["logs", "token_auth", "preflight"])
    SCRIPT = "OpenQASM 3 circuit"

    @classmethod
    def from_options(cls, get):
        return cls(cls.require_url(get("url")), api_key=get("api_key"), service_crn=get("service_crn"),
                   iam_url=get("iam_url"), api_version=get("api_version"), **cls.transport_options(get))

    @classmethod
    def check_script(cls, script, backend_options):
        """The script is the default circuit of the PUBs: OpenQASM 3, not needed when every PUB has its own."""
        if script is None or not script.strip():
            pubs = (backend_options.get("quantum") or {}).get("pubs") if isinstance(backend_options, dict) else None
            if isinstance(pubs, list) and pubs and all(isinstance(pub, dict) and pub.get("circuit") for pub in pubs):
                return
            raise SpecError("script", "a quantum job needs an OpenQASM 3 circuit: the script (inline, or "
                            "script_file on the controller) or a circuit in every PUB")
        problem = qasm_problem(script)
        if problem:
            raise SpecError("script", problem)

    def __init__(self, url, api_key=None, service_crn=None, iam_url=None, api_version=None, validate_certs=True,
                 ca_path=None, timeout=30.0, retries=3, transport=None, iam_transport=None, clock=time.time):
        api_version = api_version or DEFAULT_API_VERSION
        if not re.match(r"^\d{4}-\d\d-\d\d$", api_version):
            raise SpecError("api_version", "'%s' is not an IBM-API-Version date such as %s" % (
                api_version, DEFAULT_API_VERSION))
        self.url = url.rstrip("/")
        self.iam_url = (iam_url or DEFAULT_IAM_URL).rstrip("/")
        self.api_key = api_key
        self.service_crn = service_crn
        self._api_version = api_version
        tls = dict(validate_certs=validate_certs, ca_path=ca_path, timeout=timeout, retries=retries)
        self.transport = transport or Transport(
            self.url, MANAGER, headers={"Accept": "application/json", "IBM-API-Version": api_version},
            secrets=[api_key], **tls)
        self.iam = iam_transport or Transport(self.iam_url, IAM, headers={"Accept": "application/json"},
                                              secrets=[api_key], **tls)
        for transport_ in (self.transport, self.iam):
            if api_key and api_key not in transport_.secrets:
                transport_.secrets.append(api_key)
        self.clock = clock
        self.warnings = []
        self._token = None
        self._renew_at = None
        self._devices = None
        self._statuses = {}
        self._configurations = {}
        self._usage = None

    @property
    def api_version(self):
        return self._api_version

    @property
    def requests_sent(self):
        return self.transport.requests_sent + self.iam.requests_sent

    def limit_urls(self, allow_list):
        self.transport.allow_list = self.iam.allow_list = allow_list

    def close(self):
        self.transport.close()
        self.iam.close()

    # -- plumbing

    def _missing_credentials(self):
        missing = [(name, self.ENV[name][0]) for name, value in (("api_key", self.api_key),
                                                                 ("service_crn", self.service_crn)) if not value]
        if missing:
            raise self.error(AuthFailed, "%s required: IBM Quantum takes an API key and the CRN of the service "
                             "instance" % (" and ".join("%s (or %s)" % pair for pair in missing)
                                           + (" are" if len(missing) > 1 else " is")))

    def authenticate(self):
        """Trade the API key for an IAM bearer token (POST {iam_url}/identity/token); cached and renewed
        at 80 % of its lifetime. A token exchange creates nothing, so it may be retried."""
        self._missing_credentials()
        body = urlencode([("grant_type", IAM_GRANT_TYPE), ("apikey", self.api_key)]).encode("ascii")
        response = self.iam.request("POST", "/identity/token", content=body, idempotent=True,
                                    headers={"Content-Type": "application/x-www-form-urlencoded"},
                                    verb="authenticate with", obj="API key")
        if response.status_code >= 400:
            reason = self._reason(response, self.iam)
            if response.status_code in (400, 401, 403):
                raise AuthFailed("IBM Cloud IAM refused the API key: %s" % reason, "authenticate with", "API key",
                                 None, IAM, self.iam_url, response.status_code)
            raise error_for_status(response.status_code)(reason, "authenticate with", "API key", None, IAM,
                                                         self.iam_url, response.status_code)
        endpoint = "POST /identity/token"
        answer = json_of(response, endpoint, IAM, self.iam_url, "authenticate with", "API key")
        now = self.clock()
        token, renew_after = decode(lambda body_: token_lifetime(body_, now), answer, endpoint, IAM, self.iam_url,
                                    "authenticate with", "API key")
        # An access token for the API key: the server is IBM Cloud IAM, whose later errors may be said.
        self.iam.vouched = True
        for transport_ in (self.transport, self.iam):
            if token not in transport_.secrets:
                transport_.secrets.append(token)
        self._token = token
        self._renew_at = None if renew_after is None else now + renew_after
        return token

    def _bearer(self):
        if self._token is None or (self._renew_at is not None and self.clock() >= self._renew_at):
            self.authenticate()
        return self._token

    def credentials(self):
        """The bearer token, traded for the API key when there is none or it is due for renewal,
        and the instance's CRN."""
        self._missing_credentials()
        return {"Authorization": "Bearer %s" % self._bearer(), "Service-CRN": self.service_crn}

    def renew(self, response):
        """A 401 refused the token (expired before its renewal time, or revoked): trade again."""
        if response.status_code == 401:
            self._token = None
            return True
        return False

    def _reason(self, response, transport):
        """The service's (or IAM's, `transport`'s) message in an error answer as manager_reason lets
        it be said: once that server has answered as the API (a token, a device or job list), or
        when the answer is in IBM's own error format (ibm_error)."""
        try:
            body = response.json()
        except ValueError:
            body = None
        vouched = transport.vouched or ibm_error(body, response.status_code)
        return manager_reason(error_text(body), response.status_code, transport.scrub, vouched)

    def refuse(self, response, verb, obj, ident):
        status = response.status_code
        reason = self._reason(response, self.transport)
        if status == 401:
            raise self.error(AuthFailed, "authentication failed: %s" % reason, verb, obj, ident, status)
        if status == 403:
            # The token is good but does not reach this instance or object (a Service-CRN of another
            # account: code 1200).
            raise self.error(AuthFailed, "not authorized: %s" % reason, verb, obj, ident, status)
        # 409 is a conflict with the instance or the job (usage limit reached, job already final),
        # never an existing object of the same name.
        if status == 409:
            raise self.error(Rejected, reason, verb, obj, ident, status)
        raise self.status_error(status, reason, verb, obj, ident)

    # -- the service

    def describe(self):
        """Reads the devices: only the Runtime API answers GET /backends with {"devices": [...]}."""
        devices = self.devices()
        return {"manager": MANAGER, "url": self.url, "version": None, "api_version": self.api_version,
                "iam_url": self.iam_url, "devices": len(devices)}

    def devices(self):
        """The devices (backends) this instance may use: GET /backends."""
        self._devices = self.call("GET", "/backends", "list", "devices", parse=_devices)
        return self._devices

    def device_status(self, name):
        return self.call("GET", "/backends/%s/status" % quote(name, safe=""), "read the status of", "device", name,
                         parse=lambda body: normalize_status(name, body))

    def configuration(self, name):
        return self.call("GET", "/backends/%s/configuration" % quote(name, safe=""), "read the configuration of",
                         "device", name, parse=lambda body: normalize_configuration(name, body))

    def properties(self, name):
        """The device's calibration data as the service sends it ({} when it has none)."""
        return self.call("GET", "/backends/%s/properties" % quote(name, safe=""), "read the properties of",
                         "device", name, parse=_object)

    def usage(self):
        return self.call("GET", "/instances/usage", "read the usage of", "instance", parse=normalize_usage)

    def inventory(self):
        """The devices with status, configuration and calibration properties, for the inventory plugin."""
        return {"devices": self.device_details(gather=("status", "configuration", "properties"))}

    def capacity(self):
        """Each device's capacity record from one request, GET /backends (status, qubits and queue
        length of every device), after the IBM Cloud IAM token exchange when the client holds no
        valid token."""
        return {"manager": MANAGER, "version": None, "api_version": self.api_version,
                "queues": queue_records(self.devices())}

    def device_details(self, names=None, gather=("status", "configuration")):
        """The devices (all, or those named) with what `gather` asks for, one request per device and
        part: "status" (operational, status_message, pending_jobs, version), "configuration" (qubits,
        basis_gates, processor_type, simulator, max_shots, ...), "properties" (calibration data as
        sent). NotFound names a device the instance does not have."""
        devices = self.devices()
        known = dict((device["name"], device) for device in devices)
        if names:
            unknown = [name for name in names if name not in known]
            if unknown:
                raise self.error(NotFound, "no such device; available: %s" % (", ".join(sorted(known)) or "none"),
                                 "read", "device", unknown[0])
            devices = [known[name] for name in names]
        result = []
        for device in devices:
            record = dict(device)
            natives = {"list": device["native"]}
            if "status" in gather:
                status = self.device_status(device["name"])
                natives["status"] = status.pop("native")
                status.pop("name")
                record.update(status)
            if "configuration" in gather:
                configuration = self.configuration(device["name"])
                natives["configuration"] = configuration.pop("native")
                configuration.pop("name")
                # The list's own figures (the device's current processor type, queue) win over the
                # configuration's where both have one.
                record.update((key, value) for key, value in configuration.items()
                              if value is not None and record.get(key) is None)
            if "properties" in gather:
                record["properties"] = self.properties(device["name"])
            record["native"] = natives
            result.append(record)
        return result

    # -- jobs

    @classmethod
    def launcher(cls, spec):
        """Refused: the script is an OpenQASM 3 circuit, not a shell program with a command to launch."""
        raise SpecError("script", "$(LAUNCHER) marks where a shell program's parallel command starts; a quantum "
                        "job's script is an OpenQASM 3 circuit, which the Sampler or Estimator runs as a whole "
                        "(shots in backend_options.quantum); remove it")

    def render(self, spec):
        return compile_job(compilable(self, spec))

    def check(self, spec):
        """Refuse a job the service would refuse or never run: no such device (the error names those
        there are), a device out of operation, circuits wider than the device, a spent instance.
        Devices, statuses, configurations and usage are read once per client (a batch is checked
        against one view)."""
        body = self.render(spec)
        if self._devices is None:
            self.devices()
        name = check_device(spec, self._devices)
        if name not in self._statuses:
            self._statuses[name] = self.device_status(name)
        check_operational(name, self._statuses[name])
        if name not in self._configurations:
            self._configurations[name] = self.configuration(name)
        check_fits(spec, body, name, self._configurations[name]["qubits"], self.warnings)
        if self._usage is None:
            self._usage = self.usage()
        if self._usage["limit_reached"]:
            raise self.error(Rejected, "the instance has reached its usage limit (%s of %s seconds used); workloads do "
                             "not run until time is made available" % (self._usage["consumed_seconds"],
                                                                       self._usage["limit_seconds"]),
                             "submit", "job", spec["name"])

    def submit(self, spec):
        """POST /jobs once, never retried (the rate limit is five jobs a minute, and a job costs QPU
        time). When no answer comes back, the identity is looked up before giving up. With
        backend_options.quantum.mode a session is opened first and closed to new jobs after."""
        body = self.render(spec)
        session = session_request(spec)
        if session is not None:
            body = dict(body, session_id=self.create_session(**session))
        try:
            return self.call("POST", "/jobs", "submit", "job", spec["name"], json=body, idempotent=False,
                             parse=_created)
        except (ConnectionFailed, Timeout, ServerError) as lost:
            if isinstance(lost, ServerError) and lost.status not in (502, 503, 504):
                raise
            return self.found_after_lost_submit(spec, lost)
        finally:
            if session is not None:
                # Bridge's session holds this one job: closing it lets the job run and takes no more.
                self._close_quietly(body["session_id"])

    def _close_quietly(self, session_id):
        try:
            self.close_session(session_id)
        except BridgeError as exc:
            self.warnings.append("could not close session %s: %s" % (session_id, exc))

    def get(self, job_id):
        return self.call("GET", "/jobs/%s" % quote(job_id, safe=""), "get", "job", job_id,
                         params={"exclude_params": "true"}, parse=normalize_job)

    def _page(self, params, limit=PAGE_SIZE, offset=0):
        query = dict(params, exclude_params="true", limit=limit)
        if offset:
            query["offset"] = offset
        return self.call("GET", "/jobs", "list", "jobs", params=query, parse=_job_list)

    def list(self, identities=None, name=None, phases=None, device=None, limit=None):
        """Jobs of the instance, newest first: those carrying `identities` (find_many), else every
        job, page by page until `limit` or the end; narrowed by name, phase and device. The service
        filters by device and by pending (queued or running) or not."""
        if identities is not None:
            jobs = list(self.find_many(identities).values())
            return select(jobs, None, name, phases)
        params = {}
        if device:
            params["backend"] = device
        if phases:
            if set(phases) <= {"queued", "running"}:
                params["pending"] = "true"
            elif set(phases) <= set(TERMINAL_PHASES):
                params["pending"] = "false"
        jobs = []
        while limit is None or len(jobs) < limit:
            size = PAGE_SIZE if limit is None else min(PAGE_SIZE, limit - len(jobs))
            page, count = self._page(params, size, len(jobs))
            jobs.extend(page)
            if not page or len(page) < size or (count is not None and len(jobs) >= count):
                break
        return select(jobs, None, name, phases)

    def find_many(self, identities, names=None):
        """{identity: newest job carrying it}. One identity is one request by its tag; several are read
        from one page of jobs tagged "bridge", and those not on it by their own tags (a tag filter
        matches jobs carrying all the tags asked for, so they cannot be asked for at once)."""
        wanted = list(dict.fromkeys(identities))
        if not wanted:
            return {}
        if len(wanted) == 1:
            jobs, _count = self._page({"tags": TAG_PREFIX + wanted[0]})
        else:
            jobs, _count = self._page({"tags": BRIDGE_TAG})
            seen = set(job["identity"] for job in jobs)
            for identity in wanted:
                if identity not in seen:
                    jobs.extend(self._page({"tags": TAG_PREFIX + identity})[0])
        return newest_by_identity(select(jobs, wanted), self.warnings)

    def cancel(self, job_id):
        """POST /jobs/{id}/cancel; a job already final (409) is left as it is."""
        try:
            self.call("POST", "/jobs/%s/cancel" % quote(job_id, safe=""), "cancel", "job", job_id,
                      idempotent=True, read=_no_body)
        except Rejected as exc:
            if exc.status != 409:
                raise

    def logs(self, job_id, tail_lines=None):
        """The job's log (GET /jobs/{id}/logs, text); "" when the service keeps none (404)."""
        text = self.call("GET", "/jobs/%s/logs" % quote(job_id, safe=""), "read logs of", "job", job_id,
                         read=_text_body, parse=_log_text, missing=None) or ""
        if tail_lines:
            text = "".join(text.splitlines(True)[-tail_lines:])
        return text

    def results(self, job_id, max_bitstrings=DEFAULT_MAX_BITSTRINGS):
        """The decoded results of a completed job (decode_results)."""
        text = self.call("GET", "/jobs/%s/results" % quote(job_id, safe=""), "read results of", "job", job_id,
                         read=_text_body)
        endpoint = "GET /jobs/%s/results" % job_id
        return self.decoded(lambda body: decode_results(body, max_bitstrings), text, endpoint,
                            "read results of", "job", job_id)

    def results_summary(self, job):
        """The counts or expectation values of a completed job (summarize_results); None otherwise,
        and for a private job, whose results the service serves once: they are left to its owner."""
        if job.get("phase") != "completed" or job.get("private"):
            return None
        return summarize_results(self.results(job["job_id"], max_bitstrings=0))

    def metrics(self, job_id):
        """GET /jobs/{id}/metrics: timestamps and usage (usage.status stays pending until the job is final)."""
        native = self.call("GET", "/jobs/%s/metrics" % quote(job_id, safe=""), "read metrics of", "job", job_id,
                           parse=_object)
        timestamps = native.get("timestamps") if isinstance(native.get("timestamps"), dict) else {}
        usage = native.get("usage") if isinstance(native.get("usage"), dict) else {}
        return {
            "created": iso_time(timestamps.get("created")),
            "running": iso_time(timestamps.get("running")),
            "finished": iso_time(timestamps.get("finished")),
            "quantum_seconds": usage.get("quantum_seconds"),
            "qpu_charge_time_seconds": usage.get("qpu_charge_time_seconds"),
            "usage_status": usage.get("status"),
            "native": native,
        }

    # -- sessions

    def create_session(self, backend, mode, max_ttl=None):
        """POST /sessions {mode: dedicated|batch, backend, instance, max_ttl?}; returns its id. Not
        retried: a lost answer would leave a session nobody knows of."""
        body = {"mode": SESSION_MODES.get(mode, mode), "backend": backend, "instance": self.service_crn}
        if max_ttl:
            body["max_ttl"] = max_ttl
        return self.call("POST", "/sessions", "open", "session", backend, json=body, idempotent=False,
                         parse=_session_id)

    def session(self, session_id):
        return self.call("GET", "/sessions/%s" % quote(session_id, safe=""), "read", "session", session_id,
                         parse=_object)

    def close_session(self, session_id):
        """PATCH /sessions/{id} {accepting_jobs: false}: queued jobs still run; a session already gone (404) is fine."""
        self.call("PATCH", "/sessions/%s" % quote(session_id, safe=""), "close", "session", session_id,
                  json={"accepting_jobs": False}, idempotent=True, read=_no_body, missing=None)

    def cancel_session(self, session_id):
        """DELETE /sessions/{id}/close: cancels the session's queued jobs."""
        self.call("DELETE", "/sessions/%s/close" % quote(session_id, safe=""), "cancel", "session", session_id,
                  read=_no_body)
