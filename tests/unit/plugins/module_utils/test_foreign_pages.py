"""A client pointed at a server that is not its manager's API never repeats that server's body
(issue 21: whoever creates a BridgeJob chooses its URL and reads its status, so a URL pointing at an
internal page must not read the page back to them).

Every backend's verbs meet an HTML page, an XML page and a text page holding SECRET, answered with 200, 404 and
500; whatever they raise names neither the phrase nor any other line of the page. Quantum meets the
pages from its IAM service too. Below, the helpers of _backend that say what came instead.
"""

import json

import httpx
import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._backend import (
    ShapeError,
    decode,
    items,
    json_of,
    shape_reason,
)
from ansible_collections.bridge.hpc.plugins.module_utils._errors import BridgeError, MalformedResponse
from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec
from backend_clients import auth_options, client_for, token_service  # noqa: F401 pylint: disable=unused-import
from fault_server import FaultServer

SECRET = "internal-secret-7f3a"
IDENTITY = "foreign-1"
SPEC = normalize_spec({"script": "#!/bin/bash\ntrue\n", "identity": IDENTITY,
                       "backend_options": {"kubernetes": {"image": "busybox"}}})
PAGES = {
    "html": ("text/html; charset=utf-8",
             "<!DOCTYPE html>\n<html><head><title>Admin %s</title></head><body><p>%s</p></body></html>\n" % (
                 SECRET, SECRET)),
    # XHTML without a DOCTYPE parses as XML, as PAC's answers do.
    "xml": ("application/xml", "<div><p>%s</p></div>" % SECRET),
    # Shaped like the errors of the managers that answer text (Ray's tracebacks, slurmrestd's 401),
    # with the lines a client looks for in them.
    "text": ("text/plain; charset=utf-8",
             "Traceback (most recent call last):\n  File \"admin.py\", line 1\n"
             "ValueError: %s already exists in a non-terminal state; authentication token\n" % SECRET),
}
STATUSES = (200, 404, 500)
VERBS = {
    "describe": lambda client: client.describe(),
    "check": lambda client: client.check(SPEC),
    "submit": lambda client: client.submit(SPEC),
    "find": lambda client: client.find(IDENTITY),
    "get": lambda client: client.get("1"),
    "list": lambda client: client.list(),
    "cancel": lambda client: client.cancel("1"),
    "logs": lambda client: client.logs("1"),
}
CASES = [
    pytest.param(name, where, page, status, verb,
                 id="%s-%s%s-%d-%s" % (name, "auth-" if where == "auth" else "", page, status, verb))
    for name, backend in sorted(BACKENDS.items())
    for where in (("api", "auth") if auth_options(backend) else ("api",))
    for page in sorted(PAGES)
    for status in STATUSES
    for verb in VERBS
    if verb != "logs" or "logs" in backend.CAPABILITIES
]


@pytest.fixture(scope="module")
def server():
    with FaultServer() as running:
        yield running


