"""Two controller replicas with leader election: real kube-apiserver, real Slurm 22.05.

Both log in as the bridge-controller ServiceAccount (deploy/rbac.yaml only), with different
POD_NAMEs and short leases (5 s, renew deadline 3 s, retry 0.5 s). Covered: exactly one replica
acts and holds the Lease; SIGKILL of the leader (a container kill) -> the standby takes over after
expiry and CRs created since complete; SIGTERM of the new leader -> it releases the Lease and the
other replica (restarted meanwhile) takes over without waiting for expiry. No Slurm job is ever
submitted twice for one CR. Durations are printed, never asserted: the machine is shared.
"""

import datetime
import re
import signal
import socket
import time
import uuid

import pytest

from conftest import require_slurm
from controller_support import release_all, tenant_namespace
from test_controller_chaos import (SYSTEM_NAMESPACE, Controller, account, phase_of,  # noqa: F401 pylint: disable=unused-import
                                   slurm_client)
from test_controller_e2e import GROUP, PLURAL, VERSION, kube, wait_for  # noqa: F401 pylint: disable=unused-import

# Its leases of seconds flap when other tests load both cores.
pytestmark = pytest.mark.serial

TIMING = ["--lease-duration", "5", "--renew-deadline", "3", "--retry-period", "0.5"]
LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


class Replica(Controller):
    """One replica: its own POD_NAME, port, log and runner directory; the Lease is shared."""

    def __init__(self, kubeconfig, namespace, tmp_path, lease, name):
        directory = tmp_path / name
        directory.mkdir()
        super().__init__(kubeconfig, namespace, directory, lease)
        self.name = name
        self.env["POD_NAME"] = name
        self.args += TIMING

    def ready(self):
        """/readyz answers 200: leading and listed."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
                sock.sendall(b"GET /readyz HTTP/1.0\r\n\r\n")
                return sock.makefile().readline().split()[1:2] == ["200"]
        except (OSError, IndexError):
            return False

    def lines(self, text):
        """(time, line) of the log lines containing `text`, in order."""
        found = []
        for line in self.log().splitlines():
            match = LOG_TIME.match(line)
            if match and text in line:
                found.append((datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f"), line))
        return found

    def acting(self):
        return len(self.lines(" acting (selector"))


@pytest.fixture()
def ha(kube, account, tmp_path):  # pylint: disable=redefined-outer-name
    _env, api_client = kube
    slurm = require_slurm("22.05")
    from kubernetes import client

    core, custom = client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)
    coordination = client.CoordinationV1Api(api_client)
    namespace = "ha-%s" % uuid.uuid4().hex[:8]
    tenant_namespace(api_client, namespace)
    core.create_namespaced_secret(namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name="slurm"), string_data={"user": slurm["SLURM_USER"], "token": slurm["SLURM_JWT"]}))
    backend = {"type": "slurm", "url": slurm["SLURM_URL"], "credentialsSecretRef": {"name": "slurm"},
               "apiVersion": slurm["SLURM_API_VERSIONS"].split(",")[0]}
    lease = "bridge-ha-%s" % uuid.uuid4().hex[:6]
    replicas = [Replica(account[0], namespace, tmp_path, lease, "%s-%s" % (lease, suffix)) for suffix in ("a", "b")]

    class Ctx:
        pass

    ctx = Ctx()
    ctx.slurm, ctx.custom, ctx.replicas, ctx.tokens = slurm, custom, replicas, [slurm["SLURM_JWT"], account[1]]

    def create(name, script="#!/bin/bash\nsleep 2\n"):
        body = {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "BridgeJob", "metadata": {"name": name},
                "spec": {"backend": backend, "script": script, "pollInterval": 2}}
        return custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)

    def items():
        return custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"]

    def holder():
        return coordination.read_namespaced_lease(lease, SYSTEM_NAMESPACE).spec.holder_identity

    ctx.create, ctx.items, ctx.holder = create, items, holder
    yield ctx
    codes = [replica.stop() for replica in replicas]
    release_all(custom, namespace, delete=True)
    try:
        coordination.delete_namespaced_lease(lease, SYSTEM_NAMESPACE)
    except client.exceptions.ApiException:
        pass
    assert codes == [0, 0], "\n\n".join(replica.log()[-3000:] for replica in replicas)


def all_submitted_once(ctx, count):
    """Every CR has a job id, and Slurm holds exactly one job per CR, the one in its status."""
    items = wait_for(ctx.items, lambda items: len(items) == count and all((i.get("status") or {}).get("jobId") for i in items),
                     timeout=240, interval=1)
    uids = dict((item["metadata"]["uid"], item) for item in items)
    per_identity = {}
    for job in slurm_client(ctx.slurm).list():
        if job["identity"] in uids:
            per_identity.setdefault(job["identity"], []).append(str(job["job_id"]))
    duplicates = dict((uids[k]["metadata"]["name"], v) for k, v in per_identity.items() if len(v) > 1)
    assert not duplicates, duplicates
    assert set(per_identity) == set(uids)
    for uid, item in uids.items():
        assert item["status"]["jobId"] == per_identity[uid][0]


def wait_ready_one(replicas, timeout=120):
    """The one replica whose /readyz is 200; fails if two ever are."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = [replica for replica in replicas if replica.process.poll() is None and replica.ready()]
        assert len(ready) <= 1, "two replicas ready at once"
        if ready:
            return ready[0]
        time.sleep(0.1)
    raise AssertionError("no replica became ready:\n" + "\n\n".join(r.log()[-2000:] for r in replicas))


