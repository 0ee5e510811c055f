# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""LSF job states (short and long names), phases, TERM_* exit reasons and failure classes, and
PAC's job records normalized (pure).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import re
import time

from ansible_collections.bridge.hpc.plugins.module_utils._arrays import array_job, parse_indexes
from ansible_collections.bridge.hpc.plugins.module_utils._backend import TERMINAL_PHASES, ShapeError, rfc3339
from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.answers import integer_of, text_of
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.compile import ARRAY_TAG, TAG_PREFIX, array_shift


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
# What cancel_rejected acts on (doc text of the option in the LSF modules' docs).
NEVER_STARTS = ("the pending reason says the queue is closed or does not accept the job, no host is suitable or "
                "eligible, a host, queue or resource is invalid, or a dependency can never be satisfied")


# An element of an array as PAC names it, "1234[3]" (bjobs' JOBID[index]), and its name, "name[3]".
ELEMENT_ID = re.compile(r"^(\d+)\[(\d+)\]$")
ELEMENT_NAME = re.compile(r"\[\d+\]$")
# compile.description's array tag: " array=<indexes>[%<parallelism>]".
ARRAY_DESCRIPTION = re.compile(re.escape(ARRAY_TAG) + r"([0-9][0-9,:-]*)(?:%(\d+))?$")
# The state an array's record shows, by its phase: bjobs has no state of its own for a whole array.
ARRAY_STATE = {"queued": "PEND", "running": "RUN", "completed": "DONE", "failed": "EXIT", "cancelled": "EXIT"}


TIME_FORMATS = ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y/%m/%d %H:%M:%S",
                "%a %b %d %H:%M:%S %Y", "%b %d %H:%M:%S %Y")


def parse_time(value):
    """An RFC 3339 time of PAC's epoch seconds or milliseconds, or a time text read as UTC (PAC
    names its submit time ...GMT); None when absent or unreadable."""
    text = text_of(value)
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
    state = (text_of(status) or "").upper()
    if state in PHASE_BY_STATE:
        return state
    return next((short for long_form, short in LONG_STATES if state.startswith(long_form)), state or "UNKNOWN")


def term_reason(value):
    """TERM_* name of an exit reason: a name, a number, or a sentence starting with the name."""
    text = text_of(value)
    if text is None:
        return None
    if text.isdigit():
        return TERM_CODES.get(int(text), "TERM_%s" % text)
    match = re.match(r"^(TERM_[A-Z_]+)", text.upper())
    return match.group(1) if match else None


def exit_code_of(value):
    """The job's exit code: PAC prints bjobs' exit code; a value over 255 is a raw wait status."""
    code = integer_of(value)
    if code is None:
        return None
    return (code >> 8) & 0xFF if code > 255 else code


def identity_of(description):
    text = text_of(description)
    if text and text.startswith(TAG_PREFIX):
        return text[len(TAG_PREFIX):].split(ARRAY_TAG, 1)[0]
    return None


def array_of(description):
    """(asked indexes, parallelism) an array's description carries (compile.description), or None."""
    text = text_of(description) or ""
    match = ARRAY_DESCRIPTION.search(text) if text.startswith(TAG_PREFIX) else None
    if not match:
        return None
    try:
        indexes = parse_indexes(match.group(1))
    except SpecError:
        return None
    return indexes, int(match.group(2)) if match.group(2) else None


def element_of(job_id):
    """(array job id, LSF index) of an element's id "1234[3]"; None for a job that is no element."""
    match = ELEMENT_ID.match(job_id or "")
    return (match.group(1), int(match.group(2))) if match else None


def normalize_job(native):
    """A PAC job record (detailed <job> or basic <pseudoJob>, XML or JSON) as Bridge's job dict."""
    if not isinstance(native, dict):
        raise ShapeError("a job must be an object, got %s" % type(native).__name__)
    job_id = text_of(native.get("jobId", native.get("id")))
    if job_id is None:
        raise ShapeError("a job without jobId")
    state = short_state(native.get("jobStatus"))
    phase = PHASE_BY_STATE.get(state, "queued")
    terminal = phase in TERMINAL_PHASES
    term = term_reason(native.get("exitInfo"))
    exit_code = exit_code_of(native.get("exitStatus")) if terminal else None
    reason = text_of(native.get("pendReason")) if phase == "queued" else None
    failure_class = None
    if state == "PERR":
        reason = "post-execution processing failed"
    if state in ("UNKWN", "ZOMBI"):
        failure_class = "node_failure"
    elif phase == "failed":
        failure_class = FAILURE_BY_TERM.get(term, "non_zero_exit")
        reason = text_of(native.get("exitInfo")) or reason
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
        "name": text_of(native.get("jobName")),
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
        "queue": text_of(native.get("queue")),
        "hosts": text_of(native.get("exHosts")),
        "user": text_of(native.get("user")),
        "working_directory": text_of(native.get("cwd")),
        "stdout": text_of(native.get("outfile")),
        "native": native,
    }


def fold_arrays(jobs):
    """Normalized records with each array's elements ("1234[3]") folded into one record of the
    array ("1234"), where its first element was; other jobs as they are."""
    order, elements = [], {}
    for job in jobs:
        element = element_of(job["job_id"])
        if element is None:
            order.append((None, job))
            continue
        if element[0] not in elements:
            elements[element[0]] = []
            order.append((element[0], None))
        elements[element[0]].append((element[1], job))
    return [job if array_id is None else array_record(array_id, elements[array_id]) for array_id, job in order]


def array_record(array_id, elements):
    """One normalized job of an array from its elements' records [(LSF index, job)], through
    _arrays.array_job: indexes in the asked numbering (the description's array tag says which were
    asked; without one, as LSF numbers them), the first element's record as `native`."""
    elements = sorted(elements, key=lambda pair: pair[0])
    first = elements[0][1]
    asked = array_of((first.get("native") or {}).get("description"))
    if asked:
        indexes, parallelism = asked
        shift = array_shift({"indexes": indexes})
    else:
        indexes, parallelism, shift = tuple(index for index, _job in elements), None, 0
    tasks = dict((index - shift, job) for index, job in elements)
    base = dict(first, job_id=array_id, name=ELEMENT_NAME.sub("", first.get("name") or "") or None,
                reason=None, exit_code=None, signal=None, failure_class=None)
    job = array_job(base, tasks, indexes, parallelism)
    job["native_state"] = ARRAY_STATE[job["phase"]]
    job["suspended"] = any(element.get("suspended") for _index, element in elements)
    job["hosts"] = " ".join(sorted(set(h for _i, e in elements for h in (e.get("hosts") or "").split()))) or None
    if job["phase"] == "queued":
        # What holds the array back holds its first element back too (a closed queue, a dependency).
        job["reason"], job["failure_class"] = first.get("reason"), first.get("failure_class")
    return job
