# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ray nodes and their resources normalized, and whether a driver fits them (pure): check_fits
refuses a driver no alive node can ever host, which Ray would leave PENDING for 15 minutes;
queue_records makes the capacity record of the cluster.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.bridge.hpc.plugins.module_utils._backend import count_phases, queue_record
from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError

MIB = 1024 * 1024


def normalize_node(native):
    """A NodeState of /api/v0/nodes, with used amounts from /api/cluster_status when known."""
    total = dict(native.get("resources_total") or {})
    custom = dict((k, v) for k, v in total.items()
                  if k not in ("CPU", "GPU", "memory", "object_store_memory") and not k.startswith("node:"))
    labels = native.get("labels") or {}
    return {
        "node_id": native.get("node_id"),
        "name": native.get("node_name") or native.get("node_ip"),
        "ip": native.get("node_ip"),
        "head": bool(native.get("is_head_node")),
        "state": (native.get("state") or "").lower(),
        "cpus": total.get("CPU", 0),
        "gpus": total.get("GPU", 0),
        "gpu_type": labels.get("ray.io/accelerator-type") or next(
            (k.split(":", 1)[1] for k in custom if k.startswith("accelerator_type:")), None),
        "memory_bytes": int(total.get("memory", 0)),
        "object_store_memory_bytes": int(total.get("object_store_memory", 0)),
        "custom_resources": custom,
        "labels": labels,
        "native": native,
    }


def check_fits(request, nodes):
    """Refuse a driver no alive node can ever host: Ray would leave it PENDING for 15 minutes."""
    if not nodes:
        return
    wanted = {"CPU": request.get("entrypoint_num_cpus"), "GPU": request.get("entrypoint_num_gpus"),
              "memory": request.get("entrypoint_memory")}
    wanted.update(request.get("entrypoint_resources") or {})
    fields = {"CPU": "resources.cpus_per_task", "GPU": "resources.gpus", "memory": "resources.memory"}
    for node in nodes:
        totals = dict(node["custom_resources"], CPU=node["cpus"], GPU=node["gpus"], memory=node["memory_bytes"])
        if all(not amount or totals.get(name, 0) >= amount for name, amount in wanted.items()):
            return
    for name, amount in wanted.items():
        if not amount:
            continue
        best = max(dict(n["custom_resources"], CPU=n["cpus"], GPU=n["gpus"], memory=n["memory_bytes"]).get(name, 0)
                   for n in nodes)
        if best < amount:
            field = fields.get(name, "backend_options.ray.entrypoint_resources.%s" % name)
            raise SpecError(field, "%s %s requested but the largest alive Ray node has %s" % (amount, name, best))
    raise SpecError("resources", "no single alive Ray node has all of %s" % ", ".join(
        "%s=%s" % (k, v) for k, v in sorted(wanted.items()) if v))


def used_and_total(usage, nodes):
    """{resource: {used, total}} of a load report's {name: [used, total]}.

    The dashboard camelCases every key of this report, custom resource names included
    (bridge_test -> bridgeTest); the nodes' totals give the real names back.
    """
    names = {}
    for node in nodes:
        for name in node["native"].get("resources_total") or {}:
            names[camel_case(name)] = name
    names.update(objectStoreMemory="object_store_memory")
    return dict((names.get(key, key), {"used": pair[0], "total": pair[1]})
                for key, pair in (usage or {}).items() if isinstance(pair, list) and len(pair) == 2)


def camel_case(name):
    """The dashboard's key conversion (to_camel_case): parts after the first go through str.title()."""
    parts = name.split("_")
    return parts[0] + "".join(part.title() for part in parts[1:])


def queue_records(nodes, jobs=None):
    """The one capacity record (_backend.QUEUE_KEYS) of a Ray cluster, which has no queues (name
    None), from normalized nodes (what inventory() reads, with or without "native") and, where
    given, the normalized jobs of the job list for the pending and running counts. A job is one
    driver process, so the sizes are the largest alive node's."""
    alive = [node for node in nodes if node["state"] == "alive"]
    counts = None if jobs is None else count_phases(jobs, lambda job: [None]).get(None, {"pending": 0, "running": 0})
    return [queue_record(
        name=None,
        state="ready" if alive else "no alive node",
        usable=bool(alive),
        default=True,
        max_nodes=1,
        cpus_per_node=int(max(node["cpus"] for node in alive)) if alive else None,
        memory_mb_per_node=max(node["memory_bytes"] for node in alive) // MIB if alive else None,
        gpus_per_node=int(max(node["gpus"] for node in alive)) if alive else None,
        gpu_types=sorted(set(node["gpu_type"] for node in alive if node["gpus"] and node.get("gpu_type"))),
        pending=None if counts is None else counts["pending"],
        running=None if counts is None else counts["running"],
    )]
