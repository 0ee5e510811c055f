"""A BridgeJob's retries (spec.retry): which attempt it polls and what its status says of attempts.

Pure functions. The collection decides what follows an attempt (module_utils/_retry.py), the same
way for a module run and for the controller: attempt 0 carries the CR's UID, attempt n
"<uid>.<n>". While a next attempt waits for its backoff the CR stays Queued, its Failed condition
False with reason Retrying, and status.nextAttempt says which attempt and from when; plan.py then
plans `retry`, which the executor turns into a submit once that time has come. The submit is the
batch's like any other: bridge.hpc.jobs looks all attempt identities up before it submits, so a
controller killed before, during or after a backoff never submits an attempt twice.

A poll reads the latest attempt alone; what the earlier ones were is in status.attempts, whose
records keep all that the collection's merge of an array's attempts needs (_retry.with_records),
so status.array counts every index of the array while a later attempt runs a few of them again.
"""

from bridge_controller import results
from bridge_controller.collection import module_utils
from bridge_controller.spec import GROUP_OPTIONS, identity_of
from bridge_controller.status import JOB_PHASE_BY_PHASE, PHASE_BY_JOB_PHASE, array_record, array_status

_retry = module_utils("_retry")
_backend = module_utils("_backend")
_spec = module_utils("_spec")
_errors = module_utils("_errors")

# status.attempts keeps the latest attempts only: a limit of 100 would otherwise grow the CR past
# what a status should hold (an array's oldest entry kept then stands for those dropped too). The
# top-level job fields are always the latest attempt's.
MAX_STATUS_ATTEMPTS = 20
ATTEMPT_FIELDS = {"attempt": "attempt", "job_id": "jobId", "identity": "identity", "phase": "phase",
                  "failure_class": "failureClass", "exit_code": "exitCode", "submit_time": "submitTime",
                  "start_time": "startTime", "end_time": "endTime"}


def retry_of(obj):
    """The normalized retry of a CR's spec.retry ({limit, classes, backoff_seconds}), or None."""
    given = (obj.get("spec") or {}).get("retry")
    if not given:
        return None
    params = dict((snake, given[camel]) for camel, snake in GROUP_OPTIONS["retry"].items() if given.get(camel) is not None)
    try:
        return _spec.normalize_retry(params)
    except _errors.SpecError:
        return None  # its submit refuses it, naming the field


def current_attempt(obj):
    """The number of the attempt the CR's status follows (0 before any)."""
    attempts = (obj.get("status") or {}).get("attempts") or []
    return attempts[-1].get("attempt") or 0 if attempts else 0


def poll_identity(obj):
    """The identity a poll reads: the current attempt's."""
    return _retry.attempt_identity(identity_of(obj), current_attempt(obj))


def cancel_item(obj):
    """The item of a cancel: with retry, the limit too, so bridge.hpc.jobs looks every attempt up and
    cancels the latest (one submitted just before a controller stopped included)."""
    retry = retry_of(obj)
    item = {"identity": identity_of(obj)}
    if retry:
        item["retry"] = {"limit": retry["limit"]}
    return item


def seconds_until_next(obj, now):
    """Seconds from epoch `now` until status.nextAttempt is due (0 when it is, or has no time)."""
    due = _retry.epoch(((obj.get("status") or {}).get("nextAttempt") or {}).get("notBefore"))
    return max(0.0, due - now) if due is not None else 0.0


def status_entry(record):
    """One status.attempts entry from an attempt record (_retry.record): camelCase, phase as a
    BridgeJob's, no nulls (a merge patch would delete them, and the next comparison differ); an
    array attempt's counts, indexes and failures as status.array holds an array's."""
    entry = dict((camel, record.get(snake)) for snake, camel in ATTEMPT_FIELDS.items() if record.get(snake) is not None)
    if "phase" in entry:
        entry["phase"] = PHASE_BY_JOB_PHASE.get(entry["phase"], "Queued")
    if "jobId" in entry:
        entry["jobId"] = str(entry["jobId"])
    array = dict((key, record[key]) for key in _retry.ARRAY_KEYS if record.get(key) is not None)
    if array:
        entry.update(array_status(array))
    return entry


def attempt_record(entry):
    """The attempt record (_retry.record) a status.attempts entry was made from."""
    record = dict((snake, entry.get(camel)) for snake, camel in ATTEMPT_FIELDS.items())
    record["attempt"] = record["attempt"] or 0
    record["phase"] = JOB_PHASE_BY_PHASE.get(record["phase"], record["phase"])
    array = array_record(dict((key, value) for key, value in entry.items() if key not in ATTEMPT_FIELDS.values()))
    if array.get("indexes") is not None:
        record.update(array)
    return record


