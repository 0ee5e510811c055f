# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The LSF submit request of a job spec (pure), shown as `rendered`: bsub options carried by
Application Center's `generic` template and its nested multipart/mixed body, the script an
uploaded file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import re
import shlex
from xml.sax.saxutils import escape

from ansible_collections.bridge.hpc.plugins.module_utils._arrays import index_text
from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._spec import effective_environment


# A job's description: this prefix and its identity.
TAG_PREFIX = "bridge:"
APP_NAME = "generic"
# The script travels as an uploaded file. PAC stores uploads in the job's submission directory,
# which LSF exports to the job as LS_SUBCWD (also when -cwd moves the job elsewhere); the single
# quotes keep PAC's own shell from expanding it at submission time.
SCRIPT_FILE = "bridge_job.sh"
COMMAND = "/bin/sh -c 'chmod u+x \"$LS_SUBCWD/%s\" && exec \"$LS_SUBCWD/%s\"'" % (SCRIPT_FILE, SCRIPT_FILE)


# An array's description also carries its index set in Bridge's numbering and its parallelism
# ("bridge:<identity> array=0-9%2"): PAC reports each element under LSF's index, which starts at 1,
# so the record of what was asked is what maps them back.
ARRAY_TAG = " array="
# IBM: admin guide "Job arrays": the whole -J "name[index_list]%limit" is at most 255 characters.
MAX_ARRAY_SPEC = 255


def array_shift(array):
    """How far LSF's indexes are from the asked ones: LSF's start at 1, so an array that asks for
    index 0 runs every index one higher."""
    return 1 if array["indexes"][0] == 0 else 0


def job_command(spec):
    """COMMANDTORUN: the uploaded script, run as it is. An array's element first exports
    BRIDGE_ARRAY_INDEX, LSB_JOBINDEX less the shift (array_shift)."""
    array = spec.get("array")
    if not array:
        return COMMAND
    index = "$((LSB_JOBINDEX-1))" if array_shift(array) else "$LSB_JOBINDEX"
    return "/bin/sh -c 'BRIDGE_ARRAY_INDEX=%s; export BRIDGE_ARRAY_INDEX; chmod u+x \"$LS_SUBCWD/%s\" && exec \"$LS_SUBCWD/%s\"'" % (
        index, SCRIPT_FILE, SCRIPT_FILE)


def array_name(spec):
    """-J of a job: its name, or for an array "name[LSF index list]%parallelism"."""
    array = spec.get("array")
    if not array:
        return spec["name"]
    if "[" in spec["name"] or "]" in spec["name"]:
        raise SpecError("name", "an LSF job array's name cannot hold [ or ], which enclose its index list")
    shift = array_shift(array)
    text = array["text"] if not shift else index_text(index + shift for index in array["indexes"])
    value = "%s[%s]" % (spec["name"], text)
    if array["parallelism"]:
        value += "%%%d" % array["parallelism"]
    if len(value) > MAX_ARRAY_SPEC:
        raise SpecError("array.indexes", "LSF takes at most %d characters in -J \"name[indexes]%%limit\" and this array's "
                        "is %d long; use ranges (0-99, 0-98:2) or a shorter name" % (MAX_ARRAY_SPEC, len(value)))
    return value


def description(spec):
    """-Jd: the identity, and an array's index set and parallelism (ARRAY_TAG)."""
    text = TAG_PREFIX + spec["identity"]
    array = spec.get("array")
    if array:
        text += ARRAY_TAG + array["text"] + ("%%%d" % array["parallelism"] if array["parallelism"] else "")
    return text


OPTION_PATTERN = re.compile(r"^-?[A-Za-z][A-Za-z0-9_]*$")
# Options that would make the web service wait for the job or read a terminal.
FORBIDDEN_OPTIONS = {"-I": "interactive", "-Ip": "interactive", "-Is": "interactive", "-K": "waits for the job"}


