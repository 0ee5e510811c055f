"""The controller under stress, end to end: real kube-apiserver, real Slurm 22.05, the controller as a process.

The controller logs in with a token of the bridge-controller ServiceAccount (deploy/rbac.yaml only)
and runs with leader election, as deployed. Covered: spec.cancel on a running CR; slurmrestd down
for a while (BackendReachable False, then every status catches up); the controller SIGKILLed at
random moments during 50 submissions (no duplicate Slurm job, every CR gets a job id); no token in
the controller's logs, statuses, events or runner directory. On Slurm 24.11, with every core busy:
the controller SIGKILLed alone (as outside a container; its playbooks die with it) during a burst of 200
CRs and again as it writes their statuses; the restarted one gives every CR whose job exists its job id.

The outage test's controller reaches 22.05's slurmrestd through a relay of its own (conftest.Relay):
the outage is the relay cut, which the controller sees as it would see slurmrestd down (its open
connections severed, new ones closed unanswered), while the shared slurmrestd serves every other test
on. Every test here touches only its own CRs and their jobs.
"""

import concurrent.futures
import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import pytest
import yaml

from conftest import COLLECTIONS, REPO, Relay, require_slurm
from controller_support import (GROUP, PLURAL, VERSION, controller_env, descendants, free_port, release_all, slurm_backend,
                                slurm_namespace)
from test_controller_e2e import kube, wait_for  # noqa: F401 pylint: disable=unused-import
from test_crd import apply, manifests

ACCOUNT, SYSTEM_NAMESPACE = "bridge-controller", "bridge-system"


# ------------------------------------------------------------------ helpers

class Controller:
    """bridge_controller.main as a subprocess; restarts append to one log; kill() is a container kill."""

    def __init__(self, kubeconfig, namespace, tmp_path, lease):
        self.log_path = tmp_path / "controller.log"
        self.work_dir = tmp_path / "runner"
        self.port = free_port()
        self.args = [sys.executable, "-m", "bridge_controller.main", "--kubeconfig", kubeconfig, "--namespace", namespace,
                     "--playbook-dir", os.path.join(REPO, "playbooks"), "--work-dir", str(self.work_dir),
                     "--collections-path", COLLECTIONS, "--port", str(self.port),
                     "--bind-address", "127.0.0.1", "--batch-window", "0.3",
                     "--leader-elect", "--lease-namespace", SYSTEM_NAMESPACE, "--lease-name", lease]
        # A stable identity, as POD_NAME is across restarts of a pod's container: the restarted
        # controller renews its own lease instead of waiting for it to expire.
        self.env = controller_env(POD_NAME="chaos-%s" % lease)
        self.process = None
        self.starts = 0

    def start(self):
        with open(self.log_path, "a") as log:
            self.process = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        self.starts += 1

    def wait_ready(self, timeout=60):
        """Until /readyz answers 200 (leading, listed): from then on it acts."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
                    sock.sendall(b"GET /readyz HTTP/1.0\r\n\r\n")
                    if sock.makefile().readline().split()[1:2] == ["200"]:
                        return
            except (OSError, IndexError):
                pass
            time.sleep(0.1)
        raise AssertionError("the controller did not become ready:\n" + self.log()[-3000:])

    def kill(self):
        """SIGKILL the controller and everything it started, as a container kill would; returns how many processes."""
        victims = [self.process.pid] + descendants(self.process.pid)
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait(timeout=30)
        return len(victims)

    def kill_alone(self):
        """SIGKILL the controller process only, as outside a container: its playbooks die with it
        (launcher.py), Ansible's detached workers too. Returns the pids of those still running
        right after."""
        below = descendants(self.process.pid)
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        return [pid for pid in below if running(pid)]

    def stop(self):
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=120)

    def log(self):
        return self.log_path.read_text() if self.log_path.exists() else ""


def orphans(controller):
    """Processes of this controller's playbooks that are not below the running controller."""
    from bridge_controller.processes import with_environment

    mine = set(descendants(controller.process.pid)) if controller.process.poll() is None else set()
    pids = [int(pid) for pid in os.listdir("/proc") if pid.isdigit() and int(pid) not in mine]
    return with_environment(pids, "BRIDGE_HANDOFF=%s/" % os.path.join(os.path.abspath(str(controller.work_dir)), "handoff"))


def phase_of(obj):
    return (obj.get("status") or {}).get("phase")


def condition(obj, kind):
    for item in (obj.get("status") or {}).get("conditions") or []:
        if item.get("type") == kind:
            return item.get("status")
    return None


def slurm_client(slurm):
    sys.path.insert(0, COLLECTIONS)
    from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient

    return SlurmClient(slurm["SLURM_URL"], user=slurm["SLURM_USER"], token=slurm["SLURM_JWT"])


