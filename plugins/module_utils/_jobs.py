# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The job lifecycle every backend shares: present, absent, wait. Internal to this collection.

The functions take any backend of the contract in _backend.py (render, find, find_many, check,
submit, get, cancel) and return a result dict for a module or the controller. `changed` always
comes from what existed before versus after.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.bridge.hpc.plugins.module_utils import _retry as retries
from ansible_collections.bridge.hpc.plugins.module_utils._backend import TERMINAL_PHASES
from ansible_collections.bridge.hpc.plugins.module_utils._errors import (
    AmbiguousIdentity,
    AuthFailed,
    BridgeError,
    CredentialsRefused,
    NotFound,
    SpecError,
)
from ansible_collections.bridge.hpc.plugins.module_utils._output import error_text, secret_values

SUMMARY_KEYS = ("job_id", "name", "identity", "phase", "native_state", "reason", "exit_code",
                "signal", "failure_class", "partition")


def summary(job):
    """The part of a job shown in diffs: stable fields, no raw payload."""
    if job is None:
        return {"state": "absent"}
    result = dict((k, job.get(k)) for k in SUMMARY_KEYS if k in job)
    result["state"] = "present"
    return result


def predicted_job(spec, client):
    """What check mode reports for a job it would submit."""
    return {
        "job_id": None,
        "name": spec["name"],
        "identity": spec["identity"],
        "phase": "queued",
        "terminal": False,
        "native_state": None,
        "reason": "not submitted (check mode)",
        "exit_code": None,
        "signal": None,
        "failure_class": None,
        "partition": spec.get("queue"),
        "backend": client.NAME,
    }


def wait_for(client, job_id, timeout, interval, until=TERMINAL_PHASES, clock=time.monotonic, sleep=time.sleep,
             last=None):
    """Poll a job until its phase is in `until`, it turns out hopeless, or `timeout` seconds pass.

    Returns (job, timed_out). Polls are idempotent GETs, so the transport retries them.

    Credentials refused on the way (a token that expired) raise CredentialsRefused with the job as
    last seen (`last` before the first poll), since the job itself is fine. A client that reads its
    token from a file reads it again on each refusal, so its wait goes on until the file holds a
    token that is accepted, or `timeout` passes.
    """
    deadline = clock() + timeout
    while True:
        try:
            job = client.get(job_id)
        except AuthFailed as exc:
            if client.token_file is None or clock() >= deadline:
                raise refused_while_waiting(client, job_id, last, exc)
            sleep(min(interval, max(deadline - clock(), 0)))
            continue
        last = job
        if job["phase"] in until or job.get("failure_class") == "rejected":
            return job, False
        remaining = deadline - clock()
        if remaining <= 0:
            return job, True
        sleep(min(interval, remaining))


def refused_while_waiting(client, job_id, job, refused):
    """The CredentialsRefused of a wait for job `job_id` (last seen as `job`) that `refused` ended."""
    secret = "token" if "token" in client.CREDENTIALS else "credentials"
    was = "was" if secret == "token" else "were"
    if client.token_file is not None:
        what = ("the %s %s read from token_file %s refused (expired?) while waiting for job %s, and no token it "
                "accepts appeared in the file within wait_timeout" % (client.TITLE, secret, was, job_id))
        advice = "rotate the token in the file before it expires"
    else:
        what = "the %s %s %s refused (expired?) while waiting for job %s" % (client.TITLE, secret, was, job_id)
        advice = "rerun with a fresh %s" % secret
        if "token_file" in client.CONNECTION:
            advice += " or use token_file"
    reason = "%s; %s: the job is not resubmitted, a later task finds it by its identity (%s)" % (what, advice, refused)
    return CredentialsRefused(reason, job, refused)


