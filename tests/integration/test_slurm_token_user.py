"""A user's own JWT without SLURM_USER, as the AWX Bridge Slurm credential allows (its `user` is
optional) and docs/slurm.md shows: on every Slurm here, 22.05 included (whose slurmrestd refuses a
token without the user header), the modules send the token's own user and the job runs as that
user. A token that names no user and comes without one is refused with "authentication refused".
Issue 26, item 3."""

import json
import os
import uuid

import pytest

from conftest import SLURM_VERSIONS, adhoc_with_env_file, require_slurm


def module_result(completed):
    """The result of `ansible localhost -m ...` that succeeded, changed (submitted now) or not."""
    head, sep, body = completed.stdout.partition(" => ")
    if completed.returncode != 0 or not sep or not ("SUCCESS" in head or "CHANGED" in head):
        return None
    return json.loads(body)


def env_file(tmp_path, values):
    path = tmp_path / "slurm.env"
    with os.fdopen(os.open(str(path), os.O_WRONLY | os.O_CREAT, 0o600), "w") as handle:
        handle.write("".join("%s=%s\n" % item for item in values.items()))
    return str(path)


@pytest.mark.parametrize("version", SLURM_VERSIONS)
def test_a_users_own_token_without_user_runs_the_job_as_that_user(version, tmp_path):
    values = require_slurm(version)
    path = env_file(tmp_path, {"SLURM_URL": values["SLURM_URL"], "SLURM_JWT": values["SLURM_JWT"]})
    args = {"name": "token-user-%s" % uuid.uuid4().hex[:8], "script": "#!/bin/sh\nid -un\n", "queue": "debug", "resources": {"time_limit": 2},
            "wait": True, "wait_timeout": 300, "poll_interval": 1}
    done = adhoc_with_env_file(path, "bridge.hpc.slurm_job", "-a", json.dumps(args))
    result = module_result(done)
    assert result is not None, (done.stdout + done.stderr)[-3000:]
    assert result["phase"] == "completed" and result["job"]["user"] == values["SLURM_USER"], result["job"]
    assert values["SLURM_JWT"] not in done.stdout + done.stderr


def test_a_token_naming_no_user_without_user_is_refused_as_such_on_2205(tmp_path):
    values = require_slurm("22.05")
    # Three parts, but no claims a JWT has: slurmrestd 22.05 refuses it (no user header) before it
    # routes, so no REST version could be told apart.
    token = "eyJhbGciOiJIUzI1NiJ9.e30.bm90LWEtc2lnbmF0dXJl"
    path = env_file(tmp_path, {"SLURM_URL": values["SLURM_URL"], "SLURM_JWT": token})
    done = adhoc_with_env_file(path, "bridge.hpc.slurm_job_info", "-a", "job_id=1")
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert "authentication refused: slurmrestd refused the token without a user name" in output, output[-3000:]
    assert "Slurm 22.05 and older need the user with every token" in output
    assert "v0.0.45" not in output and token not in output
