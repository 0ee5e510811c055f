# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""IBM Quantum client for Bridge, over the Qiskit Runtime REST API (IBM Quantum Platform).

`url` is the API base, e.g. https://quantum.cloud.ibm.com/api/v1. A job is one primitive run
(program "sampler" or "estimator") on one device: its PUBs carry OpenQASM 3 text, so neither
qiskit nor numpy is needed. The quirks of the service live here: an API key that IBM Cloud IAM
trades for a short-lived bearer token, the Service-CRN and IBM-API-Version headers on every call,
title-case job states where "Cancelled" with reason code 1305 means the job ran out of time, job
tags as the only place a job can carry Bridge's identity (and a tag filter that matches jobs
carrying all the tags asked for), and results in one of two encodings: plain JSON (hex samples)
or qiskit_ibm_runtime's RuntimeEncoder tags, whose arrays are base64(zlib(numpy .npy bytes)).

Protocol facts and their sources: docs/quantum.md and the shared external-apis.md section 3.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import calendar
import json
import re
import time

try:
    from urllib.parse import quote, urlencode
except ImportError:  # Python 2, which ansible-test still compiles module_utils for
    from urllib import quote, urlencode

from ansible_collections.bridge.hpc.plugins.module_utils._backend import (
    TERMINAL_PHASES,
    Backend,
    ShapeError,
    answer_summary,
    decode,
    json_of,
    newest_by_identity,
    select,
    status_phrase,
    with_launcher,
)
from ansible_collections.bridge.hpc.plugins.module_utils._runtime_results import (
    DEFAULT_MAX_BITSTRINGS,
    decode_results,
    summarize_results,
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

MANAGER = "IBM Quantum"
IAM = "IBM Cloud IAM"
DEFAULT_IAM_URL = "https://iam.cloud.ibm.com"
# The IBM-API-Version qiskit-ibm-runtime 0.51.0 sends (api/rest/base.py _HEADER_API_VERSION); it
# selects the answers' schemas, so it is pinned rather than left to the service's default.
DEFAULT_API_VERSION = "2026-04-15"
IAM_GRANT_TYPE = "urn:ibm:params:oauth:grant-type:apikey"
# qiskit's jwt_token_manager renews at 80 % of a token's lifetime; so does Bridge.
TOKEN_REFRESH_FRACTION = 0.8
TAG_PREFIX = "bridge:"
NAME_TAG_PREFIX = "bridge-name:"
# Every Bridge job also carries this tag: GET /jobs?tags= matches jobs carrying *all* the tags
# asked for, so several identities are looked up through the tag they share.
BRIDGE_TAG = "bridge"
PAGE_SIZE = 200
PRIMITIVES = ("sampler", "estimator")
# POST /sessions modes; "session" is qiskit's name for a dedicated session.
SESSION_MODES = {"batch": "batch", "dedicated": "dedicated", "session": "dedicated"}
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
# The service caps a job's max execution time (`cost`) at three hours instead of refusing more.
MAX_COST_SECONDS = 10800
RAN_TOO_LONG = 1305
PHASE_BY_STATUS = {"queued": "queued", "running": "running", "completed": "completed", "failed": "failed",
                   "cancelled": "cancelled"}
TIMEOUT_REASON = re.compile(r"ran too long|time ?out|max(imum)? execution time", re.IGNORECASE)

# Spec fields that mean nothing to a primitive run on a QPU.
UNSUPPORTED = {
    "environment": "a primitive run has no environment; pass values as PUB parameter_values",
    "working_directory": "a primitive run has no working directory",
    "stdout": "results are read with bridge.hpc.quantum_job_info (results=true)",
    "stderr": "the job log is read with bridge.hpc.quantum_job_info (logs=true)",
    "account": "the instance is the service_crn connection option",
    "qos": "IBM Quantum has no quality of service",
    "constraints": "name the device with queue",
}
UNSUPPORTED_RESOURCES = {
    "nodes": "nodes", "tasks": "tasks", "tasks_per_node": "tasks_per_node", "cpus_per_task": "cpus_per_task",
    "gpus": "gpus", "gpu_type": "gpu_type", "memory_mb": "memory", "memory_per_cpu_mb": "memory_per_cpu",
}
OPTION_KEYS = ("primitive", "pubs", "shots", "precision", "options", "resilience_level", "session", "mode",
               "max_ttl", "log_level", "private")
PUB_KEYS = ("circuit", "parameter_values", "shots", "observables", "precision")
PAULI = re.compile(r"^[IXYZ]+$")


# ---------------------------------------------------------------- OpenQASM 3 text (pure)

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_VERSION = re.compile(r"^\s*OPENQASM\s+(\d+)(?:\.(\d+))?\s*;")
_SIZE = r"(?:\[\s*([^\]]+?)\s*\])"
_QUBIT = re.compile(r"(?<![\w$])qubit\s*" + _SIZE + r"?\s+([A-Za-z_]\w*)\s*;")
_QREG = re.compile(r"(?<![\w$])qreg\s+([A-Za-z_]\w*)\s*" + _SIZE + r"?\s*;")
_BIT = re.compile(r"(?<![\w$])bit\s*" + _SIZE + r"?\s+([A-Za-z_]\w*)\s*[;=]")
_CREG = re.compile(r"(?<![\w$])creg\s+([A-Za-z_]\w*)\s*" + _SIZE + r"?\s*;")
_PHYSICAL = re.compile(r"\$(\d+)")
_INPUT = re.compile(r"(?<![\w$])input\s+[A-Za-z_]\w*\s*(?:\[[^\]]*\])?\s+([A-Za-z_]\w*)\s*;")
_CONST = re.compile(r"(?<![\w$])const\s+[A-Za-z_]\w*\s*(?:\[[^\]]*\])?\s+([A-Za-z_]\w*)\s*=\s*(\d+)\s*;")


def qasm_problem(text):
    """Why `text` is no OpenQASM 3 program the Runtime API would take, or None."""
    if text is None or not text.strip():
        return "is empty"
    if text.startswith("#!"):
        return "is a script with a #! line; the quantum backend runs OpenQASM 3 circuits"
    code = _COMMENTS.sub(" ", text)
    version = _VERSION.match(code)
    if version and version.group(1) != "3":
        return ("is OpenQASM %s; the Qiskit Runtime REST API takes OpenQASM 3 (qiskit.qasm3.dumps writes it)"
                % version.group(1))
    if _PHYSICAL.search(code) and (_QUBIT.search(code) or _QREG.search(code)):
        # qiskit's OpenQASM 3 importer, which the service reads circuits with, refuses this
        # ("Mixing modes not currently supported").
        return "addresses physical qubits ($n) and declares qubits too; use one or the other"
    return None


def circuit_shape(text):
    """What Bridge reads of an OpenQASM 3 circuit without parsing it fully:

    {"qubits": width or None when a register size is not a literal or constant, "clbits": {register:
    size}, "inputs": [parameter names]}.
    The width of a circuit on physical qubits is the highest index plus one, as the service reads it
    (an estimator observable has one Pauli per qubit of that width).
    """
    code = _COMMENTS.sub(" ", text)
    constants = dict((name, int(value)) for name, value in _CONST.findall(code))

    def size(expression):
        if not expression:
            return 1
        expression = expression.strip()
        if expression.isdigit():
            return int(expression)
        return constants.get(expression)

    declared = [size(expression) for expression, _name in _QUBIT.findall(code)]
    declared += [size(expression) for _name, expression in _QREG.findall(code)]
    physical = [int(index) for index in _PHYSICAL.findall(code)]
    clbits = dict((name, size(expression)) for expression, name in _BIT.findall(code))
    clbits.update((name, size(expression)) for name, expression in _CREG.findall(code))
    if None in declared:
        width = None
    else:
        width = max(sum(declared), (max(physical) + 1) if physical else 0)
    return {"qubits": width, "clbits": clbits, "inputs": _INPUT.findall(code)}


# ---------------------------------------------------------------- compiling the spec (pure)

def _options(spec):
    options = spec["backend_options"].get("quantum")
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise SpecError("backend_options.quantum", "must be a dictionary (primitive, pubs, shots, ...)")
    unknown = sorted(set(options) - set(OPTION_KEYS))
    if unknown:
        raise SpecError("backend_options.quantum.%s" % unknown[0],
                        "unknown option; allowed: %s" % ", ".join(OPTION_KEYS))
    return options


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _positive_int(value, field):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise SpecError(field, "must be a whole number of 1 or more, got %r" % (value,))
    return value


def _positive_number(value, field):
    if not _is_number(value) or value <= 0:
        raise SpecError(field, "must be a number above 0, got %r" % (value,))
    return value


def pub_circuits(spec):
    """[(field of the circuit, OpenQASM text)] of the spec's PUBs: each PUB's own circuit, else the
    spec's script (the default circuit). Pure; the circuit text is checked, not parsed."""
    options = _options(spec)
    pubs = options.get("pubs")
    if pubs is None:
        pubs = [{}]
    if not isinstance(pubs, list) or not pubs or not all(isinstance(pub, dict) for pub in pubs):
        raise SpecError("backend_options.quantum.pubs", "must be a non-empty list of dictionaries "
                        "(circuit, parameter_values, shots, observables, precision)")
    circuits = []
    for index, pub in enumerate(pubs):
        field = "backend_options.quantum.pubs[%d]" % index
        unknown = sorted(set(pub) - set(PUB_KEYS))
        if unknown:
            raise SpecError("%s.%s" % (field, unknown[0]), "unknown PUB field; allowed: %s" % ", ".join(PUB_KEYS))
        if pub.get("circuit") is not None:
            if not isinstance(pub["circuit"], str):
                raise SpecError(field + ".circuit", "must be OpenQASM 3 text")
            where, text = field + ".circuit", pub["circuit"]
        elif spec.get("script"):
            where, text = "script", spec["script"]
        else:
            raise SpecError(field + ".circuit", "no circuit: give OpenQASM 3 text here or as the spec's script")
        problem = qasm_problem(text)
        if problem:
            raise SpecError(where, problem)
        circuits.append((where, text))
    return circuits


def _array_of_numbers(value):
    """Whether value is a number or a (nested) list of numbers."""
    if isinstance(value, list):
        return all(_array_of_numbers(item) for item in value)
    return _is_number(value)


def _last_axis(value):
    while isinstance(value, list) and value and isinstance(value[0], list):
        value = value[0]
    return len(value) if isinstance(value, list) else 1


def _parameter_values(value, field, inputs):
    if value is None:
        if inputs:
            raise SpecError(field, "the circuit declares inputs %s; give their values" % ", ".join(inputs))
        return None
    if not inputs:
        raise SpecError(field, "the circuit declares no input parameters (input float[64] name;)")
    if isinstance(value, dict):
        if sorted(value) != sorted(inputs):
            raise SpecError(field, "give a value for each input of the circuit, exactly: %s" % ", ".join(sorted(inputs)))
        for name, values in value.items():
            if not _array_of_numbers(values):
                raise SpecError("%s.%s" % (field, name), "must be a number or a list of numbers")
        return value
    if isinstance(value, list) and _array_of_numbers(value):
        if _last_axis(value) != len(inputs):
            raise SpecError(field, "the innermost list must hold %d values, one per input (%s, in the order "
                            "qiskit sorts them)" % (len(inputs), ", ".join(sorted(inputs))))
        return value
    raise SpecError(field, "must be a dictionary of input name to value(s), or a list of values")


def _observables(value, field, width):
    """Observables as the service takes them: a Pauli string, {pauli: coefficient}, or a list of either."""
    items = value if isinstance(value, list) else [value]
    if not items:
        raise SpecError(field, "must name at least one observable")
    for item in items:
        if isinstance(item, str):
            paulis = [item]
        elif isinstance(item, dict):
            paulis = list(item)
            for pauli, coefficient in item.items():
                if not _is_number(coefficient):
                    raise SpecError("%s.%s" % (field, pauli), "the coefficient must be a number, got %r" % (coefficient,))
        else:
            raise SpecError(field, "must be a Pauli string such as ZZI, a dictionary of Pauli string to "
                            "coefficient, or a list of these")
        for pauli in paulis:
            if not isinstance(pauli, str) or not PAULI.match(pauli):
                raise SpecError(field, "'%s' is not a Pauli string of I, X, Y and Z" % (pauli,))
            if width is not None and len(pauli) != width:
                raise SpecError(field, "'%s' has %d Paulis but the circuit is %d qubits wide (one Pauli per "
                                "qubit, the last character for qubit 0)" % (pauli, len(pauli), width))
    return value


def _trimmed(pub):
    """A PUB list without its trailing nulls, as IBM's REST examples send them."""
    while len(pub) > 1 and pub[-1] is None:
        pub.pop()
    return pub


def _pubs(spec, primitive):
    options = _options(spec)
    pubs = options.get("pubs") or [{}]
    compiled = []
    for index, ((_where, text), pub) in enumerate(zip(pub_circuits(spec), pubs)):
        field = "backend_options.quantum.pubs[%d]" % index
        shape = circuit_shape(text)
        values = _parameter_values(pub.get("parameter_values"), field + ".parameter_values", shape["inputs"])
        if primitive == "sampler":
            for key in ("observables", "precision"):
                if pub.get(key) is not None:
                    raise SpecError("%s.%s" % (field, key), "is for the estimator; this job's primitive is the sampler")
            shots = _positive_int(pub["shots"], field + ".shots") if pub.get("shots") is not None else None
            compiled.append(_trimmed([text, values, shots]))
        else:
            if pub.get("shots") is not None:
                raise SpecError(field + ".shots", "is for the sampler; the estimator takes precision")
            if pub.get("observables") is None:
                raise SpecError(field + ".observables", "the estimator needs observables (e.g. {\"ZZ\": 1.0})")
            observables = _observables(pub["observables"], field + ".observables", shape["qubits"])
            precision = pub.get("precision")
            if precision is not None:
                _positive_number(precision, field + ".precision")
            compiled.append(_trimmed([text, observables, values, precision]))
    return compiled


def identity_tags(spec):
    tags = [BRIDGE_TAG, TAG_PREFIX + spec["identity"]]
    if spec["name"] and spec["name"] != spec["identity"]:
        tags.append(NAME_TAG_PREFIX + spec["name"])
    return tags


def _params(spec, options, primitive):
    """The body's params: the PUBs, version 2, and the primitive's own settings."""
    params = {"pubs": _pubs(spec, primitive), "version": 2}
    if options.get("shots") is not None:
        if primitive != "sampler":
            raise SpecError("backend_options.quantum.shots", "is for the sampler; the estimator takes precision")
        params["shots"] = _positive_int(options["shots"], "backend_options.quantum.shots")
    if options.get("precision") is not None:
        if primitive != "estimator":
            raise SpecError("backend_options.quantum.precision", "is for the estimator; the sampler takes shots")
        params["precision"] = _positive_number(options["precision"], "backend_options.quantum.precision")
    if options.get("resilience_level") is not None:
        level = options["resilience_level"]
        if primitive != "estimator" or level not in (0, 1, 2) or isinstance(level, bool):
            raise SpecError("backend_options.quantum.resilience_level", "is 0, 1 or 2, and for the estimator only")
        params["resilience_level"] = level
    if options.get("options") is not None:
        if not isinstance(options["options"], dict):
            raise SpecError("backend_options.quantum.options", "must be a dictionary of primitive options "
                            "(default_shots, dynamical_decoupling, twirling, resilience, execution, ...)")
        params["options"] = options["options"]
    return params


def _run_fields(options):
    """The body's fields of how the job runs: the session it joins, its log level, privacy."""
    fields = {}
    session, mode = options.get("session"), options.get("mode")
    if session is not None and mode is not None:
        raise SpecError("backend_options.quantum.mode", "give either session (the id of one to join) or mode "
                        "(open a new one), not both")
    if session is not None:
        if not isinstance(session, str) or not session.strip():
            raise SpecError("backend_options.quantum.session", "must be a session id")
        fields["session_id"] = session
    if mode is not None and mode not in SESSION_MODES:
        raise SpecError("backend_options.quantum.mode", "'%s' is not a mode; use batch or session" % (mode,))
    if options.get("max_ttl") is not None:
        if mode is None:
            raise SpecError("backend_options.quantum.max_ttl", "is the lifetime of a session Bridge opens; "
                            "it needs mode")
        _positive_int(options["max_ttl"], "backend_options.quantum.max_ttl")
    if options.get("log_level") is not None:
        if options["log_level"] not in LOG_LEVELS:
            raise SpecError("backend_options.quantum.log_level", "must be one of %s" % ", ".join(LOG_LEVELS))
        fields["log_level"] = options["log_level"]
    if options.get("private") is not None:
        if not isinstance(options["private"], bool):
            raise SpecError("backend_options.quantum.private", "must be true or false")
        if options["private"]:
            fields["private"] = True
    return fields


def compile_quantum(spec):
    """The exact POST /jobs body of a spec, shown as `rendered`.

    With backend_options.quantum.mode, submit first opens a session (POST /sessions) and adds its
    session_id to this body.
    """
    for field, why in UNSUPPORTED.items():
        if spec.get(field):
            raise SpecError(field, "not supported by the quantum backend: %s" % why)
    for key, name in UNSUPPORTED_RESOURCES.items():
        if spec["resources"].get(key) is not None:
            raise SpecError("resources.%s" % name, "not supported by the quantum backend: a primitive run "
                            "asks for no classical resources; only resources.time_limit applies")
    options = _options(spec)
    primitive = options.get("primitive", "sampler")
    if primitive not in PRIMITIVES:
        raise SpecError("backend_options.quantum.primitive", "'%s' is not a primitive; use sampler or estimator"
                        % (primitive,))
    body = {"program_id": primitive}
    if spec["queue"]:
        # Without one the service would pick the least busy device; check refuses that, since
        # ISA circuits are made for one device.
        body["backend"] = spec["queue"]
    body.update(params=_params(spec, options, primitive), tags=identity_tags(spec))
    minutes = spec["resources"]["time_limit_minutes"]
    if minutes:
        body["cost"] = minutes * 60
    body.update(_run_fields(options))
    return body


def session_request(spec):
    """The POST /sessions body a spec asks for (backend_options.quantum.mode), or None; without the
    instance, which the client adds."""
    options = _options(spec)
    if options.get("mode") is None:
        return None
    request = {"mode": SESSION_MODES[options["mode"]], "backend": spec["queue"]}
    if options.get("max_ttl") is not None:
        request["max_ttl"] = options["max_ttl"]
    return request


# ---------------------------------------------------------------- normalizing answers (pure)

_ISO = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:\.\d+)?(Z|[+-]\d\d:?\d\d)?$")


