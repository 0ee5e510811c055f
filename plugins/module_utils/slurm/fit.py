# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm partitions and nodes normalized, and whether a job fits them (pure): check_fits refuses,
before the submit, a job Slurm would accept and never start; queue_records makes the capacity
record of each partition.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.bridge.hpc.plugins.module_utils._backend import count_phases, queue_record
from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._spec import format_minutes
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.states import (
    at_path,
    number,
    required_name,
    state_list,
    text,
)


NODE_UNUSABLE = ("DOWN", "DRAIN", "DRAINED", "DRAINING", "NOT_RESPONDING", "FUTURE", "FAIL", "UNKNOWN")


def normalize_partition(native):
    """A partition of any REST version: v0.0.38 flat keys or v0.0.39+ nested objects."""
    nested = isinstance(native.get("nodes"), dict)
    if nested:
        max_time = at_path(native, "maximums", "time")
        default_time = at_path(native, "defaults", "time")
        state = state_list(at_path(native, "partition", "state"))
        node_list = at_path(native, "nodes", "configured")
        total_nodes = number(at_path(native, "nodes", "total"))
        total_cpus = number(at_path(native, "cpus", "total"))
        max_nodes = at_path(native, "maximums", "nodes")
        min_nodes = at_path(native, "minimums", "nodes")
        max_memory_per_node = at_path(native, "maximums", "partition_memory_per_node")
        default_memory_per_cpu = at_path(native, "defaults", "partition_memory_per_cpu")
        if default_memory_per_cpu is None:
            default_memory_per_cpu = at_path(native, "defaults", "memory_per_cpu")
        default = _partition_default_flag(native)
        tres = at_path(native, "tres", "configured")
    else:
        max_time = native.get("max_time_limit")
        default_time = native.get("default_time_limit")
        state = state_list(native.get("state"))
        node_list = native.get("nodes")
        total_nodes = number(native.get("total_nodes"))
        total_cpus = number(native.get("total_cpus"))
        max_nodes = native.get("maximum_nodes_per_job")
        min_nodes = native.get("min nodes per job", native.get("minimum_nodes_per_job"))
        max_memory_per_node = native.get("maximum_memory_per_node")
        default_memory_per_cpu = native.get("default_memory_per_cpu")
        default = "default" in [str(f).lower() for f in native.get("flags") or []]
        tres = native.get("tres")
    max_time_minutes = number(max_time)
    return {
        "name": required_name(native),
        "state": (state[0] if state else "UNKNOWN").upper(),
        "default": default,
        "nodes": text(node_list),
        "total_nodes": total_nodes,
        "total_cpus": total_cpus,
        "max_time_minutes": max_time_minutes,
        "max_time": format_minutes(max_time_minutes),
        "default_time_minutes": number(default_time),
        "default_time": format_minutes(number(default_time)) if number(default_time) else None,
        "max_nodes_per_job": number(max_nodes),
        "min_nodes_per_job": number(min_nodes),
        "max_memory_per_node_mb": number(max_memory_per_node) or None,  # MaxMemPerNode=0 means UNLIMITED
        "default_memory_per_cpu_mb": number(default_memory_per_cpu),
        "tres": text(tres),
        "native": native,
    }


def _partition_default_flag(native):
    # The default flag shows up in v0.0.45 only (as partition.state or flags); earlier nested
    # versions do not say, which normalize_partition reports as False.
    flags = native.get("flags") or []
    if isinstance(flags, list) and "DEFAULT" in [str(f).upper() for f in flags]:
        return True
    return "DEFAULT" in state_list(at_path(native, "partition", "state"))


def normalize_node(native):
    states = state_list(native.get("state"))
    flags = state_list(native.get("state_flags"))
    all_states = [s.upper() for s in states + flags]
    features = native.get("features")
    if isinstance(features, str):
        features = [f for f in features.split(",") if f]
    cpus = number(native.get("cpus"))
    alloc_cpus = number(native.get("alloc_cpus")) or 0
    real_memory = number(native.get("real_memory"))
    alloc_memory = number(native.get("alloc_memory")) or 0
    gres = text(native.get("gres"))
    return {
        "name": required_name(native),
        "state": all_states[0].lower() if all_states else "unknown",
        "states": [s.lower() for s in all_states],
        "usable": not any(s in NODE_UNUSABLE for s in all_states),
        "cpus": cpus,
        "alloc_cpus": alloc_cpus,
        "free_cpus": None if cpus is None else max(cpus - alloc_cpus, 0),
        "memory_mb": real_memory,
        "alloc_memory_mb": alloc_memory,
        "free_memory_mb": None if real_memory is None else max(real_memory - alloc_memory, 0),
        "gres": gres,
        "gpus": gpu_count(gres),
        "features": list(features or []),
        "partitions": list(native.get("partitions") or []),
        "reason": text(native.get("reason")),
        "native": native,
    }


def gpu_count(gres):
    """GPUs in a gres string such as 'gpu:a100:4(S:0-1),gpu:2'."""
    total = 0
    for item in (gres or "").split(","):
        match = re.match(r"^gpu(?::[^:(]+)?:(\d+)", item.strip())
        if match:
            total += int(match.group(1))
    return total


