# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The backend-neutral job spec. Internal to this collection.

One spec describes a job for every resource manager: modules take it as options, the controller
takes it (camelCased) from a BridgeJob, and each backend compiles the normalized form below to its
own request. Everything here is pure: validation happens before any network call.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import math
import re

from ansible_collections.bridge.hpc.plugins.module_utils._arrays import MAX_ARRAY_TASKS, index_text, parse_indexes
from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._fields import (
    CONDUCT_FIELDS,
    DEFAULT_RETRY_CLASSES,
    FIELDS,
    GROUP_FIELDS,
    MAX_BACKOFF_SECONDS,
    MAX_RETRIES,
    MAX_TAIL_LINES,
    RETRY_CLASSES,
    TOP_FIELDS,
    argument_spec,
    is_set,
    leaf,
    refusal,
    value_of,
)

# The Ansible argument spec of a job; modules extend it with their connection and state options.
JOB_SPEC_OPTIONS = argument_spec()
RESOURCE_OPTIONS = JOB_SPEC_OPTIONS["resources"]["options"]
# The top-level text fields whose normalized value is the value given, or None: all but those
# normalize_spec checks itself.
TEXT_KEYS = tuple(field.name for field in TOP_FIELDS
                  if field.option["type"] == "str" and field.name not in ("script", "name", "identity"))
# The fields of the spec as Bridge 0.1.0 hashed them into derived identities (legacy_identities).
LEGACY_TOP_KEYS = ("script", "name", "environment", "working_directory", "stdout", "stderr", "queue", "account", "qos",
                   "constraints", "resources", "backend_options")
LEGACY_RESOURCE_KEYS = ("nodes", "tasks", "tasks_per_node", "cpus_per_task", "gpus", "gpu_type", "memory_mb",
                        "memory_per_cpu_mb", "time_limit_minutes")

