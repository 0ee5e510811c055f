# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Kubernetes Job and its Pods as Bridge's job (pure): phases and failure classes from the Job's
conditions, the container's termination and the scheduler's messages.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.bridge.hpc.plugins.module_utils._arrays import array_job, parse_indexes
from ansible_collections.bridge.hpc.plugins.module_utils._backend import TERMINAL_PHASES, ShapeError
from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils.k8s.compile import (
    ARRAY_ANNOTATION,
    COMPLETION_INDEX_ANNOTATION,
    IDENTITY_ANNOTATION,
    IDENTITY_LABEL,
    KUEUE_QUEUE_LABEL,
    NAME_ANNOTATION,
    identity_hash,
)


# Scheduler messages of a Pod that waits for capacity (it may come), as opposed to one no node
# can take (selector, affinity, taints): "0/3 nodes are available: 3 Insufficient cpu."
WAITS_FOR_CAPACITY = re.compile(r"Insufficient |Too many pods|preemption may help", re.IGNORECASE)
# Container waiting reasons that never resolve by waiting.
HOPELESS_WAITING = ("InvalidImageName", "ErrImageNeverPull", "CreateContainerConfigError", "CreateContainerError")
# What cancel_rejected acts on (doc text of the option in the Kubernetes modules' docs).
NEVER_STARTS = ("the Pod's container waits for a reason that never clears (%s), or no node can ever take the Pod "
                "(a selector, affinity or taint, not a lack of capacity)" % ", ".join("C(%s)" % reason for reason in HOPELESS_WAITING))


def _condition(obj, kind):
    for condition in ((obj.get("status") or {}).get("conditions") or []):
        if condition.get("type") == kind and condition.get("status") == "True":
            return condition
    return None


def _terminated(pod):
    for status in ((pod.get("status") or {}).get("containerStatuses") or []):
        state = status.get("state") or {}
        last = status.get("lastState") or {}
        if state.get("terminated") or last.get("terminated"):
            return state.get("terminated") or last.get("terminated")
    return None


def _container_state(pod, key):
    for status in ((pod.get("status") or {}).get("containerStatuses") or []):
        if (status.get("state") or {}).get(key):
            return status["state"][key]
    return None


def _pending_reason(pod):
    """(reason, hopeless) of a Pod that has not started."""
    waiting = _container_state(pod, "waiting")
    if waiting and waiting.get("reason") not in (None, "ContainerCreating", "PodInitializing"):
        text = ("%s: %s" % (waiting["reason"], waiting.get("message") or "")).rstrip(": ")
        return text, waiting["reason"] in HOPELESS_WAITING
    scheduled = next((c for c in ((pod.get("status") or {}).get("conditions") or [])
                      if c.get("type") == "PodScheduled"), None)
    if scheduled and scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        message = scheduled.get("message") or "Unschedulable"
        return "Unschedulable: %s" % message, not WAITS_FOR_CAPACITY.search(message)
    return None, False


def _without_managed_fields(obj):
    """An object without metadata.managedFields: half its size, and nothing a job's reader needs."""
    if not obj or "managedFields" not in (obj.get("metadata") or {}):
        return obj
    return dict(obj, metadata=dict((k, v) for k, v in obj["metadata"].items() if k != "managedFields"))


def newest_pod(pods):
    if not all(isinstance(pod, dict) and isinstance(pod.get("metadata"), dict) for pod in pods):
        raise ShapeError("a Pod must be an object with metadata")
    return max(pods, key=lambda pod: ((pod.get("metadata") or {}).get("creationTimestamp") or "",
                                      (pod.get("metadata") or {}).get("name") or "")) if pods else None


def normalize_job(native, pods=()):
    """A Job and its Pods as Bridge's job dict; an array's Indexed Job as one record of its indexes
    (normalize_array)."""
    if not isinstance(native, dict):
        raise ShapeError("a Job must be an object, got %s" % type(native).__name__)
    if ARRAY_ANNOTATION in ((native.get("metadata") or {}).get("annotations") or {}):
        return normalize_array(native, pods)
    return _normalize_one(native, pods)


