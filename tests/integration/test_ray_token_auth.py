"""Token authentication against a second, real Ray head started with RAY_AUTH_MODE=token."""

import os
import uuid

import pytest

from conftest import (REPO, adhoc_result, adhoc_with_env_file, ansible_env, private_ray_head, read_env_file,
                      require_ray, start_playbook)

PORTS = dict(BRIDGE_RAY_DASHBOARD_PORT="8266", BRIDGE_RAY_GCS_PORT="6380", BRIDGE_RAY_CLIENT_PORT="23001",
             BRIDGE_RAY_AGENT_PORT="52366")


@pytest.fixture(scope="module")
def token_env_file():
    require_ray()
    with private_ray_head(PORTS, BRIDGE_RAY_AUTH="token") as env_file:
        yield env_file


@pytest.fixture(scope="module")
def token_head(token_env_file):
    return read_env_file(token_env_file)


def test_wrong_token_is_refused_and_nothing_is_submitted(token_head, tmp_path):
    run_id = uuid.uuid4().hex[:8]
    log_path = str(tmp_path / "token.log")
    playbook = os.path.join(REPO, "tests", "integration", "playbooks", "ray_token.yml")
    extra = {"ray_url": token_head["RAY_URL"], "ray_token": token_head["RAY_TOKEN"], "run_id": run_id}
    process = start_playbook(playbook, extra, ansible_env(), log_path)
    returncode = process.wait(timeout=300)
    output = open(log_path).read()
    assert token_head["RAY_TOKEN"] not in output
    assert returncode == 0, output[-6000:]


def test_env_file_alone_authenticates_an_adhoc_command(token_env_file, token_head):
    """Issue item 10: the env file exports RAY_ADDRESS and RAY_AUTH_TOKEN, the names the modules read."""
    completed = adhoc_with_env_file(token_env_file, "bridge.hpc.ray_job_info")
    output = completed.stdout + completed.stderr
    result = adhoc_result(completed)
    assert result is not None and isinstance(result["jobs"], list), output[-4000:]
    assert token_head["RAY_TOKEN"] not in output
