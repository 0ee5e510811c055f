# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: lsf
short_description: LSF queues, and optionally hosts, as inventory hosts
version_added: 0.1.0
description:
  - Reads the queues and hosts of an IBM Spectrum LSF cluster through LSF Application Center (PAC)
    RESTful web services and makes every queue an inventory host, so that plays can target queues
    (C(hosts=normal)) and job modules find the queue's limits, status and the Application Center's
    URL in hostvars.
  - Queue hosts get C(lsf_queue_*) variables, LSF host hosts (O(include_hosts=true)) get
    C(lsf_host_*) variables. Every host also gets C(lsf_url).
  - "Groups: C(lsf_queues), C(lsf_queue_status_open) or C(lsf_queue_status_closed) (whether the
    queue accepts new jobs) and C(lsf_queue_status_active) or C(lsf_queue_status_inactive)
    (whether it dispatches them) for queues; C(lsf_hosts), C(lsf_host_status_<status>) (C(ok),
    C(unavail), C(closed_full), ...) and C(lsf_queue_<queue>_hosts) for LSF hosts."
  - "Queue variables: C(lsf_queue_name), C(status) (as LSF prints it, such as C(Open:Active) or
    C(Closed:Inact)), C(open), C(active), C(priority), C(max_slots) (the queue's job slot limit),
    C(run_limit_minutes), C(memory_limit_mb), C(pending) and C(running) (job slots of pending and
    running jobs, as C(bqueues) counts them), C(hosts) (the queue's host list as LSF gives it, such
    as C(all) or C(hostA hostB+2 hgroup1)) and C(description). A limit LSF reports as unlimited is
    null."
  - "LSF host variables: C(lsf_host_name), C(status) (C(ok), C(unavail), C(closed_adm), ...,
    lowercase), C(usable) (true for C(ok), C(closed_full), C(closed_excl) and C(closed_busy),
    in which a host is busy rather than unable to run jobs), C(ncpus), C(max_memory_mb),
    C(model), C(type) and C(queues) (the queues whose host list takes the host in: names it, or
    holds C(all) or C(others) without leaving it out with C(~host))."
  - A queue whose host list names a host group puts no host into C(lsf_queue_<queue>_hosts) for
    it; Application Center's host and queue records do not say which hosts a group holds.
  - "Every queue host also gets C(bridge_capacity): the queue as the common capacity record that
    M(bridge.hpc.placement) takes in its C(candidates[].capacity) (keys C(name), C(state), C(usable),
    C(default), C(max_time_minutes), C(max_nodes), C(cpus_per_node), C(memory_mb_per_node),
    C(gpus_per_node), C(gpu_types), C(features), C(qubits), C(pending), C(running); null is unknown
    or unlimited; docs/inventory.md). C(pending) and C(running) are the queue's counts."
  - Values read from LSF are marked unsafe, so a queue or host name is never templated.
  - The configuration file name must end with C(lsf.yml) or C(lsf.yaml), for example
    C(cluster.lsf.yml).
author:
  - Bridge developers (@bridge-hpc)
requirements:
  - httpx
extends_documentation_fragment:
  - bridge.hpc.lsf
  - constructed
  - inventory_cache
notes:
  - O(url), O(user) and O(password) may be templates, such as a lookup or a vaulted value.
  - Reading LSF takes one logon to Application Center with O(user) and O(password), then
    C(GET /ws/queues) and C(GET /ws/hosts); a run served from the cache sends no request.
  - With O(cache=true) the queues and hosts read from LSF are cached, not the inventory hosts and
    groups; groups, O(compose), O(include_hosts) and O(host_prefix) are applied again on every
    run. A cache entry written for another O(url) or O(user) is not used. C(ansible-inventory
    --flush-cache) and C(ansible.builtin.meta) C(refresh_inventory) read LSF again.
  - Pending and running counts in a cached inventory are as old as the cache.
  - The password, and the token Application Center trades it for, are never written to the cache,
    to hostvars or to an error message.
seealso:
  - module: bridge.hpc.lsf_cluster_info
  - module: bridge.hpc.lsf_job
  - plugin: bridge.hpc.slurm
    plugin_type: inventory
