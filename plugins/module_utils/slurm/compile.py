# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Slurm submit body of a job spec (pure): what modules return as `rendered`, for each REST
version (v0.0.38's top-level script and environment object, v0.0.39+'s {set, number} numbers).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._spec import effective_environment


# REST versions of Slurm 22.05 and older: flat numbers, the script beside the job.
LEGACY_VERSIONS = ("v0.0.36", "v0.0.37", "v0.0.38")
# REST versions whose job takes `exclusive` as a list of flags; from v0.0.42 on it is `shared`.
EXCLUSIVE_FLAG_VERSIONS = ("v0.0.39", "v0.0.40", "v0.0.41")
# A job's comment: this prefix and its identity.
TAG_PREFIX = "bridge:"


# srun options of $(LAUNCHER), each given when the spec sets its resource.
SRUN_OPTIONS = (("-n %d", "tasks"), ("-N %d", "nodes"), ("--ntasks-per-node=%d", "tasks_per_node"),
                ("-c %d", "cpus_per_task"))


def gpu_request(spec, legacy):
    resources = spec["resources"]
    if not resources["gpus"]:
        return None
    kind = "gpu:%s" % resources["gpu_type"] if resources["gpu_type"] else "gpu"
    if legacy:
        return "%s:%d" % (kind, resources["gpus"])
    return "gres/%s:%d" % (kind, resources["gpus"])


def exclusive_request(api_version):
    """sbatch --exclusive (whole nodes: no other job shares them) in the words of a REST version."""
    if api_version in LEGACY_VERSIONS:
        return {"exclusive": "exclusive"}
    if api_version in EXCLUSIVE_FLAG_VERSIONS:
        return {"exclusive": ["true"]}
    return {"shared": ["none"]}


def compile_job(spec, api_version):
    """The submit body for one REST version; it is what modules return as `rendered`."""
    legacy = api_version in LEGACY_VERSIONS
    resources = spec["resources"]
    environment = effective_environment(spec)
    job = {
        "name": spec["name"],
        "comment": TAG_PREFIX + spec["identity"],
        "current_working_directory": spec["working_directory"] or "/tmp",
        "standard_output": spec["stdout"],
        "standard_error": spec["stderr"],
        "partition": spec["queue"],
        "account": spec["account"],
        "qos": spec["qos"],
        "constraints": spec["constraints"],
        "tasks": resources["tasks"],
        "tasks_per_node": resources["tasks_per_node"],
        "cpus_per_task": resources["cpus_per_task"],
    }
    if legacy:
        job.update({
            "environment": environment,
            "nodes": resources["nodes"],
            "memory_per_node": resources["memory_mb"],
            "memory_per_cpu": resources["memory_per_cpu_mb"],
            "time_limit": resources["time_limit_minutes"],
            "gpus_per_node": gpu_request(spec, True),
        })
    else:
        job.update({
            "script": spec["script"],
            "environment": ["%s=%s" % item for item in sorted(environment.items())],
            "nodes": None if resources["nodes"] is None else str(resources["nodes"]),
            "memory_per_node": _nv(resources["memory_mb"]),
            "memory_per_cpu": _nv(resources["memory_per_cpu_mb"]),
            "time_limit": _nv(resources["time_limit_minutes"]),
            "tres_per_node": gpu_request(spec, False),
        })
    if spec["exclusive"]:
        job.update(exclusive_request(api_version))
    overrides = spec["backend_options"].get("slurm") or {}
    for reserved in ("comment", "script"):
        if reserved in overrides:
            raise SpecError(
                "backend_options.slurm.%s" % reserved,
                "is set by Bridge (the identity tag and the script); it cannot be overridden",
            )
    job.update(overrides)
    job = dict((k, v) for k, v in job.items() if v is not None)
    if legacy:
        return {"script": spec["script"], "job": job}
    return {"job": job}


def _nv(value):
    if value is None:
        return None
    return {"set": True, "infinite": False, "number": value}
