# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""IBM Spectrum LSF client for Bridge, over LSF Application Center (PAC) RESTful web services.

`url` is the Application Center's context root, e.g. http://pac:8080/platform; every call goes to
<url>/ws/... . PAC's quirks live here: a logon that trades user and password for a token whose
double quotes travel as the literal `#quote#` in a `platform_token` cookie, XML answers unless
JSON is asked for (and XML errors even then), JSON that mirrors the XML with one record as an
object and several as a list, jobs submitted through the `generic` application template as a
nested multipart/mixed body, and short (PEND) or long (Pending) state names.

Protocol facts and their sources: docs/lsf.md and the shared external-apis.md section 2.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import hashlib
import json
import re
import shlex
import time
from xml.etree import ElementTree
from xml.sax.saxutils import escape

from ansible_collections.bridge.hpc.plugins.module_utils._backend import (
    TERMINAL_PHASES,
    Backend,
    ShapeError,
    decode,
    newest_by_identity,
    rfc3339,
    select,
    status_phrase,
    with_launcher,
)
from ansible_collections.bridge.hpc.plugins.module_utils._errors import (
    AuthFailed,
    ConnectionFailed,
    NotFound,
    Rejected,
    ServerError,
    SpecError,
    Timeout,
    error_for_status,
)
from ansible_collections.bridge.hpc.plugins.module_utils._spec import effective_environment
from ansible_collections.bridge.hpc.plugins.module_utils._transport import Transport

MANAGER = "LSF"
TAG_PREFIX = "bridge:"
APP_NAME = "generic"
# The script travels as an uploaded file. PAC stores uploads in the job's submission directory,
# which LSF exports to the job as LS_SUBCWD (also when -cwd moves the job elsewhere); the single
# quotes keep PAC's own shell from expanding it at submission time.
SCRIPT_FILE = "bridge_job.sh"
COMMAND = "/bin/sh -c 'chmod u+x \"$LS_SUBCWD/%s\" && exec \"$LS_SUBCWD/%s\"'" % (SCRIPT_FILE, SCRIPT_FILE)
QUOTE = "#quote#"
COOKIE = "platform_token"

# bjobs short state names (LSF "About job states"); long forms are mapped by prefix below.
PHASE_BY_STATE = {
    "PEND": "queued", "PSUSP": "queued", "WAIT": "queued", "PROV": "queued",
    "RUN": "running", "USUSP": "running", "SSUSP": "running", "UNKWN": "running",
    "DONE": "completed", "PDONE": "completed",
    "EXIT": "failed", "PERR": "failed", "ZOMBI": "failed",
}
LONG_STATES = (("PENDING", "PEND"), ("RUNNING", "RUN"), ("SUSPENDED", "USUSP"), ("POST_DONE", "PDONE"),
               ("POST_ERR", "PERR"), ("EXITED", "EXIT"), ("FINISHED", "DONE"))
STATE_REASONS = {
    "PSUSP": "suspended by its owner or an administrator while pending",
    "USUSP": "suspended by its owner or an administrator",
    "SSUSP": "suspended by LSF (host load, run window or preemption)",
    "UNKWN": "mbatchd lost contact with the execution host; LSF may recover the job",
}
# lsbatch.h TERM_* exit reasons (job_exit_reasons), by name and number.
TERM_CODES = {1: "TERM_PREEMPT", 5: "TERM_RUNLIMIT", 6: "TERM_DEADLINE", 8: "TERM_FORCE_OWNER",
              9: "TERM_FORCE_ADMIN", 12: "TERM_CPULIMIT", 14: "TERM_OWNER", 15: "TERM_ADMIN",
              16: "TERM_MEMLIMIT", 19: "TERM_ZOMBIE"}
