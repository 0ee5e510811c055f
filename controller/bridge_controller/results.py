"""What a module's result means for each CR of its batch: pure functions, no Kubernetes, no runner.

Each CR gets an Outcome: what to write into its status (desired_status's keyword arguments) and
its class, which says whether and when its backend work is tried again:

* done       the backend did its part (a job submitted, read or cancelled): backoff forgotten;
* refused    the job itself was refused (invalid spec, unsupported, not found, already exists):
             the CR is Failed with failure class `rejected`, and that is final;
* temporary  the backend may answer next time (connection, timeout, 5xx, 429, a runner that
             failed): BackendReachable False, retried after the CR's growing backoff;
* permanent  the backend refuses us, not the job (auth failed, the URL is another service):
             BackendReachable False naming the error type, retried at the backoff's cap only,
             since the fix (a Secret, a URL behind a proxy) is no change of the CR: no event
             would bring it back otherwise;
* waiting    something the job needs is not there yet and nobody failed (placement waits for
             its candidates' first probe): retried after a few seconds, and at once when a
             backend object changes.

Errors say which they are with `temporary` and what they are about with `kind`: the collection's
error types (module_utils/_errors.py). A module older than that flag does not say: then only the
refusals the controller always treated as final are permanent, everything else is temporary.
"""

import collections

from bridge_controller.collection import module_utils

_errors = module_utils("_errors")

DONE, REFUSED, TEMPORARY, PERMANENT, WAITING = "done", "refused", "temporary", "permanent", "waiting"
# The kinds of the errors about the job itself: the same request would meet them again.
JOB_REFUSALS = frozenset(error.kind for error in (_errors.Rejected, _errors.SpecError, _errors.Unsupported,
                                                  _errors.AlreadyExists, _errors.NotFound))
# An item the module did not answer for: nothing is known, so it is a temporary failure.
NO_RESULT = {"failed": True, "error": {"type": "NoResult", "kind": _errors.ServerError.kind,
                                       "message": "the module returned no result for this job"}}

Outcome = collections.namedtuple("Outcome", "observed kind")


def is_temporary(error):
    if "temporary" in error:
        return bool(error["temporary"])
    return error.get("kind") not in JOB_REFUSALS


def module_error(result, default_type):
    """The error of a module that failed as a whole (its `error`, else its `msg`)."""
    error = result.get("error") or {}
    return {"type": error.get("type") or default_type, "temporary": is_temporary(error),
            "message": str(result.get("msg") or error.get("message") or "")[:500]}


def runner_error(exc):
    """A runner that failed, or a Secret or ConfigMap that could not be read: nothing was learned
    about the jobs, and the next attempt may fare better."""
    return {"type": type(exc).__name__, "temporary": True, "message": str(exc)[:500]}


def unreachable(error, message=None):
    """The backend was not reached, or refused us: the last known job state stays."""
    observed = {"reachable": False, "backend_error": error}
    if message is not None:
        observed["message"] = message
    return Outcome(observed, TEMPORARY if is_temporary(error) else PERMANENT)


def refused(reason, message, **observed):
    """The job itself was refused, by its backend or the controller (spec.refusal, policy.py): Failed,
    for good. `observed` may name the Failed condition's reason (refusal_reason)."""
    job = {"phase": "failed", "failure_class": "rejected", "reason": reason}
    return Outcome(dict(observed, job=job, message=message), REFUSED)


def item_outcome(action, item):
    """One item of bridge.hpc.jobs's `results` (a submit or cancel of one CR)."""
    error = item.get("error") or {}
    if item.get("failed"):
        if is_temporary(error) or error.get("kind") not in JOB_REFUSALS:
            return unreachable(error, item.get("msg"))
        return refused(error.get("reason"), item.get("msg"), reachable=True)
    job = item.get("job")
    if job is not None and ("output" in item or "output_error" in item):
        # A job the submit found finished: its output was read then, since it is not polled.
        job = dict(job, **dict((key, item[key]) for key in ("output", "output_error") if key in item))
    if action == "cancel" and job is None:
        job = {"phase": "cancelled", "failure_class": "cancelled", "reason": "never submitted"}
    return Outcome({"job": job, "reachable": True, "submitted": job is not None and job.get("job_id") is not None,
                    "message": (item.get("job") or {}).get("reason") if action == "submit" else None}, DONE)


def batch_outcomes(action, identities, result):
    """{identity: Outcome} of a submit or cancel module run for the jobs of `identities`."""
    if result.get("failed") and not result.get("results"):
        # The module failed before any item (the batch's one lookup: connection, TLS, auth):
        # nothing was submitted or cancelled. Its error, not "no result", is what to report.
        outcome = unreachable(module_error(result, "%sFailed" % action.capitalize()))
        return dict((identity, outcome) for identity in identities)
    by_identity = dict((item.get("identity"), item) for item in result.get("results") or [])
    return dict((identity, item_outcome(action, by_identity.get(identity) or NO_RESULT)) for identity in identities)


def poll_outcomes(identities, result):
    """{identity: Outcome} of a bridge.hpc.job_info run reading the jobs of `identities`."""
    if result.get("failed"):
        # The module ran but could not list the jobs (slurmrestd down, 5xx, ...): nothing was
        # learned about them, so the backend is unreachable, not "no longer knows this job".
        outcome = unreachable(module_error(result, "PollFailed"))
        return dict((identity, outcome) for identity in identities)
    jobs = result.get("jobs") or {}
    gone = Outcome({"reachable": True, "message": "the backend no longer knows this job"}, DONE)
    outcomes = dict((identity, Outcome({"job": jobs[identity], "reachable": True}, DONE) if jobs.get(identity) else gone)
                    for identity in identities)
    # Several jobs carry the identity (module_utils/slurm/identity.py): none is taken for the
    # BridgeJob's, which keeps what it last knew, and the error names them.
    for identity, error in (result.get("refused") or {}).items():
        if identity in outcomes:
            outcomes[identity] = unreachable(module_error({"error": error}, "AmbiguousIdentity"), error.get("message"))
    return outcomes
