#!/usr/bin/env python
"""Cost of one Slurm submission three ways, measured in one run against the same slurmrestd.

  raw       one httpx POST per job with a prebuilt body (the floor: what the network and
            slurmrestd cost)
  client    SlurmClient.submit (compile + POST) and, separately, the whole module lifecycle
            ensure_present (find by identity + partition checks + submit + read back)
  playbook  ansible-playbook looping bridge.hpc.slurm_job over the jobs (a process per task)

Jobs are submitted held (backend_options.slurm.hold) so they use no CPU and do not disturb the
timing, and are cancelled at the end. Reads SLURM_URL, SLURM_USER, SLURM_JWT (tools/slurm-cluster.sh
env 22.05). Prints per-job milliseconds and the ratios against the raw baseline.

With --queue 0 10000 it then fills the queue with held jobs to each length in turn and times, at
each, the raw POST, the lookup alone of an identity no job carries (`lookup`), and ensure_present of
a new job and of an existing one (a fresh client each, as each module run has), printing the
ratios against the raw POST and against the empty queue, the lookup's way and the jobs it read
(issue 27: a new job's submit costs the same on a busy cluster).
"""

import argparse
import json
import os
import statistics
import time
import uuid

from common import SubmitBench
from slurm_lookup import Cluster

import httpx  # noqa: E402

from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec  # noqa: E402
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient  # noqa: E402
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.compile import compile_job  # noqa: E402

SCRIPT = "#!/bin/bash\ntrue\n"
PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - bridge.hpc.slurm_job:
        identity: "{{ item }}"
        script: "#!/bin/bash\\ntrue\\n"
        queue: debug
        resources: {time_limit: 1}
        backend_options: {slurm: {hold: true}}
      loop: "{{ identities }}"