FAILURE_BY_TERM = {
    "TERM_RUNLIMIT": "timeout", "TERM_DEADLINE": "timeout", "TERM_CPULIMIT": "timeout",
    "TERM_MEMLIMIT": "out_of_memory", "TERM_SWAP": "out_of_memory",
    "TERM_OWNER": "cancelled", "TERM_ADMIN": "cancelled", "TERM_FORCE_OWNER": "cancelled",
    "TERM_FORCE_ADMIN": "cancelled", "TERM_PREEMPT": "preempted", "TERM_ZOMBIE": "node_failure",
}
# Pending reasons LSF never clears by itself: the job waits in a queue that takes no jobs, for a
# host that does not exist, or on a dependency that can no longer be met (lsb_pendreason()'s
# PEND_JOB_DEP_INVALID). LSF keeps such jobs pending forever.
HOPELESS_REASONS = re.compile(
    r"queue is closed|queue .*not accept|no (suitable|eligible) hosts?|not a (valid|known) host|"
    r"never (be )?satisfied|invalid (queue|host|resource)", re.IGNORECASE)

# Spec fields with no bsub equivalent Bridge would stand behind.
UNSUPPORTED = {
    "qos": "LSF has no quality of service; use a queue or backend_options.lsf (-sla)",
    "constraints": "LSF selects hosts with resource requirement strings; use backend_options.lsf "
                   "with -R \"select[...]\" (and no other Bridge-compiled -R field)",
}
OPTION_PATTERN = re.compile(r"^-?[A-Za-z][A-Za-z0-9_]*$")
# Options that would make the web service wait for the job or read a terminal.
FORBIDDEN_OPTIONS = {"-I": "interactive", "-Ip": "interactive", "-Is": "interactive", "-K": "waits for the job"}
MEMORY_UNITS_MB = {"K": 1.0 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0 ** 2}


# ---------------------------------------------------------------- compiling the spec (pure)

def _slots(resources):
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


def compile_options(spec):
    """[(option, value or None, spec field)] of the bsub options a spec compiles to."""
    for field, why in UNSUPPORTED.items():
        if spec.get(field):
            raise SpecError(field, "not supported by the LSF backend: %s" % why)
    resources = spec["resources"]
    if resources["memory_per_cpu_mb"]:
        raise SpecError("resources.memory_per_cpu", "give resources.memory; Bridge sets LSF's job memory limit (-M) "
                        "and reservation (rusage[mem]) from it")
    options = [("-J", spec["name"], "name"), ("-Jd", TAG_PREFIX + spec["identity"], "identity")]
    slots, span = _slots(resources)
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


def compile_lsf(spec):
    """The submit request of a spec, shown as `rendered`: the template, its parameters, the file.

    JOB_NAME, OUTPUT_FILE and ERROR_FILE are the generic template's own parameters (-J, -o, -e);
    every other option travels in EXTRA_PARAMS. `bsub` is the equivalent command line.
    """
    options = compile_options(spec)
    by_option = dict((option, value) for option, value, _field in options)
    template = [("-J", "JOB_NAME"), ("-o", "OUTPUT_FILE"), ("-e", "ERROR_FILE")]
    params = [{"id": "COMMANDTORUN", "value": COMMAND, "type": ""}]
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
        "bsub": "bsub %s %s" % (bsub_words(options), COMMAND),
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


# ---------------------------------------------------------------- reading answers (pure)

def parse_answer(text):
    """A PAC answer as plain data: JSON as it is, XML as the JSON PAC would have sent.

    XML becomes what the root element holds (PAC's JSON drops the root): children by tag, a
    repeated tag as a list, attributes as "@name", a leaf as its text. A DOCTYPE is refused, so no
    entity is ever expanded (PAC sends none; an HTML page of a proxy has one). None for no body.
    """
    text = (text or "").strip()
    if not text:
        return None
    if text[0] != "<":
        try:
            return json.loads(text)
        except ValueError:
            raise ShapeError("neither XML nor JSON")
    if "<!DOCTYPE" in text.upper() or "<!ENTITY" in text.upper():
        raise ShapeError("XML with a DOCTYPE, which PAC never sends")
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as exc:
        raise ShapeError("XML that does not parse (%s)" % exc)
    return {"@root": root.tag, "value": _element(root)}


def _element(node):
    children = list(node)
    if not children and not node.attrib:
        return (node.text or "").strip()
    result = dict(("@" + key, value) for key, value in node.attrib.items())
    if not children and node.text and node.text.strip():
        result["#text"] = node.text.strip()
    for child in children:
        value = _element(child)
        if child.tag not in result:
            result[child.tag] = value
        elif isinstance(result[child.tag], list):
            result[child.tag].append(value)
        else:
            result[child.tag] = [result[child.tag], value]
    return result


