# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""IBM Quantum devices, their status, configuration and calibration, and the instance's usage
normalized, and whether a job fits a device (pure): check_device and check_fits refuse a job the
service would refuse or never run; queue_records makes each device's capacity record.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.bridge.hpc.plugins.module_utils._backend import ShapeError, queue_record
from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.compile import is_number, pub_circuits
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.qasm import circuit_shape
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.states import optional_string


# A device's status that runs jobs; "paused" (maintenance) and others queue them without running.
ONLINE = "online"
# The service caps a job's max execution time (`cost`) at three hours instead of refusing more.
MAX_COST_SECONDS = 10800


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
    return {"processor_type": optional_string(native, "processor_type") or None, "processor_family": None,
            "processor_revision": None}


# Units of T1 and T2 in a device's properties, in microseconds (BackendProperties writes "us").
MICROSECONDS = {"s": 1e6, "ms": 1e3, "us": 1.0, "\u00b5s": 1.0, "ns": 1e-3}


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
            if not isinstance(item, dict) or not is_number(item.get("value")):
                continue
            if item.get("name") == "readout_error":
                readout.append(item["value"])
            elif item.get("name") in ("T1", "T2") and item.get("unit", "us") in MICROSECONDS:
                (t1 if item["name"] == "T1" else t2).append(item["value"] * MICROSECONDS[item.get("unit", "us")])
    for gate in native.get("gates") or []:
        if not isinstance(gate, dict) or len(gate.get("qubits") or []) != 2:
            continue
        two_qubit.extend(item["value"] for item in gate.get("parameters") or []
                         if isinstance(item, dict) and item.get("name") == "gate_error" and is_number(item.get("value")))
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
        "status": optional_string(status_name, "status.name"),
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
        "status_message": optional_string(native.get("status"), "status"),
        "pending_jobs": native.get("length_queue"),
        "version": native.get("backend_version"),
        "native": native,
    }


def is_qubit(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


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
    # The pairs of physical qubits a two-qubit gate may act on, as [control, target]: an ISA circuit
    # uses no other pair. The configuration leaves it out (or null) for an all-to-all device.
    coupling = native.get("coupling_map")
    if coupling is not None and not (isinstance(coupling, list) and all(
            isinstance(pair, list) and len(pair) == 2 and all(is_qubit(qubit) for qubit in pair) for pair in coupling)):
        raise ShapeError("'coupling_map' must be a list of [qubit, qubit] pairs")
    record = {
        "name": native.get("backend_name") or name,
        "qubits": qubits,
        "basis_gates": gates,
        "coupling_map": coupling,
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
    if remaining is None and is_number(limit) and is_number(consumed):
        remaining = max(limit - consumed, 0)
    return {"limit_reached": reached, "limit_seconds": limit, "consumed_seconds": consumed,
            "remaining_seconds": remaining, "native": native}


def check_device(spec, devices):
    """The device the spec's queue names; SpecError when it names none of `devices` (the message
    names those there are)."""
    names = [device["name"] for device in devices]
    if not spec["queue"]:
        raise SpecError("queue", "name the device to run on (circuits are transpiled for one device); "
                        "available: %s" % (", ".join(sorted(names)) or "none"))
    if spec["queue"] not in names:
        raise SpecError("queue", "'%s' is not a device of this instance; available: %s" % (
            spec["queue"], ", ".join(sorted(names)) or "none"))
    return spec["queue"]


def check_operational(name, status):
    """SpecError when the device is out of operation: jobs would wait until it returns."""
    if not status["operational"]:
        raise SpecError("queue", "device '%s' is not operational (%s); jobs would wait until it returns" % (
            name, status["status_message"] or "no status message"))


def check_fits(spec, rendered, name, qubits, warnings):
    """SpecError naming the circuit wider than the `qubits` of device `name`; what the service
    might still refuse or do otherwise is added to `warnings`."""
    for where, text in pub_circuits(spec):
        shape = circuit_shape(text)
        if shape["qubits"] is None:
            warnings.append("%s: a register size is no number Bridge can read; the service checks the "
                            "circuit's width against device '%s'" % (where, name))
        elif shape["qubits"] > qubits:
            raise SpecError(where, "the circuit is %d qubits wide but device '%s' has %d" % (
                shape["qubits"], name, qubits))
        if rendered["program_id"] == "sampler" and not shape["clbits"]:
            warnings.append("%s: the circuit declares no classical bits, so the sampler returns no "
                            "outcomes; measure into a bit register" % where)
    if rendered.get("cost", 0) > MAX_COST_SECONDS:
        warnings.append("resources.time_limit: IBM Quantum caps a job's maximum execution time at %d "
                        "seconds (3 hours)" % MAX_COST_SECONDS)


def queue_records(devices):
    """The capacity record (_backend.QUEUE_KEYS) of each device, from normalized devices: those of
    GET /backends alone (status, qubits and queue length are in the list since API version
    2025-01-01) or with their status (operational, pending_jobs), as the inventory reads them. A
    device's queue length is its pending jobs; how many run is not said. No device is a default:
    a job names its device."""
    records = []
    for device in devices:
        status = device.get("status")
        operational = device.get("operational")
        if status:
            usable = status.lower() == ONLINE and operational is not False
        else:
            usable = operational is not False
        pending = device.get("pending_jobs")
        records.append(queue_record(
            name=device["name"],
            state=status or ("operational" if operational else "unknown" if operational is None else "not operational"),
            usable=usable,
            qubits=device.get("qubits"),
            pending=device.get("queue_length") if pending is None else pending,
        ))
    return records
