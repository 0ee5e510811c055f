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

from common import SubmitBench

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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--jobs", type=int, default=20, help="jobs per method (default 20)")
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


if __name__ == "__main__":
    main()
