# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a job fits: the one placement decision of modules and the controller. Internal to this collection.

Pure: it reads capacity records (module_utils/<backend>/fit.py, the backend objects' status) and
never calls a backend.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec

POLICIES = ("FirstFit", "LeastQueued")


def misfit(spec, backend_type, queue):
    """Why a normalized job spec cannot run in `queue` (a capacity record) of a backend of
    `backend_type`; None when it fits."""
    name = queue.get("name")
    where = "'%s'" % name if name is not None else "the %s backend" % backend_type
    if not queue.get("usable"):
        return "queue %s is %s and takes no jobs now" % (where, queue.get("state") or "not usable")
    resources = spec.get("resources") or {}
    checks = (
        ("resources.nodes", resources.get("nodes"), queue.get("max_nodes"), "%s nodes requested; %s allows at most %s"),
        ("resources.gpus", resources.get("gpus"), queue.get("gpus_per_node"),
         "%s GPUs per node requested; the nodes of %s have at most %s"),
        ("resources.memory", resources.get("memory_mb"), queue.get("memory_mb_per_node"),
         "%s MiB per node requested; the nodes of %s have at most %s MiB"),
        ("resources.time_limit", resources.get("time_limit_minutes"), queue.get("max_time_minutes"),
         "%s minutes requested; %s allows at most %s"),
    )
    for field, wanted, offered, text in checks:
        if wanted is not None and offered is not None and wanted > offered:
            return "%s: %s" % (field, text % (wanted, where, offered))
    cpus = (resources.get("tasks_per_node") or 1) * (resources.get("cpus_per_task") or 1)
    if queue.get("cpus_per_node") is not None and cpus > queue["cpus_per_node"]:
        return "resources.cpus_per_task: %s CPUs per node requested; the nodes of %s have at most %s" % (
            cpus, where, queue["cpus_per_node"])
    gpu_type = resources.get("gpu_type")
    if gpu_type and queue.get("gpu_types") and gpu_type not in queue["gpu_types"]:
        return "resources.gpu_type: %s requested; %s offers %s" % (gpu_type, where, ", ".join(queue["gpu_types"]))
    return None


def place(params, candidates, policy="FirstFit"):
    """The choice among `candidates` for the job spec `params` (module-option shape), with every
    reason for what was not chosen (see the design's contract)."""
    from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS

    if policy not in POLICIES:
        raise ValueError("policy must be one of %s" % ", ".join(POLICIES))
    rejected, waiting, fitting = [], [], []
    for order, candidate in enumerate(candidates):
        name = candidate["name"]
        if candidate.get("ready") is None:
            waiting.append(name)
            continue
        if not candidate.get("ready"):
            rejected.append({"backend": name, "queue": None, "reason": candidate.get("reason") or "not ready"})
            continue
        backend = BACKENDS.get(candidate.get("type"))
        if backend is None:
            rejected.append({"backend": name, "queue": None, "reason": "unknown backend type %r" % candidate.get("type")})
            continue
        try:
            spec = normalize_spec(params, backend)
        except SpecError as exc:
            rejected.append({"backend": name, "queue": None, "reason": str(exc)})
            continue
        queues = list(candidate.get("queues") or [])
        queues.sort(key=lambda q: not q.get("default"))       # stable: the default first, the rest in order
        allowed = candidate.get("allowed_queues")
        for queue in queues:
            qname = queue.get("name")
            if spec.get("queue") and qname is not None and qname != spec["queue"]:
                continue
            if allowed is not None and qname not in allowed:
                continue
            why = misfit(spec, candidate["type"], queue)
            if why:
                rejected.append({"backend": name, "queue": qname, "reason": why})
            else:
                fitting.append((order, candidate, queue))
    result = {"backend": None, "type": None, "queue": None, "policy": policy, "rejected": rejected, "waiting": waiting}
    if not fitting:
        return result
    if policy == "LeastQueued":
        fitting.sort(key=lambda item: (item[2].get("pending") or 0, item[2].get("running") or 0, item[0]))
    _order, candidate, queue = fitting[0]
    result.update(backend=candidate["name"], type=candidate["type"], queue=queue.get("name"))
    return result