"""


def spec_for(identity):
    return normalize_spec({"script": SCRIPT, "identity": identity, "queue": "debug",
                           "resources": {"time_limit": 1}, "backend_options": {"slurm": {"hold": True}}})


class JobsRead(object):
    """An httpx response hook that counts the jobs each answer holds (slurmctld's or accounting's)."""

    def __init__(self):
        self.count = 0

    def __call__(self, response):
        response.read()
        try:
            self.count += len(response.json().get("jobs") or [])
        except ValueError:
            pass


def counting_client(cluster):
    """(a fresh SlurmClient, as each module run has, and the JobsRead that counts what it reads)."""
    import httpx
    from ansible_collections.bridge.hpc.plugins.module_utils._transport import Transport
    from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient

    jobs_read = JobsRead()
    http = httpx.Client(base_url=cluster.url, timeout=60, event_hooks={"response": [jobs_read]})
    client = SlurmClient(cluster.url, user=cluster.user, token=cluster.token, api_version=cluster.version,
                         transport=Transport(cluster.url, "Slurm", secrets=[cluster.token], http_client=http))
    return client, jobs_read


def timed_ensure(cluster, spec):
    """(seconds, lookup way, jobs read, changed) of ensure_present of `spec` with a fresh client."""
    from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_present

    client, jobs_read = counting_client(cluster)
    t0 = time.perf_counter()
    result = ensure_present(client, spec)
    seconds = time.perf_counter() - t0
    if result["changed"]:
        cluster.submitted.append(result["job"]["job_id"])
    client.close()
    return seconds, result.get("lookup"), jobs_read.count, result["changed"]


def timed_lookup(cluster, identity):
    """(seconds, lookup way, jobs read, found) of the identity lookup alone, with a fresh client."""
    client, jobs_read = counting_client(cluster)
    t0 = time.perf_counter()
    found = client.find(identity)
    seconds = time.perf_counter() - t0
    client.close()
    return seconds, client.lookup, jobs_read.count, found is not None


def queue_table(lengths, rounds):
    """The lookup alone, and ensure_present of a new and of an existing job, at each queue length, against
    the raw POST."""
    cluster = Cluster()
    run = uuid.uuid4().hex[:6]
    rows, filled = [], 0
    try:
        for length in sorted(lengths):
            cluster.fill(length - filled, run)
            filled = length
            raw = statistics.median(
                timed_call(lambda: cluster.post(spec_for("raw-%s-%d-%d" % (run, length, i)))) for i in range(rounds))
            lookup = [timed_lookup(cluster, "absent-%s-%d-%d" % (run, length, i)) for i in range(rounds)]
            assert not any(found for _s, _w, _r, found in lookup), "an identity no job carries was found"
            new = [timed_ensure(cluster, spec_for("new-%s-%d-%d" % (run, length, i))) for i in range(rounds)]
            assert all(changed for _s, _w, _r, changed in new), "a new identity was found: %s" % new
            existing = spec_for("new-%s-%d-0" % (run, length))
            again = [timed_ensure(cluster, existing) for _i in range(rounds)]
            assert not any(changed for _s, _w, _r, changed in again), "an existing job was submitted again"
            rows.append((cluster.queue_length(), raw, lookup, new, again))
    finally:
        cluster.cancel_all()
    print("Slurm %s (REST %s): ensure_present by queue length, p50 of %d, a fresh client each" % (
        cluster.client.ping().get("release"), cluster.version, rounds))
    print("%8s %10s %-9s %10s %7s %9s %9s  %s" % ("queued", "raw ms", "job", "ensure ms", "x raw", "x empty",
                                                  "jobs read", "lookup"))
    empty = {}
    for queued, raw, lookup, new, again in rows:
        for label, samples in (("lookup", lookup), ("new", new), ("existing", again)):
            p50 = statistics.median(sample[0] for sample in samples)
            empty.setdefault(label, p50)
            ways = "/".join(sorted(set(str(sample[1]) for sample in samples)))
            read = max(sample[2] for sample in samples)
            cells = (queued, raw * 1000, label, p50 * 1000, p50 / raw, p50 / empty[label], read, ways)
            print("%8d %10.1f %-9s %10.1f %7.2f %9.2f %9d  %s" % cells)
    print("jobs submitted: %d, all cancelled" % len(cluster.submitted))


def timed_call(call):
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--jobs", type=int, default=20, help="jobs per method (default 20)")
    parser.add_argument("--queue", type=int, nargs="+", help="queue lengths to fill to, after the default table "
                        "(e.g. 0 10000)")
    parser.add_argument("--rounds", type=int, default=9, help="samples per row of --queue (default 9)")
    args = parser.parse_args()
    url, user, token = os.environ["SLURM_URL"], os.environ.get("SLURM_USER"), os.environ["SLURM_JWT"]
    client = SlurmClient(url, user=user, token=token)
    bench = SubmitBench(client, spec_for, args.jobs)
    version = client.api_version
    headers = {"X-SLURM-USER-TOKEN": token, "Content-Type": "application/json"}
    if user:
        headers["X-SLURM-USER-NAME"] = user
    raw_http = httpx.Client(base_url=url, headers=headers, timeout=30)

    def raw(identity):
        body = compile_job(spec_for(identity), version)
        return raw_http.post("/slurm/%s/job/submit" % version, content=json.dumps(body)).json()["job_id"]

    bench.time_raw(raw, bench.identities("raw"))
    bench.time_client()
    identities = set(bench.time_playbook(PLAYBOOK))
    playbook_jobs = [j["job_id"] for j in client.list() if j["identity"] in identities]
    requests_per_lifecycle = bench.requests_per_lifecycle(SlurmClient(url, user=user, token=token,
                                                                      api_version=version))

    for job_id in bench.submitted + playbook_jobs:
        client.cancel(job_id)

    bench.print_table("Slurm %s (REST %s), %d jobs per method, held then cancelled" % (
        client.ping().get("release"), version, args.jobs))
    print("HTTP requests per ensure_present (new job): %d" % requests_per_lifecycle)
    print("jobs submitted: %d, all cancelled" % (len(bench.submitted) + len(playbook_jobs)))
    if args.queue:
        queue_table(args.queue, args.rounds)


if __name__ == "__main__":
    main()
