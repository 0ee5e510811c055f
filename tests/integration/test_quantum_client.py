"""QuantumClient against a private Qiskit Runtime SIMULATOR (tests/simulators/quantum_runtime.py) in
a run dir of its own, where one second of max_execution_time and of usage lasts 10 ms: a job past
its time limit ends failed with failure_class timeout (the service's Cancelled with reason code
1305), and a spent instance is refused before submitting. The simulator is not IBM Quantum."""

import sys

import pytest

from conftest import COLLECTIONS, private_service, read_env_file, require_quantum
from controller_support import free_port

MEASURE = "OPENQASM 3.0;\nbit[1] c;\nc[0] = measure $0;\n"


@pytest.fixture(scope="module")
def bridge():
    """The collection's module_utils as the playbooks find them (.run/collections), imported the way
    the controller tests import their clients."""
    sys.path.insert(0, COLLECTIONS)
    from ansible_collections.bridge.hpc.plugins.module_utils import _errors, _jobs, _spec
    from ansible_collections.bridge.hpc.plugins.module_utils.quantum.client import QuantumClient

    return {"errors": _errors, "jobs": _jobs, "spec": _spec, "client": QuantumClient}


@pytest.fixture(scope="module")
def private():
    require_quantum()
    settings = {"BRIDGE_QUANTUM_PORT": str(free_port()), "BRIDGE_QUANTUM_SECOND": "0.01",
                "BRIDGE_QUANTUM_USAGE_LIMIT": "10"}
    with private_service("quantum-runtime.sh", "quantum", settings) as env_file:
        yield read_env_file(env_file)


def client_of(bridge, env):
    options = {"url": env["QUANTUM_URL"], "iam_url": env["QUANTUM_IAM_URL"], "api_key": env["QUANTUM_API_KEY"],
               "service_crn": env["QUANTUM_SERVICE_CRN"]}
    return bridge["client"].from_options(options.get)


def spec(bridge, identity, **fields):
    params = dict({"script": MEASURE, "identity": identity, "queue": "ibm_manila"}, **fields)
    return bridge["spec"].normalize_spec(params, bridge["client"])


def test_a_job_past_its_time_limit_fails_as_a_timeout(bridge, private):
    # time_limit 1 minute = cost 60 = 0.6 s here; 100000 shots keep the job running about 5 s.
    client = client_of(bridge, private)
    long_job = spec(bridge, "too-long", resources={"time_limit": 1}, backend_options={"quantum": {"shots": 100000}})
    result = bridge["jobs"].ensure_present(client, long_job, wait=True, wait_timeout=60, poll_interval=0.2)
    job = result["job"]
    assert (job["phase"], job["failure_class"], job["reason_code"], job["native_state"]) == (
        "failed", "timeout", 1305, "Cancelled")
    assert result["failed"] and "timeout" in result["msg"]
    assert client.find("too-long")["job_id"] == job["job_id"]


def test_a_spent_instance_is_refused_before_submitting(bridge, private):
    for attempt in range(5):
        client = client_of(bridge, private)
        if client.usage()["limit_reached"]:
            break
        job_id = client.submit(spec(bridge, "use-%d" % attempt, backend_options={"quantum": {"shots": 1000}}))
        bridge["jobs"].wait_for(client, job_id, 60, 0.2)
    with pytest.raises(bridge["errors"].Rejected, match="reached its usage limit"):
        client_of(bridge, private).check(spec(bridge, "one-too-many"))


def test_a_devices_configuration_gives_its_coupling_map(bridge):
    # quantum_backend_info's coupling_map, read from the configuration the simulator serves (the
    # fake device's conf_*.json, as IBM's GET /backends/{name}/configuration answers): Manila's five
    # qubits in a line, each pair both ways.
    device = client_of(bridge, require_quantum()).device_details(["ibm_manila"], ("configuration",))[0]
    pairs = device["coupling_map"]
    assert sorted(map(tuple, pairs)) == [(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2), (3, 4), (4, 3)]
    assert device["qubits"] == 5
