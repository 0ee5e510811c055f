"""The controller end to end: a real kube-apiserver, real Slurm 22.05, the controller as a process.

CR -> real Slurm job -> Completed with its exit code (and what its resultQuery selects in
status.result); a failing job -> Failed with its class; a resultQuery that is no JMESPath -> Failed
with nothing submitted; delete while running -> the Slurm job is cancelled and the CR released; the
token appears in no status, event or controller log.
"""

import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest

from conftest import COLLECTIONS, REPO, RUN, kube_control_plane_env, read_env_file, require_slurm
from controller_support import GROUP, PLURAL, VERSION, controller_env, free_port, install_crd, slurm_backend, slurm_namespace

KUBE_SCRIPT = os.path.join(REPO, "tools", "kube-control-plane.sh")


@pytest.fixture(scope="module")
def kube():
    if not os.path.exists(os.path.join(REPO, "deploy", "crd.yaml")):
        pytest.skip("deploy/crd.yaml is missing")
    env = kube_control_plane_env()
    if env is None:
        result = subprocess.run([KUBE_SCRIPT, "start"], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            message = "kube-apiserver did not start: %s" % result.stderr[-2000:]
            if os.environ.get("BRIDGE_REQUIRE_SERVICES") == "1":
                pytest.fail(message)
            pytest.skip(message)
        env = read_env_file(os.path.join(RUN, "kube", "env"))
    from kubernetes import config

    api_client = config.new_client_from_config(env["KUBECONFIG"])
    install_crd(api_client)
    return env, api_client


def wait_for(read, check, timeout=180, interval=1.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = read()
        if check(last):
            return last
        time.sleep(interval)
    raise AssertionError("timed out; last seen: %r" % (last,))


def test_bridgejobs_run_on_real_slurm(kube, tmp_path):
    env, api_client = kube
    slurm = require_slurm("22.05")
    from kubernetes import client

    core, custom = client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)
    namespace = "e2e-%s" % uuid.uuid4().hex[:8]
    slurm_namespace(core, namespace, slurm)
    backend = slurm_backend(slurm)

    def bridgejob(name, script, **spec):
        return {"apiVersion": "bridge.dev/v1alpha1", "kind": "BridgeJob", "metadata": {"name": name},
                "spec": dict(spec, backend=backend, script=script, pollInterval=2)}

    for name, script, spec in (("ok", "#!/bin/bash\necho fine\n", {"resultQuery": "{exit: exit_code, id: job_id}"}),
                               ("exit3", "#!/bin/bash\nexit 3\n", {}),
                               ("sleeper", "#!/bin/bash\nsleep 300\n", {}),
                               ("badquery", "#!/bin/bash\necho never\n", {"resultQuery": "{exit: exit_code"})):
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, bridgejob(name, script, **spec))

    port = free_port()
    log_path = tmp_path / "controller.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "bridge_controller.main", "--kubeconfig", env["KUBECONFIG"], "--namespace", namespace,
         "--playbook-dir", os.path.join(REPO, "playbooks"), "--work-dir", str(tmp_path / "runner"),
         "--collections-path", COLLECTIONS, "--port", str(port), "--bind-address", "127.0.0.1",
         "--batch-window", "0.3"],
        stdout=open(log_path, "w"), stderr=subprocess.STDOUT, env=controller_env())
    try:
        def read(name):
            return custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)

        done = wait_for(lambda: read("ok"), lambda o: (o.get("status") or {}).get("phase") == "Completed")
        assert done["status"]["exitCode"] == 0 and done["status"]["jobId"]
        assert "bridge.dev/cancel-job" in done["metadata"]["finalizers"]
        assert done["status"]["result"] == {"exit": 0, "id": done["status"]["jobId"]}
        assert {c["type"]: c["status"] for c in done["status"]["conditions"]}["ResultSelected"] == "True"
        refused = wait_for(lambda: read("badquery"), lambda o: (o.get("status") or {}).get("phase") == "Failed")
        assert refused["status"]["failureClass"] == "rejected" and "jobId" not in refused["status"]
        assert refused["status"]["reason"].startswith("spec.resultQuery: is not a valid JMESPath expression")
        assert not refused["metadata"].get("finalizers"), "nothing was submitted, so nothing to clean up"
        failed = wait_for(lambda: read("exit3"), lambda o: (o.get("status") or {}).get("phase") == "Failed")
        assert failed["status"]["exitCode"] == 3 and failed["status"]["failureClass"] == "non_zero_exit"
        running = wait_for(lambda: read("sleeper"), lambda o: (o.get("status") or {}).get("phase") == "Running")
        job_id = running["status"]["jobId"]

        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "sleeper")

        def gone():
            try:
                read("sleeper")
                return False
            except client.exceptions.ApiException as exc:
                return exc.status == 404

        wait_for(gone, bool, timeout=120)
        sys.path.insert(0, COLLECTIONS)
        from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient

        slurm_job = SlurmClient(slurm["SLURM_URL"], user=slurm["SLURM_USER"], token=slurm["SLURM_JWT"]).get(job_id)
        assert slurm_job["phase"] == "cancelled", slurm_job["native_state"]

        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            metrics = sock.makefile().read()
        assert "bridge_runner_calls_submit" in metrics

        events = core.list_namespaced_event(namespace).items
        statuses = [read(name).get("status") for name in ("ok", "exit3")]
        secret = slurm["SLURM_JWT"]
        assert secret not in repr(statuses) + repr([e.message for e in events])
    finally:
        process.send_signal(signal.SIGTERM)
        returncode = process.wait(timeout=120)
        for name in ("ok", "exit3"):
            try:
                custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name,
                                                      {"metadata": {"finalizers": []}})
            except client.exceptions.ApiException:
                pass
    log = log_path.read_text()
    assert slurm["SLURM_JWT"] not in log
    assert not subprocess.run(["grep", "-rl", slurm["SLURM_JWT"], str(tmp_path)], capture_output=True, check=False).stdout
    assert returncode == 0, log[-4000:]
