#!/usr/bin/env python
"""The BridgeJob controller under load, beside one ansible-runner per CR, in one run.

  controller  python -m bridge_controller.main against a private kube-apiserver + etcd
              (tools/kube-control-plane.sh on its own ports and run dir) and Slurm 26.05:
              p50 CR -> status.jobId for single CRs created while the controller is idle
              (each 3 s after the previous one got its job id), first from a controller
              without standby playbooks (--standby=), then from the default one;
              N CRs created at once -> seconds until every CR has a job id (p50/max per CR);
              runner calls per poll interval (the controller's /metrics) and the HTTP requests
              one poll of all N jobs costs (job_info's `requests`, from the same playbook);
              RSS of the controller process tree (sampled from /proc) with N tracked CRs, and
              PSS (shared pages split among sharers) of the controller and of its standby.
  cache       RSS of a second controller process whose namespace holds --tracked CRs that
              already carry the finalizer and a terminal status (written by the bench as admin
              through the status subresource): the memory of cached CRs alone, no backend jobs.
  baseline    the Operator SDK Ansible operator's shape: one ansible-runner process per CR, each
              running playbooks/bridgejob_submit.yml for one job, for a sample of CRs, one at a
              time and 4 at a time; seconds per CR and RSS of one such process tree.

Jobs are submitted held (backendOptions.slurm.hold) so they use no CPU, and are all cancelled at
the end (identity = CR UID); finalizers are removed and the private control plane is stopped and
wiped. Reads .run/slurm-26.05/env. Prints per-unit costs, ratios and the targets; asserts nothing.
"""

import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

from common import COLLECTIONS, REPO, read_env

sys.path.insert(0, os.path.join(REPO, "controller"))
# controller_support: the helpers the controller's integration tests use as well.
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

from bridge_controller.plan import FINALIZER  # noqa: E402
from bridge_controller.runner import AnsibleRunner  # noqa: E402
from bridge_controller.status import desired_status  # noqa: E402
from controller_support import (  # noqa: E402
    GROUP, PLURAL, VERSION, controller_env, descendants, free_port, install_crd, slurm_backend, slurm_namespace)

KUBE_SCRIPT = os.path.join(REPO, "tools", "kube-control-plane.sh")
SLURM_ENV = os.path.join(REPO, ".run", "slurm-26.05", "env")
PLAYBOOKS = os.path.join(REPO, "playbooks")
SCRIPT = "#!/bin/bash\ntrue\n"
POLL_INTERVAL = 5
MIB = 1024.0 * 1024.0


# ---------------------------------------------------------------------------------------------- /proc


def tree_rss(root, field="VmRSS:", name="status", children=True):
    """Sum of VmRSS over a process tree, bytes (shared pages are counted once per process)."""
    total = 0
    for pid in [root] + (descendants(root) if children else []):
        try:
            with open("/proc/%d/%s" % (pid, name)) as handle:
                for line in handle:
                    if line.startswith(field):
                        total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def tree_pss(root, children=True):
    """Sum of Pss over a process tree, bytes: shared pages split among their sharers, so the
    forked ansible-playbook workers and the standby count what they really add."""
    return tree_rss(root, field="Pss:", name="smaps_rollup", children=children)


class RssSampler:
    """Samples tree_rss(pid) every `every` seconds in a thread; keeps (time, bytes)."""

    def __init__(self, pid, every=0.2):
        self.pid, self.every = pid, every
        self.samples = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), tree_rss(self.pid)))
            self._stop.wait(self.every)

    def between(self, start, end):
        return [rss for at, rss in self.samples if start <= at <= end] or [0]

    def stop(self):
        self._stop.set()
        self._thread.join()


# ---------------------------------------------------------------------------------------------- kube


