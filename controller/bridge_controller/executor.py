"""Carry out each BridgeJob's plan: finalizers at once, backend work in per-backend batches.

A worker plans a CR (plan.py) and either writes its finalizer (writer.py) or hands it to its
backend's batch (batches.py); it never waits for a backend. The batch thread and the poll thread
run each batch as one runner call, with what the resolver reads from Kubernetes (resolver.py);
results.py says what the module's result means for each CR, the writer writes it, and the CR's
key comes back to the queue by the outcome's class: after the key's growing backoff when the
failure may pass, at the backoff's cap when the backend refuses us (a fixed Secret is no event of
the CR's; but when another runner call of the same backend finds its Secret changed, at once), and
otherwise with the watch event of the status just written.

Objects are read from the watcher's cache (`cache.get(key)`): the executor keeps no copy of its
own. So a CR whose status was just written is planned again from that write's watch event, which
brings the object as written (planned from the cache before it, a submitted CR would look
unsubmitted). The watch event of a failure's status write plans nothing: the retry is scheduled,
and planning at once would defeat the backoff whenever the message changes.

A BridgeJob with spec.placement is first placed (placement.py): the choice is written into
status.placement, and only the watch event of that write, which brings the object with the
choice recorded, leads to its finalizer and submit. So the identity is looked up on the chosen
backend only once the choice is recorded, and a placed job never moves. A BridgeJob naming a
backend object that is not there yet waits (Submitted False, BackendNotFound) with backoff; the
catalog's events plan it again as soon as the object appears or changes.
"""

import collections
import hashlib
import json
import logging
import threading
import time

from bridge_controller import authority, placement, results, retries
from bridge_controller.backends import credential_keys
from bridge_controller.backend_objects import KINDS
from bridge_controller.batches import Batches
from bridge_controller.plan import FINALIZER, plan
from bridge_controller.policy import Policy
from bridge_controller.resolver import URL_CHANGED, Resolver
from bridge_controller.spec import (
    backend_key,
    backend_ref,
    identity_of,
    job_params,
    key_of,
    output_follow,
    output_lines,
    output_secrets,
    poll_interval,
    ref_key,
    refusal,
)
from bridge_controller.writer import Writer

LOG = logging.getLogger(__name__)
# The batch and poll threads' longest sleep when nothing is due: how soon the batch thread notices
# a standby to replace, and the poll thread a backend newly tracked.
IDLE_TICK = 1.0
# Seconds before a BridgeJob whose placement waits for its candidates' first probe is placed
# again; a change of any backend object plans it at once.
PLACEMENT_RETRY = 5.0


