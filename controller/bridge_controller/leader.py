"""Leader election on a coordination.k8s.io Lease, so two replicas never act at once.

Timing follows client-go's leaderelection, with the same three numbers:

* `lease_duration`: how long a candidate waits, after it last saw the Lease record change, before
  it may take the Lease from its holder.
* `renew_deadline`: how long the leader keeps acting after its last successful renewal began.
  It must be shorter than `lease_duration`; the difference is the safety margin.
* `retry_period`: the interval between attempts, of the leader to renew and of candidates to acquire.

Why this is safe: a renewal that started at time T can be seen by others no earlier than T, so no
one can take the Lease before T + lease_duration. The leader's gate (`is_leading`) closes at
T + renew_deadline, computed from the clock whenever it is asked, so it closes on time even when
the renewing thread hangs in a request. The margin (lease_duration - renew_deadline) has to cover
the time to stop acting once the gate is closed: a running playbook is killed (the runner polls
the gate every half second) and status writes stop.

Expiry is judged by each replica's own monotonic clock from the moment it observed a record, never
by comparing the record's renewTime with the local wall clock, so clock skew between nodes does
not matter. The price, as in client-go: a freshly started candidate waits one full lease_duration
before it takes over a Lease whose holder died earlier.

Updates carry the resourceVersion read, so two candidates racing for a Lease cannot both win.
On graceful shutdown `stop()` releases the Lease (client-go's ReleaseOnCancel): it empties
holderIdentity, and candidates take an unheld Lease at once instead of waiting for expiry.
"""

import datetime
import logging
import threading
import time

LOG = logging.getLogger(__name__)


def _now():
    return datetime.datetime.now(datetime.timezone.utc)


def _micro(moment):
    if isinstance(moment, str):
        return moment
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _boottime():
    # CLOCK_BOOTTIME keeps counting while the machine is suspended; CLOCK_MONOTONIC does not, and
    # a leader that slept through its deadline must not believe it still leads.
    return time.clock_gettime(time.CLOCK_BOOTTIME)


default_clock = _boottime if hasattr(time, "CLOCK_BOOTTIME") else time.monotonic


