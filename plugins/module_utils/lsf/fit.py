# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""LSF queues and hosts normalized, and whether a job fits them (pure): check_fits refuses a job
the queue would refuse or keep pending forever; queue_records makes each queue's capacity record.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.bridge.hpc.plugins.module_utils._backend import ShapeError, queue_record
from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.answers import integer_of, records, text_of
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.compile import bsub_options, job_slots


MEMORY_UNITS_MB = {"K": 1.0 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0 ** 2}


def _limit(value):
    """The text of a limit; None when there is none ("-", "unlimited" or absent)."""
    text = text_of(value)
    return None if text is None or text.lower() in ("-", "unlimited") else text


def memory_mb(value):
    """MB of a PAC memory amount: "4 G", "4096M", "512 MB"; a bare number is MB."""
    text = _limit(value)
    if text is None:
        return None
    match = re.match(r"^(\d+(?:\.\d+)?)\s*([KMGT]?)B?$", text.upper())
    if not match:
        return None
    return int(float(match.group(1)) * MEMORY_UNITS_MB[match.group(2) or "M"])


def minutes(value):
    """Minutes of a PAC run limit: minutes as a number, "60.0 min", or [hh:]mm."""
    text = _limit(value)
    if text is None:
        return None
    match = re.match(r"^(?:(\d+):)?(\d+(?:\.\d+)?)\s*(min)?$", text.lower())
    if not match:
        return None
    return int(match.group(1) or 0) * 60 + int(float(match.group(2)))


def normalize_queue(native):
    if not isinstance(native, dict):
        raise ShapeError("a queue must be an object")
    name = text_of(native.get("queueName"))
    if name is None:
        raise ShapeError("a queue without queueName")
    status = text_of(native.get("status")) or ""
    lowered = status.lower()
    slots = integer_of(native.get("maxNumJobSlots"))
    return {
        "name": name,
        "status": status,
        "open": "closed" not in lowered,
        "active": "inact" not in lowered,
        "priority": integer_of(native.get("priority")),
        "max_slots": slots if slots and slots > 0 else None,
        "run_limit_minutes": minutes(native.get("runLimit")),
        "memory_limit_mb": memory_mb(native.get("memLimit")),
        "pending": integer_of(native.get("numPend")),
        "running": integer_of(native.get("numRun")),
        "hosts": text_of(native.get("hosts")),
        "description": text_of(native.get("queueDescription")),
        # Not in IBM's field list of GET /ws/queues; read where an Application Center sends it.
        "default": (text_of(native.get("isDefault")) or "").lower() == "true",
        "native": native,
    }


def normalize_host(native):
    if not isinstance(native, dict):
        raise ShapeError("a host must be an object")
    name = text_of(native.get("hostName"))
    if name is None:
        raise ShapeError("a host without hostName")
    static = dict((text_of(item.get("name")), item.get("value"))
                  for item in records(native.get("staticResources") or "", "staticResource", "staticResources"))
    status = text_of(native.get("hostStatus", native.get("status"))) or "unknown"
    return {
        "name": name,
        "status": status.lower(),
        "usable": status.lower() in ("ok", "closed_full", "closed_excl", "closed_busy"),
        "ncpus": integer_of(native.get("maxCpus", static.get("nCpus", static.get("ncpus")))),
        # MXJ (lsb.hosts): job slots, which may differ from CPUs; None when not reported.
        "max_slots": integer_of(native.get("maxJobs")),
        "max_memory_mb": memory_mb(native.get("maxMem", static.get("maxMem"))),
        "model": text_of(static.get("hostModel")),
        # LSF's ngpus resource, which LSF_GPU_AUTOCONFIG sets on hosts with GPUs: a host that
        # reports its static resources without it has none; None when it reports none at all.
        "gpus": integer_of(static.get("ngpus")) or (0 if static else None),
        "type": text_of(static.get("hostType")),
        "native": native,
    }


def check_fits(spec, queues, hosts=()):
    """Refuse a job the queue would refuse or keep pending forever: unknown or closed queue, more
    slots, minutes or memory than its limits, or a shape no host of the queue can hold."""
    if not queues:
        check_hosts(spec, hosts)
        return
    by_name = dict((q["name"], q) for q in queues)
    options = dict((option, value) for option, value, _field in bsub_options(spec))
    resources = spec["resources"]
    wanted = options.get("-q")
    if wanted:
        if wanted not in by_name:
            raise SpecError("queue", "'%s' is not a queue of this cluster; existing queues: %s" % (
                wanted, ", ".join(sorted(by_name))))
        candidates = [by_name[wanted]]
    else:
        # PAC does not say which queue is the default; a job that fits no open queue fits none.
        candidates = [q for q in queues if q["open"]] or queues
    slots = integer_of(options.get("-n")) or 1
    problems = [_queue_misfit(queue, resources, slots) or _hosts_misfit(spec, _queue_hosts(queue, hosts))
                for queue in candidates]
    if all(problems):
        raise SpecError(*problems[0])