def _normalize_one(native, pods):
    meta = native["metadata"]
    status = native.get("status") or {}
    spec = native.get("spec") or {}
    annotations = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    identity = annotations.get(IDENTITY_ANNOTATION)
    if identity is not None and labels.get(IDENTITY_LABEL) != identity_hash(identity):
        identity = None  # an annotation some other hand set: not a job Bridge made for this identity
    pod = newest_pod(list(pods))
    terminated = _terminated(pod) if pod else None
    complete, failed = _condition(native, "Complete"), _condition(native, "Failed") or _condition(native, "FailureTarget")
    phase, reason, failure_class, exit_code, signal = "queued", None, None, None, None
    native_state = "Pending"
    if meta.get("deletionTimestamp"):
        phase, native_state, failure_class, reason = "cancelled", "Deleting", "cancelled", "deleted"
    elif complete:
        phase, native_state, exit_code = "completed", "Complete", 0
    elif failed:
        phase, native_state = "failed", "Failed"
        reason = "%s: %s" % (failed.get("reason"), failed.get("message") or "")
        if terminated:
            exit_code = terminated.get("exitCode")
        if failed.get("reason") == "DeadlineExceeded":
            failure_class = "timeout"
        elif terminated and terminated.get("reason") == "OOMKilled":
            failure_class, signal = "out_of_memory", 9
            reason = "OOMKilled: the container passed its memory limit"
        elif pod and (pod.get("status") or {}).get("reason") in ("Evicted", "NodeLost", "Terminated", "UnexpectedAdmissionError"):
            failure_class = "node_failure"
            reason = "%s: %s" % (pod["status"]["reason"], pod["status"].get("message") or "")
        elif exit_code:
            failure_class = "non_zero_exit"
        else:
            failure_class = "non_zero_exit"
    elif spec.get("suspend"):
        native_state, reason = "Suspended", "suspended (waiting for admission by Kueue's queue %s)" % (
            labels.get(KUEUE_QUEUE_LABEL) or "none")
    elif pod and _container_state(pod, "running"):
        phase, native_state = "running", "Running"
    elif pod:
        reason, hopeless = _pending_reason(pod)
        if hopeless:
            failure_class = "rejected"
    start = None
    if pod and phase != "queued":
        running = _container_state(pod, "running")
        start = (running or terminated or {}).get("startedAt") or status.get("startTime")
    end = None
    if phase in TERMINAL_PHASES:
        end = status.get("completionTime") or (failed or {}).get("lastTransitionTime") or meta.get("deletionTimestamp")
    return {
        "job_id": meta["name"],
        "name": annotations.get(NAME_ANNOTATION) or meta["name"],
        "identity": identity,
        "phase": phase,
        "terminal": phase in TERMINAL_PHASES,
        "native_state": native_state,
        "reason": reason,
        "exit_code": exit_code,
        "signal": signal,
        "failure_class": failure_class,
        "submit_time": meta.get("creationTimestamp"),
        "start_time": start,
        "end_time": end,
        "namespace": meta.get("namespace"),
        "partition": labels.get(KUEUE_QUEUE_LABEL),
        "nodes": ((pod or {}).get("spec") or {}).get("nodeName"),
        "pod": ((pod or {}).get("metadata") or {}).get("name"),
        "native": {"job": _without_managed_fields(native), "pod": _without_managed_fields(pod)},
    }


def completion_indexes(text, key):
    """The completion indexes of a Job's status (completedIndexes, failedIndexes: "1,3-5"), a set."""
    if not text:
        return set()
    try:
        return set(parse_indexes(text, key))
    except SpecError:
        raise ShapeError("'%s' must be completion indexes such as 1,3-5" % key)


