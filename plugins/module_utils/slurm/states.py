# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm job states, phases and failure classes, and jobs of any REST version normalized (pure).

Values decode here whatever the version: {set, infinite, number} numbers and uint32 sentinels,
list-valued states (v0.0.40+) and wait-status exit codes (v0.0.38).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.bridge.hpc.plugins.module_utils._backend import TERMINAL_PHASES, ShapeError, rfc3339
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.accounting import (
    EXIT_CODE_UNRELIABLE,
    accounting_fields,
    live_shape,
)
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.compile import ARRAY_MARK, MAC_MARK, TAG_PREFIX


BASE_STATES = (
    "PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT",
    "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY",
)
PHASE_BY_STATE = {
    "PENDING": "queued",
    "REQUEUED": "queued",
    "REQUEUE_HOLD": "queued",
    "REQUEUE_FED": "queued",
    "RESV_DEL_HOLD": "queued",
    "RUNNING": "running",
    "CONFIGURING": "running",
    "SUSPENDED": "running",
    "RESIZING": "running",
    "SIGNALING": "running",
    "STAGE_OUT": "running",
    "COMPLETED": "completed",
    "CANCELLED": "cancelled",
    "FAILED": "failed",
    "TIMEOUT": "failed",
    "DEADLINE": "failed",
    "NODE_FAIL": "failed",
    "BOOT_FAIL": "failed",
    "OUT_OF_MEMORY": "failed",
    "PREEMPTED": "failed",
    "SPECIAL_EXIT": "failed",
    "REVOKED": "cancelled",
}
FAILURE_CLASS_BY_STATE = {
    "TIMEOUT": "timeout",
    "DEADLINE": "timeout",
    "OUT_OF_MEMORY": "out_of_memory",
    "NODE_FAIL": "node_failure",
    "BOOT_FAIL": "node_failure",
    "CANCELLED": "cancelled",
    "REVOKED": "cancelled",
    "PREEMPTED": "preempted",
    "FAILED": "non_zero_exit",
    "SPECIAL_EXIT": "non_zero_exit",
}
# Flags of a job Slurm has put back in the queue (REQUEUED while the ended run winds down).
REQUEUE_FLAGS = frozenset(["REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"])
# Pending reasons after which Slurm will never start the job by itself: the request does not fit
# the partition, account or QOS. Slurm accepts such jobs (HTTP 200) and lets them pend forever.
HOPELESS_REASONS = frozenset([
    "PartitionTimeLimit", "PartitionNodeLimit", "PartitionConfig", "BadConstraints",
    "ReqNodeNotAvail", "InvalidAccount", "InvalidQOS", "AccountNotAllowed", "QOSNotAllowed",
    "PartitionDown", "PartitionInactive", "NodeDown", "InvalidDependency",
    "DependencyNeverSatisfied", "QOSMaxWallDurationPerJobLimit", "AssocMaxWallDurationPerJobLimit",
    "QOSMaxNodePerJobLimit", "QOSMaxCpuPerJobLimit", "AssocMaxNodesPerJob",
])
# What cancel_rejected acts on (doc text of the option in the Slurm modules' docs).
NEVER_STARTS = "the job pends for a reason Slurm never clears by itself: %s" % ", ".join(
    "C(%s)" % reason for reason in sorted(HOPELESS_REASONS))
# Slurm reports "no value" and "unlimited" as sentinels in the uint32 range before v0.0.39.
NO_VAL = 0xFFFFFFFE


def number(value):
    """An int from a plain number, a v0.0.39+ {set, infinite, number} struct or a sentinel.

    None means not set or unlimited: Bridge treats both as "no limit".
    """
    if isinstance(value, dict):
        if value.get("infinite") or not value.get("set", True):
            return None
        value = value.get("number")
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        if value.lower() in ("infinity", "unlimited", ""):
            return None
        try:
            value = int(float(value))
        except ValueError:
            return None
    # v0.0.38 says "unlimited" with -1 (maximum_nodes_per_job) and uint32 sentinels elsewhere.
    if value >= NO_VAL or value < 0:
        return None
    return int(value)