def iso_time(value):
    """RFC 3339 UTC seconds of an ISO 8601 time (fractions dropped, offsets applied); None if absent."""
    if not isinstance(value, str):
        return None
    match = _ISO.match(value.strip())
    if not match:
        return None
    fields = [int(part) for part in match.groups()[:6]]
    epoch = calendar.timegm(tuple(fields) + (0, 0, 0))
    offset = match.group(7)
    if offset and offset != "Z":
        sign = -1 if offset[0] == "-" else 1
        digits = offset[1:].replace(":", "")
        epoch -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _string(value, field):
    if value is None:
        return None
    if not isinstance(value, str):
        raise ShapeError("'%s' must be a string, got %s" % (field, type(value).__name__))
    return value


def _tag_value(tags, prefix):
    return next((tag[len(prefix):] for tag in tags if isinstance(tag, str) and tag.startswith(prefix)), None)


def normalize_job(native):
    """A Qiskit Runtime job (GET /jobs/{id}, an item of GET /jobs) as Bridge's job dict."""
    if not isinstance(native, dict):
        raise ShapeError("a job must be a JSON object, got %s" % type(native).__name__)
    job_id = native.get("id")
    if not isinstance(job_id, str) or not job_id:
        raise ShapeError("a job without an id")
    state = native.get("state") or {}
    if not isinstance(state, dict):
        raise ShapeError("'state' must be an object")
    status = _string(state.get("status") or native.get("status"), "state.status") or "Unknown"
    code = state.get("reason_code", state.get("reasonCode"))
    reason = _string(state.get("reason"), "state.reason")
    lowered = status.strip().lower()
    failure_class = None
    if lowered.startswith("cancelled") and (code == RAN_TOO_LONG or "ran too long" in lowered):
        # The job exceeded its max execution time (cost) or the service's: a failure, not a cancel.
        phase, failure_class = "failed", "timeout"
        reason = reason or "ran longer than its maximum execution time"
    elif lowered in PHASE_BY_STATUS:
        phase = PHASE_BY_STATUS[lowered]
        if phase == "cancelled":
            failure_class = "cancelled"
        elif phase == "failed":
            failure_class = "timeout" if reason and TIMEOUT_REASON.search(reason) else "non_zero_exit"
    else:
        # qiskit passes unknown states through and never treats them as final; so does Bridge.
        phase = "queued"
        reason = reason or "state '%s' is unknown to Bridge" % status
    tags = native.get("tags") or []
    if not isinstance(tags, list):
        raise ShapeError("'tags' must be a list")
    identity = _tag_value(tags, TAG_PREFIX)
    program = native.get("program") or {}
    usage = native.get("usage") or {}
    if not isinstance(program, dict) or not isinstance(usage, dict):
        raise ShapeError("'program' and 'usage' must be objects")
    return {
        "job_id": job_id,
        "name": _tag_value(tags, NAME_TAG_PREFIX) or identity,
        "identity": identity,
        "phase": phase,
        "terminal": phase in TERMINAL_PHASES,
        "native_state": status,
        "reason": reason,
        "reason_code": code,
        "reason_solution": state.get("reason_solution"),
        "exit_code": None,
        "signal": None,
        "failure_class": failure_class,
        "submit_time": iso_time(native.get("created")),
        "start_time": None,
        # Not in IBM's JobResponse model; taken where an answer has it (the simulator's does).
        "end_time": iso_time(native.get("end_time")) if phase in TERMINAL_PHASES else None,
        "device": _string(native.get("backend"), "backend"),
        "primitive": program.get("id"),
        "session_id": native.get("session_id"),
        # The service serves a private job's results once (IBM: "private" in JobResponse).
        "private": native.get("private") is True,
        "tags": tags,
        "quantum_seconds": usage.get("quantum_seconds"),
        "native": native,
    }


