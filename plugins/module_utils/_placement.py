# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Placement: which backend and queue of several candidates a job goes to, and why not the others.
Internal to this collection.

Pure: it reads the candidates' capacity records (_backend.QUEUE_KEYS, as capacity() and the
inventory plugins' bridge_capacity give them), never a service. The BridgeJob controller and the
bridge.hpc.placement module both call place(); nothing else decides placement.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.bridge.hpc.plugins.module_utils._errors import BridgeError, SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec

POLICIES = ("FirstFit", "LeastQueued")
# The words of Slurm's constraint syntax between feature names: a&b, a|b, [a*2&b], !a.
CONSTRAINT_OPERATORS = re.compile(r"[&|,\[\]()*!]")


def _where(backend_type, queue):
    """A queue as reasons name it: "'debug'", or "the Ray cluster" for a backend without queues."""
    if queue.get("name") is not None:
        return "'%s'" % queue["name"]
    backend = BACKENDS.get(backend_type)
    return "the %s cluster" % (backend.TITLE if backend else backend_type)


def _per_node(resources):
    """(CPUs one node of the job needs, the field that asks for them), as Slurm counts them: the
    tasks on one node (tasks_per_node, else tasks spread over the nodes) times cpus_per_task."""
    nodes = resources["nodes"] or 1
    tasks = resources["tasks_per_node"] or -(-(resources["tasks"] or 1) // nodes)
    cpus = tasks * (resources["cpus_per_task"] or 1)
    if resources["cpus_per_task"]:
        field = "resources.cpus_per_task"
    elif resources["tasks_per_node"]:
        field = "resources.tasks_per_node"
    else:
        field = "resources.tasks"
    return cpus, field


def _widest_circuit(spec):
    """(qubits, field) of the widest circuit of a quantum job's PUBs, or None when no width can be
    read here (the service checks it then)."""
    # Imported here: only quantum jobs have circuits.
    from ansible_collections.bridge.hpc.plugins.module_utils.quantum.compile import pub_circuits
    from ansible_collections.bridge.hpc.plugins.module_utils.quantum.qasm import circuit_shape
    try:
        widths = [(circuit_shape(text)["qubits"], field) for field, text in pub_circuits(spec)]
    except (BridgeError, ValueError, TypeError, KeyError, AttributeError):
        return None
    widths = [width for width in widths if width[0] is not None]
    return max(widths) if widths else None


def misfit(spec, backend_type, queue):
    """Why a NORMALIZED job spec (as _spec.normalize_spec gives) cannot run in `queue` (a
    capacity record) of a backend of `backend_type`; None when it fits. The reason names the
    spec field and what the queue offers, e.g.
    "resources.gpus: 2 GPUs per node requested; the nodes of 'debug' have at most 0".

    A limit the record does not know (None) lets the job pass: the manager decides then."""
    resources = spec["resources"]
    where = _where(backend_type, queue)
    if not queue.get("usable"):
        return "queue: %s takes no jobs now (%s)" % (where, queue.get("state") or "state unknown")
    limit, most = resources["time_limit_minutes"], queue.get("max_time_minutes")
    if limit and most is not None and limit > most:
        return "resources.time_limit: %d minutes requested; %s allows at most %d" % (limit, where, most)
    nodes, most = resources["nodes"] or 1, queue.get("max_nodes")
    if most is not None and nodes > most:
        return "resources.nodes: %d nodes requested; %s allows at most %d per job" % (nodes, where, most)
    cpus, field = _per_node(resources)
    most = queue.get("cpus_per_node")
    if most is not None and cpus > most:
        return "%s: %d CPUs per node requested (tasks per node x cpus_per_task); the largest node of %s has %d" % (
            field, cpus, where, most)
    memory, field = resources["memory_mb"], "resources.memory"
    if resources["memory_per_cpu_mb"]:
        memory, field = resources["memory_per_cpu_mb"] * cpus, "resources.memory_per_cpu"
    most = queue.get("memory_mb_per_node")
    if memory and most is not None and memory > most:
        return "%s: %d MiB per node requested; the largest node of %s has %d MiB" % (field, memory, where, most)
    gpus, most = resources["gpus"], queue.get("gpus_per_node")
    if gpus and most is not None and gpus > most:
        return "resources.gpus: %d GPUs per node requested; the nodes of %s have at most %d" % (gpus, where, most)
    offered = queue.get("gpu_types") or []
    wanted = resources["gpu_type"]
    if wanted and offered and wanted.lower() not in [kind.lower() for kind in offered]:
        return "resources.gpu_type: '%s' requested; %s offers %s" % (wanted, where, ", ".join(offered))
    if spec.get("constraints"):
        features = set(queue.get("features") or [])
        names = (name.strip() for name in CONSTRAINT_OPERATORS.split(spec["constraints"]))
        missing = sorted(set(name for name in names if name and not name.isdigit() and name not in features))
        if missing:
            return "constraints: feature(s) %s not offered by %s; its features: %s" % (
                ", ".join(missing), where, ", ".join(sorted(features)) or "none")
    qubits = queue.get("qubits")
    if qubits is not None and backend_type == "quantum":
        widest = _widest_circuit(spec)
        if widest is not None and widest[0] > qubits:
            return "%s: the circuit is %d qubits wide; %s has %d qubits" % (widest[1], widest[0], where, qubits)
    return None


def _in_order(queues):
    """A candidate's queues as FirstFit tries them: its default queue first, then the others."""
    return [queue for queue in queues if queue.get("default")] + [queue for queue in queues if not queue.get("default")]


def _queue_names(queues):
    return ", ".join(sorted("%s" % queue.get("name") for queue in queues)) or "none"


def _fitting(params, candidate, rejected, normalized):
    """The queues of one ready candidate the job fits, in FirstFit order; what does not fit goes to
    `rejected` with its reason. `normalized` keeps the spec normalized per backend type (or the
    SpecError of that type): candidates of one type share it."""
    name, backend_type = candidate["name"], candidate["type"]

    def reject(queue, reason):
        rejected.append({"backend": name, "queue": queue, "reason": reason})

    backend = BACKENDS.get(backend_type)
    if backend is None:
        reject(None, "backend: '%s' is not a backend; allowed: %s" % (backend_type, ", ".join(sorted(BACKENDS))))
        return []
    if backend_type not in normalized:
        try:
            normalized[backend_type] = normalize_spec(params, backend)
        except SpecError as exc:
            normalized[backend_type] = exc
    spec = normalized[backend_type]
    if isinstance(spec, SpecError):
        # A field this backend refuses (the field table), or a script it cannot run.
        reject(None, str(spec))
        return []
    queues = list(candidate.get("queues") or [])
    allowed = candidate.get("allowed_queues")
    if allowed is not None:
        queues = [queue for queue in queues if queue.get("name") in allowed]
        if not queues:
            reject(None, "queue: none of the allowed queues %s is a queue of %s; its queues: %s" % (
                ", ".join(allowed) or "(none)", name, _queue_names(candidate.get("queues") or [])))
            return []
    if spec["queue"]:
        # Slurm takes a comma list of partitions and runs the job in the first that fits.
        wanted = [name.strip() for name in spec["queue"].split(",")] if backend_type == "slurm" else [spec["queue"]]
        named = [queue for name in wanted for queue in queues if queue.get("name") == name]
        if not named:
            reject(spec["queue"], "queue: '%s' is not a queue %s offers%s; its queues: %s" % (
                spec["queue"], name, " here" if allowed is not None else "", _queue_names(queues)))
            return []
        queues = named if backend_type == "slurm" else _in_order(named)
    else:
        queues = _in_order(queues)
    if not queues:
        reject(None, "queue: %s offers no queue" % name)
        return []
    fits = []
    for queue in queues:
        reason = misfit(spec, backend_type, queue)
        if reason is None:
            fits.append(queue)
        else:
            reject(queue.get("name"), reason)
    return fits


def place(params, candidates, policy="FirstFit"):
    """params: the job spec in module-option shape (what `job`'s options / the controller's
    job_params give). candidates: ordered list of
        {"name": str,            # how reasons and the result name the backend ("ClusterBridgeBackend/slurm-a")
         "type": "slurm",        # registry name
         "ready": bool or None,  # None = never probed
         "reason": str or None,  # why not ready
         "queues": [QUEUE...],   # capacity records
         "allowed_queues": [str] or None}   # candidate queues the caller restricts to
    Per candidate: not ready -> rejected; spec normalized for its type (SpecError -> rejected with
    the error text: a field the backend refuses, per the field table); spec `queue` set -> only that
    queue; each queue: misfit -> rejected.
    Returns {"backend": name or None, "type": t or None, "queue": queue name or None,
             "policy": policy, "rejected": [{"backend": name, "queue": q or None, "reason": str}],
             "waiting": [names of candidates never probed]}.
    FirstFit: first candidate in order, its default queue first, then the others in order.
    LeastQueued: among all fitting (candidate, queue), fewest pending (None counts as 0), then
    fewest running, then candidate order.

    No choice is made while a candidate never probed could change it (FirstFit: one before the
    first that fits; LeastQueued: any): then backend is None and `waiting` names them, whereas
    backend None with `waiting` empty means the job fits nowhere. SpecError (field "policy") for
    an unknown policy.
    """
    if policy not in POLICIES:
        raise SpecError("policy", "'%s' is not a placement policy; allowed: %s" % (policy, ", ".join(POLICIES)))
    rejected, waiting, fits, normalized = [], [], [], {}
    first_waiting = None
    for index, candidate in enumerate(candidates):
        if candidate.get("ready") is None:
            waiting.append(candidate["name"])
            first_waiting = index if first_waiting is None else first_waiting
            continue
        if not candidate["ready"]:
            rejected.append({"backend": candidate["name"], "queue": None,
                             "reason": "not ready: %s" % (candidate.get("reason") or "no reason given")})
            continue
        fits.extend((index, order, candidate, queue) for order, queue in enumerate(_fitting(params, candidate, rejected, normalized)))
        if fits and policy == "FirstFit":
            break
    result = {"backend": None, "type": None, "queue": None, "policy": policy, "rejected": rejected, "waiting": waiting}
    if not fits or (waiting and policy == "LeastQueued"):
        return result
    if policy == "FirstFit":
        chosen = fits[0]
    else:
        chosen = min(fits, key=lambda fit: (fit[3].get("pending") or 0, fit[3].get("running") or 0, fit[0], fit[1]))
    if first_waiting is not None and first_waiting < chosen[0]:
        return result
    result.update(backend=chosen[2]["name"], type=chosen[2]["type"], queue=chosen[3].get("name"))
    return result
