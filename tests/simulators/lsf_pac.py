"""A SIMULATOR of IBM Spectrum LSF Application Center (PAC) web services, for Bridge's tests.

It is not PAC and not LSF: a stdlib HTTP server on 127.0.0.1 that speaks the PAC protocol as the
shared docs describe it (docs external-apis.md §2, quantum-lsf.md §B) and really runs the submitted
scripts as local processes of the current user. Every behaviour names the IBM doc page it follows
("IBM: <page>", pages of "LSF Application Center 10.2 - RESTful web service reference") or the
third-party client it was read from; "docs silent" marks a choice of this simulator.

    python tests/simulators/lsf_pac.py --port 0 --state-dir DIR --users alice:secret
    with LsfPacSimulator(state_dir, users={"alice": "secret"}) as sim: ... sim.url ...

Only paths under /platform (PAC's default context root, external-apis.md §2) are served.
"""

import argparse
import base64
import collections
import hashlib
import hmac
import json
import os
import pwd
import re
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler
from xml.etree import ElementTree

# The simulators' shared HTTP pieces, next to this file: a sibling module when imported from tests/
# (simulators.lsf_pac), a top-level one when run as a script (its folder is then on sys.path).
if __package__:
    from .simhttp import AccessLogServer, InProcess, serve, utc
else:
    from simhttp import AccessLogServer, InProcess, serve, utc

ROOT = "/platform"
JSON_TYPE = "application/json"
XML_TYPE = "application/xml"
# LSF reports memory limits in LSF_UNIT_FOR_LIMITS; docs silent on the site value, the simulator uses MB.
UNIT_FOR_LIMITS = "MB"

# IBM: LSF admin guide "About job states"; PAC's ws API carries the bjobs short names (external-apis.md §2.6).
PEND, RUN, DONE, EXIT = "PEND", "RUN", "DONE", "EXIT"
# The legacy pacclient API shows long names (lsf-faas lsflib.py reads <status>Done|Exit</status>).
LONG_STATUS = {PEND: "Pending", RUN: "Running", DONE: "Done", EXIT: "Exit"}

# LSF pending reasons and termination reasons (lsbatch.h TERM_* names); texts follow bjobs -l output.
REASON_QUEUE_INACTIVE = "The queue is inactivated by the administrator"
REASON_QUEUE_SLOTS = "The queue has reached its job slot limit"
REASON_HOST_SLOTS = "Not enough job slot(s)"
# lsb_pendreason(): PEND_JOB_DEPEND and PEND_JOB_DEP_INVALID (LSF API reference, "lsb_pendreason").
REASON_DEPEND = "The job is waiting for its dependency condition(s) to be satisfied"
REASON_DEP_NEVER = "The dependency condition is invalid or never satisfied"

DEFAULT_QUEUES = {
    # normal: the default queue, open and active, no limits but its slots.
    "normal": {"status": "Open:Active", "slots": 4, "priority": 30, "default": True,
               "description": "For normal low priority jobs, running only if hosts are lightly loaded."},
    # short: RUNLIMIT 1 minute and MEMLIMIT 256 MB, 2 slots.
    "short": {"status": "Open:Active", "slots": 2, "priority": 40, "runlimit": 1, "memlimit": 256,
              "description": "Short jobs: run limit 1 minute, memory limit 256 MB."},
    # inactive (badmin qinact): accepts jobs that then pend forever with a pending reason.
    "inactive": {"status": "Open:Inact", "slots": 4, "priority": 20,
                 "description": "Inactivated by the administrator: jobs stay pending."},
    # closed (badmin qclose): refuses new jobs.
    "closed": {"status": "Closed:Inact", "slots": 4, "priority": 20,
               "description": "Closed by the administrator: no new jobs."},
}


