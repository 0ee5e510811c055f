# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: slurm
short_description: Slurm partitions, and optionally nodes, as inventory hosts
version_added: 0.1.0
description:
  - Reads the partitions and nodes of a Slurm cluster through slurmrestd and makes every partition
    an inventory host, so that plays can target partitions (C(hosts=gpu)) and job modules find the
    partition's limits, features and the cluster's URL in hostvars.
  - Partition hosts get C(slurm_partition_*) variables, node hosts (O(include_nodes=true)) get
    C(slurm_node_*) variables. Every host also gets C(slurm_url), C(slurm_api_version) and, when
    the partitions or nodes name their cluster, C(slurm_cluster).
  - "Groups: C(slurm_partitions), C(slurm_default_partition), C(slurm_partition_state_<state>) for
    partitions; C(slurm_nodes), C(slurm_node_state_<state>) (one per state and state flag, so a
    drained idle node is in C(slurm_node_state_idle) and C(slurm_node_state_drain)) and
    C(slurm_partition_<partition>_nodes) for nodes."
  - "Partition variables: C(slurm_partition_name), C(state), C(default), C(cpus) (total),
    C(nodes) (count), C(node_list), C(max_time_minutes), C(max_time), C(default_time_minutes),
    C(default_time), C(max_nodes_per_job), C(max_memory_per_node_mb), C(default_memory_per_cpu_mb),
    C(tres), and from the partition's nodes C(memory_mb) (the largest node's memory), C(gpus) (sum),
    C(gres) and C(features) (unions), C(node_states) (nodes per state and state flag) and
    C(free_cpus) (idle CPUs of nodes that are not down or drained). A limit Slurm reports as
    unlimited is null, and C(max_time) reads C(UNLIMITED) then."
  - "Every partition host also gets C(bridge_capacity): the partition as the common capacity record that
    M(bridge.hpc.placement) takes in its C(candidates[].capacity) (keys C(name), C(state), C(usable),
    C(default), C(max_time_minutes), C(max_nodes), C(cpus_per_node), C(memory_mb_per_node),
    C(gpus_per_node), C(gpu_types), C(features), C(qubits), C(pending), C(running); null is unknown
    or unlimited; docs/inventory.md). C(pending) and C(running) are null: the plugin does not read the job list."
  - Values read from Slurm are marked unsafe, so a partition or node name is never templated.
  - The configuration file name must end with C(slurm.yml) or C(slurm.yaml), for example
    C(cluster.slurm.yml).
author:
  - Bridge developers (@bridge-hpc)
requirements:
  - httpx
extends_documentation_fragment:
  - constructed
  - inventory_cache
notes:
  - With O(cache=true) the partitions and nodes read from Slurm are cached, not the hosts and
    groups; groups, O(compose), O(partition_overrides) and O(extra_features) are applied again on
    every run. A cache entry written for another O(url), O(user) or O(api_version) is not used.
    C(ansible-inventory --flush-cache) and C(ansible.builtin.meta) C(refresh_inventory) read Slurm again.
  - The token is never written to the cache, to hostvars or to an error message.
seealso:
  - module: bridge.hpc.slurm_cluster_info
  - module: bridge.hpc.slurm_job
