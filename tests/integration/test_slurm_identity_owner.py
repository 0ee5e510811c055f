"""Another user of the same Slurm cluster cannot take a BridgeJob's job over (issue 37, item 6), on
real Slurm 22.05, 24.11 and 26.05 with accounting.

slurmctld shows every job's comment, where Bridge keeps the identity, to every user. bridgeother
(a second user of the test clusters, with a token of its own) reads bridge's comment there and
submits a job that exits 3 with the same comment, as the issue did: the lookup and the poll keep
bridge's own job. With an identity key, the comment carries a tag; bridgeother's copy of it is not
adopted either. Two jobs of bridge's own with one identity are refused by the module, naming both,
and no third is submitted.
"""

import json
import os
import subprocess
import sys
import time
import uuid

import httpx
import pytest

from conftest import COLLECTIONS, REPO, RUN, SLURM_VERSIONS, adhoc_with_env_file, require_slurm

sys.path.insert(0, COLLECTIONS)

OTHER_USER = "bridgeother"
KEY = uuid.uuid4().hex


def token_of(version, user):
    completed = subprocess.run([os.path.join(REPO, "tools", "slurm-cluster.sh"), "token", version, user, "900"],
                               env=dict(os.environ, BRIDGE_RUN=RUN), capture_output=True, text=True, timeout=60, check=True)
    return completed.stdout.strip()


def client_of(values, user=None, token=None, key=None):
    from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient

    return SlurmClient(values["SLURM_URL"], user=user or values["SLURM_USER"], token=token or values["SLURM_JWT"],
                       identity_key=key)


def spec_of(identity, script="#!/bin/bash\ntrue\n", hold=True):
    from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec

    return normalize_spec({"script": script, "identity": identity, "queue": "debug", "working_directory": "/tmp",
                           "stdout": "/dev/null", "resources": {"time_limit": 1},
                           "backend_options": {"slurm": {"hold": True} if hold else {}}})


def comment_seen_by(values, version, token, job_id):
    """The comment of job `job_id` as another user reads it in slurmctld's list (GET jobs/)."""
    answer = httpx.get("%s/slurm/%s/jobs/" % (values["SLURM_URL"], version), timeout=30,
                       headers={"X-SLURM-USER-NAME": OTHER_USER, "X-SLURM-USER-TOKEN": token})
    answer.raise_for_status()
    return next(job["comment"] for job in answer.json()["jobs"] if str(job["job_id"]) == job_id)


def submit_as(values, version, user, token, comment, script):
    """A job of `user` with `comment`, submitted as anybody may, past Bridge."""
    job = {"name": "not-bridge", "comment": comment, "partition": "debug", "current_working_directory": "/tmp",
           "standard_output": "/dev/null"}
    if version == "v0.0.38":
        body = {"script": script, "job": dict(job, time_limit=1, environment={"PATH": "/usr/bin:/bin"})}
    else:
        body = {"job": dict(job, script=script, time_limit={"set": True, "number": 1}, environment=["PATH=/usr/bin:/bin"])}
    answer = httpx.post("%s/slurm/%s/job/submit" % (values["SLURM_URL"], version), timeout=30, json=body,
                        headers={"X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": token})
    answer.raise_for_status()
    return str(answer.json()["job_id"])


