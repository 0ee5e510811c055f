# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Nodes and Kueue queues normalized, with Kubernetes quantities read, and whether a Job's Pod fits
a node (pure): check_fits refuses a Pod no node could ever hold; queue_records makes the capacity
record of each LocalQueue, or of the whole cluster where the namespace has none.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.bridge.hpc.plugins.module_utils._backend import queue_record
from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils.k8s.compile import DEFAULT_GPU_RESOURCE


# The label resources.gpu_type selects nodes on by default (backend_options.kubernetes.gpu_type_label).
GPU_TYPE_LABEL = "nvidia.com/gpu.product"
# Kueue's LocalQueueDefaulting: a Job without a queue name goes to the LocalQueue named "default".
DEFAULT_LOCAL_QUEUE = "default"


def normalize_local_queue(native):
    status = native.get("status") or {}
    active = [c.get("status") == "True" for c in status.get("conditions") or [] if c.get("type") == "Active"]
    return {"name": native["metadata"]["name"], "namespace": native["metadata"].get("namespace"),
            "cluster_queue": (native.get("spec") or {}).get("clusterQueue"),
            "pending": status.get("pendingWorkloads"), "admitted": status.get("admittedWorkloads"),
            "active": active[0] if active else None,
            "cpus": None, "memory_mb": None, "gpus": None, "native": native}


def nominal_quota(cluster_queue, gpu_resource=DEFAULT_GPU_RESOURCE):
    """{cpus, memory_mb, gpus} of a ClusterQueue: its nominal quotas summed over flavors."""
    totals = {"cpu": 0.0, "memory": 0.0, gpu_resource: 0.0}
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for resource in flavor.get("resources") or []:
                name, quota = resource.get("name"), resource.get("nominalQuota")
                if name == "memory":
                    totals[name] += mebibytes_of(quota)
                elif name in totals:
                    totals[name] += cpus_of(quota)
    return {"cpus": totals["cpu"], "memory_mb": int(totals["memory"]), "gpus": int(totals[gpu_resource])}


CPU_UNITS = {"m": 0.001, "": 1.0}
MEMORY_SUFFIXES = {"": 1.0 / 1048576, "Ki": 1.0 / 1024, "Mi": 1.0, "Gi": 1024.0, "Ti": 1048576.0,
                   "k": 1000.0 / 1048576, "M": 1e6 / 1048576, "G": 1e9 / 1048576, "T": 1e12 / 1048576}


def cpus_of(quantity):
    match = re.match(r"^(\d+(?:\.\d+)?)(m?)$", str(quantity or "0"))
    return float(match.group(1)) * CPU_UNITS[match.group(2)] if match else 0.0


def mebibytes_of(quantity):
    match = re.match(r"^(\d+(?:\.\d+)?)([KMGT]i?|k)?$", str(quantity or "0"))
    return float(match.group(1)) * MEMORY_SUFFIXES[match.group(2) or ""] if match else 0.0


def normalize_node(native, gpu_resource=DEFAULT_GPU_RESOURCE):
    status = native.get("status") or {}
    allocatable = status.get("allocatable") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    spec = native.get("spec") or {}
    return {
        "name": native["metadata"]["name"],
        "ready": ready,
        "schedulable": not spec.get("unschedulable"),
        "cpus": cpus_of(allocatable.get("cpu")),
        "memory_mb": int(mebibytes_of(allocatable.get("memory"))),
        "gpus": int(cpus_of(allocatable.get(gpu_resource))),
        "labels": (native["metadata"].get("labels") or {}),
        "taints": [t.get("key") for t in spec.get("taints") or []],
        "native": native,
    }


def check_fits(rendered, nodes, gpu_resource=DEFAULT_GPU_RESOURCE):
    """SpecError naming the field when no node could ever hold the Pod's requests (its allocatable,
    not what is free now: a busy cluster frees up)."""
    if not nodes:
        return
    limits = (rendered["job"]["spec"]["template"]["spec"]["containers"][0].get("resources") or {}).get("limits") or {}
    selector = rendered["job"]["spec"]["template"]["spec"].get("nodeSelector") or {}
    candidates = [n for n in nodes if all(n["labels"].get(k) == v for k, v in selector.items())]
    if not candidates:
        raise SpecError("backend_options.kubernetes.node_selector", "no node carries the labels %s" % json.dumps(
            selector, sort_keys=True))
    for key, field, have, unit in (("cpu", "resources.cpus_per_task", "cpus", "CPUs"),
                                   ("memory", "resources.memory", "memory_mb", "MiB"),
                                   (gpu_resource, "resources.gpus", "gpus", gpu_resource)):
        if key not in limits:
            continue
        wanted = mebibytes_of(limits[key]) if key == "memory" else cpus_of(limits[key])
        if not any(node[have] >= wanted for node in candidates):
            raise SpecError(field, "%s %s requested, but the largest node has %g allocatable (%s)" % (
                limits[key], unit, max(node[have] for node in candidates),
                ", ".join("%s: %g" % (node["name"], node[have]) for node in candidates[:5])))
    fits = [n for n in candidates if all(
        n[have] >= (mebibytes_of(limits[key]) if key == "memory" else cpus_of(limits[key]))
        for key, have in (("cpu", "cpus"), ("memory", "memory_mb"), (gpu_resource, "gpus")) if key in limits)]
    if not fits:
        raise SpecError("resources", "no single node has %s allocatable at once" % json.dumps(limits, sort_keys=True))


def queue_records(nodes, local_queues, pod_phases=None):
    """Capacity records (_backend.QUEUE_KEYS), from normalized nodes and LocalQueues (what
    inventory() reads, with or without "native"): one per Kueue LocalQueue of the namespace, its
    pending and admitted workloads as pending and running; without one, a record of the whole
    cluster (name None) whose counts are `pod_phases` ({"Pending": n, "Running": n} of the Jobs'
    Pods; None when not read). A Job of Bridge is one Pod, so a record's sizes are the largest
    ready, schedulable node's allocatable; without nodes (not read: a namespaced user may not list
    them) they are unknown and the queues usable."""
    usable_nodes = [node for node in nodes if node["ready"] and node["schedulable"]]
    sizes = dict(
        max_nodes=1,
        cpus_per_node=int(max(node["cpus"] for node in usable_nodes)) if usable_nodes else None,
        memory_mb_per_node=max(node["memory_mb"] for node in usable_nodes) if usable_nodes else None,
        gpus_per_node=max(node["gpus"] for node in usable_nodes) if usable_nodes else None,
        gpu_types=sorted(set(node["labels"][GPU_TYPE_LABEL] for node in usable_nodes
                             if node["gpus"] and node["labels"].get(GPU_TYPE_LABEL))),
    )
    records = []
    for queue in local_queues:
        active = queue.get("active") is not False
        records.append(queue_record(
            name=queue["name"], state="Active" if active else "Inactive",
            usable=active and (bool(usable_nodes) or not nodes), default=queue["name"] == DEFAULT_LOCAL_QUEUE,
            pending=queue.get("pending"), running=queue.get("admitted"), **sizes))
    if not local_queues:
        counts = pod_phases or {}
        records.append(queue_record(
            name=None, state="ready" if usable_nodes or not nodes else "no ready node",
            usable=bool(usable_nodes) or not nodes, default=True,
            pending=None if pod_phases is None else counts.get("Pending", 0),
            running=None if pod_phases is None else counts.get("Running", 0), **sizes))
    return records
