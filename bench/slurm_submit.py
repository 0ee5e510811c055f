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
import uuid

from common import print_table, timed, timed_playbook

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
    results["ansible-playbook"] = timed_playbook(PLAYBOOK, {"identities": identities}, args.jobs)
    playbook_jobs = [j["job_id"] for j in client.list() if j["identity"] in set(identities)]

    for job_id in submitted + playbook_jobs:
        client.cancel(job_id)

    print_table("Slurm %s (REST %s), %d jobs per method, held then cancelled" % (
        client.ping().get("release"), version, args.jobs), results, args.jobs)
    probe = SlurmClient(url, user=user, token=token, api_version=version)
    ensure_present(probe, spec_for("bench-%s-count" % run))
    requests_per_lifecycle = probe.transport.requests_sent
    probe.cancel(probe.find("bench-%s-count" % run)["job_id"])
    print("HTTP requests per ensure_present (new job): %d" % requests_per_lifecycle)
    print("jobs submitted: %d, all cancelled" % (len(submitted) + len(playbook_jobs) + 1))


if __name__ == "__main__":
    main()