class Plane:
    """The private control plane: its own run dir and ports, so a shared apiserver is never touched."""

    def __init__(self, run_dir, api_port, etcd_port, etcd_peer_port):
        # kube-controller-manager and kube-scheduler serve /healthz on ports of their own too.
        self.env = dict(os.environ, BRIDGE_RUN=run_dir, BRIDGE_KUBE_API_PORT=str(api_port),
                        BRIDGE_KUBE_ETCD_PORT=str(etcd_port), BRIDGE_KUBE_ETCD_PEER_PORT=str(etcd_peer_port),
                        BRIDGE_KUBE_CONTROLLER_MANAGER_PORT=str(free_port()),
                        BRIDGE_KUBE_SCHEDULER_PORT=str(free_port()))
        self.run_dir = run_dir
        self.kubeconfig = None

    def start(self):
        subprocess.run([KUBE_SCRIPT, "start"], env=self.env, check=True)
        self.kubeconfig = read_env(os.path.join(self.run_dir, "kube", "env"))["KUBECONFIG"]
        return self.kubeconfig

    def stop(self):
        subprocess.run([KUBE_SCRIPT, "stop", "--wipe"], env=self.env, check=False)


def kube_clients(kubeconfig):
    from kubernetes import client, config

    api_client = config.new_client_from_config(kubeconfig)
    # The pool must serve the creating threads without blocking on connections.
    api_client.rest_client.pool_manager.connection_pool_kw["maxsize"] = 32
    install_crd(api_client, attempts=200)
    return client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)


def bridgejob(name, slurm, finalizers=None):
    meta = {"name": name}
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "BridgeJob", "metadata": meta,
            "spec": {"backend": slurm_backend(slurm),
                     "script": SCRIPT, "queue": "debug", "resources": {"timeLimit": 1},
                     "backendOptions": {"slurm": {"hold": True}}, "pollInterval": POLL_INTERVAL}}


def create_many(custom, namespace, bodies, threads=16):
    """Create CRs from a thread pool; {name: (monotonic time the create returned, uid)}."""
    def create(body):
        obj = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
        return body["metadata"]["name"], (time.monotonic(), obj["metadata"]["uid"])

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        return dict(pool.map(create, bodies))


def job_ids(custom, namespace):
    """{name: jobId} of every CR in the namespace that has one."""
    items = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"]
    return dict((o["metadata"]["name"], o["status"]["jobId"]) for o in items if (o.get("status") or {}).get("jobId"))


def wait_job_ids(custom, namespace, created, timeout, every=0.1):
    """{name: monotonic time the CR was first seen with a job id}; listing every `every` s."""
    seen = {}
    deadline = time.monotonic() + timeout
    while len(seen) < len(created) and time.monotonic() < deadline:
        now = time.monotonic()
        for name in job_ids(custom, namespace):
            if name in created and name not in seen:
                seen[name] = now
        if len(seen) < len(created):
            time.sleep(every)
    return seen