# ------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def account(kube, tmp_path_factory):  # pylint: disable=redefined-outer-name
    """deploy/namespace.yaml + rbac.yaml applied; a kubeconfig with a token of the controller's ServiceAccount."""
    env, api_client = kube
    from kubernetes import client
    from kubernetes.dynamic import DynamicClient

    dynamic = DynamicClient(api_client)
    for name in ("namespace.yaml", "rbac.yaml"):
        for doc in manifests(os.path.join(REPO, "deploy", name)):
            apply(dynamic, doc)
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600))
    token = client.CoreV1Api(api_client).create_namespaced_service_account_token(ACCOUNT, SYSTEM_NAMESPACE, request).status.token
    kubeconfig = {
        "apiVersion": "v1", "kind": "Config", "current-context": "bridge",
        "clusters": [{"name": "kube", "cluster": {"server": env["KUBE_API"], "certificate-authority": env["KUBE_CA_FILE"]}}],
        "users": [{"name": ACCOUNT, "user": {"token": token}}],
        "contexts": [{"name": "bridge", "context": {"cluster": "kube", "user": ACCOUNT}}],
    }
    path = str(tmp_path_factory.mktemp("account") / "kubeconfig")
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as handle:
        yaml.safe_dump(kubeconfig, handle)
    return path, token


def make_setup(kube, account, tmp_path, version):  # pylint: disable=redefined-outer-name
    """A fresh namespace with the Slurm secret; a controller (not started) logged in as the ServiceAccount."""
    _env, api_client = kube
    slurm = require_slurm(version)
    from kubernetes import client

    core, custom = client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)
    namespace = "chaos-%s" % uuid.uuid4().hex[:8]
    slurm_namespace(core, namespace, slurm)
    backend = slurm_backend(slurm)
    lease = "bridge-chaos-%s" % uuid.uuid4().hex[:6]
    controller = Controller(account[0], namespace, tmp_path, lease)

    class Setup:
        pass

    ctx = Setup()
    ctx.slurm, ctx.core, ctx.custom, ctx.namespace, ctx.controller = slurm, core, custom, namespace, controller
    ctx.tokens = [slurm["SLURM_JWT"], account[1]]
    ctx.tmp_path = tmp_path
    # spec.backend of the CRs created from now on: a test may point it elsewhere (a relay).
    ctx.backend = backend

    def create(name, script, **spec):
        body = {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "BridgeJob", "metadata": {"name": name},
                "spec": dict({"backend": ctx.backend, "script": script, "pollInterval": 2}, **spec)}
        return custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)

    def read(name):
        return custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)

    def items():
        return custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"]

    ctx.create, ctx.read, ctx.items = create, read, items
    yield ctx
    returncode = controller.stop()
    release_all(custom, namespace, delete=True)
    try:
        client.CoordinationV1Api(api_client).delete_namespaced_lease(lease, SYSTEM_NAMESPACE)
    except client.exceptions.ApiException:
        pass
    assert returncode == 0, controller.log()[-4000:]


@pytest.fixture()
def setup(kube, account, tmp_path):  # pylint: disable=redefined-outer-name
    yield from make_setup(kube, account, tmp_path, "22.05")


@pytest.fixture()
def setup_24_11(kube, account, tmp_path):  # pylint: disable=redefined-outer-name
    yield from make_setup(kube, account, tmp_path, "24.11")


def assert_no_token(ctx):
    """No token in the controller's log, statuses, events or anything under the test's directory."""
    seen = repr([item.get("status") for item in ctx.items()])
    seen += repr([(e.reason, e.message) for e in ctx.core.list_namespaced_event(ctx.namespace).items])
    seen += ctx.controller.log()
    for token in ctx.tokens:
        assert token not in seen
        found = subprocess.run(["grep", "-rl", "--exclude=kubeconfig", token, str(ctx.tmp_path)],
                               capture_output=True, text=True, check=False).stdout
        assert not found, found


# ------------------------------------------------------------------ tests

