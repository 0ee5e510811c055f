#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: quantum_backend_info
short_description: Read the IBM Quantum devices of an instance and its usage
version_added: 0.1.0
description:
  - Reads the devices (the Qiskit Runtime API's backends) an IBM Quantum service instance may use,
    each with its status (operational, status message, pending jobs), its configuration (qubits,
    processor type, basis gates, coupling map, maximum shots) and optionally its calibration properties, and the
    instance's usage (seconds used of its limit), normalized.
  - The device list is one request; each device's status, configuration and properties one more each.
author:
  - Bridge developers (@bridge-hpc)
extends_documentation_fragment:
  - bridge.hpc.quantum
  - bridge.hpc.query
options:
  devices:
    description:
      - Names of the devices to read; all of the instance's when not given. Fails naming the available
        ones when a device does not exist.
    type: list
    elements: str
  gather:
    description:
      - What to read besides the device list. C(status) and C(configuration) cost one request per device,
        C(properties) (calibration data, large) one per device, C(usage) one.
    type: list
    elements: str
    choices: [status, configuration, properties, usage]
    default: [status, configuration, usage]
  include_native:
    description:
      - Keep the service's own objects under C(native) (list, status and configuration of each device; the usage).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Reads only.
notes:
  - Tested against a simulator of the Qiskit Runtime API (C(tests/simulators/quantum_runtime.py)) and answers written
    from IBM's documentation and the qiskit-ibm-runtime 0.51 client source; not yet against IBM Quantum itself.
seealso:
  - module: bridge.hpc.quantum_job
"""

EXAMPLES = r"""
- name: Devices and usage (or set QUANTUM_URL, QUANTUM_API_KEY, QUANTUM_SERVICE_CRN)
  bridge.hpc.quantum_backend_info:
    url: https://quantum.cloud.ibm.com/api/v1
    api_key: "{{ ibm_quantum_api_key }}"
    service_crn: "{{ ibm_quantum_crn }}"
  register: quantum

- name: Operational devices with at least 100 qubits
  ansible.builtin.debug:
    msg: "{{ quantum.devices | selectattr('operational') | selectattr('qubits', 'ge', 100) | map(attribute='name') | list }}"

- name: The pairs of qubits a two-qubit gate may act on, to transpile for the device
  bridge.hpc.quantum_backend_info:
    devices: [ibm_kingston]
    gather: [configuration]
    query: devices[0].coupling_map
  register: coupling

- name: One device's calibration data
  bridge.hpc.quantum_backend_info:
    devices: [ibm_kingston]
    gather: [properties]
"""

RETURN = r"""
devices:
  description: >-
    The devices: C(name), C(status) and C(status_reason) as listed (C(online), C(paused), C(offline)),
    C(qubits), C(queue_length), C(processor_type) (C(Heron r2)) with C(processor_family) and
    C(processor_revision), C(simulator); with status, C(operational),
    C(status_message), C(pending_jobs) and C(version); with configuration, C(basis_gates),
    C(coupling_map) (the C([control, target]) pairs of physical qubits a two-qubit gate may act on, as the
    device's configuration lists them; null for a device without one), C(max_shots), C(max_experiments)
    (and C(qubits) and the processor type where the list has none);
    with properties, C(properties).
  returned: when query is not set
  type: list
  elements: dict
  sample: [{"name": "ibm_kingston", "status": "online", "qubits": 156, "queue_length": 3, "processor_type": "Heron r2",
            "processor_family": "Heron", "processor_revision": "r2",
            "operational": true, "status_message": "active", "pending_jobs": 3, "version": "1.2.3",
            "basis_gates": ["cz", "id", "rz", "sx", "x"], "coupling_map": [[0, 1], [1, 0], [1, 2], [2, 1]],
            "max_shots": 100000}]
usage:
  description: >-
    The instance's usage (C(GET /instances/usage)): whether it reached its limit, the limit, the seconds
    consumed and remaining (null where the service does not say).
  returned: when gather includes usage and query is not set
  type: dict
  sample: {"limit_reached": false, "limit_seconds": 600, "consumed_seconds": 42, "remaining_seconds": 558}
query_result:
  description: >-
    What O(query) selects from the result this module would return without it
    (the sample is what V(devices[?operational].name) selects); null when it selects nothing.
  returned: when query is set
  type: raw
  sample: ["ibm_kingston", "ibm_torino"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.bridge.hpc.plugins.module_utils._module import (
    backend_connection_options,
    client_of,
    exit_with,
    main_for,
    without_native,
)
from ansible_collections.bridge.hpc.plugins.module_utils._query import QUERY_OPTIONS


def read_devices(module, client):
    params = module.params
    keep = params["include_native"]
    devices = client.device_details(params["devices"], params["gather"])
    result = {"changed": False, "devices": devices if keep else without_native(devices)}
    if "usage" in params["gather"]:
        usage = client.usage()
        result["usage"] = usage if keep else without_native([usage])[0]
    exit_with(module, client, result)


def main():
    options = backend_connection_options("quantum")
    options.update(
        devices=dict(type="list", elements="str"),
        gather=dict(type="list", elements="str", choices=["status", "configuration", "properties", "usage"],
                    default=["status", "configuration", "usage"]),
        include_native=dict(type="bool", default=False),
    )
    options.update(QUERY_OPTIONS)
    module = AnsibleModule(argument_spec=options, supports_check_mode=True)
    main_for(module, client_of("quantum"), read_devices)


if __name__ == "__main__":
    main()
