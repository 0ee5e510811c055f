"""bridge_controller.catalog against scripted stand-ins for CustomObjectsApi and CoreV1Api (no network),
with the watch stubs of test_watch.py."""

import json
import threading

from test_watch import PATIENCE, StubResponse

from bridge_controller.catalog import Catalog


def backend(name, rv, kind="BridgeBackend", namespace="team-a", labels=None, **spec):
    meta = {"name": name, "resourceVersion": str(rv), "uid": "uid-" + name, "generation": 1,
            "managedFields": [{"manager": "kubectl"}]}
    if kind == "BridgeBackend":
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = labels
    return {"metadata": meta, "spec": dict({"type": "slurm", "url": "http://slurm:6820"}, **spec)}


def namespace(name, rv, **labels):
    return {"metadata": {"name": name, "resourceVersion": str(rv), "uid": "uid-" + name, "labels": labels,
                         "annotations": {"big": "x" * 100}}, "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"}}


class Listing:
    """One resource: what LIST returns and the WATCH streams handed out after it (then one held open)."""

    def __init__(self, items, rv, streams=()):
        self.items, self.rv, self.streams = items, str(rv), list(streams)
        self.calls = []

    def serve(self, kwargs):
        self.calls.append(kwargs)
        if kwargs.get("watch"):
            return self.streams.pop(0) if self.streams else StubResponse([], hold=True)
        return {"items": json.loads(json.dumps(self.items)), "metadata": {"resourceVersion": self.rv}}


class StubCustom:
    def __init__(self, listings):
        self.listings = listings
        self.scopes = []

    def list_namespaced_custom_object(self, group, version, namespace, plural, **kwargs):
        self.scopes.append((plural, namespace))
        return unparsed(self.listings[plural].serve(kwargs), kwargs)

    def list_cluster_custom_object(self, group, version, plural, **kwargs):
        self.scopes.append((plural, None))
        return unparsed(self.listings[plural].serve(kwargs), kwargs)


class Raw:
    def __init__(self, body):
        self.data = json.dumps(body).encode()


def unparsed(answer, kwargs):
    """A LIST's answer as the watch reads it, unparsed; a WATCH's stream as it is."""
    if kwargs.get("watch"):
        return answer
    assert kwargs.get("_preload_content") is False, "a LIST's JSON is read unparsed and decoded object by object"
    return Raw(answer)


class StubCore:
    def __init__(self, listing):
        self.listing = listing

    def list_namespace(self, **kwargs):
        return unparsed(self.listing.serve(kwargs), kwargs)


def eventually(check):
    """Whether check() became true within PATIENCE: a watch marks itself synced before it reports
    what it listed, from its own thread."""
    for _attempt in range(int(PATIENCE * 100)):
        if check():
            return True
        threading.Event().wait(0.01)
    return False


def started(custom, core, **options):
    catalog = Catalog(custom, core, retry_base=0.001, **options)
    seen = []
    changed = threading.Event()

    def record(kind, obj):
        seen.append((kind, obj["kind"], obj["metadata"]["name"]))
        changed.set()

    catalog.subscribe(record)
    catalog.start()
    assert catalog.wait_synced(PATIENCE)
    return catalog, seen, changed


def test_the_catalog_caches_both_kinds_and_the_namespaces_labels():
    listings = {"bridgebackends": Listing([backend("slurm-a", 10)], 100),
                "clusterbridgebackends": Listing([backend("site", 11, kind="ClusterBridgeBackend")], 100)}
    spaces = Listing([namespace("team-a", 5, team="a"), namespace("bare", 6)], 100)
    custom = StubCustom(listings)
    catalog, seen, _changed = started(custom, StubCore(spaces))
    try:
        local = catalog.backend("BridgeBackend", "team-a", "slurm-a")
        assert (local["kind"], local["apiVersion"], local["spec"]["url"]) == ("BridgeBackend", "bridge.dev/v1alpha1", "http://slurm:6820")
        assert "managedFields" not in local["metadata"]
        assert catalog.backend("ClusterBridgeBackend", "any-namespace", "site")["kind"] == "ClusterBridgeBackend"
        assert catalog.backend("BridgeBackend", "team-b", "slurm-a") is None
        assert catalog.backend("ClusterBridgeBackend", None, "slurm-a") is None
        assert sorted(obj["metadata"]["name"] for obj in catalog.backends()) == ["site", "slurm-a"]
        assert catalog.namespace_labels("team-a") == {"team": "a"}
        assert catalog.namespace_labels("bare") == {}
        assert catalog.namespace_labels("unknown") is None
        # Only what namespaceSelector needs is kept of a namespace.
        assert catalog.namespaces.get("/team-a") == {"kind": "Namespace", "metadata": {
            "name": "team-a", "labels": {"team": "a"}, "uid": "uid-team-a", "resourceVersion": "5"}}
        assert eventually(lambda: len(seen) == 2)
        assert sorted(seen) == [("ADDED", "BridgeBackend", "slurm-a"), ("ADDED", "ClusterBridgeBackend", "site")]
        # Every namespace's BridgeBackends without --namespace.
        assert ("bridgebackends", None) in custom.scopes and ("clusterbridgebackends", None) in custom.scopes
    finally:
        catalog.stop()


