"""The few Kubernetes calls the controller makes, behind one small interface.

`KubeApi` wraps the official client; `FakeKube` keeps objects in memory for loop tests. Finalizer
changes carry the object's resourceVersion, so a stale view fails instead of overwriting.
"""

import base64
import copy
import threading

GROUP, VERSION, PLURAL = "bridge.dev", "v1alpha1", "bridgejobs"


class Conflict(Exception):
    """The object changed since it was read; the next event brings the new version."""


class Missing(Exception):
    """A named object, or the key it should hold, does not exist (yet): its message names both."""


def missing_key(namespace, name, key):
    return Missing("ConfigMap '%s' in namespace '%s' has no key '%s'" % (name, namespace, key))


def missing_config_map(namespace, name):
    return Missing("ConfigMap '%s' not found in namespace '%s'" % (name, namespace))


class KubeApi:
    def __init__(self, api_client):
        from kubernetes import client  # imported here so the pure modules need no Kubernetes client

        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.client = client

    def _patch(self, obj, body, status=False):
        meta = obj["metadata"]
        call = self.custom.patch_namespaced_custom_object_status if status else self.custom.patch_namespaced_custom_object
        try:
            return call(GROUP, VERSION, meta["namespace"], PLURAL, meta["name"], body)
        except self.client.exceptions.ApiException as exc:
            if exc.status == 409:
                raise Conflict(str(exc.reason))
            raise

    def set_finalizers(self, obj, finalizers):
        body = {"metadata": {"finalizers": list(finalizers), "resourceVersion": obj["metadata"]["resourceVersion"]}}
        return self._patch(obj, body)

    def patch_status(self, obj, status):
        return self._patch(obj, {"status": status}, status=True)

    def read_secret(self, namespace, name):
        secret = self.core.read_namespaced_secret(name, namespace)
        return dict((k, base64.b64decode(v).decode("utf-8")) for k, v in (secret.data or {}).items())

    def read_config_map_key(self, namespace, name, key):
        try:
            data = self.core.read_namespaced_config_map(name, namespace).data or {}
        except self.client.exceptions.ApiException as exc:
            if exc.status == 404:
                raise missing_config_map(namespace, name)
            raise
        if key not in data:
            raise missing_key(namespace, name, key)
        return data[key]

    def event(self, obj, reason, message, kind="Normal"):
        meta = obj["metadata"]
        body = self.client.CoreV1Event(
            metadata=self.client.V1ObjectMeta(generate_name="%s." % meta["name"], namespace=meta["namespace"]),
            involved_object=self.client.V1ObjectReference(
                api_version="%s/%s" % (GROUP, VERSION), kind="BridgeJob", name=meta["name"],
                namespace=meta["namespace"], uid=meta["uid"], resource_version=meta.get("resourceVersion")),
            reason=reason, message=message[:1000], type=kind, source=self.client.V1EventSource(component="bridge-controller"))
        self.core.create_namespaced_event(meta["namespace"], body)


class FakeKube:
    """In-memory objects with resourceVersions; calls are recorded for assertions."""

    def __init__(self, secrets=None, config_maps=None):
        self.objects = {}
        self.secrets = secrets or {}
        self.config_maps = config_maps or {}
        self.events = []
        self.status_patches = 0
        self._version = 0
        self._lock = threading.Lock()
        self.listeners = []

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
        with self._lock:
            obj = copy.deepcopy(obj)
            obj["metadata"].setdefault("finalizers", [])
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
            merged = dict(current.get("status") or {})
            for key, value in status.items():
                if value is None:
                    merged.pop(key, None)  # merge-patch semantics, as the apiserver applies them
                else:
                    merged[key] = copy.deepcopy(value)
            current["status"] = merged
            return self._store(current, "MODIFIED")

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