def test_cancel_flag_cancels_the_running_job_and_keeps_the_cr(setup):
    ctx = setup
    ctx.create("sleeper", "#!/bin/bash\nsleep 300\n")
    ctx.controller.start()
    running = wait_for(lambda: ctx.read("sleeper"), lambda o: phase_of(o) == "Running", timeout=120)
    job_id = running["status"]["jobId"]
    ctx.custom.patch_namespaced_custom_object(GROUP, VERSION, ctx.namespace, PLURAL, "sleeper", {"spec": {"cancel": True}})
    cancelled = wait_for(lambda: ctx.read("sleeper"), lambda o: phase_of(o) == "Cancelled", timeout=120)
    assert cancelled["status"]["jobId"] == job_id
    assert condition(cancelled, "Cancelled") == "True"
    assert "deletionTimestamp" not in cancelled["metadata"]
    assert slurm_client(ctx.slurm).get(job_id)["phase"] == "cancelled"
    time.sleep(3)  # stays Cancelled and is not submitted again
    assert phase_of(ctx.read("sleeper")) == "Cancelled"
    mine = [str(j["job_id"]) for j in slurm_client(ctx.slurm).list() if j["identity"] == cancelled["metadata"]["uid"]]
    assert mine == [job_id]
    assert_no_token(ctx)