def unwrap(answer):
    """(root tag or None, body) of a parse_answer result."""
    if isinstance(answer, dict) and set(answer) == {"@root", "value"}:
        return answer["@root"], answer["value"]
    return None, answer


def records(body, record, wrapper):
    """The `record` objects of a list answer: {"@total", record: one or [many]}, maybe inside
    {wrapper: ...}, or a JSON list of them; an empty root element (<jobs/>) has none."""
    if body == "":
        return []
    if isinstance(body, list):
        body = {record: body}
    if not isinstance(body, dict):
        raise ShapeError("expected an object holding %s records, got %s" % (record, type(body).__name__))
    if wrapper in body:
        body = body[wrapper]
        if body == "":
            return []
        if not isinstance(body, dict):
            raise ShapeError("'%s' must be an object, got %s" % (wrapper, type(body).__name__))
    pseudo = "pseudo" + record[0].upper() + record[1:]
    if not set(body) & {record, pseudo, "@total"}:
        raise ShapeError("neither '%s' records nor '@total' in the answer" % record)
    found = []
    for key in (record, pseudo):
        value = body.get(key)
        if value in (None, ""):
            continue
        value = value if isinstance(value, list) else [value]
        if not all(isinstance(item, dict) for item in value):
            raise ShapeError("'%s' must hold objects" % key)
        found.extend(value)
    return found


def error_text(body):
    """PAC's message in an error answer: <error><message>, JSON message, legacy <errMsg>."""
    _root, value = unwrap(body)
    if isinstance(value, dict):
        for key in ("message", "errMsg", "error"):
            if isinstance(value.get(key), str) and value[key].strip():
                return value[key].strip()
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _text(value):
    if value is None or isinstance(value, (dict, list)):
        return None
    value = "%s" % (value,)
    return value.strip() or None


def _integer(value):
    text = _text(value)
    if text is None:
        return None
    try:
        return int(float(text))
    except ValueError:
        return None


TIME_FORMATS = ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y/%m/%d %H:%M:%S",
                "%a %b %d %H:%M:%S %Y", "%b %d %H:%M:%S %Y")


def parse_time(value):
    """An RFC 3339 time of PAC's epoch seconds or milliseconds, or a time text read as UTC (PAC
    names its submit time ...GMT); None when absent or unreadable."""
    text = _text(value)
    if text is None or text in ("0", "-1", "-"):
        return None
    if re.match(r"^\d+(\.\d+)?$", text):
        seconds = float(text)
        return rfc3339(seconds / 1000.0 if seconds > 1e11 else seconds)
    text = re.sub(r"\s+", " ", text)
    for pattern in TIME_FORMATS:
        try:
            return rfc3339(calendar.timegm(time.strptime(text, pattern)))
        except ValueError:
            continue
    return None


def short_state(status):
    """bjobs' short state name of PAC's jobStatus, whichever form this AC version prints."""
    state = (_text(status) or "").upper()
    if state in PHASE_BY_STATE:
        return state
    return next((short for long_form, short in LONG_STATES if state.startswith(long_form)), state or "UNKNOWN")


def term_reason(value):
    """TERM_* name of an exit reason: a name, a number, or a sentence starting with the name."""
    text = _text(value)
    if text is None:
        return None
    if text.isdigit():
        return TERM_CODES.get(int(text), "TERM_%s" % text)
    match = re.match(r"^(TERM_[A-Z_]+)", text.upper())
    return match.group(1) if match else None


def exit_code_of(value):
    """The job's exit code: PAC prints bjobs' exit code; a value over 255 is a raw wait status."""
    code = _integer(value)
    if code is None:
        return None
    return (code >> 8) & 0xFF if code > 255 else code


def identity_of(description):
    text = _text(description)
    if text and text.startswith(TAG_PREFIX):
        return text[len(TAG_PREFIX):]
    return None


