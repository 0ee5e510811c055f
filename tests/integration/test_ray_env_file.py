"""The env file of tools/ray-cluster.sh is all an ad-hoc command needs (issue item 10).

A private head of this tree's script, so that the env file under test is the one this tree writes
(the shared head's may come from an older checkout). The token head's counterpart is in
test_ray_token_auth.py.
"""

import pytest

from conftest import adhoc_result, adhoc_with_env_file, private_ray_head, read_env_file, require_ray

PORTS = dict(BRIDGE_RAY_DASHBOARD_PORT="8267", BRIDGE_RAY_GCS_PORT="6381", BRIDGE_RAY_CLIENT_PORT="23002",
             BRIDGE_RAY_AGENT_PORT="52367")


@pytest.fixture(scope="module")
def env_file():
    require_ray()
    with private_ray_head(PORTS) as path:
        yield path


def test_env_file_names_the_dashboard_as_the_modules_read_it(env_file):
    values = read_env_file(env_file)
    assert values["RAY_ADDRESS"] == values["RAY_URL"] == "http://127.0.0.1:" + PORTS["BRIDGE_RAY_DASHBOARD_PORT"]
    # A token-less head exports no RAY_AUTH_TOKEN: a later `ray start` would turn token auth on.
    assert "RAY_AUTH_TOKEN" not in values


def test_env_file_alone_is_enough_for_an_adhoc_command(env_file):
    completed = adhoc_with_env_file(env_file, "bridge.hpc.ray_job_info")
    result = adhoc_result(completed)
    assert result is not None and result["jobs"] == [], (completed.stdout + completed.stderr)[-4000:]