def outcome(job, timed_out, wait_timeout, expected_phase=None):
    """(failed, msg) for a job after waiting; pure, so the controller and modules agree."""
    ident = job.get("job_id")
    if timed_out:
        return True, "job %s is still %s after waiting %s seconds (%s)" % (
            ident, job["phase"], wait_timeout, job.get("reason") or job.get("native_state"))
    if job.get("failure_class") == "rejected":
        return True, "job %s can never start: %s; the manager accepted it but it would pend forever" % (
            ident, job.get("reason"))
    if expected_phase and job["phase"] == expected_phase:
        return False, "job %s is %s" % (ident, job["phase"])
    if job["phase"] in ("failed", "cancelled"):
        detail = job.get("failure_class") or job["phase"]
        if job.get("exit_code") not in (None, 0):
            detail += ", exit code %s" % job["exit_code"]
        if job.get("signal"):
            detail += ", signal %s" % job["signal"]
        if job.get("reason"):
            detail += ", reason %s" % job["reason"]
        return True, "job %s %s (%s)" % (ident, job["phase"], detail)
    return False, "job %s is %s" % (ident, job["phase"])


def lookup_keys(spec):
    """(identities, names) a spec's job may carry: its identity and the aliases normalize_spec
    gives (the identity Bridge 0.1.0 derived), each with the job name it was submitted under."""
    identities = [spec["identity"]] + list(spec.get("identity_aliases") or ())
    defaulted = spec.get("name") in (None, spec["identity"])
    return identities, [identity if defaulted else spec["name"] for identity in identities]


def first_found(found, spec):
    """The job of `found` (find_many's answer) that carries the spec's identity, or else an alias."""
    for identity in lookup_keys(spec)[0]:
        if identity in found:
            return found[identity]
    return None


def find_existing(client, spec):
    """The job a spec already has, under its identity or an alias: one lookup, by the backend's
    find when there is one identity (some read a job by its id there, not a list)."""
    identities, names = lookup_keys(spec)
    if len(identities) == 1:
        return client.find(identities[0], name=names[0])
    return first_found(client.find_many(identities, names=names), spec)


def refuse_output(client, spec):
    """SpecError on `output` when the spec asks for output this client cannot read (Slurm without
    a login node, LSF without a stdout file); before anything is submitted, in check mode too."""
    if not spec.get("output"):
        return
    why = client.output_refusal(spec)
    if why:
        raise SpecError("output", "not supported by the %s backend here: %s" % (client.TITLE, why))


def read_output(client, job, spec, secrets=()):
    """{"output": {text, lines, truncated}} of a finished job whose spec asks for its output, or
    {"output_error": why it could not be read}; {} otherwise. At most one request (or one ssh
    command): the job has ended, and what it wrote is read by the call that finds it ended. An
    output that cannot be read does not fail the job's task: the job itself is as it is. `secrets`
    are masked besides the client's own and the spec's secret-looking environment values.

    With output.follow, a running job's output is read too, at each call (each poll), and carries
    `running: true`; an output not written yet (a file not there, NotFound) is no output and no
    error while the job runs."""
    output = spec.get("output")
    if not output or not job or not job.get("job_id"):
        return {}
    running = bool(output.get("follow")) and job.get("phase") == "running"
    if not job.get("terminal") and not running:
        return {}
    if job.get("stdout") is None and spec.get("stdout"):
        job = dict(job, stdout=spec["stdout"])  # accounting may not record it
    try:
        masked = list(secrets) + secret_values(spec.get("environment"))
        read = client.job_output(job, output["tail_lines"], masked)
    except NotFound as exc:
        return {} if running else {"output_error": error_text(exc)}
    except BridgeError as exc:
        return {"output_error": error_text(exc)}
    if running:
        read["running"] = True
    return {"output": read}


