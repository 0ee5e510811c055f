"""Leader election on a coordination.k8s.io Lease, so two replicas never act at once.

The lease is taken when absent or expired and renewed every `renew_every` seconds; updates carry
the resourceVersion read, so two candidates racing for an expired lease cannot both win. A leader
that fails to renew before its lease runs out stops acting (`on_lost`), as client-go's does.
"""

import datetime
import threading
import time


def _now():
    return datetime.datetime.now(datetime.timezone.utc)


def _micro(moment):
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(self, coordination_api, namespace, name, identity, lease_seconds=30, renew_every=10):
        from kubernetes import client

        self.api = coordination_api
        self.client = client
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_seconds, self.renew_every = lease_seconds, renew_every
        self.leading = threading.Event()
        self._stop = threading.Event()

    def _spec(self, acquire_time):
        return self.client.V1LeaseSpec(holder_identity=self.identity, lease_duration_seconds=self.lease_seconds,
                                       acquire_time=acquire_time, renew_time=_micro(_now()))

    def try_acquire(self):
        """One attempt: True when this process holds the lease afterwards."""
        exceptions = self.client.exceptions
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace)
        except exceptions.ApiException as exc:
            if exc.status != 404:
                return False
            body = self.client.V1Lease(metadata=self.client.V1ObjectMeta(name=self.name, namespace=self.namespace),
                                       spec=self._spec(_micro(_now())))
            try:
                self.api.create_namespaced_lease(self.namespace, body)
                return True
            except exceptions.ApiException:
                return False
        spec = lease.spec
        renewed = spec.renew_time or spec.acquire_time
        expired = renewed is None or (_now() - renewed).total_seconds() > (spec.lease_duration_seconds or self.lease_seconds)
        if spec.holder_identity != self.identity and not expired:
            return False
        acquire_time = spec.acquire_time if spec.holder_identity == self.identity else _micro(_now())
        lease.spec = self._spec(acquire_time if isinstance(acquire_time, str) else _micro(acquire_time))
        try:
            self.api.replace_namespaced_lease(self.name, self.namespace, lease)
            return True
        except exceptions.ApiException:
            return False

    def run(self, on_started, on_lost):
        """Block until leading (then call on_started), keep renewing; on_lost if renewal fails."""
        while not self._stop.is_set() and not self.try_acquire():
            self._stop.wait(self.renew_every / 2.0)
        if self._stop.is_set():
            return
        self.leading.set()
        on_started()
        last_renewal = time.monotonic()
        while not self._stop.wait(self.renew_every):
            if self.try_acquire():
                last_renewal = time.monotonic()
            elif time.monotonic() - last_renewal > self.lease_seconds:
                self.leading.clear()
                on_lost()
                return

    def stop(self):
        self._stop.set()
