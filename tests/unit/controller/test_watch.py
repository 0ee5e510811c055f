"""Unit tests of bridge_controller.watch against a scripted stand-in for CustomObjectsApi (no network).

The stub serves LIST pages from a list of objects and WATCH streams from a script; the shapes
(list metadata, watch lines, the 200 + ERROR 410 event) are the ones the real kube-apiserver 1.34
under tools/ answers, see tests/integration/test_controller_watch.py.
"""

import json
import threading
from collections import deque

import pytest
from kubernetes.client.rest import ApiException

from bridge_controller.watch import BridgeJobWatcher, object_key, without_managed_fields

PATIENCE = 30.0


def bridgejob(name, rv, namespace="team-a", uid=None, **spec):
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": str(rv),
                         "uid": uid or "uid-%s" % name},
            "spec": spec}


def event(kind, obj):
    return {"type": kind, "object": dict(obj, apiVersion="bridge.dev/v1alpha1", kind="BridgeJob")}


def bookmark(rv):
    return {"type": "BOOKMARK", "object": {"kind": "BridgeJob", "apiVersion": "bridge.dev/v1alpha1",
                                           "metadata": {"resourceVersion": str(rv)}}}


def expired(rv):
    return {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                        "message": "too old resource version: %s (335)" % rv,
                                        "reason": "Expired", "code": 410}}


class RawJson(str):
    """An object of StubApi.objects or an event of a StubResponse given as the JSON the apiserver would send (one that
    Python cannot decode, say)."""


class StubResponse:
    """A watch body: one chunk per half line (so line reassembly is exercised), then EOF,
    a raised error (a dropped connection), or a stream held open until close()."""

    def __init__(self, events, then=None, hold=False):
        self.events = events
        self.then = then
        self.hold = hold
        self.closed = threading.Event()
        self.released = False

    def stream(self, amt=None, decode_content=None):
        assert amt is None and decode_content is False
        for item in self.events:
            line = ((item if isinstance(item, RawJson) else json.dumps(item)) + "\n").encode()
            middle = len(line) // 2
            yield line[:middle]
            yield line[middle:]
        if self.then is not None:
            raise self.then
        if self.hold:
            self.closed.wait(PATIENCE)

    def close(self):
        self.closed.set()

    def release_conn(self):
        self.released = True


class RawBody:
    """A response read with _preload_content=False: its body in `data`."""

    def __init__(self, text):
        self.data = text.encode()


class StubApi:
    """LIST from `self.objects` (paged by offset tokens) at `self.rv`; WATCH from `self.watches`.

    A watch script entry is a StubResponse or an exception to raise. When the script is used up
    the watcher is stopped, so `run()` returns and the test reads what was recorded.
    """

    def __init__(self, objects, rv, watches=(), changes=()):
        self.objects = list(objects)
        self.rv = str(rv)
        self.watches = deque(watches)
        self.changes = deque(changes)  # (objects, rv): what the server holds from the next watch on
        self.calls = []
        self.list_errors = {}   # continue token -> exception to raise once for that page
        self.watcher = None

    def list_namespaced_custom_object(self, group, version, namespace, plural, **kwargs):
        self.calls.append(("namespaced", group, version, namespace, plural, kwargs))
        return self._serve(kwargs)

    def list_cluster_custom_object(self, group, version, plural, **kwargs):
        self.calls.append(("cluster", group, version, None, plural, kwargs))
        return self._serve(kwargs)

    def _serve(self, kwargs):
        if kwargs.get("watch"):
            if self.changes:
                self.objects, self.rv = self.changes.popleft()
            if not self.watches:
                self.watcher.stop()
                return StubResponse([])
            entry = self.watches.popleft()
            if isinstance(entry, Exception):
                raise entry
            return entry
        token = kwargs.get("_continue")
        if token in self.list_errors:
            raise self.list_errors.pop(token)
        start = int(token or 0)
        limit = kwargs.get("limit") or len(self.objects)
        assert kwargs.get("_preload_content") is False, "a LIST is read unparsed and decoded object by object"
        page = [obj if isinstance(obj, RawJson) else json.dumps(obj) for obj in self.objects[start:start + limit]]
        more = start + limit < len(self.objects)
        return RawBody('{"apiVersion":"bridge.dev/v1alpha1","items":[%s],"kind":"BridgeJobList","metadata":%s}' % (
            ",".join(page), json.dumps({"resourceVersion": self.rv, "continue": str(start + limit) if more else ""})))

    def lists(self):
        return [call[5] for call in self.calls if not call[5].get("watch")]

    def watch_calls(self):
        return [call[5] for call in self.calls if call[5].get("watch")]


