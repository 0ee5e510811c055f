"""BridgeJob status from a normalized job: phase, conditions, and whether a patch is needed.

Pure functions. A condition's lastTransitionTime changes only when its status flips, a status
that equals the current one yields no patch at all (no write, no watch event, no reconcile loop),
and a terminal phase is never left.
"""

import datetime
import re

from bridge_controller import query
from bridge_controller.collection import module_utils

_backend = module_utils("_backend")
_fields = module_utils("_fields")

# A BridgeJob's phase is its job's (module_utils/_backend.py), capitalized as Kubernetes phases are;
# Pending before there is a job.
PHASE_BY_JOB_PHASE = dict((phase, phase.capitalize()) for phase in _backend.PHASES)
JOB_PHASE_BY_PHASE = dict((phase, job_phase) for job_phase, phase in PHASE_BY_JOB_PHASE.items())
TERMINAL = tuple(PHASE_BY_JOB_PHASE[phase] for phase in _backend.TERMINAL_PHASES)
CONDITION_TYPES = ("Placed", "Submitted", "Running", "Succeeded", "Failed", "Cancelled", "BackendReachable", "ResultSelected",
                   "OutputRead")
JOB_FIELDS = {
    "job_id": "jobId",
    "native_state": "nativeState",
    "reason": "reason",
    "exit_code": "exitCode",
    "failure_class": "failureClass",
    "submit_time": "submitTime",
    "start_time": "startTime",
    "end_time": "endTime",
    # A finished job's results in brief (bridge.hpc.job_info's results_summary), where its backend keeps results.
    "results_summary": "results",
}


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def array_status(array):
    """status.array of an array's record (_arrays.array_job): its keys camelCased, counts as they are."""
    status = dict((_fields.camel(key), value) for key, value in array.items() if key != "failures")
    status["failures"] = [dict((_fields.camel(key), value) for key, value in failure.items())
                          for failure in array.get("failures") or []]
    return status


def array_record(status):
    """An array's record from what array_status made of it: its keys snake_cased again."""
    record = dict((_snake(key), value) for key, value in status.items() if key != "failures")
    record["failures"] = [dict((_snake(key), value) for key, value in failure.items()) for failure in status.get("failures") or []]
    return record


def _snake(name):
    return re.sub("([A-Z])", lambda match: "_" + match.group(1).lower(), name)


def job_status(job):
    """The status fields a normalized job determines; status.array only for an array."""
    fields = dict((camel, job.get(snake)) for snake, camel in JOB_FIELDS.items())
    if job.get("array"):
        fields["array"] = array_status(job["array"])
    if fields["jobId"] is not None:
        fields["jobId"] = str(fields["jobId"])
    fields["phase"] = PHASE_BY_JOB_PHASE.get(job.get("phase"), "Queued")
    if job.get("failure_class") == "rejected" and job.get("phase") == "failed":
        fields["phase"] = "Failed"
    return fields


def set_condition(conditions, kind, status, reason, message, now, generation):
    """conditions with `kind` set; its lastTransitionTime moves only when its status changes."""
    status = "True" if status is True else "False" if status is False else status
    result = []
    found = False
    for condition in conditions or []:
        if condition.get("type") != kind:
            result.append(condition)
            continue
        found = True
        transition = condition.get("lastTransitionTime") if condition.get("status") == status else now
        result.append({"type": kind, "status": status, "reason": reason, "message": message,
                       "lastTransitionTime": transition, "observedGeneration": generation})
    if not found:
        result.append({"type": kind, "status": status, "reason": reason, "message": message,
                       "lastTransitionTime": now, "observedGeneration": generation})
    order = dict((kind, index) for index, kind in enumerate(CONDITION_TYPES))
    return sorted(result, key=lambda c: order.get(c["type"], len(order)))


def overtaken(phase, job):
    """True when `job` would move a terminal `phase` elsewhere: a finished job neither runs nor
    finishes again, so such an observation was made before the one that wrote `phase` (a
    read that lost a race with a newer write) and its fields are not applied."""
    return phase in TERMINAL and job_status(job)["phase"] != phase