def processor_type(native):
    """processor_type of a device list item or a configuration: {"family", "revision", "segment"}
    (revision a string or a number: "r2", "5.11", 4) or, where a device says only that, a string.
    Returns processor_type ("Heron r2"), processor_family and processor_revision (a string)."""
    if isinstance(native, dict):
        family, revision = native.get("family"), native.get("revision")
        family = None if family in (None, "") else "%s" % family
        revision = None if revision in (None, "") else "%s" % revision
        text = " ".join(part for part in (family, revision) if part) or None
        return {"processor_type": text, "processor_family": family, "processor_revision": revision}
    return {"processor_type": _string(native, "processor_type") or None, "processor_family": None,
            "processor_revision": None}


# Units of T1 and T2 in a device's properties, in microseconds (BackendProperties writes "us").
MICROSECONDS = {"s": 1e6, "ms": 1e3, "us": 1.0, "\u00b5s": 1.0, "ns": 1e-3}


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _median(values):
    values = sorted(values)
    if not values:
        return None
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2.0


def calibration_medians(native):
    """Median figures of GET /backends/{name}/properties (a BackendProperties): readout error, T1 and
    T2 in microseconds over the qubits, gate error over the two-qubit gates. Each is null when the
    properties have no such value ({} for a device without calibration data)."""
    if not isinstance(native, dict):
        raise ShapeError("properties must be an object")
    readout, t1, t2, two_qubit = [], [], [], []
    for qubit in native.get("qubits") or []:
        for item in qubit or []:
            if not isinstance(item, dict) or not _number(item.get("value")):
                continue
            if item.get("name") == "readout_error":
                readout.append(item["value"])
            elif item.get("name") in ("T1", "T2") and item.get("unit", "us") in MICROSECONDS:
                (t1 if item["name"] == "T1" else t2).append(item["value"] * MICROSECONDS[item.get("unit", "us")])
    for gate in native.get("gates") or []:
        if not isinstance(gate, dict) or len(gate.get("qubits") or []) != 2:
            continue
        two_qubit.extend(item["value"] for item in gate.get("parameters") or []
                         if isinstance(item, dict) and item.get("name") == "gate_error" and _number(item.get("value")))
    return {"median_readout_error": _median(readout), "median_t1_us": _median(t1), "median_t2_us": _median(t2),
            "median_two_qubit_error": _median(two_qubit)}


