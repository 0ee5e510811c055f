"""What the simulators in this folder share: their HTTP server with its access log, the in-process
wrapper the tests use, and the command-line serving loop. Standard library only: lsf_pac.py runs
with any python3, quantum_runtime.py with the qiskit venv's.
"""

import os
import signal
import sys
import threading
import time
from http.server import ThreadingHTTPServer


def utc(ts):
    """UTC YYYY-MM-DDTHH:MM:SSZ, or "" for no time."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts)) if ts else ""


class AccessLogServer(ThreadingHTTPServer):
    """The HTTP server with an access log: one "TIME METHOD path status" line per request, as a web
    server's access log has them (no query string, no headers: nothing secret)."""

    daemon_threads = True

    def __init__(self, address, handler, access_log=None):
        super().__init__(address, handler)
        self.access_log = open(access_log, "a", buffering=1) if access_log else None
        self.access_lock = threading.Lock()
        self.verbose = False
        self.app = None

    def access(self, method, path, status):
        if self.access_log:
            with self.access_lock:
                self.access_log.write("%s %s %s %d\n" % (utc(time.time()), method, path, status))

    def server_close(self):
        super().server_close()
        if self.access_log:
            self.access_log.close()


class InProcess(object):
    """A simulator in-process: `engine` (what runs the jobs: start() and shutdown()) behind `httpd`
    (an AccessLogServer on 127.0.0.1), served by a thread of its own; a context manager."""

    def __init__(self, engine, httpd, name):
        self.engine = engine
        self.httpd = httpd
        self.port = httpd.server_address[1]
        # A short poll interval: stop() returns within 0.1 s (tests start and stop several servers).
        self._thread = threading.Thread(target=httpd.serve_forever, args=(0.1,), name=name, daemon=True)

    def start(self):
        self.engine.start()
        self._thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.engine.shutdown()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def write_atomically(path, text):
    with open(path + ".tmp", "w") as handle:
        handle.write(text)
    os.replace(path + ".tmp", path)


def serve(simulator, port_file=None, banner=""):
    """Run `simulator` (an InProcess) until SIGTERM or SIGINT; write its port to `port_file` once it
    listens."""
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    simulator.start()
    if port_file:
        write_atomically(port_file, "%d\n" % simulator.port)
    sys.stderr.write(banner)
    done.wait()
    simulator.stop()
