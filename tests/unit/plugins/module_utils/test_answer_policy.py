"""One answer policy for every client (_backend.manager_reason; issue 37 item 7).

A manager's own words reach a message only from a server that has shown it is that manager's API,
scrubbed of every secret in every encoding, on one line and bounded; otherwise the HTTP status's
standard phrase stands for them. Before, LSF repeated any JSON {"message"} and IBM Quantum and its
IAM any {"message"}, {"error"}, {"detail"} or {"title"}: `.../iam: INTERNAL-SECRET (HTTP 500)`,
and a password echoed XML-escaped or an API key URL-encoded reached the BridgeJob's status.
"""

import base64
import json
from urllib.parse import quote, quote_plus, urlencode
from xml.sax.saxutils import escape

import httpx
import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._backend import REASON_LENGTH, manager_reason
from ansible_collections.bridge.hpc.plugins.module_utils._errors import AuthFailed, BridgeError
from ansible_collections.bridge.hpc.plugins.module_utils._scrub import MASK
from ansible_collections.bridge.hpc.plugins.module_utils._transport import Transport
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.client import LsfClient
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.client import QuantumClient, ibm_error

INTERNAL = "INTERNAL-SECRET"
PASSWORD = "p&ss<w>rd"
API_KEY = "api/key+Zx9=="
PAC = "http://pac.test/platform"
API = "http://quantum.test/api/v1"
IAM = "http://iam.test"
# Each field a JSON error service names its message with, which LSF and Quantum read.
FIELDS = ("message", "error", "detail", "title", "errorMessage", "errMsg")


def said(error):
    return [str(error), json.dumps(error.to_dict())]


def forms_of(secret):
    """The encodings a server echoed a secret in, in issue 37."""
    return [secret, escape(secret), quote(secret, safe=""), quote_plus(secret), quote(secret, safe="").lower()]


# ---------------------------------------------------------------- the rule


def test_an_unvouched_server_is_named_by_its_status_only():
    assert manager_reason(INTERNAL, 500, lambda text: text, False) == "Internal Server Error"
    assert manager_reason(INTERNAL, None, lambda text: text, False) is None


def test_a_vouched_servers_words_are_scrubbed_printable_and_bounded():
    scrub = Transport("http://x.test", "X", secrets=[PASSWORD],
                      http_client=httpx.Client(transport=httpx.MockTransport(lambda request: None))).scrub
    words = "bad\x1b[31m password\r\n %s\x00 %s %s" % (escape(PASSWORD), "x" * 1000, "\u2028")
    reason = manager_reason(words, 400, scrub, True)
    assert reason.startswith("bad password %s x" % MASK) and len(reason) == REASON_LENGTH
    assert "\x1b" not in reason and "\n" not in reason and "&amp;" not in reason
    # A secret with a control character inside is whole once the character is gone.
    assert manager_reason("p&ss\x07<w>rd", 400, scrub, True) == MASK
    assert manager_reason("  \x00 ", 404, scrub, True) == "Not Found"


# ---------------------------------------------------------------- LSF


def pac_client(handler):
    http = httpx.Client(base_url=PAC, transport=httpx.MockTransport(handler), headers={"Accept": "application/json"})
    transport = Transport(PAC, "LSF", secrets=[PASSWORD], http_client=http, sleep=lambda s: None)
    return LsfClient(PAC, user="bridge", password=PASSWORD, transport=transport, clock=lambda: 0.0)


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("status", [400, 401, 403, 404, 500])
def test_lsf_never_repeats_the_error_of_a_server_that_has_not_logged_it_on(field, status):
    client = pac_client(lambda request: httpx.Response(status, json={field: INTERNAL}))
    with pytest.raises(BridgeError) as failed:
        client.get("1")
    assert not [words for words in said(failed.value) if INTERNAL in words]


@pytest.mark.parametrize("body", [
    lambda password: (401, "application/json", json.dumps({"message": "user bridge, password %s: refused" % escape(password)})),
    lambda password: (401, "application/xml", "<error><message>password %s refused</message></error>" % escape(
        escape(password))),
])
def test_lsf_a_refused_logon_echoing_the_password_xml_escaped_shows_no_password(body):
    status, kind, text = body(PASSWORD)
    client = pac_client(lambda request: httpx.Response(status, text=text, headers={"content-type": kind}))
    with pytest.raises(AuthFailed) as failed:
        client.logon()
    for words in said(failed.value):
        assert not [form for form in forms_of(PASSWORD) if form in words], words
    assert "Unauthorized (HTTP 401)" in str(failed.value)


@pytest.mark.parametrize("echoed", forms_of(PASSWORD) + ["&#112;&#38;ss&#x3C;w&#x3e;rd"])
def test_lsf_after_a_logon_pacs_words_are_said_without_the_password(echoed):
    def pac(request):
        if request.url.path.endswith("/ws/logon"):
            return httpx.Response(200, json={"token": 'bridge"2099-01-01T00:00:00Z"sig'})
        return httpx.Response(500, text="<error><message>job 1: %s</message></error>" % escape(echoed),
                              headers={"content-type": "application/xml"})

    client = pac_client(pac)
    with pytest.raises(BridgeError) as failed:
        client.get("1")
    assert "job 1: %s (HTTP 500)" % MASK in str(failed.value)
    for words in said(failed.value):
        assert not [form for form in forms_of(PASSWORD) if form in words], words


