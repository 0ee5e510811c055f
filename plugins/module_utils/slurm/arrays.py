# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm job arrays as one job each (pure). Internal to this collection.

slurmctld and accounting report an array as several records: one per task that has started (its
own job_id, array_job_id the array's, array_task_id its index) and, while some tasks pend, one
record of those (job_id = array_job_id, no index, array_task_string "5-99%8"). fold() makes one
job of them with _arrays.array_job, whose `array` says how many tasks are in each phase and which
failed; the indexes Bridge asked for come from the comment it wrote (" array=0-99").
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.bridge.hpc.plugins.module_utils._arrays import array_job, index_text, parse_indexes
from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError

# The running-task limit Slurm appends to the text of the pending tasks ("5-99%8").
LIMIT_SUFFIX = re.compile(r"%\d*$")
# Slurm cuts the text of a long set of indexes short with "..." (SLURM_BITSTR_LEN).
CUT_MARK = "..."
# What a task's record keeps once it has ended, for when slurmctld forgets it (client._forgotten_tasks):
# a tuple of these, small enough to keep for every task of a large array.
ENDED_KEYS = ("phase", "terminal", "native_state", "reason", "exit_code", "signal", "failure_class",
              "start_time", "end_time")
# A task that ended unseen: slurmctld forgot it and nothing else tells how it ended.
UNKNOWN_END = {"phase": "failed", "terminal": True, "native_state": None, "exit_code": None, "signal": None,
               "failure_class": None, "reason": "ended; slurmctld forgot it (MinJobAge) before its end was seen",
               "unknown": True}


def pending_indexes(pending):
    """(indexes, complete) of Slurm's text of the tasks still pending: ranges ("5-99%8",
    "1,3-7") or a hex bitmap ("0x1F", accounting). `complete` is False when Slurm cut the text
    short, then the indexes above the last one read are pending too, as far as anyone can tell."""
    if not pending:
        return (), True
    value = LIMIT_SUFFIX.sub("", pending.strip().strip("[]"))
    if value.lower().startswith("0x"):
        try:
            mask = int(value, 16)
        except ValueError:
            return (), False
        return tuple(index for index in range(mask.bit_length()) if mask >> index & 1), True
    complete = not value.endswith(CUT_MARK)
    if not complete:
        # The last range may be cut in its middle: "...,97-9..." is read without it.
        value = value[:-len(CUT_MARK)].rpartition(",")[0]
    if not value:
        return (), complete
    try:
        return parse_indexes(value), complete
    except SpecError:
        return (), False


def fold(jobs, forgotten=None):
    """`jobs` (normalized records of slurmctld or accounting) with the records of each array made
    one job, where the array's first record was; other jobs as they are.

    `forgotten(array_job_id, indexes)` gives {index: task} of asked tasks that no record shows and
    that are not pending either: slurmctld forgets an ended task after MinJobAge while the array's
    other tasks go on (the client's _forgotten_tasks says how it ended). Without it (accounting's
    records, which forget nothing) array_job counts such a task as queued; a task it gives with
    "unknown" set is named in the array's unknown_indexes."""
    order, groups = [], {}
    for job in jobs:
        record = job.get("array_task")
        if record is None:
            order.append(job)
            continue
        key = record["array_job_id"]
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(job)
    return [folded(groups[item], forgotten) if isinstance(item, str) else item for item in order]


def folded(records, forgotten=None):
    """One job of the records of one array (see fold)."""
    array_job_id = records[0]["array_task"]["array_job_id"]
    tasks, rests, asked, parallelism = {}, [], None, None
    for job in records:
        record = job["array_task"]
        asked = asked or record["asked"]
        parallelism = parallelism or record["parallelism"]
        if record["index"] is None:
            rests.append(job)
        else:
            # Accounting lists a requeued task once per run, the current one last.
            tasks[record["index"]] = task(job)
    shown = set(tasks)
    rest_of = {}
    cut = []
    for job in rests:
        indexes, complete = pending_indexes(job["array_task"]["pending"])
        rest = task(job)
        rest_of.update((index, rest) for index in indexes)
        if not complete:
            cut.append((max(indexes) if indexes else -1, rest))
    indexes = asked_indexes(asked, shown, rest_of)
    for last, rest in cut:
        rest_of.update((index, rest) for index in indexes if index > last and index not in rest_of)
    # The record of the tasks not split off yet stands for each of them: pending, or cancelled with
    # the array before they started.
    for index, rest in rest_of.items():
        tasks.setdefault(index, rest)
    unseen = [index for index in indexes if index not in tasks]
    if unseen and forgotten is not None:
        tasks.update(forgotten(array_job_id, unseen))
    head = next((job for job in records if job["job_id"] == array_job_id), records[0])
    base = task(head)
    base.update(
        job_id=array_job_id,
        identity=next((job["identity"] for job in records if job["identity"]), None),
        name=next((job["name"] for job in records if job["name"]), None),
        submit_time=min([job["submit_time"] for job in records if job["submit_time"]] or [None]),
    )
    job = array_job(base, tasks, indexes, parallelism)
    unknown = [index for index in indexes if (tasks.get(index) or {}).get("unknown")]
    if unknown:
        job["array"]["unknown_indexes"] = index_text(unknown)
    if job["phase"] == "failed":
        # The array's state is its first failed task's, as its exit code is.
        job["native_state"] = tasks[job["array"]["failures"][0]["index"]].get("native_state") or job["native_state"]
    if job["phase"] == "queued" and base["failure_class"] == "rejected":
        # Tasks that can never start (the request does not fit the partition): wait() stops on it.
        job["failure_class"] = "rejected"
    return job


def asked_indexes(asked, shown, rest_of):
    """The indexes of the array: those of its comment, else (an array Bridge did not submit, or
    accounting's records of tasks that have not ended) every index Slurm shows."""
    if asked:
        try:
            return parse_indexes(asked)
        except SpecError:
            pass  # a comment someone changed: what Slurm shows is all there is
    return tuple(sorted(set(shown) | set(rest_of)))


def ended_task(job):
    """How an ended task ended, as a tuple of ENDED_KEYS (a task again with ended_record)."""
    return tuple(job.get(key) for key in ENDED_KEYS)


def ended_record(ended):
    """The task's record of an ended_task tuple."""
    return dict(zip(ENDED_KEYS, ended))


def task(job):
    """A task's record as a job of its own, without what only fold reads."""
    return dict((key, value) for key, value in job.items() if key != "array_task")