def normalize_device(native):
    """An item of GET /backends: an object (API versions since 2025-01-01) or a bare name (older)."""
    if isinstance(native, str):
        native = {"name": native}
    if not isinstance(native, dict) or not isinstance(native.get("name"), str):
        raise ShapeError("a device must be an object with a name")
    status = native.get("status")
    status_name = status.get("name") if isinstance(status, dict) else status
    simulator = native.get("is_simulator")
    record = {
        "name": native["name"],
        "status": _string(status_name, "status.name"),
        "status_reason": (status.get("reason") or None) if isinstance(status, dict) else None,
        "qubits": native.get("qubits", native.get("physical_qubits")),
        "queue_length": native.get("queue_length"),
        "simulator": simulator if isinstance(simulator, bool) else None,
        "mock": native.get("class") == "mock",
        "native": native,
    }
    record.update(processor_type(native.get("processor_type")))
    return record


def normalize_status(name, native):
    """GET /backends/{name}/status: {"state": operational, "status", "length_queue", "backend_version"}."""
    if not isinstance(native, dict):
        raise ShapeError("a device status must be an object")
    state = native.get("state")
    if not isinstance(state, bool):
        raise ShapeError("'state' must be true or false, got %s" % type(state).__name__)
    return {
        "name": name,
        "operational": state,
        "status_message": _string(native.get("status"), "status"),
        "pending_jobs": native.get("length_queue"),
        "version": native.get("backend_version"),
        "native": native,
    }


