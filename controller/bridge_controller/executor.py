"""Carry out reconcile's plans: finalizers at once, backend work in per-backend batches.

Workers never wait for a backend. A plan's submit or cancel joins the batch of its backend and
action; the batch thread (main.py) wakes when work arrives, gathers for --batch-window seconds and
runs each batch as one runner invocation (one module run for all its CRs). What arrives while a
batch runs forms the next one, so a burst needs few invocations and a lone CR waits only the window.
Polling is driven per backend, not per CR: every tracked job of a backend is read with one runner
call, hence one list request, per poll interval, whatever the number of CRs. A CR whose work is in
a batch is "in flight" and is not planned again until its results are written.
"""

import collections
import concurrent.futures
import logging
import threading
import time

from bridge_controller.reconcile import FINALIZER, plan
from bridge_controller.spec import backend_key, backend_of, identity_of, job_params, key_of, poll_interval
from bridge_controller.status import desired_status, status_patch

LOG = logging.getLogger(__name__)
REFUSED_KINDS = ("invalid_spec", "rejected", "already_exists", "not_found")
RETRY_SECONDS = 15


def module_error(result, default_type):
    """The BackendReachable reason and message of a module that failed as a whole."""
    error = result.get("error") or {}
    return {"type": error.get("type") or default_type, "message": str(result.get("msg") or error.get("message") or "")[:500]}


