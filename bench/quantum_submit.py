#!/usr/bin/env python
"""Cost of one IBM Quantum submission four ways, measured in one run against the same Runtime SIMULATOR.

The server is the Qiskit Runtime SIMULATOR (tests/simulators/quantum_runtime.py, started by
tools/quantum-runtime.sh), not IBM Quantum: the numbers show what Bridge adds over the Qiskit
Runtime REST protocol, not how fast IBM's service accepts jobs (nor its five jobs a minute).

  raw       one httpx POST /jobs per job of the body compile_job built beforehand, already
            serialized, with the IAM bearer token and the Service-CRN and IBM-API-Version headers
            (the floor; the token is fetched before timing)
  client    QuantumClient.submit (compile + POST) and, separately, the whole module lifecycle
            ensure_present (find by tag + device list, status, configuration and usage + submit + read back)
  playbook  ansible-playbook looping bridge.hpc.quantum_job over the jobs (a process per task)

Where the jobs go. The simulator's paused device (ibm_lima) keeps jobs Queued, but ensure_present,
and so quantum_job, refuses a device that is not operational, and a job that runs is executed with
qiskit-aer inside the very process whose answers are being timed. So every method submits to one
operational device (--device, default the first of QUANTUM_DEVICES), and before timing one untimed
hold job occupies it: a sampler PUB of 10 million executions (the service's cap), which keeps the
simulated device Running for 0.2 + 0.00005 s a shot at the simulator's defaults, longer than the
hold's maximum execution time (300 s). The simulator runs one job at a time per device, so the
benchmark's jobs (a 1-shot measurement each) stay Queued behind the hold, which waits without
using the CPU; left alone, it would end Cancelled "RAN TOO LONG" after 300 s without being
simulated either. At the end every job is cancelled, the hold last, so no circuit is simulated;
the run fails if the hold stopped holding before that (a longer run, or a simulator started with
other timings).
Reads QUANTUM_URL, QUANTUM_IAM_URL, QUANTUM_API_KEY, QUANTUM_SERVICE_CRN and QUANTUM_DEVICES
(.run/quantum/env, written by tools/quantum-runtime.sh start).
Prints per-job milliseconds and the ratios against the raw baseline.
"""

import argparse
import json
import os
import sys
import time

from common import SubmitBench

import httpx  # noqa: E402

from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec  # noqa: E402
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.client import QuantumClient  # noqa: E402
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.compile import compile_job  # noqa: E402

MEASURE = "OPENQASM 3.0;\nbit[1] c;\nc[0] = measure $0;\n"
# The hold: one parameterized PUB of HOLD_BINDINGS x HOLD_SHOTS = 10 million executions, the
# service's cap (IBM: "Job limits"), under the devices' max_shots of 6000.
HOLD = "OPENQASM 3.0;\ninclude \"stdgates.inc\";\ninput float[64] theta;\nbit[1] c;\nrz(theta) $0;\nc[0] = measure $0;\n"
HOLD_BINDINGS, HOLD_SHOTS = 2000, 5000
HOLD_MINUTES = 5
PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - bridge.hpc.quantum_job:
        identity: "{{ item }}"
        script: "OPENQASM 3.0;\\nbit[1] c;\\nc[0] = measure $0;\\n"
        queue: "{{ device }}"
        backend_options:
          quantum:
            shots: 1
      loop: "{{ identities }}"
"""


def hold_device(client, device, run):
    """Submit the hold job and wait until the device runs it; its job id."""
    spec = normalize_spec({"script": HOLD, "identity": "bench-%s-hold" % run, "queue": device,
                           "resources": {"time_limit": HOLD_MINUTES},
                           "backend_options": {"quantum": {"shots": HOLD_SHOTS,
                                                           "pubs": [{"parameter_values": [[0.0]] * HOLD_BINDINGS}]}}},
                          client)
    client.check(spec)
    job_id = client.submit(spec)
    deadline = time.monotonic() + 30
    while client.get(job_id)["phase"] != "running":
        if time.monotonic() > deadline:
            client.cancel(job_id)
            sys.exit("device %s did not start the hold job within 30 s (other jobs queued on it?)" % device)
        time.sleep(0.1)
    return job_id


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--jobs", type=int, default=20, help="jobs per method (default 20)")
    parser.add_argument("--device", default=os.environ.get("QUANTUM_DEVICES", "ibm_manila").split(",")[0],
                        help="operational device the jobs queue on (default: the first of QUANTUM_DEVICES)")
    args = parser.parse_args()
    url, iam_url = os.environ["QUANTUM_URL"], os.environ["QUANTUM_IAM_URL"]
    api_key, crn = os.environ["QUANTUM_API_KEY"], os.environ["QUANTUM_SERVICE_CRN"]

    def new_client():
        return QuantumClient(url, api_key=api_key, service_crn=crn, iam_url=iam_url)

    def spec_for(identity):
        return normalize_spec({"script": MEASURE, "identity": identity, "queue": args.device,
                               "backend_options": {"quantum": {"shots": 1}}}, QuantumClient)

    client = new_client()
    bench = SubmitBench(client, spec_for, args.jobs)
    hold = hold_device(new_client(), args.device, bench.run)
    raw_http = httpx.Client(base_url=url, timeout=30, headers={
        "Accept": "application/json", "Content-Type": "application/json",
        "Authorization": "Bearer %s" % client.authenticate(), "Service-CRN": crn,
        "IBM-API-Version": client.api_version})
    bodies = [json.dumps(compile_job(spec_for(identity))).encode() for identity in bench.identities("raw")]

    def raw(body):
        response = raw_http.post("/jobs", content=body)
        response.raise_for_status()
        return response.json()["id"]

    try:
        bench.time_raw(raw, bodies)
        bench.time_client()
        bench.time_playbook(PLAYBOOK, {"device": args.device})
        probe = new_client()
        probe.authenticate()
        requests_per_lifecycle = bench.requests_per_lifecycle(probe)
        held = client.get(hold)["phase"] == "running"
    finally:
        # The playbook's job ids are not seen: its jobs are found by their identities.
        playbook_jobs = client.find_many(bench.identities("pb"))
        jobs = bench.submitted + [job["job_id"] for job in playbook_jobs.values()]
        for job_id in jobs:
            client.cancel(job_id)
        client.cancel(hold)

    bench.print_table("Qiskit Runtime SIMULATOR (tests/simulators/quantum_runtime.py, not IBM Quantum), "
                      "%d jobs per method, queued on %s behind a hold job, then cancelled" % (args.jobs, args.device))
    print("HTTP requests per ensure_present (new job, token held; devices, status, configuration and usage are "
          "read once per client): %d" % requests_per_lifecycle)
    pending = client.list(phases=["queued", "running"], device=args.device)
    print("jobs submitted: %d and the hold, all cancelled; still pending on %s: %d" % (
        len(jobs), args.device, len(pending)))
    if not held:
        sys.exit("the hold job ended before the benchmark did: queued jobs may have run during the timing")


if __name__ == "__main__":
    main()