options:
  plugin:
    description: Marks this file as a source for this plugin.
    type: str
    required: true
    choices: [bridge.hpc.lsf]
  # Descriptions, types and defaults of the connection options come from the bridge.hpc.lsf
  # fragment, the ones the LSF modules have; an inventory plugin reads the environment itself.
  url:
    env:
      - name: LSF_PAC_URL
  user:
    env:
      - name: LSF_USER
  password:
    env:
      - name: LSF_PASSWORD
  host_prefix:
    description:
      - Text put in front of every queue's name to make its inventory host name.
      - The default keeps the queue's own name (C(normal), C(short)), which is what job modules and
        people call it. Set a prefix such as C(lsf_) when two LSF sources, or an LSF and a Slurm
        source, have queues or partitions of the same name, or when a queue is named like an LSF
        host; this plugin refuses to merge a queue into a host that another LSF cluster defined,
        or into one of the LSF hosts it makes with O(include_hosts=true).
    type: str
    default: ""
  set_local_connection:
    description:
      - Set C(ansible_connection=local) and C(ansible_python_interpreter={{ ansible_playbook_python }})
        on queue hosts.
      - A queue is not a machine to log in to. Tasks targeting it are job modules that talk HTTP to
        Application Center from the controller, and they need the Python that runs Ansible (it has
        httpx) rather than whatever interpreter discovery finds, just like the implicit localhost.
      - LSF host hosts never get these variables; they are real machines.
    type: bool
    default: true
  include_hosts:
    description:
      - Also make every LSF host an inventory host, named as LSF names it, with C(lsf_host_*)
        variables, in C(lsf_hosts), C(lsf_host_status_<status>) and C(lsf_queue_<queue>_hosts).
    type: bool
    default: false
"""

EXAMPLES = r"""
# cluster.lsf.yml -- URL, user and password from LSF_PAC_URL, LSF_USER and LSF_PASSWORD
plugin: bridge.hpc.lsf

---
# cluster.lsf.yml -- everything in the file, password from the vault, cached for 10 minutes
plugin: bridge.hpc.lsf
url: https://pac.example.org:8443/platform
user: alice
password: "{{ lookup('ansible.builtin.file', '/run/secrets/lsf_password') }}"
cache: true
cache_plugin: ansible.builtin.jsonfile
cache_connection: ~/.cache/bridge-inventory
cache_timeout: 600

---
# hosts.lsf.yml -- LSF hosts too, groups by limits, load and host model
plugin: bridge.hpc.lsf
include_hosts: true
strict: true
compose:
  run_limit_hours: lsf_queue_run_limit_minutes // 60 if lsf_queue_run_limit_minutes | default(none) else none
groups:
  unlimited_queues: lsf_queue_name is defined and lsf_queue_run_limit_minutes is none
  busy_queues: (lsf_queue_pending | default(0, true)) > 0
  usable_hosts: lsf_host_usable | default(false)
keyed_groups:
  - key: lsf_host_model | default([], true)
    prefix: model