def metrics(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as response:
        text = response.read().decode()
    values = {}
    for line in text.splitlines():
        name, _sep, value = line.rpartition(" ")
        values[name] = float(value)
    return values


class Controller:
    def __init__(self, kubeconfig, namespace, log_path, work_dir, extra_args=()):
        self.port = free_port()
        env = controller_env()
        self.log = open(log_path, "w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bridge_controller.main", "--kubeconfig", kubeconfig, "--namespace", namespace,
             "--playbook-dir", PLAYBOOKS, "--work-dir", work_dir, "--collections-path", COLLECTIONS,
             "--port", str(self.port), "--bind-address", "127.0.0.1", "--workers", "8"] + list(extra_args),
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.rss = RssSampler(self.process.pid)

    def wait_ready(self, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % self.port, timeout=2):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("the controller did not become ready; see %s" % self.log.name)

    def wait_quiet(self, timeout=120):
        """Until the queue is empty and no reconciles happen for 2 s."""
        deadline, last, still = time.monotonic() + timeout, None, 0
        while time.monotonic() < deadline and still < 4:
            now = metrics(self.port)
            key = (now.get("bridge_reconciles"), now.get("bridge_queue_depth"))
            still = still + 1 if key == last and not now.get("bridge_queue_depth") else 0
            last = key
            time.sleep(0.5)

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.rss.stop()
        self.log.close()


# ---------------------------------------------------------------------------------------------- runs


# Seconds between one idle CR's job id and the next CR: the controller is idle again by then (its
# standby playbook, started after the previous submit, is loaded).
IDLE_GAP = 3.0


def slurm_queue_length(slurm):
    from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient

    client = SlurmClient(slurm["SLURM_URL"], user=slurm["SLURM_USER"], token=slurm["SLURM_JWT"])
    try:
        return len(client.list())
    finally:
        client.close()


def idle_latencies(custom, namespace, slurm, count, prefix):
    """CR -> job id seconds for `count` CRs created one at a time, each after the previous got its id."""
    idle = []
    for i in range(count):
        created = create_many(custom, namespace, [bridgejob("%s-%02d" % (prefix, i), slurm)], threads=1)
        seen = wait_job_ids(custom, namespace, created, timeout=120, every=0.02)
        idle.extend(seen[name] - created[name][0] for name in seen)
        time.sleep(IDLE_GAP)
    return idle


def without_standby_run(args, custom, core, kubeconfig, slurm, work):
    """The idle latency once more, from a controller that starts every playbook when its work comes."""
    namespace = "bench-cold-%s" % uuid.uuid4().hex[:6]
    slurm_namespace(core, namespace, slurm)
    ctl = Controller(kubeconfig, namespace, os.path.join(work, "controller-cold.log"), os.path.join(work, "runner-cold"),
                     extra_args=["--standby="])
    try:
        ctl.wait_ready()
        return {"namespace": namespace, "idle": idle_latencies(custom, namespace, slurm, args.idle, "cold"),
                "pss_idle": tree_pss(ctl.process.pid)}
    finally:
        ctl.stop()


def controller_run(args, custom, kubeconfig, namespace, slurm, work):
    out = {}
    ctl = Controller(kubeconfig, namespace, os.path.join(work, "controller.log"), os.path.join(work, "runner"))
    try:
        ctl.wait_ready()
        # Idle: one CR at a time; the next only after the previous has its job id.
        out["idle"] = idle_latencies(custom, namespace, slurm, args.idle, "idle")
        ctl.wait_quiet()
        before = metrics(ctl.port)
        rss_idle = tree_rss(ctl.process.pid)
        out["pss_idle"] = tree_pss(ctl.process.pid)
        out["pss_idle_controller"] = tree_pss(ctl.process.pid, children=False)

        bodies = [bridgejob("load-%05d" % i, slurm) for i in range(args.n)]
        t0 = time.monotonic()
        created = create_many(custom, namespace, bodies)
        out["create_seconds"] = time.monotonic() - t0
        seen = wait_job_ids(custom, namespace, created, timeout=args.timeout, every=0.2)
        t_all = max(seen.values()) if seen else time.monotonic()
        out["all_seconds"] = t_all - t0
        out["latencies"] = [seen[name] - created[name][0] for name in seen]
        out["missing"] = len(created) - len(seen)
        out["uids"] = [uid for _at, uid in created.values()]
        after_submit = metrics(ctl.port)
        out["submit_calls"] = after_submit.get("bridge_runner_calls_submit", 0) - before.get("bridge_runner_calls_submit", 0)
        out["rss_burst_max"] = max(ctl.rss.between(t0, t_all))

        # Steady state with N (+idle) tracked CRs: count runner poll calls over whole intervals.
        ctl.wait_quiet()
        intervals = args.poll_intervals
        p0, start = metrics(ctl.port), time.monotonic()
        time.sleep(intervals * POLL_INTERVAL)
        p1, end = metrics(ctl.port), time.monotonic()
        out["polls_per_interval"] = (p1.get("bridge_runner_calls_poll", 0) - p0.get("bridge_runner_calls_poll", 0)) / (
            (end - start) / POLL_INTERVAL)
        out["poll_runner_seconds"] = p1.get("bridge_runner_seconds", 0) - p0.get("bridge_runner_seconds", 0)
        out["poll_window"] = dict((name, p1.get("bridge_" + name, 0) - p0.get("bridge_" + name, 0))
                                  for name in ("runner_calls_poll", "status_patches", "status_noops"))
        steady = ctl.rss.between(start, end)
        out["rss_steady"] = statistics.median(steady)
        out["rss_steady_max"] = max(steady)
        out["rss_idle"] = rss_idle
        out["tracked"] = sum(v for k, v in p1.items() if k.startswith("bridge_tracked_jobs"))
    finally:
        ctl.stop()
    # What one poll of all these jobs costs on the wire: the controller's own poll playbook, same module.
    runner = AnsibleRunner(PLAYBOOKS, os.path.join(work, "probe"), collections_path=COLLECTIONS, python=sys.executable)
    backend = {"type": "slurm", "url": slurm["SLURM_URL"], "api_version": slurm["SLURM_API_VERSIONS"].split(",")[0]}
    result = runner.run("poll", backend, {"user": slurm["SLURM_USER"], "token": slurm["SLURM_JWT"]}, identities=out["uids"])
    runner.close()
    out["poll_requests"] = result.get("requests")
    out["poll_found"] = len(result.get("jobs") or {})
    return out


def cache_run(args, custom, core, kubeconfig, slurm, work):
    """RSS of a controller whose namespace holds `--tracked` CRs with a terminal status."""
    namespace = "bench-cache-%s" % uuid.uuid4().hex[:6]
    slurm_namespace(core, namespace, slurm)
    bodies = [bridgejob("cached-%05d" % i, slurm, finalizers=[FINALIZER]) for i in range(args.tracked)]
    t0 = time.monotonic()
    created = create_many(custom, namespace, bodies)

    def finish(name):
        # The status the controller itself writes for a finished job (status.desired_status).
        status = desired_status(None, 1, job={"phase": "completed", "job_id": "1%06d" % int(name.split("-")[1]), "exit_code": 0,
                                              "native_state": "COMPLETED"}, reachable=True, submitted=True)
        custom.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, name, {"status": status})

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(finish, created))
    setup = time.monotonic() - t0
    ctl = Controller(kubeconfig, namespace, os.path.join(work, "controller-cache.log"), os.path.join(work, "runner-cache"))
    try:
        ctl.wait_ready(timeout=300)
        ctl.wait_quiet(timeout=300)
        start = time.monotonic()
        time.sleep(3 * POLL_INTERVAL)
        samples = ctl.rss.between(start, time.monotonic())
        got = metrics(ctl.port)
        cached = sum(v for k, v in got.items() if k.startswith("bridge_tracked_jobs"))
        runner_calls = sum(v for k, v in got.items() if k.startswith("bridge_runner_calls"))
    finally:
        ctl.stop()
    return {"namespace": namespace, "rss": statistics.median(samples), "rss_max": max(rss for _at, rss in ctl.rss.samples),
            "cached": cached, "runner_calls": runner_calls, "setup_seconds": setup, "names": list(created)}


