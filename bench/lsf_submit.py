#!/usr/bin/env python
"""Cost of one LSF submission four ways, measured in one run against the same PAC SIMULATOR.

The server is the LSF Application Center SIMULATOR (tests/simulators/lsf_pac.py, started by
tools/lsf-pac.sh), not real LSF nor a real Application Center: the numbers show what Bridge adds
over the PAC protocol, not how fast LSF accepts or schedules jobs.

  raw       one httpx POST per job to ws/jobs/submit of the nested multipart body, built
            beforehand with multipart_body, carrying the logon token's cookie (the floor)
  client    LsfClient.submit (compile + multipart body + POST) and, separately, the whole module
            lifecycle ensure_present (find by identity + queue and host checks + submit + read back)
  playbook  ansible-playbook looping bridge.hpc.lsf_job over the jobs (a process per task)

Jobs (the script `true`) go to the simulator's `inactive` queue (badmin qinact), where LSF keeps
them pending: they never start, use no CPU, do not disturb the timing, and are killed at the end.
(The simulator accepts bsub -H but does not hold jobs.) Killed jobs stay in the job list until LSF's
CLEAN_PERIOD ends, so runs right after each other find more jobs when they look an identity up.
Reads LSF_PAC_URL, LSF_USER, LSF_PASSWORD (.run/lsf/env, written by tools/lsf-pac.sh start), or with
--simulator starts a simulator of its own (a child process on a free port, a throwaway spool).
Prints per-job milliseconds and the ratios against the raw baseline.

--fill 0,10000 then measures the identity lookup by queue length: the user's jobs are filled up to
each length with raw POSTs to the inactive queue, every other one killed there (finished, kept
until CLEAN_PERIOD), and it times, p50 of --jobs each with one logged-on client, the raw POST of a
new job (the baseline of that length), ensure_present of a new job (lookup by name, then submit)
and of an existing one (lookup by name, then its detail by id), and the list of every job that
polls and the lookup without a name read; with the job records each read (counted in the answers)
and the ratios against that length's raw POST. Use --simulator for it: a shared simulator would
keep the filled jobs for CLEAN_PERIOD.
"""

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

from common import REPO, SubmitBench

import httpx  # noqa: E402

from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_present  # noqa: E402
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec  # noqa: E402
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.answers import records  # noqa: E402
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.client import COOKIE, QUOTE, LsfClient  # noqa: E402
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.compile import compile_job, multipart_body  # noqa: E402

SCRIPT = "#!/bin/bash\ntrue\n"
PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - bridge.hpc.lsf_job:
        identity: "{{ item }}"
        script: "#!/bin/bash\\ntrue\\n"
        queue: "{{ queue }}"
      loop: "{{ identities }}"
"""


class Simulator(object):
    """The PAC simulator as a child process of this benchmark, on a free port, with a throwaway spool."""

    def __init__(self):
        self.spool = tempfile.TemporaryDirectory(prefix="lsf-bench-")
        self.user, self.password = "bench", secrets.token_hex(8)
        users = os.path.join(self.spool.name, "users")
        with open(users, "w") as handle:
            handle.write("%s:%s\n" % (self.user, self.password))
        port_file = os.path.join(self.spool.name, "port")
        # A scheduling pass a second: a pass walks every job under the simulator's lock (about 30 ms
        # with 10,000), which at its default of ten a second would hold up a third of the requests.
        self.process = subprocess.Popen([sys.executable, os.path.join(REPO, "tests", "simulators", "lsf_pac.py"),
                                         "--port", "0", "--port-file", port_file, "--users-file", users,
                                         "--state-dir", os.path.join(self.spool.name, "state"), "--tick", "1"],
                                        stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while not os.path.exists(port_file):
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise SystemExit("the PAC simulator did not start")
            time.sleep(0.05)
        with open(port_file) as handle:
            self.url = "http://127.0.0.1:%d/platform/" % int(handle.read())

    def stop(self):
        self.process.terminate()
        self.process.wait()
        self.spool.cleanup()


class Raw(object):
    """httpx requests of the protocol alone, built beforehand, with the logon token's cookie."""

    def __init__(self, url, token):
        # PAC wants the token's double quotes as the literal #quote# in its cookie.
        cookie = "%s=%s" % (COOKIE, token.replace('"', QUOTE))
        self.http = httpx.Client(base_url=url, headers={"Accept": "application/json", "Cookie": cookie}, timeout=30)

    def post(self, body):
        content_type, content = body
        response = self.http.post("/ws/jobs/submit", content=content, headers={"Content-Type": content_type})
        response.raise_for_status()
        return str(response.json()["id"])

    def named(self, name):
        return self.http.get("/ws/jobs", params={"jobname": name}).status_code

    def kill(self, job_ids):
        # One bkill of many jobs: POST ws/jobs/kill takes a comma list (external-apis.md 2.4).
        self.http.post("/ws/jobs/kill", content="ids=%s" % ",".join(job_ids),
                       headers={"Content-Type": "application/x-www-form-urlencoded"}).raise_for_status()