def test_one_replica_acts_and_the_other_takes_over_on_kill_and_on_release(ha):
    ctx = ha
    a, b = ctx.replicas
    for replica in ctx.replicas:
        replica.start()
    leader = wait_ready_one(ctx.replicas)
    standby = b if leader is a else a
    assert ctx.holder() == leader.name
    wait_for(lambda: standby.lines("standing by"), bool, timeout=60, interval=0.2)
    for index in range(5):
        ctx.create("first-%d" % index)
    all_submitted_once(ctx, 5)
    # Steady state: the standby never acted nor became ready while the leader renewed.
    assert leader.acting() == 1 and standby.acting() == 0 and not standby.ready()
    assert ctx.holder() == leader.name

    # SIGKILL: no release; the standby takes the Lease once it has seen it unchanged for 5 s.
    started = time.monotonic()
    leader.kill()
    for index in range(5):
        ctx.create("after-kill-%d" % index)
    wait_for(standby.ready, bool, timeout=120, interval=0.1)
    after_kill = time.monotonic() - started
    assert ctx.holder() == standby.name
    all_submitted_once(ctx, 10)
    wait_for(ctx.items, lambda items: all(phase_of(i) == "Completed" for i in items), timeout=240, interval=1)

    # The killed replica comes back (same POD_NAME, as a restarted container) as the standby.
    old, new = leader, standby
    old.start()
    wait_for(lambda: len(old.lines("standing by")) >= 1, bool, timeout=60, interval=0.2)
    assert not old.ready() and ctx.holder() == new.name

    # SIGTERM: the running batch finishes, the gate closes, the Lease is released.
    started = time.monotonic()
    for index in range(3):
        ctx.create("around-term-%d" % index)
    new.process.send_signal(signal.SIGTERM)
    wait_for(old.ready, bool, timeout=120, interval=0.1)
    after_term = time.monotonic() - started
    assert new.process.wait(timeout=120) == 0
    assert ctx.holder() == old.name
    released = new.lines("released by %s" % new.name)
    assert released, new.log()[-3000:]
    # Stop acting, release, and only then may the other act: the logs share this machine's clock.
    assert old.lines(" acting (selector")[-1][0] >= released[-1][0] >= new.lines("shutting down")[-1][0]
    all_submitted_once(ctx, 13)
    wait_for(ctx.items, lambda items: all(phase_of(i) == "Completed" for i in items), timeout=240, interval=1)
    for replica in ctx.replicas:
        log = replica.log()
        assert not any(token in log for token in ctx.tokens)
    shutting, acquired = new.lines("shutting down")[-1][0], old.lines("acquired by %s" % old.name)[-1][0]
    finishing, handing_over = (released[-1][0] - shutting).total_seconds(), (acquired - released[-1][0]).total_seconds()
    print("takeover after SIGKILL: %.1fs (lease 5 s); after SIGTERM: %.1fs, of which %.1fs finishing the batch, "
          "%.2fs from release to the other's acquiring" % (after_kill, after_term, finishing, handing_over))
