"""The controller's playbooks are bounded and die with it (issue 37, item 9), end to end.

20 BridgeJobs with 20 distinct backend URLs (relays to one real Slurm 22.05, each its own port)
are created at once; the real controller, against the real apiserver under deploy/rbac.yaml, runs
them with --max-standby 2. A sampler reads /proc all the while: the sum of RSS of the controller
and every process below it, and how many ansible-playbook processes there are. They must stay
within runner.RUNNING_AT_ONCE + --max-standby playbooks and under the Deployment's memory limit.
Then the controller alone is SIGKILLed, as outside a container, and no process of its playbooks may
be left (launcher.py's parent-death signal). The numbers are printed (pytest -s).
"""

import concurrent.futures
import os
import signal
import threading
import time

import yaml

from conftest import REPO, Relay
from controller_support import descendants
from test_controller_chaos import account, orphans, setup  # noqa: F401 pylint: disable=unused-import
from test_controller_e2e import kube, wait_for  # noqa: F401 pylint: disable=unused-import

from bridge_controller.runner import RUNNING_AT_ONCE

BACKENDS = 20
MAX_STANDBY = 2
UNITS = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30}


def memory_limit():
    """The controller container's memory limit in deploy/deployment.yaml, in bytes."""
    with open(os.path.join(REPO, "deploy", "deployment.yaml")) as handle:
        deployment = next(doc for doc in yaml.safe_load_all(handle) if doc and doc.get("kind") == "Deployment")
    limit = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"]
    return int(limit[:-2]) * UNITS[limit[-2:]]


def process(pid):
    """(parent pid, RSS in bytes, argv) of a live process; None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            argv = [arg.decode("utf-8", "replace") for arg in handle.read().split(b"\0") if arg]
    except OSError:
        return None
    if fields[0] == "Z":
        return None
    return int(fields[1]), int(fields[21]) * os.sysconf("SC_PAGE_SIZE"), argv


def is_ansible_playbook(argv):
    """ansible-playbook and its forked workers: python running the ansible-playbook script."""
    return any(os.path.basename(arg) == "ansible-playbook" for arg in argv[:2])


class Sampler(threading.Thread):
    """Peaks of the tree below `pid`: RSS summed, ansible-playbook processes, playbooks (those
    ansible-playbook processes whose parent is none: a playbook, not one of its workers)."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid = pid
        self.stopping = threading.Event()
        self.peak_rss = self.peak_processes = self.peak_playbooks = self.samples = 0

    def run(self):
        while not self.stopping.is_set():
            tree = dict((pid, process(pid)) for pid in [self.pid] + descendants(self.pid))
            tree = dict((pid, info) for pid, info in tree.items() if info is not None)
            ansible = [pid for pid, (_parent, _rss, argv) in tree.items() if is_ansible_playbook(argv)]
            playbooks = [pid for pid in ansible if tree[pid][0] not in ansible]
            self.peak_rss = max(self.peak_rss, sum(rss for _parent, rss, _argv in tree.values()))
            self.peak_processes = max(self.peak_processes, len(ansible))
            self.peak_playbooks = max(self.peak_playbooks, len(playbooks))
            self.samples += 1
            self.stopping.wait(0.05)


def test_twenty_new_backends_at_once_stay_bounded_and_die_with_the_controller(setup):  # noqa: F811 pylint: disable=redefined-outer-name
    ctx = setup
    relays = [Relay.to(ctx.slurm["SLURM_URL"]) for _index in range(BACKENDS)]
    slurm_jobs = []
    ctx.controller.args += ["--max-standby", str(MAX_STANDBY)]
    try:
        ctx.controller.start()
        ctx.controller.wait_ready()
        sampler = Sampler(ctx.controller.process.pid)
        sampler.start()
        names = ["backend-%02d" % index for index in range(BACKENDS)]

        def create(index):
            return ctx.create(names[index], "#!/bin/bash\ntrue\n", backend=dict(ctx.backend, url=relays[index].url),
                              pollInterval=5, backendOptions={"slurm": {"hold": True}})

        with concurrent.futures.ThreadPoolExecutor(BACKENDS) as pool:
            list(pool.map(create, range(BACKENDS)))
        started = time.monotonic()
        items = wait_for(ctx.items, lambda items: len(items) == BACKENDS and all(
            (item.get("status") or {}).get("jobId") for item in items), timeout=600, interval=1.0)
        slurm_jobs.extend(item["status"]["jobId"] for item in items)
        submitted = time.monotonic() - started
        time.sleep(10)   # a few polls of the 20 backends too
        sampler.stopping.set()
        sampler.join()
        bound = RUNNING_AT_ONCE + MAX_STANDBY
        print("\n%d backends at once, --max-standby %d: every CR had its job id in %.1fs; peaks over %d samples: "
              "%d playbooks (bound %d), %d ansible-playbook processes with their workers, %.0f MiB RSS of the "
              "controller and all below it (limit %.0f MiB)"
              % (BACKENDS, MAX_STANDBY, submitted, sampler.samples, sampler.peak_playbooks, bound,
                 sampler.peak_processes, sampler.peak_rss / 2.0 ** 20, memory_limit() / 2.0 ** 20))
        # Playbooks are what --max-standby bounds; their processes (Ansible's worker, a fork that is
        # just ending) are printed above, not bounded.
        assert sampler.peak_playbooks <= bound
        assert sampler.peak_rss < memory_limit()

        below = descendants(ctx.controller.process.pid)
        assert [pid for pid in below if process(pid) and is_ansible_playbook(process(pid)[2])], \
            "no playbook left to outlive the controller: not the case under test"
        os.kill(ctx.controller.process.pid, signal.SIGKILL)
        ctx.controller.process.wait(timeout=30)
        killed = time.monotonic()
        left = wait_for(lambda: orphans(ctx.controller), lambda pids: not pids, timeout=60, interval=0.2)
        print("the SIGKILLed controller's playbooks all ended %.1fs after it" % (time.monotonic() - killed))
        assert not left

        # Restarted, then stopped as Kubernetes stops a pod (SIGTERM): it kills its standbys on the way out.
        ctx.controller.start()
        ctx.controller.wait_ready()
        wait_for(lambda: descendants(ctx.controller.process.pid), lambda pids: pids, timeout=60, interval=0.2)
        assert ctx.controller.stop() == 0, ctx.controller.log()[-4000:]
        assert not orphans(ctx.controller), "a stopped controller left playbooks running"
    finally:
        for relay in relays:
            relay.close()
        if slurm_jobs:
            from test_controller_chaos import slurm_client

            slurm = slurm_client(ctx.slurm)
            for job_id in slurm_jobs:
                try:
                    slurm.cancel(str(job_id))
                except Exception:  # pylint: disable=broad-except
                    pass  # ended or gone already