def normalize_job(native):
    """A PAC job record (detailed <job> or basic <pseudoJob>, XML or JSON) as Bridge's job dict."""
    if not isinstance(native, dict):
        raise ShapeError("a job must be an object, got %s" % type(native).__name__)
    job_id = _text(native.get("jobId", native.get("id")))
    if job_id is None:
        raise ShapeError("a job without jobId")
    state = short_state(native.get("jobStatus"))
    phase = PHASE_BY_STATE.get(state, "queued")
    terminal = phase in TERMINAL_PHASES
    term = term_reason(native.get("exitInfo"))
    exit_code = exit_code_of(native.get("exitStatus")) if terminal else None
    reason = _text(native.get("pendReason")) if phase == "queued" else None
    failure_class = None
    if state == "PERR":
        reason = "post-execution processing failed"
    if state in ("UNKWN", "ZOMBI"):
        failure_class = "node_failure"
    elif phase == "failed":
        failure_class = FAILURE_BY_TERM.get(term, "non_zero_exit")
        reason = _text(native.get("exitInfo")) or reason
        if failure_class == "cancelled":
            # bkill ends a job EXIT like any failure; Bridge's phases tell a killed job apart.
            phase = "cancelled"
    elif phase == "queued" and reason and HOPELESS_REASONS.search(reason):
        failure_class = "rejected"
    if state in STATE_REASONS and not reason:
        reason = STATE_REASONS[state]
    if phase == "completed":
        exit_code = exit_code or 0
    return {
        "job_id": job_id,
        "name": _text(native.get("jobName")),
        "identity": identity_of(native.get("description")),
        "phase": phase,
        "terminal": terminal,
        "native_state": state,
        "suspended": state in ("PSUSP", "USUSP", "SSUSP"),
        "reason": reason,
        "exit_code": exit_code,
        "signal": None,
        "failure_class": failure_class,
        "submit_time": parse_time(native.get("submitTimeGMT", native.get("submitTime"))),
        "start_time": parse_time(native.get("startTime")) if phase != "queued" else None,
        "end_time": parse_time(native.get("endTime")) if terminal else None,
        "queue": _text(native.get("queue")),
        "hosts": _text(native.get("exHosts")),
        "user": _text(native.get("user")),
        "working_directory": _text(native.get("cwd")),
        "stdout": _text(native.get("outfile")),
        "native": native,
    }


def _limit(value):
    """The text of a limit; None when there is none ("-", "unlimited" or absent)."""
    text = _text(value)
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
    name = _text(native.get("queueName"))
    if name is None:
        raise ShapeError("a queue without queueName")
    status = _text(native.get("status")) or ""
    lowered = status.lower()
    slots = _integer(native.get("maxNumJobSlots"))
    return {
        "name": name,
        "status": status,
        "open": "closed" not in lowered,
        "active": "inact" not in lowered,
        "priority": _integer(native.get("priority")),
        "max_slots": slots if slots and slots > 0 else None,
        "run_limit_minutes": minutes(native.get("runLimit")),
        "memory_limit_mb": memory_mb(native.get("memLimit")),
        "pending": _integer(native.get("numPend")),
        "running": _integer(native.get("numRun")),
        "hosts": _text(native.get("hosts")),
        "description": _text(native.get("queueDescription")),
        "native": native,
    }


def normalize_host(native):
    if not isinstance(native, dict):
        raise ShapeError("a host must be an object")
    name = _text(native.get("hostName"))
    if name is None:
        raise ShapeError("a host without hostName")
    static = dict((_text(item.get("name")), item.get("value"))
                  for item in records(native.get("staticResources") or "", "staticResource", "staticResources"))
    status = _text(native.get("hostStatus", native.get("status"))) or "unknown"
    return {
        "name": name,
        "status": status.lower(),
        "usable": status.lower() in ("ok", "closed_full", "closed_excl", "closed_busy"),
        "ncpus": _integer(native.get("maxCpus", static.get("nCpus", static.get("ncpus")))),
        # MXJ (lsb.hosts): job slots, which may differ from CPUs; None when not reported.
        "max_slots": _integer(native.get("maxJobs")),
        "max_memory_mb": memory_mb(native.get("maxMem", static.get("maxMem"))),
        "model": _text(static.get("hostModel")),
        "type": _text(static.get("hostType")),
        "native": native,
    }


