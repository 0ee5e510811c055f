"""Decoding LIST bodies and WATCH lines of the apiserver one object at a time, so that an object the
controller cannot decode is skipped on its own instead of failing the LIST or WATCH that carries it.

The apiserver stores JSON nested up to 10,000 levels; Python's decoder recurses once per level and
raises RecursionError near 1,000, so one such object failed the whole LIST of every tenant's objects
(issue 37). A LIST body is decoded whole first (the common case, one C call); only when that fails
is it cut into its items with a scan that does not recurse (strings and brackets, found by a
regular expression), and each item decoded on its own. Of an item that still fails, what can be
read of its shallow part (name, namespace, uid, resourceVersion) names it in the report.
"""

import json
import re
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

# A JSON string (escapes included, written so the regex engine does not backtrack), or a bracket.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
_ITEMS_KEY = b'"items"'
# How deep an object may nest to be served. Python decodes about 1,000 levels, but what the
# controller then does with an object recurses too, several frames per level (a batch's JSON for
# its playbook, Ansible's templating of the module's arguments), so one object nested past this
# would fail the batch of every BridgeJob it shares. The CRD admits about 20 (docs/bridgejob.md).
MAX_DEPTH = 100
# Levels of a watch event kept when only its shallow part can be read: the event, its object, the
# object's metadata.
_EVENT_LEVELS = 3
# Levels of a listed item kept likewise: the item and its metadata.
_ITEM_LEVELS = 2


class Skipped(NamedTuple):
    """An object that could not be decoded: what of its metadata could be read ({} when nothing)
    and why it was skipped."""
    metadata: Dict[str, Any]
    reason: str


def _failure(error: BaseException) -> str:
    if isinstance(error, RecursionError):
        return "nested too deeply to decode"
    return "not decodable JSON (%s: %s)" % (type(error).__name__, str(error)[:200])


def _loads(data: bytes):
    """json.loads; every way it fails on hostile input comes out as ValueError."""
    try:
        return json.loads(data)
    except RecursionError as error:
        raise ValueError(_failure(error)) from None
    except ValueError as error:
        raise ValueError(_failure(error)) from None


def _named(obj: Any) -> Optional[str]:
    """Why `obj` is no Kubernetes object the controller can key and serve, or None when it is one."""
    if not isinstance(obj, dict):
        return "not an object"
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
        return "no metadata.name"
    if not isinstance(metadata.get("namespace", ""), str):
        return "metadata.namespace is not a string"
    if _deeper_than(obj, MAX_DEPTH):
        return "nested deeper than %d levels" % MAX_DEPTH
    return None


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` nests more than `limit` arrays and objects; without recursion, visiting only
    the containers (a BridgeJob has about a hundred)."""
    stack = [(value, 1)]
    while stack:
        container, depth = stack.pop()
        if depth > limit:
            return True
        children = container.values() if isinstance(container, dict) else container
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _containers(body: bytes, level: int) -> List[Tuple[int, int, Optional[bytes]]]:
    """(start, end, key) of each array or object at nesting `level` (the top value is level 1),
    `key` being the last string before it one level up (its key, in an object)."""
    spans, depth, start, key, last = [], 0, 0, None, {}
    for match in _TOKEN.finditer(body):
        token = match.group()
        if token[:1] == b'"':
            last[depth] = token
        elif token in (b"[", b"{"):
            depth += 1
            if depth == level:
                start, key = match.start(), last.get(depth - 1)
            last[depth] = None
        else:
            if depth == level:
                spans.append((start, match.end(), key))
            depth -= 1
    return spans


def _spliced(body: bytes, spans) -> bytes:
    """`body` with each span replaced by null."""
    out, position = [], 0
    for start, end, _key in spans:
        out += [body[position:start], b"null"]
        position = end
    out.append(body[position:])
    return b"".join(out)


def _shallow(body: bytes, levels: int) -> Any:
    """The value of `body` with everything below `levels` levels replaced by null; None when even
    that cannot be decoded."""
    try:
        return _loads(_spliced(body, _containers(body, levels + 1)))
    except ValueError:
        return None


def _metadata_of(shallow: Any) -> Dict[str, Any]:
    metadata = shallow.get("metadata") if isinstance(shallow, dict) else None
    if not isinstance(metadata, dict):
        return {}
    return dict((key, metadata[key]) for key in ("name", "namespace", "uid", "resourceVersion")
                if isinstance(metadata.get(key), str))


def decode_list(body: bytes) -> Tuple[List[Dict[str, Any]], Dict[str, Any], List[Skipped]]:
    """(items, the list's metadata, skipped items) of a LIST body.

    Raises ValueError when the list itself (its metadata: resourceVersion, continue) cannot be
    read: nothing of it can be trusted then."""
    try:
        page = _loads(body)
    except ValueError:
        page = None
    if page is None:
        return _decode_items(body)
    if not isinstance(page, dict) or not isinstance(page.get("items") or [], list):
        raise ValueError("the LIST answer is not a list")
    items, skipped = [], []
    for item in page.get("items") or []:
        wrong = _named(item)
        if wrong:
            skipped.append(Skipped(_metadata_of(item), wrong))
        else:
            items.append(item)
    metadata = page.get("metadata")
    return items, metadata if isinstance(metadata, dict) else {}, skipped


def _decode_items(body: bytes):
    """decode_list's slow path: each item of the "items" array decoded on its own."""
    arrays = [(start, end) for start, end, key in _containers(body, 2) if key == _ITEMS_KEY]
    spans = [span for span in _containers(body, 3) if any(start <= span[0] < end for start, end in arrays)]
    skeleton = _loads(_spliced(body, spans))
    if not isinstance(skeleton, dict) or not isinstance(skeleton.get("items") or [], list):
        raise ValueError("the LIST answer is not a list")
    items, skipped = [], []
    for start, end, _key in spans:
        try:
            item = _loads(body[start:end])
        except ValueError as error:
            skipped.append(Skipped(_metadata_of(_shallow(body[start:end], _ITEM_LEVELS)), str(error)))
            continue
        wrong = _named(item)
        if wrong:
            skipped.append(Skipped(_metadata_of(item), wrong))
        else:
            items.append(item)
    # Items that are no container (a number, a string) are no objects either.
    skipped.extend(Skipped({}, "not an object") for item in skeleton.get("items") or [] if item is not None)
    metadata = skeleton.get("metadata")
    return items, metadata if isinstance(metadata, dict) else {}, skipped


def decode_event(line: bytes) -> Tuple[Optional[Dict[str, Any]], Optional[Skipped]]:
    """(event, None) for a WATCH line that decodes to an event with a keyable object (or an ERROR or
    BOOKMARK event, whose object is a Status or a bare resourceVersion), else (None, Skipped) with
    the event's type in the Skipped's metadata under "type" when it could be read."""
    try:
        event = _loads(line)
    except ValueError as error:
        shallow = _shallow(line, _EVENT_LEVELS)
        shallow = shallow if isinstance(shallow, dict) else {}
        return None, _skipped_event(shallow, str(error))
    if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
        return None, Skipped({}, "not a watch event")
    if event.get("type") in ("ERROR", "BOOKMARK"):
        return event, None
    wrong = _named(event["object"])
    if wrong:
        return None, _skipped_event(event, wrong)
    return event, None


def _skipped_event(event: Dict[str, Any], reason: str) -> Skipped:
    metadata = _metadata_of(event.get("object"))
    if isinstance(event.get("type"), str):
        metadata["type"] = event["type"]
    return Skipped(metadata, reason)