def ensure_present(client, spec, check_mode=False, wait=False, wait_timeout=600, poll_interval=5,
                   cancel_rejected=True, sleep=time.sleep, clock=time.monotonic, wallclock=time.time):
    if spec.get("retry"):
        client.render(spec)
        refuse_output(client, spec)
        return ensure_attempts(client, spec, check_mode, wait, wait_timeout, poll_interval, cancel_rejected, sleep,
                               clock, wallclock)
    rendered = client.render(spec)
    refuse_output(client, spec)
    existing = find_existing(client, spec)
    result = {"changed": False, "rendered": rendered, "failed": False}
    if getattr(client, "lookup", None):
        result["lookup"] = client.lookup
    if existing is not None:
        job = existing
    elif check_mode:
        # Check mode still validates against the cluster: it predicts a failure truthfully.
        client.check(spec)
        job = predicted_job(spec, client)
        result["changed"] = True
        wait = False
    else:
        client.check(spec)
        job_id = client.submit(spec)
        result["changed"] = True
        job = client.get(job_id)
    result["diff"] = {"before": summary(existing), "after": summary(job)}
    if wait and not job.get("terminal"):
        try:
            job, timed_out = wait_for(client, job["job_id"], wait_timeout, poll_interval, sleep=sleep, clock=clock,
                                      last=job)
        except CredentialsRefused as exc:
            return refused_result(result, exc)
        if job.get("failure_class") == "rejected" and cancel_rejected:
            job = _cancel_hopeless(client, job)
        result["failed"], result["msg"] = outcome(job, timed_out, wait_timeout)
    elif wait:
        result["failed"], result["msg"] = outcome(job, False, wait_timeout)
    else:
        result["msg"] = "job %s is %s" % (job.get("job_id"), job["phase"])
    result["job"] = job
    if not check_mode:
        result.update(read_output(client, job, spec))
    return result


def ensure_attempts(client, spec, check_mode, wait, wait_timeout, poll_interval, cancel_rejected, sleep, clock,
                    wallclock):
    """ensure_present of a spec with retry (_retry.py): one lookup of every attempt identity before
    anything is submitted, then the attempt _retry.decide names. Without `wait` one step: the next
    attempt is submitted when it is due, else the latest is reported with job["next_attempt"].
    With `wait`, attempts run (backoffs slept) until one completes, none may follow, or
    wait_timeout passes for all of them together. Check mode waits for nothing."""
    wait = wait and not check_mode
    result = {"changed": False, "rendered": client.render(spec), "failed": False}
    identities, names = retries.lookup_keys(spec)
    found = client.find_many(identities, names=names)
    if getattr(client, "lookup", None):
        result["lookup"] = client.lookup
    before = _latest(spec, found)
    deadline = clock() + wait_timeout
    timed_out = False
    while True:
        decision = retries.decide(spec, found, wallclock())
        if decision.action == retries.SUBMIT:
            attempt = retries.attempt_spec(spec, decision.attempt, decision.indexes)
            result["rendered"] = client.render(attempt)
            client.check(attempt)
            if check_mode:
                found[attempt["identity"]] = predicted_job(attempt, client)
                result["changed"] = True
                break
            found[attempt["identity"]] = client.get(client.submit(attempt))
            result["changed"] = True
            if not wait:
                break
            continue
        if not wait or decision.action == retries.DONE:
            break
        remaining = deadline - clock()
        if decision.action == retries.BACKOFF:
            if decision.due - wallclock() > remaining:
                timed_out = True
                break
            sleep(max(decision.due - wallclock(), 0))
            continue
        job = decision.job
        try:
            job, timed_out = wait_for(client, job["job_id"], max(remaining, 0), poll_interval, sleep=sleep, clock=clock,
                                      last=job)
        except CredentialsRefused as exc:
            result["diff"] = {"before": summary(before), "after": summary(exc.job)}
            return refused_result(result, exc)
        if job.get("failure_class") == "rejected" and cancel_rejected:
            job = _cancel_hopeless(client, job)
        found[_identity_found(spec, decision.attempt, found)] = job
        if timed_out or job.get("failure_class") == "rejected":
            break  # a job that can never start, left pending (cancel_rejected false), is waited for no more
    decision = retries.decide(spec, found, wallclock())
    job = retries.with_attempts(spec, found, decision.job, decision)
    result["diff"] = {"before": summary(before), "after": summary(job)}
    result["job"] = job
    if wait:
        result["failed"], result["msg"] = outcome(job, timed_out and decision.action != retries.BACKOFF, wait_timeout)
        if timed_out and decision.action == retries.BACKOFF:
            result["failed"] = True
            result["msg"] += "; attempt %d was due at %s, after wait_timeout (%s seconds)" % (
                decision.attempt, job["next_attempt"]["due"], wait_timeout)
    else:
        result["msg"] = "job %s is %s" % (job.get("job_id"), job["phase"])
        if job.get("next_attempt"):
            following = job["next_attempt"]
            result["msg"] += "; attempt %d (%s) is due at %s" % (decision.attempt, following["identity"], following["due"])
    if len(job["attempts"]) > 1 or job.get("next_attempt"):
        result["msg"] += " (attempt %d of at most %d)" % (job["attempts"][-1]["attempt"], retries.limit_of(spec) + 1)
    if not check_mode and (decision.action == retries.DONE or not job.get("terminal")):
        # The output of the attempt that ended the job, or (output.follow) of the one that runs; an
        # attempt another follows is not read.
        result.update(read_output(client, job, spec))
    return result