def running(pid):
    """The process exists and is no zombie."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_slurmrestd_outage_marks_backend_unreachable_then_statuses_catch_up(setup):
    ctx = setup
    relay = Relay.to(ctx.slurm["SLURM_URL"])
    # The jobs end when the test releases them, after the cut: a fixed sleep ended the first job
    # before the second ran when both cores were busy. Slurm 22.05 runs them on this host.
    release = tempfile.mkdtemp(prefix="chaos-release-", dir="/tmp")
    os.chmod(release, 0o755)
    waiting = "#!/bin/bash\nfor i in $(seq 600); do [ -e %s/go ] && exit 0; sleep 0.5; done\nexit 1\n" % release
    try:
        ctx.backend = dict(ctx.backend, url=relay.url)
        names = ("short-a", "short-b")
        for name in names:
            ctx.create(name, waiting)
        ctx.controller.start()
        job_ids = {}
        for name in names:
            running_cr = wait_for(lambda n=name: ctx.read(n),
                                  lambda o: phase_of(o) == "Running" and condition(o, "BackendReachable") == "True",
                                  timeout=120)
            job_ids[name] = running_cr["status"]["jobId"]
        relay.cut()
        for name in names:
            down = wait_for(lambda n=name: ctx.read(n), lambda o: condition(o, "BackendReachable") == "False", timeout=90)
            assert phase_of(down) == "Running"
        # The jobs end while their slurmrestd is out of the controller's reach; Slurm itself, asked
        # directly, says when.
        open(os.path.join(release, "go"), "w").close()
        slurm = slurm_client(ctx.slurm)
        for name in names:
            wait_for(lambda n=name: slurm.get(job_ids[n]), lambda job: job["phase"] == "completed", timeout=120)
        for name in names:
            assert phase_of(ctx.read(name)) == "Running", "the controller saw the end through a cut relay"
        relay.restore()
        for name in names:
            done = wait_for(lambda n=name: ctx.read(n),
                            lambda o: condition(o, "BackendReachable") == "True" and phase_of(o) == "Completed",
                            timeout=120)
            assert done["status"]["exitCode"] == 0
            assert done["status"]["jobId"] == job_ids[name]
    finally:
        relay.close()
        shutil.rmtree(release, ignore_errors=True)
    assert_no_token(ctx)


# Its check that the restart killed every module of the killed controllers failed once with every
# core busy (a module of theirs still ran): alone, as under load the test measures the load.
@pytest.mark.serial
def test_sigkill_during_50_submissions_makes_no_duplicate_jobs(setup):
    ctx = setup
    count = 50
    rng = random.Random()
    kills = rng.choice((3, 4))
    t0 = time.monotonic()
    ctx.controller.start()

    def create_all():
        # Spread over ~10 s so that the kills land while submissions are being made.
        for index in range(count):
            ctx.create("burst-%02d" % index, "#!/bin/bash\nsleep 1\n")
            time.sleep(0.2)

    creator = threading.Thread(target=create_all)
    creator.start()
    timeline = []
    try:
        for _kill in range(kills):
            ctx.controller.wait_ready()
            time.sleep(rng.uniform(1, 4))
            with_ids = sum(1 for item in ctx.items() if (item.get("status") or {}).get("jobId"))
            processes = ctx.controller.kill()
            timeline.append((round(time.monotonic() - t0, 1), with_ids, processes))
            ctx.controller.start()
    finally:
        creator.join()
    uids = dict((item["metadata"]["uid"], item["metadata"]["name"]) for item in ctx.items())
    assert len(uids) == count

    def job_ids():
        return [(item.get("status") or {}).get("jobId") for item in ctx.items()]

    wait_for(job_ids, lambda ids: all(ids) and len(ids) == count, timeout=300, interval=2)
    all_ids = time.monotonic() - t0
    jobs = [j for j in slurm_client(ctx.slurm).list() if j["identity"] in uids]
    per_identity = {}
    for job in jobs:
        per_identity.setdefault(job["identity"], []).append(job["job_id"])
    duplicates = dict((uids[k], v) for k, v in per_identity.items() if len(v) > 1)
    assert not duplicates, duplicates
    assert set(per_identity) == set(uids)
    for item in ctx.items():
        assert item["status"]["jobId"] == str(per_identity[item["metadata"]["uid"]][0])
    wait_for(ctx.items, lambda items: all(phase_of(i) == "Completed" for i in items), timeout=300, interval=2)
    print("kills at (s, CRs with a job id, processes killed): %s; all job ids after %.1fs; all completed after %.1fs"
          % (timeline, all_ids, time.monotonic() - t0))
    # The killed controllers' standby modules (detached by Ansible's setsid) were killed by the restart.
    assert not orphans(ctx.controller), "modules of killed controllers still run"
    assert_no_token(ctx)


@contextlib.contextmanager
def cpu_burners(seconds):
    """A busy loop per CPU, as a build keeping every core busy; each ends after `seconds` at the latest."""
    burners = [subprocess.Popen(["timeout", str(seconds), "sh", "-c", "while :; do :; done"], start_new_session=True)
               for _cpu in os.sched_getaffinity(0)]
    try:
        yield
    finally:
        for burner in burners:
            try:
                os.killpg(burner.pid, signal.SIGKILL)  # the group: timeout's child too
            except ProcessLookupError:
                pass
            burner.wait()


# It busies every core on purpose.
@pytest.mark.serial
def test_restarts_under_load_converge_whatever_predecessors_left_running(setup_24_11):
    """Issue item 9: 200 held jobs on Slurm 24.11, every core busy, the controller SIGKILLed alone (its
    playbooks die with it, the jobs they submitted stay) 2 s into the burst and again as it writes the
    statuses of the burst's jobs.

    The restarted controller's lookup then finds jobs no status names yet, each with its native record
    (~6 KB): ansible-runner used to drop a result that large (over MAX_EVENT_RES), so every such CR
    stayed Pending with BackendReachable False, batch after batch, while Slurm held its job.
    """
    ctx = setup_24_11
    count, poll = 200, 15
    # The burst forms one batch, so that the restarted controller's one result holds most CRs' found
    # jobs, as the report's held 167.
    ctx.controller.args[ctx.controller.args.index("--batch-window") + 1] = "5"
    slurm = slurm_client(ctx.slurm)
    uids = {}

    def created(future):
        obj = future.result()
        uids[obj["metadata"]["uid"]] = obj["metadata"]["name"]

    def jobs_by_identity():
        found = {}
        for job in slurm.list():
            if job["identity"] in uids:
                found.setdefault(job["identity"], []).append(str(job["job_id"]))
        return found

    try:
        with cpu_burners(150), concurrent.futures.ThreadPoolExecutor(8) as pool:
            ctx.controller.start()
            ctx.controller.wait_ready()
            for index in range(count):
                pool.submit(ctx.create, "held-%03d" % index, "#!/bin/bash\ntrue\n", pollInterval=poll,
                            backendOptions={"slurm": {"hold": True}}).add_done_callback(created)
            time.sleep(2)
            left = [ctx.controller.kill_alone()]
            ctx.controller.start()
            # Again once the first status of its batch is written: the others' jobs exist, unrecorded.
            wait_for(ctx.items, lambda items: any((i.get("status") or {}).get("jobId") for i in items), timeout=90,
                     interval=0.2)
            left.append(ctx.controller.kill_alone())
            ctx.controller.start()
            restarted = time.monotonic()
            existing = jobs_by_identity()

            def without_their_job_id():
                ids = dict((i["metadata"]["uid"], (i.get("status") or {}).get("jobId")) for i in ctx.items())
                return sorted(uids[uid] for uid, job_ids in existing.items() if ids.get(uid) not in job_ids)

            wait_for(without_their_job_id, lambda names: not names, timeout=restarted + 2 * poll - time.monotonic(),
                     interval=0.5)
            print("%d of %d CRs had a job at the last restart; processes still running as the killed controllers died: "
                  "%s; every job id %.1fs after the last restart"
                  % (len(existing), count, [len(pids) for pids in left], time.monotonic() - restarted))
        wait_for(jobs_by_identity, lambda found: len(found) == count, timeout=60)
        found = jobs_by_identity()
        assert dict((uids[k], v) for k, v in found.items() if len(v) > 1) == {}
        assert not orphans(ctx.controller), "processes of killed controllers still run"
    finally:
        uids.update((item["metadata"]["uid"], item["metadata"]["name"]) for item in ctx.items())
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(slurm.cancel, [job_id for job_ids in jobs_by_identity().values() for job_id in job_ids]))
