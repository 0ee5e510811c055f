#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: ray_cluster_info
short_description: Read a Ray cluster's version, resources and nodes
version_added: 0.1.0
description:
  - Reads the Ray version, the cluster's resources (used and total, from the autoscaler's report)
    and its nodes (CPUs, GPUs, memory, object store, custom resources, head or worker).
author:
  - Bridge developers (@bridge-hpc)
extends_documentation_fragment:
  - bridge.hpc.ray
  - bridge.hpc.query
options:
  gather:
    description:
      - What to read.
    type: list
    elements: str
    choices: [version, resources, nodes]
    default: [version, resources, nodes]
  include_native:
    description:
      - Keep the raw node objects under C(native).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Reads only.
seealso:
  - module: bridge.hpc.ray_job
  - plugin: bridge.hpc.ray
    plugin_type: inventory
"""

EXAMPLES = r"""
- name: Cluster resources
  bridge.hpc.ray_cluster_info:
    url: http://ray-head:8265
  register: ray

- name: Free CPUs
  ansible.builtin.debug:
    msg: "{{ ray.resources.CPU.total - ray.resources.CPU.used }}"
"""

RETURN = r"""
version:
  description: What C(/api/version) reports.
  returned: when gather includes version and query is not set
  type: dict
  sample: {"version": "5", "ray_version": "2.60.0"}
resources:
  description: Used and total amount per resource, cluster-wide.
  returned: when gather includes resources and query is not set
  type: dict
  sample: {"CPU": {"used": 1.0, "total": 2.0}, "memory": {"used": 0, "total": 4000000000}}
nodes:
  description: Nodes, normalized.
  returned: when gather includes nodes and query is not set
  type: list
  elements: dict
  sample: [{"name": "10.0.0.5", "head": true, "state": "alive", "cpus": 2, "gpus": 0}]
query_result:
  description: >-
    What O(query) selects from the result this module would return without it
    (the sample is what V(nodes[].name) selects); null when it selects nothing.
  returned: when query is set
  type: raw
  sample: ["10.0.0.5"]
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
    result = {"changed": False}
    if "version" in gather:
        result["version"] = client.version()
    if "resources" in gather:
        result["resources"] = client.resources()
    if "nodes" in gather:
        nodes = client.nodes()
        result["nodes"] = nodes if module.params["include_native"] else without_native(nodes)
    exit_with(module, client, result)


def main():
    options = backend_connection_options("ray")
    options.update(
        gather=dict(type="list", elements="str", choices=["version", "resources", "nodes"],
                    default=["version", "resources", "nodes"]),
        include_native=dict(type="bool", default=False),
    )
    options.update(QUERY_OPTIONS)
    module = AnsibleModule(argument_spec=options, supports_check_mode=True)
    main_for(module, client_of("ray"), read_cluster)


if __name__ == "__main__":
    main()