def job_slots(resources):
    """(-n, span section) of the spec's tasks, nodes and CPUs.

    LSF allocates slots, one per CPU here: a task of cpus_per_task CPUs takes that many slots
    ("-n arithmetic"), so -n = tasks x cpus_per_task and ptile = tasks_per_node x cpus_per_task.
    Affinity strings would bind CPUs as well but need hosts configured for affinity scheduling.
    """
    nodes, tasks, per_node = resources["nodes"], resources["tasks"], resources["tasks_per_node"]
    cpus = resources["cpus_per_task"] or 1
    if nodes and per_node:
        if tasks and tasks != nodes * per_node:
            raise SpecError("resources.tasks", "%d tasks do not fill %d nodes of %d tasks each" % (tasks, nodes, per_node))
        tasks = nodes * per_node
    elif nodes:
        tasks = tasks or nodes
        if tasks % nodes:
            raise SpecError("resources.tasks", "%d tasks cannot spread evenly over %d nodes; LSF's span[ptile] "
                            "places the same number on each (give tasks_per_node)" % (tasks, nodes))
        per_node = tasks // nodes
    elif per_node:
        tasks = tasks or per_node
    if per_node:
        return tasks * cpus, "span[ptile=%d]" % (per_node * cpus)
    if not tasks and cpus == 1:
        return None, None
    # Without a node layout, keep a task's CPUs on one host.
    return (tasks or 1) * cpus, "span[hosts=1]" if cpus > 1 else None


def _environment(spec):
    pairs = []
    for key, value in sorted(effective_environment(spec).items()):
        # bsub -env separates variables with commas and takes the list as one word.
        if any(char in value for char in ",\"'\n"):
            raise SpecError("environment.%s" % key, "LSF's -env cannot carry commas, quotes or newlines in a value")
        pairs.append("%s=%s" % (key, value))
    return ", ".join(pairs)


def bsub_options(spec):
    """[(option, value or None, spec field)] of the bsub options a spec compiles to."""
    resources = spec["resources"]
    options = [("-J", array_name(spec), "name"), ("-Jd", description(spec), "identity")]
    slots, span = job_slots(resources)
    requirements = []
    if resources["memory_mb"]:
        requirements.append(("rusage[mem=%dMB]" % resources["memory_mb"], "resources.memory"))
    if span:
        requirements.append((span, "resources.tasks_per_node" if "ptile" in span else "resources.cpus_per_task"))
    if spec["queue"]:
        options.append(("-q", spec["queue"], "queue"))
    if slots:
        options.append(("-n", str(slots), "resources.tasks"))
    if requirements:
        options.append(("-R", " ".join(text for text, _field in requirements),
                        " and ".join(field for _text, field in requirements)))
    if resources["memory_mb"]:
        # Units spelled out: bare numbers mean LSF_UNIT_FOR_LIMITS, which defaults to KB.
        options.append(("-M", "%dMB" % resources["memory_mb"], "resources.memory"))
    if resources["gpus"]:
        gpu = "num=%d" % resources["gpus"]
        if resources["gpu_type"]:
            gpu += ":gmodel=%s" % resources["gpu_type"]
        options.append(("-gpu", gpu, "resources.gpus"))
    if resources["time_limit_minutes"]:
        options.append(("-W", str(resources["time_limit_minutes"]), "resources.time_limit"))
    if spec["account"]:
        options.append(("-P", spec["account"], "account"))
    if spec["exclusive"]:
        options.append(("-x", None, "exclusive"))
    if spec["stdout"]:
        options.append(("-o", spec["stdout"], "stdout"))
    if spec["stderr"]:
        options.append(("-e", spec["stderr"], "stderr"))
    if spec["working_directory"]:
        options.append(("-cwd", spec["working_directory"], "working_directory"))
    options.append(("-env", _environment(spec), "environment"))
    return options + _extra_options(spec, options)


def _extra_options(spec, compiled):
    """backend_options.lsf: more bsub options, {"-x": true, "-G": "group"}; never one Bridge compiled."""
    extra = spec["backend_options"].get("lsf") or {}
    if not isinstance(extra, dict):
        raise SpecError("backend_options.lsf", "must be a dictionary of bsub options")
    taken = dict((option, field) for option, _value, field in compiled)
    result = []
    for key in sorted(extra, key=lambda name: str(name).lstrip("-")):
        field = "backend_options.lsf.%s" % key
        if not OPTION_PATTERN.match(str(key)):
            raise SpecError(field, "is not a bsub option name such as -x or -G")
        option = key if key.startswith("-") else "-" + key
        if option in taken:
            raise SpecError(field, "contradicts %s, which Bridge compiles to %s; set it there instead" % (
                taken[option], option))
        if option in FORBIDDEN_OPTIONS:
            raise SpecError(field, "cannot be used through Bridge: %s" % FORBIDDEN_OPTIONS[option])
        value = extra[key]
        if value is None or value is False:
            continue
        if isinstance(value, (dict, list)):
            raise SpecError(field, "must be true (a flag), a string or a number")
        result.append((option, None if value is True else "%s" % (value,), field))
    return result