class PacError(Exception):
    """An error PAC answers with: HTTP status and message (rendered as <error><message> or JSON message)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


# Docs silent on the time format of startTime/endTime; utc() writes the token's own format (IBM: "Log
# on (POST)" example u"2015-12-08T14:35:51Z") for all times.


# ---------------------------------------------------------------------------------------------
# XML and JSON rendering: JSON mirrors the XML element names (external-apis.md §2), attributes as
# "@name" (the Bridge Operator's LSF pod reads "@total"), every value a string.
# ---------------------------------------------------------------------------------------------
def to_element(tag, value):
    element = ElementTree.Element(tag)
    if isinstance(value, dict):
        for key, item in value.items():
            if key.startswith("@"):
                element.set(key[1:], str(item))
            elif isinstance(item, list):
                element.extend(to_element(key, one) for one in item)
            else:
                element.append(to_element(key, item))
    elif value is not None:
        element.text = str(value)
    return element


def to_json_value(value):
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if isinstance(item, list):
                # Docs silent; JSON mapped from XML (Jersey) gives one element as an object and
                # several as an array: the pod reads "job" as an object for one id.
                if not item:
                    continue
                item = to_json_value(item[0]) if len(item) == 1 else [to_json_value(i) for i in item]
                out[key] = item
            else:
                out[key] = to_json_value(item)
        return out
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


class Reply(object):
    """What a handler answers: a root element name, its content and the HTTP status."""

    def __init__(self, root, content, status=200, raw_json=None):
        self.root, self.content, self.status, self.raw_json = root, content, status, raw_json

    def render(self, want_json):
        if want_json:
            payload = self.raw_json if self.raw_json is not None else to_json_value(self.content)
            if not isinstance(self.content, dict) and self.raw_json is None:
                payload = {self.root: self.content}
            return JSON_TYPE, json.dumps(payload).encode()
        body = ElementTree.tostring(to_element(self.root, self.content), encoding="unicode")
        return XML_TYPE, ('<?xml version="1.0" encoding="UTF-8"?>' + body).encode()


def error_reply(status, message):
    # IBM: "Log on (POST)" and the other ws pages: errors are <error><message>..</message></error>;
    # JSON {"message": ..} when JSON was asked for (external-apis.md §2.1, §2.2).
    return Reply("error", {"message": message}, status, raw_json={"message": message})


def legacy_error(message, status=200):
    # Legacy pacclient API: errors in <errMsg> with HTTP 200 (lsf-faas lsflib.py reads errMsg on 200).
    return Reply("errMsg", message, status)


# ---------------------------------------------------------------------------------------------
# Multipart (IBM: "Submit a job (POST)": nested multipart/mixed, external-apis.md §2.2)
# ---------------------------------------------------------------------------------------------
def boundary_of(content_type):
    match = re.search(r'boundary="?([^";]+)"?', content_type or "")
    return match.group(1).encode() if match else None


def split_multipart(body, boundary, require_close=True):
    """Parts (headers dict with lower-case names, payload bytes) of a multipart body; payloads are
    byte-exact (the CRLF before a delimiter belongs to the delimiter, RFC 2046)."""
    delim = b"--" + boundary
    if body.startswith(delim):
        pos = 0
    else:
        pos = body.find(b"\r\n" + delim)
        if pos < 0:
            raise PacError(400, "Bad multipart request: no part delimited by boundary %s" % boundary.decode())
        pos += 2
    parts = []
    while True:
        pos += len(delim)
        if body[pos:pos + 2] == b"--":
            return parts
        eol = body.find(b"\r\n", pos)
        if eol < 0:
            raise PacError(400, "Bad multipart request: truncated part")
        start = eol + 2
        end = body.find(b"\r\n" + delim, start)
        if end < 0:
            if require_close:
                raise PacError(400, "Bad multipart request: no closing delimiter --%s--" % boundary.decode())
            # The Bridge Operator's LSF pod writes its file AppParams with the outer boundary, which
            # leaves the inner data part without its close delimiter; PAC accepted that pod's requests.
            parts.append(parse_part(body[start:].rstrip(b"\r\n")))
            return parts
        parts.append(parse_part(body[start:end]))
        pos = end + 2


def parse_part(raw):
    if raw.startswith(b"\r\n"):
        head, payload = b"", raw[2:]
    else:
        cut = raw.find(b"\r\n\r\n")
        if cut < 0:
            raise PacError(400, "Bad multipart request: a part has no header end")
        head, payload = raw[:cut], raw[cut + 4:]
    headers = {}
    for line in head.decode("utf-8", "replace").split("\r\n"):
        name, sep, value = line.partition(":")
        if not sep:
            raise PacError(400, "Bad multipart request: malformed part header %r" % line[:80])
        headers[name.strip().lower()] = value.strip()
    return headers, payload


def disposition(headers, key):
    match = re.search(r'\b%s="([^"]*)"' % key, headers.get("content-disposition", ""))
    return match.group(1) if match else None


def parse_app_param(payload):
    # <AppParam><id>NAME</id><value>V</value><type>[file]</type></AppParam> (IBM: "Submit a job (POST)").
    match = re.search(rb"<AppParam>.*</AppParam>", payload, re.S)
    if not match:
        raise PacError(400, "Bad multipart request: a parameter part holds no <AppParam>")
    try:
        element = ElementTree.fromstring(match.group(0))
    except ElementTree.ParseError as exc:
        raise PacError(400, "Bad multipart request: AppParam is not XML (%s)" % exc)
    return {child: (element.findtext(child) or "") for child in ("id", "value", "type")}


def parse_submission(content_type, body):
    """AppName, the AppParams by id and the attached files by every name they may be referred by."""
    if not (content_type or "").lower().startswith("multipart/mixed"):
        raise PacError(400, "Bad request: Content-Type must be multipart/mixed, not %r" % content_type)
    boundary = boundary_of(content_type)
    if not boundary:
        raise PacError(400, "Bad multipart request: Content-Type has no boundary")
    app_name, params, files = None, {}, {}
    for headers, payload in split_multipart(body, boundary):
        name = disposition(headers, "name")
        ctype = headers.get("content-type", "").lower()
        if name == "AppName":
            app_name = payload.decode("utf-8").strip()
        elif ctype.startswith("multipart/mixed"):
            inner = boundary_of(ctype and headers["content-type"])
            if not inner:
                raise PacError(400, "Bad multipart request: the data part has no boundary")
            for inner_headers, inner_payload in split_multipart(payload, inner, require_close=False):
                param = parse_app_param(inner_payload)
                params[param["id"]] = param
        elif ctype.startswith("application/xml") or ctype.startswith("text/xml"):
            param = parse_app_param(payload)
            params[param["id"]] = param
        else:
            # A file attachment (Content-Type application/octet-stream, Content-ID <f>); referred to by
            # its file name, its part name or its Content-ID.
            filename = disposition(headers, "filename") or name
            if not filename:
                raise PacError(400, "Bad multipart request: an attachment has no name")
            content_id = urllib.parse.unquote(headers.get("content-id", "").strip("<>"))
            for key in {filename, name, content_id} - {None, ""}:
                files[key] = (os.path.basename(filename), payload)
    if not app_name:
        raise PacError(400, "Bad multipart request: no AppName part")
    return app_name, params, files


# ---------------------------------------------------------------------------------------------
# bsub options (EXTRA_PARAMS of the generic template, external-apis.md §2.2)
# ---------------------------------------------------------------------------------------------
# Options that take a value and are stored, and options accepted and ignored (no effect here).
# bsub -M takes a number in LSF_UNIT_FOR_LIMITS (MB here) or a number with a unit, such as 100MB or
# 4G ("bsub -M", IBM Spectrum LSF command reference: "you can specify a unit for the limit").
MEMORY_UNITS_MB = {"": 1.0, "K": 1.0 / 1024, "KB": 1.0 / 1024, "M": 1.0, "MB": 1.0, "G": 1024.0, "GB": 1024.0,
                   "T": 1024.0 ** 2, "TB": 1024.0 ** 2}


def parse_memory_limit(text):
    """Megabytes of a -M value; ValueError for anything else."""
    match = re.match(r"^(\d+(?:\.\d+)?)\s*([KMGT]?B?)!?$", text.strip(), re.IGNORECASE)
    if not match:
        raise ValueError(text)
    return int(float(match.group(1)) * MEMORY_UNITS_MB[match.group(2).upper()])


BSUB_VALUE_OPTIONS = {"-q", "-n", "-W", "-M", "-R", "-P", "-J", "-Jd", "-o", "-oo", "-e", "-eo", "-cwd",
                      "-env", "-gpu", "-G", "-g", "-sla", "-app", "-w", "-m", "-u", "-L", "-We", "-c",
                      "-nnodes", "-sp", "-ptl", "-E", "-Ep", "-alloc_flags", "-outdir", "-v", "-S"}
BSUB_FLAGS = {"-x", "-B", "-N", "-r", "-rn", "-I", "-K", "-H"}


def parse_bsub(extra):
    try:
        words = shlex.split(extra)
    except ValueError as exc:
        raise PacError(400, "Bad EXTRA_PARAMS %r: %s" % (extra, exc))
    options = {}
    i = 0
    while i < len(words):
        word = words[i]
        if word in BSUB_FLAGS:
            options[word] = True
        elif word in BSUB_VALUE_OPTIONS:
            if i + 1 >= len(words):
                raise PacError(400, "bsub: option %s needs a value. Job not submitted." % word)
            i += 1
            options[word] = words[i]
        else:
            raise PacError(400, "bsub: illegal option -- %s. Job not submitted." % word.lstrip("-"))
        i += 1
    return options


def parse_runlimit(text):
    # bsub -W [hour:]minute (LSF bsub reference; docs external-apis.md §2.2 name -W "runtime").
    match = re.fullmatch(r"(?:(\d+):)?(\d+)", text.strip())
    if not match:
        raise PacError(400, "%s: Bad RUNLIMIT specification. Job not submitted." % text)
    return int(match.group(1) or 0) * 60 + int(match.group(2))


# bsub -w: "done(ID)", "exit(ID)", "ended(ID)", "started(ID)" or a bare ID (= done), joined by
# "&&" (LSF bsub -w reference, "Dependency conditions"); job names, "||", "!" and exit-code
# comparisons are not simulated and refused.
DEPENDENCY = re.compile(r"^\s*(?:(done|exit|ended|started)\(\s*(\d+)\s*\)|(\d+))\s*$")


def parse_dependency(text):
    conditions = []
    for part in text.split("&&"):
        match = DEPENDENCY.match(part)
        if not match:
            raise PacError(400, "%s: Dependency condition syntax error (only done/exit/ended/started(ID) "
                                "joined by && are simulated). Job not submitted." % text)
        conditions.append((match.group(1) or "done", int(match.group(2) or match.group(3))))
    return conditions


def dependency_state(condition, job):
    """True (met), False (waiting) or None (can never be met) for one condition on `job`."""
    kind, _job_id = condition
    if job is None:
        # The job was forgotten (CLEAN_PERIOD); docs silent: the simulator says never satisfied.
        return None
    finished = job.status in (DONE, EXIT)
    if kind == "started":
        if job.start_time is not None:
            return True
        return None if finished else False
    if not finished:
        return False
    wanted = {"done": (DONE,), "exit": (EXIT,), "ended": (DONE, EXIT)}[kind]
    return True if job.status in wanted else None


# bsub -J "name[index_list]%job_slot_limit" (IBM: LSF command reference "bsub -J", admin guide "Job
# arrays"): index_list is start[-end[:step]] joined by commas, positive integers, the largest at
# most MAX_JOB_ARRAY_SIZE (lsb.params, default 1000), the whole specification at most 255 characters.
ARRAY_SPEC = re.compile(r"^(?P<name>[^\[\]]*)\[(?P<indexes>[^\[\]]*)\](?:%(?P<limit>\d+))?$")
ARRAY_PART = re.compile(r"^\s*(\d+)(?:-(\d+)(?::(\d+))?)?\s*$")
MAX_ARRAY_SPEC = 255
DEFAULT_MAX_JOB_ARRAY_SIZE = 1000
# lsb_pendreason(): PEND_JOB_ARRAY_JLIMIT, an element held back by the array's %job_slot_limit.
REASON_ARRAY_LIMIT = "The job array has reached its running element limit"


def parse_array(spec, max_size):
    """(name, [indexes], running-element limit or None) of a -J value, None for a plain job name.

    Docs silent on bsub's exact messages for a bad index list; the simulator's say what is wrong."""
    if "[" not in spec:
        return None
    match = ARRAY_SPEC.match(spec)
    if not match:
        raise PacError(400, "%s: Bad job name. Job not submitted." % spec)
    if len(spec) > MAX_ARRAY_SPEC:
        raise PacError(400, "%s...: Job array specification longer than %d characters. Job not submitted." % (
            spec[:40], MAX_ARRAY_SPEC))
    indexes = set()
    for part in match.group("indexes").split(","):
        found = ARRAY_PART.match(part)
        if not found:
            raise PacError(400, "%s: Bad job array index list. Job not submitted." % spec)
        start = int(found.group(1))
        end = int(found.group(2) or start)
        step = int(found.group(3) or 1)
        if start < 1 or end < start or step < 1:
            raise PacError(400, "%s: Bad job array index list: indexes are positive integers, start <= end. "
                                "Job not submitted." % spec)
        if end > max_size:
            raise PacError(400, "%s: Job array index too large: the largest index is MAX_JOB_ARRAY_SIZE (%d). "
                                "Job not submitted." % (spec, max_size))
        indexes.update(range(start, end + 1, step))
    limit = int(match.group("limit")) if match.group("limit") is not None else None
    if limit == 0:
        raise PacError(400, "%s: Bad job array running element limit. Job not submitted." % spec)
    return match.group("name"), sorted(indexes), limit


def parse_env(spec, base):
    # bsub -env "none" | "all[, ~name][, name=value]" | "name=value[, ...]" (LSF bsub -env reference;
    # not in the shared docs). Bare names would copy the submitter's value: there is none here.
    env = dict(base)
    for item in [s.strip() for s in spec.split(",") if s.strip()]:
        if item == "none":
            env = {}
        elif item == "all":
            continue
        elif item.startswith("~"):
            env.pop(item[1:], None)
        elif "=" in item:
            name, value = item.split("=", 1)
            env[name.strip()] = value
    return env


# ---------------------------------------------------------------------------------------------
# The cluster: queues, one host, jobs that run as local processes
# ---------------------------------------------------------------------------------------------
class Job(object):
    def __init__(self, job_id, user, **fields):
        self.id = job_id
        self.user = user
        self.status = PEND
        self.pend_reason = ""
        self.submit_time = time.time()
        self.start_time = self.end_time = None
        self.exit_status = None
        self.exit_info = ""
        self.process = None
        self.kill_reason = None
        self.kill_deadline = None
        self.max_mem_mb = 0
        # A job array: its elements by index (Job objects of their own, the array's id and an
        # index), the array's running-element limit; an element knows its array and index.
        self.elements = None
        self.element_limit = None
        self.array = None
        self.index = 0
        self.__dict__.update(fields)

    @property
    def ref(self):
        """The id bjobs shows: 1234, or 1234[3] for an element of an array."""
        return "%d[%d]" % (self.id, self.index) if self.array is not None else str(self.id)

    def units(self):
        """What runs of this job: its elements for an array, else the job itself."""
        return list(self.elements.values()) if self.elements is not None else [self]


class Cluster(object):
    def __init__(self, state_dir, queues=None, host_slots=4, minute_seconds=60.0, clean_period=3600.0,
                 kill_grace=1.0, tick=0.1, as_users=None,
                 max_job_array_size=DEFAULT_MAX_JOB_ARRAY_SIZE):
        self.max_job_array_size = max_job_array_size
        self.state_dir = os.path.abspath(state_dir)
        self.spool = os.path.join(self.state_dir, "spool")
        os.makedirs(self.spool, exist_ok=True)
        self.queues = {name: dict(q) for name, q in (queues or DEFAULT_QUEUES).items()}
        self.host = socket.gethostname()
        self.host_slots = host_slots
        self.minute = float(minute_seconds)
        self.clean_period = float(clean_period)
        self.kill_grace = kill_grace
        self.tick = tick
        # LSF runs a job as the user who submitted it (sbatchd switches to that uid). The simulator
        # does too when it runs as root and the LSF user is a local account; otherwise jobs run as
        # the simulator's own user (in-process unit tests with made-up user names).
        self.as_users = os.geteuid() == 0 if as_users is None else as_users
        self.jobs = collections.OrderedDict()
        self.next_id = 1
        self.lock = threading.RLock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="lsf-pac-scheduler", daemon=True)

    def account(self, user):
        """The local account a job of `user` runs as, or None to run it as the simulator's user."""
        if not self.as_users:
            return None
        try:
            return pwd.getpwnam(user)
        except KeyError:
            return None

    def give(self, account, *paths):
        """Hand what the simulator made for a job to the job's user."""
        if account is not None:
            for path in paths:
                os.chown(path, account.pw_uid, account.pw_gid)

    # -- submit ------------------------------------------------------------------------------
    def default_queue(self):
        # DEFAULT_QUEUE (lsb.params); a queues file without a default falls back to its first queue.
        return next((name for name, q in self.queues.items() if q.get("default")), next(iter(self.queues)))

    def submit(self, user, app_name, params, files):
        # IBM: "Submit a job (POST)": jobs go through a published application template; this
        # simulator publishes only the built-in "generic" one.
        if app_name.split(":")[0] != "generic":
            raise PacError(400, "Application %s is not published. Only generic is available." % app_name)
        values = {pid: p["value"] for pid, p in params.items() if p["type"] != "file"}
        command = values.get("COMMANDTORUN", "").strip()
        if not command:
            raise PacError(400, "COMMANDTORUN is required by the generic template.")
        options = parse_bsub(values.get("EXTRA_PARAMS", ""))
        # Template parameters of the generic template (external-apis.md §2.2, quantum-lsf.md §B2);
        # docs silent on a clash with EXTRA_PARAMS: EXTRA_PARAMS comes last on the bsub line and wins.
        for pid, option in (("JOB_NAME", "-J"), ("OUTPUT_FILE", "-o"), ("ERROR_FILE", "-e"), ("QUEUE", "-q")):
            if values.get(pid) and option not in options:
                options[option] = values[pid]
        array = parse_array(options["-J"], self.max_job_array_size) if "-J" in options else None
        dependency = parse_dependency(options["-w"]) if "-w" in options else []
        missing = [str(job_id) for _kind, job_id in dependency if job_id not in self.jobs]
        if missing:
            # bsub -w naming a job mbatchd does not know (LSF bsub -w reference).
            raise PacError(400, "%s: No matching job found. Job not submitted." % ", ".join(missing))
        if "-W" not in options and (values.get("RUNLIMITHOUR") or values.get("RUNLIMITMINUTE")):
            try:
                options["-W"] = str(int(values.get("RUNLIMITHOUR") or 0) * 60 + int(values.get("RUNLIMITMINUTE") or 0))
            except ValueError:
                raise PacError(400, "RUNLIMITHOUR and RUNLIMITMINUTE must be integers.")
        queue_name = options.get("-q") or self.default_queue()
        queue = self.queues.get(queue_name)
        # LSF bsub: an unknown queue refuses the job with "<q>: No such queue. Job not submitted."
        if queue is None:
            raise PacError(400, "%s: No such queue. Job not submitted." % queue_name)
        if queue["status"].startswith("Closed"):
            raise PacError(400, "%s: Queue has been closed. Job not submitted." % queue_name)
        try:
            slots = int(options.get("-n", "1").split(",")[-1])
            mem = parse_memory_limit(options["-M"]) if "-M" in options else None
        except ValueError:
            raise PacError(400, "Bad -n or -M value. Job not submitted.")
        runlimit = parse_runlimit(options["-W"]) if "-W" in options else queue.get("runlimit")
        # LSF: a job limit above the queue's hard limit is refused ("Cannot exceed queue's hard limit(s)").
        if (queue.get("runlimit") and runlimit > queue["runlimit"]) or (
                queue.get("memlimit") and mem and mem > queue["memlimit"]):
            raise PacError(400, "Cannot exceed queue's hard limit(s). Job not submitted.")
        memlimit = mem or queue.get("memlimit")
        uploads = []
        for pid, p in params.items():
            if p["type"] != "file":
                continue
            # File parameters: "path,upload|copy|link", several joined with ";" (IBM: "Submit a job
            # (POST)"); lsf-faas joins several with "#" before this step. Only upload is simulated.
            for item in [s for s in p["value"].split(";") if s]:
                path, how = (item.split(",", 1) + [""])[:2]
                if how != "upload":
                    raise PacError(400, "File parameter %s: only upload is simulated, not %r" % (pid, how))
                found = files.get(path) or files.get(os.path.basename(path))
                if found is None:
                    raise PacError(400, "Bad multipart request: file %s of parameter %s is not attached" % (path, pid))
                uploads.append(found)
        with self.lock:
            job_id = self.next_id
            self.next_id += 1
            job_dir = os.path.join(self.spool, user, str(job_id))
            cwd = os.path.abspath(os.path.join(job_dir, options["-cwd"])) if "-cwd" in options else job_dir
            fields = dict(command=command, queue=queue_name, name=options.get("-J", command[:60]),
                          description=options.get("-Jd", ""), project=options.get("-P", "default"),
                          slots=slots, runlimit=runlimit, memlimit=memlimit, cwd=cwd, job_dir=job_dir,
                          options=options, dependency=dependency)
            job = Job(job_id, user, **fields)
            if array is not None:
                # Every element is a job of its own under the array's id, named name[index] (IBM:
                # admin guide "Job arrays": elements are referenced as "JOBID[index]").
                name, indexes, job.element_limit = array
                job.name = fields["name"] = name
                job.elements = collections.OrderedDict()
                for i in indexes:
                    element = dict(fields)
                    element["name"] = "%s[%d]" % (name, i)
                    job.elements[i] = Job(job_id, user, array=job, index=i, **element)
            os.makedirs(job_dir, exist_ok=True)
            # bsub -cwd: docs silent on a missing directory; the simulator creates it.
            os.makedirs(cwd, exist_ok=True)
            # Uploaded files land in the job's working directory, so a command may name them
            # relatively (lsf-faas runs "python3 lsf_faas.py", the pod "`pwd`/script"); docs silent.
            # Mode 0644: the pod chmods its script before running it.
            account = self.account(user)
            self.give(account, os.path.dirname(job_dir), job_dir, cwd)
            for filename, payload in uploads:
                with open(os.path.join(cwd, filename), "wb") as handle:
                    handle.write(payload)
                self.give(account, os.path.join(cwd, filename))
            self.jobs[job_id] = job
        return job

    # -- scheduling and process supervision ---------------------------------------------------
    def start(self):
        self.thread.start()

    def _loop(self):
        while not self.stopping.wait(self.tick):
            with self.lock:
                self._dispatch()
                self._supervise()
                self._summarize()
                self._forget()

    def units(self):
        """Every job and array element that runs on its own, in submit (then index) order."""
        return [unit for job in self.jobs.values() for unit in job.units()]

    def _used(self, queue=None):
        return sum(j.slots for j in self.units() if j.status == RUN and queue in (None, j.queue))

    def _dispatch(self):
        # Slots in use, counted once per tick and kept up to date as jobs start: an array of
        # thousands of pending elements must not count every job again for each of them.
        running = [j for j in self.units() if j.status == RUN]
        used = sum(j.slots for j in running)
        by_queue = collections.Counter()
        by_array = collections.Counter()
        for job in running:
            by_queue[job.queue] += job.slots
            if job.array is not None:
                by_array[job.id] += 1
        for job in [j for j in self.units() if j.status == PEND]:
            queue = self.queues[job.queue]
            met = [dependency_state(c, self.jobs.get(c[1])) for c in job.dependency]
            array = job.array
            if None in met:
                job.pend_reason = REASON_DEP_NEVER
            elif not all(met):
                job.pend_reason = REASON_DEPEND
            elif queue["status"].endswith("Inact"):
                job.pend_reason = REASON_QUEUE_INACTIVE
            elif array is not None and array.element_limit is not None and by_array[job.id] >= array.element_limit:
                job.pend_reason = REASON_ARRAY_LIMIT
            elif by_queue[job.queue] + job.slots > queue.get("slots", self.host_slots):
                job.pend_reason = REASON_QUEUE_SLOTS
            elif used + job.slots > self.host_slots:
                job.pend_reason = REASON_HOST_SLOTS
            else:
                self._run(job)
                if job.status == RUN:
                    used += job.slots
                    by_queue[job.queue] += job.slots
                    by_array[job.id] += job.array is not None

    def _summarize(self):
        """An array's own state from its elements' (docs silent; bjobs -A counts them): running once
        one has started, ended when all have, EXIT if one exited; so dependencies and CLEAN_PERIOD
        see the array as one job."""
        for job in self.jobs.values():
            if job.elements is None:
                continue
            elements = list(job.elements.values())
            statuses = set(e.status for e in elements)
            starts = [e.start_time for e in elements if e.start_time]
            job.start_time = min(starts) if starts else None
            if statuses <= {DONE, EXIT}:
                job.status = EXIT if EXIT in statuses else DONE
                job.end_time = max(e.end_time for e in elements)
            else:
                job.status = RUN if starts else PEND

    def _run(self, job):
        account = self.account(job.user)
        home = account.pw_dir if account else os.environ.get("HOME", "/")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home,
               "USER": job.user, "LOGNAME": job.user, "LANG": os.environ.get("LANG", "C.UTF-8")}
        env = parse_env(job.options.get("-env", "all"), env)
        # Variables LSF sets in every job (LSF "Environment variables set for job execution").
        env.update(LSB_JOBID=str(job.id), LSB_JOBNAME=job.name, LSB_QUEUE=job.queue, LS_SUBCWD=job.cwd,
                   LSB_HOSTS=" ".join([self.host] * job.slots), LSB_DJOB_NUMPROC=str(job.slots),
                   # IBM: admin guide "Passing arguments on the command line": LSB_JOBINDEX is the
                   # element's index, and 0 for a job that is no array.
                   LSB_JOBINDEX=str(job.index))

        def path(option_pair, default):
            name = next((job.options[o] for o in option_pair if o in job.options), None)
            if name is None:
                return default, "ab"
            name = name.replace("%J", str(job.id)).replace("%I", str(job.index))
            # -oo/-eo overwrite, -o/-e append (LSF bsub reference).
            return os.path.join(job.cwd, name), ("wb" if option_pair[0] in job.options else "ab")

        # Without -o, LSF mails the output; the simulator keeps it in the job dir (output.<index> for
        # an array's element). Without -e, stderr goes where stdout goes (LSF bsub -o). No LSF job
        # report is appended to -o.
        default = "output" if job.array is None else "output.%d" % job.index
        out_path, out_mode = path(("-oo", "-o"), os.path.join(job.job_dir, default))
        err_path, err_mode = path(("-eo", "-e"), None)
        job.outfile, job.errfile = out_path, err_path or ""
        identity = {}
        if account is not None:
            identity = {"user": account.pw_uid, "group": account.pw_gid,
                        "extra_groups": os.getgrouplist(account.pw_name, account.pw_gid)}
        try:
            with self.output(out_path, out_mode, account) as out:
                err = self.output(err_path, err_mode, account) if err_path else subprocess.STDOUT
                try:
                    job.process = subprocess.Popen(["/bin/sh", "-c", job.command], cwd=job.cwd, env=env,
                                                   stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                                   start_new_session=True, **identity)
                finally:
                    if err_path:
                        err.close()
        except OSError as exc:
            # LSF: a job that cannot start ends EXIT (external-apis.md §2.6 "failed start").
            job.status, job.exit_status, job.exit_info = EXIT, 127, "TERM_UNKNOWN: %s" % exc
            job.start_time = job.end_time = time.time()
            return
        job.status, job.pend_reason, job.start_time = RUN, "", time.time()

    def output(self, path, mode, account):
        """An output file opened for the job. The simulator opens it, not the job: one it creates
        is handed to the job's user; an existing one is not checked for the user's permission."""
        existed = os.path.exists(path)
        handle = open(path, mode)
        if not existed:
            self.give(account, path)
        return handle

    def _supervise(self):
        now = time.time()
        for job in [j for j in self.units() if j.status == RUN]:
            code = job.process.poll()
            if code is not None:
                self._finish(job, code)
                continue
            if job.kill_deadline is not None:
                if now >= job.kill_deadline:
                    self._signal(job, signal.SIGKILL)
                continue
            if job.runlimit and now - job.start_time >= job.runlimit * self.minute:
                self._kill(job, "TERM_RUNLIMIT")
            elif job.memlimit:
                job.max_mem_mb = max(job.max_mem_mb, group_rss_mb(job.process.pid))
                if job.max_mem_mb > job.memlimit:
                    self._kill(job, "TERM_MEMLIMIT")

    def _finish(self, job, code):
        job.end_time = time.time()
        # exitStatus is the job's exit code; for a signal, 128 + the signal (external-apis.md §2.6:
        # "for bkill, it reflects the killing signal").
        job.exit_status = code if code >= 0 else 128 - code
        if job.kill_reason:
            job.status, job.exit_info = EXIT, job.kill_reason
        elif code == 0:
            job.status = DONE
        else:
            job.status = EXIT
        job.process = None

    def _signal(self, job, sig):
        # The job may have ended since the caller looked (a kill's SIGTERM can land before the
        # script's own trap is set): nothing is left to signal then.
        if job.process is None:
            return
        try:
            os.killpg(job.process.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _kill(self, job, reason):
        # LSF sends SIGINT/SIGTERM, then SIGKILL after a grace period; the simulator SIGTERM then SIGKILL.
        job.kill_reason = reason
        job.kill_deadline = time.time() + self.kill_grace
        self._signal(job, signal.SIGTERM)

    def _forget(self):
        # CLEAN_PERIOD (lsb.params): finished jobs are kept that long, then forgotten
        # (external-apis.md §2.3, "recently finished DONE/EXIT within CLEAN_PERIOD included").
        now = time.time()
        for job_id in [i for i, j in self.jobs.items() if j.end_time and now - j.end_time >= self.clean_period]:
            del self.jobs[job_id]

    def kill(self, user, job_id, admin=False, index=None):
        """bkill JOB or bkill "JOB[index]": the message bkill prints; raises PacError for an unknown or
        finished job. bkill of an array kills its unfinished elements (IBM: admin guide "Job arrays",
        controlling job arrays)."""
        with self.lock:
            job = self.jobs.get(job_id)
            ref = "%d" % job_id if index is None else "%d[%d]" % (job_id, index)
            if job is None or (job.user != user and not admin):
                raise PacError(404, "Job <%s>: No matching job found" % ref)
            if index is not None:
                job = (job.elements or {}).get(index)
                if job is None:
                    raise PacError(404, "Job <%s>: No matching job found" % ref)
            units = [unit for unit in job.units() if unit.status not in (DONE, EXIT)]
            if not units:
                raise PacError(400, "Job <%s>: Job has already finished" % ref)
            for unit in units:
                if unit.status == PEND:
                    unit.status, unit.exit_info, unit.end_time = EXIT, "TERM_OWNER", time.time()
                    unit.exit_status = 128 + signal.SIGKILL
                elif unit.kill_reason is None:
                    self._kill(unit, "TERM_OWNER" if unit.user == user else "TERM_ADMIN")
            self._summarize()
            if job.elements is not None:
                # bkill's answer for a whole array (docs silent on PAC's; bkill prints this).
                return "Job <%s>: Operation is in progress" % ref
            return "Job <%s> is being terminated" % ref

    def shutdown(self):
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join()
        with self.lock:
            for job in self.units():
                if job.process is not None:
                    self._signal(job, signal.SIGKILL)
                    job.process.wait()

    # -- views --------------------------------------------------------------------------------
    def job_detail(self, job):
        # Detailed job element (IBM: "Get detailed job information by job ID (GET)", fields listed in
        # external-apis.md §2.3). exitInfo (the lsbatch.h TERM_* name) is not in the docs' list: docs
        # silent on how PAC shows why a job was terminated; LSF's jobInfoEnt calls it exitInfo.
        # An array's element is a record of its own, jobId "1234[3]" and jobName "name[3]" as bjobs shows
        # them (LSB_BJOBS_DISPLAY_ENH; lsb_readjobinfo prints job <1234[3]>); docs silent on PAC's form.
        return collections.OrderedDict([
            ("jobId", job.ref), ("jobName", job.name), ("jobStatus", job.status), ("queue", job.queue),
            ("user", job.user), ("command", job.command), ("fromHost", self.host),
            ("exHosts", self.host if job.start_time else ""), ("submitTimeGMT", utc(job.submit_time)),
            ("startTime", utc(job.start_time)), ("endTime", utc(job.end_time)), ("cwd", job.cwd),
            ("execCwd", job.cwd if job.start_time else ""), ("execUserName", job.user),
            ("exitStatus", "" if job.exit_status is None else job.exit_status), ("exitInfo", job.exit_info),
            ("pendReason", job.pend_reason), ("numProcessors", job.slots),
            ("mem", job.max_mem_mb), ("runTime", int((job.end_time or time.time()) - job.start_time) if job.start_time else 0),
            ("runLimit", job.runlimit or ""), ("outfile", getattr(job, "outfile", "")),
            ("errfile", getattr(job, "errfile", "")), ("application", "generic"),
            ("projectName", job.project), ("description", job.description),
            ("resReq", job.options.get("-R", "")),
            ("pidStr", job.process.pid if job.process else ""),
        ])

    def job_basic(self, job):
        # Basic job info (<pseudoJob>, IBM: "Get basic job information (GET)"); docs name id/jobId and
        # jobStatus, the rest is docs silent.
        return collections.OrderedDict([
            ("id", job.ref), ("jobId", job.ref), ("jobName", job.name), ("jobStatus", job.status),
            ("user", job.user), ("queue", job.queue), ("submitTimeGMT", utc(job.submit_time)),
        ])

    def queue_view(self, name):
        q = self.queues[name]
        jobs = [j for j in self.units() if j.queue == name]
        # Queue element (IBM: "Get basic queue information", "Get basic or detailed queue information
        # by name (POST)"); runLimit (minutes) and memLimit (UNIT_FOR_LIMITS) are docs silent.
        return collections.OrderedDict([
            ("queueName", name), ("queueDescription", q.get("description", "")), ("priority", q.get("priority", 30)),
            ("nice", 0), ("status", q["status"]), ("maxNumJobSlots", q.get("slots", self.host_slots)),
            ("jlPerUser", ""), ("numJob", sum(j.slots for j in jobs if j.status in (PEND, RUN))),
            ("numPend", sum(j.slots for j in jobs if j.status == PEND)),
            ("numRun", sum(j.slots for j in jobs if j.status == RUN)), ("numSsusp", 0), ("numUsusp", 0),
            ("users", "all"), ("hosts", self.host), ("runLimit", q.get("runlimit", "")),
            ("memLimit", q.get("memlimit", "")), ("unitForLimits", UNIT_FOR_LIMITS),
            ("isDefault", "true" if q.get("default") else "false"),
        ])

    def host_view(self):
        # Host element (IBM: "Get basic or detailed host information by name (POST)"); the shape of
        # staticResources entries is docs silent.
        resources = [("hostType", "LINUX64"), ("hostModel", "X86_64"), ("cpuFactor", "1.0"),
                     ("nCpus", self.host_slots), ("nDisks", 1), ("maxMem", "%dM" % total_mem_mb())]
        return collections.OrderedDict([
            ("hostName", self.host), ("serverType", "SERVER"), ("hostStatus", "ok"),
            ("maxJobs", self.host_slots), ("numJobs", self._used()), ("numRun", self._used()),
            ("staticResources", {"staticResource": [{"name": n, "value": v} for n, v in resources]}),
        ])


def readable_by(account, path):
    """Whether the job's user may read `path` (the simulator's own user when jobs run as it)."""
    if account is None:
        return os.access(path, os.R_OK)
    info = os.stat(path)
    if account.pw_uid == 0:
        return True
    if info.st_uid == account.pw_uid:
        return bool(info.st_mode & 0o400)
    if info.st_gid in os.getgrouplist(account.pw_name, account.pw_gid):
        return bool(info.st_mode & 0o040)
    return bool(info.st_mode & 0o004)


def group_rss_mb(pgid):
    """Resident memory (MB) of every process in a process group, from /proc."""
    total = 0
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            total += int(fields[21]) * page
    return total // (1024 * 1024)


def total_mem_mb():
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return 0


# ---------------------------------------------------------------------------------------------
# Tokens (IBM: "Log on (POST)", "User name, password, and security token")
# ---------------------------------------------------------------------------------------------
class Tokens(object):
    def __init__(self, users, ttl):
        self.users = dict(users)
        self.ttl = float(ttl)
        self.key = secrets.token_bytes(32)
        self.issued = {}
        self.lock = threading.Lock()

    def logon(self, name, password):
        if not name:
            raise PacError(400, "User name is empty.")
        expected = self.users.get(name)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise PacError(403, "Logon failed: the user name or password is incorrect.")
        expiry = time.time() + self.ttl
        # Token shape user"<expiry>"<base64>"<base64> (external-apis.md §2.1); the Bridge Operator's
        # pod reads the time between the first two quotes.
        nonce = base64.b64encode(secrets.token_bytes(24)).decode()
        sig = base64.b64encode(hmac.new(self.key, ("%s%s%s" % (name, expiry, nonce)).encode(),
                                        hashlib.sha256).digest()).decode()
        token = '%s"%s"%s"%s' % (name, utc(expiry), nonce, sig)
        with self.lock:
            self.issued = {t: v for t, v in self.issued.items() if v[1] > time.time()}
            self.issued[token] = (name, expiry)
        return token

    def user_of(self, headers):
        """The user a request's platform_token belongs to; PacError 403 otherwise."""
        raw = None
        cookie = headers.get("Cookie", "")
        match = re.search(r"(?:^|[;,]\s*)platform_token=([^;,]*)", cookie)
        if match:
            raw = match.group(1)
        elif headers.get("platform_token"):
            # Some clients send the token as a header too (external-apis.md §2.1, Janelia LSFPACHelper).
            raw = headers.get("platform_token")
        # IBM: "User name, password, and security token": missing token -> 403 with PAC's error body.
        if not raw:
            raise PacError(403, "You are not logged on. Log on first: no platform_token cookie.")
        # The docs say to replace every '"' with #quote#; what PAC does with raw quotes is undocumented,
        # the simulator refuses them so a client that skips the encoding fails here.
        if '"' in raw:
            raise PacError(403, "Invalid token: '\"' must be sent as #quote#.")
        token = raw.replace("#quote#", '"')
        with self.lock:
            entry = self.issued.get(token)
        if entry is None:
            raise PacError(403, "Invalid token. Log on again.")
        if entry[1] <= time.time():
            raise PacError(403, "Your token has expired. Log on again.")
        return entry[0]

    def logout(self, headers):
        user = self.user_of(headers)
        with self.lock:
            self.issued = {t: v for t, v in self.issued.items() if v[0] != user}


# ---------------------------------------------------------------------------------------------
# HTTP
# ---------------------------------------------------------------------------------------------
class Handler(BaseHTTPRequestHandler):
    server_version = "LSF-PAC-Simulator/1"
    protocol_version = "HTTP/1.1"
    # Docs silent; a simulator choice: http.server sends the headers and the body in two writes, and
    # with Nagle's algorithm the body waits for the client's delayed ACK (about 40 ms on Linux), which
    # made every answer on a kept-alive connection 40 ms slower than its work (bench/lsf_submit.py).
    disable_nagle_algorithm = True

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("lsf-pac: %s\n" % (fmt % args))

    def do_GET(self):
        self._serve("GET")

    def do_POST(self):
        self._serve("POST")

    def _serve(self, method):
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        want_json = JSON_TYPE in (self.headers.get("Accept") or "")
        try:
            reply = self.server.app.route(method, url.path, query, self.headers, self._body())
        except PacError as exc:
            reply = legacy_error(exc.message, exc.status if exc.status == 403 else 200) \
                if url.path.startswith(ROOT + "/webservice/") else error_reply(exc.status, exc.message)
        except Exception as exc:  # pylint: disable=broad-exception-caught
            # A simulator bug answers 500 with PAC's error body rather than a dropped connection.
            reply = error_reply(500, "Simulator error: %s: %s" % (type(exc).__name__, exc))
        if isinstance(reply, bytes):
            ctype, payload = "application/octet-stream", reply
        elif isinstance(reply, str):
            ctype, payload = "text/plain; charset=UTF-8", reply.encode()
        else:
            ctype, payload = reply.render(want_json)
            ctype += "; charset=UTF-8"
        status = 200 if isinstance(reply, (str, bytes)) else reply.status
        self.server.access(method, url.path, status)
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _body(self):
        # Docs silent on chunked requests; the clients seen send Content-Length. The simulator reads
        # bodies by Content-Length only and refuses chunked ones (411) and closes the connection.
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            self.close_connection = True
            raise PacError(411, "Length Required: send the body with a Content-Length.")
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""


def parse_logon(body):
    # <User><name>u</name><pass>p</pass></User> (IBM: "Log on (POST)"); the Bridge Operator's pod
    # and lsf-faas put spaces between the elements.
    try:
        element = ElementTree.fromstring(body)
    except ElementTree.ParseError:
        raise PacError(400, "Bad logon request: the body is not <User><name>..</name><pass>..</pass></User>.")
    if element.tag != "User":
        raise PacError(400, "Bad logon request: the root element must be User.")
    return (element.findtext("name") or "").strip(), element.findtext("pass") or ""


def job_name_pattern(text):
    """The jobname filter of GET ws/jobs as a regular expression, * matching any characters; None
    for no filter."""
    if not text:
        return None
    return re.compile(".*".join(re.escape(part) for part in text.split("*")), re.DOTALL)


JOB_REF = re.compile(r"^\s*(\d+)(?:\[(\d+)\])?\s*$")


def ids_of(text):
    """[(job id, index or None)] of "1,2,3[4]": a job, or one element of an array (bjobs "JOBID[index]")."""
    refs = []
    for part in [p for p in urllib.parse.unquote(text).split(",") if p.strip()]:
        match = JOB_REF.match(part)
        if not match:
            raise PacError(400, "Bad job ids %r." % text)
        refs.append((int(match.group(1)), int(match.group(2)) if match.group(2) else None))
    # GET /platform/ws/jobs/{ids}: comma list, no 0 (external-apis.md §2.3).
    if not refs or any(job_id == 0 for job_id, _index in refs):
        raise PacError(400, "Bad job ids %r: give job ids other than 0." % text)
    return refs


class App(object):
    def __init__(self, cluster, tokens, admins=()):
        self.cluster = cluster
        self.tokens = tokens
        self.admins = set(admins)

    def route(self, method, path, query, headers, body):
        ws = ROOT + "/ws/"
        legacy = ROOT + "/webservice/pacclient/"
        if not path.startswith(ROOT + "/"):
            raise PacError(404, "Not found: %s (the context root is %s)" % (path, ROOT))
        # IBM: "Log on (POST)"; legacy GET pacclient/logon/ with the same body (deprecated Logon page).
        if (method, path) == ("POST", ws + "logon"):
            token = self.tokens.logon(*parse_logon(body))
            # JSON {"token","csrftoken"} when JSON is asked for (IBM Cloud LSF doc, quantum-lsf.md §B1).
            return Reply("User", {"token": token}, raw_json={"token": token, "csrftoken": secrets.token_hex(16)})
        if method == "GET" and path.rstrip("/") == legacy + "logon":
            try:
                return Reply("User", {"token": self.tokens.logon(*parse_logon(body))})
            except PacError as exc:
                return legacy_error(exc.message)
        if path in (ws + "ping",):
            return Reply("ping", "ok")  # liveness, no auth (external-apis.md §2.1)
        user = self.tokens.user_of(headers)
        admin = user in self.admins
        if (method, path) == ("POST", ws + "logout"):
            self.tokens.logout(headers)
            return Reply("message", "You have logged out.")
        if method == "GET" and path.rstrip("/") == legacy + "logout":
            self.tokens.logout(headers)
            return "ok"  # legacy logout answers the text ok (external-apis.md §2.1)
        if method == "POST" and path in (ws + "jobs/submit", legacy + "submitapp"):
            job = self.cluster.submit(user, *parse_submission(headers.get("Content-Type"), body))
            # XML <Job><id>N</id></Job> (pacclient reads the first <id>); JSON id as a number: the Bridge
            # Operator's pod unmarshals {"id": <int>} (external-apis.md §2.2 shows "1234": clients
            # should take both).
            return Reply("Job", {"id": job.id}, raw_json={"id": job.id})
        if method == "GET" and path.startswith(ws + "jobs/") and path[len(ws + "jobs/"):] not in ("", "fullinfo"):
            return self.jobs_by_id(user, admin, ids_of(path[len(ws + "jobs/"):]))
        if method == "POST" and path in (ws + "jobs/getfullinfo", ws + "jobs/getbasicinfo"):
            form = dict(urllib.parse.parse_qsl(body.decode()))
            return self.jobs_by_id(user, admin, ids_of(form.get("ids", "")), basic=path.endswith("basicinfo"))
        if method == "GET" and path in (ws + "jobs", ws + "jobs/fullinfo"):
            return self.jobs_by_attributes(user, admin, query, basic=not path.endswith("fullinfo"))
        if method == "GET" and path == legacy + "jobs":
            return self.legacy_jobs(user, admin, query)
        if method == "POST" and path == ws + "jobs/kill":
            # Form ids=<id[,id]> (external-apis.md §2.4, Janelia LSFPACHelper); docs silent on the
            # success body: bkill's own lines.
            form = dict(urllib.parse.parse_qsl(body.decode()))
            killed = [self.cluster.kill(user, job_id, admin, index=index) for job_id, index in ids_of(form.get("ids", ""))]
            return Reply("actionMsg", "\n".join(killed))
        if method == "GET" and path.startswith(legacy + "jobOperation/"):
            # Legacy GET jobOperation/{action}/{id}: <actionMsg> or <errMsg> (external-apis.md §2.4).
            action, job_id = (path[len(legacy + "jobOperation/"):].split("/", 1) + [""])[:2]
            if action != "kill":
                return legacy_error("Action %s is not simulated; only kill is." % action)
            job_id, index = ids_of(job_id)[0]
            return Reply("actionMsg", self.cluster.kill(user, job_id, admin, index=index))
        if method == "GET" and path.startswith(legacy + "file/"):
            return self.download(user, admin, path[len(legacy + "file/"):], body)
        if method == "POST" and path in (ws + "userCmd", legacy + "userCmd"):
            return self.user_cmd(user, admin, body)
        if method == "GET" and path == ws + "queues":
            return self.queues(query)
        if method == "GET" and path == ws + "hosts":
            names = [n for n in query.get("names", "all").split(",") if n]
            hosts = [self.cluster.host_view()] if "all" in names or self.cluster.host in names else []
            if not hosts:
                raise PacError(404, "No matching host found.")
            return Reply("hosts", {"@total": len(hosts), "host": hosts})
        raise PacError(404, "Not found: %s %s (not simulated)" % (method, path))

    def _visible(self, user, admin):
        return [j for j in self.cluster.units() if admin or j.user == user]

    def _reply(self, units, basic=False):
        if basic:
            # Basic info uses <pseudoJob> elements (external-apis.md §2.3); the wrapper name is docs silent.
            return Reply("pseudoJobs", {"@total": len(units), "pseudoJob": [self.cluster.job_basic(j) for j in units]})
        return Reply("jobs", {"@total": len(units), "job": [self.cluster.job_detail(j) for j in units]})

    def jobs_by_id(self, user, admin, refs, basic=False):
        """A job's record, each element's for an array (bjobs JOBID lists them all), or one element's
        for JOBID[index]."""
        with self.cluster.lock:
            found = []
            for job_id, index in refs:
                job = self.cluster.jobs.get(job_id)
                if job is not None and index is not None:
                    job = (job.elements or {}).get(index)
                if job is not None:
                    found.extend(job.units())
            # 403 for another user's job (RBAC), 404 when nothing matches (external-apis.md §2.3).
            if any(j.user != user and not admin for j in found):
                raise PacError(403, "Permission denied: not your job.")
            if not found:
                raise PacError(404, "No matching job found: %s" % ",".join(
                    "%d" % i if x is None else "%d[%d]" % (i, x) for i, x in refs))
            return self._reply(found, basic)

    def jobs_by_attributes(self, user, admin, query, basic=False):
        # ?jobname=&username=&queuename=&hostname=&status= ; the caller's jobs by default, username=all
        # for an admin (external-apis.md §2.3). A status is a short (PEND) or long (Pending) name;
        # ALL and empty mean every status (docs silent on status values). A job name may hold the
        # wildcard * anywhere (IBM: "Get basic job information (GET)": "job* returns jobA, jobB").
        # An array's elements match the array's name (bjobs -J name) as well as their own.
        wanted_user = query.get("username") or user
        if wanted_user != user and not admin:
            raise PacError(403, "Permission denied: only an administrator may query other users' jobs.")
        status = (query.get("status") or "ALL").upper()
        named = job_name_pattern(query.get("jobname"))
        with self.cluster.lock:
            jobs = [j for j in self.cluster.units()
                    if wanted_user in ("all", j.user)
                    and (named is None or named.fullmatch(j.name) or (j.array is not None and named.fullmatch(j.array.name)))
                    and query.get("queuename") in (None, "", j.queue)
                    and query.get("hostname") in (None, "", self.cluster.host)
                    and status in ("ALL", j.status, LONG_STATUS[j.status].upper())]
            if not jobs:
                raise PacError(404, "No matching job found.")
            return self._reply(jobs, basic)

    def legacy_jobs(self, user, admin, query):
        # Legacy pacclient jobs?<params>: <Jobs><Job><id/><status>Done|Exit|..</status></Job></Jobs>
        # (lsf-faas lsflib.py); no match is a <note> (lsf-faas reads it). Other fields are docs silent.
        with self.cluster.lock:
            jobs = [j for j in self._visible(user, admin)
                    if query.get("id") in (None, "", str(j.id), j.ref) and query.get("name") in (None, "", j.name)]
            if not jobs:
                return Reply("Jobs", {"note": "No matching job found"})
            return Reply("Jobs", {"Job": [collections.OrderedDict([
                ("id", j.ref), ("name", j.name), ("status", LONG_STATUS[j.status]), ("queue", j.queue),
                ("user", j.user), ("cmd", j.command),
                ("exitCode", "" if j.exit_status is None else j.exit_status)]) for j in jobs]})

    def download(self, user, admin, job_id, body):
        # pacclient's download (pacclient.py downloadFile): GET webservice/pacclient/file/<jobId> with
        # the file's path as a text/plain body; the file's bytes come back, and an empty body when the
        # file does not exist or the user may not read it (pacclient: "Download failed. you have no
        # permission or the specified file does not exist"). Docs silent on which files: the simulator
        # serves the job's own files, in its cwd or its -o/-e files, readable by the job's user.
        match = re.match(r"^(\d+)(?:\[\d+\])?$", urllib.parse.unquote(job_id))
        if not match:
            return legacy_error("Bad job id %r." % job_id)
        with self.cluster.lock:
            job = self.cluster.jobs.get(int(match.group(1)))
            if job is None or (job.user != user and not admin):
                return legacy_error("Job <%s>: No matching job found" % match.group(1))
            name = body.decode("utf-8", "replace").strip()
            path = os.path.realpath(os.path.join(job.cwd, name))
            own = {os.path.realpath(p) for unit in job.units()
                   for p in (getattr(unit, "outfile", ""), getattr(unit, "errfile", "")) if p}
            inside = path in own or path.startswith(os.path.realpath(job.cwd) + os.sep)
            account = self.cluster.account(job.user)
        if not name or not inside or not os.path.isfile(path) or not readable_by(account, path):
            return b""
        with open(path, "rb") as handle:
            return handle.read()

    def user_cmd(self, user, admin, body):
        # <UserCmd><cmd>bkill 1234</cmd></UserCmd> -> <cmdMsg> (external-apis.md §2.4; the Bridge
        # Operator's pod posts it to ws/userCmd). PAC runs the LSF command as the user and returns its
        # output; only bkill [-s SIG] ids is simulated. bkill's error lines come back as output (200).
        try:
            cmd = ElementTree.fromstring(body).findtext("cmd") or ""
        except ElementTree.ParseError:
            raise PacError(400, "Bad request: the body is not <UserCmd><cmd>..</cmd></UserCmd>.")
        words = cmd.split()
        if not words or words[0] != "bkill":
            raise PacError(400, "Command not simulated: %s (only bkill is)" % (words[0] if words else "(empty)"))
        words = words[1:]
        if words[:1] == ["-s"]:
            words = words[2:]
        lines = []
        for word in words:
            try:
                job_id, index = ids_of(word)[0]
                lines.append(self.cluster.kill(user, job_id, admin, index=index))
            except PacError as exc:
                lines.append(exc.message)
        return Reply("cmdMsg", "\n".join(lines))

    def queues(self, query):
        # ?names=a,b|all&status=all|open|openactive|... (external-apis.md §2.5).
        names = [n for n in query.get("names", "all").split(",") if n]
        status = query.get("status", "all").lower()
        with self.cluster.lock:
            views = []
            for name, q in self.cluster.queues.items():
                if "all" not in names and name not in names:
                    continue
                is_open, active = q["status"].startswith("Open"), q["status"].endswith("Active")
                keep = {"all": True, "open": is_open, "closed": not is_open, "active": active,
                        "inactive": not active, "openactive": is_open and active,
                        "openinactive": is_open and not active, "closedactive": not is_open and active,
                        "closedinactive": not is_open and not active}.get(status)
                if keep is None:
                    raise PacError(400, "Bad queue status %r." % status)
                if keep:
                    views.append(self.cluster.queue_view(name))
            if not views:
                raise PacError(404, "No matching queue found.")
            return Reply("queues", {"@total": len(views), "queue": views})


class LsfPacSimulator(InProcess):
    """The simulator in-process: an HTTP server on 127.0.0.1 plus the scheduler thread."""

    def __init__(self, state_dir, users, port=0, token_ttl=3600.0, admins=(), verbose=False, access_log=None,
                 **cluster_options):
        self.cluster = Cluster(state_dir, **cluster_options)
        self.tokens = Tokens(users, token_ttl)
        httpd = AccessLogServer(("127.0.0.1", port), Handler, access_log)
        httpd.app = App(self.cluster, self.tokens, admins)
        httpd.verbose = verbose
        super().__init__(self.cluster, httpd, "lsf-pac-http")
        self.url = "http://127.0.0.1:%d%s/" % (self.port, ROOT)


def main(argv=None):
    parser = argparse.ArgumentParser(description="A simulator of LSF Application Center web services (tests only).")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument("--state-dir", required=True, help="spool for job directories")
    users = parser.add_mutually_exclusive_group(required=True)
    users.add_argument("--users", nargs="+", metavar="USER:PASSWORD")
    users.add_argument("--users-file", help="lines USER:PASSWORD (keeps passwords out of the process list)")
    parser.add_argument("--access-log", help="append one line per request: time, method, path, status")
    parser.add_argument("--admins", nargs="*", default=(), metavar="USER")
    parser.add_argument("--token-ttl", type=float, default=3600.0, help="token lifetime, seconds")
    parser.add_argument("--minute-seconds", type=float, default=60.0, help="seconds in one run-limit minute")
    parser.add_argument("--clean-period", type=float, default=3600.0, help="seconds finished jobs are kept")
    parser.add_argument("--tick", type=float, default=0.1,
                        help="seconds between scheduling passes, each over every job (mbatchd's MBD_SLEEP_TIME)")
    parser.add_argument("--max-job-array-size", type=int, default=DEFAULT_MAX_JOB_ARRAY_SIZE,
                        help="MAX_JOB_ARRAY_SIZE of lsb.params: the largest array index")
    parser.add_argument("--host-slots", type=int, default=4)
    parser.add_argument("--queues", help="JSON file {name: {status, slots, runlimit, memlimit, default}}")
    parser.add_argument("--port-file", help="write the bound port here once listening")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.users_file:
        with open(args.users_file) as handle:
            args.users = [line.strip() for line in handle if line.strip()]
    users = dict(u.split(":", 1) for u in args.users)
    queues = None
    if args.queues:
        with open(args.queues) as handle:
            queues = json.load(handle)
    sim = LsfPacSimulator(args.state_dir, users, port=args.port, token_ttl=args.token_ttl, admins=args.admins,
                          verbose=args.verbose, access_log=args.access_log, queues=queues, host_slots=args.host_slots,
                          minute_seconds=args.minute_seconds, clean_period=args.clean_period,
                          max_job_array_size=args.max_job_array_size, tick=args.tick)
    serve(sim, args.port_file, "lsf-pac simulator listening on %s\n" % sim.url)


if __name__ == "__main__":
    main()