class RecordsRead(object):
    """The job records (detailed or basic) in the answers to a client's lookups, counted: by name,
    by ids, the list; not the read of one job by its id after a submit."""

    PATHS = ("/ws/jobs", "/ws/jobs/getfullinfo", "/ws/jobs/fullinfo")

    def __init__(self, client):
        self.count = 0
        self.counting = False
        client.transport.http.event_hooks["response"].append(self.seen)

    def seen(self, response):
        if not self.counting or not response.request.url.path.endswith(self.PATHS) or response.status_code != 200:
            return
        response.read()
        try:
            self.count += len(records(json.loads(response.text), "job", "jobs"))
        except ValueError:
            pass

    def during(self, action):
        """The records read by action(), which is not timed: reading them again costs time."""
        before, self.counting = self.count, True
        try:
            action()
        finally:
            self.counting = False
        return self.count - before


class Lookups(object):
    """The lookup measured by queue length, with one logged-on client."""

    def __init__(self, client, raw, spec_for, rounds):
        self.client, self.raw, self.spec_for, self.rounds = client, raw, spec_for, rounds
        self.read = RecordsRead(client)
        self.run = uuid.uuid4().hex[:6]
        self.filled = []
        self.submitted = []

    def fill(self, count):
        """`count` more jobs of the user, raw POSTs, every other one killed."""
        job_ids = [self.raw.post(multipart_body(compile_job(self.spec_for("fill-%s-%05d" % (self.run, len(self.filled) + i)))))
                   for i in range(count)]
        self.filled.extend(job_ids)
        killed = job_ids[1::2]
        for first in range(0, len(killed), 1000):
            self.raw.kill(killed[first:first + 1000])

    def p50(self, action, items, counted):
        """(p50 seconds of action(item) for each item, records read by action(counted), not timed)."""
        durations = []
        for item in items:
            t0 = time.perf_counter()
            action(item)
            durations.append(time.perf_counter() - t0)
        return statistics.median(durations), self.read.during(lambda: action(counted))

    def measure(self, length):
        """A row: {way: (p50 seconds, records read)} at the current queue length."""
        names = ["look-%s-%d-%03d" % (self.run, length, i) for i in range(self.rounds + 1)]
        counted = names.pop()
        raw = [multipart_body(compile_job(self.spec_for(name + "-raw"))) for name in names + [counted]]
        row = {"raw POST": self.p50(lambda body: self.submitted.append(self.raw.post(body)), raw[:-1], raw[-1]),
               "raw GET name": self.p50(self.raw.named, names, counted)}

        def present(name):
            result = ensure_present(self.client, self.spec_for(name))
            self.submitted.append(result["job"]["job_id"])
            return result

        row["new job"] = self.p50(present, names, counted)
        row["existing job"] = self.p50(present, names, counted)
        row["list (poll)"] = self.p50(lambda name: self.client.find_many([name]), names, counted)
        return row


