# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm accounting (slurmdbd through slurmrestd's /slurmdb paths): jobs as Bridge's normalized
job, whatever the REST version.

Accounting keeps a job after slurmctld forgets it (MinJobAge), so it answers "which job carries
this identity" for any age, and it is the history (elapsed, CPU time, max RSS) users read with
sacct. Its job object differs from slurmctld's: state.current, time{...}, comment{job}, steps[].
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import re
import time

from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError

# Accounting's exit_code says SUCCESS with return code 0 for any exit in these versions (it tests
# only WIFEXITED); the state tells a failure apart there. No other field has the code: 22.05 writes
# derived_exit_code and each step's exit_code the same way (docs/slurm.md, "Exit codes in accounting").
EXIT_CODE_UNRELIABLE = ("v0.0.36", "v0.0.37", "v0.0.38", "v0.0.39")
# The lookup of an identity reads this far back: a rerun within it submits nothing.
LOOKUP_WINDOW_DAYS = 365
RELATIVE_TIME = re.compile(r"^-(\d+)([smhdw])$")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def job_comment(native):
    """The job's own comment (not the administrator's or the system's); None when empty."""
    comment = native.get("comment")
    value = comment.get("job") if isinstance(comment, dict) else comment
    return value if isinstance(value, str) and value else None


def live_shape(native):
    """The accounting job with slurmctld's field names, so that one normalizer reads both views."""
    state = native.get("state") or {}
    times = native.get("time") or {}
    exit_code = native.get("exit_code")
    if isinstance(exit_code, dict) and isinstance(exit_code.get("signal"), dict):
        signal = exit_code["signal"]
        exit_code = dict(exit_code, signal=dict(signal, id=signal.get("id", signal.get("signal_id"))))
    array = native.get("array") if isinstance(native.get("array"), dict) else {}
    running = ((array.get("limits") or {}).get("max") or {}).get("running") or {}
    return {
        "job_id": native.get("job_id"),
        "name": native.get("name"),
        "comment": job_comment(native),
        "array_job_id": array.get("job_id"),
        "array_task_id": array.get("task_id"),
        "array_task_string": array.get("task"),
        "array_max_tasks": running.get("tasks") if isinstance(running, dict) else None,
        "job_state": state.get("current"),
        "state_reason": state.get("reason"),
        "exit_code": exit_code,
        "submit_time": times.get("submission"),
        "start_time": times.get("start"),
        "end_time": times.get("end"),
        "time_limit": times.get("limit"),
        "partition": native.get("partition"),
        "nodes": native.get("nodes"),
        "user_name": native.get("user"),
        "current_working_directory": native.get("working_directory"),
        "standard_output": native.get("stdout_expanded") or native.get("stdout"),
        "standard_error": native.get("stderr_expanded") or native.get("stderr"),
    }


def accounting_fields(native, number):
    """What only accounting knows of a job: account, elapsed and CPU time, max RSS."""
    times = native.get("time") or {}
    account = native.get("account")
    return {
        "account": account if isinstance(account, str) and account else None,
        "elapsed_seconds": number(times.get("elapsed")),
        "cpu_seconds": cpu_seconds(native),
        "max_rss_bytes": max_rss(native.get("steps"), number),
        "source": "accounting",
    }


def cpu_seconds(native):
    """User plus system CPU time of all the job's steps, as sacct's TotalCPU: the sum of
    steps[].time.total (the job's own time.total is 0 in every version here), or the job's when
    it has no steps."""
    steps = [step for step in native.get("steps") or [] if isinstance(step, dict)]
    totals = [(step.get("time") or {}).get("total") for step in steps] if steps else [(native.get("time") or {}).get("total")]
    seconds = [duration(total) for total in totals]
    if not seconds or any(value is None for value in seconds):
        return None
    return round(sum(seconds), 3)


def duration(total):
    """Seconds of a {seconds, microseconds} time; None when it is not one."""
    if not isinstance(total, dict):
        return None
    seconds, micro = total.get("seconds"), total.get("microseconds")
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        return None
    return seconds + (micro or 0) / 1e6


def max_rss(steps, number):
    """The largest resident set of any task of any step (steps[].tres.requested.max, type mem), in bytes."""
    peak = None
    for step in steps or []:
        requested = ((step or {}).get("tres") or {}).get("requested") or {}
        for tres in requested.get("max") or []:
            if isinstance(tres, dict) and tres.get("type") == "mem":
                value = number(tres.get("count"))
                if value is not None and (peak is None or value > peak):
                    peak = value
    return peak


def window_start(value, field, now=None):
    """An epoch from an RFC 3339 time, an epoch, or a relative '-7d' (s, m, h, d, w)."""
    now = time.time() if now is None else now
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    value = str(value).strip()
    if value.isdigit():
        return int(value)
    relative = RELATIVE_TIME.match(value)
    if relative:
        return now - int(relative.group(1)) * UNIT_SECONDS[relative.group(2)]
    try:
        moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise SpecError(field, "'%s' is not a time: give RFC 3339 (2026-12-01T00:00:00Z), an epoch in seconds "
                               "or a relative time such as -12h or -7d" % value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return int(moment.timestamp())


def query(start=None, end=None, submitted_after=None, names=None, users=None, accounts=None, partitions=None, now=None,
          steps=True):
    """The /slurmdb jobs query. Times go as sacct's 'now-Nseconds', which every REST version
    parses (22.05 and v0.0.40/41 refuse epochs) relative to the server's own clock; a window
    (start) always has an end, without which 22.05 finds nothing. There is no state filter: from
    24.11 on it takes one state only, so phases are selected by the caller."""
    params = {}
    if start is not None:
        params["start_time"] = sacct_time(start, now)
        params["end_time"] = sacct_time(end, now) if end is not None else "now"
    if submitted_after is not None:
        params["submit_time"] = sacct_time(submitted_after, now)
    for key, values in (("job_name", names), ("users", users), ("account", accounts), ("partition", partitions)):
        if values:
            params[key] = ",".join(sorted(set(values)))
    if not steps:
        # Half the answer: steps carry CPU time and max RSS, which a lookup does not need.
        params["skip_steps"] = "true"
    return params


def sacct_time(seconds, now=None):
    """sacct's 'now-Nseconds' (or now+) for an epoch."""
    now = time.time() if now is None else now
    delta = int(round(now - seconds))
    return "now-%dseconds" % delta if delta >= 0 else "now+%dseconds" % -delta
