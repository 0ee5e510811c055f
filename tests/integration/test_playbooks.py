"""ansible-playbook against every real backend: the module suites in playbooks/<backend>_job.yml.

Every backend's playbook starts at once (each mostly waits on a time limit), so the suite costs
about as much as the slowest one.
"""

import os
import uuid

import pytest

from conftest import REPO, SLURM_VERSIONS, ansible_env, ray_env, require_ray, require_slurm, slurm_env, start_playbook

PLAYBOOKS = os.path.join(REPO, "tests", "integration", "playbooks")
RUN_ID = uuid.uuid4().hex[:8]
TARGETS = ["slurm-%s" % version for version in SLURM_VERSIONS] + ["ray"]


def target_env(target):
    if target == "ray":
        values = ray_env()
        return None if values is None else dict(values, RAY_ADDRESS=values["RAY_URL"])
    return slurm_env(target.split("-", 1)[1])


def secret_of(values):
    return values.get("SLURM_JWT") or values.get("RAY_TOKEN") or None


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Start the playbook of every backend that is up; tests then wait for their own."""
    logs = tmp_path_factory.mktemp("playbooks")
    started = {}
    for target in TARGETS:
        values = target_env(target)
        if values is None:
            continue
        playbook = os.path.join(PLAYBOOKS, "%s_job.yml" % target.split("-", 1)[0])
        log_path = str(logs / ("%s.log" % target))
        run_id = "%s-%s" % (RUN_ID, target.replace(".", ""))
        started[target] = (start_playbook(playbook, {"run_id": run_id}, ansible_env(values), log_path), log_path, values)
    yield started
    for process in (run[0] for run in started.values()):
        if process.poll() is None:
            process.kill()


@pytest.mark.parametrize("target", TARGETS)
def test_job_playbook(target, runs):
    if target == "ray":
        require_ray()
    else:
        require_slurm(target.split("-", 1)[1])
    process, log_path, values = runs[target]
    returncode = process.wait(timeout=900)
    with open(log_path) as handle:
        output = handle.read()
    secret = secret_of(values)
    assert not secret or secret not in output, "the token leaked into ansible-playbook output"
    assert returncode == 0, "playbook failed against %s:\n%s" % (target, output[-6000:])
    assert "failed=0" in output


def test_demo_playbook_prints_the_job_output():
    values = require_slurm("22.05")
    log_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "bridge-demo-test-%s.log" % RUN_ID)
    process = start_playbook(os.path.join(REPO, "playbooks", "demo.yml"), {}, ansible_env(values), log_path)
    assert process.wait(timeout=300) == 0, open(log_path).read()[-4000:]
    output = open(log_path).read()
    assert "phase=completed" in output and "exit_code=0" in output
    assert "Hello from Slurm job" in output
