"""The probe: each backend object's live status, read from its backend on an interval.

For every object in the catalog the probe builds the collection's client in this process (the
object's connection, its Secret's credentials, its CA) and asks `capacity()`, which makes a fixed
number of requests whatever the number of BridgeJobs; the answer (manager, version, API version,
queues) and a Ready condition go to the object's /status with a merge patch. An object is probed
as soon as it appears or its spec changes (a new generation), then every probeIntervalSeconds.

A write happens only when the status changes, lastProbeTime aside. lastProbeTime is written with a
change, and otherwise refreshed by the probe that finds it at least one interval old: one write per
interval and object at most, and none when an early probe (the object seen again after a restart
of the controller) finds what the status says already.

Probes run on a small pool of their own threads, with a short client timeout: a backend that does
not answer never holds up BridgeJobs or the other backends' probes. With leader election only the
leader probes (main.py starts the probe with the rest of the work; `may_act` is checked before
each write too). Namespaced BridgeBackends are the tenants': the operator's policy (policy.py)
refuses one before any request is sent. ClusterBridgeBackends are the platform team's.
"""

import calendar
import concurrent.futures
import logging
import threading
import time

from bridge_controller import backend_objects
from bridge_controller.authority import NO_CREDENTIALS, Authority, Refused
from bridge_controller.backend_objects import CLUSTER, READY, capacity_status, connection_of, kind_of, probe_interval, ref_name
from bridge_controller.backends import BACKENDS, credential_keys, namespaced
from bridge_controller.collection import module_utils
from bridge_controller.kube import Missing
from bridge_controller.runner import ca_file
from bridge_controller.status import now_rfc3339, set_condition

LOG = logging.getLogger(__name__)
_errors = module_utils("_errors")

PROBED = "Probed"
SECRET_NOT_FOUND = "SecretNotFound"
SECRET_NOT_READABLE = "SecretNotReadable"
CA_NOT_FOUND = "CAConfigMapNotFound"
NO_PROBE_CREDENTIALS = "NoProbeCredentials"
PROBE_FAILED = "ProbeFailed"
# What the probe's client waits for one answer, and how often it retries a read: the next probe is
# the real retry, and a probe must not outlast its interval by much.
TIMEOUT = 10.0
RETRIES = 1
# Fields of the status that only a successful probe writes (kept, as last seen, while it fails).
CAPACITY_FIELDS = ("manager", "version", "apiVersion", "queueCount", "queues")


def rfc3339_seconds(text):
    """Seconds since the epoch of an RFC 3339 time as the status holds it ("2026-12-03T18:00:00Z")."""
    return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ"))


class NotProbed(Exception):
    """The probe did not ask the backend: (status, reason, message) of its Ready condition say why."""

    def __init__(self, status, reason, message):
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


