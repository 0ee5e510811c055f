# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Application Center's answers as plain data (pure): XML read as the JSON PAC would have sent,
records that are one object or a list of them, error messages, and the texts and numbers of fields.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
from xml.etree import ElementTree

from ansible_collections.bridge.hpc.plugins.module_utils._backend import ShapeError


def parse_answer(text):
    """A PAC answer as plain data: JSON as it is, XML as the JSON PAC would have sent.

    XML becomes what the root element holds (PAC's JSON drops the root): children by tag, a
    repeated tag as a list, attributes as "@name", a leaf as its text. A DOCTYPE is refused, so no
    entity is ever expanded (PAC sends none; an HTML page of a proxy has one). None for no body.
    """
    text = (text or "").strip()
    if not text:
        return None
    if text[0] != "<":
        try:
            return json.loads(text)
        except ValueError:
            raise ShapeError("neither XML nor JSON")
    if "<!DOCTYPE" in text.upper() or "<!ENTITY" in text.upper():
        raise ShapeError("XML with a DOCTYPE, which PAC never sends")
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as exc:
        raise ShapeError("XML that does not parse (%s)" % exc)
    return {"@root": root.tag, "value": _element(root)}


def _element(node):
    children = list(node)
    if not children and not node.attrib:
        return (node.text or "").strip()
    result = dict(("@" + key, value) for key, value in node.attrib.items())
    if not children and node.text and node.text.strip():
        result["#text"] = node.text.strip()
    for child in children:
        value = _element(child)
        if child.tag not in result:
            result[child.tag] = value
        elif isinstance(result[child.tag], list):
            result[child.tag].append(value)
        else:
            result[child.tag] = [result[child.tag], value]
    return result


def unwrap(answer):
    """(root tag or None, body) of a parse_answer result."""
    if isinstance(answer, dict) and set(answer) == {"@root", "value"}:
        return answer["@root"], answer["value"]
    return None, answer


def records(body, record, wrapper):
    """The `record` objects of a list answer: {"@total", record: one or [many]}, maybe inside
    {wrapper: ...}, or a JSON list of them; an empty root element (<jobs/>) has none."""
    if body == "":
        return []
    if isinstance(body, list):
        body = {record: body}
    if not isinstance(body, dict):
        raise ShapeError("expected an object holding %s records, got %s" % (record, type(body).__name__))
    if wrapper in body:
        body = body[wrapper]
        if body == "":
            return []
        if not isinstance(body, dict):
            raise ShapeError("'%s' must be an object, got %s" % (wrapper, type(body).__name__))
    pseudo = "pseudo" + record[0].upper() + record[1:]
    if not set(body) & {record, pseudo, "@total"}:
        raise ShapeError("neither '%s' records nor '@total' in the answer" % record)
    found = []
    for key in (record, pseudo):
        value = body.get(key)
        if value in (None, ""):
            continue
        value = value if isinstance(value, list) else [value]
        if not all(isinstance(item, dict) for item in value):
            raise ShapeError("'%s' must hold objects" % key)
        found.extend(value)
    return found


def error_text(body):
    """PAC's message in an error answer: <error><message>, JSON message, legacy <errMsg>."""
    _root, value = unwrap(body)
    if isinstance(value, dict):
        for key in ("message", "errMsg", "error"):
            if isinstance(value.get(key), str) and value[key].strip():
                return value[key].strip()
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def text_of(value):
    if value is None or isinstance(value, (dict, list)):
        return None
    value = "%s" % (value,)
    return value.strip() or None


def integer_of(value):
    text = text_of(value)
    if text is None:
        return None
    try:
        return int(float(text))
    except ValueError:
        return None
