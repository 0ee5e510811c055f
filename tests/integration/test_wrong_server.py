"""Modules pointed at a server that is not their manager's API fail with a typed error, as a user
meets it: `ansible localhost -m ...` against a broken proxy or the wrong service (tests/fault_server.py).

Before the backend contract, slurmrestd's wrong-typed JSON made these fail with "Module failed:
'int' object is not iterable", and an HTML page passed discovery until the submit. Before issue 21,
the message quoted the page's first 80 characters: a URL pointing at an internal page read it back
to whoever chose the URL. The page is now named by its content type and size only.
"""

import json

import pytest

from conftest import adhoc_with_env_file
from fault_server import LOGIN_PAGE, FaultServer

TOKEN = "t0ken-never-shown"
CALLS = (
    ("slurm", "bridge.hpc.slurm_job", "script='#!/bin/bash\ntrue\n' identity=wrong-server"),
    ("slurm", "bridge.hpc.slurm_job_info", "identity=wrong-server"),
    ("slurm", "bridge.hpc.slurm_cluster_info", ""),
    ("ray", "bridge.hpc.ray_job", "script='#!/bin/bash\ntrue\n' identity=wrong-server"),
    ("ray", "bridge.hpc.ray_job_info", "identity=wrong-server"),
    ("ray", "bridge.hpc.ray_cluster_info", ""),
)
ENV = {"slurm": ("SLURM_URL", "SLURM_JWT"), "ray": ("RAY_ADDRESS", "RAY_AUTH_TOKEN")}


@pytest.fixture(scope="module")
def server():
    with FaultServer() as running:
        yield running


@pytest.mark.parametrize("mode", ("wrong_types", "html", "huge_list", "empty"))
@pytest.mark.parametrize("backend, module, args", CALLS, ids=[call[1].rsplit(".", 1)[1] for call in CALLS])
def test_a_wrong_server_is_a_malformed_response_naming_the_endpoint(tmp_path, server, mode, backend, module, args):
    server.mode = mode
    url_var, token_var = ENV[backend]
    env_file = tmp_path / "env"
    env_file.write_text("%s=%s\n%s=%s\nSLURM_USER=bridge\n" % (url_var, server.url, token_var, TOKEN))
    completed = adhoc_with_env_file(str(env_file), module, "-a", args)
    output = completed.stdout + completed.stderr
    assert completed.returncode != 0, output
    head, _sep, body = completed.stdout.partition(" => ")
    assert "FAILED" in head, output
    result = json.loads(body)
    assert result["error"]["type"] == "MalformedResponse", result
    assert result["error"]["temporary"] is False
    assert "answered" in result["msg"] and server.url in result["msg"]
    assert "Traceback" not in output and "is not iterable" not in output
    assert TOKEN not in output
    page_lines = [line.strip() for line in LOGIN_PAGE.splitlines() if line.strip() and line.strip() != "%s"]
    assert not [line for line in page_lines if line in output], output
    if mode == "html":
        assert "answered text/html (" in result["msg"] and "bytes) that is not JSON" in result["msg"], result["msg"]
