# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Qiskit Runtime job states, phases and failure classes, and its jobs normalized (pure): title-case
states, where "Cancelled" with reason code 1305 means the job ran out of time.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import re
import time

from ansible_collections.bridge.hpc.plugins.module_utils._backend import TERMINAL_PHASES, ShapeError
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.compile import NAME_TAG_PREFIX, TAG_PREFIX


RAN_TOO_LONG = 1305
PHASE_BY_STATUS = {"queued": "queued", "running": "running", "completed": "completed", "failed": "failed",
                   "cancelled": "cancelled"}
TIMEOUT_REASON = re.compile(r"ran too long|time ?out|max(imum)? execution time", re.IGNORECASE)


_ISO = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:\.\d+)?(Z|[+-]\d\d:?\d\d)?$")


def iso_time(value):
    """RFC 3339 UTC seconds of an ISO 8601 time (fractions dropped, offsets applied); None if absent."""
    if not isinstance(value, str):
        return None
    match = _ISO.match(value.strip())
    if not match:
        return None
    fields = [int(part) for part in match.groups()[:6]]
    epoch = calendar.timegm(tuple(fields) + (0, 0, 0))
    offset = match.group(7)
    if offset and offset != "Z":
        sign = -1 if offset[0] == "-" else 1
        digits = offset[1:].replace(":", "")
        epoch -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def optional_string(value, field):
    if value is None:
        return None
    if not isinstance(value, str):
        raise ShapeError("'%s' must be a string, got %s" % (field, type(value).__name__))
    return value


def _tag_value(tags, prefix):
    return next((tag[len(prefix):] for tag in tags if isinstance(tag, str) and tag.startswith(prefix)), None)


def normalize_job(native):
    """A Qiskit Runtime job (GET /jobs/{id}, an item of GET /jobs) as Bridge's job dict."""
    if not isinstance(native, dict):
        raise ShapeError("a job must be a JSON object, got %s" % type(native).__name__)
    job_id = native.get("id")
    if not isinstance(job_id, str) or not job_id:
        raise ShapeError("a job without an id")
    state = native.get("state") or {}
    if not isinstance(state, dict):
        raise ShapeError("'state' must be an object")
    status = optional_string(state.get("status") or native.get("status"), "state.status") or "Unknown"
    code = state.get("reason_code", state.get("reasonCode"))
    reason = optional_string(state.get("reason"), "state.reason")
    lowered = status.strip().lower()
    failure_class = None
    if lowered.startswith("cancelled") and (code == RAN_TOO_LONG or "ran too long" in lowered):
        # The job exceeded its max execution time (cost) or the service's: a failure, not a cancel.
        phase, failure_class = "failed", "timeout"
        reason = reason or "ran longer than its maximum execution time"
    elif lowered in PHASE_BY_STATUS:
        phase = PHASE_BY_STATUS[lowered]
        if phase == "cancelled":
            failure_class = "cancelled"
        elif phase == "failed":
            failure_class = "timeout" if reason and TIMEOUT_REASON.search(reason) else "non_zero_exit"
    else:
        # qiskit passes unknown states through and never treats them as final; so does Bridge.
        phase = "queued"
        reason = reason or "state '%s' is unknown to Bridge" % status
    tags = native.get("tags") or []
    if not isinstance(tags, list):
        raise ShapeError("'tags' must be a list")
    identity = _tag_value(tags, TAG_PREFIX)
    program = native.get("program") or {}
    usage = native.get("usage") or {}
    if not isinstance(program, dict) or not isinstance(usage, dict):
        raise ShapeError("'program' and 'usage' must be objects")
    return {
        "job_id": job_id,
        "name": _tag_value(tags, NAME_TAG_PREFIX) or identity,
        "identity": identity,
        "phase": phase,
        "terminal": phase in TERMINAL_PHASES,
        "native_state": status,
        "reason": reason,
        "reason_code": code,
        "reason_solution": state.get("reason_solution"),
        "exit_code": None,
        "signal": None,
        "failure_class": failure_class,
        "submit_time": iso_time(native.get("created")),
        "start_time": None,
        # Not in IBM's JobResponse model; taken where an answer has it (the simulator's does).
        "end_time": iso_time(native.get("end_time")) if phase in TERMINAL_PHASES else None,
        "device": optional_string(native.get("backend"), "backend"),
        "primitive": program.get("id"),
        "session_id": native.get("session_id"),
        # The service serves a private job's results once (IBM: "private" in JobResponse).
        "private": native.get("private") is True,
        "tags": tags,
        "quantum_seconds": usage.get("quantum_seconds"),
        "native": native,
    }
