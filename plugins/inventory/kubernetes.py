# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: kubernetes
short_description: Kubernetes nodes, or Kueue LocalQueues, with what they can hold, as inventory hosts
version_added: 0.1.0
description:
  - Reads the nodes of a Kubernetes cluster (O(hosts=nodes)) or the Kueue LocalQueues of a namespace
    (O(hosts=queues)) and makes each an inventory host, so that plays can see what a Job of
    M(bridge.hpc.k8s_job) may request, and target queues (C(queue) of the job spec) by name.
  - "Node variables: C(k8s_node_name), C(ready), C(schedulable) (not cordoned), C(cpus),
    C(memory_mb) and C(gpus) (allocatable: what Pods may request, after the kubelet's reservations;
    GPUs in the extended resource O(gpu_resource)), C(labels) and C(taints) (keys). Groups:
    C(k8s_nodes), C(k8s_node_ready) or C(k8s_node_not_ready)."
  - "Queue variables: C(k8s_queue_name), C(namespace), C(cluster_queue) (the Kueue ClusterQueue it
    feeds), C(pending) and C(admitted) (workloads), C(cpus), C(memory_mb) and C(gpus) (the
    ClusterQueue's nominal quota over all its flavors, null where it cannot be read). Group: C(k8s_queues)."
  - Every host also gets C(k8s_namespace) and C(k8s_server) (the apiserver).
  - "Every host also gets C(bridge_capacity), the common capacity record that M(bridge.hpc.placement)
    takes in its C(candidates[].capacity) (keys C(name), C(state), C(usable), C(default),
    C(max_time_minutes), C(max_nodes), C(cpus_per_node), C(memory_mb_per_node), C(gpus_per_node),
    C(gpu_types), C(features), C(qubits), C(pending), C(running); null is unknown or unlimited;
    docs/inventory.md): on a queue host the LocalQueue's, with its pending and admitted workloads as
    C(pending) and C(running) and the node sizes unknown (nodes are not read then); on a node host,
    the same on every node, the whole cluster's as a Job without a queue sees it (C(name) null, the
    largest ready node's allocatable, C(pending) and C(running) null)."
  - Values read from the cluster are marked unsafe, so a label or a name is never templated.
  - The configuration file name must end with C(kubernetes.yml), C(kubernetes.yaml), C(k8s.yml) or C(k8s.yaml).
author:
  - Bridge developers (@bridge-hpc)
requirements:
  - kubernetes (the Python client)
extends_documentation_fragment:
  - bridge.hpc.kubernetes
  - constructed
  - inventory_cache
notes:
  - Reading nodes takes C(list nodes) (cluster scope); reading queues C(list localqueues) in the
    namespace and C(get clusterqueues) for the quotas.
  - With O(cache=true) the records are cached, not the hosts and groups; groups and O(compose) are
    applied again on every run. The kubeconfig's content is never cached, nor part of a message.
seealso:
  - module: bridge.hpc.k8s_job
  - plugin: bridge.hpc.slurm
    plugin_type: inventory
options:
  plugin:
    description: Marks this file as a source for this plugin.
    type: str
    required: true
    choices: [bridge.hpc.kubernetes]
  # Descriptions, types and defaults of the connection options come from the bridge.hpc.kubernetes
  # fragment, the ones the Kubernetes modules have; an inventory plugin reads the environment itself.
  kubeconfig:
    env:
      # The plugin loader takes the last variable set; the modules (ENV) the first: K8S_AUTH_KUBECONFIG wins.
      - name: KUBECONFIG
      - name: K8S_AUTH_KUBECONFIG
  context:
    env:
      - name: K8S_AUTH_CONTEXT
  url:
    env:
      - name: K8S_AUTH_HOST
  api_key:
    env:
      - name: K8S_AUTH_API_KEY
  ca_path:
    env:
      - name: K8S_AUTH_SSL_CA_CERT
  hosts:
    description:
      - What becomes an inventory host; the nodes, or the Kueue LocalQueues of O(namespace).
    type: str
    choices: [nodes, queues]
    default: nodes
  host_prefix:
    description:
      - Text put in front of every node's or queue's name to make its inventory host name, for
        example when a node is also managed as an SSH host of the same name.
    type: str
    default: ""
  set_local_connection:
    description:
      - Set C(ansible_connection=local) and C(ansible_python_interpreter={{ ansible_playbook_python }})
        on queue hosts, whose tasks are job modules that talk to the apiserver from the controller.
        Node hosts never get them; they are real machines.
    type: bool
    default: true
"""

EXAMPLES = r"""
# cluster.kubernetes.yml -- the nodes of the current kubeconfig context, grouped by zone
plugin: bridge.hpc.kubernetes
keyed_groups:
  - key: k8s_node_labels['topology.kubernetes.io/zone'] | default('none')
    prefix: zone
groups:
  gpu_nodes: (k8s_node_gpus | default(0)) > 0

---
# queues.kubernetes.yml -- Kueue's LocalQueues of namespace research, through another context
plugin: bridge.hpc.kubernetes
hosts: queues
context: prod
namespace: research
"""

from ansible_collections.bridge.hpc.plugins.module_utils.k8s.client import K8sClient
from ansible_collections.bridge.hpc.plugins.module_utils.k8s.fit import queue_records
from ansible_collections.bridge.hpc.plugins.plugin_utils._inventory import InventorySource, without_native

from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable

NODE_FIELDS = ("name", "ready", "schedulable", "cpus", "memory_mb", "gpus", "labels", "taints")
QUEUE_FIELDS = ("name", "namespace", "cluster_queue", "pending", "admitted", "cpus", "memory_mb", "gpus")


class InventoryModule(InventorySource, BaseInventoryPlugin, Constructable, Cacheable):

    NAME = "bridge.hpc.kubernetes"
    MANAGER = K8sClient.TITLE
    FILE_SUFFIXES = ("kubernetes.yml", "kubernetes.yaml", "k8s.yml", "k8s.yaml")
    SOURCE_OPTIONS = ("kubeconfig", "context", "namespace", "url", "hosts", "gpu_resource")
    URL_VAR = "k8s_server"
    HOSTS = "nodes"
    URL_NAME = K8sClient.URL_NAME
    URL_ENV = None
    PAYLOAD_FORMAT = 1

    def _client(self, source):
        return K8sClient.from_options(self._connection_option(source))

    def _fetch(self, source):
        def read(client):
            records = client.nodes() if source["hosts"] != "queues" else client.local_queues(quotas=True)
            return {"server": client.url, "namespace": client.namespace, "records": without_native(records)}

        payload = self._read(source, read)
        payload.update(format=self.PAYLOAD_FORMAT, source=source)
        return payload

    def _populate(self, payload):
        prefix = self.get_option("host_prefix") or ""
        queues = payload["source"]["hosts"] == "queues"
        group = "k8s_queues" if queues else "k8s_nodes"
        fields, var = (QUEUE_FIELDS, "k8s_queue_") if queues else (NODE_FIELDS, "k8s_node_")
        if queues:
            capacity = dict((queue["name"], queue) for queue in queue_records([], payload["records"]))
        else:
            cluster = queue_records(payload["records"], [])[0]
        self.inventory.add_group(group)
        for record in payload["records"]:
            name = prefix + record["name"]
            variables = dict((var + key, record.get(key)) for key in fields)
            variables.update(k8s_server=payload["server"], k8s_namespace=payload["namespace"],
                             bridge_capacity=capacity[record["name"]] if queues else cluster)
            self._add_host(name, variables)
            self.inventory.add_child(group, name)
            if queues:
                if self.get_option("set_local_connection"):
                    self._set_local_connection(name)
            else:
                self._add_to_group("k8s_node_ready" if record["ready"] else "k8s_node_not_ready", name)
            self._construct(name)
