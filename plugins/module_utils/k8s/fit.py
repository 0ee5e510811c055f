# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Nodes and Kueue queues normalized, with Kubernetes quantities read, and whether a Job's Pod fits
a node (pure): check_fits refuses a Pod no node could ever hold.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils.k8s.compile import DEFAULT_GPU_RESOURCE


def normalize_local_queue(native):
    status = native.get("status") or {}
    return {"name": native["metadata"]["name"], "namespace": native["metadata"].get("namespace"),
            "cluster_queue": (native.get("spec") or {}).get("clusterQueue"),
            "pending": status.get("pendingWorkloads"), "admitted": status.get("admittedWorkloads"),
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