def lookup_table(rows, rounds):
    ways = ["raw POST", "raw GET name", "new job", "existing job", "list (poll)"]
    print("ensure_present by queue length, p50 of %d with one logged-on client; records: the job records its "
          "lookup read; raw GET name: one GET ws/jobs?jobname= of a name no job has (404), the server's part of "
          "a lookup" % rounds)
    print("%10s" % "jobs" + "".join(" %13s %7s %7s" % (way, "x raw", "records") for way in ways))
    for length, row in rows:
        floor = row["raw POST"][0]
        print("%10s" % format(length, ",") + "".join(
            " %10.1f ms %7.2f %7s" % (row[way][0] * 1000, row[way][0] / floor, "" if way.startswith("raw") else row[way][1])
            for way in ways))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--jobs", type=int, default=20, help="jobs per method (default 20)")
    parser.add_argument("--queue", default="inactive",
                        help="queue of the jobs (default: inactive, the simulator's queue that keeps jobs pending)")
    parser.add_argument("--simulator", action="store_true", help="start a PAC simulator of its own")
    parser.add_argument("--fill", default="", help="queue lengths of the lookup measurement, e.g. 0,10000")
    parser.add_argument("--no-methods", action="store_true", help="skip the four submit methods")
    args = parser.parse_args()
    simulator = Simulator() if args.simulator else None
    try:
        if simulator:
            url, user, password = simulator.url, simulator.user, simulator.password
        else:
            url, user, password = os.environ["LSF_PAC_URL"], os.environ["LSF_USER"], os.environ["LSF_PASSWORD"]
        bench(args, url, user, password)
    finally:
        if simulator:
            simulator.stop()


def bench(args, url, user, password):
    def spec_for(identity):
        return normalize_spec({"script": SCRIPT, "identity": identity, "queue": args.queue})

    client = LsfClient(url, user=user, password=password)
    bench = SubmitBench(client, spec_for, args.jobs)
    raw = Raw(url, client.logon())
    jobs = []
    if not args.no_methods:
        bodies = [multipart_body(compile_job(spec_for(identity))) for identity in bench.identities("raw")]
        bench.time_raw(raw.post, bodies)
        bench.time_client()
        found = client.find_many(bench.time_playbook(PLAYBOOK, {"queue": args.queue}))
        probe = LsfClient(url, user=user, password=password)
        probe.logon()
        requests_per_lifecycle = bench.requests_per_lifecycle(probe)
        jobs = bench.submitted + [job["job_id"] for job in found.values()]
    rows = []
    if args.fill:
        lookups = Lookups(client, raw, spec_for, args.jobs)
        # The client's first ensure_present reads the queues and hosts, which it keeps.
        ensure_present(client, spec_for("look-%s-warm" % lookups.run))
        for length in sorted(int(text) for text in args.fill.split(",")):
            lookups.fill(length - len(lookups.filled))
            rows.append((length, lookups.measure(length)))
        jobs += lookups.submitted + lookups.filled[::2]
    jobs = list(dict.fromkeys(jobs))
    for first in range(0, len(jobs), 1000):
        raw.kill(jobs[first:first + 1000])

    if not args.no_methods:
        bench.print_table("LSF Application Center SIMULATOR (tests/simulators/lsf_pac.py, not real LSF), "
                          "%d jobs per method, pending in queue %s, then killed" % (args.jobs, args.queue))
        print("HTTP requests per ensure_present (new job, logged on; queues and hosts are read once per client): %d"
              % requests_per_lifecycle)
    if rows:
        lookup_table(rows, args.jobs)
    print("jobs submitted: %d, all killed; the simulator lists %d jobs until CLEAN_PERIOD forgets them" % (
        len(jobs), len(client.list())))


if __name__ == "__main__":
    main()
