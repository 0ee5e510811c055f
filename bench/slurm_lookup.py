#!/usr/bin/env python
"""Cost of the identity lookup before a submit, by queue length, both ways, in one run.

  accounting  SlurmClient's lookup: slurmdbd searched by job name (then slurmctld only for what
              accounting does not have)
  live        the same client with accounting switched off: every job slurmctld remembers is listed

For each queue length (0, 1,000, 10,000 held jobs by default, submitted in parallel with raw POSTs,
so they use no CPU) it times ensure_present of a spec whose identity exists (the re-run of a play:
a finished job, and a running one) with a fresh client per call, as each module run has, and prints
the p50 of each way and the ratios against the empty queue, measured in the same run. Every job it
submits is cancelled at the end.

Where the env file names the accounting database (SLURM_DB_SOCKET, SLURM_DB_JOB_TABLE and
SLURM_DB_JOB_NAME_INDEX, as tools/slurm-cluster.sh writes them), the accounting way is measured
twice: with the index on the job name that docs/slurm.md asks sites for, and with it dropped for
the measurement (it is added back).

Reads SLURM_URL, SLURM_USER, SLURM_JWT of a cluster with accounting (tools/slurm-cluster.sh env).
"""

import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import time
import uuid

import httpx

# common puts the collection on sys.path.
import common  # noqa: F401 pylint: disable=unused-import
from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_present  # noqa: E402
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec  # noqa: E402
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient  # noqa: E402
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.compile import compile_job  # noqa: E402


def spec_for(identity, script="#!/bin/bash\ntrue\n", hold=False):
    options = {"backend_options": {"slurm": {"hold": True}}} if hold else {}
    return normalize_spec(dict({"script": script, "identity": identity, "queue": "debug",
                                "resources": {"time_limit": 5}}, **options))


class Cluster(object):
    def __init__(self):
        self.url, self.user, self.token = os.environ["SLURM_URL"], os.environ.get("SLURM_USER"), os.environ["SLURM_JWT"]
        self.client = self.new_client()
        self.version = self.client.api_version
        headers = {"X-SLURM-USER-TOKEN": self.token, "Content-Type": "application/json"}
        if self.user:
            headers["X-SLURM-USER-NAME"] = self.user
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=60)
        self.submitted = []

    def new_client(self, accounting=True):
        client = SlurmClient(self.url, user=self.user, token=self.token,
                             api_version=getattr(self, "version", None), timeout=60)
        if not accounting:
            client._accounting = False  # pylint: disable=protected-access
        return client

    def post(self, spec):
        answer = self.http.post("/slurm/%s/job/submit" % self.version, content=json.dumps(compile_job(spec, self.version)))
        answer.raise_for_status()
        job_id = str(answer.json()["job_id"])
        self.submitted.append(job_id)
        return job_id

    def fill(self, count, run):
        """Held jobs up to `count` in the queue, four POSTs at a time."""
        names = ["fill-%s-%05d" % (run, i) for i in range(count)]
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda name: self.post(spec_for(name, hold=True)), names))

    def cancel_all(self):
        def cancel(job_id):
            self.http.delete("/slurm/%s/job/%s" % (self.version, job_id))
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(cancel, self.submitted))

    def queue_length(self):
        return len(self.client.list())


class JobNameIndex(object):
    """The job name index of the accounting database, dropped and added back by the mariadb client."""

    def __init__(self):
        self.socket = os.environ.get("SLURM_DB_SOCKET")
        self.table, self.name = os.environ.get("SLURM_DB_JOB_TABLE"), os.environ.get("SLURM_DB_JOB_NAME_INDEX")

    def known(self):
        return bool(self.socket and self.table and self.name)

    def sql(self, statement):
        subprocess.run(["mariadb", "--no-defaults", "--socket=%s" % self.socket, "-u", "root", "-e", statement], check=True)

    def drop(self):
        self.sql("ALTER TABLE %s DROP INDEX IF EXISTS %s" % (self.table, self.name))

    def add(self):
        self.sql("ALTER TABLE %s ADD INDEX IF NOT EXISTS %s (job_name(64))" % (self.table, self.name))


def p50_lookup(cluster, spec, accounting, rounds):
    """(p50 seconds, lookup path) of ensure_present finding `spec`'s job, a fresh client each time."""
    durations, paths = [], set()
    for _round in range(rounds):
        client = cluster.new_client(accounting)
        t0 = time.perf_counter()
        result = ensure_present(client, spec)
        durations.append(time.perf_counter() - t0)
        assert not result["changed"], "the lookup missed job %s: it submitted again" % result["job"]["job_id"]
        paths.add(result.get("lookup"))
        client.close()
    return statistics.median(durations), "/".join(sorted(p or "-" for p in paths))


def wait_until_recorded(cluster, spec, job_id, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        client = cluster.new_client()
        found = client.find(spec["identity"], name=spec["name"])
        if found is not None and found["job_id"] == job_id and client.lookup == "accounting":
            return
        time.sleep(0.5)
    raise SystemExit("job %s is not in accounting after %ds: is slurmdbd running?" % (job_id, timeout))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queue", type=int, nargs="+", default=[0, 1000, 10000], help="queue lengths (default 0 1000 10000)")
    parser.add_argument("--rounds", type=int, default=5, help="lookups per way and length (default 5)")
    args = parser.parse_args()
    cluster = Cluster()
    if not cluster.new_client().accounting_available():
        raise SystemExit("%s serves no Slurm accounting: start the cluster with accounting" % cluster.url)
    before = cluster.queue_length()
    if before > 50:
        print("warning: %d jobs already in the queue; the 0-length row is not an empty queue" % before)
    run = uuid.uuid4().hex[:6]
    finished = spec_for("lookup-%s-done" % run)
    running = spec_for("lookup-%s-held" % run, hold=True)
    rows = []
    index = JobNameIndex()
    if index.known():
        index.add()
    try:
        for spec in (finished, running):
            wait_until_recorded(cluster, spec, cluster.post(spec))
        filled = 0
        for length in sorted(args.queue):
            cluster.fill(length - filled, run)
            filled = length
            row = {"queued": cluster.queue_length()}
            for label, spec in (("finished", finished), ("held", running)):
                for way, accounting in (("accounting", True), ("live", False)):
                    row[(label, way)] = p50_lookup(cluster, spec, accounting, args.rounds)
            if index.known():
                index.drop()
                try:
                    for label, spec in (("finished", finished), ("held", running)):
                        row[(label, "unindexed")] = p50_lookup(cluster, spec, True, args.rounds)
                finally:
                    index.add()
            rows.append(row)
    finally:
        cluster.cancel_all()
    print("Slurm %s (REST %s): ensure_present of an identity that exists, p50 of %d, fresh client each" % (
        cluster.client.ping().get("release"), cluster.version, args.rounds))
    ways = ["accounting", "unindexed", "live"] if index.known() else ["accounting", "live"]
    titles = {"accounting": "accounting ms", "unindexed": "no index ms", "live": "live ms"}
    print("%8s %-9s" % ("queued", "job") + "".join(" %14s %8s" % (titles[way], "x empty") for way in ways) + "  paths")
    for row in rows:
        for label in ("finished", "held"):
            cells = "".join(" %14.1f %8.2f" % (row[(label, way)][0] * 1000, row[(label, way)][0] / rows[0][(label, way)][0])
                            for way in ways)
            print("%8d %-9s%s  %s" % (row["queued"], label, cells, ", ".join(row[(label, way)][1] for way in ways)))
    print("jobs submitted: %d, all cancelled" % len(cluster.submitted))


if __name__ == "__main__":
    main()
