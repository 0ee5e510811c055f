"""Everything the controller writes about a BridgeJob: its finalizers, its status, its events.

Nothing is written once the leader gate (`may_act`) is closed: the Lease may soon be another
replica's. A status equal to the current one is not written at all (status.py), and a status is
written only over the version of the CR it was computed from (`status`). Events are reported, not
waited for, as client-go's recorder does: the status (the job id) lands without queueing behind
them, and an event the apiserver refuses costs only itself.
"""

import concurrent.futures
import logging

from bridge_controller.kube import Conflict
from bridge_controller.spec import key_of
from bridge_controller.status import desired_status, status_patch

LOG = logging.getLogger(__name__)
# Tries of one status write: each conflict means another write of the CR landed since it was read,
# and only this controller (one CR in one batch at a time) and users' spec edits write it.
STATUS_ATTEMPTS = 3


class Writer:
    def __init__(self, kube, may_act, count, status_writers=8, event_writers=0):
        """`may_act()` is the leader gate; `count(name, amount=1)` adds to a metric. With
        `event_writers` 0 events are written in line (the unit tests read them at once)."""
        self.kube = kube
        self.may_act = may_act
        self.count = count
        self.status_writers = concurrent.futures.ThreadPoolExecutor(max_workers=status_writers,
                                                                    thread_name_prefix="bridge-status")
        self.event_writers = (concurrent.futures.ThreadPoolExecutor(max_workers=event_writers, thread_name_prefix="bridge-events")
                              if event_writers else None)

    def set_finalizers(self, obj, finalizers):
        """Patch the finalizers of `obj`; a conflict (`obj` is stale) is left to the next watch event."""
        if not self.may_act():
            return
        try:
            self.kube.set_finalizers(obj, finalizers)
        except Conflict:
            self.count("conflicts")

    def status(self, obj, **observed):
        """Write the status that `observed` (desired_status's arguments) makes of `obj`'s; returns the
        object as the apiserver stored it, or None when nothing was written.

        `obj` comes from the watch's cache, which may lag a write already made (the last poll's),
        and a merge patch computed from it would put its older phase back. So the patch carries
        `obj`'s resourceVersion: when the apiserver answers Conflict, the CR is read again and the
        status computed anew from what is stored. Without a conflict that costs no request more.
        """
        attempts = STATUS_ATTEMPTS
        while self.may_act():
            try:
                return self._write_status(obj, observed)
            except Conflict:
                self.count("status_conflicts")
                attempts -= 1
                if not attempts:
                    raise
            stored = self.kube.read(obj)
            if stored is None or stored["metadata"].get("uid") != obj["metadata"].get("uid"):
                return None  # deleted (and maybe made anew): what was observed is no job of the stored CR's
            obj = stored
        return None

    def _write_status(self, obj, observed):
        meta = obj["metadata"]
        desired = desired_status(obj.get("status"), meta.get("generation"),
                                 result_query=(obj.get("spec") or {}).get("resultQuery"), **observed)
        patch = status_patch(obj.get("status"), desired)
        if patch is None:
            self.count("status_noops")
            return None
        self.count("status_patches")
        old_phase = (obj.get("status") or {}).get("phase")
        updated = self.kube.patch_status(obj, patch["status"])
        if desired.get("phase") != old_phase:
            # One line per phase change at the default level: what an operator follows a BridgeJob by.
            LOG.info("%s", phase_line(obj, old_phase, desired))
            event = (obj, desired["phase"], desired.get("message") or desired.get("reason") or desired["phase"],
                     "Warning" if desired["phase"] == "Failed" else "Normal")
            if self.event_writers is None:
                self._event(*event)
            else:
                self.event_writers.submit(self._event, *event)
        return updated

    def each(self, write_one, items):
        """Call `write_one(*item)` for every item from the writer pool and wait for all of them.

        A batch's status writes are independent requests; one after another they made 1,000
        submissions take ~50 s on the batch thread (bench/controller_load.py). A write that fails
        costs only its own CR: it is logged, and the rest of the batch goes on.
        """
        for future in [self.status_writers.submit(write_one, *item) for item in items]:
            try:
                future.result()
            except Exception:  # pylint: disable=broad-except
                LOG.exception("status write failed")

    def _event(self, obj, reason, message, kind):
        try:
            self.kube.event(obj, reason, message, kind)
        except Exception as exc:  # pylint: disable=broad-except
            self.count("events_failed")
            LOG.warning("event for %s not written: %s", key_of(obj), exc)


def phase_line(obj, old_phase, desired):
    """The log line of a BridgeJob's phase change: which one, from and to, its job, and why."""
    job = " (job %s)" % desired["jobId"] if desired.get("jobId") else ""
    why = desired.get("message") or desired.get("reason")
    return "BridgeJob %s: %s -> %s%s%s" % (key_of(obj), old_phase or "new", desired["phase"], job, ": %s" % why if why else "")