def run_watcher(api, **options):
    seen = []
    options.setdefault("retry_base", 0.001)
    watcher = BridgeJobWatcher(api, lambda kind, obj: seen.append((kind, object_key(obj), obj["metadata"].get("resourceVersion"))),
                               **options)
    api.watcher = watcher
    runner = threading.Thread(target=watcher.run)
    runner.start()
    runner.join(PATIENCE)
    assert not runner.is_alive(), "run() did not return after the script ended"
    return watcher, seen


def test_initial_list_is_paged_and_the_watch_starts_at_its_resource_version():
    objects = [bridgejob("job-%d" % i, 10 + i) for i in range(7)]
    api = StubApi(objects, 100)
    watcher, seen = run_watcher(api, namespace="team-a", page_size=3)
    assert [call.get("limit") for call in api.lists()] == [3, 3, 3]
    assert [call.get("_continue") for call in api.lists()] == [None, "3", "6"]
    assert seen == [("ADDED", "team-a/job-%d" % i, str(10 + i)) for i in range(7)]
    assert len(watcher.keys()) == 7 and watcher.wait_synced(0)
    # List items carry no apiVersion/kind; the cache fills them in so they look like watched ones.
    assert watcher.get("team-a/job-0")["kind"] == "BridgeJob"
    first_watch = api.watch_calls()[0]
    assert first_watch["resource_version"] == "100"
    assert first_watch["allow_watch_bookmarks"] is True
    assert first_watch["timeout_seconds"] == 300
    assert first_watch["_preload_content"] is False
    assert api.calls[0][:5] == ("namespaced", "bridge.dev", "v1alpha1", "team-a", "bridgejobs")


def test_watch_resumes_from_the_last_resource_version_after_a_timeout():
    a = bridgejob("a", 10)
    api = StubApi([a], 100, [
        StubResponse([event("ADDED", bridgejob("x", 101)), event("MODIFIED", bridgejob("x", 102, cancel=True))]),
        StubResponse([event("DELETED", bridgejob("x", 103)), event("MODIFIED", bridgejob("a", 104))]),
    ])
    watcher, seen = run_watcher(api)
    assert [call["resource_version"] for call in api.watch_calls()] == ["100", "102", "104"]
    assert len(api.lists()) == 1
    assert seen == [("ADDED", "team-a/a", "10"), ("ADDED", "team-a/x", "101"), ("MODIFIED", "team-a/x", "102"),
                    ("DELETED", "team-a/x", "103"), ("MODIFIED", "team-a/a", "104")]
    assert watcher.keys() == ["team-a/a"]
    assert watcher.get("team-a/a")["metadata"]["resourceVersion"] == "104"
    assert api.watch_calls()[-1]["resource_version"] == "104"


def test_watch_resumes_after_a_dropped_connection_without_relisting():
    dropped = StubResponse([event("ADDED", bridgejob("x", 101))], then=OSError("connection reset by peer"))
    api = StubApi([], 100, [
        dropped,
        OSError("connection refused"),
        StubResponse([event("MODIFIED", bridgejob("x", 102))]),
    ])
    watcher, seen = run_watcher(api)
    assert [call["resource_version"] for call in api.watch_calls()] == ["100", "101", "101", "102"]
    assert len(api.lists()) == 1
    assert seen == [("ADDED", "team-a/x", "101"), ("MODIFIED", "team-a/x", "102")]
    assert watcher.get("team-a/x")["metadata"]["resourceVersion"] == "102"
    # The broken stream's connection is closed, not handed back for reuse as is.
    assert dropped.closed.is_set()


