"""A client of any registered backend pointed at a test server (tests/fault_server.py), with a
token that must never show; shared by the tests of answers that are not the manager's API.

A backend that authenticates at a service of its own (IBM Quantum at IBM Cloud IAM, its `iam_url`)
is given either the test server there too, or TokenService: a token exchange that answers well.
"""

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

TOKEN = "t0ken"


def auth_options(backend):
    """The connection options naming a service the backend authenticates at besides its API."""
    return sorted(name for name in backend.connection_options() if name.endswith("_url"))


class TokenService(object):
    """IBM Cloud IAM's token exchange done right: every POST gets a JWT valid for an hour."""

    def __init__(self):
        claims = base64.urlsafe_b64encode(b'{"iat": 1796122800, "exp": 1796126400}').decode().rstrip("=")
        answer = json.dumps({"access_token": "eyJhbGciOiJub25lIn0.%s.c2ln" % claims, "expires_in": 3600}).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self._server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop(self):
        self._server.shutdown()
        self._server.server_close()


def client_for(backend, url, auth_url):
    """A client of `backend` at `url` (its auth service at `auth_url`) that times out after 1 s and
    never retries."""
    options = {"url": url, "validate_certs": False, "timeout": 1.0, "retries": 0}
    options.update((name, auth_url) for name in auth_options(backend))
    # Credentials that are no secret (a user name, an instance CRN) are set to something plain;
    # every secret the backend declares (a token, LSF's password) is the one that must never show.
    options.update((name, "bridge") for name in backend.CREDENTIALS)
    options.update((secret, TOKEN) for secret in backend.SECRETS)
    if "kubeconfig_content" in backend.SECRETS:
        # The secret is a whole kubeconfig; its token is what must never show.
        options["kubeconfig_content"] = json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": url}}], "users": [{"name": "u", "user": {"token": TOKEN}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]})
    return backend.from_options(options.get)


@pytest.fixture(scope="module")
def token_service():
    service = TokenService()
    yield service
    service.stop()
