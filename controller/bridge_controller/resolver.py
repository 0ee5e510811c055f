"""What a BridgeJob names in Kubernetes, read when its batch runs: the backend's connection (with
the CA bundle of caConfigMapRef), the credentials Secret, and the script of scriptFrom.

The backend is the BridgeJob's inline spec.backend, or the BridgeBackend / ClusterBridgeBackend it
names (spec.backendRef, or the one placement chose), looked up in the catalog's cache (no request)
each time: `backend(obj)` gives the same keys for all three, with where the Secret and the CA
ConfigMap are read, so what follows (batches, Secret reads, credential checks) does not tell
them apart.

Nothing is cached: a Secret or ConfigMap fixed after a failure is read by the next attempt, and a
token rotated in the Secret (one that expires) is handed to the next batch and the next poll. That
costs one GET of the Secret per runner call, whatever the number of CRs in it; the controller may
only `get` Secrets (no list, no watch), so there is no watch to keep a cache fresh with.
"""

from bridge_controller import backend_objects
from bridge_controller.authority import as_job_account
from bridge_controller.backends import namespaced
from bridge_controller.kube import Missing
from bridge_controller.policy import NAMESPACE_NOT_ALLOWED
from bridge_controller.runner import OPERATOR_CHOSEN
from bridge_controller.spec import backend_of, backend_ref, ref_key

# The parts of spec.backend the runner connects with; the credentials go apart, through the pipe.
CONNECTION_FIELDS = ("type", "url", "api_version", "iam_url", "validate_certs", "login")
# Why a BridgeJob naming a backend object waits (the Submitted condition's reason): retried, never failed.
BACKEND_NOT_FOUND = "BackendNotFound"
NAMESPACE_UNKNOWN = "NamespaceNotFound"
# Why a poll, cancel or retry sends nothing (BackendReachable's reason): url_change.
URL_CHANGED = "BackendURLChanged"


class BackendNotFound(Missing):
    """The backend object a BridgeJob names is not (yet) in the catalog; `ref` is its (kind, namespace, name)."""

    def __init__(self, ref, message):
        super().__init__(message)
        self.ref = ref


def describe(ref):
    kind, namespace, name = ref
    return "%s '%s'%s" % (kind, name, " in namespace '%s'" % namespace if namespace else "")