IDENTITY_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
# An identity with retries leaves room for the suffix of its last attempt (".100").
RETRY_IDENTITY_LENGTH = 128 - len(".%d" % MAX_RETRIES)
NAME_PATTERN = re.compile(r"^[^\s,'\"\\]{1,200}$")
ENV_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MEMORY_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGTP]?)(I?B)?\s*$", re.IGNORECASE)
MEMORY_UNITS_MB = {"K": 1.0 / 1024, "": 1.0, "M": 1.0, "G": 1024.0, "T": 1024.0 ** 2, "P": 1024.0 ** 3}
TIME_FORMATS = "minutes (90), MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS"
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def parse_time_limit(value, field="resources.time_limit"):
    """Slurm's time syntax (also used by every other backend) to whole minutes, rounding seconds up.

    Slurm reads "A:B" as minutes:seconds and "A:B:C" as hours:minutes:seconds; we keep its
    meaning so that a limit means the same thing whatever backend runs the job.
    """
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise SpecError(field, "expected a time such as %s, got %r" % (TIME_FORMATS, value))
    if isinstance(value, int):
        if value <= 0:
            raise SpecError(field, "must be a positive number of minutes, got %d" % value)
        return value
    text = str(value).strip()
    match = re.match(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$", text)
    if not match:
        raise SpecError(field, "'%s' is not a time; use %s" % (text, TIME_FORMATS))
    days, first, second, third = match.groups()
    days = int(days or 0)
    if days and third is None and second is None:
        hours, minutes, seconds = int(first), 0, 0
    elif days and third is None:
        hours, minutes, seconds = int(first), int(second), 0
    elif third is not None:
        hours, minutes, seconds = int(first), int(second), int(third)
    elif second is not None:
        hours, minutes, seconds = 0, int(first), int(second)
    else:
        hours, minutes, seconds = 0, int(first), 0
    if (second is not None and int(second) > 59) or (third is not None and int(third) > 59):
        raise SpecError(field, "'%s' has a minutes or seconds part over 59; use %s" % (text, TIME_FORMATS))
    if days and hours > 23:
        raise SpecError(field, "'%s' has an hours part over 23 after a day count" % text)
    total_seconds = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    if total_seconds <= 0:
        raise SpecError(field, "'%s' must be longer than zero" % text)
    return int(math.ceil(total_seconds / 60.0))


def parse_memory(value, field="resources.memory"):
    """'4G', '512M', '1.5GiB' or a plain number of MiB to whole MiB (rounded up)."""
    if value is None or value == "":
        return None
    match = MEMORY_PATTERN.match(str(value))
    if not match:
        raise SpecError(field, "'%s' is not a memory size; use a number of MiB or a unit K, M, G, T (e.g. 4G)" % value)
    number, unit, _suffix = match.groups()
    mebibytes = int(math.ceil(float(number) * MEMORY_UNITS_MB[unit.upper()]))
    if mebibytes <= 0:
        raise SpecError(field, "'%s' must be at least 1 MiB" % value)
    return mebibytes


def format_minutes(minutes):
    """Minutes as Slurm prints them (D-HH:MM:SS), None as 'UNLIMITED'."""
    if minutes is None:
        return "UNLIMITED"
    days, rest = divmod(int(minutes), 24 * 60)
    hours, mins = divmod(rest, 60)
    text = "%02d:%02d:00" % (hours, mins)
    return "%d-%s" % (days, text) if days else text


def _positive(resources, key):
    value = resources.get(key)
    if value is None:
        return None
    if value < 1:
        raise SpecError("resources.%s" % key, "must be 1 or more, got %d" % value)
    return value


def require_program(script):
    """SpecError unless `script` is a program: text whose first line is an interpreter line."""
    if script is None or script.strip() == "":
        raise SpecError("script", "a job needs a script (inline text, or script_file on the controller)")
    if not script.startswith("#!"):
        raise SpecError("script", "must start with an interpreter line such as #!/bin/bash")


def normalize_spec(params, backend=None):
    """Validate a job spec (module params or a camelCase-free dict) and return its canonical form.

    Raises SpecError naming the first bad field. The canonical form is what backends compile
    and what the default identity is derived from. `backend` (a Backend class or client) decides
    what a script may be (Backend.check_script); without one, a script is a program with a #! line.
    """
    script = params.get("script")
    if backend is None:
        require_program(script)
    else:
        backend.check_script(script, params.get("backend_options") or {})

    name = params.get("name")
    if name is not None and not NAME_PATTERN.match(name):
        raise SpecError("name", "'%s' must be 1-200 characters without spaces, commas, quotes or backslashes" % name)

    identity = params.get("identity")
    if identity is not None and not IDENTITY_PATTERN.match(identity):
        raise SpecError(
            "identity",
            "'%s' must be 1-128 characters of letters, digits and . _ : - starting with a letter or digit" % identity,
        )

    environment = {}
    for key, value in sorted((params.get("environment") or {}).items()):
        if not ENV_NAME_PATTERN.match(str(key)):
            raise SpecError("environment", "'%s' is not a valid variable name" % key)
        if isinstance(value, (dict, list)):
            raise SpecError("environment.%s" % key, "must be a string, number or boolean")
        environment[str(key)] = _env_text(value)

    resources = dict(params.get("resources") or {})
    unknown = sorted(set(resources) - set(RESOURCE_OPTIONS))
    if unknown:
        raise SpecError("resources", "unknown key(s) %s; allowed: %s" % (", ".join(unknown), ", ".join(sorted(RESOURCE_OPTIONS))))
    normalized_resources = {}
    for key in ("nodes", "tasks", "tasks_per_node", "cpus_per_task", "gpus"):
        normalized_resources[key] = _positive(resources, key)
    normalized_resources["gpu_type"] = resources.get("gpu_type") or None
    if normalized_resources["gpu_type"] and not normalized_resources["gpus"]:
        raise SpecError("resources.gpu_type", "needs resources.gpus, the number of GPUs per node")
    if resources.get("memory") and resources.get("memory_per_cpu"):
        raise SpecError("resources.memory", "give either memory (per node) or memory_per_cpu, not both")
    normalized_resources["memory_mb"] = parse_memory(resources.get("memory"), "resources.memory")
    normalized_resources["memory_per_cpu_mb"] = parse_memory(resources.get("memory_per_cpu"), "resources.memory_per_cpu")
    normalized_resources["time_limit_minutes"] = parse_time_limit(resources.get("time_limit"))

    # Imported here: the registry imports every backend, and every backend imports this module.
    from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS

    backend_options = params.get("backend_options") or {}
    for namespace, options in backend_options.items():
        if namespace not in BACKENDS:
            raise SpecError(
                "backend_options",
                "unknown backend namespace '%s'; allowed: %s" % (namespace, ", ".join(sorted(BACKENDS))),
            )
        if not isinstance(options, dict):
            raise SpecError("backend_options.%s" % namespace, "must be a dictionary of native request fields")

    spec = {
        "array": normalize_array(params.get("array")),
        "retry": normalize_retry(params.get("retry")),
        "output": normalize_output(params.get("output")),
        "script": script or None,
        "name": name,
        "environment": environment,
        "resources": normalized_resources,
        "backend_options": backend_options,
        "exclusive": True if params.get("exclusive") else None,
    }
    # The fields that are text as given: empty means unset.
    for key in TEXT_KEYS:
        spec[key] = params.get(key) or None
    if backend is not None:
        refuse_unsupported(spec, backend)
    if identity and spec["retry"] and len(identity) > RETRY_IDENTITY_LENGTH:
        raise SpecError("identity", "with retry, must be at most %d characters, leaving room for the attempt "
                                    "suffix .<n>" % RETRY_IDENTITY_LENGTH)
    spec["identity"] = identity or derive_identity(spec)
    # Jobs submitted by Bridge 0.1.0 under a derived identity carry the identity of its scheme; an
    # upgrade looks them up too, so it never submits a second job for one that exists.
    spec["identity_aliases"] = () if identity else legacy_identities(spec)
    if spec["name"] is None:
        spec["name"] = spec["identity"]
    return spec


def _group(params, name):
    """A group's given keys (None values dropped), or None when the group is unset; SpecError for a
    key the group does not have or a group that is no mapping."""
    given = params
    if given is None:
        return None
    if not isinstance(given, dict):
        raise SpecError(name, "must be a dictionary")
    allowed = sorted(leaf(field) for field in GROUP_FIELDS[name])
    if name == "retry" and "on" in given:
        given = dict(given)
        given.setdefault("classes", given.pop("on"))
    unknown = sorted(str(key) for key in set(given) - set(allowed))
    if unknown:
        raise SpecError(name, "unknown key(s) %s; allowed: %s" % (", ".join(unknown), ", ".join(allowed)))
    given = dict((key, value) for key, value in given.items() if value is not None)
    return given or None


def _count(group, values, key, low, high, default=None):
    value = values.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(str(value))
        except ValueError:
            raise SpecError("%s.%s" % (group, key), "must be a whole number, got %r" % (value,))
    if not low <= value <= high:
        raise SpecError("%s.%s" % (group, key), "must be from %d to %d, got %d" % (low, high, value))
    return value


def normalize_array(given):
    """The array group: {"indexes": sorted tuple, "text": canonical index set, "size", "parallelism"}
    or None."""
    values = _group(given, "array")
    if values is None:
        return None
    if "indexes" not in values:
        raise SpecError("array.indexes", "an array needs indexes, such as 0-99")
    indexes = parse_indexes(values["indexes"])
    return {"indexes": indexes, "text": index_text(indexes), "size": len(indexes),
            "parallelism": _count("array", values, "parallelism", 1, MAX_ARRAY_TASKS)}


def normalize_retry(given):
    """The retry group: {"limit", "classes" (in RETRY_CLASSES' order), "backoff_seconds"} or None;
    a limit of 0 is no retry."""
    values = _group(given, "retry")
    if values is None:
        return None
    limit = _count("retry", values, "limit", 0, MAX_RETRIES)
    if limit is None:
        raise SpecError("retry.limit", "retries need a limit, the most attempts after the first (1 to %d)" % MAX_RETRIES)
    classes = values.get("classes")
    if classes is None:
        classes = DEFAULT_RETRY_CLASSES
    if isinstance(classes, str) or not isinstance(classes, (list, tuple)):
        raise SpecError("retry.classes", "must be a list of failure classes; allowed: %s (a bare YAML 'on:' is true: "
                                         "write classes)" % ", ".join(RETRY_CLASSES))
    unknown = [str(name) for name in classes if name not in RETRY_CLASSES]
    if unknown:
        raise SpecError("retry.classes", "'%s' is not a failure class Bridge retries; allowed: %s" % (
            unknown[0], ", ".join(RETRY_CLASSES)))
    backoff = _count("retry", values, "backoff_seconds", 0, MAX_BACKOFF_SECONDS, default=0)
    if not limit:
        return None
    return {"limit": limit, "classes": tuple(name for name in RETRY_CLASSES if name in classes),
            "backoff_seconds": backoff}


def normalize_output(given):
    """The output group: {"tail_lines", "follow"} or None."""
    values = _group(given, "output")
    if values is None:
        return None
    tail_lines = _count("output", values, "tail_lines", 1, MAX_TAIL_LINES)
    if tail_lines is None:
        raise SpecError("output.tail_lines", "give how many lines to read (1 to %d)" % MAX_TAIL_LINES)
    follow = values.get("follow", False)
    if not isinstance(follow, bool):
        raise SpecError("output.follow", "must be true or false, got %r" % (follow,))
    return {"tail_lines": tail_lines, "follow": follow}


def refuse_unsupported(spec, backend):
    """SpecError naming the first field the spec sets that `backend` (a Backend class or client)
    refuses, with the reason the field table gives; what it compiles passes."""
    refused = refusal(spec, backend.NAME)
    if refused is not None:
        field, why = refused
        raise SpecError(field, "not supported by the %s backend: %s" % (backend.TITLE, why))


def _env_text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return "%s" % (value,)


def identity_material(spec):
    """What a derived identity hashes: each field the spec sets, by its name in the spec, with its
    normalized value ("4G" and 4096 are the same memory). An unset field is left out, so a field
    added to the spec later leaves the identities of specs that do not set it as they were."""
    material = {}
    for field in FIELDS:
        if field.name == "identity" or field.name in CONDUCT_FIELDS:
            continue
        value = _canonical(value_of(spec, field))
        if value is not None:
            material[field.name] = value
    return material


def _canonical(value):
    """A value without what asks for nothing: unset entries of a mapping, empty mappings; None when
    nothing is left."""
    if isinstance(value, dict):
        kept = dict((key, _canonical(item)) for key, item in value.items())
        kept = dict((key, item) for key, item in kept.items() if item is not None)
        return kept or None
    return value if is_set(value) else None


def _digest(material):
    return hashlib.sha256(json.dumps(material, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()[:16]


def _prefixed(spec, digest):
    prefix = re.sub(r"[^A-Za-z0-9._:-]", "-", spec.get("name") or "bridge").lstrip("._:-") or "bridge"
    return "%s-%s" % (prefix[:100], digest)


def derive_identity(spec):
    """A deterministic identity from the job's content: the same spec always maps to the same job.

    The name (or "bridge") and 16 hex digits of a SHA-256 over identity_material. Users who want to
    run an unchanged spec again give `identity` explicitly (a run id, a CR UID).
    """
    return _prefixed(spec, _digest(identity_material(spec)))


def legacy_identities(spec):
    """The identity Bridge 0.1.0 derived for this spec (it hashed every field, unset ones too), as a
    tuple; empty when the spec sets a field 0.1.0 did not have, since 0.1.0 cannot have submitted it."""
    if any(_since_legacy(field) and is_set(value_of(spec, field)) for field in FIELDS if field.name not in CONDUCT_FIELDS):
        return ()
    material = dict((key, spec[key]) for key in LEGACY_TOP_KEYS)
    material["resources"] = dict((key, spec["resources"].get(key)) for key in LEGACY_RESOURCE_KEYS)
    return (_prefixed(spec, _digest(material)),)


def _since_legacy(field):
    """Whether a field came after Bridge 0.1.0."""
    group, _dot, _leaf = field.name.rpartition(".")
    keys = LEGACY_RESOURCE_KEYS if group == "resources" else LEGACY_TOP_KEYS
    return field.key not in keys and field.name != "identity"


def effective_environment(spec):
    """The environment a batch job receives: Slurm and friends need at least a PATH."""
    environment = {"PATH": DEFAULT_PATH}
    environment.update(spec["environment"])
    return environment
