"""List+watch of one resource (BridgeJobs, the backend objects, namespaces) into a local cache,
resuming from the last resourceVersion, relisting on 410.

The shape is client-go's reflector (`Reflector`), written against the Python client's list calls
directly so that every apiserver fact it depends on is visible here; `custom_objects` and
`namespaces` make the one list call of a resource, and `BridgeJobWatcher` is the reflector of
BridgeJobs:

* LIST is paged (`limit` + `continue`); all pages are served from one snapshot whose
  resourceVersion the WATCH starts from. An expired continue token (410 while paging) restarts the
  list once without `limit`, as client-go's pager does.
* WATCH uses `allowWatchBookmarks=true`, so an idle watch still learns newer resourceVersions, and
  `timeoutSeconds`, after which the apiserver ends the stream normally. After a timeout or a
  dropped connection the watch resumes from the last resourceVersion seen (object or bookmark):
  the apiserver replays what happened since, nothing is missed and nothing is listed again.
* A resourceVersion older than the apiserver's event window is answered with 410 Gone: as an HTTP
  status on some paths, and as a 200 stream whose first event is `ERROR` with a Status of code 410
  (reason Expired) on the watch cache path (what kube-apiserver 1.34 does). Both lead to a relist
  that is diffed against the cache: objects that vanished meanwhile are reported DELETED (with their
  last known state), new ones ADDED, changed ones (other resourceVersion) MODIFIED, and an object
  deleted and re-created under the same name (other UID) DELETED then ADDED.

An object that cannot be decoded (nested deeper than Python's decoder goes, not an object, without
a name) is skipped on its own (decode.py): it is left out of the cache, as if it did not exist (a
version cached before is reported DELETED), counted, logged and handed to `on_skipped` once per
resourceVersion; every other object is served, and the list still makes the watcher synced.

Memory: the cache keeps whole objects unless a `transform` slims them. Measured on a BridgeJob
with status as the apiserver returns it (3.5 kB of JSON): 10,000 cached objects take about 196 MiB
of RSS, 84 MiB with `without_managed_fields` (managedFields is half of each object).
"""

import logging
import random
import socket
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from bridge_controller.decode import Skipped, decode_event, decode_list
from bridge_controller.kube import GROUP, PLURAL, VERSION
from bridge_controller.spec import key_of as object_key

LOG = logging.getLogger(__name__)

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"

EventHandler = Callable[[str, Dict[str, Any]], None]
SkipHandler = Callable[[Skipped], None]


class ResourceExpired(Exception):
    """The apiserver no longer has the events after our resourceVersion (HTTP 410 / ERROR 410)."""


class WatchError(Exception):
    """The watch stream carried an ERROR event other than 410; resume after a backoff."""


def without_managed_fields(obj: Dict[str, Any]) -> Dict[str, Any]:
    """A `transform` that drops metadata.managedFields: server-side-apply bookkeeping that the
    controller never reads and that doubles the size of every cached object."""
    (obj.get("metadata") or {}).pop("managedFields", None)
    return obj


def _resource_version(obj: Dict[str, Any]) -> Optional[str]:
    return (obj.get("metadata") or {}).get("resourceVersion")


def _uid(obj: Dict[str, Any]) -> Optional[str]:
    return (obj.get("metadata") or {}).get("uid")


def _http_status(error: BaseException) -> Optional[int]:
    # kubernetes.client.ApiException carries the HTTP status as `.status`; duck-typed so that this
    # module imports without the client (tests pass a stub API).
    status = getattr(error, "status", None)
    return status if isinstance(status, int) else None


def _lines(response) -> Iterator[bytes]:
    """Split a watch response body into its newline-delimited JSON events, as chunks arrive."""
    buffer = b""
    # amt=None: hand out each chunk as soon as it is read; the apiserver flushes one chunk per event.
    for chunk in response.stream(amt=None, decode_content=False):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer


def _unparsed(call):
    """`call` answering a LIST with its body as bytes (a WATCH is unparsed already): the client
    would decode the whole body at once, and one object it cannot decode would fail all of them."""
    def unparsed(**kwargs):
        if kwargs.get("watch"):
            return call(**kwargs)
        return call(_preload_content=False, **kwargs).data
    return unparsed


def custom_objects(api, group: str, version: str, plural: str, namespace: Optional[str] = None):
    """The list call of a custom resource through `api` (a `kubernetes.client.CustomObjectsApi`): of
    one namespace, or of every namespace (and of a cluster-scoped resource) when `namespace` is None."""
    if namespace:
        return _unparsed(lambda **kwargs: api.list_namespaced_custom_object(group, version, namespace, plural, **kwargs))
    return _unparsed(lambda **kwargs: api.list_cluster_custom_object(group, version, plural, **kwargs))