options:
  plugin:
    description: Marks this file as a source for this plugin.
    type: str
    required: true
    choices: [bridge.hpc.slurm]
  url:
    description:
      - Base URL of slurmrestd, for example C(https://slurm.example.org:6820).
      - May be a template, such as a lookup.
    type: str
    env:
      - name: SLURM_URL
  user:
    description:
      - Slurm user name sent as C(X-SLURM-USER-NAME).
      - Optional for a user's own token; required when a root or SlurmUser token acts for another user.
      - May be a template.
    type: str
    env:
      - name: SLURM_USER
  token:
    description:
      - JWT sent as C(X-SLURM-USER-TOKEN), as printed by C(scontrol token).
      - May be a template, such as a lookup or a vaulted value.
      - Never cached, never set as a host variable, never part of an error message.
    type: str
    env:
      - name: SLURM_JWT
  token_file:
    description:
      - File on the controller that holds the JWT, either alone or as the C(SLURM_JWT=...) line
        C(scontrol token) prints. Read for every inventory run, and read again when Slurm refuses the
        token, so that a token rotated in the file is picked up.
      - Mutually exclusive with O(token). Whichever of the two is set in the file wins over the
        other's environment variable.
      - The file's path, never its content, is part of an error message; its token is never cached
        or set as a host variable.
    type: path
    env:
      - name: SLURM_JWT_FILE
  identity_key:
    description:
      - The key that tags Slurm job identities (see M(bridge.hpc.slurm_job)). The inventory reads partitions
        and nodes, no job, so it does not use it; it is accepted so that one connection serves both.
      - Never cached, never set as a host variable, never part of an error message.
    type: str
  api_version:
    description:
      - Slurm REST API version to speak, such as C(v0.0.38) or C(v0.0.42).
      - If not set, the newest version the server offers is discovered.
    type: str
    choices: [v0.0.45, v0.0.44, v0.0.43, v0.0.42, v0.0.41, v0.0.40, v0.0.39, v0.0.38, v0.0.37, v0.0.36]
  validate_certs:
    description:
      - Verify the server's TLS certificate. Turn off only for a throwaway test cluster.
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
      - Text put in front of every partition's name to make its inventory host name.
      - The default keeps the partition's own name (C(debug), C(gpu)), which is what job modules
        and people call it. Set a prefix such as C(c1_) when two Slurm sources have partitions of
        the same name, or when a partition is named like a node; this plugin refuses to merge a
        partition into a host that another Slurm cluster or a node already defined.
    type: str
    default: ""
  set_local_connection:
    description:
      - Set C(ansible_connection=local) and C(ansible_python_interpreter={{ ansible_playbook_python }})
        on partition hosts.
      - A partition is not a machine to log in to. Tasks targeting it are job modules that talk
        HTTP to slurmrestd from the controller, and they need the Python that runs Ansible (it has
        httpx) rather than whatever interpreter discovery finds, just like the implicit localhost.
      - Node hosts never get these variables; they are real machines.
    type: bool
    default: true
  include_nodes:
    description:
      - Also make every node a host, named as Slurm names it, with C(slurm_node_*) variables, in
        C(slurm_nodes), C(slurm_node_state_<state>) and C(slurm_partition_<partition>_nodes).
    type: bool
    default: false
  partition_overrides:
    description:
      - Host variables to set on partition hosts, by partition name, after the ones read from Slurm;
        they win over them. For facts Slurm does not know or reports poorly.
      - "Example: C({gpu: {slurm_partition_gpus: 8, slurm_partition_features: [a100]}})."
      - Applied before the groups are made and before O(compose), O(groups) and O(keyed_groups),
        which all see the overridden values.
      - "Slurm 24.11's REST API does not say which partition is the default; there,
        C({debug: {slurm_partition_default: true}}) puts C(debug) into C(slurm_default_partition)."
      - A partition name the cluster does not have is a warning, or an error with O(strict=true).
    type: dict
    default: {}
  extra_features:
    description:
      - Features to add to a partition's C(slurm_partition_features), by partition name.
        Unknown partition names are handled as in O(partition_overrides).
      - "Example: C({gpu: [a100, nvlink]})."
    type: dict
    default: {}
"""

EXAMPLES = r"""
# cluster.slurm.yml -- URL, user and token from SLURM_URL, SLURM_USER and SLURM_JWT
plugin: bridge.hpc.slurm

---
# cluster.slurm.yml -- everything in the file, token from the vault, cached for 10 minutes
plugin: bridge.hpc.slurm
url: https://slurm.example.org:6820
user: alice
token: "{{ lookup('ansible.builtin.file', '/run/secrets/slurm_jwt') }}"
cache: true
cache_plugin: ansible.builtin.jsonfile
cache_connection: ~/.cache/bridge-inventory
cache_timeout: 600

---
# gpus.slurm.yml -- nodes too, GPU groups, facts Slurm does not report
plugin: bridge.hpc.slurm
include_nodes: true
strict: true
compose:
  # With strict, a variable a node host lacks must be tested through default() before use.
  max_walltime_hours: (slurm_partition_max_time_minutes // 60) if slurm_partition_max_time_minutes | default(none) else none
groups:
  gpu_partitions: (slurm_partition_gpus | default(0)) > 0
  long_partitions: (slurm_partition_max_time_minutes | default(0)) >= 1440
keyed_groups:
  - key: slurm_partition_features | default([])
    prefix: feature
partition_overrides:
  gpu:
    slurm_partition_gpus: 8
extra_features:
  gpu: [a100, nvlink]

---
# A play over the partitions: one task per partition, run on the controller
# - hosts: slurm_partitions
#   gather_facts: false
#   tasks:
#     - bridge.hpc.slurm_job:
#         url: "{{ slurm_url }}"
#         queue: "{{ slurm_partition_name }}"
#         script: "#!/bin/bash\nhostname"
"""

from ansible.errors import AnsibleParserError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable

from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.fit import queue_records
from ansible_collections.bridge.hpc.plugins.plugin_utils._inventory import InventorySource, without_native

PARTITION_GROUP = "slurm_partitions"
DEFAULT_PARTITION_GROUP = "slurm_default_partition"
NODE_GROUP = "slurm_nodes"
NODE_FIELDS = (
    "name", "state", "states", "usable", "cpus", "alloc_cpus", "free_cpus", "memory_mb",
    "alloc_memory_mb", "free_memory_mb", "gres", "gpus", "features", "partitions", "reason",
)


def member_nodes(partition, nodes):
    return [n for n in nodes if partition["name"] in (n.get("partitions") or [])]


def partition_vars(partition, nodes, extra_features=()):
    """The slurm_partition_* hostvars of one partition, from it and the nodes it contains."""
    members = member_nodes(partition, nodes)
    memories = [n["memory_mb"] for n in members if n.get("memory_mb") is not None]
    gres = set()
    features = set(extra_features)
    node_states = {}
    for node in members:
        gres.update(item.strip() for item in (node.get("gres") or "").split(",") if item.strip())
        features.update(node.get("features") or [])
        for state in node.get("states") or [node.get("state")]:
            node_states[state] = node_states.get(state, 0) + 1
    values = {
        "name": partition["name"],
        "state": partition["state"],
        "default": partition["default"],
        "cpus": partition["total_cpus"],
        "nodes": partition["total_nodes"],
        "node_list": partition["nodes"],
        "memory_mb": max(memories) if memories else None,
        "max_time_minutes": partition["max_time_minutes"],
        "max_time": partition["max_time"],
        "default_time_minutes": partition["default_time_minutes"],
        "default_time": partition["default_time"],
        "max_nodes_per_job": partition["max_nodes_per_job"],
        "max_memory_per_node_mb": partition.get("max_memory_per_node_mb"),
        "default_memory_per_cpu_mb": partition.get("default_memory_per_cpu_mb"),
        "tres": partition.get("tres"),
        "gpus": sum(n.get("gpus") or 0 for n in members),
        "gres": sorted(gres),
        "features": sorted(features),
        "node_states": node_states,
        # Drained or down nodes have idle CPUs that no job can get.
        "free_cpus": sum(n.get("free_cpus") or 0 for n in members if n.get("usable", True)),
    }
    return dict(("slurm_partition_%s" % key, value) for key, value in values.items())


def node_vars(node):
    return dict(("slurm_node_%s" % key, node.get(key)) for key in NODE_FIELDS)


def kind_of(value):
    # ansible-core 2.19 hands config values over as tagged subclasses (_AnsibleTaggedStr).
    for kind in (dict, list, str, bool, int, float):
        if isinstance(value, kind):
            return kind.__name__
    return type(value).__name__


def cluster_name(partitions, nodes):
    # v0.0.39+ partitions have "cluster" and nodes "cluster_name", but 24.11 sends both empty
    # (it names the cluster only in meta.slurm.cluster); v0.0.38 has neither.
    for item in partitions + nodes:
        native = item.get("native") or {}
        name = native.get("cluster") or native.get("cluster_name")
        if name:
            return name
    return None


class InventoryModule(InventorySource, BaseInventoryPlugin, Constructable, Cacheable):

    NAME = "bridge.hpc.slurm"
    MANAGER = SlurmClient.TITLE
    FILE_SUFFIXES = ("slurm.yml", "slurm.yaml")
    SOURCE_OPTIONS = ("url", "user", "api_version")
    URL_VAR = "slurm_url"
    HOSTS = "partitions"
    URL_NAME = SlurmClient.URL_NAME
    URL_ENV = SlurmClient.ENV["url"][0]
    # Bump when the cached payload changes shape, so an old cache entry is read again from Slurm.
    PAYLOAD_FORMAT = 1

    # -- reading Slurm (parse() and the cache: InventorySource)

    def _client(self, source):
        return SlurmClient.from_options(self._backend_options(SlurmClient, source))

    def _fetch(self, source):
        records = self._read(source, lambda client: client.inventory())
        partitions, nodes = records["partitions"], records["nodes"]
        return {
            "format": self.PAYLOAD_FORMAT,
            "source": source,
            "api_version": records["api_version"],
            "cluster": cluster_name(partitions, nodes) or records["cluster"],
            "partitions": without_native(partitions),
            "nodes": without_native(nodes),
        }

    # -- building hosts and groups

    def _populate(self, payload):
        partitions = payload["partitions"]
        nodes = payload["nodes"]
        overrides = self._per_partition("partition_overrides", dict, partitions)
        extra_features = self._per_partition("extra_features", list, partitions)
        common = {"slurm_url": payload["source"]["url"], "slurm_api_version": payload["api_version"]}
        if payload.get("cluster"):
            common["slurm_cluster"] = payload["cluster"]
        prefix = self.get_option("host_prefix") or ""
        node_hosts = set(n["name"] for n in nodes) if self.get_option("include_nodes") else set()

        capacity = dict((record["name"], record) for record in queue_records(partitions, nodes))
        self.inventory.add_group(PARTITION_GROUP)
        self.inventory.add_group(DEFAULT_PARTITION_GROUP)
        for partition in partitions:
            host = prefix + partition["name"]
            if host in node_hosts:
                raise AnsibleParserError(
                    "bridge.hpc.slurm: partition '%s' and node '%s' would be the same inventory host; "
                    "set host_prefix" % (partition["name"], host))
            variables = dict(common)
            variables.update(partition_vars(partition, nodes, extra_features.get(partition["name"], ())))
            variables["bridge_capacity"] = capacity[partition["name"]]
            self._add_host(host, variables)
            if self.get_option("set_local_connection"):
                self._set_local_connection(host)
            for key, value in overrides.get(partition["name"], {}).items():
                self.inventory.set_variable(host, key, value)
            # Groups follow the overridden values: Slurm 24.11's REST API never reports which
            # partition is the default, an override can say it.
            final = self.inventory.get_host(host).get_vars()
            self.inventory.add_child(PARTITION_GROUP, host)
            self._add_to_group("slurm_partition_state_%s" % str(final["slurm_partition_state"]).lower(), host)
            if boolean(final["slurm_partition_default"], strict=False):
                self.inventory.add_child(DEFAULT_PARTITION_GROUP, host)
            self._construct(host)

        if not self.get_option("include_nodes"):
            return
        self.inventory.add_group(NODE_GROUP)
        for node in nodes:
            host = node["name"]
            variables = dict(common)
            variables.update(node_vars(node))
            self._add_host(host, variables)
            self.inventory.add_child(NODE_GROUP, host)
            for state in node["states"] or [node["state"]]:
                self._add_to_group("slurm_node_state_%s" % state, host)
            for name in node["partitions"]:
                self._add_to_group("slurm_partition_%s_nodes" % name, host)
            self._construct(host)

    def _per_partition(self, option, kind, partitions):
        """A per-partition option, checked: unknown partitions warn, or fail when strict."""
        value = self.get_option(option) or {}
        for name, item in value.items():
            if not isinstance(item, kind):
                raise AnsibleParserError("bridge.hpc.slurm: %s.%s must be a %s, got %s" % (
                    option, name, kind.__name__, kind_of(item)))
        known = [p["name"] for p in partitions]
        unknown = sorted(name for name in value if name not in known)
        if unknown:
            message = "bridge.hpc.slurm: %s names partition(s) %s that the cluster does not have; its partitions: %s" % (
                option, ", ".join(unknown), ", ".join(known) or "none")
            if self.get_option("strict"):
                raise AnsibleParserError(message)
            self.display.warning(message)
        return value