def page_lines():
    return [line.strip() for _type, text in PAGES.values() for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("name, where, page, status, verb", CASES)
def test_no_error_repeats_the_page(server, token_service, name, where, page, status, verb):
    content_type, text = PAGES[page]
    server.serve_page(status, content_type, text)
    client = client_for(BACKENDS[name], server.url, server.url if where == "auth" else token_service.url)
    try:
        try:
            VERBS[verb](client)
        except BridgeError as exc:
            error = exc
        else:
            return  # a 404 that means "no such job", a cancel that found nothing to stop
        said = [str(error), json.dumps(error.to_dict())] + list(client.warnings)
        for words in said:
            assert SECRET not in words, words
            assert not [line for line in page_lines() if line in words], words
    finally:
        client.close()


@pytest.mark.parametrize("name", sorted(BACKENDS))
@pytest.mark.parametrize("status", [404, 500])
def test_a_json_error_of_a_server_that_has_not_shown_it_is_the_api_is_not_repeated(server, token_service, name, status):
    # Every field a manager's client reads its message from (issue 37: LSF repeated any {"message"},
    # IBM Quantum any {"message"}, {"error"}, {"detail"} or {"title"}, Slurm any errors[]), in a body
    # that carries no mark of the manager (a Kubernetes Status, slurmrestd's meta, IBM's trace).
    fields = ("message", "detail", "error", "title", "errMsg", "errorMessage", "description")
    body = dict((field, SECRET) for field in fields)
    body["errors"] = [dict((field, SECRET) for field in fields)]
    server.serve_page(status, "application/json", json.dumps(body))
    client = client_for(BACKENDS[name], server.url, token_service.url)
    try:
        with pytest.raises(BridgeError) as failed:
            client.get("1")
    finally:
        client.close()
    assert SECRET not in str(failed.value) and SECRET not in json.dumps(failed.value.to_dict())


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_describe_of_an_html_page_names_its_type_and_size(server, token_service, name):
    server.serve_page(200, "text/html; charset=utf-8", PAGES["html"][1])
    client = client_for(BACKENDS[name], server.url, token_service.url)
    try:
        with pytest.raises(BridgeError) as failed:
            client.describe()
    finally:
        client.close()
    assert SECRET not in str(failed.value)
    if isinstance(failed.value, MalformedResponse) and "not JSON" in str(failed.value):
        assert "text/html (%s bytes) that is not JSON" % "{:,}".format(len(PAGES["html"][1])) in str(failed.value)


# ---------------------------------------------------------------- what json_of and decode say


def answer(status, content_type, body):
    return httpx.Response(status, headers={"content-type": content_type}, content=body.encode())


def test_json_of_names_the_content_type_and_size_only():
    page = "<html>%s</html>" % SECRET * 100
    with pytest.raises(MalformedResponse) as failed:
        json_of(answer(200, "text/html; charset=utf-8", page), "GET /x", "Slurm", "http://h", "list", "jobs")
    assert failed.value.reason == (
        "GET /x answered text/html (%s bytes) that is not JSON; is http://h the Slurm API?" % "{:,}".format(len(page)))


@pytest.mark.parametrize("content_type, said", [
    ("", "no content type"),
    ("text/%s" % SECRET + "x" * 80, "an unnamed content type"),
    ("%s; charset=utf-8" % SECRET, "an unnamed content type"),
    ("Application/XHTML+XML; charset=utf-8", "application/xhtml+xml"),
])
def test_json_of_repeats_a_content_type_only_when_it_is_a_media_type(content_type, said):
    with pytest.raises(MalformedResponse) as failed:
        json_of(answer(200, content_type, "not json"), "GET /x", "Ray", "http://h", "list", "jobs")
    assert "answered %s (8 bytes) that is not JSON" % said in failed.value.reason
    assert SECRET not in failed.value.reason


def test_json_of_an_empty_body_says_so():
    with pytest.raises(MalformedResponse, match="answered an empty body; is http://h the Ray API"):
        json_of(answer(200, "application/json", "  \n"), "GET /x", "Ray", "http://h", "list", "jobs")


def malformed(parse, body):
    with pytest.raises(MalformedResponse) as failed:
        decode(parse, body, "GET /x", "Slurm", "http://h", "list", "jobs")
    assert SECRET not in str(failed.value) and SECRET not in json.dumps(failed.value.to_dict())
    return failed.value.reason


def test_decode_names_other_exceptions_by_their_type_only():
    assert "(ValueError)" in malformed(lambda body: int(body["count"]), {"count": SECRET})
    assert "(TypeError)" in malformed(lambda body: body["jobs"] + 1, {"jobs": SECRET})
    assert "(AttributeError)" in malformed(lambda body: body.nothing, SECRET)


def test_decode_keeps_the_words_of_our_own_checks():
    assert "('jobs' must be a list of objects, got str)" in malformed(lambda body: items(body, "jobs"), {"jobs": SECRET})
    assert "(no 'jobs' in the answer)" in malformed(lambda body: items(body, "jobs", required=True), {SECRET: 1})


def test_decode_names_a_missing_key_of_ours_but_not_one_taken_from_the_answer():
    assert "(no 'metadata')" in malformed(lambda body: body["metadata"]["uid"], {"kind": SECRET})
    states = {"RUNNING": "running"}
    assert "(KeyError)" in malformed(lambda body: states[body["state"]], {"state": SECRET})


def test_shape_reason_of_a_shape_error_is_its_message():
    assert shape_reason(ShapeError("'state' must be an object"), {SECRET: 1}) == "'state' must be an object"
