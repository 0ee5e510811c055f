"""ansible-inventory with the bridge.hpc.quantum plugin against the Qiskit Runtime simulator of
tools/quantum-runtime.sh (not IBM Quantum: docs/quantum.md).

The output is compared with tests/integration/golden/inventory_quantum.json after masking what the
simulator changes on its own (pending jobs, which other tests' jobs move) and what the machine
decides (the simulator's port in quantum_url). The devices and their calibration are the fake
devices of qiskit-ibm-runtime the simulator serves, so names, qubits, processor types, basis gates
and medians are stable. Regenerate the golden file with BRIDGE_UPDATE_GOLDEN=1.
"""

import os
import subprocess

from conftest import (
    REPO,
    VENV_BIN,
    ansible_env,
    ansible_inventory,
    check_cached_inventory_needs_no_backend,
    compare_with_golden,
    everything,
    listed,
    mask_capacity,
    require_quantum,
    unwrap,
    write_inventory_file,
)

GOLDEN = os.path.join(REPO, "tests", "integration", "golden", "inventory_quantum.json")
VOLATILE = "<volatile>"
VOLATILE_VARS = frozenset(["quantum_url", "quantum_device_pending_jobs"])

CONFIG = {
    "plugin": "bridge.hpc.quantum",
    "strict": True,
    "compose": {"median_t1_ms":
                "(quantum_device_median_t1_us / 1000) | round(3) if quantum_device_median_t1_us is not none else none"},
    "groups": {"low_readout_error": "(quantum_device_median_readout_error | default(1, true)) < 0.025",
               "cx_devices": "'cx' in quantum_device_basis_gates"},
    "keyed_groups": [{"key": "quantum_device_processor_type | default([], true)", "prefix": "processor_type"},
                     {"key": "quantum_device_status_message", "prefix": "message"}],
}


def write_inventory(directory, values, **overrides):
    """An x.quantum.yml for this simulator; the API key stays in the environment (QUANTUM_API_KEY)."""
    config = dict(CONFIG, url=values["QUANTUM_URL"], iam_url=values["QUANTUM_IAM_URL"],
                  service_crn=values["QUANTUM_SERVICE_CRN"])
    config.update(overrides)
    return write_inventory_file(directory, "x.quantum.yml", config)


def run_inventory(path, values, *args):
    return ansible_inventory(path, {"QUANTUM_API_KEY": values["QUANTUM_API_KEY"], "QUANTUM_URL": "",
                                    "QUANTUM_IAM_URL": "", "QUANTUM_SERVICE_CRN": ""}, *args)


def stable(inventory):
    """The inventory without what changes between runs and machines."""
    inventory = unwrap(inventory)
    hostvars = inventory.pop("_meta")["hostvars"]
    for variables in hostvars.values():
        for key in VOLATILE_VARS & set(variables):
            variables[key] = VOLATILE
        mask_capacity(variables, ("pending",))
    groups = dict((name, dict((k, sorted(v)) for k, v in group.items())) for name, group in inventory.items())
    return {"hostvars": hostvars, "groups": groups}


def test_inventory_matches_golden(tmp_path):
    values = require_quantum()
    result = run_inventory(write_inventory(tmp_path, values), values, "-vvv")
    raw = listed(result)
    assert values["QUANTUM_API_KEY"] not in everything(result)
    assert sorted(raw["quantum_devices"]["hosts"]) == sorted(values["QUANTUM_DEVICES"].split(","))
    variables = raw["_meta"]["hostvars"]["ibm_manila"]
    # Remote strings reach Ansible marked unsafe; the interpreter template stays a template.
    assert set(variables["quantum_device_name"]) == {"__ansible_unsafe"}
    assert variables["ansible_python_interpreter"] == "{{ ansible_playbook_python }}"
    assert unwrap(variables["quantum_url"]) == values["QUANTUM_URL"]
    for host in raw["quantum_devices"]["hosts"]:
        assert unwrap(raw["_meta"]["hostvars"][host]["quantum_device_pending_jobs"]) >= 0
    compare_with_golden(GOLDEN, stable(raw))


def test_cached_inventory_needs_no_quantum_service(tmp_path):
    values = require_quantum()
    # The relay serves the simulator's port, which answers IAM (at its root) and the API (/api/v1).
    check_cached_inventory_needs_no_backend(
        tmp_path, values["QUANTUM_IAM_URL"], values["QUANTUM_API_KEY"],
        lambda directory, url, **overrides: write_inventory(directory, values, url=url + "/api/v1", iam_url=url,
                                                            **overrides),
        lambda path, *args: run_inventory(path, values, *args))


def test_wrong_api_key_fails_without_echoing_it(tmp_path):
    values = require_quantum()
    wrong = "bridge-quantum-inventory-wrong-api-key"
    result = run_inventory(write_inventory(tmp_path, values), dict(values, QUANTUM_API_KEY=wrong), "-vvv")
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "bridge.hpc.quantum: Failed to authenticate with API key on IBM Cloud IAM at" in output
    assert "IBM Cloud IAM refused the API key" in output
    assert wrong not in everything(result) and values["QUANTUM_API_KEY"] not in everything(result)


def test_ansible_doc_renders():
    result = subprocess.run([os.path.join(VENV_BIN, "ansible-doc"), "-t", "inventory", "bridge.hpc.quantum"],
                            env=ansible_env(), capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "service_crn" in result.stdout and "quantum_device_status_operational" in result.stdout