def test_watched_changes_reach_the_cache_and_the_subscribers():
    changed_backend = dict(backend("site", 12, kind="ClusterBridgeBackend"), kind="ClusterBridgeBackend")
    deleted = StubResponse([{"type": "DELETED", "object": dict(backend("slurm-a", 13), kind="BridgeBackend")}], hold=True)
    modified = StubResponse([{"type": "MODIFIED", "object": changed_backend}], hold=True)
    listings = {"bridgebackends": Listing([backend("slurm-a", 10)], 100, [deleted]),
                "clusterbridgebackends": Listing([backend("site", 11, kind="ClusterBridgeBackend")], 100, [modified])}
    spaces = Listing([namespace("team-a", 5, team="a")], 100, [
        StubResponse([{"type": "MODIFIED", "object": namespace("team-a", 7, team="b")}], hold=True)])
    catalog, seen, changed = started(StubCustom(listings), StubCore(spaces))
    try:
        for _attempt in range(int(PATIENCE * 100)):
            if len(seen) == 4 and catalog.namespace_labels("team-a") == {"team": "b"}:
                break
            changed.wait(0.01)
        # The two kinds have a watch each: their events interleave in any order.
        assert sorted(seen) == [("ADDED", "BridgeBackend", "slurm-a"), ("ADDED", "ClusterBridgeBackend", "site"),
                                ("DELETED", "BridgeBackend", "slurm-a"), ("MODIFIED", "ClusterBridgeBackend", "site")]
        assert catalog.backend("BridgeBackend", "team-a", "slurm-a") is None
        assert catalog.backend("ClusterBridgeBackend", None, "site")["metadata"]["resourceVersion"] == "12"
        assert catalog.namespace_labels("team-a") == {"team": "b"}
    finally:
        catalog.stop()


def test_with_a_namespace_only_its_bridgebackends_are_watched_and_a_failing_subscriber_harms_no_other():
    listings = {"bridgebackends": Listing([backend("slurm-a", 10)], 100),
                "clusterbridgebackends": Listing([], 100)}
    custom = StubCustom(listings)
    catalog = Catalog(custom, StubCore(Listing([], 100)), namespace="team-a", retry_base=0.001)
    heard = []
    catalog.subscribe(lambda kind, obj: 1 / 0)
    catalog.subscribe(lambda kind, obj: heard.append(obj["metadata"]["name"]))
    catalog.start()
    try:
        assert catalog.wait_synced(PATIENCE)
        assert eventually(lambda: heard == ["slurm-a"])
        assert ("bridgebackends", "team-a") in custom.scopes
        assert ("clusterbridgebackends", None) in custom.scopes
    finally:
        catalog.stop()


def test_a_label_selector_narrows_the_backend_objects_not_the_namespaces():
    listings = {"bridgebackends": Listing([], 100), "clusterbridgebackends": Listing([], 100)}
    spaces = Listing([], 100)
    catalog = Catalog(StubCustom(listings), StubCore(spaces), label_selector="bridge.dev/shard=1", retry_base=0.001)
    catalog.start()
    try:
        assert catalog.wait_synced(PATIENCE)
        for listing in listings.values():
            assert all(call["label_selector"] == "bridge.dev/shard=1" for call in listing.calls)
        assert all("label_selector" not in call for call in spaces.calls)
    finally:
        catalog.stop()
