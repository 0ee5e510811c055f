# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Retries by failure class: attempt identities and what to do next (pure). Internal to this collection.

A spec with `retry` runs as attempts, each a job of its own: attempt 0 carries the spec's identity,
attempt n the identity plus ".n". Whoever asks (a module run, the controller after a restart)
finds every attempt with one lookup of all attempt identities, and decide() says the same thing
from the same jobs: wait for the latest attempt, submit the next one (now, or once its backoff
has passed), or stop. An attempt is submitted only when it and no later one exists, so no attempt
is ever submitted twice, whoever crashed between two of them.

The backoff counts from the end of the failed attempt as its manager reports it, not from when
anyone looked: a controller restarted during a backoff submits the next attempt at the same time.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import collections
import re

from ansible_collections.bridge.hpc.plugins.module_utils._arrays import (
    MAX_LISTED_FAILURES,
    TASK_PHASES,
    failed_indexes,
    index_text,
    parse_indexes,
)
from ansible_collections.bridge.hpc.plugins.module_utils._backend import rfc3339

WAIT, SUBMIT, BACKOFF, DONE = "wait", "submit", "backoff", "done"
# What an attempt record keeps of its job (job["attempts"], a BridgeJob's status.attempts).
ATTEMPT_KEYS = ("job_id", "identity", "phase", "failure_class", "exit_code", "submit_time", "start_time", "end_time")
# What an array attempt's record also keeps of its job["array"]: all that merged_array needs, so that
# whoever keeps the records (a BridgeJob's status.attempts) merges them without reading the attempts
# again. retried_indexes only in a record that stands for several attempts (merged_array's input).
ARRAY_KEYS = ("indexes", "counts", "failed_indexes", "unknown_indexes", "retried_indexes", "failures")

# action: WAIT for `job` (attempt `attempt`, queued or running); SUBMIT attempt `attempt` now;
# BACKOFF: submit attempt `attempt` at epoch `due`; DONE: `job` is the last attempt, `reason` says
# why no other follows. `job` is the latest attempt's job (None before attempt 0); `indexes` the
# array indexes attempt `attempt` runs (None for a job that is not an array, or all of them).
Decision = collections.namedtuple("Decision", "action attempt job due reason indexes")

_TIME = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:\.\d+)?(Z|[+-]\d\d:?\d\d)?$")


def attempt_identity(identity, attempt):
    """The identity of attempt `attempt` of a job: its own for attempt 0, "<identity>.<n>" after."""
    return identity if not attempt else "%s.%d" % (identity, attempt)


def limit_of(spec):
    """How many attempts may follow the first (0 without retry)."""
    return (spec.get("retry") or {}).get("limit") or 0


def attempt_identities(spec):
    """The identities of every attempt a spec may have, attempt 0 first."""
    return [attempt_identity(spec["identity"], attempt) for attempt in range(limit_of(spec) + 1)]


def lookup_keys(spec):
    """(identities, names) of one lookup of every attempt: attempt 0 under the spec's identity and
    its aliases (_jobs.lookup_keys), each later one under its attempt identity; every attempt
    carries the spec's job name, or its own identity when the name was defaulted to it."""
    defaulted = spec.get("name") in (None, spec["identity"])
    identities = [spec["identity"]] + list(spec.get("identity_aliases") or ()) + attempt_identities(spec)[1:]
    return identities, [identity if defaulted else spec["name"] for identity in identities]


def attempt_spec(spec, attempt, indexes=None):
    """The spec of attempt `attempt`: the spec under the attempt's identity (and name, where the name
    was its identity), an array narrowed to `indexes` (the failed ones being run again)."""
    if not attempt:
        return spec
    identity = attempt_identity(spec["identity"], attempt)
    narrowed = dict(spec, identity=identity, identity_aliases=())
    if spec.get("name") in (None, spec["identity"]):
        narrowed["name"] = identity
    if indexes is not None and spec.get("array"):
        narrowed["array"] = narrowed_array(spec["array"], indexes)
    return narrowed


def narrowed_array(array, indexes):
    """spec["array"] for `indexes`, a subset of its own."""
    indexes = tuple(sorted(set(indexes)))
    return dict(array, indexes=indexes, text=index_text(indexes), size=len(indexes))


def epoch(text):
    """Seconds since the epoch of an RFC 3339 time ("2026-12-04T00:21:27Z"); None when there is none."""
    match = _TIME.match(text or "")
    if not match:
        return None
    fields = [int(part) for part in match.groups()[:6]]
    seconds = calendar.timegm(tuple(fields) + (0, 0, 0))
    zone = match.group(7)
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        seconds -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return seconds


def retryable(retry, failure_class):
    """Whether `retry` retries a failure of `failure_class` (normalize_retry allows no class that
    cannot succeed another time: cancelled, rejected)."""
    return failure_class in (retry.get("classes") or ())


