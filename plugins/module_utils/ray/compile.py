# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Ray JobSubmitRequest of a job spec (pure), shown as `rendered`: the script as a
content-addressed working_dir package, run by the interpreter of its #! line as the one driver,
whose CPUs, GPUs and memory the spec's resources reserve.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import io
import json
import shlex
import zipfile

from ansible_collections.bridge.hpc.plugins.module_utils._backend import interpreter
from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError


SCRIPT_NAME = "bridge_job"


KILL_GRACE_SECONDS = 30


RUNTIME_ENV_KEYS = frozenset([
    "working_dir", "py_modules", "py_executable", "pip", "uv", "conda", "env_vars", "container",
    "image_uri", "worker_process_setup_hook", "config", "excludes", "java_jars", "nsight", "mpi",
])
OPTION_KEYS = frozenset([
    "runtime_env", "metadata", "entrypoint_resources", "entrypoint_label_selector",
    "entrypoint_num_cpus", "entrypoint_num_gpus", "entrypoint_memory",
])


METADATA_IDENTITY = "bridge_identity"
METADATA_TIME_LIMIT = "bridge_time_limit_minutes"
# JobDetails does not echo the entrypoint's resource request; Bridge keeps it in the metadata to
# tell a job waiting for busy resources from one waiting for resources no node has.
METADATA_REQUEST = "bridge_entrypoint_request"
REQUEST_FIELDS = ("entrypoint_num_cpus", "entrypoint_num_gpus", "entrypoint_memory", "entrypoint_resources")


def package(script):
    """(zip bytes, gcs URI) of a working_dir holding only the script.

    The zip is built byte-for-byte reproducibly (fixed timestamps and modes), so the same script
    always yields the same URI: the rendered request and the identity stay stable.
    """
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        entry = zipfile.ZipInfo(SCRIPT_NAME, date_time=(1980, 1, 1, 0, 0, 0))
        entry.external_attr = (0o100755 << 16)
        entry.compress_type = zipfile.ZIP_DEFLATED
        archive.writestr(entry, script.encode("utf-8"))
    content = buffer.getvalue()
    return content, "gcs://_ray_pkg_%s.zip" % hashlib.sha1(content).hexdigest()


def compile_job(spec):
    """The JobSubmitRequest for a spec; `rendered` in module results."""
    resources = spec["resources"]
    options = dict(spec["backend_options"].get("ray") or {})
    unknown = sorted(set(options) - OPTION_KEYS)
    if unknown:
        raise SpecError("backend_options.ray.%s" % unknown[0], "unknown Ray job field; allowed: %s" % ", ".join(sorted(OPTION_KEYS)))
    runtime_env = dict(options.pop("runtime_env", None) or {})
    bad = sorted(set(runtime_env) - RUNTIME_ENV_KEYS)
    if bad:
        raise SpecError("backend_options.ray.runtime_env.%s" % bad[0],
                        "unknown runtime_env key; allowed: %s" % ", ".join(sorted(RUNTIME_ENV_KEYS)))
    if "working_dir" in runtime_env:
        raise SpecError("backend_options.ray.runtime_env.working_dir", "is where Bridge ships the script; "
                        "use py_modules for more code")
    for key in ("entrypoint_num_cpus", "entrypoint_num_gpus", "entrypoint_memory"):
        if key in options and (not isinstance(options[key], (int, float)) or isinstance(options[key], bool) or options[key] < 0):
            raise SpecError("backend_options.ray.%s" % key, "must be a number of 0 or more, got %r" % (options[key],))
    for name, amount in (options.get("entrypoint_resources") or {}).items():
        if not isinstance(amount, (int, float)) or isinstance(amount, bool) or amount < 0:
            raise SpecError("backend_options.ray.entrypoint_resources.%s" % name, "must be a number of 0 or more, got %r" % (amount,))

    _content, uri = package(spec["script"])
    command = interpreter(spec["script"]) + [SCRIPT_NAME]
    limit = resources["time_limit_minutes"]
    if limit:
        command = ["timeout", "--signal=TERM", "--kill-after=%d" % KILL_GRACE_SECONDS, "%ds" % (limit * 60)] + command
    env_vars = dict(runtime_env.pop("env_vars", None) or {})
    env_vars.update(spec["environment"])
    runtime_env["working_dir"] = uri
    if env_vars:
        runtime_env["env_vars"] = env_vars
    metadata = dict((str(k), str(v)) for k, v in (options.pop("metadata", None) or {}).items())
    metadata[METADATA_IDENTITY] = spec["identity"]
    metadata["bridge_name"] = spec["name"]
    if limit:
        metadata[METADATA_TIME_LIMIT] = str(limit)
    request = {
        "entrypoint": " ".join(shlex.quote(part) for part in command),
        "submission_id": spec["identity"],
        "runtime_env": runtime_env,
        "metadata": metadata,
    }
    if resources["cpus_per_task"]:
        request["entrypoint_num_cpus"] = resources["cpus_per_task"]
    if resources["gpus"]:
        request["entrypoint_num_gpus"] = resources["gpus"]
    if resources["memory_mb"]:
        request["entrypoint_memory"] = resources["memory_mb"] * 1024 * 1024
    request.update(options)
    wanted = dict((k, request[k]) for k in REQUEST_FIELDS if request.get(k))
    if wanted:
        metadata[METADATA_REQUEST] = json.dumps(wanted, sort_keys=True)
    return request
