"""The controller with a Slurm token that expires and is rotated in the credentials Secret.

A real kube-apiserver, real Slurm (22.05: a refused token is a bare HTTP 500; 24.11 and 26.05:
HTTP 511), the controller as a process. Per version, in a namespace of its own:

1. the Secret holds a JWT that lives LIFESPAN seconds (`tools/slurm-cluster.sh token V bridge S`);
   two BridgeJobs whose jobs run far longer (one per CPU of the node) are submitted with it;
2. once the token has expired, polls are refused: `BackendReachable` False with reason AuthFailed,
   the CRs stay Running (nothing is judged from a refusal);
3. a third BridgeJob created then is refused at its submit and would wait for the retry cap (300 s);
4. the Secret's token is replaced by a fresh one: the next poll finds the Secret changed and the
   refused CR is submitted within a minute; a fourth BridgeJob is created after the rotation;
5. every CR reaches Completed, each Slurm job exists once (the job list by identity = CR UID) and
   is the one in status.jobId: nothing was submitted twice.

The controller reads the Secret for every batch and every poll: /metrics' bridge_secret_reads
equals its runner calls. No token is in any status, event, the controller's log or runner files.
"""

import collections
import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest

from conftest import COLLECTIONS, REPO, RUN, require_slurm, slurm_env
from test_controller_backends import RUN_LABEL, Namespace, condition, phase_of
from controller_support import release_labelled, start_controller
from test_controller_e2e import free_port, kube, wait_for  # noqa: F401 pylint: disable=unused-import

LIFESPAN = 20          # seconds: the controller's start and the first submit fit well inside
JOB_SECONDS = 45       # the jobs run across the expiry and the rotation
# 22.05 refuses with a bare 500, 24.11 with 511 (26.05 as 24.11; the module tests cover it).
VERSIONS = ("22.05", "24.11")
# Not Slurm's default /tmp/slurm-<job id>.out, which a job of that id of an earlier cluster may own.
NO_OUTPUT = "/dev/null"

# secrets: every token handed to the controller (test_controller_backends.Namespace checks them too).
Controller = collections.namedtuple("Controller", "api_client labels port secrets")


def issue_token(version, lifespan):
    completed = subprocess.run([os.path.join(REPO, "tools", "slurm-cluster.sh"), "token", version, "bridge", str(lifespan)],
                               env=dict(os.environ, BRIDGE_RUN=RUN), capture_output=True, text=True, timeout=60, check=True)
    return completed.stdout.strip()


def metrics(port):
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        text = sock.makefile().read()
    values = {}
    for line in text.split("\r\n\r\n", 1)[-1].splitlines():
        name, _sep, value = line.rpartition(" ")
        if name.startswith("bridge_") and "{" not in name:
            values[name] = float(value)
    return values


@pytest.fixture(scope="module")
def controller(kube, tmp_path_factory):
    env, api_client = kube
    labels = {RUN_LABEL: uuid.uuid4().hex[:12]}
    tmp_path = tmp_path_factory.mktemp("controller-token")
    log_path = tmp_path / "controller.log"
    port = free_port()
    secrets = []
    with open(log_path, "w") as log:
        process = start_controller(env["KUBECONFIG"], "%s=%s" % (RUN_LABEL, labels[RUN_LABEL]), tmp_path / "runner", log, port)
    try:
        yield Controller(api_client, labels, port, secrets)
    finally:
        process.send_signal(signal.SIGTERM)
        returncode = process.wait(timeout=120)
        release_labelled(api_client, "%s=%s" % (RUN_LABEL, labels[RUN_LABEL]))
    log = log_path.read_text()
    for token in secrets:
        assert token not in log
        assert not subprocess.run(["grep", "-rlF", token, str(tmp_path)], capture_output=True, check=False).stdout
    assert returncode == 0, log[-4000:]


def slurm_jobs(slurm, identities):
    if COLLECTIONS not in sys.path:
        sys.path.insert(0, COLLECTIONS)
    from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient

    client = SlurmClient(slurm["SLURM_URL"], user=slurm["SLURM_USER"], token=slurm["SLURM_JWT"])
    try:
        return client.list(identities=identities)
    finally:
        client.close()


