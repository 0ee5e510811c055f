"""What to do about one BridgeJob: a pure function of the CR alone.

Every backend action is keyed by the job's identity (the CR UID), never by a remembered job id:
`submit` looks the identity up before submitting and `cancel` cancels whatever carries it. So a
controller killed between a submit and the status write neither submits again nor orphans the
job. Reads of many jobs and submits of many CRs are batched per backend by the caller.
"""

from bridge_controller.spec import needs_placement
from bridge_controller.spec import refusal as spec_refusal
from bridge_controller.status import TERMINAL

FINALIZER = "bridge.dev/cancel-job"

# place           choose the backend of a spec.placement among its candidates, from the backend
#                 objects' cached status, and record the choice in status.placement; nothing is
#                 sent anywhere, so no finalizer. The job is submitted only once the recorded
#                 choice comes back with the watch event of that write, and never moves again.
# cancel_unplaced a spec.cancel before placement chose: Cancelled, nothing to ask a backend
# refuse          fail a CR before it is submitted when `refusal` finds it wrong in what its schema
#                 cannot check (a resultQuery) or outside the operator's policy (policy.py)
# add_finalizer   put the finalizer on before any side effect
# submit          make sure a job with this identity exists (batched per backend)
# poll            read the job (one list request per backend for all CRs due)
# cancel          make sure the job with this identity is not queued or running (waits for it); with
#                 spec.retry its latest attempt
# retry           submit the next attempt of a spec.retry once status.nextAttempt is due (retries.py)
# remove_finalizer  let Kubernetes delete the CR; only after cancel succeeded or nothing ran


def plan(obj, refusal=spec_refusal):
    """The actions the CR needs now, in order; () when it needs none. `refusal(obj)` says why a CR
    is not to be submitted at all (None when it may be)."""
    meta = obj["metadata"]
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    has_finalizer = FINALIZER in (meta.get("finalizers") or [])
    terminal = status.get("phase") in TERMINAL
    if meta.get("deletionTimestamp"):
        if not has_finalizer:
            return ()                                  # nothing of ours to clean up
        if terminal:
            return ("remove_finalizer",)               # deleted after its job finished
        return ("cancel", "remove_finalizer")          # its job may be queued or running
    if terminal:
        return ()                                      # a finished job has nothing left to clean up
    if needs_placement(obj):
        return ("cancel_unplaced",) if spec.get("cancel") else ("place",)
    if not status.get("jobId") and refusal(obj):
        return ("refuse",)                             # no side effect, so no finalizer
    if not has_finalizer:
        return ("add_finalizer",)
    if spec.get("cancel"):
        return ("cancel",)
    if not status.get("jobId"):
        return ("submit",)
    if status.get("nextAttempt"):
        return ("retry",)
    return ("poll",)
