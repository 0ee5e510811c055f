"""Token authentication against a second, real Ray head started with RAY_AUTH_MODE=token."""

import os
import subprocess
import tempfile
import uuid

import pytest

from conftest import REPO, ansible_env, read_env_file, require_ray, start_playbook

PORTS = dict(BRIDGE_RAY_DASHBOARD_PORT="8266", BRIDGE_RAY_GCS_PORT="6380", BRIDGE_RAY_CLIENT_PORT="23001",
             BRIDGE_RAY_AGENT_PORT="52366")


@pytest.fixture(scope="module")
def token_head():
    require_ray()
    run_dir = tempfile.mkdtemp(prefix="brt-", dir="/tmp")
    env = dict(os.environ, BRIDGE_RUN=run_dir, BRIDGE_RAY_AUTH="token", **PORTS)
    script = os.path.join(REPO, "tools", "ray-cluster.sh")
    subprocess.run([script, "start"], env=env, check=True)
    try:
        yield read_env_file(os.path.join(run_dir, "ray", "env"))
    finally:
        subprocess.run([script, "stop"], env=env, check=False)


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
