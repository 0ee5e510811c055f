#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: slurm_cluster_info
short_description: Read a Slurm cluster's controllers, REST versions, partitions and nodes
version_added: 0.1.0
description:
  - Pings the Slurm controllers through slurmrestd and reads the REST versions the server offers,
    its partitions and its nodes, normalized across REST versions.
author:
  - Bridge developers (@bridge-hpc)
extends_documentation_fragment:
  - bridge.hpc.slurm
  - bridge.hpc.query
options:
  gather:
    description:
      - What to read. C(versions) probes every known REST version and costs one request each.
    type: list
    elements: str
    choices: [ping, versions, partitions, nodes]
    default: [ping, partitions, nodes]
  include_native:
    description:
      - Keep the raw objects under C(native).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Reads only.
seealso:
  - module: bridge.hpc.slurm_job
  - plugin: bridge.hpc.slurm
    plugin_type: inventory
"""

EXAMPLES = r"""
- name: Partitions and nodes
  bridge.hpc.slurm_cluster_info:
    url: http://127.0.0.1:6820
    user: alice
    token: "{{ slurm_jwt }}"
  register: cluster

- name: Longest time limit on offer
  ansible.builtin.debug:
    msg: "{{ cluster.partitions | map(attribute='max_time_minutes') | max }}"

- name: Name and time limit of the partitions that are up
  bridge.hpc.slurm_cluster_info:
    gather: [partitions]
    query: "partitions[?state=='UP'].{name: name, minutes: max_time_minutes}"
  register: up   # up.query_result: [{"name": "debug", "minutes": 30}]
"""

RETURN = r"""
api_version:
  description: REST version used (the newest the server offers unless O(api_version) is set).
  returned: when query is not set
  type: str
  sample: v0.0.38
api_versions:
  description: Every REST version the server answers, newest first.
  returned: when gather includes versions and query is not set
  type: list
  elements: str
  sample: [v0.0.38, v0.0.37, v0.0.36]
ping:
  description: Controller reachability.
  returned: when gather includes ping and query is not set
  type: dict
  sample: {"reachable": true, "release": "22.05.8", "controllers": [{"hostname": "node1", "mode": "primary", "up": true}]}
partitions:
  description: Partitions with limits normalized to minutes, MiB and counts.
  returned: when gather includes partitions and query is not set
  type: list
  elements: dict
  sample: [{"name": "debug", "state": "UP", "default": true, "max_time_minutes": 30, "max_time": "00:30:00", "total_cpus": 2}]
nodes:
  description: Nodes with CPUs, memory and GPUs, used and total.
  returned: when gather includes nodes and query is not set
  type: list
  elements: dict
  sample: [{"name": "node1", "state": "idle", "cpus": 2, "free_cpus": 2, "memory_mb": 4000, "gpus": 0}]
query_result:
  description: >-
    What O(query) selects from the result this module would return without it
    (the sample is what V(partitions[?default].name | [0]) selects); null when it selects nothing.
  returned: when query is set
  type: raw
  sample: "debug"
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
    if "versions" in gather:
        result["api_versions"] = client.served_versions()
    if "ping" in gather:
        result["ping"] = client.ping()
    if "partitions" in gather:
        result["partitions"] = client.partitions() if keep else without_native(client.partitions())
    if "nodes" in gather:
        result["nodes"] = client.nodes() if keep else without_native(client.nodes())
    result["api_version"] = client.api_version
    exit_with(module, client, result)


def main():
    options = backend_connection_options("slurm")
    options.update(
        gather=dict(type="list", elements="str", choices=["ping", "versions", "partitions", "nodes"],
                    default=["ping", "partitions", "nodes"]),
        include_native=dict(type="bool", default=False),
    )
    options.update(QUERY_OPTIONS)
    module = AnsibleModule(argument_spec=options, supports_check_mode=True)
    main_for(module, client_of("slurm"), read_cluster)


if __name__ == "__main__":
    main()