def namespaces(core):
    """The list call of core/v1 namespaces through `core` (a `kubernetes.client.CoreV1Api`)."""
    return _unparsed(core.list_namespace)


class Reflector:
    """Keeps a cache of one resource in sync with the apiserver and reports every change to
    `on_event`.

    `run()` blocks until `stop()`; `on_event(kind, obj)` is called from that thread, after the
    cache was updated, with kind ADDED, MODIFIED or DELETED (for DELETED, the last state known).
    The cache's keys are "namespace/name" ("/name" for a cluster-scoped object).
    """

    def __init__(self, list_call, on_event: EventHandler, kind: str, api_version: str,
                 label_selector: Optional[str] = None, page_size: int = 500, watch_timeout: int = 300,
                 retry_base: float = 0.2, retry_cap: float = 30.0,
                 transform: Optional[Callable[[Dict[str, Any]], Dict[str, Any]]] = None, name: Optional[str] = None,
                 on_skipped: Optional[SkipHandler] = None):
        """`list_call(**kwargs)` lists (the body, as bytes) or with watch=True watches (the response)
        the resource: `custom_objects` or `namespaces`. `kind` and `api_version` are set on listed
        items, which carry none. `on_skipped(skipped)` hears of each object that could not be
        decoded, once per resourceVersion, from this thread.

        `label_selector` is passed to LIST and WATCH, so a controller started with `--selector`
        only ever sees (and caches) its shard. `watch_timeout` is the server-side `timeoutSeconds`
        of one WATCH; the client read timeout is a little longer, so a connection that went silent
        without being closed (a half-open TCP connection) is noticed too. `name` names the resource
        in logs (its plural).
        """
        self.list_call = list_call
        self.on_event = on_event
        self.kind, self.api_version = kind, api_version
        self.plural = name or kind.lower()
        self.label_selector = label_selector
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.retry_base = retry_base
        self.retry_cap = retry_cap
        self.transform = transform
        self.on_skipped = on_skipped
        self.skipped = 0  # objects skipped (the /metrics counter), each resourceVersion once
        self._reported: set = set()
        self._cache: Dict[str, Dict[str, Any]] = {}
        self._resource_version: Optional[str] = None  # None: the next step is a (re)list
        self._stopped = threading.Event()
        self._synced = threading.Event()
        self._lock = threading.Lock()  # guards _cache replacement and _response
        self._response = None
        self._rng = random.Random()

    # ---------------------------------------------------------------- the cache, for readers
    def get(self, key: str) -> Optional[Dict[str, Any]]:
        """The cached object for "namespace/name", or None: the executor reads every CR from here."""
        with self._lock:
            return self._cache.get(key)

    def keys(self) -> List[str]:
        """The keys of every cached object (the /metrics phase gauges)."""
        with self._lock:
            return list(self._cache)

    def wait_synced(self, timeout: Optional[float] = None) -> bool:
        """Block until the first list was loaded into the cache (readiness); False on timeout."""
        return self._synced.wait(timeout)

    # ---------------------------------------------------------------- lifecycle
    def run(self) -> None:
        """List, then watch, until `stop()`. Errors are logged and retried with jittered backoff."""
        failures = 0
        while not self._stopped.is_set():
            try:
                if self._resource_version is None:
                    self._relist()
                healthy = self._watch_once()
            except ResourceExpired as error:
                LOG.info("watch of %s: resourceVersion %s expired (%s); relisting", self.plural, self._resource_version, error)
                self._resource_version = None
                continue
            except Exception as error:
                if self._stopped.is_set():
                    break
                if _http_status(error) == 410:
                    LOG.info("watch of %s: HTTP 410 at resourceVersion %s; relisting", self.plural, self._resource_version)
                    self._resource_version = None
                    continue
                if _http_status(error) == 404 and self._resource_version is None and not self._synced.is_set():
                    # The resource is not served (its CRD is not installed): nothing of it exists,
                    # so the cache is complete while empty, and the list is tried again below.
                    LOG.warning("%s are not served by the apiserver (HTTP 404; is its CRD installed?); "
                                "taking none until they are", self.plural)
                    self._synced.set()
                failures += 1
                delay = self._backoff(failures)
                LOG.warning("watch of %s failed (%s: %s); retrying in %.1fs from resourceVersion %s",
                            self.plural, type(error).__name__, error, delay, self._resource_version)
                self._stopped.wait(delay)
                continue
            if healthy:
                failures = 0
            elif not self._stopped.is_set():
                # A stream the server ended at once with nothing in it: back off, or this loop spins.
                failures += 1
                self._stopped.wait(self._backoff(failures))

    def _backoff(self, failures: int) -> float:
        delay = min(self.retry_cap, self.retry_base * 2.0 ** min(failures - 1, 32))
        return delay * (0.5 + 0.5 * self._rng.random())

    def stop(self) -> None:
        """Make `run()` return promptly: wakes a backoff sleep and cuts the open watch stream."""
        self._stopped.set()
        with self._lock:
            response = self._response
        if response is not None:
            _interrupt(response)

    # ---------------------------------------------------------------- list
    def _call(self, **kwargs):
        if self.label_selector:
            kwargs["label_selector"] = self.label_selector
        return self.list_call(**kwargs)

    def _list(self) -> Tuple[List[Dict[str, Any]], str, List[Skipped]]:
        """Every object (all pages of one snapshot), the snapshot's resourceVersion and the objects
        that could not be decoded."""
        items: List[Dict[str, Any]] = []
        skipped: List[Skipped] = []
        limit: Optional[int] = self.page_size
        token = None
        while True:
            kwargs: Dict[str, Any] = {}
            if limit:
                kwargs["limit"] = limit
            if token:
                kwargs["_continue"] = token
            try:
                # A page of `limit` objects comes back in well under a second; the read timeout
                # only keeps a hung connection from blocking the watcher (and stop()) forever.
                page = self._call(_request_timeout=(10, 120), **kwargs)
            except Exception as error:
                if _http_status(error) != 410 or not token:
                    raise
                # The continue token outlived the apiserver's compaction window: its snapshot is
                # gone, so start over from a fresh one, unpaged so it cannot expire again.
                LOG.info("list of %s: continue token expired; listing again without limit", self.plural)
                items, skipped, limit, token = [], [], None, None
                continue
            page_items, metadata, page_skipped = decode_list(page)
            items.extend(page_items)
            skipped.extend(page_skipped)
            token = metadata.get("continue")
            if not token:
                return items, metadata.get("resourceVersion"), skipped
            if self._stopped.is_set():
                raise WatchError("stopped while listing")

    def _relist(self) -> None:
        items, resource_version, skipped = self._list()
        fresh = {}
        for obj in items:
            # A list's items carry no apiVersion/kind (they are on the list); add them so that
            # listed and watched objects look alike to the handler.
            obj.setdefault("apiVersion", self.api_version)
            obj.setdefault("kind", self.kind)
            fresh[object_key(obj)] = self._slim(obj)
        with self._lock:
            previous = self._cache
            self._cache = fresh
        self._resource_version = resource_version
        self._synced.set()
        LOG.info("listed %d %s at resourceVersion %s", len(fresh), self.plural, resource_version)
        for key, old in previous.items():
            new = fresh.get(key)
            if new is None or _uid(new) != _uid(old):
                self._emit(DELETED, old)
        for key, new in fresh.items():
            old = previous.get(key)
            if old is None or _uid(new) != _uid(old):
                self._emit(ADDED, new)
            elif _resource_version(new) != _resource_version(old):
                self._emit(MODIFIED, new)
        # After the others are queued: reporting one writes an Event. Only the objects still skipped
        # are remembered, so the set stays as small as they are.
        reported, self._reported = self._reported, set()
        for entry in skipped:
            self._skip(entry, reported)

    # ---------------------------------------------------------------- watch
    def _watch_once(self) -> bool:
        """One WATCH stream from the current resourceVersion, until the server ends it.

        Returns True if the stream was healthy: it delivered an event (bookmarks included) or
        stayed open for a second or more.
        """
        started = time.monotonic()
        response = self._call(watch=True, resource_version=self._resource_version, allow_watch_bookmarks=True,
                              timeout_seconds=self.watch_timeout, _preload_content=False,
                              _request_timeout=(10, self.watch_timeout + 30))
        with self._lock:
            self._response = response
        healthy = False
        complete = False
        try:
            if self._stopped.is_set():
                return healthy  # stop() ran between the request and the line above
            for line in _lines(response):
                event, skipped = decode_event(line)
                if skipped:
                    self._skip_watched(skipped)
                else:
                    self._handle(event)
                healthy = True
                if self._stopped.is_set():
                    return healthy
            complete = True
            healthy = healthy or time.monotonic() - started >= 1.0
        finally:
            with self._lock:
                self._response = None
            # A stream read to its end leaves a reusable keep-alive connection; anything else
            # (an error, a stop, a 410 mid-stream) leaves unread bytes, so the connection is dropped.
            _release(response, reuse=complete)
        return healthy

    def _handle(self, event: Dict[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise ResourceExpired(obj.get("message", "Gone"))
            raise WatchError("%s (code %s, reason %s)" % (obj.get("message"), obj.get("code"), obj.get("reason")))
        resource_version = _resource_version(obj)
        if kind == "BOOKMARK":
            # A bookmark carries only a resourceVersion: nothing changed up to it.
            if resource_version:
                self._resource_version = resource_version
            return
        if kind not in (ADDED, MODIFIED, DELETED):
            LOG.warning("watch of %s: ignoring event of unknown type %r", self.plural, kind)
            return
        key = object_key(obj)
        obj = self._slim(obj)
        with self._lock:
            if kind == DELETED:
                self._cache.pop(key, None)
            else:
                self._cache[key] = obj
        if resource_version:
            self._resource_version = resource_version
        self._emit(kind, obj)

    def _skip_watched(self, skipped: Skipped) -> None:
        """A watch event whose object cannot be decoded: its last decodable version, if cached,
        leaves the cache (nothing acts on a version that is no longer the object's), and the watch
        goes on after it."""
        metadata = skipped.metadata
        if metadata.get("name"):
            key = object_key({"metadata": metadata})
            with self._lock:
                old = self._cache.pop(key, None)
            if old is not None:
                self._emit(DELETED, old)
        if metadata.get("resourceVersion"):
            self._resource_version = metadata["resourceVersion"]
        self._skip(skipped, self._reported)

    def _skip(self, skipped: Skipped, reported: set) -> None:
        """Count, log and hand on `skipped` unless its resourceVersion was reported already."""
        metadata = skipped.metadata
        identity = tuple(metadata.get(key) for key in ("namespace", "name", "uid", "resourceVersion"))
        seen = identity in reported
        self._reported.add(identity)
        if seen and metadata.get("resourceVersion"):
            return
        self.skipped += 1
        LOG.warning("%s %s/%s (resourceVersion %s) skipped: %s", self.plural, metadata.get("namespace") or "",
                    metadata.get("name") or "?", metadata.get("resourceVersion") or "?", skipped.reason)
        if self.on_skipped is not None and metadata.get("name"):
            try:
                self.on_skipped(skipped)
            except Exception:
                LOG.exception("reporting the skipped %s %s failed", self.plural, metadata.get("name"))

    def _slim(self, obj: Dict[str, Any]) -> Dict[str, Any]:
        return self.transform(obj) if self.transform else obj

    def _emit(self, kind: str, obj: Dict[str, Any]) -> None:
        # A failing handler must not stop the watch (every later event would be lost with it);
        # the handler only enqueues keys, so a failure here is a bug to log, not a state to retry.
        try:
            self.on_event(kind, obj)
        except Exception:
            LOG.exception("handler of %s %s failed", kind, object_key(obj))


class BridgeJobWatcher(Reflector):
    """The controller's one cache of BridgeJobs."""

    def __init__(self, api, on_event: EventHandler, namespace: Optional[str] = None,
                 group: str = GROUP, version: str = VERSION, plural: str = PLURAL, **options):
        """`api` is a `kubernetes.client.CustomObjectsApi`. `namespace` None watches all namespaces;
        `options` are the Reflector's."""
        super().__init__(custom_objects(api, group, version, plural, namespace), on_event, "BridgeJob",
                         "%s/%s" % (group, version), name=plural, **options)
        self.namespace = namespace


def _interrupt(response) -> None:
    """Wake the thread reading `response`.

    Shutting the socket down makes a recv blocked in another thread return at once; close() alone
    does not wake it on Linux. Objects without a reachable socket (test stubs) are closed instead.
    """
    sock = getattr(getattr(response, "connection", None), "sock", None)
    if sock is None:
        _release(response, reuse=False)
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _release(response, reuse: bool) -> None:
    try:
        if not reuse:
            response.close()
        # Even a closed connection goes back to urllib3's pool: the pool reconnects a closed one on
        # its next use, while one never returned shrinks the pool for good.
        response.release_conn()
    except Exception:
        LOG.debug("releasing the watch response failed", exc_info=True)