def array_indexes(retry, array):
    """(indexes to run again, failures left) of a failed array attempt, from its array record (or its
    attempt record, which has the same failed_indexes and failures): the failed indexes whose
    class is retried, and those whose class is not. An index whose class the record does not list
    (it lists the first failures only) is run again only when every listed failure's class is
    retried."""
    listed = dict((failure["index"], failure.get("failure_class")) for failure in array.get("failures") or ())
    unlisted_retried = all(retryable(retry, failure_class) for failure_class in listed.values())
    again, left = [], []
    for index in failed_indexes(array):
        retried = retryable(retry, listed[index]) if index in listed else unlisted_retried
        (again if retried else left).append(index)
    return tuple(again), tuple(left)


def started_of(job):
    """The epoch a backoff counts from: the attempt's end, else its start or submission."""
    for key in ("end_time", "start_time", "submit_time"):
        seconds = epoch(job.get(key))
        if seconds is not None:
            return seconds
    return None


def after(retry, attempt, job, now):
    """The Decision that follows attempt `attempt` whose job is `job` (not None) at epoch `now`."""
    if not job.get("terminal"):
        return Decision(WAIT, attempt, job, None, "attempt %d is %s" % (attempt, job.get("phase")), None)
    if job.get("phase") == "completed":
        return Decision(DONE, attempt, job, None, "attempt %d completed" % attempt, None)
    if job.get("phase") == "cancelled" and job.get("failure_class") in (None, "cancelled"):
        return Decision(DONE, attempt, job, None, "attempt %d was cancelled" % attempt, None)
    failure_class = job.get("failure_class") or job.get("phase")
    limit = (retry or {}).get("limit") or 0
    if attempt >= limit:
        return Decision(DONE, attempt, job, None, "attempt %d %s (%s) and was the last of %d" % (
            attempt, job.get("phase"), failure_class, limit + 1), None)
    indexes = None
    if job.get("array"):
        indexes, _left = array_indexes(retry, job["array"])
        if not indexes:
            return Decision(DONE, attempt, job, None, "no failed index of attempt %d has a class that is retried (%s)"
                            % (attempt, ", ".join(retry.get("classes") or ()) or "none"), None)
    elif not retryable(retry, failure_class):
        return Decision(DONE, attempt, job, None, "attempt %d %s (%s), a class that is not retried" % (
            attempt, job.get("phase"), failure_class), None)
    ended = started_of(job)
    due = (now if ended is None else ended) + (retry.get("backoff_seconds") or 0)
    reason = "attempt %d %s (%s)" % (attempt, job.get("phase"), failure_class)
    if due <= now:
        return Decision(SUBMIT, attempt + 1, job, due, reason, indexes)
    return Decision(BACKOFF, attempt + 1, job, due, reason, indexes)


def attempts_found(spec, found):
    """[(attempt, job)] of the attempts `found` (a find_many answer of lookup_keys) holds, in order;
    attempt 0 under the spec's identity or, failing that, an alias."""
    result = []
    for attempt, identity in enumerate(attempt_identities(spec)):
        job = found.get(identity)
        if job is None and not attempt:
            job = next((found[alias] for alias in spec.get("identity_aliases") or () if alias in found), None)
        if job is not None:
            result.append((attempt, job))
    return result


def decide(spec, found, now):
    """What to do about a spec with retry, from `found` (one find_many of lookup_keys(spec)) at
    epoch `now`. The latest attempt found decides; an array's later attempts run only the indexes
    that failed with a class that is retried."""
    attempts = attempts_found(spec, found)
    if not attempts:
        return Decision(SUBMIT, 0, None, now, "no attempt yet", None)
    attempt, job = attempts[-1]
    return after(spec.get("retry") or {}, attempt, job, now)


def record(attempt, job):
    """What an attempt's record keeps of its job; of an array's, also the indexes it ran, their counts
    per phase, those that failed and its first failures (ARRAY_KEYS)."""
    entry = dict((key, job.get(key)) for key in ATTEMPT_KEYS)
    entry["attempt"] = attempt
    array = job.get("array")
    if array:
        entry.update((key, array[key]) for key in ARRAY_KEYS if array.get(key) is not None)
        entry["failed_indexes"] = array.get("failed_indexes") or ""
        entry["failures"] = list(array.get("failures") or ())
    return entry


def _is_array(entry):
    return entry.get("indexes") is not None


def _index_set(text):
    return set(parse_indexes(text)) if text else set()