def ended(client, job_id, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(job_id)
        if job["terminal"]:
            return job
        time.sleep(1)
    raise AssertionError("job %s did not end in %d s" % (job_id, timeout))


def present(client, spec):
    from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_present

    return ensure_present(client, spec)


@pytest.mark.parametrize("keyed", [False, True], ids=["plain", "keyed"])
@pytest.mark.parametrize("version", SLURM_VERSIONS)
def test_another_users_job_with_the_same_comment_is_not_adopted(version, keyed):
    values = require_slurm(version)
    key = KEY if keyed else None
    other_token = token_of(version, OTHER_USER)
    other = client_of(values, user=OTHER_USER, token=other_token)
    mine = client_of(values, key=key)
    spec = spec_of("owner-%s" % uuid.uuid4().hex[:10])
    own_id = impostor = None
    try:
        first = present(mine, spec)
        own_id = first["job"]["job_id"]
        assert first["changed"] and own_id
        comment = comment_seen_by(values, mine.api_version, other_token, own_id)
        assert ("mac=" in comment) is keyed, comment
        impostor = submit_as(values, mine.api_version, OTHER_USER, other_token, comment, "#!/bin/sh\nexit 3\n")
        assert ended(other, impostor)["exit_code"] == 3
        # A rerun (a fresh client, as each module run has) and the controller's poll: bridge's own.
        again = client_of(values, key=key)
        rerun = present(again, spec)
        assert not rerun["changed"] and rerun["job"]["job_id"] == own_id, rerun["job"]
        polled = client_of(values, key=key)
        assert polled.poll_many([spec["identity"]])[spec["identity"]]["job_id"] == own_id
        assert any("job %s of user '%s'" % (impostor, OTHER_USER) in warning for warning in polled.warnings), \
            polled.warnings
        requests = polled.requests_sent
        polled.poll_many([spec["identity"]])
        assert polled.requests_sent - requests == 1, "a poll is one list request, with or without another user's job"
    finally:
        if own_id:
            mine.cancel(own_id)


@pytest.mark.parametrize("version", SLURM_VERSIONS)
def test_two_of_the_users_own_jobs_with_one_identity_fail_the_module_naming_both(version, tmp_path):
    values = require_slurm(version)
    mine = client_of(values)
    identity = "twice-%s" % uuid.uuid4().hex[:10]
    submitted = []
    try:
        for _copy in range(2):
            submitted.append(submit_as(values, mine.api_version, values["SLURM_USER"], values["SLURM_JWT"],
                                       "bridge:" + identity, "#!/bin/sh\nsleep 30\n"))
        env_file = tmp_path / "slurm.env"
        env_file.write_text("SLURM_URL=%s\nSLURM_USER=%s\nSLURM_JWT=%s\n" % (
            values["SLURM_URL"], values["SLURM_USER"], values["SLURM_JWT"]))
        os.chmod(str(env_file), 0o600)
        args = {"name": "not-bridge", "identity": identity, "script": "#!/bin/sh\ntrue\n", "queue": "debug",
                "working_directory": "/tmp", "stdout": "/dev/null", "resources": {"time_limit": 1}}
        done = adhoc_with_env_file(str(env_file), "bridge.hpc.slurm_job", "-a", json.dumps(args))
        head, _sep, body = done.stdout.partition(" => ")
        assert done.returncode != 0 and "FAILED" in head, done.stdout[-3000:] + done.stderr[-2000:]
        result = json.loads(body)
        assert result["error"]["type"] == "AmbiguousIdentity", result
        assert result["error"]["job_ids"] == sorted(submitted, key=int), result
        assert "2 jobs of user '%s' carry identity '%s' (%s)" % (values["SLURM_USER"], identity, ", ".join(
            sorted(submitted, key=int))) in result["msg"]
        carrying = [job for job in client_of(values).list() if job["identity"] == identity]
        assert sorted(job["job_id"] for job in carrying) == sorted(submitted), "a third job was submitted"
    finally:
        for job_id in submitted:
            mine.cancel(job_id)


def test_the_controllers_runner_tags_with_its_key_and_polls_only_its_own_job(tmp_path, monkeypatch):
    """The controller's path: the key goes through the pipe (never a file of the runner's
    directory), the comment carries its tag, bridgeother's copy is passed over, and a copy under
    bridge's own name makes the poll name both jobs instead of choosing one."""
    sys.path.insert(0, os.path.join(REPO, "controller"))
    from bridge_controller.runner import AnsibleRunner  # pylint: disable=import-outside-toplevel
    from ansible_collections.bridge.hpc.plugins.module_utils.slurm.identity import identity_tag

    values = require_slurm("22.05")
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    runner = AnsibleRunner(os.path.join(REPO, "playbooks"), str(tmp_path / "runner"), collections_path=COLLECTIONS,
                           python=sys.executable, identity_key=KEY)
    backend = {"type": "slurm", "url": values["SLURM_URL"]}
    credentials = {"user": values["SLURM_USER"], "token": values["SLURM_JWT"]}
    identity = "cr-%s" % uuid.uuid4().hex[:10]
    mine = client_of(values)
    other_token = token_of("22.05", OTHER_USER)
    own_id, copies = None, []
    try:
        submitted = runner.run("submit", backend, credentials, jobs=[{
            "identity": identity, "script": "#!/bin/bash\nsleep 300\n", "queue": "debug", "working_directory": "/tmp",
            "stdout": "/dev/null"}])
        own_id = submitted["results"][0]["job"]["job_id"]
        comment = comment_seen_by(values, mine.api_version, other_token, own_id)
        assert comment == "bridge:%s mac=%s" % (identity, identity_tag(KEY, identity))
        copies.append(submit_as(values, mine.api_version, OTHER_USER, other_token, comment, "#!/bin/sh\nexit 3\n"))
        ended(client_of(values, user=OTHER_USER, token=other_token), copies[0])
        polled = runner.run("poll", backend, credentials, identities=[identity])
        assert polled["jobs"][identity]["job_id"] == own_id and "refused" not in polled, polled

        copies.append(submit_as(values, mine.api_version, values["SLURM_USER"], values["SLURM_JWT"], comment,
                                "#!/bin/sh\nsleep 300\n"))
        polled = runner.run("poll", backend, credentials, identities=[identity])
        assert identity not in polled["jobs"] and identity not in polled["missing"], polled
        error = polled["refused"][identity]
        assert error["type"] == "AmbiguousIdentity" and error["job_ids"] == sorted([own_id, copies[1]], key=int), error
        leaks = subprocess.run(["grep", "-rl", KEY, str(tmp_path)], capture_output=True, text=True, check=False)
        assert leaks.stdout == "", "the identity key reached the runner directory: %s" % leaks.stdout
    finally:
        runner.close()
        for job_id in [own_id] + copies[1:]:
            if job_id:
                mine.cancel(job_id)