def baseline_child():
    """One CR the Operator SDK way: a fresh ansible-runner process runs the submit playbook for it."""
    request = json.load(sys.stdin)
    # No standby: the baseline starts one playbook per CR and nothing ahead of its work.
    runner = AnsibleRunner(PLAYBOOKS, request["work_dir"], collections_path=COLLECTIONS, python=sys.executable, standby=())
    result = runner.run("submit", request["backend"], request["credentials"], jobs=[request["job"]])
    item = (result.get("results") or [{}])[0]
    json.dump({"job_id": (item.get("job") or {}).get("job_id"), "failed": bool(item.get("failed"))}, sys.stdout)


def baseline_one(request):
    """(seconds, peak tree RSS bytes, job id) of one ansible-runner process for one CR."""
    t0 = time.monotonic()
    process = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--baseline-child"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    sampler = RssSampler(process.pid, every=0.05)
    output, _err = process.communicate(json.dumps(request))
    seconds = time.monotonic() - t0
    sampler.stop()
    answer = json.loads(output or "{}")
    return seconds, max(rss for _at, rss in sampler.samples), answer.get("job_id")


def baseline_run(args, slurm, work, run):
    backend = {"type": "slurm", "url": slurm["SLURM_URL"], "api_version": slurm["SLURM_API_VERSIONS"].split(",")[0]}
    credentials = {"user": slurm["SLURM_USER"], "token": slurm["SLURM_JWT"]}

    def request(tag, i):
        identity = "bench-%s-%s-%04d" % (run, tag, i)
        job = {"identity": identity, "name": identity, "script": SCRIPT, "queue": "debug", "resources": {"time_limit": 1},
               "backend_options": {"slurm": {"hold": True}}}
        return {"backend": backend, "credentials": credentials, "job": job, "work_dir": os.path.join(work, "baseline", tag)}

    out = {"identities": []}
    requests = [request("seq", i) for i in range(args.sample)]
    out["identities"] += [r["job"]["identity"] for r in requests]
    t0 = time.monotonic()
    sequential = [baseline_one(r) for r in requests]
    out["seq_seconds"] = time.monotonic() - t0
    out["seq_per_cr"] = [s for s, _rss, _id in sequential]
    out["rss"] = [rss for _s, rss, _id in sequential]
    out["seq_ok"] = sum(1 for _s, _rss, job_id in sequential if job_id)

    requests = [request("par", i) for i in range(args.sample)]
    out["identities"] += [r["job"]["identity"] for r in requests]
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        parallel = list(pool.map(baseline_one, requests))
    out["par_seconds"] = time.monotonic() - t0
    out["par_ok"] = sum(1 for _s, _rss, job_id in parallel if job_id)
    return out