def known_records(obj, found):
    """The record of every attempt, attempt 0's first: `found` (a lookup's, or the poll's of the
    latest attempt) and the records status.attempts keeps. An earlier attempt's entry that says it
    ended is kept rather than what a lookup finds of it now: an ended attempt does not change, and
    the lookup may read it from accounting, which knows less (on Slurm 22.05 no exit code). An
    entry written without an array's fields gives way to a record with them."""
    kept = dict((entry.get("attempt") or 0, attempt_record(entry)) for entry in (obj.get("status") or {}).get("attempts") or [])
    latest = found[-1]["attempt"]
    records = dict((attempt, record) for attempt, record in kept.items() if attempt < latest)
    for record in found:
        entry = kept.get(record["attempt"])
        ended = entry is not None and entry.get("phase") in _backend.TERMINAL_PHASES
        if record["attempt"] == latest or not ended or (record.get("indexes") is not None and entry.get("indexes") is None):
            records[record["attempt"]] = record
    return [records[attempt] for attempt in sorted(records)]


def trimmed(records):
    """The latest MAX_STATUS_ATTEMPTS records. The oldest one kept of an array's stands for those
    dropped before it too (their merge with it), so that a later merge still counts every index."""
    if len(records) <= MAX_STATUS_ATTEMPTS:
        return records
    dropped, kept = records[:-MAX_STATUS_ATTEMPTS], list(records[-MAX_STATUS_ATTEMPTS:])
    merged = _retry.merged_array(dropped + kept[:1], {})
    if merged is not None:
        oldest = dict((key, value) for key, value in kept[0].items() if key not in _retry.ARRAY_KEYS)
        oldest.update((key, merged[key]) for key in _retry.ARRAY_KEYS if merged.get(key) is not None)
        kept[0] = oldest
    return kept


def next_entry(next_attempt):
    """status.nextAttempt from a job's next_attempt ({attempt, identity, due})."""
    if not next_attempt:
        return None
    return {"attempt": next_attempt["attempt"], "identity": next_attempt["identity"], "notBefore": next_attempt["due"]}


def observed(obj, action, outcome, now):
    """`outcome` of a submit, poll or cancel of a CR with spec.retry, with its status.attempts and
    status.nextAttempt (observed's `attempts` and `next_attempt`); any other outcome as it is.

    A submit's job carries every attempt found (bridge.hpc.jobs looked them all up); a poll reads
    the current attempt only, whose record joins those of the status, and _retry.after says what
    follows it."""
    retry = retry_of(obj)
    job = outcome.observed.get("job")
    if retry is None or outcome.kind != results.DONE or not job:
        return outcome
    if action == "cancel":
        return cancelled(obj, outcome, job)
    if action not in ("submit", "poll"):
        return outcome
    if "attempts" in job:
        found = job["attempts"]
        next_attempt = job.get("next_attempt")
    else:
        attempt = current_attempt(obj)
        found = [_retry.record(attempt, job)]
        decision = _retry.after(retry, attempt, job, now)
        next_attempt = None
        if decision.action in (_retry.SUBMIT, _retry.BACKOFF):
            next_attempt = {"attempt": decision.attempt, "due": _retry_time(decision.due),
                            "identity": _retry.attempt_identity(identity_of(obj), decision.attempt)}
    records = trimmed(known_records(obj, found))
    job = _retry.with_records({"identity": identity_of(obj), "retry": retry}, records, job)
    entries = [status_entry(record) for record in records]
    update = {"job": job, "attempts": entries, "next_attempt": next_entry(next_attempt)}
    if next_attempt:
        update["message"] = retry_message(job, entries, next_attempt)
    elif action == "submit" and len(entries) > 1:
        submitted = outcome.observed.get("message") == "submitted"
        update["message"] = "attempt %d %s" % (entries[-1]["attempt"], "submitted" if submitted else "found: %s (job %s)" % (
            job.get("phase"), job.get("job_id")))
    return results.Outcome(dict(outcome.observed, **update), outcome.kind)


def _retry_time(epoch):
    return _backend.rfc3339(max(epoch, 1))


def retry_message(job, entries, next_attempt):
    """What the Failed condition (False, Retrying) and status.message say while a next attempt waits."""
    last = entries[-1] if entries else {}
    detail = job.get("failure_class") or job.get("phase")
    if job.get("exit_code") not in (None, 0):
        detail += ", exit code %s" % job["exit_code"]
    return "attempt %s (job %s) %s (%s); attempt %d (%s) is due at %s" % (
        last.get("attempt", 0), job.get("job_id"), job.get("phase"), detail, next_attempt["attempt"],
        next_attempt["identity"], next_attempt["due"])


def cancelled(obj, outcome, job):
    """A cancel of a CR with spec.retry: cancelled while its next attempt waited for its backoff,
    the job is Cancelled (its last attempt failed, but no other follows now)."""
    waiting = (obj.get("status") or {}).get("nextAttempt")
    if not waiting:
        return outcome
    entries = list((obj.get("status") or {}).get("attempts") or [])
    if job.get("identity") == waiting.get("identity"):
        # Submitted by a controller that stopped before writing it: the cancel found it anyway.
        entries = entries + [status_entry(_retry.record(waiting["attempt"], job))]
    elif job.get("terminal"):
        job = dict(job, phase="cancelled", failure_class="cancelled",
                   reason="cancelled while attempt %d waited for its backoff" % waiting["attempt"])
    return results.Outcome(dict(outcome.observed, job=job, attempts=entries[-MAX_STATUS_ATTEMPTS:], next_attempt=None),
                           outcome.kind)
