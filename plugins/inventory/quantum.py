# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: quantum
short_description: IBM Quantum devices as inventory hosts
version_added: 0.1.0
description:
  - Reads the devices (the Qiskit Runtime API's backends) an IBM Quantum service instance may use,
    with each device's status, configuration and calibration properties, and makes every device an
    inventory host, so that plays can target devices (C(hosts=quantum_device_status_operational))
    and job modules find the device's qubits, basis gates, queue and error figures in hostvars.
  - Device hosts get C(quantum_device_*) variables and C(quantum_url).
  - "Groups: C(quantum_devices); C(quantum_device_status_<status>) by the status the device list
    gives (C(online), C(paused), C(offline), ...); C(quantum_device_status_operational) or
    C(quantum_device_status_not_operational) by the device's own status (whether it runs jobs now);
    C(quantum_processor_<family>) by processor family (C(heron), C(eagle), C(falcon), ...),
    lowercase."
  - "Device variables: C(quantum_device_name), C(status) and C(status_reason) (as the device list
    gives them), C(status_message) (the status text of the device's status, such as C(active) or
    C(maintenance)), C(operational), C(qubits), C(processor_type) (C(Heron r2)),
    C(processor_family) (C(Heron)), C(processor_revision) (C(r2), a string), C(basis_gates),
    C(pending_jobs) (the device's queue length), C(version) (the backend version), C(simulator),
    C(max_shots), and the medians of the calibration properties: C(median_readout_error) and
    C(median_t1_us), C(median_t2_us) (microseconds) over the qubits, C(median_two_qubit_error) (gate
    error) over the two-qubit gates. A figure the service does not give is null; a device without
    properties has null medians."
  - "Every device host also gets C(bridge_capacity): the device as the common capacity record that
    M(bridge.hpc.placement) takes in its C(candidates[].capacity) (keys C(name), C(state), C(usable),
    C(default), C(max_time_minutes), C(max_nodes), C(cpus_per_node), C(memory_mb_per_node),
    C(gpus_per_node), C(gpu_types), C(features), C(qubits), C(pending), C(running); null is unknown
    or unlimited; docs/inventory.md). C(pending) is the device's queue length; C(running) is null."
  - Values read from IBM Quantum are marked unsafe, so a device name is never templated.
  - The configuration file name must end with C(quantum.yml) or C(quantum.yaml), for example
    C(instance.quantum.yml).
author:
  - Bridge developers (@bridge-hpc)
requirements:
  - httpx
extends_documentation_fragment:
  - bridge.hpc.quantum
  - constructed
  - inventory_cache
notes:
  - O(url), O(api_key) and O(service_crn) may be templates, such as a lookup or a vaulted value.
  - Reading IBM Quantum takes one API key exchange with IBM Cloud IAM, then C(GET /backends) and,
    for every device, C(GET /backends/<name>/status), C(/configuration) and C(/properties); a run
    served from the cache sends no request.
  - With O(cache=true) the devices read from IBM Quantum are cached (their figures, not the
    calibration properties themselves), not the inventory hosts and groups; groups, O(compose) and
    O(host_prefix) are applied again on every run. A cache entry written for another O(url) or
    O(service_crn) is not used. C(ansible-inventory --flush-cache) and C(ansible.builtin.meta)
    C(refresh_inventory) read IBM Quantum again.
  - Status, pending jobs and medians in a cached inventory are as old as the cache.
  - The API key, and the bearer token IAM trades it for, are never written to the cache, to hostvars
    or to an error message.
  - Tested against a simulator of the Qiskit Runtime API (C(tests/simulators/quantum_runtime.py)), not
    yet against IBM Quantum itself.
seealso:
  - module: bridge.hpc.quantum_backend_info
  - module: bridge.hpc.quantum_job
  - plugin: bridge.hpc.lsf
    plugin_type: inventory
options:
  plugin:
    description: Marks this file as a source for this plugin.
    type: str
    required: true
    choices: [bridge.hpc.quantum]
  # Descriptions, types and defaults of the connection options come from the bridge.hpc.quantum
  # fragment, the ones the IBM Quantum modules have; an inventory plugin reads the environment itself.
  url:
    env:
      - name: QUANTUM_URL
  iam_url:
    env:
      - name: QUANTUM_IAM_URL
  api_key:
    env:
      - name: QUANTUM_API_KEY
  service_crn:
    env:
      - name: QUANTUM_SERVICE_CRN
  host_prefix:
    description:
      - Text put in front of every device's name to make its inventory host name.
      - The default keeps the device's own name (C(ibm_kingston)), which is what job modules and
        people call it. Set a prefix when two instances reach devices of the same name; this plugin
        refuses to merge a device into a host that another IBM Quantum source defined.
    type: str
    default: ""
  set_local_connection:
    description:
      - Set C(ansible_connection=local) and C(ansible_python_interpreter={{ ansible_playbook_python }})
        on device hosts.
      - A device is not a machine to log in to. Tasks targeting it are job modules that talk HTTP to
        IBM Quantum from the controller, and they need the Python that runs Ansible (it has httpx)
        rather than whatever interpreter discovery finds, just like the implicit localhost.
    type: bool
    default: true
"""

EXAMPLES = r"""
# instance.quantum.yml -- URL, API key and service CRN from QUANTUM_URL, QUANTUM_API_KEY and QUANTUM_SERVICE_CRN
plugin: bridge.hpc.quantum

---
# instance.quantum.yml -- everything in the file, the API key from a file, cached for 10 minutes
plugin: bridge.hpc.quantum
url: https://quantum.cloud.ibm.com/api/v1
service_crn: "crn:v1:bluemix:public:quantum-computing:us-east:a/0123456789abcdef:01234567-89ab-cdef::"
api_key: "{{ lookup('ansible.builtin.file', '/run/secrets/ibm_quantum_api_key') }}"
cache: true
cache_plugin: ansible.builtin.jsonfile
cache_connection: ~/.cache/bridge-inventory
cache_timeout: 600

---
# devices.quantum.yml -- groups by size, queue and error figures
plugin: bridge.hpc.quantum
strict: true
compose:
  median_t1_ms: quantum_device_median_t1_us / 1000 if quantum_device_median_t1_us is not none else none
groups:
  large_devices: quantum_device_qubits >= 100
  idle_devices: quantum_device_operational and (quantum_device_pending_jobs | default(0, true)) == 0
  low_readout_error: (quantum_device_median_readout_error | default(1, true)) < 0.03
keyed_groups:
  - key: quantum_device_processor_type | default([], true)
    prefix: processor_type

---
# A play over the devices that run jobs now: one task per device, run on the controller
# - hosts: quantum_device_status_operational
#   gather_facts: false
#   tasks:
#     - bridge.hpc.quantum_job:
#         url: "{{ quantum_url }}"
#         name: "bell-{{ quantum_device_name }}"
#         queue: "{{ quantum_device_name }}"
#         script: "{{ lookup('ansible.builtin.file', 'bell.qasm') }}"
"""

from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable

from ansible_collections.bridge.hpc.plugins.module_utils.quantum.client import QuantumClient
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.fit import calibration_medians, queue_records
from ansible_collections.bridge.hpc.plugins.plugin_utils._inventory import InventorySource

DEVICE_GROUP = "quantum_devices"
DEVICE_FIELDS = ("name", "status", "status_reason", "status_message", "operational", "qubits", "processor_type",
                 "processor_family", "processor_revision", "basis_gates", "pending_jobs", "version", "simulator",
                 "max_shots", "median_readout_error", "median_t1_us", "median_t2_us", "median_two_qubit_error")


def device_record(device):
    """A device of QuantumClient.device_details with its properties reduced to their medians, and
    pending_jobs from the list's queue length where the device's status has none."""
    record = dict((key, value) for key, value in device.items() if key not in ("native", "properties"))
    record.update(calibration_medians(device.get("properties") or {}))
    if record.get("pending_jobs") is None:
        record["pending_jobs"] = device.get("queue_length")
    return record


def device_vars(device):
    return dict(("quantum_device_%s" % key, device.get(key)) for key in DEVICE_FIELDS)


class InventoryModule(InventorySource, BaseInventoryPlugin, Constructable, Cacheable):

    NAME = "bridge.hpc.quantum"
    MANAGER = QuantumClient.TITLE
    FILE_SUFFIXES = ("quantum.yml", "quantum.yaml")
    SOURCE_OPTIONS = ("url", "service_crn")
    URL_VAR = "quantum_url"
    HOSTS = "devices"
    URL_NAME = QuantumClient.URL_NAME
    URL_ENV = QuantumClient.ENV["url"][0]
    # Bump when the cached payload changes shape, so an old cache entry is read again from IBM Quantum.
    PAYLOAD_FORMAT = 1

    # -- reading IBM Quantum (parse() and the cache: InventorySource)

    def _client(self, source):
        return QuantumClient.from_options(self._connection_option(source))

    def _fetch(self, source):
        records = self._read(source, lambda client: client.inventory())
        return {
            "format": self.PAYLOAD_FORMAT,
            "source": source,
            "devices": [device_record(device) for device in records["devices"]],
        }

    # -- building hosts and groups

    def _populate(self, payload):
        prefix = self.get_option("host_prefix") or ""
        self.inventory.add_group(DEVICE_GROUP)
        for device in payload["devices"]:
            name = prefix + device["name"]
            variables = device_vars(device)
            variables["quantum_url"] = payload["source"]["url"]
            variables["bridge_capacity"] = queue_records([device])[0]
            self._add_host(name, variables)
            if self.get_option("set_local_connection"):
                self._set_local_connection(name)
            self.inventory.add_child(DEVICE_GROUP, name)
            if device.get("status"):
                self._add_to_group("quantum_device_status_%s" % device["status"].lower(), name)
            self._add_to_group("quantum_device_status_%s" % (
                "operational" if device["operational"] else "not_operational"), name)
            if device.get("processor_family"):
                self._add_to_group("quantum_processor_%s" % device["processor_family"].lower(), name)
            self._construct(name)