@pytest.mark.parametrize("version", VERSIONS)
def test_a_token_rotated_in_the_secret_while_jobs_run(controller, version):
    slurm = require_slurm(version) if version == "22.05" else slurm_env(version)
    if slurm is None:
        pytest.skip("Slurm %s is not running: tools/slurm-cluster.sh start %s" % (version, version))
    namespace = Namespace(controller, "token-%s" % version.replace(".", ""))
    short = issue_token(version, LIFESPAN)
    expires = time.monotonic() + LIFESPAN
    controller.secrets.append(short)
    namespace.secret("slurm", {"user": slurm["SLURM_USER"], "token": short})
    backend = {"type": "slurm", "url": slurm["SLURM_URL"], "credentialsSecretRef": {"name": "slurm"},
               "apiVersion": slurm["SLURM_API_VERSIONS"].split(",")[0]}
    long_job = "#!/bin/bash\nsleep %d\n" % JOB_SECONDS
    names = ["long-%d" % index for index in range(2)]   # the node's two CPUs
    for name in names:
        namespace.bridgejob(name, backend, script=long_job, resources={"timeLimit": 5}, stdout=NO_OUTPUT)

    submitted = [wait_for(lambda name=name: namespace.read(name), lambda o: (o.get("status") or {}).get("jobId"),
                          timeout=LIFESPAN) for name in names]
    assert time.monotonic() < expires, "the jobs were submitted after the first token expired: raise LIFESPAN"

    # The first poll after the expiry is refused; the CRs keep their phase.
    refused = wait_for(lambda: namespace.read(names[0]),
                       lambda o: condition(o, "BackendReachable").get("status") == "False",
                       timeout=LIFESPAN + 30, interval=0.5)
    assert time.monotonic() >= expires - 1
    assert condition(refused, "BackendReachable")["reason"] == "AuthFailed", refused["status"]
    assert phase_of(refused) in ("Queued", "Running"), refused["status"]

    short_job = "#!/bin/bash\ntrue\n"
    namespace.bridgejob("while-expired", backend, script=short_job, resources={"timeLimit": 5}, stdout=NO_OUTPUT)
    pending = wait_for(lambda: namespace.read("while-expired"),
                       lambda o: condition(o, "BackendReachable").get("status") == "False", timeout=60, interval=0.5)
    assert condition(pending, "BackendReachable")["reason"] == "AuthFailed" and not pending["status"].get("jobId")
    names.append("while-expired")

    fresh = issue_token(version, 600)
    controller.secrets.append(fresh)
    namespace.core.patch_namespaced_secret("slurm", namespace.name, {"stringData": {"token": fresh}})
    rotated = time.monotonic()
    namespace.bridgejob("after-rotation", backend, script=short_job, resources={"timeLimit": 5}, stdout=NO_OUTPUT)
    names.append("after-rotation")

    submitted_again = wait_for(lambda: namespace.read("while-expired"), lambda o: (o.get("status") or {}).get("jobId"),
                               timeout=60, interval=0.5)
    recovered = time.monotonic() - rotated
    done = [namespace.wait_phase(name, "Completed", timeout=JOB_SECONDS + 120) for name in names]
    assert done[2]["status"]["jobId"] == submitted_again["status"]["jobId"]
    for obj in done:
        assert condition(obj, "BackendReachable")["status"] == "True", obj["status"]
    uids = dict((obj["metadata"]["uid"], obj["status"]["jobId"]) for obj in done)
    jobs = slurm_jobs(slurm, list(uids))
    assert sorted((job["identity"], job["job_id"]) for job in jobs) == sorted(uids.items()), \
        "each BridgeJob's job exists once on Slurm, and it is the one in its status"
    assert [obj["status"]["jobId"] for obj in done[:2]] == [obj["status"]["jobId"] for obj in submitted]

    namespace.assert_no_secret(names)
    statuses = repr([obj["status"] for obj in done])
    events = repr([event.message for event in namespace.core.list_namespaced_event(namespace.name).items])
    assert short not in statuses + events and fresh not in statuses + events

    for _attempt in range(10):   # a poll may be between its Secret read and its runner call
        counted = metrics(controller.port)
        calls = sum(value for name, value in counted.items() if name.startswith("bridge_runner_calls_"))
        if counted.get("bridge_secret_reads") == calls:
            break
        time.sleep(0.3)
    assert calls and counted["bridge_secret_reads"] == calls, "one Secret GET per runner call: %r" % counted
    print("Slurm %s: the CR refused while the token was expired was submitted %.1f s after the rotation; "
          "runner calls %d, Secret reads %d, early retries on a changed Secret %d" % (
              version, recovered, calls, counted["bridge_secret_reads"], counted.get("bridge_secret_change_retries", 0)))
