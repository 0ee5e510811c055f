#!/usr/bin/env python
"""Placement's cost per BridgeJob and the probe's cost per backend, in one run.

  probe      capacity() of every backend whose service runs here (.run/<service>/env), each time
             from a new client as the controller's probe makes one: seconds (p50 of --repeat)
             and HTTP requests per probe (version discovery and logons included), against
             describe() from a new client in the same run (what knowing that the backend is up
             costs); the ratio is what a probe costs on top. The controller probes each backend
             object once per probeIntervalSeconds, whatever the number of BridgeJobs.
  placement  _placement.place of --jobs job specs of mixed shapes (CPUs, memory, GPUs, nodes, run
             time) over the records just read, every backend a candidate, FirstFit and
             LeastQueued: microseconds per BridgeJob, against normalize_spec of the same spec for
             one backend (what the controller does for every CR anyway). Placement reads no
             service: its cost is this, whatever the backends' distance.

Reads the env files the service scripts write (make services); a service that is not running is
left out. Prints per-unit costs and ratios; asserts nothing.
"""

import argparse
import os
import random
import statistics
import time

from common import REPO, read_env

from ansible_collections.bridge.hpc.plugins.module_utils._placement import place  # noqa: E402
from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS  # noqa: E402
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec  # noqa: E402

RUN = os.environ.get("BRIDGE_RUN", os.path.join(REPO, ".run"))
# (candidate name, backend type, env file under RUN, {option: env variable} beyond the backend's ENV)
SERVICES = (
    ("slurm-22.05", "slurm", "slurm-22.05/env", {}),
    ("slurm-24.11", "slurm", "slurm-24.11/env", {}),
    ("slurm-26.05", "slurm", "slurm-26.05/env", {}),
    ("ray", "ray", "ray/env", {}),
    ("lsf", "lsf", "lsf/env", {"url": "LSF_PAC_URL"}),
    ("quantum", "quantum", "quantum/env", {}),
    ("kubernetes", "kubernetes", "kube/node/env", {"kubeconfig": "KUBECONFIG"}),
)


def client_of(backend, env, extra):
    """The backend's client from its env file, as a module reads its environment."""
    def get(name):
        for variable in ((extra[name],) if name in extra else ()) + tuple(backend.ENV.get(name, ())):
            if env.get(variable):
                return env[variable]
        return None
    return backend.from_options(get)


def services():
    """(name, type, a function making a new client) of every service running here."""
    found = []
    for name, backend_type, env_file, extra in SERVICES:
        path = os.path.join(RUN, env_file)
        if os.path.exists(path):
            env = read_env(path)
            found.append((name, backend_type, lambda t=backend_type, e=env, x=extra: client_of(BACKENDS[t], e, x)))
    return found


def timed(new_client, verb, repeat):
    """(p50 seconds, p50 requests, the last answer) of `verb` of a new client, `repeat` times."""
    seconds, requests, answer = [], [], None
    for _attempt in range(repeat):
        started = time.perf_counter()
        client = new_client()
        try:
            answer = getattr(client, verb)()
            seconds.append(time.perf_counter() - started)
            requests.append(client.requests_sent)
        finally:
            client.close()
    return statistics.median(seconds), statistics.median(requests), answer


def job_shapes(count, seed=24):
    """Job specs (module-option shape) of mixed sizes, the same in every run."""
    rng = random.Random(seed)
    shapes = []
    for index in range(count):
        resources = {
            "nodes": rng.choice((1, 1, 1, 1, 2)),
            "cpus_per_task": rng.choice((1, 1, 1, 2, 64)),
            "memory": rng.choice(("256M", "256M", "512M", "1G", "64G")),
            "time_limit": rng.choice(("00:05:00", "00:30:00", "01:00:00", "30-00:00:00")),
        }
        if rng.random() < 0.1:
            resources["gpus"] = rng.choice((1, 2))
        shapes.append({"name": "shape-%d" % index, "script": "#!/bin/sh\ntrue\n", "resources": resources})
    return shapes


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=10, help="probes per backend (default 10)")
    parser.add_argument("--jobs", type=int, default=1000, help="job specs placed (default 1000)")
    args = parser.parse_args()

    print("probe: capacity() per backend against describe() of the same client")
    print("%-13s %10s %8s %12s %8s %7s" % ("backend", "probe ms", "requests", "describe ms", "requests", "ratio"))
    candidates = []
    for name, backend_type, new_client in services():
        try:
            probe, probe_requests, record = timed(new_client, "capacity", args.repeat)
            ping, ping_requests, _answer = timed(new_client, "describe", args.repeat)
        except Exception as exc:  # pylint: disable=broad-except
            print("%-13s not probed: %s" % (name, exc))
            continue
        print("%-13s %10.1f %8g %12.1f %8g %6.1fx" % (
            name, probe * 1000, probe_requests, ping * 1000, ping_requests, probe / ping if ping else 0))
        candidates.append({"name": name, "type": backend_type, "ready": True, "reason": None,
                           "queues": record["queues"], "allowed_queues": None})
    if not candidates:
        print("no service is running: make services")
        return

    shapes = job_shapes(args.jobs)
    backend = BACKENDS[candidates[0]["type"]]
    started = time.perf_counter()
    for params in shapes:
        normalize_spec(params, backend)
    baseline = (time.perf_counter() - started) / len(shapes)
    queues = sum(len(candidate["queues"]) for candidate in candidates)
    print("\nplacement: %d job specs over %d candidates (%d queues); baseline normalize_spec %.1f us per spec" % (
        len(shapes), len(candidates), queues, baseline * 1e6))
    print("%-12s %12s %7s %7s %12s" % ("policy", "us per job", "ratio", "placed", "unplaceable"))
    for policy in ("FirstFit", "LeastQueued"):
        started = time.perf_counter()
        chosen = [place(params, candidates, policy)["backend"] for params in shapes]
        per_job = (time.perf_counter() - started) / len(shapes)
        placed = sum(1 for backend_name in chosen if backend_name)
        print("%-12s %12.1f %6.1fx %7d %12d" % (policy, per_job * 1e6, per_job / baseline, placed, len(shapes) - placed))
        spread = {}
        for backend_name in chosen:
            spread[backend_name or "(nowhere)"] = spread.get(backend_name or "(nowhere)", 0) + 1
        print("  landed: " + ", ".join("%s %d" % item for item in sorted(spread.items())))


if __name__ == "__main__":
    main()