class LeaderElector:
    def __init__(self, coordination_api, namespace, name, identity, lease_duration=30.0, renew_deadline=20.0,
                 retry_period=5.0, release_on_cancel=True, clock=default_clock):
        from kubernetes import client

        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("need lease_duration > renew_deadline > retry_period > 0, got %s, %s, %s"
                             % (lease_duration, renew_deadline, retry_period))
        self.api = coordination_api
        self.client = client
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.release_on_cancel = release_on_cancel
        self.clock = clock
        self.leading = threading.Event()
        self._stop = threading.Event()
        self._done = threading.Event()
        self._renewal_started = None      # clock() before the last successful acquire or renewal
        self._observed = None             # (resourceVersion, holder) last read
        self._observed_at = None          # clock() when that record was first read
        self._waiting_on = None

    # ------------------------------------------------------------------ the gate

    def is_leading(self):
        """True while this replica may act: holding the Lease and within the renew deadline."""
        started = self._renewal_started
        return self.leading.is_set() and started is not None and self.clock() < started + self.renew_deadline

    # ------------------------------------------------------------------ one attempt

    def _spec(self, acquire_time, transitions):
        return self.client.V1LeaseSpec(holder_identity=self.identity, lease_duration_seconds=int(round(self.lease_duration)),
                                       acquire_time=acquire_time, renew_time=_micro(_now()), lease_transitions=transitions)

    def _observe(self, lease):
        record = (lease.metadata.resource_version, lease.spec.holder_identity or "")
        if record != self._observed:
            self._observed, self._observed_at = record, self.clock()

    def try_acquire(self, timeout=None):
        """One attempt to acquire or renew: True when this process holds the Lease afterwards.

        Never raises: a failed attempt (conflict, timeout, apiserver down) is False and the
        caller's deadline decides what it means.
        """
        started = self.clock()
        timeout = self.retry_period if timeout is None else max(0.1, timeout)
        options = {"_request_timeout": timeout}
        exceptions = self.client.exceptions
        try:
            try:
                lease = self.api.read_namespaced_lease(self.name, self.namespace, **options)
            except exceptions.ApiException as exc:
                if exc.status != 404:
                    raise
                body = self.client.V1Lease(metadata=self.client.V1ObjectMeta(name=self.name, namespace=self.namespace),
                                           spec=self._spec(_micro(_now()), 0))
                self.api.create_namespaced_lease(self.namespace, body, **options)
                self._renewal_started = started
                return True
            self._observe(lease)
            spec = lease.spec
            holder = spec.holder_identity or ""
            if holder and holder != self.identity:
                duration = spec.lease_duration_seconds or self.lease_duration
                if self.clock() - self._observed_at < duration:
                    if self._waiting_on != holder:
                        self._waiting_on = holder
                        LOG.info("lease %s/%s is held by %s; standing by", self.namespace, self.name, holder)
                    return False
            ours = holder == self.identity
            transitions = (spec.lease_transitions or 0) + (0 if ours else 1)
            acquire_time = spec.acquire_time if ours and spec.acquire_time else _now()
            lease.spec = self._spec(_micro(acquire_time), transitions)
            updated = self.api.replace_namespaced_lease(self.name, self.namespace, lease, **options)
            self._observe(updated)
            self._renewal_started = started
            return True
        except Exception as exc:  # pylint: disable=broad-except
            # A renewing thread that died would leave the gate to close by the clock alone, but a
            # candidate that died would never lead: every failure is just a failed attempt.
            LOG.warning("lease %s/%s: attempt failed: %s", self.namespace, self.name, str(exc).splitlines()[0][:300])
            return False

    def _lost_to_other(self):
        holder = self._observed[1] if self._observed else ""
        return bool(holder) and holder != self.identity

    # ------------------------------------------------------------------ the loop

    def run(self, on_started, on_lost):
        """Block until leading (then call on_started), keep renewing; on_lost once the gate closed."""
        try:
            self._run(on_started, on_lost)
        finally:
            self._done.set()

    def _run(self, on_started, on_lost):
        while not self._stop.is_set() and not self.try_acquire():
            self._stop.wait(self.retry_period)
        if self._stop.is_set():
            return
        self.leading.set()
        LOG.info("lease %s/%s acquired by %s", self.namespace, self.name, self.identity)
        on_started()
        while True:
            deadline = self._renewal_started + self.renew_deadline
            if self._stop.wait(max(0.0, min(self.retry_period, deadline - self.clock()))):
                return
            left = deadline - self.clock()
            reason = None
            if left <= 0:
                reason = "no renewal within the renew deadline (%ss)" % self.renew_deadline
            elif not self.try_acquire(timeout=left) and self._lost_to_other():
                reason = "the lease is held by %s" % self._observed[1]
            if reason:
                self.leading.clear()
                LOG.error("lease %s/%s lost: %s; stopped acting", self.namespace, self.name, reason)
                on_lost()
                return

    def stop(self):
        """Stop renewing; with release_on_cancel, close the gate and hand the Lease over.

        The caller stops acting before this (main.py joins the batch thread first); the gate is
        closed here too so that nothing still running acts once the Lease may be someone else's.
        """
        self._stop.set()
        was_leading = self.leading.is_set()
        self.leading.clear()
        # A renewal still in flight must not land after the release and re-take the Lease.
        self._done.wait(self.retry_period + 1)
        if self.release_on_cancel and was_leading:
            self.release()

    def release(self):
        """Empty holderIdentity if this replica still holds the Lease; True when released."""
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=self.retry_period)
            if (lease.spec.holder_identity or "") != self.identity:
                return False
            now = _micro(_now())
            # A 1 s duration also lets candidates that do not know an empty holder means free
            # (older versions of this controller) take over after one second.
            lease.spec = self.client.V1LeaseSpec(holder_identity=None, lease_duration_seconds=1, acquire_time=now,
                                                 renew_time=now, lease_transitions=lease.spec.lease_transitions)
            self.api.replace_namespaced_lease(self.name, self.namespace, lease, _request_timeout=self.retry_period)
        except Exception as exc:  # pylint: disable=broad-except
            LOG.warning("lease %s/%s: release failed, the standby waits for expiry: %s", self.namespace, self.name,
                        str(exc).splitlines()[0][:300])
            return False
        LOG.info("lease %s/%s released by %s", self.namespace, self.name, self.identity)
        return True
