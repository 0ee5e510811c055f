"""What to do about one BridgeJob: a pure function of the CR alone.

Every backend action is keyed by the job's identity (the CR UID), never by a remembered job id:
`submit` looks the identity up before submitting and `cancel` cancels whatever carries it. So a
controller killed between a submit and the status write neither submits again nor orphans the
job. Reads of many jobs and submits of many CRs are batched per backend by the caller.
"""

import collections

from bridge_controller.spec import poll_interval
from bridge_controller.status import TERMINAL

FINALIZER = "bridge.dev/cancel-job"

# add_finalizer   put the finalizer on before any side effect
# submit          make sure a job with this identity exists (batched per backend)
# poll            read the job (one list request per backend for all CRs due)
# cancel          make sure the job with this identity is not queued or running (waits for it)
# remove_finalizer  let Kubernetes delete the CR; only after cancel succeeded or nothing ran
Plan = collections.namedtuple("Plan", "actions requeue_after reason")


def plan(obj):
    meta = obj["metadata"]
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    has_finalizer = FINALIZER in (meta.get("finalizers") or [])
    terminal = status.get("phase") in TERMINAL
    if meta.get("deletionTimestamp"):
        if not has_finalizer:
            return Plan((), None, "being deleted, nothing of ours to clean up")
        if terminal:
            return Plan(("remove_finalizer",), None, "deleted after its job finished")
        return Plan(("cancel", "remove_finalizer"), None, "deleted while its job may be queued or running")
    if not has_finalizer:
        return Plan(("add_finalizer",), 0, "new")
    if terminal:
        return Plan((), None, "job finished")
    if spec.get("cancel"):
        return Plan(("cancel",), None, "cancel requested")
    if not status.get("jobId"):
        return Plan(("submit",), poll_interval(obj), "not submitted yet")
    return Plan(("poll",), poll_interval(obj), "job %s is %s" % (status.get("jobId"), status.get("phase")))