def desired_status(current, generation, job=None, reachable=None, message=None, submitted=False,
                   backend_error=None, waiting=None, now=None, result_query=None, refusal_reason=None,
                   placement=None, placed=None, backend=None, attempts=None, next_attempt=None):
    """The status a CR should have after what was just observed.

    `job` is the normalized job (None when not read this time), `reachable` whether the backend
    answered (None when it was not asked), `submitted` whether a job id is known, `waiting` a
    (reason, message) of why a job that is not submitted cannot be yet, `result_query` the CR's
    spec.resultQuery, applied to a job seen finished. `placement` is status.placement as placement
    chose it and `placed` the Placed condition's (status, reason, message): both are dropped when
    the current status holds a placement that names a backend, since a placed job never moves (a
    write computed from a view that lagged another replica's choice must not replace it).
    `backend` is status.backend ({kind, name, type}, or {type} for an inline spec.backend).
    `attempts` is status.attempts of a job with spec.retry (retries.py), and `next_attempt`
    status.nextAttempt while a next attempt waits: the job is Queued then, not Failed.
    """
    now = now or now_rfc3339()
    status = dict(current or {})
    status.pop("conditions", None)
    if ((current or {}).get("placement") or {}).get("backend"):
        if placement is not None:
            backend = None           # this write's choice, not the recorded one
        placement = placed = None
    if placement is not None:
        status["placement"] = placement
    if backend is not None:
        status["backend"] = backend
    applied = job is not None and not overtaken(status.get("phase"), job)
    if applied:
        previous_phase = status.get("phase")
        status.update(job_status(job))
        # A message says why the CR is in its phase ("submitted", a refusal): a job seen in another
        # phase makes it stale (a Completed BridgeJob saying "submitted"), unless this write brings one.
        if message is None and status["phase"] != previous_phase:
            status.pop("message", None)
    if applied and attempts is not None:
        status["attempts"] = attempts
        status["nextAttempt"] = next_attempt
        if next_attempt:
            status["phase"] = "Queued"
    elif applied and status.get("phase") in TERMINAL:
        status.pop("nextAttempt", None)   # no attempt follows a job that ended otherwise (cancelled)
    status.setdefault("phase", "Pending")
    status["observedGeneration"] = generation
    if message is not None:
        status["message"] = message
    conditions = list((current or {}).get("conditions") or [])
    if placed is not None:
        conditions = set_condition(conditions, "Placed", placed[0], placed[1], placed[2], now, generation)
    phase = status["phase"]
    has_job = bool(status.get("jobId")) or submitted
    # In the condition, not in status.message: the next write resets the condition, while a
    # message stays until something replaces it.
    reason, why = waiting if waiting and not has_job else ("NotSubmitted", "not submitted yet")
    conditions = set_condition(conditions, "Submitted", has_job, "Submitted" if has_job else reason,
                               "job %s" % status.get("jobId") if has_job else why, now, generation)
    conditions = set_condition(conditions, "Running", phase == "Running", phase, "", now, generation)
    # A job without a process (a quantum primitive run) has no exit code to name.
    succeeded_message = "exit code %s" % status["exitCode"] if phase == "Completed" and status.get("exitCode") is not None else ""
    conditions = set_condition(conditions, "Succeeded", phase == "Completed", phase, succeeded_message, now, generation)
    failed_reason = refusal_reason or status.get("failureClass") or "Failed"
    if status.get("nextAttempt"):
        conditions = set_condition(conditions, "Failed", False, "Retrying", status.get("message") or "", now, generation)
    else:
        conditions = set_condition(conditions, "Failed", phase == "Failed", failed_reason if phase == "Failed" else phase,
                                   status.get("reason") or "" if phase == "Failed" else "", now, generation)
    conditions = set_condition(conditions, "Cancelled", phase == "Cancelled", phase, "", now, generation)
    if reachable is not None:
        conditions = set_condition(conditions, "BackendReachable", reachable,
                                   "Reachable" if reachable else (backend_error or {}).get("type", "Unreachable"),
                                   "" if reachable else (backend_error or {}).get("message", ""), now, generation)
    # A job refused or cancelled before it was submitted has no result to select from.
    if applied and result_query is not None and phase in TERMINAL and status.get("jobId"):
        status["result"], (selected, reason, why) = query.selected(result_query, job)
        conditions = set_condition(conditions, "ResultSelected", selected, reason, why, now, generation)
    # The output of a job seen finished; with spec.output.follow also of one seen running, and the read
    # that ends a followed output (a retried attempt's) whatever the phase it leaves.
    if applied and (phase in TERMINAL or job.get("phase") == "running" or (status.get("output") or {}).get("running")):
        conditions = output_status(status, conditions, job, now, generation)
    status["conditions"] = conditions
    # A merge patch deletes the fields it sets to null, so a stored status never holds nulls;
    # keeping them here would make every later comparison differ and rewrite every CR each poll.
    return dict((key, value) for key, value in status.items() if value is not None)


def output_status(status, conditions, job, now, generation):
    """status.output and the OutputRead condition of a job whose output was read (the module's
    `output`: text, lines, truncated, and `running` when read while the job ran, reason Following)
    or could not be (`output_error`); conditions as they were for a job whose output was not asked
    for. An output read while the job ran is replaced by the read of its end; a job that ended
    without one (cancelled: a cancel reads no output) keeps it, `running` saying when it was read."""
    if job.get("output") is not None:
        output = job["output"]
        status["output"] = {"text": output.get("text") or "", "lines": output.get("lines") or 0,
                            "truncated": bool(output.get("truncated"))}
        reason = "Read"
        if output.get("running"):
            status["output"]["running"] = True
            reason = "Following"
        return set_condition(conditions, "OutputRead", True, reason, lines_read(status["output"]), now, generation)
    if job.get("output_error"):
        return set_condition(conditions, "OutputRead", False, "ReadFailed", str(job["output_error"])[:1000], now, generation)
    if (status.get("output") or {}).get("running") and status["phase"] in TERMINAL:
        return set_condition(conditions, "OutputRead", True, "ReadWhileRunning",
                             lines_read(status["output"]) + ", read while the job ran", now, generation)
    return conditions


def lines_read(output):
    """OutputRead's message of an output read: "20 lines, truncated"."""
    return "%d lines%s" % (output["lines"], ", truncated" if output["truncated"] else "")


def status_patch(current, desired):
    """The merge patch for .status (fields gone from `desired` are deleted), or None when equal."""
    current = current or {}
    if current == desired:
        return None
    return {"status": merge_patch(current, desired)}


def merge_patch(current, desired):
    """`desired` as a merge patch over `current`: a merge patch merges an object into the stored one,
    so each key gone from `desired`, at any depth of objects (status.output.running once the read
    of a followed job's end replaces the one made while it ran), is set to null, which deletes it."""
    patch = dict(desired)
    for key, value in current.items():
        if key not in desired:
            patch[key] = None
        elif isinstance(value, dict) and isinstance(desired[key], dict):
            patch[key] = merge_patch(value, desired[key])
    return patch