def epoch_time(epoch):
    return rfc3339(number(epoch))


def state_list(job_state):
    if job_state is None:
        return []
    if isinstance(job_state, list) and all(isinstance(state, str) for state in job_state):
        return [state.upper() for state in job_state]
    if isinstance(job_state, str):
        return [job_state.upper()]
    raise ShapeError("a state must be a string or a list of strings, got %s" % type(job_state).__name__)


def required_name(native, key="name"):
    """The name of a job, partition or node: a string every answer has."""
    value = native.get(key)
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        raise ShapeError("'%s' must be a non-empty string or number, got %s" % (key, type(value).__name__))
    return str(value)


def decode_exit(exit_code):
    """(exit_code, signal) from any version's exit_code.

    v0.0.38 sends the raw wait status (768 = exit 3, 15 = killed by signal 15); v0.0.39 the same
    inside a struct; v0.0.40+ an object with status[], return_code and signal.
    """
    if exit_code is None:
        return None, None
    if isinstance(exit_code, dict) and ("status" in exit_code or "return_code" in exit_code):
        status = exit_code.get("status") or []
        if isinstance(status, str):
            status = [status]
        status = [s.upper() for s in status]
        if "PENDING" in status or "INVALID" in status:
            return None, None
        signal = number((exit_code.get("signal") or {}).get("id"))
        if "SIGNALED" in status or "CORE_DUMPED" in status:
            return None, signal
        return number(exit_code.get("return_code")), None
    raw = number(exit_code)
    if raw is None:
        return None, None
    if raw & 0x7F:
        return None, raw & 0x7F
    return (raw >> 8) & 0xFF, None


def text(value):
    if value is None:
        return None
    if isinstance(value, list):
        return ",".join(str(v) for v in value) or None
    value = str(value)
    return value if value and value != "None" else None


def identity_of(comment):
    """The identity of a comment Bridge wrote ("bridge:<identity>", with " mac=<tag>" under an
    identity key and " array=<indexes>" for an array)."""
    comment = text(comment)
    if comment and comment.startswith(TAG_PREFIX):
        return comment[len(TAG_PREFIX):].split(ARRAY_MARK, 1)[0].split(MAC_MARK, 1)[0]
    return None


def tag_of(comment):
    """The identity's tag in a comment Bridge wrote under an identity key; None without one."""
    comment = text(comment)
    if not comment or not comment.startswith(TAG_PREFIX) or MAC_MARK not in comment.split(ARRAY_MARK, 1)[0]:
        return None
    return comment.split(ARRAY_MARK, 1)[0].split(MAC_MARK, 1)[1] or None


def asked_of(comment):
    """The indexes of an array as Bridge asked for them, from the comment it wrote; None for a job
    without them (no array, or not submitted by Bridge)."""
    comment = text(comment)
    if comment and comment.startswith(TAG_PREFIX) and ARRAY_MARK in comment:
        return comment.split(ARRAY_MARK, 1)[1] or None
    return None


def array_record(native):
    """What a record of slurmctld (or accounting, through live_shape) says of the array it belongs to:
    {"array_job_id", "index" (None on the record of the tasks still pending, which Slurm has not
    split off yet), "pending" (those tasks, as Slurm writes them: "5-99%8"), "parallelism", "asked"
    (the indexes of the comment)}; None for a job of no array (array_job_id 0)."""
    array_job_id = number(native.get("array_job_id"))
    if not array_job_id:
        return None
    return {
        "array_job_id": str(array_job_id),
        "index": number(native.get("array_task_id")),
        "pending": text(native.get("array_task_string")),
        "parallelism": number(native.get("array_max_tasks")) or None,
        "asked": asked_of(native.get("comment")),
    }


