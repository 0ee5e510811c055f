"""The catalog: the controller's cache of backend objects (BridgeBackend, ClusterBridgeBackend) and of
the namespaces' labels, each kept by a list+watch (watch.py's Reflector).

Placement and the BridgeJobs that name a backend object read it from here, never from the apiserver
(no request per BridgeJob); the probe (probe.py) learns from `subscribe` which objects appeared,
changed or went.
"""

import logging
import threading
from typing import Any, Callable, Dict, List, Optional

from bridge_controller.backend_objects import API_VERSION, CLUSTER, GROUP, KINDS, NAMESPACED, PLURALS, VERSION
from bridge_controller.watch import Reflector, custom_objects, namespaces, without_managed_fields

LOG = logging.getLogger(__name__)

Subscriber = Callable[[str, Dict[str, Any]], None]


def namespace_labels_only(obj: Dict[str, Any]) -> Dict[str, Any]:
    """A namespace as the catalog keeps it: its name, labels, uid and resourceVersion (what the
    reflector compares); a namespace's spec and status are never read."""
    meta = obj.get("metadata") or {}
    return {"kind": "Namespace", "metadata": dict((key, meta[key]) for key in ("name", "labels", "uid", "resourceVersion")
                                                  if key in meta)}


class Catalog:
    """Backend objects and namespace labels, as the watches last saw them.

    `backend(kind, namespace, name)`, `backends()`, `namespace_labels(name)` read the cache;
    `subscribe(callback)` has `callback(event, obj)` called on every change of a backend object
    (event ADDED, MODIFIED or DELETED, obj carrying its kind), from the watch's thread.
    """

    def __init__(self, custom_api, core_api, namespace: Optional[str] = None, label_selector: Optional[str] = None,
                 namespace_selector: Optional[str] = None, **options):
        """`custom_api` a CustomObjectsApi, `core_api` a CoreV1Api; `namespace` limits the
        BridgeBackends to one namespace (--namespace), as the BridgeJobs are; `label_selector` the
        backend objects of both kinds to those it matches (--backend-selector: a shard's own, so
        that two controllers never probe one object); `options` are the Reflectors' (page_size,
        watch_timeout, retry_base, retry_cap). `namespace_selector` (--namespace-selector) keeps a
        second watch of the namespaces it matches: those whose BridgeJobs this controller serves."""
        self._subscribers: List[Subscriber] = []
        self._namespace_subscribers: List[Callable[[str], None]] = []
        self._lock = threading.Lock()
        self.reflectors = {
            NAMESPACED: Reflector(custom_objects(custom_api, GROUP, VERSION, PLURALS[NAMESPACED], namespace), self._emit,
                                  NAMESPACED, API_VERSION, transform=without_managed_fields, name=PLURALS[NAMESPACED],
                                  label_selector=label_selector, **options),
            CLUSTER: Reflector(custom_objects(custom_api, GROUP, VERSION, PLURALS[CLUSTER]), self._emit, CLUSTER,
                               API_VERSION, transform=without_managed_fields, name=PLURALS[CLUSTER],
                               label_selector=label_selector, **options),
        }
        self.namespaces = Reflector(namespaces(core_api), lambda event, obj: None, "Namespace", "v1",
                                    transform=namespace_labels_only, name="namespaces", **options)
        # Server-side filtered: labels are the cluster admin's, which tenants cannot set on a namespace.
        self.served = None if namespace_selector is None else Reflector(
            namespaces(core_api), self._served_changed, "Namespace", "v1", transform=namespace_labels_only,
            name="served-namespaces", label_selector=namespace_selector, **options)
        self._threads: List[threading.Thread] = []

    # ---------------------------------------------------------------- reading
    def backend(self, kind: str, namespace: Optional[str], name: str) -> Optional[Dict[str, Any]]:
        """The cached object of `kind` (BridgeBackend or ClusterBridgeBackend), or None; `namespace`
        is ignored for the cluster kind."""
        if kind == CLUSTER:
            return self.reflectors[CLUSTER].get("/%s" % name)
        if kind == NAMESPACED:
            return self.reflectors[NAMESPACED].get("%s/%s" % (namespace, name))
        raise ValueError("kind must be one of %s, not %r" % (", ".join(KINDS), kind))

    def backends(self) -> List[Dict[str, Any]]:
        """Every cached backend object, of both kinds."""
        found = []
        for reflector in self.reflectors.values():
            found.extend(obj for obj in map(reflector.get, reflector.keys()) if obj is not None)
        return found

    def namespace_labels(self, name: str) -> Optional[Dict[str, str]]:
        """The labels of namespace `name` ({} when it has none), or None when it is not known."""
        obj = self.namespaces.get("/%s" % name)
        return None if obj is None else dict(obj["metadata"].get("labels") or {})

    def serves(self, name: str) -> bool:
        """Whether this controller acts on the BridgeJobs of namespace `name`: all of them without
        --namespace-selector, else those of the namespaces it matches (as last seen)."""
        return self.served is None or self.served.get("/%s" % name) is not None

    def subscribe_namespaces(self, callback: Callable[[str], None]) -> None:
        """Have `callback(name)` called when namespace `name` starts or stops being served."""
        with self._lock:
            self._namespace_subscribers.append(callback)

    def _served_changed(self, _event: str, obj: Dict[str, Any]) -> None:
        with self._lock:
            subscribers = list(self._namespace_subscribers)
        for callback in subscribers:
            callback((obj.get("metadata") or {}).get("name"))

    def subscribe(self, callback: Subscriber) -> None:
        with self._lock:
            self._subscribers.append(callback)

    def _emit(self, event: str, obj: Dict[str, Any]) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        for callback in subscribers:
            # One failing subscriber must not keep the others from hearing of the change.
            try:
                callback(event, obj)
            except Exception:  # pylint: disable=broad-except
                LOG.exception("catalog subscriber failed on %s of %s", event, (obj.get("metadata") or {}).get("name"))

    # ---------------------------------------------------------------- lifecycle
    def _all(self) -> List[Reflector]:
        return list(self.reflectors.values()) + [self.namespaces] + ([self.served] if self.served is not None else [])

    def start(self) -> List[threading.Thread]:
        """Start the watches, each on a daemon thread of its own; returns the threads."""
        for reflector in self._all():
            thread = threading.Thread(target=reflector.run, name="bridge-watch-%s" % reflector.plural, daemon=True)
            thread.start()
            self._threads.append(thread)
        return list(self._threads)

    def wait_synced(self, timeout: Optional[float] = None) -> bool:
        """Whether every watch loaded its first list (readiness); waits up to `timeout` for each."""
        return all(reflector.wait_synced(timeout) for reflector in self._all())

    def stop(self) -> None:
        for reflector in self._all():
            reflector.stop()
