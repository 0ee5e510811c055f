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
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(REPO, ".run", "collections")
sys.path.insert(0, COLLECTIONS)

import httpx  # noqa: E402

from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_present  # noqa: E402
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec  # noqa: E402
from ansible_collections.bridge.hpc.plugins.module_utils.slurm import SlurmClient, compile_submit  # noqa: E402

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


def timed(fn, items):
    durations = []
    started = time.perf_counter()
    for item in items:
        t0 = time.perf_counter()
        fn(item)
        durations.append(time.perf_counter() - t0)
    return time.perf_counter() - started, durations


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--jobs", type=int, default=20, help="jobs per method (default 20)")
    args = parser.parse_args()
    url, user, token = os.environ["SLURM_URL"], os.environ.get("SLURM_USER"), os.environ["SLURM_JWT"]
    run = uuid.uuid4().hex[:6]
    client = SlurmClient(url, user=user, token=token)
    version = client.api_version
    headers = {"X-SLURM-USER-TOKEN": token, "Content-Type": "application/json"}
    if user:
        headers["X-SLURM-USER-NAME"] = user
    raw_http = httpx.Client(base_url=url, headers=headers, timeout=30)
    submitted = []

    def raw(identity):
        body = compile_submit(spec_for(identity), version)
        response = raw_http.post("/slurm/%s/job/submit" % version, content=json.dumps(body))
        submitted.append(response.json()["job_id"])

    def client_submit(identity):
        submitted.append(client.submit(spec_for(identity)))

    def lifecycle(identity):
        submitted.append(ensure_present(client, spec_for(identity))["job"]["job_id"])

    def names(tag):
        return ["bench-%s-%s-%03d" % (run, tag, i) for i in range(args.jobs)]

    results = {}
    results["raw POST"] = timed(raw, names("raw"))
    results["client.submit"] = timed(client_submit, names("cli"))
    results["ensure_present"] = timed(lifecycle, names("ens"))

    identities = names("pb")
    with tempfile.TemporaryDirectory() as tmp:
        playbook = os.path.join(tmp, "bench.yml")
        with open(playbook, "w") as handle:
            handle.write(PLAYBOOK)
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_PYTHON_INTERPRETER=sys.executable,
                   ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
        ansible_playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
        t0 = time.perf_counter()
        subprocess.run([ansible_playbook, "-i", "localhost,", "-c", "local", playbook,
                        "-e", json.dumps({"identities": identities})], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        total = time.perf_counter() - t0
        results["ansible-playbook"] = (total, [total / args.jobs] * args.jobs)
    playbook_jobs = [j["job_id"] for j in client.list() if j["identity"] in set(identities)]

    for job_id in submitted + playbook_jobs:
        client.cancel(job_id)
    requests_per_lifecycle = None

    baseline = results["raw POST"][0] / args.jobs
    print("Slurm %s (REST %s), %d jobs per method, held then cancelled" % (
        client.ping().get("release"), version, args.jobs))
    print("%-18s %12s %12s %10s" % ("method", "ms/job mean", "ms/job p50", "x raw"))
    for method, (total, durations) in results.items():
        mean = total / args.jobs
        print("%-18s %12.1f %12.1f %10.1f" % (method, mean * 1000, statistics.median(durations) * 1000, mean / baseline))
    probe = SlurmClient(url, user=user, token=token, api_version=version)
    ensure_present(probe, spec_for("bench-%s-count" % run))
    requests_per_lifecycle = probe.transport.requests_sent
    probe.cancel(probe.find("bench-%s-count" % run)["job_id"])
    print("HTTP requests per ensure_present (new job): %d" % requests_per_lifecycle)
    print("jobs submitted: %d, all cancelled" % (len(submitted) + len(playbook_jobs) + 1))


if __name__ == "__main__":
    main()