---
# A play over the queues that take jobs: one task per queue, run on the controller
# - hosts: lsf_queue_status_open:&lsf_queue_status_active
#   gather_facts: false
#   tasks:
#     - bridge.hpc.lsf_job:
#         url: "{{ lsf_url }}"
#         queue: "{{ lsf_queue_name }}"
#         script: "#!/bin/bash\nhostname"
"""

import re

from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable

from ansible_collections.bridge.hpc.plugins.module_utils.lsf.client import LsfClient
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.fit import queue_records
from ansible_collections.bridge.hpc.plugins.plugin_utils._inventory import InventorySource, without_native

QUEUE_GROUP = "lsf_queues"
HOST_GROUP = "lsf_hosts"
QUEUE_FIELDS = ("name", "status", "open", "active", "priority", "max_slots", "run_limit_minutes",
                "memory_limit_mb", "pending", "running", "hosts", "description")
HOST_FIELDS = ("name", "status", "usable", "ncpus", "max_memory_mb", "model", "type")
# Words of an LSF HOSTS list that stand for every host: "all", and "others" (every host the list
# does not name otherwise, which for membership is every host too).
EVERY_HOST = ("all", "others")


def queue_members(queue, host_names):
    """The names of host_names a queue's LSF host list takes in.

    The list (lsb.queues HOSTS, as bqueues -l prints it) holds host names, host groups, "all" or
    "others", a name may carry a preference ("hostA+2") and "~hostB" leaves a host out.
    """
    words = (queue.get("hosts") or "").split()
    excluded = set(word[1:] for word in words if word.startswith("~"))
    named = set(re.sub(r"\+\d*$", "", word) for word in words if not word.startswith("~"))
    if named & set(EVERY_HOST):
        named = set(host_names)
    return [name for name in host_names if name in named and name not in excluded]


def queue_vars(queue):
    return dict(("lsf_queue_%s" % key, queue.get(key)) for key in QUEUE_FIELDS)


def host_vars(host, queues):
    values = dict((key, host.get(key)) for key in HOST_FIELDS)
    values["queues"] = [q["name"] for q in queues if host["name"] in queue_members(q, [host["name"]])]
    return dict(("lsf_host_%s" % key, value) for key, value in values.items())


class InventoryModule(InventorySource, BaseInventoryPlugin, Constructable, Cacheable):

    NAME = "bridge.hpc.lsf"
    MANAGER = LsfClient.TITLE
    FILE_SUFFIXES = ("lsf.yml", "lsf.yaml")
    SOURCE_OPTIONS = ("url", "user")
    URL_VAR = "lsf_url"
    HOSTS = "queues"
    URL_NAME = LsfClient.URL_NAME
    URL_ENV = LsfClient.ENV["url"][0]
    # Bump when the cached payload changes shape, so an old cache entry is read again from LSF.
    PAYLOAD_FORMAT = 1

    # -- reading LSF (parse() and the cache: InventorySource)

    def _client(self, source):
        return LsfClient.from_options(self._connection_option(source))

    def _fetch(self, source):
        records = self._read(source, lambda client: client.inventory())
        return {
            "format": self.PAYLOAD_FORMAT,
            "source": source,
            "queues": without_native(records["queues"]),
            "hosts": without_native(records["hosts"]),
        }

    # -- building hosts and groups

    def _populate(self, payload):
        queues, hosts = payload["queues"], payload["hosts"]
        include_hosts = self.get_option("include_hosts")
        prefix = self.get_option("host_prefix") or ""
        lsf_hosts = set(h["name"] for h in hosts) if include_hosts else set()

        capacity = dict((record["name"], record) for record in queue_records(queues, hosts))
        self.inventory.add_group(QUEUE_GROUP)
        for queue in queues:
            name = prefix + queue["name"]
            if name in lsf_hosts:
                raise AnsibleParserError(
                    "bridge.hpc.lsf: queue '%s' and LSF host '%s' would be the same inventory host; "
                    "set host_prefix" % (queue["name"], name))
            variables = queue_vars(queue)
            variables["lsf_url"] = payload["source"]["url"]
            variables["bridge_capacity"] = capacity[queue["name"]]
            self._add_host(name, variables)
            if self.get_option("set_local_connection"):
                self._set_local_connection(name)
            self.inventory.add_child(QUEUE_GROUP, name)
            self._add_to_group("lsf_queue_status_%s" % ("open" if queue["open"] else "closed"), name)
            self._add_to_group("lsf_queue_status_%s" % ("active" if queue["active"] else "inactive"), name)
            self._construct(name)

        if not include_hosts:
            return
        self.inventory.add_group(HOST_GROUP)
        for host in hosts:
            variables = host_vars(host, queues)
            variables["lsf_url"] = payload["source"]["url"]
            self._add_host(host["name"], variables)
            self.inventory.add_child(HOST_GROUP, host["name"])
            self._add_to_group("lsf_host_status_%s" % host["status"], host["name"])
            for queue in variables["lsf_host_queues"]:
                self._add_to_group("lsf_queue_%s_hosts" % queue, host["name"])
            self._construct(host["name"])
