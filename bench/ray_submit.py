#!/usr/bin/env python
"""Cost of one Ray job submission three ways, measured in one run against the same Ray head.

  raw       one httpx POST per job of a prebuilt JobSubmitRequest (the floor)
  client    RayClient.submit (compile + package check + POST) and the whole module lifecycle
            ensure_present (lookup by submission id + node checks + submit + read back)
  playbook  ansible-playbook looping bridge.hpc.ray_job over the jobs

Every job runs `true` and is deleted at the end. Reads RAY_URL (tools/ray-cluster.sh env).
Prints per-job milliseconds and the ratios against the raw baseline.
"""

import argparse
import os
import time
import uuid

from common import print_table, timed, timed_playbook

import httpx  # noqa: E402

from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_present  # noqa: E402
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec  # noqa: E402
from ansible_collections.bridge.hpc.plugins.module_utils.ray import RayClient, compile_submit  # noqa: E402

SCRIPT = "#!/bin/bash\ntrue\n"
PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - bridge.hpc.ray_job:
        url: "{{ url }}"
        identity: "{{ item }}"
        script: "#!/bin/bash\\ntrue\\n"
      loop: "{{ identities }}"
"""


def spec_for(identity):
    return normalize_spec({"script": SCRIPT, "identity": identity})


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--jobs", type=int, default=10, help="jobs per method (default 10)")
    args = parser.parse_args()
    url = os.environ.get("RAY_URL") or os.environ["RAY_ADDRESS"]
    run = uuid.uuid4().hex[:6]
    client = RayClient(url)
    client.upload_package(SCRIPT)
    raw_http = httpx.Client(base_url=url, timeout=30)
    submitted = []

    def names(tag):
        return ["bench-%s-%s-%03d" % (run, tag, i) for i in range(args.jobs)]

    def raw(identity):
        response = raw_http.post("/api/jobs/", json=compile_submit(spec_for(identity)))
        submitted.append(response.json()["submission_id"])

    def client_submit(identity):
        submitted.append(client.submit(spec_for(identity)))

    def lifecycle(identity):
        submitted.append(ensure_present(client, spec_for(identity))["job"]["job_id"])

    # The head's first job start is several times slower than the rest; keep it out of the timing.
    raw("bench-%s-warmup" % run)
    results = {}
    results["raw POST"] = timed(raw, names("raw"))
    results["client.submit"] = timed(client_submit, names("cli"))
    results["ensure_present"] = timed(lifecycle, names("ens"))
    identities = names("pb")
    results["ansible-playbook"] = timed_playbook(PLAYBOOK, {"identities": identities, "url": url}, args.jobs)
    submitted += identities

    version = client.version().get("ray_version")
    print_table("Ray %s, %d jobs per method (each runs `true`, deleted afterwards)" % (version, args.jobs),
                results, args.jobs)
    probe = RayClient(url)
    ensure_present(probe, spec_for("bench-%s-count" % run))
    print("HTTP requests per ensure_present (new job): %d" % probe.transport.requests_sent)
    submitted.append("bench-%s-count" % run)

    deadline = time.monotonic() + 300
    for job_id in submitted:
        while not client.get(job_id)["terminal"] and time.monotonic() < deadline:
            time.sleep(0.5)
        client.delete(job_id)
    print("jobs submitted: %d, all finished and deleted" % len(submitted))


if __name__ == "__main__":
    main()