def test_bookmark_moves_the_resource_version_without_an_event():
    api = StubApi([bridgejob("a", 10)], 100, [StubResponse([bookmark(150)]), StubResponse([bookmark(160)])])
    watcher, seen = run_watcher(api)
    assert [call["resource_version"] for call in api.watch_calls()] == ["100", "150", "160"]
    assert seen == [("ADDED", "team-a/a", "10")]
    assert api.watch_calls()[-1]["resource_version"] == "160"


def test_expired_watch_relists_and_reports_what_changed_while_away():
    before = [bridgejob("same", 10), bridgejob("changed", 11), bridgejob("gone", 12), bridgejob("recreated", 13, uid="old")]
    after = [bridgejob("same", 10), bridgejob("changed", 20), bridgejob("recreated", 21, uid="new"), bridgejob("new", 22)]
    api = StubApi(before, 100, [StubResponse([expired(100)])], changes=[(after, "200")])
    seen = []
    watcher = BridgeJobWatcher(api, lambda kind, obj: seen.append((kind, object_key(obj), obj["metadata"]["uid"], obj["metadata"]["resourceVersion"])),
                               retry_base=0.001)
    api.watcher = watcher
    watcher.run()
    assert len(api.lists()) == 2
    assert seen[4:] == [
        ("DELETED", "team-a/gone", "uid-gone", "12"),          # its last known state
        ("DELETED", "team-a/recreated", "old", "13"),         # same name, other UID: the old one is gone
        ("MODIFIED", "team-a/changed", "uid-changed", "20"),
        ("ADDED", "team-a/recreated", "new", "21"),
        ("ADDED", "team-a/new", "uid-new", "22"),
    ]
    assert sorted(watcher.keys()) == ["team-a/changed", "team-a/new", "team-a/recreated", "team-a/same"]
    assert [call["resource_version"] for call in api.watch_calls()] == ["100", "200"]


def test_http_410_on_the_watch_request_relists():
    api = StubApi([bridgejob("a", 10)], 100, [ApiException(status=410, reason="Gone")])
    watcher, seen = run_watcher(api)
    assert len(api.lists()) == 2
    # Nothing changed, so the relist reports nothing.
    assert seen == [("ADDED", "team-a/a", "10")]
    assert api.watch_calls()[-1]["resource_version"] == "100"


def test_expired_continue_token_restarts_the_list_unpaged():
    api = StubApi([bridgejob("job-%d" % i, 10 + i) for i in range(5)], 100)
    api.list_errors["2"] = ApiException(status=410, reason="Expired")
    watcher, seen = run_watcher(api, page_size=2)
    assert [(call.get("limit"), call.get("_continue")) for call in api.lists()] == [(2, None), (2, "2"), (None, None)]
    assert [key for kind, key, rv in seen] == ["team-a/job-%d" % i for i in range(5)]
    assert len(watcher.keys()) == 5


def test_other_watch_errors_resume_from_the_same_resource_version():
    failure = {"type": "ERROR", "object": {"kind": "Status", "code": 500, "reason": "InternalError", "message": "etcd leader changed"}}
    api = StubApi([], 100, [StubResponse([event("ADDED", bridgejob("x", 101)), failure]), ApiException(status=503, reason="Unavailable")])
    run_watcher(api)
    assert [call["resource_version"] for call in api.watch_calls()] == ["100", "101", "101"]
    assert len(api.lists()) == 1


@pytest.mark.parametrize("namespace, scope", [(None, "cluster"), ("team-a", "namespaced")])
def test_label_selector_is_passed_to_list_and_watch(namespace, scope):
    api = StubApi([bridgejob("a", 10)], 100, [StubResponse([])])
    run_watcher(api, namespace=namespace, label_selector="bridge.dev/shard=1")
    assert {call[0] for call in api.calls} == {scope}
    assert all(call[5]["label_selector"] == "bridge.dev/shard=1" for call in api.calls)


def test_without_selector_none_is_sent():
    api = StubApi([], 100)
    run_watcher(api)
    assert all("label_selector" not in call[5] for call in api.calls)