class Executor:
    def __init__(self, kube, runner, queue, max_batch=500, clock=time.monotonic, status_writers=8, event_writers=0):
        self.kube = kube
        self.runner = runner
        self.queue = queue
        self.max_batch = max_batch
        self.clock = clock
        self.cache = {}
        self.in_flight = set()
        self.pending = collections.defaultdict(list)      # (action, backend key) -> [CR key]
        self.release_after_cancel = set()
        self.tracked = collections.defaultdict(set)        # backend key -> CR keys being polled
        self.next_poll = {}                                # backend key -> monotonic time
        self.stats = collections.Counter()
        self.work_ready = threading.Event()              # set when a batch has work
        self.backends_seen = set()
        # With leader election, main.py sets this to the elector's gate. Once it is closed, nothing
        # is written and no batch runs: the Lease may soon be another replica's.
        self.may_act = lambda: True
        self.writers = concurrent.futures.ThreadPoolExecutor(max_workers=status_writers, thread_name_prefix="bridge-status")
        # Events are reported, not waited for, as client-go's recorder does: the status (the job id)
        # lands without queueing behind them. 0 writes them in line (the unit tests read them at once).
        self.event_writers = (concurrent.futures.ThreadPoolExecutor(max_workers=event_writers, thread_name_prefix="bridge-events")
                              if event_writers else None)
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ events and planning

    def observe(self, kind, obj):
        """A watch event: keep the newest object and queue its key."""
        key = key_of(obj)
        with self._lock:
            if kind == "DELETED":
                self.cache.pop(key, None)
                for keys in self.tracked.values():
                    keys.discard(key)
                return
            self.cache[key] = obj
            group = backend_key(obj)
            # Only a CR that is going to be submitted warms its backend: a controller watching
            # finished CRs holds no standby playbook.
            new_backend = group not in self.backends_seen and plan(obj).actions in (("add_finalizer",), ("submit",))
            if new_backend:
                self.backends_seen.add(group)
        if new_backend and hasattr(self.runner, "prepare"):
            # Warm the runner for this backend now, off the watch thread, not at its first submit.
            threading.Thread(target=self._prepare, args=(obj,), name="bridge-prepare", daemon=True).start()
        self.queue.add(key)

    def _prepare(self, obj):
        try:
            self.runner.prepare(self._connection(obj))
        except Exception:  # pylint: disable=broad-except
            pass  # an optimisation only: the first batch then starts its playbook itself

    def reconcile(self, key):
        """Plan one CR and carry out what does not need its backend; queue the rest."""
        with self._lock:
            obj = self.cache.get(key)
            if obj is None or key in self.in_flight:
                return
        self._count("reconciles")
        decided = plan(obj)
        actions = decided.actions
        if actions == ("add_finalizer",):
            self._set_finalizers(obj, (obj["metadata"].get("finalizers") or []) + [FINALIZER])
            return
        if actions == ("remove_finalizer",):
            self._release(obj)
            return
        with self._lock:
            group = backend_key(obj)
            if "cancel" in actions:
                self.tracked[group].discard(key)
                self._enqueue("cancel", group, key)
                if "remove_finalizer" in actions:
                    self.release_after_cancel.add(key)
            elif "submit" in actions:
                self._enqueue("submit", group, key)
            elif "poll" in actions:
                self.tracked[group].add(key)
                self.next_poll.setdefault(group, self.clock() + poll_interval(obj))
            else:
                for keys in self.tracked.values():
                    keys.discard(key)

    def _count(self, name, amount=1):
        with self._lock:
            self.stats[name] += amount

    def _enqueue(self, action, group, key):
        self.in_flight.add(key)
        self.pending[(action, group)].append(key)
        self.work_ready.set()

    def wait_for_work(self, timeout):
        """Block until a batch has work or `timeout` passed; True when there is work."""
        ready = self.work_ready.wait(timeout)
        self.work_ready.clear()
        return ready

    def seconds_to_next_poll(self, now=None):
        now = self.clock() if now is None else now
        with self._lock:
            due = [self.next_poll.get(group, now) for group, keys in self.tracked.items() if keys]
        return max(0.0, min(due) - now) if due else None

    def _set_finalizers(self, obj, finalizers):
        from bridge_controller.kube import Conflict

        if not self.may_act():
            return
        try:
            self.kube.set_finalizers(obj, finalizers)
        except Conflict:
            self._count("conflicts")

    def _release(self, obj):
        finalizers = [f for f in obj["metadata"].get("finalizers") or [] if f != FINALIZER]
        self._set_finalizers(obj, finalizers)

    # ------------------------------------------------------------------ batches

    def flush(self):
        """Run every pending submit and cancel batch once; returns how many runner calls it made."""
        with self._lock:
            batches = list(self.pending.items())
            self.pending.clear()
        calls = 0
        for (action, group), keys in batches:
            for start in range(0, len(keys), self.max_batch):
                self._run_batch(action, group, keys[start:start + self.max_batch])
                calls += 1
        return calls

    def poll_due(self, now=None):
        """Poll every backend whose interval has passed: one runner call for all its tracked CRs."""
        now = self.clock() if now is None else now
        with self._lock:
            due = [(group, sorted(keys)) for group, keys in self.tracked.items()
                   if keys and self.next_poll.get(group, now) <= now]
            for group, keys in due:
                self.next_poll[group] = now + min(poll_interval(self.cache[k]) for k in keys if k in self.cache)
                self.in_flight.update(keys)
        for group, keys in due:
            self._run_batch("poll", group, keys)
        return len(due)

    def _objects(self, keys):
        with self._lock:
            return [(key, self.cache[key]) for key in keys if key in self.cache]

    def _run_batch(self, action, group, keys):
        objects = self._objects(keys)
        if not objects or not self.may_act():
            self._finish(keys)
            return
        scripts = {}
        if action == "submit":
            objects, scripts, waiting = self._read_scripts(objects)
            if waiting:
                waiting_keys = [key for key, _obj, _why in waiting]
                keys = [key for key in keys if key not in waiting_keys]
                # Out of flight before writing: a failed status write must not strand them.
                self._finish(waiting_keys, retry=True)
                self._each(lambda _key, obj, why: self._write(obj, waiting=("ScriptNotFound", why)), waiting)
        if not objects:
            self._finish(keys)
            return
        first = objects[0][1]
        try:
            backend = self._connection(first)
            credentials = self._credentials(first)
            payload = self._payload(action, objects, scripts)
            self._count("runner_calls_%s" % action)
            started = self.clock()
            result = self.runner.run(action, backend, credentials, **payload)
            self._count("runner_seconds", self.clock() - started)
        except Exception as exc:  # pylint: disable=broad-except
            if not self.may_act():
                self._finish(keys)  # what is known now is the next leader's to write
                return
            # Whatever failed (secret, reading a ConfigMap, runner), nothing was learned about the jobs:
            # mark the backend unreachable for these CRs and try again later.
            self._unreachable(objects, {"type": type(exc).__name__, "message": str(exc)[:500]})
            self._finish(keys, retry=True)
            return
        if action != "poll" and result.get("failed") and not result.get("results"):
            # The module failed before any item (the batch's one lookup: connection, TLS, auth):
            # nothing was submitted or cancelled. Its error, not "no result", is what to report.
            self._unreachable(objects, module_error(result, "%sFailed" % action.capitalize()))
            self._finish(keys, retry=True)
            return
        if action == "poll":
            self._apply_poll(objects, result)
        else:
            self._apply_results(action, objects, result)
        self._finish(keys)

    def _connection(self, obj):
        """What the runner connects with (the credentials apart): the same for a backend key's CRs."""
        backend = backend_of(obj)
        connection = dict((k, v) for k, v in backend.items() if k in ("type", "url", "api_version", "validate_certs"))
        if backend["ca"]:
            connection["ca_pem"] = self.kube.read_config_map_key(backend["namespace"], backend["ca"]["name"],
                                                                 backend["ca"].get("key") or "ca.crt")
        return connection

    def _credentials(self, obj):
        backend = backend_of(obj)
        if not backend["secret"]:
            return {}
        return self.kube.read_secret(backend["namespace"], backend["secret"])

    def _read_scripts(self, objects):
        """(objects ready to submit, {key: script of scriptFrom}, [(key, obj, why) of those waiting]).

        A ConfigMap that is not there (yet) holds back its own CR only: it may be applied after the
        CR, as a Pod waits for the ConfigMaps it names, and the backend is not to blame.
        """
        from bridge_controller.kube import Missing

        ready, scripts, waiting = [], {}, []
        for key, obj in objects:
            ref = ((obj.get("spec") or {}).get("scriptFrom") or {}).get("configMapKeyRef")
            if ref:
                try:
                    scripts[key] = self.kube.read_config_map_key(obj["metadata"]["namespace"], ref["name"], ref["key"])
                except Missing as exc:
                    waiting.append((key, obj, "spec.scriptFrom: %s" % exc))
                    continue
            ready.append((key, obj))
        return ready, scripts, waiting

    def _payload(self, action, objects, scripts):
        if action == "poll":
            return {"identities": [identity_of(obj) for _key, obj in objects]}
        if action == "cancel":
            return {"jobs": [{"identity": identity_of(obj)} for _key, obj in objects]}
        return {"jobs": [job_params(obj, script=scripts.get(key)) for key, obj in objects]}

    def _finish(self, keys, retry=False):
        with self._lock:
            self.in_flight.difference_update(keys)
        for key in keys:
            if retry:
                self.queue.add_after(key, RETRY_SECONDS)
            else:
                self.queue.add(key)

    # ------------------------------------------------------------------ writing results

    def _write(self, obj, **observed):
        if not self.may_act():
            return
        meta = obj["metadata"]
        desired = desired_status(obj.get("status"), meta.get("generation"), **observed)
        patch = status_patch(obj.get("status"), desired)
        if patch is None:
            self._count("status_noops")
            return
        self._count("status_patches")
        updated = self.kube.patch_status(obj, patch["status"])
        if updated is not None:
            with self._lock:
                self.cache[key_of(obj)] = updated
        old_phase = (obj.get("status") or {}).get("phase")
        if desired.get("phase") != old_phase:
            event = (obj, desired["phase"], desired.get("message") or desired.get("reason") or desired["phase"],
                     "Warning" if desired["phase"] == "Failed" else "Normal")
            if self.event_writers is None:
                self._event(*event)
            else:
                self.event_writers.submit(self._event, *event)

    def _event(self, obj, reason, message, kind):
        try:
            self.kube.event(obj, reason, message, kind)
        except Exception as exc:  # pylint: disable=broad-except
            # An event is a report: failing to write one must not fail the status it reports.
            self._count("events_failed")
            LOG.warning("event for %s not written: %s", key_of(obj), exc)

    def _unreachable(self, objects, error):
        self._each(lambda _key, obj: self._write(obj, reachable=False, backend_error=error), objects)

    def _each(self, write_one, items):
        """Write one status per item from the writer pool and wait for all of them.

        A batch's status writes are independent requests; one after another they made 1,000
        submissions take ~50 s on the batch thread (bench/controller_load.py).
        """
        for future in [self.writers.submit(write_one, *item) for item in items]:
            future.result()

    def _apply_results(self, action, objects, result):
        by_identity = dict((item.get("identity"), item) for item in result.get("results") or [])
        missing = {"failed": True, "error": {"kind": "server", "message": "no result"}}
        self._each(lambda key, obj: self._apply_result(action, key, obj, by_identity.get(identity_of(obj)) or missing),
                   objects)

    def _apply_result(self, action, key, obj, item):
        error = item.get("error") or {}
        if item.get("failed") and error.get("kind") not in REFUSED_KINDS:
            self._write(obj, reachable=False, backend_error=error, message=item.get("msg"))
            self.queue.add_after(key, RETRY_SECONDS)
            return
        if item.get("failed"):
            refused = {"phase": "failed", "failure_class": "rejected", "reason": error.get("reason")}
            self._write(obj, job=refused, reachable=True, message=item.get("msg"))
            return
        self._count("%s_done" % action)
        job = item.get("job")
        if action == "cancel" and job is None:
            job = {"phase": "cancelled", "failure_class": "cancelled", "reason": "never submitted"}
        self._write(obj, job=job, reachable=True, submitted=job is not None and job.get("job_id") is not None,
                    message=(item.get("job") or {}).get("reason") if action == "submit" else None)
        with self._lock:
            release = action == "cancel" and key in self.release_after_cancel
            self.release_after_cancel.discard(key)
            current = self.cache.get(key, obj)
        if release:
            self._release(current)

    def _apply_poll(self, objects, result):
        if result.get("failed"):
            # The module ran but could not list the jobs (slurmrestd down, 5xx, ...): nothing was
            # learned about them, so the backend is unreachable, not "no longer knows this job".
            self._count("polls_failed")
            self._unreachable(objects, module_error(result, "PollFailed"))
            return
        jobs = result.get("jobs") or {}
        self._count("polls")
        self._each(lambda key, obj: self._apply_polled(key, obj, jobs.get(identity_of(obj))), objects)

    def _apply_polled(self, key, obj, job):
        if job is None:
            self._write(obj, reachable=True, message="the backend no longer knows this job")
            return
        self._write(obj, job=job, reachable=True)
        if job.get("terminal"):
            with self._lock:
                for keys in self.tracked.values():
                    keys.discard(key)