def check_fits(spec, queues, hosts=()):
    """Refuse a job the queue would refuse or keep pending forever: unknown or closed queue, more
    slots, minutes or memory than its limits, or a shape no host of the queue can hold."""
    if not queues:
        check_hosts(spec, hosts)
        return
    by_name = dict((q["name"], q) for q in queues)
    options = dict((option, value) for option, value, _field in compile_options(spec))
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
    slots = _integer(options.get("-n")) or 1
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
    slots, span = _slots(resources)
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


# ---------------------------------------------------------------- the client

class LsfClient(Backend):
    """Domain verbs over LSF Application Center's RESTful web services."""

    NAME = "lsf"
    TITLE = MANAGER
    URL_NAME = "the LSF Application Center URL"
    CONNECTION = dict(user=dict(type="str"), password=dict(type="str"))
    ENV = dict(url=("LSF_PAC_URL",), user=("LSF_USER",), password=("LSF_PASSWORD",))
    CREDENTIALS = ("user", "password")
    SECRETS = ("password",)
    CAPABILITIES = frozenset(["queues", "accounts", "multi_node", "gpu_type", "output_paths", "preflight"])

    @classmethod
    def from_options(cls, get):
        return cls(cls.require_url(get("url")), user=get("user"), password=get("password"),
                   **cls.transport_options(get))

    def __init__(self, url, user=None, password=None, validate_certs=True, ca_path=None, timeout=30.0, retries=3,
                 transport=None, clock=time.time):
        self.url = url.rstrip("/")
        self.user = user
        self.password = password
        self.transport = transport or Transport(
            self.url, MANAGER, headers={"Accept": "application/json"}, secrets=[password],
            validate_certs=validate_certs, ca_path=ca_path, timeout=timeout, retries=retries)
        if password and password not in self.transport.secrets:
            self.transport.secrets.append(password)
        self.clock = clock
        self.warnings = []
        self._cookie = None
        self._expires = None
        self._queues = None
        self._hosts = None

    # -- plumbing

    def logon(self):
        """Trade user and password for a token: POST /ws/logon, XML body, JSON or XML answer."""
        if not self.user or not self.password:
            missing = " and ".join(name for name, value in (("user", self.user), ("password", self.password))
                                   if not value)
            raise AuthFailed("%s required: Application Center at %s takes a user name and password" % (
                missing + (" are" if " and " in missing else " is"), self.url), manager=MANAGER, url=self.url)
        body = "<User><name>%s</name><pass>%s</pass></User>" % (escape(self.user), escape(self.password))
        response = self.transport.request("POST", "/ws/logon", content=body.encode("utf-8"),
                                          headers={"Content-Type": "application/xml"}, idempotent=True,
                                          verb="log on", obj="user", ident=self.user)
        if response.status_code >= 400:
            reason = self._reason(response)
            if response.status_code in (400, 401, 403):
                raise AuthFailed("authentication failed: %s" % reason, "log on", "user", self.user, MANAGER, self.url,
                                 response.status_code)
            self._raise(response, reason, "log on", "user", self.user)
        token = self._answer(response, "log on", "user", self.user, _token)
        # The token is user"expiry"signature...; PAC wants every " as the literal #quote#.
        self.transport.secrets.extend([token, token.replace('"', QUOTE)])
        self._cookie = "%s=%s" % (COOKIE, token.replace('"', QUOTE))
        self._expires = token_expiry(token)
        return token

    def _call(self, method, path, verb, obj, ident=None, parse=None, content=None, content_type=None, params=None,
              idempotent=None, empty_on_404=False):
        """One authenticated request; logs on first, and once more when PAC refuses the token.

        A refused token means the request was not carried out, so sending it again after a new
        logon cannot duplicate it, even for a submit.
        """
        for attempt in (1, 2):
            if self._cookie is None or (self._expires and self.clock() >= self._expires):
                self.logon()
            headers = {"Cookie": self._cookie}
            if content_type:
                headers["Content-Type"] = content_type
            response = self.transport.request(method, path, params=params, content=content, headers=headers,
                                              idempotent=idempotent, verb=verb, obj=obj, ident=ident)
            if response.status_code in (401, 403) and attempt == 1:
                self._cookie = None
                continue
            break
        if response.status_code == 404 and empty_on_404:
            return []
        if response.status_code >= 400:
            self._raise(response, self._reason(response), verb, obj, ident)
        return self._answer(response, verb, obj, ident, parse)

    def _answer(self, response, verb, obj, ident, parse=None):
        endpoint = "%s %s" % (response.request.method, response.request.url.path)
        answer = decode(parse_answer, response.text, endpoint, MANAGER, self.url, verb, obj, ident)
        root, value = unwrap(answer)
        if root in ("error", "errMsg"):
            # PAC may answer a refusal with 200 and an XML error body.
            raise Rejected(self.transport.scrub(error_text(answer) or "refused without a message"),
                           verb, obj, ident, MANAGER, self.url, response.status_code)
        return decode(parse, value, endpoint, MANAGER, self.url, verb, obj, ident) if parse else value

    def _reason(self, response):
        """PAC's message in an error answer: <error>, legacy <errMsg>, or a JSON object.

        Of another body (an HTML page, a text, other XML) only the HTTP status is said: it may be
        any page of the server a URL points at, which must not be read back to whoever chose it.
        """
        try:
            answer = parse_answer(response.text)
        except ValueError:
            answer = None
        root, value = unwrap(answer)
        message = None
        if root in ("error", "errMsg") or (root is None and isinstance(value, dict)):
            message = error_text(answer)
        return self.transport.scrub(message or status_phrase(response.status_code))[:500]

    def _raise(self, response, reason, verb, obj, ident):
        status = response.status_code
        if status in (401, 403) and re.search(r"token|log ?on|login|authenticat|session", reason, re.IGNORECASE):
            raise AuthFailed("authentication failed: %s" % reason, verb, obj, ident, MANAGER, self.url, status)
        raise error_for_status(status)(reason, verb, obj, ident, MANAGER, self.url, status)

    # -- domain verbs

    def describe(self):
        """Logs on: only Application Center answers a logon with a token."""
        self.logon()
        return {"manager": MANAGER, "url": self.url, "version": None, "api_version": None, "user": self.user}

    @classmethod
    def launcher(cls, spec):
        """blaunch for more than one task; nothing for one, which the job script itself is.

        Without host names blaunch starts one task per job slot on the allocated hosts, and a task
        of cpus_per_task CPUs holds that many slots (_slots), so that count cannot launch one task
        per slot."""
        resources = spec["resources"]
        slots, _span = _slots(resources)
        cpus = resources["cpus_per_task"] or 1
        if not slots or slots == cpus:
            return ""
        if cpus > 1:
            raise SpecError("resources.cpus_per_task", "$(LAUNCHER) is blaunch, which starts one task per job slot, "
                            "and LSF gives a task of %d CPUs %d slots; launch several multi-CPU tasks yourself "
                            "(mpirun, or blaunch -z with a host list), or ask for 1 CPU per task" % (cpus, cpus))
        return "blaunch"

    def render(self, spec):
        return compile_lsf(with_launcher(self, spec))

    def submit(self, spec):
        """POST the job once through the generic template; never retried. If no answer arrives,
        look the identity up before giving up."""
        content_type, body = multipart_body(self.render(spec))
        try:
            return self._call("POST", "/ws/jobs/submit", "submit", "job", spec["name"], parse=_submitted_id,
                              content=body, content_type=content_type, idempotent=False)
        except (ConnectionFailed, Timeout) as exc:
            existing = self.find(spec["identity"])
            if existing is not None:
                return existing["job_id"]
            raise type(exc)(exc.reason + "; the submission may not have reached LSF and was not retried "
                            "(no job with identity '%s' exists now)" % spec["identity"],
                            exc.verb, exc.obj, exc.ident, exc.manager, exc.url, exc.status)

    def get(self, job_id):
        jobs = self._call("GET", "/ws/jobs/%s" % job_id, "get", "job", job_id, parse=_jobs)
        if not jobs:
            raise NotFound("no such job", "get", "job", job_id, MANAGER, self.url)
        return jobs[0]

    def list(self, identities=None, name=None, phases=None):
        """The caller's jobs, finished ones within LSF's CLEAN_PERIOD included, in detail (the
        description carries the identity); PAC answers 404 when there are none."""
        jobs = self._call("GET", "/ws/jobs/fullinfo", "list", "jobs", parse=_jobs, empty_on_404=True)
        return select(jobs, identities, name, phases)

    def find_many(self, identities, names=None):
        """{identity: job} for those identities that have a job, from one list request."""
        return newest_by_identity(self.list(identities=identities), self.warnings)

    def cancel(self, job_id):
        """Kill a job: POST /ws/jobs/kill (form ids=); where that endpoint is not served (404, 405
        or 501 without a "no such job" message), bkill through POST /ws/userCmd. A finished job
        stays as it is."""
        try:
            try:
                message = self._call("POST", "/ws/jobs/kill", "cancel", "job", job_id, parse=_message,
                                     content=("ids=%s" % job_id).encode(), idempotent=True,
                                     content_type="application/x-www-form-urlencoded")
            except (NotFound, ServerError) as exc:
                if exc.status not in (404, 405, 501) or _BKILL_NO_JOB.search(exc.reason):
                    raise
                command = "<UserCmd><cmd>bkill %s</cmd></UserCmd>" % escape(job_id)
                message = self._call("POST", "/ws/userCmd", "cancel", "job", job_id, parse=_message,
                                     content=command.encode(), content_type="application/xml", idempotent=True)
        except (Rejected, ServerError) as exc:
            # Some refusals of a kill only say the job has finished, which is what cancel wants.
            if _BKILL_FINISHED.search(exc.reason):
                return
            raise
        if message and _BKILL_NO_JOB.search(message):
            raise NotFound(message, "cancel", "job", job_id, MANAGER, self.url)

    def queues(self):
        return self._call("GET", "/ws/queues", "list", "queues",
                          parse=lambda body: [normalize_queue(q) for q in records(body, "queue", "queues")])

    def hosts(self):
        return self._call("GET", "/ws/hosts", "list", "hosts",
                          parse=lambda body: [normalize_host(h) for h in records(body, "host", "hosts")])

    def inventory(self):
        return {"queues": self.queues(), "hosts": self.hosts()}

    def check(self, spec):
        # Queues and hosts are read once per client: a batch of jobs is checked against one view.
        if self._queues is None:
            self._queues = self.queues()
        if self._hosts is None:
            try:
                self._hosts = self.hosts()
            except (NotFound, Rejected):
                # A site may not let users list hosts; the queues still say enough to check.
                self._hosts = []
        check_fits(spec, self._queues, self._hosts)