def _latest(spec, found):
    """The job of a spec's latest attempt in `found`, or None."""
    attempts = retries.attempts_found(spec, found)
    return attempts[-1][1] if attempts else None


def _identity_found(spec, attempt, found):
    """The key of `found` attempt `attempt`'s job is under (attempt 0's may be an alias)."""
    identity = retries.attempt_identity(spec["identity"], attempt)
    if attempt or identity in found:
        return identity
    return next((alias for alias in spec.get("identity_aliases") or () if alias in found), identity)


def refused_result(result, refused):
    """`result` failed by CredentialsRefused: its message and error, and the job as last seen."""
    result.update(failed=True, msg=str(refused), error=refused.to_dict(), job=refused.job)
    return result


def _cancel_hopeless(client, job):
    """Cancel a job that can never start, so nothing is left pending; keep why it was refused."""
    try:
        client.cancel(job["job_id"])
        final = client.get(job["job_id"])
    except NotFound:
        final = dict(job)
    final = dict(final)
    final["phase"] = "failed"
    final["terminal"] = True
    final["failure_class"] = "rejected"
    final["reason"] = job.get("reason")
    return final


def ensure_absent(client, job_id=None, identity=None, spec=None, check_mode=False, wait=False, wait_timeout=600,
                  poll_interval=5, sleep=time.sleep, clock=time.monotonic):
    """Cancel the job if it still runs or waits; a finished or unknown job is left as it is. The job
    is `job_id`, else the one of `identity`, else the one `spec` (normalized) has: with retry, its
    latest attempt, found with one lookup of all attempt identities (spec may then be no more than
    {identity, name, retry}, for an identity given with retry)."""
    job = None
    if job_id is not None:
        try:
            job = client.get(job_id)
        except NotFound:
            job = None
    elif spec is not None and spec.get("retry"):
        identities, names = retries.lookup_keys(spec)
        job = _latest(spec, client.find_many(identities, names=names))
    elif identity is not None:
        job = client.find(identity)
    elif spec is not None:
        job = find_existing(client, spec)
    result = {"changed": False, "failed": False, "job": job}
    if job is None or job.get("terminal"):
        result["diff"] = {"before": summary(job), "after": summary(job)}
        result["msg"] = "no such job" if job is None else "job %s is already %s" % (job["job_id"], job["phase"])
        return result
    result["changed"] = True
    if check_mode:
        after = dict(job, phase="cancelled", terminal=True)
        result["diff"] = {"before": summary(job), "after": summary(after)}
        result["msg"] = "job %s would be cancelled" % job["job_id"]
        return result
    client.cancel(job["job_id"])
    try:
        final = client.get(job["job_id"])
    except NotFound:
        final = forgotten(job)
    if wait and not final.get("terminal"):
        try:
            final, timed_out = wait_for(client, job["job_id"], wait_timeout, poll_interval, sleep=sleep, clock=clock,
                                        last=final)
        except CredentialsRefused as exc:
            result["diff"] = {"before": summary(job), "after": summary(exc.job)}
            return refused_result(result, exc)
        if timed_out:
            result["failed"] = True
            result["msg"] = "job %s is still %s %s seconds after cancelling it" % (
                job["job_id"], final["phase"], wait_timeout)
    elif not final.get("terminal"):
        # The manager took the cancel and has not ended the job yet (LSF reads RUN right after
        # bkill): report what the cancel leads to; wait=true reads it back once it has.
        read_as = final.get("native_state") or final.get("phase")
        final = cancelling(final)
        result["msg"] = "job %s cancelled; %s still reported it %s (wait: true waits until it has ended)" % (
            job["job_id"], client.TITLE or "the manager", read_as)
    result.setdefault("msg", "job %s cancelled" % job["job_id"])
    result["job"] = final
    result["diff"] = {"before": summary(job), "after": summary(final)}
    return result


