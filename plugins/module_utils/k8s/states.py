# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Kubernetes Job and its Pods as Bridge's job (pure): phases and failure classes from the Job's
conditions, the container's termination and the scheduler's messages.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.bridge.hpc.plugins.module_utils._backend import TERMINAL_PHASES, ShapeError
from ansible_collections.bridge.hpc.plugins.module_utils.k8s.compile import (
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
    """A Job and its Pods as Bridge's job dict."""
    if not isinstance(native, dict):
        raise ShapeError("a Job must be an object, got %s" % type(native).__name__)
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
