# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Slurm submit body of a job spec (pure): what modules return as `rendered`, for each REST
version (v0.0.38's top-level script and environment object, v0.0.39+'s {set, number} numbers).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.bridge.hpc.plugins.module_utils._backend import interpreter
from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._spec import effective_environment


# REST versions of Slurm 22.05 and older: flat numbers, the script beside the job.
LEGACY_VERSIONS = ("v0.0.36", "v0.0.37", "v0.0.38")
# REST versions whose job takes `exclusive` as a list of flags; from v0.0.42 on it is `shared`.
EXCLUSIVE_FLAG_VERSIONS = ("v0.0.39", "v0.0.40", "v0.0.41")
# A job's comment: this prefix and its identity; with an identity key, then MAC_MARK and the
# identity's tag (slurm/identity.py); for an array, then ARRAY_MARK and the asked indexes (Slurm's
# syntax), which say what the array is after slurmctld has forgotten some of its tasks.
TAG_PREFIX = "bridge:"
MAC_MARK = " mac="
ARRAY_MARK = " array="
# slurmctld refuses a job whose comment is longer (_test_job_desc_fields in job_mgr.c).
COMMENT_LIMIT = 1024
# Where the wrapper of an array job (array_script) ends the script it carries; a number is added while
# the script has a line that reads so.
SCRIPT_END = "BRIDGE_SCRIPT_END"


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


def compile_job(spec, api_version, tag=None):
    """The submit body for one REST version; it is what modules return as `rendered`. `tag` is the
    identity's tag under the identity key, None without one."""
    legacy = api_version in LEGACY_VERSIONS
    resources = spec["resources"]
    environment = effective_environment(spec)
    array = spec.get("array")
    script = array_script(spec["script"]) if array else spec["script"]
    job = {
        "name": spec["name"],
        "comment": comment(spec, tag),
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
            "script": script,
            "environment": ["%s=%s" % item for item in sorted(environment.items())],
            "nodes": None if resources["nodes"] is None else str(resources["nodes"]),
            "memory_per_node": _nv(resources["memory_mb"]),
            "memory_per_cpu": _nv(resources["memory_per_cpu_mb"]),
            "time_limit": _nv(resources["time_limit_minutes"]),
            "tres_per_node": gpu_request(spec, False),
        })
    if array:
        job["array"] = array_request(array)
    if spec["exclusive"]:
        job.update(exclusive_request(api_version))
    overrides = spec["backend_options"].get("slurm") or {}
    for reserved in ("comment", "script"):
        if reserved in overrides:
            raise SpecError(
                "backend_options.slurm.%s" % reserved,
                "is set by Bridge (the identity tag and the script); it cannot be overridden",
            )
    if array and "array" in overrides:
        raise SpecError("backend_options.slurm.array", "is set by Bridge from the field array; give one of them")
    job.update(overrides)
    job = dict((k, v) for k, v in job.items() if v is not None)
    if legacy:
        return {"script": script, "job": job}
    return {"job": job}


def _nv(value):
    if value is None:
        return None
    return {"set": True, "infinite": False, "number": value}


def comment(spec, tag=None):
    """The job's comment: "bridge:<identity>", " mac=<tag>" with a tag, and " array=<indexes>" for
    an array; SpecError on array.indexes when that is more than Slurm keeps."""
    array = spec.get("array")
    text = TAG_PREFIX + spec["identity"] + (MAC_MARK + tag if tag else "") + (ARRAY_MARK + array["text"] if array else "")
    if array and len(text) > COMMENT_LIMIT:
        raise SpecError("array.indexes", "are %d characters as Slurm writes them (%s...); with the identity they must fit "
                        "the %d characters of the job's comment, where Bridge keeps them: use fewer ranges, or several "
                        "arrays" % (len(array["text"]), array["text"][:40], COMMENT_LIMIT))
    return text


def array_request(array):
    """sbatch --array: the indexes, and "%P" where at most P tasks may run at once."""
    if array.get("parallelism"):
        return "%s%%%d" % (array["text"], array["parallelism"])
    return array["text"]


def array_script(script):
    """The batch script of an array job: Slurm starts every task with the same environment, which
    only SLURM_ARRAY_TASK_ID tells apart, so a /bin/sh wrapper sets BRIDGE_ARRAY_INDEX from it and
    runs `script` with the interpreter (and its one argument) of its #! line, as the kernel would.

    The script travels unchanged (a newline added at its end if it has none) in a here-document on
    file descriptor 3, which the interpreter reads as /dev/fd/3 (its $0); stdin stays the job's. The
    here-document's terminator is quoted, so nothing in the script is expanded, and is a line the
    script does not have."""
    command = " ".join(shell_quoted(word) for word in interpreter(script))
    if not script.endswith("\n"):
        script += "\n"
    lines = set(script.split("\n"))
    end, number = SCRIPT_END, 0
    while end in lines:
        number += 1
        end = "%s_%d" % (SCRIPT_END, number)
    return ("#!/bin/sh\n"
            "# Bridge: every task of a Slurm array gets the same environment; this wrapper sets the task's\n"
            "# BRIDGE_ARRAY_INDEX and runs the job's script below unchanged with its own interpreter.\n"
            "BRIDGE_ARRAY_INDEX=$SLURM_ARRAY_TASK_ID\n"
            "export BRIDGE_ARRAY_INDEX\n"
            "exec %s /dev/fd/3 3<<'%s'\n"
            "%s%s\n") % (command, end, script, end)


def shell_quoted(word):
    """`word` as one word of /bin/sh: in single quotes, each ' written as '\\''."""
    return "'%s'" % word.replace("'", "'\\''")