def merged_array(records, array):
    """The array record of an array's attempts together, from their records (record(), attempt 0's
    first) and `array`, the latest attempt's own array record (its parallelism and what else the
    merge leaves as it is); None when fewer than two records are an array's. The index set is
    attempt 0's, each index counted as the latest attempt that ran it left it. Counts,
    failed_indexes, unknown_indexes and failures (each with the attempt it failed in) cover the
    whole set; retried_indexes are those a later attempt ran again.

    A record that already stands for several attempts (a merge's result as record() keeps it: its
    failures name their attempt, its retried_indexes those run again) merges as those attempts
    would, so a caller may keep the merge of its older attempts in place of their records."""
    arrays = [entry for entry in records if _is_array(entry)]
    if len(arrays) < 2:
        return None
    counts = dict((phase, 0) for phase in TASK_PHASES)
    failed, unknown, later, retried, failures = set(), set(), set(), set(), []
    for entry in reversed(arrays):
        indexes = _index_set(entry.get("indexes"))
        own_failed = _index_set(entry.get("failed_indexes"))
        run_again = indexes & later
        own = dict((phase, (entry.get("counts") or {}).get(phase) or 0) for phase in TASK_PHASES)
        own["failed"] -= len(own_failed & run_again)
        # A later attempt runs failed indexes only; should one have run another, it counts once.
        extra = len(run_again - own_failed)
        for phase in ("completed", "cancelled", "queued", "running"):
            taken = min(own[phase], extra)
            own[phase] -= taken
            extra -= taken
        for phase in TASK_PHASES:
            counts[phase] += max(own[phase], 0)
        kept = own_failed - later
        failed |= kept
        unknown |= _index_set(entry.get("unknown_indexes")) - later
        retried |= _index_set(entry.get("retried_indexes"))
        failures.extend(dict({"attempt": entry.get("attempt")}, **failure)
                        for failure in entry.get("failures") or () if failure.get("index") in kept)
        if entry is not arrays[0]:
            retried |= indexes
        later |= indexes
    first = _index_set(arrays[0].get("indexes"))
    merged = dict(array, indexes=arrays[0]["indexes"], size=len(first), counts=counts, failed_indexes=index_text(failed),
                  failures=sorted(failures, key=lambda failure: failure["index"])[:MAX_LISTED_FAILURES],
                  retried_indexes=index_text(retried))
    merged.pop("unknown_indexes", None)
    if unknown:
        merged["unknown_indexes"] = index_text(unknown)
    return merged


def left_failures(spec, records):
    """The failed indexes earlier attempts of an array left without running again, as
    [(attempt, indexes, failure class of the first)], from the attempts' records."""
    left = []
    for entry in records[:-1]:
        if _is_array(entry) and entry.get("phase") == "failed":
            indexes = array_indexes(spec.get("retry") or {}, entry)[1]
            if indexes:
                classes = dict((failure["index"], failure.get("failure_class")) for failure in entry.get("failures") or ())
                left.append((entry["attempt"], indexes, classes.get(indexes[0]) or entry.get("failure_class") or "non_zero_exit"))
    return left


def with_attempts(spec, found, job, decision=None):
    """`job` (the latest attempt's) with what every attempt `found` holds (a find_many answer of
    lookup_keys) says of it: with_records over their records."""
    return with_records(spec, [record(attempt, attempt_job) for attempt, attempt_job in attempts_found(spec, found)],
                        job, decision)


def with_records(spec, records, job, decision=None):
    """`job` (the latest attempt's, whose record is the last of `records`, attempt 0's first) with
    job["attempts"], the records, and job["next_attempt"] ({attempt, identity, due}) while a next
    attempt waits for its backoff or is due. An array's job["array"] covers every attempt
    (merged_array): the asked indexes, each as the attempt that ran it last left it. An array whose
    earlier attempts left failed indexes (their class is not retried) is failed even when its last
    attempt completed: those indexes never ran to the end.

    The records are all this needs: a module has them from one lookup of every attempt, the
    controller from its BridgeJob's status.attempts and a poll of the latest attempt alone."""
    job = dict(job)
    job["attempts"] = list(records)
    merged = merged_array(records, job["array"]) if job.get("array") else None
    if merged is not None:
        job["array"] = merged
    if decision is not None and decision.action in (SUBMIT, BACKOFF) and decision.attempt:
        job["next_attempt"] = {"attempt": decision.attempt, "identity": attempt_identity(spec["identity"], decision.attempt),
                               "due": rfc3339(max(decision.due, 1))}
    left = left_failures(spec, records)
    if left and job.get("terminal") and job.get("phase") == "completed":
        attempt, indexes, failure_class = left[0]
        lowest = (merged or {}).get("failures") or [{}]
        exit_code = lowest[0].get("exit_code") if lowest[0].get("index") == indexes[0] else None
        job.update(phase="failed", failure_class=failure_class, exit_code=exit_code, signal=None,
                   reason="indexes %s of attempt %d failed (%s), a class that is not retried" % (
                       index_text(indexes), attempt, failure_class))
    return job
