"""The Bridge execution environment (ee/execution-environment.yml, built by tools/ee-image.sh) running
real jobs the way AWX runs a job template: a private data dir with the project, an inventory, the
extra vars and the environment the job's AWX credential injects (awx/credential_types, rendered as
AWX does: tests/awx_credentials.py), handed to ansible-runner, which runs ansible-playbook in the
image:
- playbooks/demo.yml on Slurm 22.05 through `ansible-runner run --process-isolation` (podman);
- playbooks/job.yml on Ray through `ansible-runner transmit | ansible-runner worker (in the image) |
  ansible-runner process`, the stream AWX's receptor carries to an execution node.
Both with the host's network, so that the services on 127.0.0.1 are reachable. Afterwards each job
is read back from its service on the host, by its id."""

import glob
import json
import os
import shutil
import subprocess
import time
import uuid

import pytest

import awx_credentials
from conftest import REPO, adhoc_result, adhoc_with_env_file, require_ray, require_slurm, require_sshd

SCRIPT = os.path.join(REPO, "tools", "ee-image.sh")
TYPES = awx_credentials.load_types()


@pytest.fixture(scope="module")
def image():
    started = time.monotonic()
    built = subprocess.run([SCRIPT, "build"], capture_output=True, text=True, timeout=3000, check=False)
    assert built.returncode == 0, built.stderr[-4000:]
    print("tools/ee-image.sh build: %.0f s" % (time.monotonic() - started))
    return built.stdout.strip().splitlines()[-1]


def private_data_dir(path, env, extravars):
    """A job's private data dir as AWX writes it: project, inventory, env/envvars, env/extravars."""
    shutil.copytree(os.path.join(REPO, "playbooks"), os.path.join(path, "project"))
    os.makedirs(os.path.join(path, "inventory"))
    with open(os.path.join(path, "inventory", "hosts"), "w") as handle:
        handle.write("localhost ansible_connection=local\n")
    os.makedirs(os.path.join(path, "env"), exist_ok=True)
    for name, values in (("envvars", env), ("extravars", extravars)):
        with os.fdopen(os.open(os.path.join(path, "env", name), os.O_WRONLY | os.O_CREAT, 0o600), "w") as handle:
            json.dump(values, handle)
    return path


def run(mode, private, ident, playbook, *args):
    completed = subprocess.run([SCRIPT, mode, private, "-p", playbook, "--ident", ident] + list(args),
                               capture_output=True, text=True, timeout=900, check=False)
    with open(os.path.join(private, "artifacts", ident, "rc")) as handle:
        rc = handle.read().strip()
    assert rc == "0", (completed.stdout + completed.stderr)[-6000:]
    return completed


def task_result(private, ident, task):
    """The result (event_data.res) of the task named `task`, from the run's job events."""
    for path in glob.glob(os.path.join(private, "artifacts", ident, "job_events", "*.json")):
        with open(path) as handle:
            event = json.load(handle)
        if event.get("event") == "runner_on_ok" and event["event_data"].get("task") == task:
            return event["event_data"]["res"]
    raise AssertionError("no result of task %r in %s" % (task, private))


def test_demo_on_slurm_through_process_isolation(image, tmp_path):
    """With exactly what a job template with a Bridge Slurm, a Bridge login node and a Machine
    credential gets (docs/awx.md): the injected environment, and the Machine credential's key as
    env/ssh_key, which ansible-runner adds to an ssh-agent in the EE. No volume of the cluster's:
    the demo reads the job's output on the login node (tools/sshd.sh), over SSH."""
    values = require_slurm("22.05")
    login = require_sshd()
    private = str(tmp_path / "demo")
    env = awx_credentials.inject(TYPES["slurm"], {"url": values["SLURM_URL"], "user": values["SLURM_USER"],
                                                  "token": values["SLURM_JWT"]}, private)
    with open(login["BRIDGE_SSH_KNOWN_HOSTS"]) as handle:
        known_hosts = handle.read()
    env.update(awx_credentials.inject(TYPES["login_node"], {
        "host": login["BRIDGE_SSH_HOST"], "port": login["BRIDGE_SSH_PORT"], "user": login["BRIDGE_SSH_USER"],
        "known_hosts": known_hosts}, private))
    private_data_dir(private, env, {})
    with open(login["BRIDGE_SSH_KEY"]) as key, \
            os.fdopen(os.open(os.path.join(private, "env", "ssh_key"), os.O_WRONLY | os.O_CREAT, 0o600), "w") as handle:
        handle.write(key.read())
    completed = run("run", private, "demo", "demo.yml")
    submitted = task_result(private, "demo", "Submit a job and wait until it is finished")
    assert submitted["phase"] == "completed" and submitted["exit_code"] == 0, submitted
    shown = task_result(private, "demo", "Show the result")["msg"]
    assert "Hello from Slurm job %s" % submitted["job_id"] in " ".join(shown[3]), shown
    assert values["SLURM_JWT"] not in completed.stdout + completed.stderr

    # Slurm knows the job by that id, and it completed.
    env_file = awx_credentials.write_env_file(str(tmp_path / "slurm.env"), env)
    info = adhoc_with_env_file(env_file, "bridge.hpc.slurm_job_info", "-a", "job_id=%s" % submitted["job_id"])
    result = adhoc_result(info)
    assert result is not None, (info.stdout + info.stderr)[-4000:]
    job = result["job"]
    assert job["phase"] == "completed" and job["exit_code"] == 0, job
    print("demo.yml in the EE: Slurm job %s %s exit %s" % (submitted["job_id"], job["phase"], job["exit_code"]))


def test_job_template_on_ray_through_the_worker_stream(image, tmp_path):
    values = require_ray()
    env = awx_credentials.inject(TYPES["ray"], {"url": values["RAY_ADDRESS"], "token": values.get("RAY_AUTH_TOKEN", "")})
    run_name = "ee-%s" % uuid.uuid4().hex[:8]
    extravars = {"job_backend": "ray", "job_run": run_name, "job_memory": "100M",
                 "job_script": "#!/bin/sh\necho '{\"ran_in\": \"%s\"}'\n" % run_name}
    private = private_data_dir(str(tmp_path / "ray"), env, extravars)
    run("stream", private, "ray", "job.yml")
    summary = task_result(private, "ray", "Show what it did")["msg"]
    assert "completed exit 0" in summary and "submitted now" in summary, summary

    # Ray knows the job by its identity <run>.job, and its driver printed what the script says.
    env_file = awx_credentials.write_env_file(str(tmp_path / "ray.env"), env)
    info = adhoc_with_env_file(env_file, "bridge.hpc.ray_job_info", "-a", "identity=%s.job logs=true" % run_name)
    result = adhoc_result(info)
    assert result is not None, (info.stdout + info.stderr)[-4000:]
    assert result["job"]["phase"] == "completed" and result["job"]["job_id"] in summary, (result["job"], summary)
    assert '"ran_in": "%s"' % run_name in result["log"]
    print("job.yml in the EE: Ray job %s %s" % (result["job"]["job_id"], result["job"]["phase"]))

    # Launched again, the template finds the job and submits nothing.
    again = private_data_dir(str(tmp_path / "again"), env, extravars)
    run("stream", again, "again", "job.yml")
    assert "found" in task_result(again, "again", "Show what it did")["msg"]