def _task_failure(pod):
    """(exit code, signal, failure class) of the Pod of a failed index."""
    terminated = _terminated(pod) or {}
    reason = (pod.get("status") or {}).get("reason")
    if terminated.get("reason") == "OOMKilled":
        return terminated.get("exitCode"), 9, "out_of_memory"
    if reason in ("Evicted", "NodeLost", "Terminated", "UnexpectedAdmissionError"):
        return terminated.get("exitCode"), None, "node_failure"
    return terminated.get("exitCode"), None, "non_zero_exit"


def normalize_array(native, pods=()):
    """An array's Indexed Job as one job, from the Job alone: its status says which completion
    indexes completed (completedIndexes) and failed (failedIndexes, with backoffLimitPerIndex) and
    how many Pods are active, which count as running (the lowest indexes not ended: which ones run
    is not read). Completion index k is the k-th asked index (the annotation bridge.dev/array-indexes).
    `pods` are those of failed indexes, read once when the array has ended, for their exit codes and
    failure classes (without them a failed index is non_zero_exit, its exit code unknown)."""
    meta = native["metadata"]
    status = native.get("status") or {}
    spec = native.get("spec") or {}
    try:
        asked = parse_indexes(meta["annotations"][ARRAY_ANNOTATION], ARRAY_ANNOTATION)
    except SpecError:
        raise ShapeError("the annotation %s must be an index set such as 0-9" % ARRAY_ANNOTATION)
    base = _normalize_one(native, ())
    completed = completion_indexes(status.get("completedIndexes"), "completedIndexes")
    failed = completion_indexes(status.get("failedIndexes"), "failedIndexes")
    pods_by_index = {}
    for pod in pods:
        index = ((pod.get("metadata") or {}).get("annotations") or {}).get(COMPLETION_INDEX_ANNOTATION)
        if isinstance(index, str) and index.isdigit() and int(index) in failed:
            pods_by_index.setdefault(int(index), []).append(pod)
    by_index = dict((index, newest_pod(found)) for index, found in pods_by_index.items())
    job_failure = _condition(native, "Failed") or _condition(native, "FailureTarget")
    stopped = None
    if base["phase"] == "cancelled":
        stopped = ("cancelled", "cancelled")
    elif job_failure and job_failure.get("reason") == "DeadlineExceeded":
        stopped = ("failed", "timeout")
    elif job_failure:
        stopped = ("cancelled", "cancelled")  # not run, since the Job as a whole failed first
    running = 0 if base["terminal"] else int(status.get("active") or 0)
    tasks = {}
    for position, index in enumerate(asked):
        if position in completed or base["phase"] == "completed":
            tasks[index] = {"phase": "completed", "exit_code": 0}
        elif position in failed:
            exit_code, signal, failure_class = _task_failure(by_index[position]) if position in by_index else (
                None, None, "non_zero_exit")
            tasks[index] = {"phase": "failed", "exit_code": exit_code, "signal": signal, "failure_class": failure_class}
        elif stopped:
            tasks[index] = {"phase": stopped[0], "exit_code": None, "failure_class": stopped[1]}
        elif running:
            tasks[index] = {"phase": "running"}
            running -= 1
    if job_failure and job_failure.get("reason") == "FailedIndexes":
        base["reason"] = None  # array_job says how many failed
    parallelism = spec.get("parallelism")
    job = array_job(base, tasks, asked, parallelism if parallelism != len(asked) else None)
    job["start_time"] = job["start_time"] or (status.get("startTime") if job["phase"] != "queued" else None)
    if job["terminal"]:
        job["end_time"] = job["end_time"] or base["end_time"] or status.get("completionTime") or (
            job_failure or {}).get("lastTransitionTime")
        if job["phase"] == "cancelled":
            job["failure_class"] = "cancelled"
    if job["phase"] == "running" and base["native_state"] == "Pending":
        job["native_state"] = "Running"
    return job
