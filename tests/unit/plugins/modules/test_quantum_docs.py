"""What the IBM Quantum docs show is what they say: the Bell pair examples prepare a Bell pair (only
00 and 11 measured), and the `rendered` sample is what the module renders for its example.

The circuits are ISA circuits of a Heron device (rz, sx, x, cz on physical qubits); a two-qubit
statevector is enough to run them here, without qiskit.
"""

import cmath
import math
import os
import re

import yaml

from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.client import QuantumClient
from ansible_collections.bridge.hpc.plugins.modules import quantum_job

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
GATE = re.compile(r"^(?P<name>[a-z]+)(\((?P<angle>[^)]*)\))?\s+(?P<qubits>\$\d+(\s*,\s*\$\d+)*)\s*;$")


def rz(angle):
    return ((cmath.exp(-0.5j * angle), 0), (0, cmath.exp(0.5j * angle)))


ONE_QUBIT = {"sx": lambda _angle: ((0.5 + 0.5j, 0.5 - 0.5j), (0.5 - 0.5j, 0.5 + 0.5j)),
             "x": lambda _angle: ((0, 1), (1, 0)), "id": lambda _angle: ((1, 0), (0, 1)), "rz": rz}


def probabilities(circuit, width=2):
    """{bitstring (qubit 0 last): probability} of measuring every qubit after the circuit's gates."""
    state = [1] + [0] * (2 ** width - 1)
    for line in circuit.splitlines():
        line = line.split("//")[0].strip()
        if not line or line.startswith(("OPENQASM", "include", "bit", "meas", "c[")) or "measure" in line:
            continue
        gate = GATE.match(line)
        assert gate, "not an ISA gate of the device: %r" % line
        qubits = [int(qubit.strip().lstrip("$")) for qubit in gate.group("qubits").split(",")]
        if gate.group("name") == "cz":
            mask = (1 << qubits[0]) | (1 << qubits[1])
            state = [-amplitude if index & mask == mask else amplitude for index, amplitude in enumerate(state)]
            continue
        angle = eval(gate.group("angle"), {"pi": math.pi}) if gate.group("angle") else None  # pylint: disable=eval-used
        matrix = ONE_QUBIT[gate.group("name")](angle)
        bit = 1 << qubits[0]
        for index in range(len(state)):
            if not index & bit:
                low, high = state[index], state[index | bit]
                state[index] = matrix[0][0] * low + matrix[0][1] * high
                state[index | bit] = matrix[1][0] * low + matrix[1][1] * high
    return dict((format(index, "0%db" % width), round(abs(amplitude) ** 2, 9))
                for index, amplitude in enumerate(state) if abs(amplitude) > 1e-9)


def example(name):
    return next(task for task in yaml.safe_load(quantum_job.EXAMPLES) if task["name"].startswith(name))


def test_the_bell_pair_example_measures_only_00_and_11():
    script = example("Sample a Bell pair")["bridge.hpc.quantum_job"]["script"]
    assert probabilities(script) == {"00": 0.5, "11": 0.5}


def test_the_bell_pair_sample_bridgejob_measures_only_00_and_11():
    with open(os.path.join(REPO, "deploy", "samples", "quantum.yaml")) as handle:
        items = yaml.safe_load(handle)["items"]
    job = next(item for item in items if item["kind"] == "BridgeJob")
    assert probabilities(job["spec"]["script"]) == {"00": 0.5, "11": 0.5}


def test_a_lone_cz_after_h_is_no_bell_pair():
    assert probabilities("rz(pi/2) $0;\nsx $0;\nrz(pi/2) $0;\ncz $0, $1;\n") == {"00": 0.5, "01": 0.5}


def test_the_rendered_sample_is_what_the_example_renders():
    task = example("Sample a Bell pair")["bridge.hpc.quantum_job"]
    spec = normalize_spec(dict((key, task[key]) for key in ("name", "queue", "script", "backend_options", "resources")),
                          QuantumClient)
    rendered = QuantumClient("https://quantum.test/api/v1").render(spec)
    sample = yaml.safe_load(quantum_job.RETURN)["rendered"]["sample"]
    assert rendered["params"]["pubs"] == [[task["script"]]]
    assert dict(rendered["params"], pubs=None) == dict(sample["params"], pubs=None)
    assert (rendered["program_id"], rendered["backend"], rendered["cost"]) == (
        sample["program_id"], sample["backend"], sample["cost"])
    assert rendered["tags"][0] == sample["tags"][0] and rendered["tags"][2] == sample["tags"][2]
