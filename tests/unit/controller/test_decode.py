"""Unit tests of bridge_controller.decode: LIST bodies and WATCH lines decoded object by object, and
of the watch skipping what cannot be decoded while serving every other object."""

import json

from test_watch import RawJson, StubApi, StubResponse, bridgejob, event, run_watcher

from bridge_controller.decode import MAX_DEPTH, decode_event, decode_list

DEPTH = 2000  # as deep as issue 37's BridgeJob: beyond Python's decoder, within the apiserver's 10,000


def deep_json(name, rv, namespace="team-a", depth=DEPTH):
    """A BridgeJob's JSON whose backendOptions.slurm is nested `depth` levels, with managedFields as
    deep (the apiserver records every field it set), as the apiserver sends it."""
    nested = '{"a":' * depth + "1" + "}" * depth
    return ('{"metadata":{"name":"%s","namespace":"%s","uid":"uid-%s","resourceVersion":"%s",'
            '"managedFields":[{"fieldsV1":%s}]},"spec":{"backendOptions":{"slurm":%s}}}'
            % (name, namespace, name, rv, nested, nested))


def list_body(*items, rv="100", token=""):
    return ('{"apiVersion":"bridge.dev/v1alpha1","items":[%s],"kind":"BridgeJobList",'
            '"metadata":{"resourceVersion":"%s","continue":"%s"}}' % (",".join(items), rv, token)).encode()


def test_a_list_that_decodes_whole_is_decoded_whole():
    items, metadata, skipped = decode_list(list_body(json.dumps(bridgejob("a", 1)), rv="7", token="next"))
    assert [item["metadata"]["name"] for item in items] == ["a"]
    assert metadata == {"resourceVersion": "7", "continue": "next"} and skipped == []


def test_an_item_too_deep_to_decode_is_skipped_and_named_and_the_others_are_kept():
    body = list_body(json.dumps(bridgejob("a", 1)), deep_json("deep", 2),
                     json.dumps(bridgejob("b", 3, spec_text='quotes " and ] brackets { in a string')))
    items, metadata, skipped = decode_list(body)
    assert [item["metadata"]["name"] for item in items] == ["a", "b"]
    assert items[1]["spec"]["spec_text"] == 'quotes " and ] brackets { in a string'
    assert metadata["resourceVersion"] == "100"
    assert [entry.metadata for entry in skipped] == [
        {"name": "deep", "namespace": "team-a", "uid": "uid-deep", "resourceVersion": "2"}]
    assert skipped[0].reason == "nested too deeply to decode"


def test_items_of_the_wrong_shape_are_skipped():
    body = list_body('"text"', "3", '{"metadata":{"namespace":"x"}}', json.dumps(bridgejob("a", 1)), deep_json("deep", 2))
    items, _metadata, skipped = decode_list(body)
    assert [item["metadata"]["name"] for item in items] == ["a"]
    assert sorted(entry.reason for entry in skipped) == [
        "nested too deeply to decode", "no metadata.name", "not an object", "not an object"]


def test_an_object_python_decodes_but_nested_past_max_depth_is_skipped_too():
    # Decodable, but a batch's JSON and Ansible's templating recurse several frames per level.
    body = list_body(deep_json("deep", 2, depth=MAX_DEPTH), deep_json("shallow", 3, depth=MAX_DEPTH - 10))
    items, _metadata, skipped = decode_list(body)
    assert [item["metadata"]["name"] for item in items] == ["shallow"]
    assert [(entry.metadata["name"], entry.reason) for entry in skipped] == [
        ("deep", "nested deeper than %d levels" % MAX_DEPTH)]


def test_a_list_whose_own_metadata_cannot_be_read_is_an_error():
    for body in (b'{"items": [', b"[]", ('{"items":[],"metadata":%s}' % ('[' * DEPTH + ']' * DEPTH)).encode()):
        try:
            decode_list(body)
        except ValueError:
            continue
        raise AssertionError("decoded %r" % body[:40])


def test_a_watch_event_too_deep_to_decode_is_skipped_with_its_type_and_name():
    line = ('{"type":"ADDED","object":%s}' % deep_json("deep", 9)).encode()
    decoded, skipped = decode_event(line)
    assert decoded is None
    assert skipped.metadata == {"type": "ADDED", "name": "deep", "namespace": "team-a", "uid": "uid-deep",
                                "resourceVersion": "9"}


def test_bookmarks_errors_and_objects_pass_and_nameless_objects_do_not():
    for line in (event("ADDED", bridgejob("a", 1)), {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "5"}}},
                 {"type": "ERROR", "object": {"code": 410}}):
        assert decode_event(json.dumps(line).encode()) == (line, None)
    assert decode_event(b'{"type":"ADDED","object":{"spec":{}}}')[1].reason == "no metadata.name"
    assert decode_event(b"[1]")[1].reason == "not a watch event"


def test_the_watch_serves_every_other_object_and_reports_the_skipped_one_once():
    skipped = []
    api = StubApi([bridgejob("a", 10), RawJson(deep_json("deep", 11)), bridgejob("b", 12, namespace="team-b")], 100,
                  watches=[StubResponse([event("ADDED", bridgejob("c", 101))]), StubResponse([])],
                  changes=[([bridgejob("a", 10), RawJson(deep_json("deep", 11))], 101)])
    watcher, seen = run_watcher(api, on_skipped=skipped.append, page_size=2)
    assert watcher.wait_synced(0), "a list with an undecodable object still makes the watcher synced"
    assert ("ADDED", "team-b/b", "12") in seen and ("ADDED", "team-a/c", "101") in seen
    assert "team-a/deep" not in watcher.keys()
    assert [entry.metadata["name"] for entry in skipped] == ["deep"]
    assert watcher.skipped == 1


def test_a_watched_object_that_became_undecodable_leaves_the_cache_and_the_watch_goes_on():
    skipped = []
    deep_event = RawJson('{"type":"MODIFIED","object":%s}' % deep_json("a", 11))
    api = StubApi([bridgejob("a", 10)], 100, watches=[StubResponse([deep_event, event("ADDED", bridgejob("b", 12))])])
    watcher, seen = run_watcher(api, on_skipped=skipped.append)
    assert seen == [("ADDED", "team-a/a", "10"), ("DELETED", "team-a/a", "10"), ("ADDED", "team-a/b", "12")]
    assert watcher.keys() == ["team-a/b"] and watcher.skipped == 1
    assert skipped[0].metadata["resourceVersion"] == "11"