# ---------------------------------------------------------------------------------------------- cleanup


def cancel_jobs(slurm, identities):
    """Cancel every Slurm job carrying one of these identities; how many."""
    from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient

    wanted = set(identities)
    client = SlurmClient(slurm["SLURM_URL"], user=slurm["SLURM_USER"], token=slurm["SLURM_JWT"],
                         api_version=slurm["SLURM_API_VERSIONS"].split(",")[0])
    ids = [j["job_id"] for j in client.list() if j["identity"] in wanted and j["phase"] not in ("cancelled", "completed", "failed")]

    def cancel(job_id):
        SlurmClient(slurm["SLURM_URL"], user=slurm["SLURM_USER"], token=slurm["SLURM_JWT"],
                    api_version=slurm["SLURM_API_VERSIONS"].split(",")[0]).cancel(job_id)

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(cancel, ids))
    return len(ids)


def release(custom, namespace):
    items = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"]

    def patch(name):
        custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name, {"metadata": {"finalizers": []}})

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(patch, [o["metadata"]["name"] for o in items if o["metadata"].get("finalizers")]))
    return len(items)


# ---------------------------------------------------------------------------------------------- report


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))] if values else float("nan")


def report(args, ctl, cache, base, cold=None):
    seq_per_cr = statistics.mean(base["seq_per_cr"])
    par_per_cr = base["par_seconds"] / args.sample
    base_rss = statistics.median(base["rss"])
    ctl_per_cr = ctl["all_seconds"] / args.n
    rows = [
        ("seconds until all N have a job id", "%.1f" % ctl["all_seconds"], "%.1f seq / %.1f x4" % (seq_per_cr * args.n, par_per_cr * args.n),
         "%.0fx / %.0fx" % (seq_per_cr * args.n / ctl["all_seconds"], par_per_cr * args.n / ctl["all_seconds"]),
         "<= 30 s at N=1000"),
        ("seconds per CR (submit)", "%.4f" % ctl_per_cr, "%.2f seq / %.2f x4" % (seq_per_cr, par_per_cr),
         "%.0fx / %.0fx" % (seq_per_cr / ctl_per_cr, par_per_cr / ctl_per_cr), ""),
        ("CR -> jobId p50 / max (burst)", "%.1f / %.1f" % (pct(ctl["latencies"], 0.5), max(ctl["latencies"] or [0])), "", "", ""),
        ("CR -> jobId p50 idle", "%.2f" % pct(ctl["idle"], 0.5), "%.2f" % pct(base["seq_per_cr"], 0.5),
         "%.1fx" % (pct(base["seq_per_cr"], 0.5) / pct(ctl["idle"], 0.5)), "<= 1 s"),
    ]
    if cold:
        rows.append(("CR -> jobId p50 idle, --standby=", "%.2f" % pct(cold["idle"], 0.5), "", "%.1fx slower" % (
            pct(cold["idle"], 0.5) / pct(ctl["idle"], 0.5)), ""))
    rows += [
        ("runner calls for N submits", "%d" % ctl["submit_calls"], "%d" % args.n, "%.0fx fewer" % (args.n / max(ctl["submit_calls"], 1)), ""),
        ("poll runner calls / interval", "%.2f" % ctl["polls_per_interval"], "%d (1 per CR)" % ctl["tracked"], "", "1 per backend"),
        ("HTTP requests per poll (N jobs)", "%s" % ctl["poll_requests"], ">= %d" % ctl["tracked"], "", "1 per backend"),
        ("RSS MiB, controller tree, N tracked", "%.0f (max %.0f)" % (ctl["rss_steady"] / MIB, ctl["rss_steady_max"] / MIB), "", "", ""),
        ("RSS MiB, controller tree, burst max", "%.0f" % (ctl["rss_burst_max"] / MIB), "%.0f per process x4 = %.0f" % (
            base_rss / MIB, 4 * base_rss / MIB), "", ""),
    ]
    if cache:
        rows.append(("RSS MiB, %d cached CRs" % cache["cached"], "%.0f (max %.0f)" % (cache["rss"] / MIB, cache["rss_max"] / MIB), "", "",
                     "<= 300 MiB at 10,000"))
    print()
    print("BridgeJob controller vs one ansible-runner per CR; N=%d CRs (%d more created one at a time first), "
          "baseline sample %d CRs per mode extrapolated to N" % (args.n, args.idle, args.sample))
    print("%-38s %-20s %-28s %-14s %s" % ("metric", "controller", "baseline", "ratio", "target"))
    for row in rows:
        print("%-38s %-20s %-28s %-14s %s" % row)
    print()
    print("CR creation: %d CRs in %.1f s from 16 threads (%.1f ms each); every CR got a job id: %s (%d missing)" % (
        args.n, ctl["create_seconds"], 1000 * ctl["create_seconds"] / args.n, ctl["missing"] == 0, ctl["missing"]))
    print("submit runner calls %d; poll runner seconds over the window %.1f; idle controller RSS %.0f MiB" % (
        ctl["submit_calls"], ctl["poll_runner_seconds"], ctl["rss_idle"] / MIB))
    print("idle PSS: controller process %.0f MiB, with its standby submit playbook %.0f MiB%s" % (
        ctl["pss_idle_controller"] / MIB, ctl["pss_idle"] / MIB,
        "; without standby (--standby=) %.0f MiB" % (cold["pss_idle"] / MIB) if cold else ""))
    if cold:
        print("idle CR -> jobId seconds: standby %s; --standby= %s" % (
            " ".join("%.2f" % x for x in ctl["idle"]), " ".join("%.2f" % x for x in cold["idle"])))
    print("poll window %.0f s: %s" % (args.poll_intervals * POLL_INTERVAL, ", ".join(
        "%s %d" % item for item in sorted(ctl["poll_window"].items()))))
    print("one poll playbook run for %d identities: %s HTTP requests, %d jobs found" % (len(ctl["uids"]), ctl["poll_requests"], ctl["poll_found"]))
    print("baseline: %d/%d sequential and %d/%d parallel submissions got a job id; RSS per ansible-runner tree p50 %.0f MiB max %.0f MiB" % (
        base["seq_ok"], args.sample, base["par_ok"], args.sample, base_rss / MIB, max(base["rss"]) / MIB))
    if cache:
        print("cache: %d CRs with finalizer + Completed status (set up in %.0f s); runner calls during it: %d" % (
            cache["cached"], cache["setup_seconds"], cache["runner_calls"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=1000, help="CRs created at once (default 1000)")
    parser.add_argument("--tracked", type=int, default=10000, help="CRs for the cache RSS run (default 10000; 0 skips it)")
    parser.add_argument("--sample", type=int, default=50, help="baseline CRs per mode (default 50)")
    parser.add_argument("--idle", type=int, default=10, help="CRs created one at a time while idle (default 10)")
    parser.add_argument("--poll-intervals", type=int, default=3, help="poll intervals of %d s to count runner calls over" % POLL_INTERVAL)
    parser.add_argument("--timeout", type=float, default=900, help="seconds to wait for all job ids")
    parser.add_argument("--quick", action="store_true", help="CI size: N=100, 1000 cached CRs, baseline sample 10")
    parser.add_argument("--run-dir", default="/tmp/bjbench/run", help="private control plane run dir")
    parser.add_argument("--api-port", type=int, default=6643)
    parser.add_argument("--etcd-port", type=int, default=2679)
    parser.add_argument("--etcd-peer-port", type=int, default=2680)
    parser.add_argument("--baseline-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.baseline_child:
        baseline_child()
        return
    if args.quick:
        args.n, args.tracked, args.sample = 100, 1000, 10
    slurm = read_env(SLURM_ENV)
    run = uuid.uuid4().hex[:6]
    work = os.path.join(os.path.dirname(args.run_dir), "work-%s" % run)
    os.makedirs(work)
    plane = Plane(args.run_dir, args.api_port, args.etcd_port, args.etcd_peer_port)
    namespace = "bench-%s" % run
    identities, ctl, cache, base, custom, cold = [], None, None, None, None, None
    try:
        kubeconfig = plane.start()
        core, custom = kube_clients(kubeconfig)
        slurm_namespace(core, namespace, slurm)
        print("private control plane %s; Slurm %s at %s; namespace %s; logs in %s" % (
            kubeconfig, slurm.get("SLURM_VERSION"), slurm["SLURM_URL"], namespace, work), flush=True)
        queued = slurm_queue_length(slurm)
        print("Slurm remembers %d jobs now" % queued, flush=True)
        if queued > 100:
            # While a burst's job records wait for slurmdbd, a lookup lists slurmctld's queue (docs/slurm.md).
            print("WARNING: a long queue slows the submits of a burst; cancel leftovers and wait MinJobAge (300 s)",
                  flush=True)
        if args.idle:
            # Before the burst, whose 1,000 held jobs would slow every lookup after it.
            cold = without_standby_run(args, custom, core, kubeconfig, slurm, work)
            print("run without standby done", flush=True)
        ctl = controller_run(args, custom, kubeconfig, namespace, slurm, work)
        identities += ctl["uids"]
        print("controller run done: %d CRs in %.1f s" % (args.n, ctl["all_seconds"]), flush=True)
        if args.tracked:
            cache = cache_run(args, custom, core, kubeconfig, slurm, work)
            print("cache run done: %d CRs" % cache["cached"], flush=True)
        base = baseline_run(args, slurm, work, run)
        identities += base["identities"]
        report(args, ctl, cache, base, cold)
    finally:
        if custom is not None:
            # Every CR of the run namespace (the idle ones too), by uid.
            try:
                items = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"]
                identities += [o["metadata"]["uid"] for o in items]
            except Exception as exc:  # pylint: disable=broad-except
                print("could not list CRs: %s" % exc)
        if base is None:
            identities += ["bench-%s-%s-%04d" % (run, tag, i) for tag in ("seq", "par") for i in range(args.sample)]
        try:
            print("cancelled %d Slurm jobs" % cancel_jobs(slurm, identities))
            if custom is not None:
                released = release(custom, namespace)
                if cache:
                    released += release(custom, cache["namespace"])
                if cold:
                    identities_cold = [o["metadata"]["uid"] for o in custom.list_namespaced_custom_object(
                        GROUP, VERSION, cold["namespace"], PLURAL)["items"]]
                    cancel_jobs(slurm, identities_cold)
                    released += release(custom, cold["namespace"])
                print("released %d CRs" % released)
        finally:
            plane.stop()


if __name__ == "__main__":
    main()