def cancelling(job):
    """A job whose cancel its manager accepted but that it still reports queued or running: what the
    cancel leads to (phase cancelled, class cancelled), with the manager's state as it was read."""
    return dict(job, phase="cancelled", terminal=True, failure_class="cancelled",
                reason="cancel requested; the manager had not ended the job yet")


def forgotten(job):
    """A cancelled job its manager no longer knows: one that deletes what it cancels (Kubernetes)
    forgets the job at once."""
    return dict(job, phase="cancelled", terminal=True, failure_class="cancelled", reason="deleted")


def ensure_many_present(client, specs, check_mode=False, wallclock=time.time):
    """Submit every spec whose identity has no job yet, with one lookup for the whole batch.

    Each job's outcome stands on its own: a refused spec does not stop the others. A submitted
    job is reported as queued without reading it back; whoever polls reads all jobs at once.
    A spec with retry looks up all its attempt identities in the same lookup and takes one step:
    the attempt _retry.decide names is submitted when due, else its latest attempt is reported,
    with job["attempts"] and, while the next attempt waits for its backoff, job["next_attempt"].
    """
    identities, names = [], []
    for spec in specs:
        more_identities, more_names = (retries.lookup_keys if spec.get("retry") else lookup_keys)(spec)
        identities.extend(more_identities)
        names.extend(more_names)
    existing, refused = find_all(client, identities, names)
    results = []
    for spec in specs:
        item = {"identity": spec["identity"], "changed": False, "failed": False}
        try:
            item["rendered"] = client.render(spec)
            _refuse_ambiguous(spec, refused)
            refuse_output(client, spec)
            if spec.get("retry"):
                item["changed"], item["job"], item["rendered"] = _step(client, spec, existing, check_mode, wallclock,
                                                                       item["rendered"])
            else:
                job = first_found(existing, spec)
                if job is not None and not check_mode:
                    # A job found finished is not polled again: its output is read now.
                    item.update(read_output(client, job, spec))
                if job is None:
                    client.check(spec)
                    job = predicted_job(spec, client)
                    if not check_mode:
                        job.update(job_id=client.submit(spec), reason="submitted")
                    item["changed"] = True
                item["job"] = job
        except BridgeError as exc:
            item.update(failed=True, error=exc.to_dict(), msg=str(exc))
        results.append(item)
    return results


