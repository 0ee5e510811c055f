# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The POST /jobs body of a job spec (pure), shown as `rendered`: one primitive run (sampler or
estimator) whose PUBs carry OpenQASM 3 text, tagged with Bridge's identity.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.qasm import circuit_shape, qasm_problem


TAG_PREFIX = "bridge:"
NAME_TAG_PREFIX = "bridge-name:"
# Every Bridge job also carries this tag: GET /jobs?tags= matches jobs carrying *all* the tags
# asked for, so several identities are looked up through the tag they share.
BRIDGE_TAG = "bridge"
PRIMITIVES = ("sampler", "estimator")
# POST /sessions modes; "session" is qiskit's name for a dedicated session.
SESSION_MODES = {"batch": "batch", "dedicated": "dedicated", "session": "dedicated"}
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


OPTION_KEYS = ("primitive", "pubs", "shots", "precision", "options", "resilience_level", "session", "mode",
               "max_ttl", "log_level", "private")
PUB_KEYS = ("circuit", "parameter_values", "shots", "observables", "precision")
PAULI = re.compile(r"^[IXYZ]+$")


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


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _positive_int(value, field):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise SpecError(field, "must be a whole number of 1 or more, got %r" % (value,))
    return value


def _positive_number(value, field):
    if not is_number(value) or value <= 0:
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
    return is_number(value)


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
                if not is_number(coefficient):
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


def compile_job(spec):
    """The exact POST /jobs body of a spec, shown as `rendered`.

    With backend_options.quantum.mode, submit first opens a session (POST /sessions) and adds its
    session_id to this body.
    """
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