def check_fits(spec, partitions, nodes):
    """Refuse, before submitting, a job Slurm would accept but never start on these partitions.

    Raises SpecError naming the field and what the cluster offers.
    """
    if not partitions:
        return
    by_name = dict((p["name"], p) for p in partitions)
    names = ", ".join(sorted(by_name))
    requested = spec["queue"]
    if requested:
        # Slurm accepts a comma list and runs the job in the first partition that fits.
        wanted = [name.strip() for name in requested.split(",") if name.strip()]
        unknown = [name for name in wanted if name not in by_name]
        if unknown:
            raise SpecError("queue", "'%s' is not a partition of this cluster; existing partitions: %s" % (
                ",".join(unknown), names))
        candidates = [by_name[name] for name in wanted]
    else:
        # v0.0.40-v0.0.44 do not say which partition is the default; a request that fits none
        # of them cannot fit the default either.
        candidates = [p for p in partitions if p["default"]] or partitions
    problems = []
    for partition in candidates:
        problem = _partition_misfit(spec, partition, nodes)
        if problem is None:
            return
        problems.append(problem)
    field, reason = problems[0]
    raise SpecError(field, reason)


def _partition_misfit(spec, partition, nodes):
    resources = spec["resources"]
    name = partition["name"]
    limit = resources["time_limit_minutes"]
    if limit and partition["max_time_minutes"] and limit > partition["max_time_minutes"]:
        return ("resources.time_limit", "%d minutes exceeds the maximum of partition '%s': %d minutes (%s)" % (
            limit, name, partition["max_time_minutes"], partition["max_time"]))
    wanted_nodes = resources["nodes"] or 1
    member_nodes = [n for n in nodes if name in n["partitions"]]
    max_nodes = partition["max_nodes_per_job"]
    if max_nodes is None:
        max_nodes = partition["total_nodes"]
    if max_nodes and wanted_nodes > max_nodes:
        return ("resources.nodes", "%d nodes exceed what partition '%s' allows per job: %d" % (
            wanted_nodes, name, max_nodes))
    if not member_nodes:
        return None
    biggest_memory = max(n["memory_mb"] or 0 for n in member_nodes)
    biggest_cpus = max(n["cpus"] or 0 for n in member_nodes)
    per_node_tasks = resources["tasks_per_node"] or (
        -(-(resources["tasks"] or 1) // wanted_nodes))
    cpus_per_node = per_node_tasks * (resources["cpus_per_task"] or 1)
    if biggest_cpus and cpus_per_node > biggest_cpus:
        return ("resources.cpus_per_task", "%d CPUs per node requested (tasks x cpus_per_task) but the largest node of partition '%s' has %d" % (
            cpus_per_node, name, biggest_cpus))
    memory = resources["memory_mb"]
    if resources["memory_per_cpu_mb"]:
        memory = resources["memory_per_cpu_mb"] * cpus_per_node
    if memory and biggest_memory and memory > biggest_memory:
        return ("resources.memory", "%d MiB per node requested but the largest node of partition '%s' has %d MiB" % (
            memory, name, biggest_memory))
    if resources["gpus"]:
        most_gpus = max(n["gpus"] for n in member_nodes)
        if resources["gpus"] > most_gpus:
            return ("resources.gpus", "%d GPUs per node requested but the nodes of partition '%s' have at most %d" % (
                resources["gpus"], name, most_gpus))
    if spec["constraints"]:
        features = set()
        for node in member_nodes:
            features.update(node["features"])
        plain = re.split(r"[&|,\[\]()*!]", spec["constraints"])
        missing = sorted(f for f in (p.strip() for p in plain) if f and f not in features and not f.isdigit())
        if missing:
            return ("constraints", "feature(s) %s not offered by partition '%s'; its features: %s" % (
                ", ".join(missing), name, ", ".join(sorted(features)) or "none"))
    return None


def gpu_types(gres):
    """GPU types in a gres string: 'gpu:a100:4(S:0-1),gpu:2' -> ['a100']."""
    types = []
    for item in (gres or "").split(","):
        match = re.match(r"^gpu:([^:(]+):\d+", item.strip())
        if match and match.group(1) not in types:
            types.append(match.group(1))
    return types


def job_partitions(job):
    """The partitions a job waits or runs in: a pending job may name several ("debug,batch")."""
    return [name for name in (job.get("partition") or "").split(",") if name]


def queue_records(partitions, nodes, jobs=None):
    """The capacity record (_backend.QUEUE_KEYS) of each partition, from normalized partitions and
    nodes (what inventory() reads, with or without "native") and, where given, the normalized jobs
    of slurmctld's list, which the pending and running counts come from (None without them)."""
    counts = None if jobs is None else count_phases(jobs, job_partitions)
    records = []
    for partition in partitions:
        name = partition["name"]
        usable_nodes = [n for n in nodes if name in (n.get("partitions") or []) and n.get("usable", True)]
        memories = [n["memory_mb"] for n in usable_nodes if n.get("memory_mb")]
        memory = max(memories) if memories else None
        if memory and partition.get("max_memory_per_node_mb"):
            memory = min(memory, partition["max_memory_per_node_mb"])
        types, features = [], []
        for node in usable_nodes:
            types.extend(t for t in gpu_types(node.get("gres")) if t not in types)
            features.extend(f for f in node.get("features") or [] if f not in features)
        max_nodes = partition.get("max_nodes_per_job")
        if max_nodes is None:
            max_nodes = len(usable_nodes) if usable_nodes else partition.get("total_nodes")
        counted = (counts or {}).get(name, {"pending": 0, "running": 0})
        records.append(queue_record(
            name=name,
            state=partition["state"],
            usable=partition["state"] == "UP" and bool(usable_nodes),
            default=bool(partition["default"]),
            max_time_minutes=partition["max_time_minutes"],
            max_nodes=max_nodes,
            cpus_per_node=max([n["cpus"] for n in usable_nodes if n.get("cpus")] or [None]),
            memory_mb_per_node=memory,
            gpus_per_node=max([n.get("gpus") or 0 for n in usable_nodes]) if usable_nodes else None,
            gpu_types=sorted(types),
            features=sorted(features),
            pending=None if counts is None else counted["pending"],
            running=None if counts is None else counted["running"],
        ))
    return records