def bsub_words(options):
    """The options as one POSIX-shell-quoted bsub argument string."""
    words = []
    for option, value, _field in options:
        words.append(option)
        if value is not None:
            words.append(shlex.quote(value))
    return " ".join(words)


def compile_job(spec):
    """The submit request of a spec, shown as `rendered`: the template, its parameters, the file.

    JOB_NAME, OUTPUT_FILE and ERROR_FILE are the generic template's own parameters (-J, -o, -e);
    every other option travels in EXTRA_PARAMS. `bsub` is the equivalent command line.
    """
    options = bsub_options(spec)
    by_option = dict((option, value) for option, value, _field in options)
    template = [("-J", "JOB_NAME"), ("-o", "OUTPUT_FILE"), ("-e", "ERROR_FILE")]
    command = job_command(spec)
    params = [{"id": "COMMANDTORUN", "value": command, "type": ""}]
    params += [{"id": name, "value": by_option[option], "type": ""} for option, name in template if option in by_option]
    in_template = set(option for option, _name in template)
    params.append({"id": "EXTRA_PARAMS", "value": bsub_words([o for o in options if o[0] not in in_template]),
                   "type": ""})
    params.append({"id": SCRIPT_FILE, "value": "%s,upload" % SCRIPT_FILE, "type": "file"})
    return {
        "method": "POST",
        "path": "/ws/jobs/submit",
        "app_name": APP_NAME,
        "params": params,
        "files": {SCRIPT_FILE: spec["script"]},
        "bsub": "bsub %s %s" % (bsub_words(options), command),
    }


def _part(boundary, headers, body):
    head = "".join("%s: %s\r\n" % pair for pair in headers)
    return b"--" + boundary + b"\r\n" + head.encode("utf-8") + b"\r\n" + body + b"\r\n"


def multipart_body(request):
    """(Content-Type, bytes) of a compiled request: PAC's nested multipart/mixed.

    The outer body holds AppName, then `data` (an inner multipart/mixed of one AppParam XML per
    parameter), then each uploaded file as-is. Boundaries come from a hash of the content, so one
    request always has one body (and cannot occur in what they delimit, short of a SHA-256 clash).
    """
    files = [(name, content.encode("utf-8")) for name, content in sorted(request["files"].items())]
    xml_params = [(p["id"], ("<AppParam><id>%s</id><value>%s</value><type>%s</type></AppParam>" % (
        escape(p["id"]), escape(p["value"]), escape(p["type"]))).encode("utf-8")) for p in request["params"]]
    digest = hashlib.sha256(json.dumps(request, sort_keys=True).encode("utf-8")).hexdigest()
    outer, inner = ("bridge-%s" % digest[:32]).encode(), ("bridge-data-%s" % digest[32:]).encode()
    data = b"".join(_part(inner, [("Content-Disposition", 'form-data; name="%s"' % name),
                                  ("Content-Type", "application/xml; charset=UTF-8")], xml)
                    for name, xml in xml_params) + b"--" + inner + b"--"
    body = _part(outer, [("Content-Disposition", 'form-data; name="AppName"'), ("Content-ID", "<AppName>")],
                 request["app_name"].encode("utf-8"))
    body += _part(outer, [("Content-Disposition", 'form-data; name="data"'),
                          ("Content-Type", "multipart/mixed; boundary=%s" % inner.decode()),
                          ("Content-ID", "<data>")], data)
    for name, content in files:
        body += _part(outer, [("Content-Disposition", 'form-data; name="%s"; filename="%s"' % (name, name)),
                              ("Content-Type", "application/octet-stream"), ("Content-ID", "<%s>" % name)], content)
    body += b"--" + outer + b"--\r\n"
    return "multipart/mixed; boundary=%s" % outer.decode(), body