# ---------------------------------------------------------------- IBM Quantum and its IAM


def quantum_client(api, iam, clock=lambda: 0.0):
    client = QuantumClient(API, api_key=API_KEY, service_crn="crn:v1:x", iam_url=IAM, retries=0, clock=clock)
    for part, handler in ((client.transport, api), (client.iam, iam)):
        part.http.close()
        part.http = httpx.Client(base_url=part.base_url, transport=httpx.MockTransport(handler))
    return client


def token(request):
    return httpx.Response(200, json={"access_token": "a.b.c", "expires_in": 100})


DEVICES = httpx.Response(200, json={"devices": []})


@pytest.mark.parametrize("field", FIELDS + ("errors",))
@pytest.mark.parametrize("status", [400, 401, 403, 500])
def test_quantum_iam_never_repeats_a_servers_error_before_it_gave_a_token(field, status):
    body = {field: [{"message": INTERNAL}] if field == "errors" else INTERNAL}
    client = quantum_client(lambda request: DEVICES, lambda request: httpx.Response(status, json=body))
    with pytest.raises(BridgeError) as failed:
        client.devices()
    assert not [words for words in said(failed.value) if INTERNAL in words]
    assert str(failed.value).endswith("(HTTP %d)" % status)


@pytest.mark.parametrize("field", FIELDS + ("errors",))
def test_quantum_api_never_repeats_a_servers_error_before_it_answered_as_the_api(field):
    body = {field: [{"message": INTERNAL}] if field == "errors" else INTERNAL}
    client = quantum_client(lambda request: httpx.Response(500, json=body), token)
    with pytest.raises(BridgeError) as failed:
        client.get("j1")
    assert not [words for words in said(failed.value) if INTERNAL in words]
    assert "Internal Server Error (HTTP 500)" in str(failed.value)


def test_quantum_iams_own_error_is_said_with_the_key_url_encoded_scrubbed():
    echoed = urlencode([("grant_type", "urn:ibm:params:oauth:grant-type:apikey"), ("apikey", API_KEY)])
    body = {"errorCode": "BXNIM0415E", "errorMessage": "Provided API key could not be found: %s" % echoed}
    client = quantum_client(lambda request: DEVICES, lambda request: httpx.Response(400, json=body))
    with pytest.raises(AuthFailed) as failed:
        client.devices()
    assert "Provided API key could not be found: grant_type=" in str(failed.value)
    assert "apikey=%s (code BXNIM0415E)" % MASK in str(failed.value)
    for words in said(failed.value):
        assert not [form for form in forms_of(API_KEY) if form in words], words


def test_quantum_iam_renewal_refused_after_a_token_is_said_scrubbed():
    now = [0.0]
    answers = [token(None), httpx.Response(500, json={"message": "upstream said apikey=%s" % quote_plus(API_KEY)})]
    client = quantum_client(lambda request: DEVICES, lambda request: answers.pop(0), clock=lambda: now[0])
    client.devices()
    now[0] = 1000.0  # past the renewal time
    with pytest.raises(BridgeError) as failed:
        client.devices()
    assert "upstream said apikey=%s (HTTP 500)" % MASK in str(failed.value)


def test_quantum_api_words_after_a_device_list_are_scrubbed_of_the_key_and_the_token():
    basic = base64.b64encode(("apikey:%s" % API_KEY).encode()).decode()
    answers = [DEVICES, httpx.Response(500, json={"title": "echo Basic %s a.b.c" % basic})]
    client = quantum_client(lambda request: answers.pop(0), token)
    client.devices()
    with pytest.raises(BridgeError) as failed:
        client.get("j1")
    echoed = str(failed.value).split("echo Basic ")[1].split()[0]
    assert MASK in echoed and API_KEY.encode() not in base64.b64decode(echoed.replace(MASK, "") + "==", validate=False)
    assert "a.b.c" not in str(failed.value) and str(failed.value).endswith("%s (HTTP 500)" % MASK)


@pytest.mark.parametrize("body, status, own", [
    ({"errorCode": "BXNIM0415E", "errorMessage": "x"}, 400, True),
    ({"errors": [{"code": 1291, "message": "x"}], "trace": "ab", "status_code": 404}, 404, True),
    ({"errors": [{"code": 1291, "message": "x"}], "trace": "ab", "status_code": 404}, 500, False),
    ({"errors": [{"message": "x"}]}, 404, False),
    ({"errorCode": "E1", "errorMessage": "x"}, 400, False),
    ({"message": "x", "detail": "x", "title": "x", "error": "x"}, 500, False),
    ("x", 500, False),
])
def test_ibm_error_formats_vouch_for_their_server(body, status, own):
    assert ibm_error(body, status) is own