def _step(client, spec, found, check_mode, wallclock, rendered):
    """(changed, job, rendered) of one step of a spec with retry in a batch: the attempt that is due
    submitted (reported queued, not read back), else the latest attempt as found."""
    found = dict((identity, found[identity]) for identity in retries.lookup_keys(spec)[0] if identity in found)
    decision = retries.decide(spec, found, wallclock())
    changed = decision.action == retries.SUBMIT
    if changed:
        attempt = retries.attempt_spec(spec, decision.attempt, decision.indexes)
        rendered = client.render(attempt) if decision.attempt else rendered
        client.check(attempt)
        job = predicted_job(attempt, client)
        if not check_mode:
            job.update(job_id=client.submit(attempt), reason="submitted")
        found[attempt["identity"]] = job
        decision = retries.decide(spec, found, wallclock())
    return changed, retries.with_attempts(spec, found, decision.job, decision), rendered


def find_all(client, identities, names):
    """(find_many's answer, {identity: AmbiguousIdentity} of those it refused): a batch fails
    only the items whose identity no one job can be pinned on."""
    try:
        return client.find_many(identities, names=names), {}
    except AmbiguousIdentity as exc:
        return exc.found, exc.refused


def _refuse_ambiguous(spec, refused):
    """The AmbiguousIdentity of the first of a spec's identities (its attempts' too) refused."""
    for identity in (retries.lookup_keys if spec.get("retry") else lookup_keys)(spec)[0]:
        if identity in refused:
            raise refused[identity]


def read_many(client, identities):
    """(jobs by identity, identities without a job, {identity: AmbiguousIdentity} of those several
    jobs carry) from one list request."""
    try:
        found, refused = client.poll_many(identities), {}
    except AmbiguousIdentity as exc:
        found, refused = exc.found, exc.refused
    return found, [identity for identity in identities if identity not in found and identity not in refused], refused


def ensure_many_absent(client, identities, check_mode=False, wait=False, wait_timeout=600, poll_interval=5,
                       sleep=time.sleep, clock=time.monotonic, limits=None):
    """Cancel every listed job that is still queued or running, with one lookup for the batch.

    `limits` gives the retry limit of an identity whose job runs as attempts (_retry.py): its
    latest attempt is the one cancelled, found in the same lookup. With `wait`, every poll reads
    all cancelled jobs with one list request until they are finished.
    """
    limits = limits or {}
    attempts = dict((identity, retries.attempt_identities({"identity": identity, "retry": {"limit": limits.get(identity)}}))
                    for identity in identities)
    found = client.find_many([attempt for identity in identities for attempt in attempts[identity]])
    # The identity of each job's latest attempt found (its own when there is none).
    latest = dict((identity, ([attempt for attempt in attempts[identity] if attempt in found] or [identity])[-1])
                  for identity in identities)
    results = dict((identity, {"identity": identity, "changed": False, "failed": False, "job": found.get(latest[identity])})
                   for identity in identities)
    cancelled = []
    for identity in identities:
        job = found.get(latest[identity])
        if job is None or job.get("terminal"):
            continue
        results[identity]["changed"] = True
        if check_mode:
            results[identity]["job"] = dict(job, phase="cancelled", terminal=True)
            continue
        try:
            client.cancel(job["job_id"])
            cancelled.append(identity)
            # What the cancel leads to; with `wait`, read back below.
            results[identity]["job"] = cancelling(job)
        except BridgeError as exc:
            results[identity].update(failed=True, error=exc.to_dict(), msg=str(exc))
    deadline = clock() + wait_timeout
    while wait and cancelled:
        now = client.find_many([latest[identity] for identity in cancelled])
        for identity in cancelled:
            results[identity]["job"] = now.get(latest[identity]) or forgotten(results[identity]["job"])
        cancelled = [identity for identity in cancelled
                     if latest[identity] in now and not now[latest[identity]].get("terminal")]
        if not cancelled or clock() >= deadline:
            break
        sleep(min(poll_interval, max(deadline - clock(), 0)))
    for identity in cancelled if wait else ():
        results[identity].update(failed=True, msg="job %s is still %s %s seconds after cancelling it" % (
            results[identity]["job"]["job_id"], results[identity]["job"]["phase"], wait_timeout))
    return [results[identity] for identity in identities]