def normalize_configuration(name, native):
    """GET /backends/{name}/configuration (a QasmBackendConfiguration); n_qubits is required."""
    if not isinstance(native, dict):
        raise ShapeError("a configuration must be an object")
    qubits = native.get("n_qubits")
    if not isinstance(qubits, int) or isinstance(qubits, bool):
        raise ShapeError("a configuration without n_qubits")
    gates = native.get("basis_gates") or []
    if not isinstance(gates, list):
        raise ShapeError("'basis_gates' must be a list")
    record = {
        "name": native.get("backend_name") or name,
        "qubits": qubits,
        "basis_gates": gates,
        "simulator": bool(native.get("simulator")),
        "max_shots": native.get("max_shots"),
        "max_experiments": native.get("max_experiments"),
        "version": native.get("backend_version"),
        "native": native,
    }
    record.update(processor_type(native.get("processor_type")))
    return record


def normalize_usage(native):
    """GET /instances/usage: whether the instance may still run work, and its seconds."""
    if not isinstance(native, dict):
        raise ShapeError("usage must be an object")
    reached = native.get("usage_limit_reached", False)
    if not isinstance(reached, bool):
        raise ShapeError("'usage_limit_reached' must be true or false")
    limit = native.get("usage_limit_seconds", native.get("usage_allocation_seconds"))
    consumed = native.get("usage_consumed_seconds")
    remaining = native.get("usage_remaining_seconds")
    if remaining is None and _is_number(limit) and _is_number(consumed):
        remaining = max(limit - consumed, 0)
    return {"limit_reached": reached, "limit_seconds": limit, "consumed_seconds": consumed,
            "remaining_seconds": remaining, "native": native}


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
    if _is_number(claims.get("exp")) and _is_number(claims.get("iat")):
        lifetime = claims["exp"] - claims["iat"]
    elif _is_number(answer.get("expires_in")):
        lifetime = answer["expires_in"]
    elif _is_number(answer.get("expiration")):
        lifetime = answer["expiration"] - now
    elif _is_number(claims.get("exp")):
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


