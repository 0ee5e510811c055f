#!/usr/bin/env python
"""Record answers of the LSF Application Center SIMULATOR as unit-test fixtures.

PAC cannot be installed here, so these come from tests/simulators/lsf_pac.py, not from a real
Application Center: they prove the client reads what the simulator sends, nothing more. The
simulator runs in-process on a free port with a throwaway spool (it never touches the one
tools/lsf-pac.sh starts) and a short run-limit minute; the scenario submits jobs that complete,
exit 3, run into their run limit, are killed, and pend in an inactive queue, then writes one file
per answer:

    tests/unit/fixtures/lsf/simulator/<case>.json
    {"request": {"method", "path", "body"?}, "status", "headers": {"content-type"}, "body"}

`body` is the parsed JSON, or the raw text when the answer is not JSON. The logon password and the
session token are written as <password> and <token>.

    .venv/bin/python tools/record_lsf_fixtures.py      # ~10 s

Needs httpx (the project venv has it) and the collection importable (tools/bootstrap.sh, then
ANSIBLE_COLLECTIONS_PATH=.run/collections).
"""

import json
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec  # noqa: E402
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.client import LsfClient  # noqa: E402
from simulators.lsf_pac import LsfPacSimulator  # noqa: E402

OUT = REPO / "tests" / "unit" / "fixtures" / "lsf" / "simulator"
USER = "fixture"
PASSWORD = "fixture-password"
MINUTE_SECONDS = 1.0
TERMINAL = {"DONE", "EXIT"}


class Recorder:
    def __init__(self, url):
        self.http = httpx.Client(base_url=url.rstrip("/"), timeout=30, headers={"Accept": "application/json"})
        self.token = None
        OUT.mkdir(parents=True, exist_ok=True)

    def call(self, method, path, content=None, shown_body=None, headers=None):
        sent = dict(headers or {})
        if self.token:
            sent["Cookie"] = "platform_token=" + self.token.replace('"', "#quote#")
        resp = self.http.request(method, path, content=content, headers=sent)
        try:
            parsed = resp.json()
        except ValueError:
            parsed = resp.text
        request = {"method": method, "path": path}
        if shown_body is not None:
            request["body"] = shown_body
        return {"request": request, "status": resp.status_code,
                "headers": {"content-type": resp.headers.get("content-type")}, "body": parsed}

    def record(self, case, exchange):
        text = json.dumps(exchange, indent=2, ensure_ascii=False) + "\n"
        for secret, shown in ((self.token, "<token>"), (PASSWORD, "<password>")):
            if secret:
                text = text.replace(json.dumps(secret)[1:-1], shown).replace(secret, shown)
        (OUT / ("%s.json" % case)).write_text(text, encoding="utf-8")
        print("  lsf/simulator/%s: HTTP %s" % (case, exchange["status"]), flush=True)
        return exchange

    def logon(self):
        body = "<User><name>%s</name><pass>%s</pass></User>" % (USER, PASSWORD)
        exchange = self.call("POST", "/ws/logon", content=body.encode(), shown_body=body,
                             headers={"Content-Type": "application/xml"})
        self.token = exchange["body"]["token"]
        self.record("logon", exchange)

    def wait_state(self, job_id, states, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            exchange = self.call("GET", "/ws/jobs/%s" % job_id)
            if exchange["status"] == 200 and exchange["body"]["job"]["jobStatus"] in states:
                return exchange
            if time.monotonic() > deadline:
                raise SystemExit("job %s did not reach %s in %ss: %s" % (job_id, states, timeout, exchange["body"]))
            time.sleep(0.1)


def scenario(recorder, client):
    def submit(identity, script, **fields):
        return client.submit(normalize_spec(dict(fields, script=script, identity=identity)))

    recorder.logon()
    recorder.record("queues", recorder.call("GET", "/ws/queues"))
    recorder.record("hosts", recorder.call("GET", "/ws/hosts"))

    ok = submit("fixture-ok", "#!/bin/bash\necho hello\n", queue="normal")
    exit3 = submit("fixture-exit3", "#!/bin/bash\necho about to fail\nexit 3\n")
    timeout = submit("fixture-timeout", "#!/bin/bash\nsleep 30\n", resources={"time_limit": 1})
    sleeper = submit("fixture-killed", "#!/bin/bash\nsleep 30\n")
    pending = submit("fixture-pending", "#!/bin/bash\ntrue\n", queue="inactive")

    recorder.record("job_pending_inactive_queue", recorder.wait_state(pending, {"PEND"}))
    recorder.record("job_running", recorder.wait_state(sleeper, {"RUN"}))
    recorder.record("job_done", recorder.wait_state(ok, TERMINAL))
    recorder.record("job_exit3", recorder.wait_state(exit3, TERMINAL))
    recorder.record("kill", recorder.call("POST", "/ws/jobs/kill", content=("ids=%s" % sleeper).encode(),
                                          shown_body="ids=%s" % sleeper,
                                          headers={"Content-Type": "application/x-www-form-urlencoded"}))
    recorder.record("job_killed", recorder.wait_state(sleeper, TERMINAL))
    recorder.record("job_run_limit", recorder.wait_state(timeout, TERMINAL))
    recorder.record("job_unknown", recorder.call("GET", "/ws/jobs/999999"))
    recorder.record("jobs_fullinfo", recorder.call("GET", "/ws/jobs/fullinfo"))


def main():
    with tempfile.TemporaryDirectory(prefix="bridge-lsf-fixtures-") as spool:
        simulator = LsfPacSimulator(spool, {USER: PASSWORD}, minute_seconds=MINUTE_SECONDS, tick=0.05, kill_grace=0.3)
        with simulator:
            client = LsfClient(simulator.url, user=USER, password=PASSWORD, retries=0)
            try:
                scenario(Recorder(simulator.url), client)
            finally:
                client.close()


if __name__ == "__main__":
    main()