def normalize_job(native):
    """One job of any REST version as Bridge's backend-neutral job dict."""
    states = state_list(native.get("job_state"))
    base = next((s for s in states if s in BASE_STATES), states[0] if states else "UNKNOWN")
    flags = [s for s in states if s != base]
    # v0.0.38/39 print a flag instead of the base state ("COMPLETING" while a finished or
    # cancelled job winds down); it hides the outcome, so it counts as running until Slurm
    # reports the base state.
    phase = PHASE_BY_STATE.get(base)
    exit_code, signal = decode_exit(native.get("exit_code"))
    if phase is None:
        phase = "queued" if base in ("UNKNOWN", "") else "running"
    reason = text(native.get("state_reason"))
    failure_class = FAILURE_CLASS_BY_STATE.get(base)
    # A job Slurm requeues (preempted with PreemptMode=REQUEUE, a node failure, scontrol requeue)
    # waits to run again under its job id: its base state may still name how the run ended
    # (PREEMPTED) while a REQUEUE flag says it is pending again, so it is queued, not failed.
    requeued = any(state in REQUEUE_FLAGS for state in states)
    if requeued:
        phase, failure_class = "queued", None
    if phase == "failed" and failure_class is None:
        failure_class = "non_zero_exit"
    if phase == "queued" and reason in HOPELESS_REASONS:
        failure_class = "rejected"
    if phase == "completed":
        failure_class = None
    restarts = number(native.get("restart_cnt")) or 0
    if phase == "queued" and (requeued or restarts):
        reason = requeue_reason(restarts, reason)
    terminal = phase in TERMINAL_PHASES
    job = {
        "job_id": required_name(native, "job_id"),
        "name": text(native.get("name")),
        "identity": identity_of(native.get("comment")),
        "phase": phase,
        "terminal": terminal,
        "native_state": "+".join([base] + flags),
        "reason": reason,
        "exit_code": exit_code if terminal else None,
        "signal": signal if terminal else None,
        "failure_class": failure_class,
        "submit_time": epoch_time(native.get("submit_time")),
        "start_time": epoch_time(native.get("start_time")) if phase != "queued" else None,
        "end_time": epoch_time(native.get("end_time")) if terminal else None,
        "partition": text(native.get("partition")),
        "nodes": text(native.get("nodes")),
        "user": text(native.get("user_name")),
        "time_limit_minutes": number(native.get("time_limit")),
        "working_directory": text(native.get("current_working_directory")),
        "stdout": text(native.get("standard_output")),
        "stderr": text(native.get("standard_error")),
        "native": native,
    }
    array = array_record(native)
    if array is not None:
        # Only a task's record has it: arrays.fold makes one job of the records of each array.
        job["array_task"] = array
    return job


def ended_of(recorded, identities):
    """The ended jobs of accounting's `recorded` that carry one of `identities` (only an ended job's
    record has its comment, where the identity is)."""
    wanted = set(identities)
    return [job for job in recorded if job["terminal"] and job["identity"] in wanted]


def normalize_accounting_job(native, api_version):
    """One job of Slurm's accounting (any REST version) in the shape of a live job, plus what only
    accounting knows (account, elapsed_seconds, cpu_seconds, max_rss_bytes; source "accounting")."""
    job = normalize_job(live_shape(native))
    if api_version in EXIT_CODE_UNRELIABLE and job["native_state"].startswith("FAILED") and job["exit_code"] == 0:
        # These versions' accounting reports exit 0 for any exit; FAILED says it was not 0, and
        # nothing in the record says what it was (EXIT_CODE_UNRELIABLE): an array task's too.
        job["exit_code"] = None
    job.update(accounting_fields(native, number))
    job["native"] = native
    return job


def at_path(obj, *path):
    """obj[path[0]][path[1]]...; None where a step is missing or not an object."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def requeue_reason(restarts, reason):
    """Why a requeued job waits: "requeued by Slurm (2 restarts)", with Slurm's pending reason."""
    said = "requeued by Slurm (%d restart%s)" % (restarts, "" if restarts == 1 else "s")
    return "%s: %s" % (said, reason) if reason else said
