"""Every backend's every verb against answers that are not its manager's API (issue item 6).

A URL may point at a login proxy, another service, a server that cuts the body or hangs up. Each
verb of the contract (_backend.Backend) must then raise a typed BridgeError, never a TypeError or
KeyError of the malformed answer, and never with the token in its message. `describe`, which
discovery uses to tell "this is not that manager's API", must say MalformedResponse for any answer
that has the wrong shape. Only `render` may return normally, and only when it needs no request.

The fault server (tests/fault_server.py) answers on 127.0.0.1; the client times out after 1 s and
never retries, and `slow` answers after 1.5 s, so the whole matrix takes about a minute.

A backend that authenticates at a service of its own (IBM Quantum at IBM Cloud IAM, its `iam_url`)
meets each fault twice: from that service (`auth`), and from its API behind a token service that
answers well (`api`).
"""

import json

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._errors import BridgeError, MalformedResponse
from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec
from backend_clients import TOKEN, auth_options, client_for, token_service  # noqa: F401 pylint: disable=unused-import
from fault_server import MODES, FaultServer

IDENTITY = "fault-1"
SPEC = normalize_spec({"script": "#!/bin/bash\ntrue\n", "identity": IDENTITY,
                       "backend_options": {"kubernetes": {"image": "busybox"}}})

# Answers whose shape is wrong although the HTTP exchange worked: describe must call them malformed.
WRONG_SHAPE = ("html", "wrong_types", "empty", "huge_list", "not_json_object")

VERBS = {
    "describe": lambda client: client.describe(),
    "render": lambda client: client.render(SPEC),
    "check": lambda client: client.check(SPEC),
    "submit": lambda client: client.submit(SPEC),
    "find_many": lambda client: client.find_many([IDENTITY]),
    "find": lambda client: client.find(IDENTITY),
    "get": lambda client: client.get("1"),
    "list": lambda client: client.list(),
    "cancel": lambda client: client.cancel("1"),
    "logs": lambda client: client.logs("1"),
    "inventory": lambda client: client.inventory(),
    "capacity": lambda client: client.capacity(),
}


CASES = [
    pytest.param(name, where, fault, verb, id="%s-%s%s-%s" % (name, "auth-" if where == "auth" else "", fault, verb))
    for name, backend in sorted(BACKENDS.items())
    for where in (("api", "auth") if auth_options(backend) else ("api",))
    for fault in MODES
    for verb in VERBS
    if verb != "logs" or "logs" in backend.CAPABILITIES
]


@pytest.fixture(scope="module")
def server():
    with FaultServer(delay=1.5) as running:
        yield running


@pytest.mark.parametrize("name, where, fault, verb", CASES)
def test_a_malformed_answer_is_a_typed_error_without_the_token(server, token_service, name, where, fault, verb):
    server.mode = fault
    server.clear()
    client = client_for(BACKENDS[name], server.url, server.url if where == "auth" else token_service.url)
    try:
        try:
            outcome = VERBS[verb](client)
        except BridgeError as exc:
            error = exc
        else:
            assert verb == "render" and not server.requests, (
                "%s returned %.300r from a %s answer instead of raising" % (verb, outcome, fault))
            return
        for text in (str(error), error.reason, json.dumps(error.to_dict())):
            assert TOKEN not in text
        assert not [warning for warning in client.warnings if TOKEN in warning]
        if verb == "describe" and fault in WRONG_SHAPE:
            assert isinstance(error, MalformedResponse), "%s: %s" % (type(error).__name__, error)
    finally:
        client.close()
