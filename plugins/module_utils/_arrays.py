# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Job arrays: index sets and one record for an array's tasks. Internal to this collection.

An array is one job of many tasks, each with its index. Its index set is written as Slurm and LSF
write theirs ("0-98:2,101"); every backend that runs arrays folds its tasks into one normalized job
with array_job, so an array has one phase, one exit code and one list of failed indexes on every
backend. Pure functions: no I/O.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError

# Slurm's MaxArraySize tops out at 4,000,001; a BridgeJob's status and a module result list an
# array's counts and a bounded list of failures, never a record per task, but a spec's index list
# is still held in memory whole.
MAX_ARRAY_TASKS = 100000
MAX_INDEX = 4000000
# Failed tasks named one by one (index, exit code, failure class): the rest are in failed_indexes.
MAX_LISTED_FAILURES = 20
TASK_PHASES = ("queued", "running", "completed", "failed", "cancelled")
ENDED = ("completed", "failed", "cancelled")
INDEX_SYNTAX = "indexes such as 0-99, 1,3,5-7 or 0-98:2 (start-end:step), or a list of numbers"
_PART = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")


def parse_indexes(value, field="array.indexes"):
    """An index set as a sorted tuple of distinct numbers: "0-98:2,101", "7" and [0, 1, 5] alike.

    Raises SpecError naming `field` for what is not an index set, an empty one, or one over
    MAX_ARRAY_TASKS tasks or MAX_INDEX."""
    if value is None or isinstance(value, bool) or value == "" or value == []:
        raise SpecError(field, "needs at least one index; use %s" % INDEX_SYNTAX)
    if isinstance(value, int):
        parts = [str(value)]
    elif isinstance(value, (list, tuple)):
        parts = []
        for item in value:
            if isinstance(item, bool) or not isinstance(item, (int, str)):
                raise SpecError(field, "'%s' is not an index; use %s" % (item, INDEX_SYNTAX))
            parts.extend(str(item).split(","))
    else:
        parts = str(value).split(",")
    indexes = set()
    for part in parts:
        indexes.update(_expanded(part.strip(), field))
        if len(indexes) > MAX_ARRAY_TASKS:
            raise SpecError(field, "has more than %d tasks" % MAX_ARRAY_TASKS)
    return tuple(sorted(indexes))


def _expanded(part, field):
    match = _PART.match(part)
    if not match:
        raise SpecError(field, "'%s' is not an index or range; use %s" % (part, INDEX_SYNTAX))
    start, end, step = match.groups()
    start = int(start)
    end = int(end) if end is not None else start
    step = int(step) if step is not None else 1
    if end < start:
        raise SpecError(field, "'%s' ends before it starts" % part)
    if step < 1:
        raise SpecError(field, "'%s' needs a step of 1 or more" % part)
    if end > MAX_INDEX:
        raise SpecError(field, "'%s' goes past the highest index %d" % (part, MAX_INDEX))
    if (end - start) // step + 1 > MAX_ARRAY_TASKS:
        raise SpecError(field, "'%s' has more than %d tasks" % (part, MAX_ARRAY_TASKS))
    return range(start, end + 1, step)


def index_text(indexes):
    """An index set as Slurm and LSF write one: runs of three or more at one step become
    start-end[:step], the rest single numbers; "" for no index."""
    indexes = sorted(set(indexes))
    parts = []
    position = 0
    while position < len(indexes):
        start = indexes[position]
        if position + 2 < len(indexes):
            step = indexes[position + 1] - start
            end_position = position + 1
            while end_position + 1 < len(indexes) and indexes[end_position + 1] - indexes[end_position] == step:
                end_position += 1
            if end_position - position >= 2:
                end = indexes[end_position]
                parts.append("%d-%d" % (start, end) if step == 1 else "%d-%d:%d" % (start, end, step))
                position = end_position + 1
                continue
        parts.append("%d" % start)
        position += 1
    return ",".join(parts)


def array_phase(counts):
    """An array's phase from its tasks' phases: it ends when every task has ended, failed if any
    task failed, else cancelled if any was cancelled, else completed; before that it runs once any
    task has started."""
    total = sum(counts.get(phase, 0) for phase in TASK_PHASES)
    ended = sum(counts.get(phase, 0) for phase in ENDED)
    if total and ended == total:
        for phase in ("failed", "cancelled"):
            if counts.get(phase):
                return phase
        return "completed"
    if counts.get("running") or ended:
        return "running"
    return "queued"


def array_job(base, tasks, indexes, parallelism=None):
    """One normalized job for an array: `base` is the array's own record (its job id, identity,
    name, submit time), `tasks` maps an index to its task's normalized job, and `indexes` is the
    asked index set. A task the manager does not report is counted queued: a manager reports a
    task once it exists, and forgets it only after it ended, when the backend knows its end from
    accounting or from the array's own record.

    The result is `base` with the array's phase, terminal, exit code and failure class (those of
    its lowest failed index), start and end times, and job["array"]: the index set, size,
    parallelism, counts per phase, failed_indexes and the first MAX_LISTED_FAILURES failures."""
    counts = dict((phase, 0) for phase in TASK_PHASES)
    failures = []
    starts, ends = [], []
    for index in indexes:
        task = tasks.get(index)
        phase = task.get("phase") if task else "queued"
        counts[phase if phase in counts else "queued"] += 1
        if task and task.get("start_time"):
            starts.append(task["start_time"])
        if task and task.get("end_time"):
            ends.append(task["end_time"])
        if phase == "failed":
            failures.append((index, task))
    phase = array_phase(counts)
    job = dict(base)
    job["phase"] = phase
    job["terminal"] = phase in ENDED
    first_failure = failures[0][1] if failures else None
    job["exit_code"] = first_failure.get("exit_code") if first_failure else (0 if phase == "completed" else None)
    job["signal"] = first_failure.get("signal") if first_failure else None
    job["failure_class"] = first_failure.get("failure_class") if first_failure else (
        "cancelled" if phase == "cancelled" else None)
    job["start_time"] = min(starts) if starts else base.get("start_time")
    job["end_time"] = max(ends) if job["terminal"] and ends else None
    if failures and not job.get("reason"):
        job["reason"] = "%d of %d tasks failed" % (len(failures), len(indexes))
    job["array"] = {
        "indexes": index_text(indexes),
        "size": len(indexes),
        "parallelism": parallelism,
        "counts": counts,
        "failed_indexes": index_text(index for index, _task in failures),
        "failures": [{"index": index, "exit_code": task.get("exit_code"), "failure_class": task.get("failure_class")}
                     for index, task in failures[:MAX_LISTED_FAILURES]],
    }
    return job


def failed_indexes(array):
    """The failed indexes of an array's record (job["array"], or an attempt's record) as a tuple."""
    text = array.get("failed_indexes")
    return parse_indexes(text) if text else ()
