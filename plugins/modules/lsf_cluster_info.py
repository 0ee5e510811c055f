#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: lsf_cluster_info
short_description: Read an LSF cluster's queues and hosts through LSF Application Center
version_added: 0.1.0
description:
  - Reads the queues (status, limits, pending and running jobs) and the hosts (status, CPUs,
    memory, model) of an IBM Spectrum LSF cluster from LSF Application Center, normalized.
author:
  - Bridge developers (@bridge-hpc)
extends_documentation_fragment:
  - bridge.hpc.lsf
  - bridge.hpc.query
options:
  gather:
    description:
      - What to read; each costs one request.
    type: list
    elements: str
    choices: [queues, hosts]
    default: [queues, hosts]
  include_native:
    description:
      - Keep the raw queue and host records under C(native).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Reads only.
notes:
  - Tested against a protocol simulator of Application Center only, not yet against a real one.
seealso:
  - module: bridge.hpc.lsf_job
"""

EXAMPLES = r"""
- name: Queues and hosts
  bridge.hpc.lsf_cluster_info:
    url: http://pac.example.org:8080/platform
    user: alice
    password: "{{ lsf_password }}"
  register: cluster

- name: Open queues
  ansible.builtin.debug:
    msg: "{{ cluster.queues | selectattr('open') | map(attribute='name') | list }}"
"""

RETURN = r"""
queues:
  description: >-
    Queues with their status (C(Open:Active), C(Closed:Inact), ...), whether they take new jobs
    (C(open)) and dispatch them (C(active)), and their limits in minutes, MB and slots (null when unlimited).
  returned: when gather includes queues and query is not set
  type: list
  elements: dict
  sample: [{"name": "short", "status": "Open:Active", "open": true, "active": true, "priority": 40, "max_slots": 2,
            "run_limit_minutes": 1, "memory_limit_mb": 256, "pending": 0, "running": 0, "hosts": "all",
            "description": "Short jobs"}]
hosts:
  description: Hosts with their status, CPUs and memory.
  returned: when gather includes hosts and query is not set
  type: list
  elements: dict
  sample: [{"name": "node1", "status": "ok", "usable": true, "ncpus": 4, "max_memory_mb": 7680, "model": "X86_64",
            "type": "LINUX64"}]
query_result:
  description: >-
    What O(query) selects from the result this module would return without it
    (the sample is what V(queues[?status=='Open:Active'].name) selects); null when it selects nothing.
  returned: when query is set
  type: raw
  sample: ["normal", "short"]
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


def read_cluster(module, client):
    gather = module.params["gather"]
    keep = module.params["include_native"]
    result = {"changed": False}
    if "queues" in gather:
        result["queues"] = client.queues() if keep else without_native(client.queues())
    if "hosts" in gather:
        result["hosts"] = client.hosts() if keep else without_native(client.hosts())
    exit_with(module, client, result)


def main():
    options = backend_connection_options("lsf")
    options.update(
        gather=dict(type="list", elements="str", choices=["queues", "hosts"], default=["queues", "hosts"]),
        include_native=dict(type="bool", default=False),
    )
    options.update(QUERY_OPTIONS)
    module = AnsibleModule(argument_spec=options, supports_check_mode=True)
    main_for(module, client_of("lsf"), read_cluster)


if __name__ == "__main__":
    main()