def check_hosts(spec, hosts):
    problem = _hosts_misfit(spec, hosts)
    if problem:
        raise SpecError(*problem)


def _queue_hosts(queue, hosts):
    """The hosts a queue dispatches to: its HOSTS list when it names hosts this cluster reported,
    else all of them (HOSTS may be "all" or name host groups, which PAC does not expand)."""
    names = set((queue["hosts"] or "").replace(",", " ").split())
    named = [host for host in hosts if host["name"] in names]
    return named or list(hosts)


def _hosts_misfit(spec, hosts):
    """(field, reason) when no host, down or up, could ever hold the job: more slots on one host
    than the largest has, more slots than all have, or more memory per host than the largest."""
    sized = [host for host in hosts if host["max_slots"] or host["ncpus"]]
    if not sized:
        return None
    resources = spec["resources"]
    slots, span = job_slots(resources)
    capacity = [host["max_slots"] or host["ncpus"] for host in sized]
    if span and slots:
        per_host = slots if span == "span[hosts=1]" else int(span[len("span[ptile="):-1])
        field = "resources.cpus_per_task" if span == "span[hosts=1]" else "resources.tasks_per_node"
        if per_host > max(capacity):
            return (field, "%d slots on one host, but the largest host has %d" % (per_host, max(capacity)))
    if slots and slots > sum(capacity):
        return ("resources.tasks", "%d slots (tasks x cpus_per_task), but all hosts together have %d" % (
            slots, sum(capacity)))
    memory = [host["max_memory_mb"] for host in hosts if host["max_memory_mb"]]
    # rusage[mem] reserves per host, so a host must have it all.
    if resources["memory_mb"] and memory and resources["memory_mb"] > max(memory):
        return ("resources.memory", "%d MB per host, but the largest host has %d MB" % (
            resources["memory_mb"], max(memory)))
    return None


def _queue_misfit(queue, resources, slots):
    name = queue["name"]
    if not queue["open"]:
        return ("queue", "queue '%s' is closed (%s): LSF refuses new jobs there" % (name, queue["status"]))
    limit = resources["time_limit_minutes"]
    if limit and queue["run_limit_minutes"] and limit > queue["run_limit_minutes"]:
        return ("resources.time_limit", "%d minutes exceed the run limit of queue '%s': %d minutes" % (
            limit, name, queue["run_limit_minutes"]))
    if queue["max_slots"] and slots > queue["max_slots"]:
        return ("resources.tasks", "%d slots (tasks x cpus_per_task) exceed the %d of queue '%s'" % (
            slots, queue["max_slots"], name))
    memory = resources["memory_mb"]
    if memory and queue["memory_limit_mb"] and memory > queue["memory_limit_mb"]:
        return ("resources.memory", "%d MB exceed the memory limit of queue '%s': %d MB" % (
            memory, name, queue["memory_limit_mb"]))
    return None


def queue_records(queues, hosts):
    """The capacity record (_backend.QUEUE_KEYS) of each queue, from normalized queues and hosts
    (what inventory() reads, with or without "native"). A queue's hosts are its HOSTS list's, or
    every host where that names none this cluster reported; slots stand for CPUs, as LSF counts
    them; pending and running are the queue's own counts (numPend, numRun)."""
    records = []
    for queue in queues:
        usable_hosts = [host for host in _queue_hosts(queue, hosts) if host["usable"]]
        slots = [host["max_slots"] or host["ncpus"] for host in usable_hosts if host["max_slots"] or host["ncpus"]]
        memories = [host["max_memory_mb"] for host in usable_hosts if host["max_memory_mb"]]
        memory = max(memories) if memories else None
        if queue["memory_limit_mb"]:
            memory = min(memory or queue["memory_limit_mb"], queue["memory_limit_mb"])
        gpus = [host.get("gpus") for host in usable_hosts if host.get("gpus") is not None]
        records.append(queue_record(
            name=queue["name"],
            state=queue["status"],
            usable=queue["open"] and queue["active"] and (bool(usable_hosts) or not hosts),
            default=bool(queue.get("default")),
            max_time_minutes=queue["run_limit_minutes"],
            max_nodes=len(usable_hosts) if usable_hosts else None,
            cpus_per_node=min(max(slots), queue["max_slots"] or max(slots)) if slots else queue["max_slots"],
            memory_mb_per_node=memory,
            gpus_per_node=max(gpus) if gpus else None,
            pending=queue["pending"],
            running=queue["running"],
        ))
    return records
