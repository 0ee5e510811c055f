# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: ray
short_description: Ray cluster nodes as inventory hosts
version_added: 0.1.0
description:
  - Reads the nodes of a Ray cluster through its dashboard (the State API and the autoscaler's
    load report) and makes every alive node an inventory host, so that plays can target the head,
    the workers or the GPU nodes, and tasks find each node's resources and the dashboard's URL in
    hostvars.
  - Every host gets C(ray_node_*) variables, C(ray_url), C(ray_version) and
    C(ray_cluster_resources), the cluster-wide used and total amount of every resource.
  - "Groups: C(ray_nodes) (every host), C(ray_head), C(ray_workers) and C(ray_gpu_nodes) (alive
    nodes only, so C(ray_head) is always the current head) and C(ray_node_state_<state>)
    (C(ray_node_state_alive), and C(ray_node_state_dead) with O(include_dead=true))."
  - "Node variables, each named C(ray_node_<name>): C(id), C(name) (as Ray names the node: its
    C(--node-name), by default its IP address), C(ip), C(head), C(state) (C(alive) or C(dead)),
    C(state_message), C(cpus), C(gpus), C(gpu_type), C(memory_bytes), C(memory_mb),
    C(object_store_memory_bytes), C(custom_resources), C(labels), the used amounts C(cpus_used),
    C(gpus_used), C(memory_used_bytes) and C(object_store_memory_used_bytes), and C(resources),
    the used and total amount of every resource of the node, custom ones included."
  - Used amounts are what Ray's scheduler has reserved for tasks, actors and placement groups
    (logical resources), not measured utilization. They are null while unknown, which is the case
    until the autoscaler's monitor has reported once, a few seconds after the head starts.
  - Ray reports every amount as a float; whole amounts are integers here (C(cpus=2), not C(2.0)).
  - "Every node host also gets C(bridge_capacity): the whole cluster (Ray has no queues: C(name) is
    null), the same on every node, as the common capacity record that M(bridge.hpc.placement) takes
    in its C(candidates[].capacity) (keys C(name), C(state), C(usable), C(default),
    C(max_time_minutes), C(max_nodes), C(cpus_per_node), C(memory_mb_per_node), C(gpus_per_node),
    C(gpu_types), C(features), C(qubits), C(pending), C(running); null is unknown or unlimited;
    docs/inventory.md). C(pending) and C(running) are null: the plugin does not read the job list."
  - Values read from Ray are marked unsafe, so a node name or label is never templated.
  - The configuration file name must end with C(ray.yml) or C(ray.yaml), for example
    C(cluster.ray.yml).
author:
  - Bridge developers (@bridge-hpc)
requirements:
  - httpx
extends_documentation_fragment:
  - constructed
  - inventory_cache
notes:
  - With O(cache=true) the nodes, their usage and the version read from Ray are cached, not the
    hosts and groups; O(include_dead), O(host_prefix), groups and O(compose) are applied again on
    every run. A cache entry written for another O(url) is not used. C(ansible-inventory
    --flush-cache) and C(ansible.builtin.meta) C(refresh_inventory) read Ray again.
  - Used amounts in a cached inventory are as old as the cache.
  - The token is never written to the cache, to hostvars or to an error message.
  - Two nodes with the same name (a dead node and the alive one that replaced it on the same
    address, or two raylets on one machine) get distinct hosts; the alive one, the head first,
    keeps the plain name, the others get C(_<first 12 characters of the node id>) appended.
seealso:
  - module: bridge.hpc.ray_cluster_info
  - module: bridge.hpc.ray_job
  - plugin: bridge.hpc.slurm
    plugin_type: inventory