# ---------------------------------------------------------------- the client

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
    CAPABILITIES = frozenset(["queues", "logs", "token_auth", "preflight"])
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

    def close(self):
        self.transport.close()
        self.iam.close()

    # -- plumbing

    def _missing_credentials(self):
        missing = [(name, self.ENV[name][0]) for name, value in (("api_key", self.api_key),
                                                                 ("service_crn", self.service_crn)) if not value]
        if missing:
            raise AuthFailed("%s required: IBM Quantum takes an API key and the CRN of the service instance" % (
                " and ".join("%s (or %s)" % pair for pair in missing) + (" are" if len(missing) > 1 else " is")),
                manager=MANAGER, url=self.url)

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

    def _call(self, method, path, verb, obj, ident=None, params=None, json_body=None, idempotent=None, parse=None,
              answer="json", missing_ok=False):
        """One authenticated request; `parse` of its JSON (answer="json"), its text ("text"), or
        nothing (answer="empty": the action endpoints answer 204 without a body, so a body is
        another service's). A 401 renews the token once: a refused token means nothing was done, so
        sending the request again cannot duplicate it, even a submit. `missing_ok` makes a 404 None."""
        self._missing_credentials()
        for attempt in (1, 2):
            headers = {"Authorization": "Bearer %s" % self._bearer(), "Service-CRN": self.service_crn}
            response = self.transport.request(method, path, params=params, json=json_body, headers=headers,
                                              idempotent=idempotent, verb=verb, obj=obj, ident=ident)
            if response.status_code == 401 and attempt == 1:
                self._token = None
                continue
            break
        if response.status_code == 404 and missing_ok:
            return None
        if response.status_code >= 400:
            self._raise(response, verb, obj, ident)
        endpoint = "%s %s" % (method, path)
        if answer == "empty":
            return decode(_no_body, response, endpoint, MANAGER, self.url, verb, obj, ident)
        if answer == "text":
            body = decode(_text_body, response, endpoint, MANAGER, self.url, verb, obj, ident)
        else:
            body = json_of(response, endpoint, MANAGER, self.url, verb, obj, ident)
        return decode(parse, body, endpoint, MANAGER, self.url, verb, obj, ident) if parse else body

    def _reason(self, response, transport):
        try:
            message = error_text(response.json())
        except ValueError:
            message = None
        # Only the JSON errors of the service (and IAM's) are shown: a body of another kind may be
        # any page of the server a URL points at, so its status stands for it.
        return transport.scrub(message or status_phrase(response.status_code))[:500]

    def _raise(self, response, verb, obj, ident):
        status = response.status_code
        reason = self._reason(response, self.transport)
        if status == 401:
            raise AuthFailed("authentication failed: %s" % reason, verb, obj, ident, MANAGER, self.url, status)
        if status == 403:
            # The token is good but does not reach this instance or object (a Service-CRN of another
            # account: code 1200).
            raise AuthFailed("not authorized: %s" % reason, verb, obj, ident, MANAGER, self.url, status)
        # 409 is a conflict with the instance or the job (usage limit reached, job already final),
        # never an existing object of the same name.
        error = Rejected if status == 409 else error_for_status(status)
        raise error(reason, verb, obj, ident, MANAGER, self.url, status)

    # -- the service

    def describe(self):
        """Reads the devices: only the Runtime API answers GET /backends with {"devices": [...]}."""
        devices = self.devices()
        return {"manager": MANAGER, "url": self.url, "version": None, "api_version": self.api_version,
                "iam_url": self.iam_url, "devices": len(devices)}

    def devices(self):
        """The devices (backends) this instance may use: GET /backends."""
        self._devices = self._call("GET", "/backends", "list", "devices", parse=_devices)
        return self._devices

    def device_status(self, name):
        return self._call("GET", "/backends/%s/status" % quote(name, safe=""), "read the status of", "device", name,
                          parse=lambda body: normalize_status(name, body))

    def configuration(self, name):
        return self._call("GET", "/backends/%s/configuration" % quote(name, safe=""), "read the configuration of",
                          "device", name, parse=lambda body: normalize_configuration(name, body))

    def properties(self, name):
        """The device's calibration data as the service sends it ({} when it has none)."""
        return self._call("GET", "/backends/%s/properties" % quote(name, safe=""), "read the properties of",
                          "device", name, parse=_object)

    def usage(self):
        return self._call("GET", "/instances/usage", "read the usage of", "instance", parse=normalize_usage)

    def inventory(self):
        """The devices with status, configuration and calibration properties, for the inventory plugin."""
        return {"devices": self.device_details(gather=("status", "configuration", "properties"))}

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
                raise NotFound("no such device; available: %s" % (", ".join(sorted(known)) or "none"),
                               "read", "device", unknown[0], MANAGER, self.url)
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
        return compile_quantum(with_launcher(self, spec))

    def check(self, spec):
        """Refuse a job the service would refuse or never run: no such device (the error names those
        there are), a device out of operation, circuits wider than the device, a spent instance.
        Devices, statuses, configurations and usage are read once per client (a batch is checked
        against one view)."""
        body = self.render(spec)
        if self._devices is None:
            self.devices()
        names = [device["name"] for device in self._devices]
        if not spec["queue"]:
            raise SpecError("queue", "name the device to run on (circuits are transpiled for one device); "
                            "available: %s" % (", ".join(sorted(names)) or "none"))
        if spec["queue"] not in names:
            raise SpecError("queue", "'%s' is not a device of this instance; available: %s" % (
                spec["queue"], ", ".join(sorted(names)) or "none"))
        name = spec["queue"]
        if name not in self._statuses:
            self._statuses[name] = self.device_status(name)
        status = self._statuses[name]
        if not status["operational"]:
            raise SpecError("queue", "device '%s' is not operational (%s); jobs would wait until it returns" % (
                name, status["status_message"] or "no status message"))
        if name not in self._configurations:
            self._configurations[name] = self.configuration(name)
        qubits = self._configurations[name]["qubits"]
        for where, text in pub_circuits(spec):
            shape = circuit_shape(text)
            if shape["qubits"] is None:
                self.warnings.append("%s: a register size is no number Bridge can read; the service checks the "
                                     "circuit's width against device '%s'" % (where, name))
            elif shape["qubits"] > qubits:
                raise SpecError(where, "the circuit is %d qubits wide but device '%s' has %d" % (
                    shape["qubits"], name, qubits))
            if body["program_id"] == "sampler" and not shape["clbits"]:
                self.warnings.append("%s: the circuit declares no classical bits, so the sampler returns no "
                                     "outcomes; measure into a bit register" % where)
        if body.get("cost", 0) > MAX_COST_SECONDS:
            self.warnings.append("resources.time_limit: IBM Quantum caps a job's maximum execution time at %d "
                                 "seconds (3 hours)" % MAX_COST_SECONDS)
        if self._usage is None:
            self._usage = self.usage()
        if self._usage["limit_reached"]:
            raise Rejected("the instance has reached its usage limit (%s of %s seconds used); workloads do not run "
                           "until time is made available" % (self._usage["consumed_seconds"],
                                                             self._usage["limit_seconds"]),
                           "submit", "job", spec["name"], MANAGER, self.url)

    def submit(self, spec):
        """POST /jobs once, never retried (the rate limit is five jobs a minute, and a job costs QPU
        time). When no answer comes back, the identity is looked up before giving up. With
        backend_options.quantum.mode a session is opened first and closed to new jobs after."""
        body = self.render(spec)
        session = session_request(spec)
        if session is not None:
            body = dict(body, session_id=self.create_session(**session))
        try:
            return self._call("POST", "/jobs", "submit", "job", spec["name"], json_body=body, idempotent=False,
                              parse=_created)
        except (ConnectionFailed, Timeout, ServerError) as exc:
            if isinstance(exc, ServerError) and exc.status not in (502, 503, 504):
                raise
            existing = self.find(spec["identity"])
            if existing is not None:
                return existing["job_id"]
            raise type(exc)(exc.reason + "; the submission may not have reached IBM Quantum and was not retried "
                            "(no job with identity '%s' exists now)" % spec["identity"],
                            exc.verb, exc.obj, exc.ident, exc.manager, exc.url, exc.status)
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
        return self._call("GET", "/jobs/%s" % quote(job_id, safe=""), "get", "job", job_id,
                          params={"exclude_params": "true"}, parse=normalize_job)

    def _page(self, params, limit=PAGE_SIZE, offset=0):
        query = dict(params, exclude_params="true", limit=limit)
        if offset:
            query["offset"] = offset
        return self._call("GET", "/jobs", "list", "jobs", params=query, parse=_job_list)

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
            self._call("POST", "/jobs/%s/cancel" % quote(job_id, safe=""), "cancel", "job", job_id,
                       idempotent=True, answer="empty")
        except Rejected as exc:
            if exc.status != 409:
                raise

    def logs(self, job_id, tail_lines=None):
        """The job's log (GET /jobs/{id}/logs, text); "" when the service keeps none (404)."""
        text = self._call("GET", "/jobs/%s/logs" % quote(job_id, safe=""), "read logs of", "job", job_id,
                          answer="text", parse=_log_text, missing_ok=True) or ""
        if tail_lines:
            text = "".join(text.splitlines(True)[-tail_lines:])
        return text

    def results(self, job_id, max_bitstrings=DEFAULT_MAX_BITSTRINGS):
        """The decoded results of a completed job (decode_results)."""
        text = self._call("GET", "/jobs/%s/results" % quote(job_id, safe=""), "read results of", "job", job_id,
                          answer="text")
        endpoint = "GET /jobs/%s/results" % job_id
        return decode(lambda body: decode_results(body, max_bitstrings), text, endpoint, MANAGER, self.url,
                      "read results of", "job", job_id)

    def results_summary(self, job):
        """The counts or expectation values of a completed job (summarize_results); None otherwise,
        and for a private job, whose results the service serves once: they are left to its owner."""
        if job.get("phase") != "completed" or job.get("private"):
            return None
        return summarize_results(self.results(job["job_id"], max_bitstrings=0))

    def metrics(self, job_id):
        """GET /jobs/{id}/metrics: timestamps and usage (usage.status stays pending until the job is final)."""
        native = self._call("GET", "/jobs/%s/metrics" % quote(job_id, safe=""), "read metrics of", "job", job_id,
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
        return self._call("POST", "/sessions", "open", "session", backend, json_body=body, idempotent=False,
                          parse=_session_id)

    def session(self, session_id):
        return self._call("GET", "/sessions/%s" % quote(session_id, safe=""), "read", "session", session_id,
                          parse=_object)

    def close_session(self, session_id):
        """PATCH /sessions/{id} {accepting_jobs: false}: queued jobs still run; a session already gone (404) is fine."""
        self._call("PATCH", "/sessions/%s" % quote(session_id, safe=""), "close", "session", session_id,
                   json_body={"accepting_jobs": False}, idempotent=True, answer="empty", missing_ok=True)

    def cancel_session(self, session_id):
        """DELETE /sessions/{id}/close: cancels the session's queued jobs."""
        self._call("DELETE", "/sessions/%s/close" % quote(session_id, safe=""), "cancel", "session", session_id,
                   answer="empty")
