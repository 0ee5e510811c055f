"""A threaded HTTP server on 127.0.0.1 that answers every request with one configurable fault.

For tests of how clients take answers that are not their manager's API: a login proxy's HTML page,
another service's JSON, a cut body, a reset connection, a server slower than the client's timeout.
Any method, any path; one fault at a time, chosen by `mode` (settable while the server runs):

    with FaultServer("html") as server:
        client = Client(server.url)
        ...
        server.mode = "truncated"
        server.serve_page(404, "text/plain", "a page of another service")   # mode "page"

Every answer is bounded in time (`slow` sleeps `delay` seconds, at most MAX_DELAY) and closes the
connection. The `html` and `status_500_html` pages echo the request's headers back, as debugging
proxies and framework error pages do: a client that puts raw bodies into its messages without
scrubbing them then leaks its token, and a test sees it.
"""

import html
import json
import socket
import socketserver
import struct
import threading
import time

# Common fields of the managers' answers (slurmrestd, Ray, the Qiskit Runtime API and IBM Cloud
# IAM), each with a type none of them ever sends.
WRONG_TYPES = {
    "warnings": 5, "errors": "x", "jobs": "notalist", "pings": 3, "meta": 7, "partitions": {"a": 1},
    "nodes": "n", "data": [], "version": 5, "ray_version": [], "submission_id": 5, "job_id": {}, "status": 7,
    "access_token": 7, "expires_in": "soon", "devices": {"ibm_x": 1}, "id": [], "state": "Running", "count": "3",
    "usage_limit_reached": "no", "n_qubits": "5", "results": {}, "pub_results": 1,
}
HUGE_LIST_LENGTH = 20000
REASONS = {200: "OK", 404: "Not Found"}
MAX_DELAY = 3.0

MODES = ("wrong_types", "html", "empty", "truncated", "huge_list", "not_json_object", "reset", "slow",
         "status_500_html")
# Not a fault of its own: the page serve_page() set, for tests of what a client repeats of a body.
PAGE = "page"

LOGIN_PAGE = """<!DOCTYPE html>
<html><head><title>Sign in</title></head>
<body><h1>Single sign-on</h1>
<form method="post" action="/login"><input name="username"><input name="password" type="password">
<button>Sign in</button></form>
<!-- request seen by the proxy:
%s
--></body></html>
"""

ERROR_PAGE = """<!DOCTYPE html>
<html><head><title>500 Internal Server Error</title></head>
<body><h1>Internal Server Error</h1><p>The server encountered an internal error.</p>
<pre>%s</pre></body></html>
"""


def _huge_list():
    # Many objects, none of them a job of any manager.
    return json.dumps({"jobs": [{"id": n} for n in range(HUGE_LIST_LENGTH)]}).encode()


class FaultServer(object):
    """Serves `mode` on http://127.0.0.1:<free port>; `requests` lists (method, path) received."""

    def __init__(self, mode="wrong_types", delay=1.5):
        if delay > MAX_DELAY:
            raise ValueError("delay is bounded by %s s" % MAX_DELAY)
        self.mode = mode
        self.delay = delay
        self.requests = []
        self.page = (200, "text/plain", b"")
        self._lock = threading.Lock()
        self._huge = None
        owner = self

        class Handler(socketserver.StreamRequestHandler):
            timeout = 10  # a client that never finishes its request does not hold a thread forever

            def handle(self):
                owner._handle(self)

        class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self._thread = None

    @property
    def mode(self):
        return self._mode

    @mode.setter
    def mode(self, mode):
        if mode not in MODES + (PAGE,):
            raise ValueError("unknown fault mode %r; known: %s" % (mode, ", ".join(MODES + (PAGE,))))
        self._mode = mode

    def serve_page(self, status, content_type, text):
        """Answer every request with this page (mode "page")."""
        self.page = (status, content_type, text.encode("utf-8"))
        self.mode = PAGE

    def start(self):
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()

    def clear(self):
        with self._lock:
            del self.requests[:]

    # ------------------------------------------------------------------ one request

    def _handle(self, handler):
        try:
            request = self._read_request(handler.rfile)
        except (OSError, ValueError):
            return
        if request is None:
            return
        method, path, headers = request
        with self._lock:
            self.requests.append((method, path))
        mode = self._mode
        if mode == "reset":
            self._reset(handler.connection)
            return
        if mode == "slow":
            time.sleep(min(self.delay, MAX_DELAY))
        status, content_type, body = self._answer(mode, method, path, headers)
        head = ["HTTP/1.1 %d %s" % (status, REASONS.get(status, "Internal Server Error")),
                "Content-Type: %s" % content_type, "Content-Length: %d" % len(body), "Connection: close", "", ""]
        try:
            handler.wfile.write("\r\n".join(head).encode("latin-1") + body)
            handler.wfile.flush()
        except OSError:
            pass  # the client gave up (its timeout), as `slow` intends

    @staticmethod
    def _read_request(rfile):
        """(method, path, [(name, value)]) of one request, its body read and dropped; None at EOF."""
        line = rfile.readline(65537)
        if not line.strip():
            return None
        method, path = line.decode("latin-1").split()[:2]
        headers = []
        while True:
            line = rfile.readline(65537)
            if line in (b"\r\n", b"\n", b""):
                break
            name, _colon, value = line.decode("latin-1").partition(":")
            headers.append((name.strip(), value.strip()))
        length = int(dict((n.lower(), v) for n, v in headers).get("content-length") or 0)
        while length > 0:
            chunk = rfile.read(min(length, 65536))
            if not chunk:
                break
            length -= len(chunk)
        return method, path, headers

    @staticmethod
    def _reset(connection):
        # SO_LINGER with a zero timeout: close() sends RST instead of FIN.
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.close()

    def _answer(self, mode, method, path, headers):
        echo = html.escape("%s %s\n%s" % (method, path, "\n".join("%s: %s" % h for h in headers)))
        if mode in ("wrong_types", "slow"):
            return 200, "application/json", json.dumps(WRONG_TYPES).encode()
        if mode == "html":
            return 200, "text/html; charset=utf-8", (LOGIN_PAGE % echo).encode()
        if mode == "empty":
            return 200, "application/json", b""
        if mode == "truncated":
            whole = json.dumps({"jobs": [{"job_id": 1, "name": "cut", "job_state": ["RUNNING"]}]}).encode()
            return 200, "application/json", whole[:len(whole) // 2]
        if mode == "huge_list":
            if self._huge is None:
                self._huge = _huge_list()
            return 200, "application/json", self._huge
        if mode == "not_json_object":
            return 200, "application/json", b"[1, 2, 3]"
        if mode == "status_500_html":
            return 500, "text/html; charset=utf-8", (ERROR_PAGE % echo).encode()
        if mode == PAGE:
            return self.page
        raise AssertionError("unhandled mode %r" % mode)