options:
  plugin:
    description: Marks this file as a source for this plugin.
    type: str
    required: true
    choices: [bridge.hpc.ray]
  url:
    description:
      - Base URL of the Ray dashboard, for example C(http://ray-head:8265).
      - May be a template, such as a lookup.
    type: str
    env:
      - name: RAY_ADDRESS
  token:
    description:
      - "Token of a cluster started with C(RAY_AUTH_MODE=token), sent as C(Authorization: Bearer)."
      - May be a template, such as a lookup or a vaulted value.
      - Never cached, never set as a host variable, never part of an error message.
    type: str
    env:
      - name: RAY_AUTH_TOKEN
  validate_certs:
    description:
      - Verify the server's TLS certificate (for a dashboard behind a TLS proxy). Turn off only for
        a throwaway test cluster.
    type: bool
    default: true
  ca_path:
    description:
      - PEM file of the certificate authorities to trust instead of the system store.
    type: path
  timeout:
    description:
      - Seconds to wait for one HTTP response.
    type: float
    default: 30.0
  retries:
    description:
      - How often a request is retried after a connection error or an HTTP 429, 502, 503 or 504.
    type: int
    default: 3
  host_prefix:
    description:
      - Text put in front of every node's name to make its inventory host name.
      - Set a prefix such as C(ray1_) when two Ray sources, or a Ray and a Slurm source, have nodes
        of the same name; this plugin refuses to merge a node into a host that another Ray cluster
        already defined.
    type: str
    default: ""
  set_local_connection:
    description:
      - Set C(ansible_connection=local) and C(ansible_python_interpreter={{ ansible_playbook_python }})
        on every node host, instead of C(ansible_host).
      - A Ray node is a machine, so by default its host gets C(ansible_host) set to the node's IP
        address and tasks reach it as configured (SSH). Job modules do not need that; they talk
        HTTP to C(ray_url) from the controller. Turn this on for an inventory that is only a
        handle for them, for example C(hosts=ray_head) with M(bridge.hpc.ray_job).
    type: bool
    default: false
  include_dead:
    description:
      - Also make dead nodes hosts, in C(ray_nodes) and C(ray_node_state_dead) only.
      - Ray keeps a dead node in its list until the head restarts; its used amounts are null.
    type: bool
    default: false
"""

EXAMPLES = r"""
# cluster.ray.yml -- URL and token from RAY_ADDRESS and RAY_AUTH_TOKEN
plugin: bridge.hpc.ray

---
# cluster.ray.yml -- everything in the file, token from the vault, cached for 5 minutes
plugin: bridge.hpc.ray
url: https://ray-head.example.org:8265
token: "{{ lookup('ansible.builtin.file', '/run/secrets/ray_token') }}"
cache: true
cache_plugin: ansible.builtin.jsonfile
cache_connection: ~/.cache/bridge-inventory
cache_timeout: 300

---
# gpus.ray.yml -- groups by GPU type and free GPUs, custom resources as variables
plugin: bridge.hpc.ray
strict: true
compose:
  free_gpus: ray_node_gpus - (ray_node_gpus_used | default(0, true))
  scratch_slots: ray_node_custom_resources.scratch | default(0)
groups:
  gpus_free: ray_node_gpus > (ray_node_gpus_used | default(0, true))
  big_memory: ray_node_memory_mb >= 256000
keyed_groups:
  - key: ray_node_gpu_type
    prefix: gpu
    default_value: none

---
# A play that submits through the head, from the controller (set_local_connection: true)
# - hosts: ray_head
#   gather_facts: false
#   tasks:
#     - bridge.hpc.ray_job:
#         url: "{{ ray_url }}"
#         name: hello
#         script: "#!/bin/bash\nhostname"
"""

from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable

from ansible_collections.bridge.hpc.plugins.module_utils.ray.client import RayClient
from ansible_collections.bridge.hpc.plugins.module_utils.ray.fit import queue_records
from ansible_collections.bridge.hpc.plugins.plugin_utils._inventory import InventorySource, without_native

NODE_GROUP = "ray_nodes"
HEAD_GROUP = "ray_head"
WORKER_GROUP = "ray_workers"
GPU_GROUP = "ray_gpu_nodes"
NODE_FIELDS = ("name", "ip", "head", "state", "state_message", "gpu_type", "memory_bytes",
               "object_store_memory_bytes", "labels")
# The ray_node_*_used variable of each resource with one.
USED = (("CPU", "cpus_used"), ("GPU", "gpus_used"), ("memory", "memory_used_bytes"),
        ("object_store_memory", "object_store_memory_used_bytes"))


def whole(value):
    """Ray's amounts are floats; a whole one reads better as an int (2, not 2.0)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def amounts(usage):
    """{resource: {used, total}} without Ray's per-node marker resources (node:<ip>, node:__internal_head__)."""
    return dict((name, {"used": whole(pair["used"]), "total": whole(pair["total"])})
                for name, pair in (usage or {}).items() if not name.startswith("node:"))


def totals(node):
    """{resource: total} of a normalized node, by Ray's resource names."""
    return dict(node["custom_resources"], CPU=node["cpus"], GPU=node["gpus"], memory=node["memory_bytes"],
                object_store_memory=node["object_store_memory_bytes"])


def with_totals(resources, nodes):
    """resources, plus for what it lacks the nodes' summed totals with used unknown (None)."""
    missing = {}
    for node in nodes:
        for name, total in totals(node).items():
            if total and name not in resources:
                missing[name] = missing.get(name, 0) + total
    resources.update((name, {"used": None, "total": whole(total)}) for name, total in missing.items())
    return resources


def node_vars(node, usage):
    """The ray_node_* hostvars of one node; usage is its {resource: {used, total}} or None if unknown."""
    values = dict((key, node.get(key)) for key in NODE_FIELDS)
    values.update(id=node["node_id"], cpus=whole(node["cpus"]), gpus=whole(node["gpus"]),
                  memory_mb=node["memory_bytes"] // (1024 * 1024),
                  custom_resources=dict((k, whole(v)) for k, v in node["custom_resources"].items()))
    values["resources"] = resources = with_totals(amounts(usage), [node])
    for name, key in USED:
        # Of a resource the node has none of, none is used: 0 even when the usage is unknown.
        values[key] = resources.get(name, {"used": 0})["used"]
    return dict(("ray_node_%s" % key, value) for key, value in values.items())


def host_names(nodes, prefix):
    """{node_id: host name}; the alive node (the head first) keeps a shared name, the others get their id."""
    names = {}
    taken = set()
    ordered = sorted(nodes, key=lambda n: (n["state"] != "alive", not n["head"], n["node_id"]))
    for node in ordered:
        host = prefix + node["name"]
        if host in taken:
            host = "%s_%s" % (host, node["node_id"][:12])
        taken.add(host)
        names[node["node_id"]] = host
    return names


class InventoryModule(InventorySource, BaseInventoryPlugin, Constructable, Cacheable):

    NAME = "bridge.hpc.ray"
    MANAGER = RayClient.TITLE
    FILE_SUFFIXES = ("ray.yml", "ray.yaml")
    SOURCE_OPTIONS = ("url",)
    URL_VAR = "ray_url"
    HOSTS = "nodes"
    URL_NAME = RayClient.URL_NAME
    URL_ENV = RayClient.ENV["url"][0]
    # Bump when the cached payload changes shape, so an old cache entry is read again from Ray.
    PAYLOAD_FORMAT = 1

    # -- reading Ray (parse() and the cache: InventorySource)

    def _client(self, source):
        return RayClient.from_options(self._connection_option(source))

    def _fetch(self, source):
        records = self._read(source, lambda client: client.inventory())
        nodes = records["nodes"]
        for node in nodes:
            node["state_message"] = node["native"].get("state_message")
        return {
            "format": self.PAYLOAD_FORMAT,
            "source": source,
            "version": records["version"],
            "nodes": without_native(nodes),
            "usage": records["usage"],
            "resources": records["resources"],
        }

    # -- building hosts and groups

    def _populate(self, payload):
        include_dead = self.get_option("include_dead")
        local = self.get_option("set_local_connection")
        nodes = [n for n in payload["nodes"] if include_dead or n["state"] == "alive"]
        names = host_names(nodes, self.get_option("host_prefix") or "")
        common = {
            "ray_url": payload["source"]["url"],
            "ray_version": payload["version"],
            "ray_cluster_resources": with_totals(amounts(payload["resources"]),
                                                 [n for n in payload["nodes"] if n["state"] == "alive"]),
            "bridge_capacity": queue_records(payload["nodes"])[0],
        }
        for group in (NODE_GROUP, HEAD_GROUP, WORKER_GROUP, GPU_GROUP):
            self.inventory.add_group(group)
        for node in nodes:
            host = names[node["node_id"]]
            alive = node["state"] == "alive"
            variables = dict(common)
            variables.update(node_vars(node, payload["usage"].get(node["node_id"]) if alive else None))
            if not local and node["ip"]:
                variables["ansible_host"] = node["ip"]
            self._add_host(host, variables)
            if local:
                self._set_local_connection(host)
            self.inventory.add_child(NODE_GROUP, host)
            self._add_to_group("ray_node_state_%s" % node["state"], host)
            if alive:
                self.inventory.add_child(HEAD_GROUP if node["head"] else WORKER_GROUP, host)
                if node["gpus"]:
                    self.inventory.add_child(GPU_GROUP, host)
            self._construct(host)
