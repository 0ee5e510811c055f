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

from common import SubmitBench

import httpx  # noqa: E402

from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec  # noqa: E402
from ansible_collections.bridge.hpc.plugins.module_utils.ray.client import RayClient  # noqa: E402
from ansible_collections.bridge.hpc.plugins.module_utils.ray.compile import compile_job  # noqa: E402

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
    client = RayClient(url)
    client.upload_package(SCRIPT)
    bench = SubmitBench(client, spec_for, args.jobs)
    raw_http = httpx.Client(base_url=url, timeout=30)

    def raw(identity):
        return raw_http.post("/api/jobs/", json=compile_job(spec_for(identity))).json()["submission_id"]

    # The head's first job start is several times slower than the rest; keep it out of the timing.
    bench.submitted.append(raw("bench-%s-warmup" % bench.run))
    bench.time_raw(raw, bench.identities("raw"))
    bench.time_client()
    bench.submitted += bench.time_playbook(PLAYBOOK, {"url": url})

    version = client.version().get("ray_version")
    bench.print_table("Ray %s, %d jobs per method (each runs `true`, deleted afterwards)" % (version, args.jobs))
    print("HTTP requests per ensure_present (new job): %d" % bench.requests_per_lifecycle(RayClient(url)))

    deadline = time.monotonic() + 300
    for job_id in bench.submitted:
        while not client.get(job_id)["terminal"] and time.monotonic() < deadline:
            time.sleep(0.5)
        client.delete(job_id)
    print("jobs submitted: %d, all finished and deleted" % len(bench.submitted))


if __name__ == "__main__":
    main()