class Executor:
    def __init__(self, kube, cache, runner, queue, max_batch=500, batch_window=0.05, clock=time.monotonic,
                 status_writers=8, event_writers=0, policy=None, catalog=None, wallclock=time.time, authorizer=None):
        """`catalog` is the cache of BridgeBackend and ClusterBridgeBackend objects and of namespaces
        (catalog.py); None when there is none: a BridgeJob naming a backend object then waits."""
        self.cache = cache
        self.catalog = catalog
        self.policy = policy or Policy()
        self.runner = runner
        self.queue = queue
        self.clock = clock
        # The time of day, for what backends report as times (a retry's backoff counts from the end
        # of the failed attempt): `clock` is monotonic.
        self.wallclock = wallclock
        self.batches = Batches(max_batch, batch_window, clock)
        self.resolver = Resolver(kube, catalog)
        # Who each CR acts for, asked before each runner call (authority.py); tests may pass their own.
        self.authority = authorizer or authority.Authority(kube)
        self.writer = Writer(kube, self._acting, self._count, status_writers, event_writers)
        self.stats = collections.Counter()
        self.release_after_cancel = set()
        self.backends_seen = set()
        self.failure_reports = {}     # key -> resourceVersion of the failure status last written
        # CRs waiting for the retry cap after a permanent failure (a refused token), by backend key,
        # and a fingerprint of the Secret each backend key's last runner call was handed: when a
        # poll or batch finds the Secret changed (a rotated token), those CRs are planned at once.
        self.parked = collections.defaultdict(set)
        self.secret_seen = {}
        # BridgeJobs waiting for a backend object by its (kind, namespace, name), and those whose
        # placement waits for a probe: a backend event plans them at once.
        self.waiting_for_backend = collections.defaultdict(set)
        self.waiting_for_placement = set()
        # With leader election, main.py sets this to the elector's gate. Once it is closed, nothing
        # is written and no batch runs: the Lease may soon be another replica's.
        self.may_act = lambda: True
        self._lock = threading.Lock()
        if catalog is not None:
            catalog.subscribe(self.backend_changed)
            catalog.subscribe_namespaces(self.namespace_changed)

    def _count(self, name, amount=1):
        with self._lock:
            self.stats[name] += amount

    # ------------------------------------------------------------------ events and planning

    def _acting(self):
        # Looked up at each call: main.py replaces may_act with the elector's gate after this.
        return self.may_act()

    def observe(self, kind, obj):
        """A watch event (the watcher's cache already holds `obj`): queue its key."""
        key = key_of(obj)
        if kind == "DELETED":
            self.batches.untrack(key)
            self.queue.forget(key)
            with self._lock:
                self.failure_reports.pop(key, None)
                self.parked.get(backend_key(obj), set()).discard(key)
                self.waiting_for_placement.discard(key)
                for keys in self.waiting_for_backend.values():
                    keys.discard(key)
            return
        group = backend_key(obj)
        # Planned outside the lock: the plan may read the catalog, whose events take the lock too.
        starting = group not in self.backends_seen and self._plan(obj) in (("add_finalizer",), ("submit",))
        with self._lock:
            # Only a CR that is going to be submitted warms its backend: a controller watching
            # finished CRs holds no standby playbook.
            new_backend = starting and group not in self.backends_seen
            if new_backend:
                self.backends_seen.add(group)
        if new_backend and hasattr(self.runner, "prepare"):
            # Warm the runner for this backend now, off the watch thread, not at its first submit.
            threading.Thread(target=self._prepare, args=(obj,), name="bridge-prepare", daemon=True).start()
        with self._lock:
            own_report = self.failure_reports.get(key) == obj["metadata"].get("resourceVersion")
            if own_report:
                del self.failure_reports[key]
        if not own_report and not self.batches.changed_in_flight(key):
            self.queue.add(key)

    def backend_changed(self, event, backend):
        """A BridgeBackend or ClusterBridgeBackend was added, changed or deleted (the catalog's
        subscription, callback(kind, obj)): plan the BridgeJobs waiting for it, and every placement
        waiting for a probe."""
        meta = backend.get("metadata") or {}
        kind = backend.get("kind") or (event if event in KINDS else None)
        ref = (kind, "" if kind == "ClusterBridgeBackend" else meta.get("namespace") or "", meta.get("name"))
        with self._lock:
            keys = self.waiting_for_backend.pop(ref, set()) | self.waiting_for_placement
            self.waiting_for_placement = set()
        for key in sorted(keys):
            self._count("backend_event_retries")
            self.queue.add(key)

    def namespace_changed(self, name):
        """A namespace started or stopped matching --namespace-selector: plan its BridgeJobs."""
        for key in self.cache.keys():
            if key.startswith(name + "/"):
                self.queue.add(key)

    def _prepare(self, obj):
        try:
            self.runner.prepare(self.resolver.connection(obj))
        except Exception:  # pylint: disable=broad-except
            pass  # an optimisation only: the first batch then starts its playbook itself

    def reconcile(self, key):
        """Plan one CR and carry out what does not need its backend; batch the rest."""
        obj = self.cache.get(key)
        if obj is None or self.batches.changed_in_flight(key):
            return
        if self.catalog is not None and not self.catalog.serves(obj["metadata"]["namespace"]):
            # Another controller's (--namespace-selector): not even a status is written.
            self.queue.forget(key)
            return
        self._count("reconciles")
        actions = self._plan(obj)
        group = backend_key(obj)
        unresolved = self.resolver.unresolved(obj) if actions == ("submit",) else None
        if actions in (("place",), ("cancel_unplaced",)) or unresolved:
            # Written in line, not batched, but in flight as a batch's CRs are: the watch event of
            # its own write does not plan it again before its outcome says when.
            self.batches.hold(key)
        if actions == ("place",):
            self._place(key, obj)
        elif actions == ("cancel_unplaced",):
            job = {"phase": "cancelled", "failure_class": "cancelled", "reason": "cancelled before it was placed"}
            self._apply("cancel_unplaced", key, obj, results.Outcome({"job": job}, results.DONE))
        elif actions == ("add_finalizer",):
            self.writer.set_finalizers(obj, (obj["metadata"].get("finalizers") or []) + [FINALIZER])
        elif actions == ("refuse",):
            self._count("refusals")
            reason, why = self._refusal(obj)
            self._apply("refuse", key, obj, results.refused(why, why, refusal_reason=reason))
        elif actions == ("remove_finalizer",):
            self._release(obj)
        elif "cancel" in actions:
            self.batches.untrack(key)
            if "remove_finalizer" in actions:
                with self._lock:
                    self.release_after_cancel.add(key)
            self.batches.add("cancel", group, key)
        elif unresolved:
            self._wait_for_backend(key, obj, unresolved)
        elif actions == ("retry",):
            self._retry(key, obj, group)
        elif "submit" in actions:
            self.batches.add("submit", group, key)
        elif "poll" in actions:
            self.batches.track(group, key, poll_interval(obj))
        else:
            self.batches.untrack(key)
            self.queue.forget(key)

    def _retry(self, key, obj, group):
        """Submit the next attempt of a CR whose status.nextAttempt is due; plan it again when it
        will be. The submit looks every attempt identity up first (retries.py)."""
        self.batches.untrack(key)
        delay = retries.seconds_until_next(obj, self.wallclock())
        if delay > 0:
            self.queue.add_after(key, delay)
            return
        self._count("retries")
        self.batches.add("submit", group, key)

    def _refusal(self, obj):
        """(the Failed condition's reason, why) when the CR is not to be submitted at all, else None:
        a spec its schema cannot check (reason: its failure class), a backend outside the policy,
        or a ClusterBridgeBackend whose namespaceSelector does not admit the CR's namespace."""
        why = refusal(obj)
        if why:
            return None, why
        return self.resolver.refusal(obj, self.policy)

    def _wait_for_backend(self, key, obj, unresolved):
        """Hold back a CR whose backend object is not there (yet): Pending, retried with backoff, and
        planned at once when the object appears (backend_changed)."""
        reason, why, ref = unresolved
        self._count("backend_waits")
        with self._lock:
            self.waiting_for_backend[ref].add(key)
        self._apply("submit", key, obj, results.Outcome({"waiting": (reason, why)}, results.TEMPORARY))

    def _place(self, key, obj):
        """Choose the backend of a spec.placement from the catalog's cache and record the choice in
        status.placement; the job goes on from the watch event of that write."""
        started = self.clock()
        script = None
        if (obj.get("spec") or {}).get("scriptFrom"):
            # What the script is may decide where it fits (a quantum circuit, a program).
            _ready, scripts, waiting = self.resolver.scripts([(key, obj)])
            if waiting:
                self._apply("place", key, obj, results.Outcome({"waiting": ("ScriptNotFound", waiting[0][2])}, results.TEMPORARY))
                return
            script = scripts.get(key)
        try:
            decision = placement.decide(obj, self.catalog, job_params(obj, script=script),
                                        lambda found: self.resolver.object_refusal(found, obj["metadata"].get("namespace"), self.policy))
        except Exception:  # pylint: disable=broad-except
            # Nothing was decided or written; the key must not stay in flight.
            LOG.exception("placement of %s failed", key)
            self._requeue(key, obj, results.TEMPORARY, None)
            return
        self._count("placement_seconds", self.clock() - started)
        if decision.waiting:
            self._count("placements_waiting")
            with self._lock:
                self.waiting_for_placement.add(key)
            outcome = results.Outcome({"placed": (False,) + decision.waiting}, results.WAITING)
        elif decision.message:
            self._count("placements_unplaceable")
            outcome = results.refused(decision.message, decision.message, refusal_reason="Unplaceable",
                                      placement=decision.placement, placed=decision.placed)
        else:
            placed = decision.placement
            outcome = results.Outcome({"placement": placed, "placed": decision.placed,
                                       "backend": dict(placed["backend"], type=placed["type"])}, results.DONE)
            if self._apply("place", key, obj, outcome) is not None:
                self._count("placements")   # recorded: a choice another write had made first is not counted
            return
        self._apply("place", key, obj, outcome)

    def _plan(self, obj):
        return plan(obj, self._refusal)

    def _release(self, obj):
        self.writer.set_finalizers(obj, [f for f in obj["metadata"].get("finalizers") or [] if f != FINALIZER])

    # ------------------------------------------------------------------ the batch and poll threads

    def run_batches(self, stopping):
        """The batch thread: submits and cancels, one batch at a time, until `stopping` is set.
        Polls have their own thread, so that a poll's playbook never delays a submit."""
        while not stopping.is_set():
            try:
                self.flush(self.batches.gather(IDLE_TICK, stopping))
                self.runner.refresh()
            except Exception:  # pylint: disable=broad-except
                LOG.exception("batch failed")
        self.flush()

    def run_polls(self, stopping):
        """The poll thread: each backend's tracked jobs when their poll is due, until `stopping` is set."""
        while not stopping.is_set():
            until_poll = self.batches.seconds_to_next_poll()
            stopping.wait(IDLE_TICK if until_poll is None else min(until_poll, IDLE_TICK))
            try:
                self.poll_due()
            except Exception:  # pylint: disable=broad-except
                LOG.exception("poll failed")

    def flush(self, batches=None):
        """Run `batches` (by default every pending one) once; returns how many runner calls it made."""
        batches = self.batches.take() if batches is None else batches
        for action, _group, keys in batches:
            self._run_batch(action, keys)
        return len(batches)

    def poll_due(self, now=None):
        """Poll every backend whose interval has passed: one runner call for all its tracked CRs."""
        due = self.batches.due_polls(now)
        for _group, keys in due:
            self._run_batch("poll", keys)
        return len(due)

    def _run_batch(self, action, keys):
        objects = [(key, self.cache.get(key)) for key in keys]
        self._finish([key for key, obj in objects if obj is None])
        objects = [(key, obj) for key, obj in objects if obj is not None]
        if not self.may_act():
            self._finish([key for key, _obj in objects])
            return
        scripts = {}
        if action == "submit":
            objects, scripts, waiting = self.resolver.scripts(objects)
            self.writer.each(lambda key, obj, why: self._apply(
                action, key, obj, results.Outcome({"waiting": ("ScriptNotFound", why)}, results.TEMPORARY)), waiting)
        if not objects:
            return
        objects, moved = self._pinned(objects)
        self.writer.each(lambda key, obj, outcome: self._apply(action, key, obj, outcome), moved)
        if not objects:
            return
        try:
            outcomes = self._outcomes(action, objects, scripts)
        except Exception as exc:  # pylint: disable=broad-except
            if not self.may_act():
                self._finish([key for key, _obj in objects])  # what is known now is the next leader's to write
                return
            # Whatever failed (the Secret, a ConfigMap, the runner), nothing was learned about the jobs.
            failed = results.unreachable(results.runner_error(exc))
            outcomes = dict((identity_of(obj), failed) for _key, obj in objects)
        self.writer.each(lambda key, obj: self._apply(action, key, obj, outcomes[identity_of(obj)]), objects)

    def _pinned(self, objects):
        """(the objects of a batch whose job may be reached over their backend's URL as resolved now,
        [(key, obj, outcome)] of those whose job was submitted to another URL: resolver.url_change,
        nothing is sent for them, BackendReachable False says why until the URL is set back)."""
        try:
            backend = self.resolver.backend(objects[0][1])   # one backend per batch
        except Exception:  # pylint: disable=broad-except
            return objects, []   # _outcomes resolves it again and reports what failed
        kept, moved = [], []
        for key, obj in objects:
            why = self.resolver.url_change(obj, backend)
            if why:
                self._count("url_changes_refused")
                ref = backend_ref(obj)
                if ref is not None:
                    # Planned again at once when its backend object changes (its url set back).
                    with self._lock:
                        self.waiting_for_backend[ref_key(ref, obj["metadata"].get("namespace"))].add(key)
                moved.append((key, obj, results.unreachable({"type": URL_CHANGED, "temporary": False, "message": why})))
            else:
                kept.append((key, obj))
        return kept, moved

    def _outcomes(self, action, objects, scripts):
        # Resolved now, when the batch runs: a backend object's edit reaches the next runner call.
        backend = self.resolver.backend(objects[0][1])
        # Asked now, for each CR's author: a right revoked since the last call stops the next one.
        denied, objects = self._authorized(action, objects, backend)
        if not objects:
            return denied
        first = objects[0][1]
        connection = self.resolver.connection(first, backend)
        # Read for every batch and every poll, never cached: a token rotated in the Secret (one
        # that expires) is what the next runner call hands over. One GET per runner call.
        credentials = self.resolver.credentials(first, backend)
        identities = [identity_of(obj) for _key, obj in objects]
        if backend["secret"]:
            self._count("secret_reads")
            self._secret_read(backend_key(first), credentials, [key for key, _obj in objects])
            refused = self._credentials_refusal(connection["type"], credentials)
            if refused:
                # Nothing is handed to a playbook: the kubeconfig is never loaded, nothing is sent.
                self._count("policy_refusals")
                outcome = results.unreachable({"type": refused[0], "temporary": False, "message": refused[1]})
                return dict(denied, **dict((identity, outcome) for identity in identities))
        elif connection["type"] == "kubernetes":
            # Never the controller's own identity: the operator's Job ServiceAccount of the namespace
            # the Jobs run in (the BridgeJob's, or the one a ClusterBridgeBackend names).
            try:
                credentials = self.authority.job_credentials(connection["namespace"])
            except authority.Refused as exc:
                self._count("policy_refusals")
                outcome = results.unreachable({"type": exc.reason, "temporary": False, "message": str(exc)})
                return dict(denied, **dict((identity, outcome) for identity in identities))
        self._count("runner_calls_%s" % action)
        started = self.clock()
        if action == "poll":
            # A job with spec.retry is read under its current attempt's identity.
            polled = [retries.poll_identity(obj) for _key, obj in objects]
            # The output of a CR that asks for it, read by the poll that finds its job (or its current
            # attempt) finished: the last poll of that job, so once; with spec.output.follow also by
            # every poll that finds it running.
            lines = dict((retries.poll_identity(obj), output_lines(obj)) for _key, obj in objects if output_lines(obj))
            extra = {"output_lines": lines} if lines else {}
            follow = [retries.poll_identity(obj) for _key, obj in objects if output_lines(obj) and output_follow(obj)]
            if follow:
                extra["output_follow"] = follow
            secrets = dict((retries.poll_identity(obj), output_secrets(obj)) for _key, obj in objects
                           if output_lines(obj) and output_secrets(obj))
            if secrets:
                extra["output_secrets"] = secrets
            result = self.runner.run(action, connection, credentials, identities=polled, **extra)
        else:
            jobs = ([retries.cancel_item(obj) for _key, obj in objects] if action == "cancel" else
                    [job_params(obj, script=scripts.get(key)) for key, obj in objects])
            result = self.runner.run(action, connection, credentials, jobs=jobs)
        self._count("runner_seconds", self.clock() - started)
        if action != "poll":
            outcomes = results.batch_outcomes(action, identities, result)
        else:
            self._count("polls_failed" if result.get("failed") else "polls")
            by_attempt = results.poll_outcomes(polled, result)
            outcomes = dict((identity, by_attempt[attempt]) for identity, attempt in zip(identities, polled))
        now = self.wallclock()
        observed = dict((identity_of(obj), self._pin(obj, connection, retries.observed(obj, action, outcomes[identity_of(obj)], now)))
                        for _key, obj in objects)
        return dict(denied, **observed)

    def _authorized(self, action, objects, backend):
        """({identity: outcome} of the CRs whose author may not have `action` done, [the others])."""
        denied, allowed = {}, []
        for key, obj in objects:
            script = ((obj.get("spec") or {}).get("scriptFrom") or {}).get("configMapKeyRef") or {}
            try:
                self.authority.check(action, obj, backend, script.get("name"))
            except authority.Refused as exc:
                self._count("authority_refusals")
                denied[identity_of(obj)] = results.unreachable({"type": exc.reason, "temporary": False, "message": str(exc)})
                continue
            allowed.append((key, obj))
        return denied, allowed

    def _pin(self, obj, connection, outcome):
        """`outcome`, recording in status.backend.url the URL a job was submitted to (or first
        reached at, for one submitted before URLs were recorded), which _pinned holds later calls to."""
        if outcome.kind != results.DONE or not connection.get("url") or not (outcome.observed.get("job") or {}).get("job_id"):
            return outcome
        backend = dict(self.resolver.status_backend(obj) or {}, url=connection["url"])
        return results.Outcome(dict(outcome.observed, backend=backend), outcome.kind)

    def _credentials_refusal(self, backend_type, credentials):
        """(reason, why) when the Secret holds what the policy does not let a tenant hand the
        controller (a kubeconfig that runs commands or reads files), or no kubeconfig at all where
        one is the only credential (the controller never lends its own); None when it does not."""
        key = dict(credential_keys(backend_type)).get("kubeconfig_content", "")
        kubeconfig = credentials.get(key)
        if backend_type == "kubernetes" and not (kubeconfig or "").strip():
            return authority.NO_CREDENTIALS, (
                "the backend's credentialsSecretRef Secret has no '%s' key with a kubeconfig; a kubernetes backend "
                "runs with the credentials of that kubeconfig only, never with the controller's own" % key)
        return self.policy.kubeconfig_refusal(kubeconfig) if kubeconfig else None

    def _secret_read(self, group, credentials, keys):
        """Plan now the CRs of `group` parked at the retry cap when its Secret changed since its last
        read: the change (a rotated token, a fixed user) is what they wait for, and no event of
        theirs would bring them back before the cap."""
        fingerprint = hashlib.sha256(json.dumps(credentials, sort_keys=True).encode("utf-8")).hexdigest()
        with self._lock:
            changed = self.secret_seen.get(group, fingerprint) != fingerprint
            self.secret_seen[group] = fingerprint
            # Those in this runner call are parked again by their outcome if it is permanent again.
            waiting = self.parked.pop(group, set()) - set(keys) if changed else set()
        for key in sorted(waiting):
            self._count("secret_change_retries")
            self.queue.add(key)

    def _apply(self, action, key, obj, outcome):
        """Write one CR's outcome, then let its key be planned again as the outcome's class says.
        Its key leaves flight even when the write fails, so that nothing strands it. Returns the
        object as written, None when nothing was."""
        updated = None
        written = False
        try:
            observed = dict(outcome.observed)
            if "backend" not in observed:
                observed["backend"] = self.resolver.status_backend(obj)
            updated = self.writer.status(obj, **observed)
            written = True
            if outcome.kind != results.DONE:
                return updated
            job = outcome.observed.get("job") or {}
            if action == "poll" and job.get("terminal"):
                self.batches.untrack(key)
            if action != "poll":
                self._count("%s_done" % action)
            with self._lock:
                release = action == "cancel" and key in self.release_after_cancel
                self.release_after_cancel.discard(key)
            if release:
                self._release(updated or self.cache.get(key) or obj)
            return updated
        finally:
            # A placement that wrote nothing found the stored CR newer than the cache (another
            # write, or a choice already recorded): its watch event is coming and plans the CR.
            # Planned now, it would only be placed again from the same stale view.
            event_coming = written and updated is None and action == "place" and outcome.kind == results.DONE
            self._requeue(key, obj, outcome.kind, updated, event_coming)

    def _requeue(self, key, obj, kind, written, event_coming=False):
        """Take `key` out of flight and have it planned again as its outcome's class says.

        Done and refused forget the backoff and re-plan with the watch event of `written` (the
        object as the status write stored it), or now when nothing was written or the event came
        while in flight. Temporary waits the key's growing backoff, permanent the backoff's cap,
        unless the CR changed meanwhile so that its plan did (cancelled, deleted).
        """
        retrying = kind in (results.TEMPORARY, results.PERMANENT, results.WAITING)
        group = backend_key(obj)
        with self._lock:
            if retrying and written is not None:
                self.failure_reports[key] = written["metadata"].get("resourceVersion")
            else:
                self.failure_reports.pop(key, None)
            if kind == results.PERMANENT:
                self.parked[group].add(key)
            elif group in self.parked:
                self.parked[group].discard(key)
        changed = key in self.batches.finish([key])
        if not retrying:
            self.queue.forget(key)
            if (written is None and not event_coming) or changed:
                self.queue.add(key)
            return
        if kind == results.TEMPORARY:
            self.queue.add_rate_limited(key)
        elif kind == results.WAITING:
            self.queue.add_after(key, PLACEMENT_RETRY)
        else:
            self.queue.add_after(key, self.queue.rate_limiter.cap)
        current = self.cache.get(key)
        if changed and current is not None and self._plan(current) != self._plan(obj):
            self.queue.add(key)

    def _finish(self, keys):
        """Take `keys` out of flight and plan them again now: their batch did not run."""
        self.batches.finish(keys)
        for key in keys:
            self.queue.add(key)