class Prober:
    """Probes the catalog's backend objects and writes their status.

    `kube` is the controller's KubeApi (read_secret, read_config_map_key, patch_backend_status,
    event); `policy` the operator's Policy; `clients(type, get)` makes a collection client (the
    registry's from_options by default; tests pass a stub). `kubeconfig` is the controller's own
    (--kubeconfig), which a kubernetes backend without a Secret is reached with, as the playbooks
    are (runner.py); `work_dir` holds the CA files.
    """

    def __init__(self, catalog, kube, policy, work_dir, authorizer=None, clients=None, may_act=None,
                 workers=4, clock=time.monotonic, now=now_rfc3339, wall=time.time):
        self.catalog = catalog
        self.kube = kube
        self.policy = policy
        self.work_dir = work_dir
        self.authority = authorizer or Authority(kube)
        self.clients = clients or (lambda backend_type, get: BACKENDS[backend_type].from_options(get))
        self.may_act = may_act or (lambda: True)
        self.clock, self.now, self.wall = clock, now, wall
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bridge-probe")
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._due = {}          # ref name -> (kind, namespace, name, generation, monotonic time due)
        self._running = set()   # ref names being probed now
        # Per ref name: {"seconds": last probe's duration, "ok": n, "failed": n, "labels": ...}.
        self._stats = {}
        catalog.subscribe(self.observe)

    # ---------------------------------------------------------------- scheduling
    def observe(self, event, obj):
        """The catalog's subscriber: a new object or a new generation is due at once; a status
        write (same generation) changes nothing; a deleted object is forgotten."""
        key = ref_name(obj)
        meta = obj.get("metadata") or {}
        with self._lock:
            if event == "DELETED":
                self._due.pop(key, None)
                self._stats.pop(key, None)
                return
            known = self._due.get(key)
            generation = meta.get("generation")
            if known is not None and known[3] == generation:
                return
            self._due[key] = (kind_of(obj), meta.get("namespace"), meta.get("name"), generation, self.clock())
        self._wake.set()

    def run(self, stopping):
        """Probe what is due until `stopping` is set."""
        while not stopping.is_set():
            now = self.clock()
            ready, next_due = [], None
            with self._lock:
                for key, (kind, namespace, name, generation, due) in self._due.items():
                    if key in self._running:
                        continue
                    if due <= now:
                        self._running.add(key)
                        ready.append((key, kind, namespace, name))
                    elif next_due is None or due < next_due:
                        next_due = due
            for item in ready:
                self.pool.submit(self._probe_due, *item)
            self._wake.wait(1.0 if next_due is None else max(0.05, min(next_due - now, 1.0)))
            self._wake.clear()
        self.pool.shutdown(wait=False)

    def _probe_due(self, key, kind, namespace, name):
        started = self.clock()
        try:
            obj = self.catalog.backend(kind, namespace, name)
            if obj is not None and self.may_act():
                self.probe(obj)
        except Exception:  # pylint: disable=broad-except
            LOG.exception("probe of %s failed", key)
        finally:
            with self._lock:
                self._running.discard(key)
                entry = self._due.get(key)
                if entry is not None:
                    obj = self.catalog.backend(kind, namespace, name)
                    interval = probe_interval(obj) if obj is not None else backend_objects.DEFAULT_PROBE_INTERVAL
                    # A new generation seen while probing stays due at once.
                    if entry[4] <= started:
                        self._due[key] = entry[:4] + (started + interval,)
            self._wake.set()

    # ---------------------------------------------------------------- one probe
    def probe(self, obj):
        """Probe `obj` now and write its status if it changed; returns the patch written, or None."""
        started = self.clock()
        stamp = self.now()
        capacity = None
        try:
            capacity = self._capacity(obj)
            ready = ("True", PROBED, self._summary(capacity))
        except NotProbed as refused:
            ready = (refused.status, refused.reason, refused.message)
        except _errors.BridgeError as exc:
            ready = ("False", type(exc).__name__, str(exc))
        except Exception as exc:  # pylint: disable=broad-except
            # A bug or a library's own error: named by its type; its text may quote anything.
            LOG.warning("probe of %s failed unexpectedly", ref_name(obj), exc_info=True)
            ready = ("False", PROBE_FAILED, "the probe failed with %s" % type(exc).__name__)
        seconds = self.clock() - started
        self._count(obj, ready[0] == "True", seconds)
        return self._write(obj, ready, capacity, stamp)

    def _capacity(self, obj):
        connection = connection_of(obj, None)
        backend_type = connection["type"]
        if backend_type not in BACKENDS:
            raise NotProbed("False", "UnknownType", "spec.type: %r is no backend this controller knows" % (backend_type,))
        if kind_of(obj) != CLUSTER:
            refused = self.policy.backend_refusal(obj.get("spec") or {}, connection["namespace"], where="spec", kind="BridgeBackend")
            if refused:
                raise NotProbed("False", *refused)
        credentials = self._credentials(obj, connection)
        options = {
            "url": connection["url"], "api_version": connection["api_version"], "iam_url": connection["iam_url"],
            "validate_certs": connection["validate_certs"], "timeout": TIMEOUT, "retries": RETRIES,
        }
        own_cluster = False
        if namespaced(backend_type):
            options["namespace"] = connection["job_namespace"] or connection["namespace"]
            if not credentials:
                credentials = self._job_credentials(obj, connection)
                own_cluster = True
        if connection["ca"]:
            options["ca_path"] = self._ca(connection)
        options.update((option, credentials[key]) for option, key in credential_keys(backend_type) if credentials.get(key))
        client = self.clients(backend_type, options.get)
        if kind_of(obj) != CLUSTER and not own_cluster:
            # A tenant's URL: every request the probe sends is checked, as the playbooks' are. The
            # controller's own cluster (its kubeconfig, the Job ServiceAccount's token) is no tenant's.
            client.limit_urls(self.policy.allow_list)
        try:
            return client.capacity()
        finally:
            try:
                client.close()
            except Exception:  # pylint: disable=broad-except
                LOG.debug("closing the probe's client failed", exc_info=True)

    def _credentials(self, obj, connection):
        """The data of the Secret the probe uses ({} for none); NotProbed when it cannot be had."""
        spec = obj.get("spec") or {}
        name, namespace = connection["secret"], connection["secret_namespace"]
        if kind_of(obj) == CLUSTER and name and not namespace:
            probe_ref = spec.get("probeCredentialsSecretRef")
            if not probe_ref:
                raise NotProbed("Unknown", NO_PROBE_CREDENTIALS, (
                    "spec.credentialsSecretRef names the Secret %r of each BridgeJob's namespace and "
                    "spec.probeCredentialsSecretRef names none for the probe" % name))
            name, namespace = probe_ref["name"], probe_ref["namespace"]
        if not name:
            return {}
        if kind_of(obj) != CLUSTER:
            # A tenant's object: used only while its author may read that Secret themselves.
            try:
                self.authority.check_probe(obj, connection)
            except Refused as exc:
                raise NotProbed("False", exc.reason, str(exc))
        try:
            data = self.kube.read_secret(namespace, name)
        except Exception as exc:  # pylint: disable=broad-except
            status = getattr(exc, "status", None)
            if isinstance(exc, (Missing, KeyError)) or status == 404:
                raise NotProbed("False", SECRET_NOT_FOUND, "Secret '%s' not found in namespace '%s'" % (name, namespace))
            raise NotProbed("False", SECRET_NOT_READABLE, "Secret '%s' in namespace '%s' could not be read (%s)" % (
                name, namespace, "HTTP %s" % status if status else type(exc).__name__))
        if connection["type"] == "kubernetes" and not (data.get("kubeconfig") or "").strip():
            raise NotProbed("False", NO_CREDENTIALS, "Secret '%s' in namespace '%s' has no 'kubeconfig' key with a "
                            "kubeconfig; a kubernetes backend runs with that kubeconfig only, never with the "
                            "controller's own credentials" % (name, namespace))
        if connection["type"] == "kubernetes" and kind_of(obj) != CLUSTER:
            refused = self.policy.kubeconfig_refusal(data["kubeconfig"])
            if refused:
                raise NotProbed("False", *refused)
        return data

    def _job_credentials(self, obj, connection):
        """A kubernetes backend without a Secret is probed as its BridgeJobs run: with a token of the
        operator's Job ServiceAccount of the namespace its Jobs run in, never with the controller's
        own identity."""
        namespace = connection["job_namespace"] or connection["namespace"]
        if namespace is None:
            raise NotProbed("Unknown", NO_PROBE_CREDENTIALS, (
                "a ClusterBridgeBackend of type kubernetes without credentialsSecretRef or namespace runs each "
                "BridgeJob's Job as the Job ServiceAccount of the BridgeJob's namespace; name spec.namespace to have "
                "it probed as that namespace's"))
        try:
            return self.authority.job_credentials(namespace)
        except Refused as exc:
            raise NotProbed("False", exc.reason, str(exc))

    def _ca(self, connection):
        ca = connection["ca"]
        try:
            pem = self.kube.read_config_map_key(connection["ca_namespace"], ca["name"], ca["key"])
        except Missing as exc:
            raise NotProbed("False", CA_NOT_FOUND, "spec.caConfigMapRef: %s" % exc)
        return ca_file(self.work_dir, pem)

    @staticmethod
    def _summary(capacity):
        version = capacity.get("version")
        text = "%s%s" % (capacity.get("manager") or "the backend", " %s" % version if version else "")
        if capacity.get("api_version"):
            text += " (API %s)" % capacity["api_version"]
        queues = capacity.get("queues") or []
        usable = sum(1 for queue in queues if queue.get("usable"))
        return "%s answered: %d queue%s, %d usable" % (text, len(queues), "" if len(queues) == 1 else "s", usable)

    # ---------------------------------------------------------------- the status
    def desired(self, obj, ready, capacity, stamp):
        """The status after a probe: Ready and observedGeneration; what capacity() answered on
        success; on failure, what the last success found, unless the spec changed since (then it
        described another connection)."""
        current = obj.get("status") or {}
        generation = (obj.get("metadata") or {}).get("generation")
        status, reason, message = ready
        desired = {"observedGeneration": generation, "lastProbeTime": stamp,
                   "conditions": set_condition([c for c in current.get("conditions") or [] if c.get("type") == READY],
                                               READY, status, reason, message[:32768], stamp, generation)}
        if capacity is not None:
            desired.update((k, v) for k, v in capacity_status(capacity).items() if v is not None)
        elif current.get("observedGeneration") == generation:
            desired.update((k, current[k]) for k in CAPACITY_FIELDS if k in current)
        return desired

    def _write(self, obj, ready, capacity, stamp):
        current = obj.get("status") or {}
        desired = self.desired(obj, ready, capacity, stamp)
        changed = _without_probe_time(current) != _without_probe_time(desired)
        if not changed and not self._probe_time_stale(obj, current):
            return None
        patch = dict(desired)
        patch.update((key, None) for key in current if key not in desired)  # merge patch: null removes
        if not changed:
            patch = {"lastProbeTime": stamp}
        if not self.may_act():
            return None
        self.kube.patch_backend_status(obj, patch)
        self._event(obj, current, desired)
        return patch

    def _probe_time_stale(self, obj, current):
        last = current.get("lastProbeTime")
        if not last:
            return True
        try:
            return self.wall() - rfc3339_seconds(last) >= probe_interval(obj)
        except ValueError:
            return True

    def _event(self, obj, current, desired):
        before = _ready_status(current)
        after = _ready_status(desired)
        if before == after:
            return
        condition = [c for c in desired["conditions"] if c["type"] == READY][0]
        if after == "True":
            reason, kind = "BackendReady", "Normal"
        else:
            reason, kind = "BackendNotReady", "Warning"
        try:
            self.kube.event(obj, reason, "%s: %s" % (condition["reason"], condition["message"]), kind)
        except Exception as exc:  # pylint: disable=broad-except
            LOG.warning("event for %s not written: %s", ref_name(obj), exc)

    # ---------------------------------------------------------------- metrics
    def _count(self, obj, ok, seconds):
        key = ref_name(obj)
        with self._lock:
            stats = self._stats.setdefault(key, {"ok": 0, "failed": 0})
            stats["ok" if ok else "failed"] += 1
            stats["seconds"] = seconds

    def metrics_lines(self):
        """Prometheus lines per backend object: bridge_backend_ready and bridge_backend_queue_pending
        from the catalog (what its status says, on every replica), bridge_backend_probe_seconds and
        bridge_backend_probes_total from this replica's probes."""
        lines = []
        with self._lock:
            stats = dict((key, dict(value)) for key, value in self._stats.items())
        for obj in sorted(self.catalog.backends(), key=ref_name):
            labels = _labels(obj)
            ready = backend_objects.ready_of(obj)
            if ready is not None:
                lines.append("bridge_backend_ready{%s} %d" % (labels, 1 if ready else 0))
            mine = stats.get(ref_name(obj))
            if mine is not None:
                lines.append("bridge_backend_probe_seconds{%s} %.3f" % (labels, mine.get("seconds", 0.0)))
                for result in ("ok", "failed"):
                    lines.append('bridge_backend_probes_total{%s,result="%s"} %d' % (labels, result, mine[result]))
            for queue in (obj.get("status") or {}).get("queues") or []:
                if queue.get("pending") is not None:
                    lines.append('bridge_backend_queue_pending{%s,queue="%s"} %d' % (
                        labels, _escape(queue.get("name") or ""), queue["pending"]))
        return lines


def _labels(obj):
    meta = obj.get("metadata") or {}
    return 'kind="%s",namespace="%s",name="%s",type="%s"' % (
        kind_of(obj), _escape(meta.get("namespace") or ""), _escape(meta.get("name") or ""),
        _escape((obj.get("spec") or {}).get("type") or ""))


def _escape(value):
    """A Prometheus label value: backslash, double quote and newline escaped."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _ready_status(status):
    for condition in status.get("conditions") or []:
        if condition.get("type") == READY:
            return condition.get("status")
    return None


def _without_probe_time(status):
    """A status to compare, lastProbeTime aside (the Ready condition's lastTransitionTime moves only
    with a flip: set_condition keeps it)."""
    return dict((key, value) for key, value in status.items() if key != "lastProbeTime")
