"""What a server says back reaches a module's result only as the answer policy lets it (issue 37
item 7), as a user meets it: `ansible localhost -m bridge.hpc.lsf_job_info ...` and
`... quantum_job_info ...` against local listeners that answer as a tenant's URL may.

Before, LSF repeated any JSON {"message"} and IBM Quantum and its IAM any {"message"}, {"error"},
{"detail"} or {"title"} (`.../iam: INTERNAL-SECRET (HTTP 500)`), and only the exact secret was
scrubbed: an LSF password echoed XML-escaped and an IBM Cloud API key echoed URL-encoded reached
the result, and so a BridgeJob's status and the runner's artifacts.
"""

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, quote_plus
from xml.sax.saxutils import escape

import pytest

from conftest import adhoc_with_env_file

INTERNAL = "INTERNAL-SECRET"
PASSWORD = "p&ss<w>rd-37"
API_KEY = "api/key+37Zx=="


def forms(secret):
    """The secret as a server may echo it: raw, XML-escaped (named and numeric), URL-encoded
    (quote, quote_plus, lower-case hex), JSON-escaped, base64 and Basic user:secret."""
    return [secret, escape(secret), escape(secret).replace("&amp;", "&#38;"), quote(secret, safe=""),
            quote_plus(secret), quote(secret, safe="").lower(), json.dumps(secret)[1:-1],
            base64.b64encode(secret.encode()).decode(), base64.b64encode(("bridge:" + secret).encode()).decode()]


class Listener(object):
    """A local HTTP server whose answer to each request is answer(method, path, body) ->
    (status, content type, text)."""

    def __init__(self, answer):
        class Handler(BaseHTTPRequestHandler):
            def _reply(self):
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length).decode("utf-8", "replace") if length else ""
                status, kind, text = answer(self.command, self.path, body)
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _reply

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listen():
    started = []

    def start(answer):
        listener = Listener(answer)
        started.append(listener)
        return listener.url

    yield start
    for listener in started:
        listener.close()


def run(tmp_path, module, env, args):
    env_file = tmp_path / "env"
    env_file.write_text("".join("%s='%s'\n" % item for item in sorted(env.items())))
    completed = adhoc_with_env_file(str(env_file), module, "-a", args)
    output = completed.stdout + completed.stderr
    assert completed.returncode != 0 and "FAILED" in completed.stdout.partition(" => ")[0], output
    return json.loads(completed.stdout.partition(" => ")[2]), output


def assert_none_of(secret, output):
    shown = [form for form in forms(secret) if form in output]
    assert not shown, (shown, output)


# ---------------------------------------------------------------- LSF


def lsf(tmp_path, url):
    return run(tmp_path, "bridge.hpc.lsf_job_info",
               {"LSF_PAC_URL": url + "/platform", "LSF_USER": "bridge", "LSF_PASSWORD": PASSWORD}, "identity=echo-37")


@pytest.mark.parametrize("status", [401, 403, 500])
@pytest.mark.parametrize("kind", ["json", "xml"])
def test_lsf_a_refused_logon_echoing_the_password_xml_escaped(tmp_path, listen, status, kind):
    words = "%s: user bridge, password %s" % (INTERNAL, escape(PASSWORD))
    if kind == "json":
        page = (status, "application/json", json.dumps({"message": words, "errMsg": words}))
    else:
        page = (status, "application/xml", "<error><message>%s</message></error>" % escape(words))
    result, output = lsf(tmp_path, listen(lambda method, path, body: page))
    assert_none_of(PASSWORD, output)
    assert INTERNAL not in output, output
    assert result["msg"].endswith("(HTTP %d)" % status), result["msg"]


def test_lsf_after_a_logon_pacs_own_words_are_said_without_the_password(tmp_path, listen):
    def pac(method, path, body):
        if path.endswith("/ws/logon"):
            return 200, "application/json", json.dumps({"token": 'bridge"2099-01-01T00:00:00Z"c2ln'})
        echoed = " ".join(forms(PASSWORD))
        return 500, "application/xml", "<error><message>lsb_openjobinfo: %s</message></error>" % escape(echoed)

    result, output = lsf(tmp_path, listen(pac))
    assert "lsb_openjobinfo: ********" in result["msg"], result["msg"]
    assert_none_of(PASSWORD, output)


# ---------------------------------------------------------------- IBM Quantum and IAM


def quantum(tmp_path, api_url, iam_url):
    return run(tmp_path, "bridge.hpc.quantum_job_info",
               {"QUANTUM_URL": api_url + "/api/v1", "QUANTUM_IAM_URL": iam_url, "QUANTUM_API_KEY": API_KEY,
                "QUANTUM_SERVICE_CRN": "crn:v1:bluemix:public:quantum-computing:us-east:a/x:y::"}, "identity=echo-37")


def echo_of_the_form(body):
    """What IAM got, echoed as an IAM that repeats its request would: apikey=api%2Fkey%2B..."""
    return "%s: %s" % (INTERNAL, body)


@pytest.mark.parametrize("field", ["message", "error", "detail", "title"])
def test_quantum_an_iam_500_with_its_words_in_any_field(tmp_path, listen, field):
    iam = listen(lambda method, path, body: (500, "application/json", json.dumps({field: echo_of_the_form(body)})))
    result, output = quantum(tmp_path, listen(lambda method, path, body: (500, "text/plain", "")), iam)
    assert INTERNAL not in output and "apikey=" not in output, output
    assert_none_of(API_KEY, output)
    assert result["msg"].endswith("/iam: Internal Server Error (HTTP 500)") or "(HTTP 500)" in result["msg"]


def test_quantum_iams_own_refusal_is_said_with_the_key_url_encoded_scrubbed(tmp_path, listen):
    def iam(method, path, body):
        return 400, "application/json", json.dumps({"errorCode": "BXNIM0415E",
                                                    "errorMessage": "Provided API key could not be found: " + body})

    result, output = quantum(tmp_path, listen(lambda method, path, body: (500, "text/plain", "")), listen(iam))
    assert "Provided API key could not be found" in result["msg"] and "apikey=********" in result["msg"], result
    assert_none_of(API_KEY, output)


@pytest.mark.parametrize("field", ["message", "error", "detail", "title"])
def test_quantum_an_api_500_before_it_answered_as_the_api(tmp_path, listen, field):
    token = json.dumps({"access_token": "eyJhbGciOiJub25lIn0.e30.c2ln", "expires_in": 3600})
    iam = listen(lambda method, path, body: (200, "application/json", token))
    api = listen(lambda method, path, body: (500, "application/json", json.dumps({
        field: "%s %s" % (INTERNAL, " ".join(forms(API_KEY)))})))
    result, output = quantum(tmp_path, api, iam)
    assert INTERNAL not in output, output
    assert_none_of(API_KEY, output)
    assert "Internal Server Error (HTTP 500)" in result["msg"], result["msg"]