def test_failing_handler_does_not_stop_the_watch():
    api = StubApi([], 100, [StubResponse([event("ADDED", bridgejob("x", 101)), event("ADDED", bridgejob("y", 102))])])
    seen = []

    def handler(kind, obj):
        seen.append(object_key(obj))
        raise RuntimeError("handler bug")

    watcher = BridgeJobWatcher(api, handler)
    api.watcher = watcher
    watcher.run()
    assert seen == ["team-a/x", "team-a/y"]
    assert api.watch_calls()[-1]["resource_version"] == "102"


def test_transform_slims_cached_objects():
    obj = bridgejob("a", 10)
    obj["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    watched = dict(bridgejob("b", 101), metadata=dict(bridgejob("b", 101)["metadata"], managedFields=[{"manager": "bridge"}]))
    api = StubApi([obj], 100, [StubResponse([event("ADDED", watched)])])
    watcher, seen = run_watcher(api, transform=without_managed_fields)
    assert "managedFields" not in watcher.get("team-a/a")["metadata"]
    assert "managedFields" not in watcher.get("team-a/b")["metadata"]
    assert watcher.get("team-a/b")["metadata"]["name"] == "b"
    assert seen == [("ADDED", "team-a/a", "10"), ("ADDED", "team-a/b", "101")]


def test_stop_returns_promptly_from_an_idle_watch():
    held = StubResponse([], hold=True)
    api = StubApi([bridgejob("a", 10)], 100, [held])
    watcher = BridgeJobWatcher(api, lambda kind, obj: None)
    api.watcher = watcher
    runner = threading.Thread(target=watcher.run)
    runner.start()
    assert watcher.wait_synced(PATIENCE)
    while not api.watch_calls():
        runner.join(0.01)
    watcher.stop()
    runner.join(PATIENCE)
    assert not runner.is_alive()
    assert held.closed.is_set()


def test_stop_wakes_a_backoff_sleep():
    api = StubApi([], 100, [OSError("refused")] * 3)
    watcher = BridgeJobWatcher(api, lambda kind, obj: None, retry_base=3600, retry_cap=3600)
    api.watcher = watcher
    runner = threading.Thread(target=watcher.run)
    runner.start()
    while not api.watch_calls():
        runner.join(0.01)
    watcher.stop()
    runner.join(PATIENCE)
    assert not runner.is_alive()
    assert len(api.watch_calls()) == 1


class RecordingEvent(threading.Event):
    """The watcher's stop event, recording every backoff sleep (wait with a timeout)."""

    def __init__(self):
        super().__init__()
        self.sleeps = []

    def wait(self, timeout=None):
        if timeout is not None:
            self.sleeps.append(timeout)
        return super().wait(0 if timeout is not None else None)


def test_streams_that_end_at_once_and_empty_are_backed_off_not_spun_on():
    api = StubApi([], 100, [StubResponse([]), StubResponse([]), StubResponse([]),
                            StubResponse([event("ADDED", bridgejob("x", 101))]), StubResponse([])])
    watcher = BridgeJobWatcher(api, lambda kind, obj: None, retry_base=1, retry_cap=4)
    watcher._stopped = RecordingEvent()
    api.watcher = watcher
    watcher.run()
    # Three empty streams: growing sleeps (jitter takes off at most half); the stream with an
    # event resets the backoff, so the next empty one sleeps like the first.
    sleeps = watcher._stopped.sleeps
    assert len(sleeps) == 4
    assert 0.5 <= sleeps[0] <= 1 and 1 <= sleeps[1] <= 2 and 2 <= sleeps[2] <= 4 and 0.5 <= sleeps[3] <= 1


def test_a_resource_that_is_not_served_counts_as_synced_and_empty_and_is_listed_again():
    """A controller whose backend CRDs are not installed yet still becomes ready: nothing of them
    exists. The list is tried again, so they are seen once installed."""
    api = StubApi([bridgejob("a", 10)], 100, [StubResponse([])])
    refusals = [ApiException(status=404, reason="Not Found")] * 2
    serve = api._serve

    def not_served_at_first(kwargs):
        if not kwargs.get("watch") and refusals:
            raise refusals.pop()
        return serve(kwargs)

    api._serve = not_served_at_first
    watcher, seen = run_watcher(api)
    assert watcher.wait_synced(0)
    assert seen == [("ADDED", "team-a/a", "10")]
    assert len(api.lists()) == 3  # two refused, then served