class Resolver:
    def __init__(self, kube, catalog=None):
        """`catalog` is the cache of backend objects (catalog.py); None: there are none, and a
        BridgeJob naming one waits for it."""
        self.kube = kube
        self.catalog = catalog

    def backend_object(self, obj):
        """(ref, object) of the backend object `obj` runs on, (None, None) for an inline spec.backend;
        BackendNotFound when the catalog does not hold it."""
        ref = backend_ref(obj)
        if ref is None:
            return None, None
        key = ref_key(ref, obj["metadata"].get("namespace"))
        found = self.catalog.backend(*key) if self.catalog is not None else None
        if found is None:
            raise BackendNotFound(key, "%s not found" % describe(key))
        return key, found

    def backend(self, obj):
        """spec.backend_of's keys for any of the three forms, plus secret_namespace and ca_namespace."""
        _ref, found = self.backend_object(obj)
        namespace = obj["metadata"].get("namespace")
        if found is not None:
            return backend_objects.connection_of(found, namespace)
        return dict(backend_of(obj), secret_namespace=namespace, ca_namespace=namespace, secret_owner="tenant")

    def unresolved(self, obj):
        """(reason, message, (kind, namespace, name)) when the backend object `obj` names cannot be
        used yet (not there, or its namespaceSelector cannot be judged: the namespace's labels are
        not known yet); None when it can, or `obj` names none."""
        try:
            ref, found = self.backend_object(obj)
        except BackendNotFound as exc:
            return BACKEND_NOT_FOUND, str(exc), exc.ref
        if found is not None and has_namespace_selector(found) and self._labels(obj) is None:
            return NAMESPACE_UNKNOWN, "the labels of namespace '%s' are not known yet, so %s cannot admit it" % (
                obj["metadata"].get("namespace"), describe(ref)), ref
        return None

    def refusal(self, obj, policy):
        """(reason, message) when the backend `obj` runs on is one it may not use: its inline
        spec.backend or its BridgeBackend's spec is outside the operator's `policy` (both are
        tenants'), or its ClusterBridgeBackend's namespaceSelector does not admit its namespace.
        None when it may, or when that cannot be judged yet (`unresolved`)."""
        try:
            ref, found = self.backend_object(obj)
        except BackendNotFound:
            return None
        if found is None:
            return policy.refusal(obj)
        return self.object_refusal(found, obj["metadata"].get("namespace"), policy, ref)

    def object_refusal(self, found, namespace, policy, ref=None):
        """object `found` used by a BridgeJob of `namespace`: refusal's (reason, message) or None."""
        if found.get("kind") == "ClusterBridgeBackend":
            labels = self.catalog.namespace_labels(namespace)
            if labels is None and has_namespace_selector(found):
                return None
            why = backend_objects.admits(found, labels)
            return (NAMESPACE_NOT_ALLOWED, "namespace '%s' may not use %s: %s" % (
                namespace, describe(ref) if ref else backend_objects.ref_name(found), why)) if why else None
        where = "%s: spec" % describe(ref) if ref else "%s: spec" % backend_objects.ref_name(found)
        return policy.backend_refusal((found.get("spec") or {}), namespace, where)

    def _labels(self, obj):
        return self.catalog.namespace_labels(obj["metadata"].get("namespace")) if self.catalog is not None else None

    def status_backend(self, obj):
        """status.backend: the type, and the backend object's kind and name when there is one, and
        the url its job was submitted to once recorded (pinned_url); None when not known yet (not
        placed)."""
        backend = self._status_backend(obj)
        recorded = ((obj.get("status") or {}).get("backend") or {}).get("url")
        return dict(backend or {}, url=recorded) if recorded else backend

    def _status_backend(self, obj):
        spec = obj.get("spec") or {}
        if spec.get("backend"):
            return {"type": spec["backend"].get("type")}
        ref = backend_ref(obj)
        if ref is None:
            return None
        placed = (obj.get("status") or {}).get("placement") or {}
        if placed.get("type") and not spec.get("backendRef"):
            return dict(ref, type=placed["type"])
        try:
            _key, found = self.backend_object(obj)
        except BackendNotFound:
            return dict(ref)
        return dict(ref, type=(found.get("spec") or {}).get("type"))

    @staticmethod
    def url_change(obj, backend):
        """Why nothing may be sent for `obj` over the resolved `backend` (a poll, cancel or retry):
        its job was submitted to status.backend.url and `backend` names another URL. Its job id
        means something on that manager only, and its Secret's credential is meant for it; asking
        another one mixes ids and hands the credential elsewhere. None when the URL is the same, or
        none is recorded (not submitted yet)."""
        recorded = ((obj.get("status") or {}).get("backend") or {}).get("url")
        if not recorded or recorded == backend.get("url"):
            return None
        return ("the job was submitted to %s, and its backend now names %s: nothing is sent there for it; "
                "set the backend's url back to %s to go on (a deletion waits for that too: its cancel is not sent elsewhere)" % (
                    recorded, backend.get("url") or "no URL", recorded))

    def connection(self, obj, backend=None):
        """What the runner connects with (the credentials apart): the same for a backend key's CRs."""
        backend = backend or self.backend(obj)
        connection = dict((k, v) for k, v in backend.items() if k in CONNECTION_FIELDS)
        if connection.get("login") is None:
            connection.pop("login", None)   # a Slurm login node is the only field that is there or not
        if namespaced(backend["type"]):
            connection["namespace"] = backend["job_namespace"] or backend["namespace"]
        ref, _found = self.backend_object(obj)
        if (ref is not None and ref[0] == "ClusterBridgeBackend") or as_job_account(backend):
            # The platform team's URL, or the controller's own cluster (a kubeconfig the controller
            # writes, as the Job ServiceAccount): not subject to --allowed-backend-url (runner.py).
            connection[OPERATOR_CHOSEN] = True
        if backend["ca"]:
            connection["ca_pem"] = self.kube.read_config_map_key(backend["ca_namespace"], backend["ca"]["name"],
                                                                 backend["ca"].get("key") or "ca.crt")
        return connection

    def credentials(self, obj, backend=None):
        """The data of the CR's credentials Secret; {} when it names none."""
        backend = backend or self.backend(obj)
        if not backend["secret"]:
            return {}
        return self.kube.read_secret(backend["secret_namespace"], backend["secret"])

    def scripts(self, objects):
        """(objects ready to submit, {key: script of scriptFrom}, [(key, obj, why) of those waiting]).

        A ConfigMap that is not there (yet) holds back its own CR only: it may be applied after the
        CR, as a Pod waits for the ConfigMaps it names, and the backend is not to blame.
        """
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


def has_namespace_selector(found):
    return found.get("kind") == "ClusterBridgeBackend" and (found.get("spec") or {}).get("namespaceSelector") is not None
