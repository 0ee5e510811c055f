"""Test doubles of the controller's edges: Kubernetes in memory, and a runner that answers like the playbooks.

`FakeKube` is both the apiserver (writes, with resourceVersions and merge-patch semantics) and the
watcher's cache (`get`): its listeners see each change after it is stored, as the watcher's
handler sees an event after its cache took it.
"""

import copy
import threading

from bridge_controller.authority import AUTHOR
from bridge_controller.kube import Conflict, missing_config_map, missing_key


def merge_patched(target, patch):
    """`target` with a JSON merge patch (RFC 7386) applied, as the apiserver applies one: objects
    merge key by key at every depth, null deletes a key, anything else replaces."""
    merged = dict(target)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_patched(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


class FakeKube:
    """In-memory objects with resourceVersions; calls are recorded for assertions."""

    def __init__(self, secrets=None, config_maps=None):
        self.objects = {}
        self.secrets = secrets or {}
        self.config_maps = config_maps or {}
        self.events = []
        self.status_patches = 0       # patch_status calls, refused ones too
        self.reads = 0
        self.skipped = 0              # as the watcher's: objects it could not decode (none in memory)
        self._version = 0
        # Re-entrant: listeners run under it and may read back (get) what was just stored.
        self._lock = threading.RLock()
        self.listeners = []
        # SubjectAccessReviews: every question asked, and the (user, verb, resource, namespace) denied.
        self.author = "tester"
        self.reviews = []
        self.denied = set()
        self.service_accounts = {"bridge-runner"}

    def access_review(self, user, groups, verb, group, resource, namespace, name=None):
        self.reviews.append((user, tuple(groups), verb, group, resource, namespace, name))
        return (user, verb, resource, namespace) not in self.denied

    def service_account_token(self, namespace, name, seconds):
        if name not in self.service_accounts:
            raise LookupError("its token cannot be had (HTTP 404: no such ServiceAccount)")
        return "sa-token-%s-%s" % (namespace, name)

    def own_cluster(self):
        return "https://127.0.0.1:6443", None

    def get(self, key):
        """The stored object, as the watcher's cache holds it (a copy: the cache's objects are not edited)."""
        with self._lock:
            obj = self.objects.get(key)
            return copy.deepcopy(obj) if obj is not None else None

    def keys(self):
        with self._lock:
            return list(self.objects)

    def _key(self, obj):
        return "%s/%s" % (obj["metadata"]["namespace"], obj["metadata"]["name"])

    def _store(self, obj, kind):
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)
        self.objects[self._key(obj)] = obj
        for listener in self.listeners:
            listener(kind, copy.deepcopy(obj))
        return copy.deepcopy(obj)

    def create(self, obj):
        """Stored as admission stores it: with its author recorded (deploy/author-mutation/) unless
        the object names one."""
        with self._lock:
            obj = copy.deepcopy(obj)
            obj["metadata"].setdefault("finalizers", [])
            obj["metadata"].setdefault("annotations", {}).setdefault(AUTHOR, self.author)
            return self._store(obj, "ADDED")

    def delete(self, key):
        with self._lock:
            obj = self.objects[key]
            if obj["metadata"]["finalizers"]:
                obj["metadata"]["deletionTimestamp"] = "2026-11-30T00:00:00Z"
                return self._store(obj, "MODIFIED")
            del self.objects[key]
            for listener in self.listeners:
                listener("DELETED", copy.deepcopy(obj))
            return None

    def update_spec(self, key, **changes):
        with self._lock:
            obj = self.objects[key]
            obj["spec"].update(changes)
            obj["metadata"]["generation"] = obj["metadata"].get("generation", 1) + 1
            return self._store(obj, "MODIFIED")

    def set_finalizers(self, obj, finalizers):
        with self._lock:
            current = self.objects.get(self._key(obj))
            if current is None or current["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]:
                raise Conflict("stale")
            current["metadata"]["finalizers"] = list(finalizers)
            if not finalizers and current["metadata"].get("deletionTimestamp"):
                del self.objects[self._key(obj)]
                for listener in self.listeners:
                    listener("DELETED", copy.deepcopy(current))
                return None
            return self._store(current, "MODIFIED")

    def patch_status(self, obj, status):
        with self._lock:
            current = self.objects.get(self._key(obj))
            if current is None:
                return None
            self.status_patches += 1
            if current["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]:
                raise Conflict("stale")  # the resourceVersion precondition KubeApi.patch_status sends
            current["status"] = merge_patched(current.get("status") or {}, status)
            return self._store(current, "MODIFIED")

    def read(self, obj):
        """The stored object, read from the apiserver (counted: the writer reads only after a conflict)."""
        with self._lock:
            self.reads += 1
            return self.get(self._key(obj))

    def read_secret(self, namespace, name):
        return dict(self.secrets["%s/%s" % (namespace, name)])

    def read_config_map_key(self, namespace, name, key):
        data = self.config_maps.get("%s/%s" % (namespace, name))
        if data is None:
            raise missing_config_map(namespace, name)
        if key not in data:
            raise missing_key(namespace, name, key)
        return data[key]

    def event(self, obj, reason, message, kind="Normal"):
        self.events.append((self._key(obj), reason, message, kind))


class FakeRunner:
    """Answers like the playbooks would, from an in-memory backend; records every call."""

    def __init__(self, backend, wallclock=None):
        self.backend = backend
        self.calls = []
        # The module's time of day, for retries' backoffs (the real one when None).
        self.wallclock = wallclock

    def run(self, action, backend, credentials, jobs=None, identities=None, wait_timeout=120, output_lines=None,
            output_secrets=None, output_follow=None):
        self.calls.append((action, backend.get("url"), len(jobs or identities or ())))
        self.output_lines = output_lines
        self.output_follow = output_follow
        from ansible_collections.bridge.hpc.plugins.module_utils import _jobs
        from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
        from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec

        if action == "submit":
            # Like bridge.hpc.jobs: each item is validated on its own.
            specs, refused = [], {}
            for job in jobs:
                try:
                    specs.append(normalize_spec(job))
                except SpecError as exc:
                    refused[job["identity"]] = {"identity": job["identity"], "changed": False, "failed": True,
                                                "error": exc.to_dict(), "msg": str(exc)}
            clock = {"wallclock": self.wallclock} if self.wallclock else {}
            done = dict((r["identity"], r) for r in _jobs.ensure_many_present(self.backend, specs, **clock))
            done.update(refused)
            return {"results": [done[job["identity"]] for job in jobs]}
        if action == "poll":
            found, missing, ambiguous = _jobs.read_many(self.backend, identities)
            # Like bridge.hpc.job_info's output_lines: the output of the finished jobs asked for, and
            # of the running ones of output_follow.
            for identity, lines in (output_lines or {}).items():
                if identity in found:
                    output = {"tail_lines": lines, "follow": identity in (output_follow or ())}
                    found[identity].update(_jobs.read_output(self.backend, found[identity], {"output": output},
                                                             secrets=(output_secrets or {}).get(identity) or ()))
            result = {"jobs": found, "missing": missing, "requests": 1}
            if ambiguous:
                result["refused"] = dict((identity, error.to_dict()) for identity, error in ambiguous.items())
            return result
        limits = dict((job["identity"], (job.get("retry") or {}).get("limit")) for job in jobs)
        return {"results": _jobs.ensure_many_absent(self.backend, [job["identity"] for job in jobs], wait=True,
                                                    wait_timeout=wait_timeout, poll_interval=0.01, limits=limits)}


class FakeCatalog:
    """The Catalog's interface (controller/bridge_controller/catalog.py) over in-memory backend
    objects and namespace labels; `put` and `remove` call the subscribers as the watch would."""

    def __init__(self, backends=(), namespaces=None):
        self.objects = {}
        self.namespaces = dict(namespaces or {})
        self.subscribers = []
        for obj in backends:
            self.objects[self._key(obj)] = copy.deepcopy(obj)

    @staticmethod
    def _key(obj):
        meta = obj["metadata"]
        namespaced = obj["kind"] != "ClusterBridgeBackend"
        return (obj["kind"], meta.get("namespace", "") if namespaced else "", meta["name"])

    def backend(self, kind, namespace, name):
        obj = self.objects.get((kind, "" if kind == "ClusterBridgeBackend" else namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def backends(self):
        return [copy.deepcopy(obj) for obj in self.objects.values()]

    def namespace_labels(self, name):
        labels = self.namespaces.get(name)
        return dict(labels) if labels is not None else None

    def serves(self, name):
        return name not in getattr(self, "unserved", ())

    def subscribe_namespaces(self, callback):
        pass  # no --namespace-selector here: no namespace starts or stops being served

    def subscribe(self, callback):
        self.subscribers.append(callback)

    def put(self, obj):
        kind = "MODIFIED" if self._key(obj) in self.objects else "ADDED"
        self.objects[self._key(obj)] = copy.deepcopy(obj)
        for callback in self.subscribers:
            callback(kind, copy.deepcopy(obj))

    def remove(self, obj):
        self.objects.pop(self._key(obj), None)
        for callback in self.subscribers:
            callback("DELETED", copy.deepcopy(obj))


def queue_record(name, **values):
    """A capacity record (design-24 section 1) in the camelCase of a backend object's status."""
    record = {"name": name, "state": "UP", "usable": True, "default": False, "maxTimeMinutes": None, "maxNodes": None,
              "cpusPerNode": None, "memoryMbPerNode": None, "gpusPerNode": None, "gpuTypes": [], "features": [],
              "qubits": None, "pending": 0, "running": 0}
    record.update(values)
    return record


def backend_object(name, kind="BridgeBackend", namespace="ns", spec=None, ready=True, queues=(), labels=None):
    """A BridgeBackend (or ClusterBridgeBackend) as the probe leaves it; ready None = never probed."""
    body = {"type": "slurm", "url": "http://%s:6820" % name, "credentialsSecretRef": {"name": "creds"}}
    body.update(spec or {})
    meta = {"name": name, "labels": dict(labels or {})}
    if kind == "BridgeBackend":
        meta["namespace"] = namespace
    obj = {"apiVersion": "bridge.dev/v1alpha1", "kind": kind, "metadata": meta, "spec": body, "status": {}}
    if ready is not None:
        obj["status"] = {"conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                         "reason": "Probed" if ready else "ConnectionFailed",
                                         "message": "" if ready else "connection refused"}],
                         "queues": [queue_record(q) if isinstance(q, str) else q for q in queues]}
    return obj
