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
Reads LSF_PAC_URL, LSF_USER, LSF_PASSWORD (.run/lsf/env, written by tools/lsf-pac.sh start).
Prints per-job milliseconds and the ratios against the raw baseline.
"""

import argparse
import os

from common import SubmitBench

import httpx  # noqa: E402

from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec  # noqa: E402
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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--jobs", type=int, default=20, help="jobs per method (default 20)")
    parser.add_argument("--queue", default="inactive",
                        help="queue of the jobs (default: inactive, the simulator's queue that keeps jobs pending)")
    args = parser.parse_args()
    url, user, password = os.environ["LSF_PAC_URL"], os.environ["LSF_USER"], os.environ["LSF_PASSWORD"]

    def spec_for(identity):
        return normalize_spec({"script": SCRIPT, "identity": identity, "queue": args.queue})

    client = LsfClient(url, user=user, password=password)
    bench = SubmitBench(client, spec_for, args.jobs)
    # PAC wants the token's double quotes as the literal #quote# in its cookie.
    cookie = "%s=%s" % (COOKIE, client.logon().replace('"', QUOTE))
    raw_http = httpx.Client(base_url=url, headers={"Accept": "application/json", "Cookie": cookie}, timeout=30)
    bodies = [multipart_body(compile_job(spec_for(identity))) for identity in bench.identities("raw")]

    def raw(body):
        content_type, content = body
        response = raw_http.post("/ws/jobs/submit", content=content, headers={"Content-Type": content_type})
        response.raise_for_status()
        return str(response.json()["id"])

    bench.time_raw(raw, bodies)
    bench.time_client()
    found = client.find_many(bench.time_playbook(PLAYBOOK, {"queue": args.queue}))
    playbook_jobs = [job["job_id"] for job in found.values()]
    probe = LsfClient(url, user=user, password=password)
    probe.logon()
    requests_per_lifecycle = bench.requests_per_lifecycle(probe)

    jobs = bench.submitted + playbook_jobs
    for job_id in jobs:
        client.cancel(job_id)

    bench.print_table("LSF Application Center SIMULATOR (tests/simulators/lsf_pac.py, not real LSF), "
                      "%d jobs per method, pending in queue %s, then killed" % (args.jobs, args.queue))
    print("HTTP requests per ensure_present (new job, logged on; queues and hosts are read once per client): %d"
          % requests_per_lifecycle)
    print("jobs submitted: %d, all killed; the simulator lists %d jobs until CLEAN_PERIOD forgets them" % (
        len(jobs), len(client.list())))


if __name__ == "__main__":
    main()
