"""The one scrubber (_scrub): a secret is masked in every encoding a server or a job may echo it in
(issue 37 item 7: an LSF password came back XML-escaped and an IBM Cloud API key URL-encoded, and
both reached a BridgeJob's status), and every place that masks secrets uses it."""

import base64
import html
import json
from urllib.parse import quote, quote_plus, unquote, unquote_plus
from xml.sax.saxutils import escape

import httpx
import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._output import scrub as scrub_output, tail
from ansible_collections.bridge.hpc.plugins.module_utils._scrub import MASK, MIN_BASE64_RUN, scrub
from ansible_collections.bridge.hpc.plugins.module_utils._transport import Transport

# Every character class an encoder treats differently: XML's five, JSON's quote, slash and
# backslash, URL's reserved ones, a space (quote_plus's +), a letter that hex digits share (a, f)
# and a character beyond ASCII (percent-encoded as two bytes, JSON-escaped as \u).
SECRET = 'p&ss<w>rd \'a\' "f/y+z\\" caf\u00e9 1%2'


def numeric(text, form):
    return "".join(form % ord(character) for character in text)


ENCODINGS = {
    "raw": SECRET,
    "json": json.dumps(SECRET)[1:-1],
    "json-ascii-only": json.dumps(SECRET, ensure_ascii=True)[1:-1],
    "json-slash-escaped": json.dumps(SECRET)[1:-1].replace("/", "\\/"),
    "json-all-as-u": numeric(SECRET, "\\u%04x"),
    "xml": escape(SECRET),
    "xml-with-quotes": escape(SECRET, {'"': "&quot;", "'": "&apos;"}),
    "html": html.escape(SECRET),
    "xml-numeric-decimal": numeric(SECRET, "&#%d;"),
    "xml-numeric-padded": numeric(SECRET, "&#00%d;"),
    "xml-numeric-hex-upper": numeric(SECRET, "&#x%X;"),
    "xml-numeric-hex-lower": numeric(SECRET, "&#x%x;"),
    "xml-mixed": html.escape(SECRET).replace("&amp;", "&#38;").replace("&lt;", "&#x3c;"),
    "xml-escaped-twice-decoded-once": escape(SECRET),  # what ElementTree leaves of &amp;amp;
    "url-quote": quote(SECRET, safe=""),
    "url-quote-keeps-slash": quote(SECRET),
    "url-quote-lower-hex": quote(SECRET, safe="").lower(),
    "url-quote-plus": quote_plus(SECRET),
    "url-quote-plus-lower-hex": quote_plus(SECRET).lower(),
    "base64": base64.b64encode(SECRET.encode()).decode(),
    "base64-unpadded": base64.b64encode(SECRET.encode()).decode().rstrip("="),
    "base64-urlsafe": base64.urlsafe_b64encode(SECRET.encode()).decode(),
    "base64-urlsafe-unpadded": base64.urlsafe_b64encode(SECRET.encode()).decode().rstrip("="),
}
# Basic authentication's user:password, at each of the three alignments the password can have.
for user in ("u", "us", "usr", "apikey"):
    credentials = ("%s:%s" % (user, SECRET)).encode()
    ENCODINGS["basic-%s" % user] = "Basic " + base64.b64encode(credentials).decode()
    ENCODINGS["basic-urlsafe-%s" % user] = base64.urlsafe_b64encode(credentials).decode().rstrip("=")


def recoverable(text):
    """Whether SECRET can be read back from `text` by undoing any one encoding of ENCODINGS."""
    candidates = [text, html.unescape(text)]
    for word in text.replace("Basic ", "").split():
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            try:
                candidates.append(decode(word + "=" * (-len(word) % 4)).decode("utf-8", "replace"))
            except ValueError:
                pass
    try:
        candidates.append(json.loads('"%s"' % text))
    except ValueError:
        pass
    candidates.extend([unquote(text), unquote_plus(text)])
    return any(SECRET in candidate for candidate in candidates)


@pytest.mark.parametrize("name", sorted(ENCODINGS))
def test_a_secret_is_masked_in_every_encoding(name):
    echoed = "refused %s for user bridge" % ENCODINGS[name]
    assert recoverable(echoed), "the test's own decoding must find the secret before scrubbing"
    scrubbed = scrub(echoed, [SECRET])
    assert MASK in scrubbed and not recoverable(scrubbed), scrubbed
    assert scrubbed.startswith("refused ") and scrubbed.endswith(" for user bridge")


def test_a_secret_is_masked_wherever_it_stands_in_base64_text():
    # A secret inside a longer base64 blob (a header, a serialized config): each of its alignments.
    for before in range(4):
        for after in range(3):
            blob = base64.b64encode(b"x" * before + SECRET.encode() + b"y" * after).decode()
            scrubbed = scrub(blob, [SECRET])
            # What is left is the few characters of the bytes around the secret, shared with it.
            assert MASK in scrubbed and len(scrubbed.replace(MASK, "")) <= 4 + (before + after) * 4 // 3 + 4, scrubbed


def test_a_short_secret_leaves_unrelated_base64_alone():
    # A run shorter than MIN_BASE64_RUN would match unrelated base64 text by chance.
    jwt_part = base64.urlsafe_b64encode(b'{"sub": "alice", "pin": "1234"}').decode()
    assert scrub(jwt_part, ["pin"]) == jwt_part
    assert MIN_BASE64_RUN >= 6


def test_the_longer_of_two_secrets_is_masked_whole():
    assert scrub("x LONG&SECRET y", ["SECRET", "LONG&SECRET"]) == "x %s y" % MASK
    assert scrub("x LONG&amp;SECRET y", ["SECRET", "LONG&SECRET"]) == "x %s y" % MASK


def test_text_without_secrets_is_unchanged():
    text = "Job <12> is not found: 100% & \u00e9"
    assert scrub(text, []) == text and scrub(text, ["zzzzzz"]) == text and scrub(None, ["x"]) == ""


def test_the_transport_and_job_output_scrub_every_encoding_too():
    transport = Transport("http://pac.test", "LSF", secrets=[SECRET],
                          http_client=httpx.Client(transport=httpx.MockTransport(lambda request: None)))
    for echoed in (ENCODINGS["xml"], ENCODINGS["url-quote-plus"], ENCODINGS["basic-us"]):
        assert not recoverable(transport.scrub("said " + echoed))
        assert not recoverable(scrub_output("said " + echoed, [SECRET]))
        assert not recoverable(tail(("out " + echoed + "\n").encode(), 5, secrets=[SECRET])["text"])
    transport.add_secret("another-token-9")
    assert transport.scrub(quote("another-token-9/x", safe="")) == MASK + "%2Fx"


def test_a_long_secret_is_masked_in_its_whole_encodings():
    # A whole kubeconfig is a secret too; matched character by character it would cost seconds.
    long_secret = "apiVersion: v1\nusers:\n- name: u\n  user: {token: 'a&b<c>/d+e'}\n" + "x" * 300
    for echoed in (long_secret, json.dumps(long_secret)[1:-1], escape(long_secret), quote(long_secret, safe=""),
                   quote_plus(long_secret).lower(), base64.b64encode(long_secret.encode()).decode()):
        assert scrub("said %s." % echoed, [long_secret]) == "said %s." % MASK
