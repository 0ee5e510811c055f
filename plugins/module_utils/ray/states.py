# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ray job statuses, phases and failure classes, and Ray's JobDetails normalized (pure)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.bridge.hpc.plugins.module_utils._backend import TERMINAL_PHASES, ShapeError, rfc3339
from ansible_collections.bridge.hpc.plugins.module_utils.ray.compile import METADATA_IDENTITY, METADATA_TIME_LIMIT


# Exit status of coreutils timeout(1), which enforces the spec's time_limit around the entrypoint.
TIMEOUT_EXIT = 124


PHASE_BY_STATUS = {
    "PENDING": "queued",
    "RUNNING": "running",
    "SUCCEEDED": "completed",
    "FAILED": "failed",
    "STOPPED": "cancelled",
}


# error_type values (Ray 2.60) of jobs that failed before their entrypoint ran.
ERROR_TYPES_REJECTED = ("RUNTIME_ENV_SETUP_FAILURE", "JOB_SUPERVISOR_ACTOR_START_FAILURE",
                        "JOB_SUPERVISOR_ACTOR_START_TIMEOUT", "JOB_SUPERVISOR_ACTOR_SCHEDULING_FAILED")


def normalize_job(native):
    if not isinstance(native, dict):
        raise ShapeError("a job must be a JSON object, got %s" % type(native).__name__)
    status = string_field(native.get("status") or "", "status").upper()
    phase = PHASE_BY_STATUS.get(status, "queued")
    terminal = phase in TERMINAL_PHASES
    metadata = native.get("metadata") or {}
    exit_code = native.get("driver_exit_code")
    failure_class = None
    if phase == "cancelled":
        failure_class = "cancelled"
    elif phase == "failed":
        if exit_code == TIMEOUT_EXIT and metadata.get(METADATA_TIME_LIMIT):
            failure_class = "timeout"
        elif native.get("error_type") in ERROR_TYPES_REJECTED:
            failure_class = "rejected"
        else:
            failure_class = "non_zero_exit"
    # Ray's message of a failed job carries up to 20,000 characters of log; the first line says why.
    message = (native.get("message") or "").strip().split("\n", 1)[0] or None
    return {
        "job_id": string_field(native.get("submission_id") or native.get("job_id"), "submission_id"),
        "ray_job_id": native.get("job_id"),
        "name": metadata.get("bridge_name") or native.get("submission_id"),
        "identity": metadata.get(METADATA_IDENTITY),
        "phase": phase,
        "terminal": terminal,
        "native_state": status or None,
        "reason": message,
        "error_type": native.get("error_type"),
        "exit_code": exit_code if terminal else None,
        "signal": None,
        "failure_class": failure_class,
        # Ray sets start_time when it accepts the submission, so it is the submit time as well.
        "submit_time": rfc3339((native.get("start_time") or 0) / 1000.0),
        "start_time": rfc3339((native.get("start_time") or 0) / 1000.0),
        "end_time": rfc3339((native.get("end_time") or 0) / 1000.0) if terminal else None,
        "partition": None,
        "nodes": (native.get("driver_info") or {}).get("node_ip_address"),
        "entrypoint": native.get("entrypoint"),
        "native": native,
    }


def string_field(value, field):
    if not isinstance(value, str):
        raise ShapeError("'%s' must be a string, got %s" % (field, type(value).__name__))
    return value