# bkill's (and PAC's) words for a job id LSF does not know; "Not Found" alone is the HTTP reason
# phrase of an endpoint that is not there.
_BKILL_NO_JOB = re.compile(r"no matching job|job <?\d+(\[\d+\])?>?:? (is )?not found|no such job", re.IGNORECASE)
_BKILL_FINISHED = re.compile(r"already finished", re.IGNORECASE)


def token_expiry(token):
    """Epoch of the expiry a token carries between its first two double quotes, or None."""
    match = re.match(r'^[^"]*"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)"', token)
    if not match:
        return None
    return calendar.timegm(time.strptime(match.group(1), "%Y-%m-%dT%H:%M:%SZ"))


def _token(body):
    if not isinstance(body, dict) or not isinstance(body.get("token"), str) or not body["token"]:
        raise ShapeError("no 'token' string, so not Application Center's logon answer")
    return body["token"]


def _submitted_id(body):
    """The new job's id: JSON {"id": 1234}, XML <Job><id>1234</id></Job>, or a bare <id>."""
    if isinstance(body, dict):
        job_id = body.get("id", body.get("jobId"))
        if job_id is None and error_text(body):
            raise ShapeError("no job id but a message")
    else:
        job_id = body
    text = _text(job_id)
    if text is None or not re.match(r"^\d+(\[\d+\])?$", text):
        raise ShapeError("the job id must be a number")
    return text


def _jobs(body):
    return [normalize_job(job) for job in records(body, "job", "jobs")]


def _message(body):
    """The text of an action's answer: <cmdMsg>, <actionMsg>, a JSON message, or nothing."""
    if body is None or isinstance(body, str):
        return body
    if not isinstance(body, dict):
        raise ShapeError("expected an object or a text, got %s" % type(body).__name__)
    for key in ("cmdMsg", "actionMsg", "message", "msg"):
        if isinstance(body.get(key), str):
            return body[key]
    return json.dumps(body, sort_keys=True)[:500]
