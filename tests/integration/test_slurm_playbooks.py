"""ansible-playbook against every real Slurm version: the module suite in playbooks/slurm_job.yml.

The three clusters run their playbooks at once (each one mostly waits for Slurm's time limit),
so the suite costs about as much as one version.
"""

import os
import uuid

import pytest

from conftest import REPO, SLURM_VERSIONS, ansible_env, require_slurm, slurm_env, start_playbook

PLAYBOOK = os.path.join(REPO, "tests", "integration", "playbooks", "slurm_job.yml")
RUN_ID = uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Start the playbook against every cluster that is up; tests then wait for their own."""
    logs = tmp_path_factory.mktemp("playbooks")
    started = {}
    for version in SLURM_VERSIONS:
        values = slurm_env(version)
        if values is None:
            continue
        log_path = str(logs / ("slurm-%s.log" % version))
        process = start_playbook(PLAYBOOK, {"run_id": "%s-%s" % (RUN_ID, version.replace(".", ""))},
                                 ansible_env(values), log_path)
        started[version] = (process, log_path, values)
    yield started
    for process in (run[0] for run in started.values()):
        if process.poll() is None:
            process.kill()


@pytest.mark.parametrize("version", SLURM_VERSIONS)
def test_slurm_job_playbook(version, runs):
    values = require_slurm(version)
    process, log_path = runs[version][:2]
    returncode = process.wait(timeout=900)
    with open(log_path) as handle:
        output = handle.read()
    assert values["SLURM_JWT"] not in output, "the token leaked into ansible-playbook output"
    assert returncode == 0, "playbook failed against Slurm %s:\n%s" % (version, output[-6000:])
    assert "failed=0" in output


def test_demo_playbook_prints_the_job_output():
    values = require_slurm("22.05")
    log_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "bridge-demo-test-%s.log" % RUN_ID)
    process = start_playbook(os.path.join(REPO, "playbooks", "demo.yml"), {}, ansible_env(values), log_path)
    assert process.wait(timeout=300) == 0, open(log_path).read()[-4000:]
    output = open(log_path).read()
    assert "phase=completed" in output and "exit_code=0" in output
    assert "Hello from Slurm job" in output
