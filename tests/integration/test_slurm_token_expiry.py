"""A Slurm token that expires while bridge.hpc.slurm_job waits, against every real Slurm that runs.

Each case issues a JWT that lives LIFESPAN seconds (`tools/slurm-cluster.sh token VERSION bridge
LIFESPAN`) and runs playbooks/slurm_token.yml, whose job sleeps well beyond that:

* token_file: the JWT is in a file; once it has expired (and the wait has been refused for a few
  polls), the test writes a fresh JWT into the file, as a rotator would. The task succeeds.
* fixed_token: the JWT is given as `token`. The task fails naming the expiry, with job_id and the
  job; a later task with a fresh token finds the same job and waits for it.

Either way the job is submitted exactly once (the job list by identity), and no token is printed.
Every case of every version starts at once: each mostly waits on its job.
"""

import os
import subprocess
import sys
import threading
import time
import uuid

import pytest

from conftest import COLLECTIONS, REPO, RUN, SLURM_VERSIONS, ansible_env, require_slurm, slurm_env, start_playbook

PLAYBOOK = os.path.join(REPO, "tests", "integration", "playbooks", "slurm_token.yml")
RUN_ID = uuid.uuid4().hex[:8]
# Long enough for a playbook to start and submit while other tests load both cores (15 s was not);
# the job outlives it by far.
LIFESPAN = 30
JOB_SECONDS = LIFESPAN + 25
# How long after the first token's expiry the rotator writes the new one: a few refused polls.
GAP = 4
CASES = [(version, case) for version in SLURM_VERSIONS for case in ("token_file", "fixed_token")]


def issue_token(version, lifespan):
    """A JWT for the test user from the running cluster, valid for `lifespan` seconds."""
    completed = subprocess.run([os.path.join(REPO, "tools", "slurm-cluster.sh"), "token", version, "bridge", str(lifespan)],
                               env=dict(os.environ, BRIDGE_RUN=RUN), capture_output=True, text=True, timeout=60, check=True)
    return completed.stdout.strip()


def write_atomically(path, text):
    partial = path + ".new"
    with os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as handle:
        handle.write(text)
    os.replace(partial, path)


class Case:
    """One started playbook: its process, log, tokens and, for token_file, the rotator thread."""

    def __init__(self, version, case, values, directory):
        self.version, self.case, self.values = version, case, values
        self.log_path = os.path.join(directory, "%s-%s.log" % (case, version))
        self.short = issue_token(version, LIFESPAN)
        self.expires = time.monotonic() + LIFESPAN
        self.tokens = [self.short]
        extra = {"run_id": "%s-%s" % (RUN_ID, version.replace(".", "")), "case": case, "job_seconds": JOB_SECONDS,
                 "slurm_url": values["SLURM_URL"], "slurm_user": values["SLURM_USER"],
                 "api_version": values["SLURM_API_VERSIONS"].split(",")[0]}
        self.rotator = None
        self.rotated_at = None
        if case == "token_file":
            self.token_file = os.path.join(directory, "jwt-%s" % version)
            write_atomically(self.token_file, "SLURM_JWT=%s\n" % self.short)   # as scontrol token prints it
            extra["token_file"] = self.token_file
            self.rotator = threading.Thread(target=self._rotate, daemon=True)
        else:
            fresh = issue_token(version, 600)
            self.tokens.append(fresh)
            extra.update(short_token=self.short, fresh_token=fresh)
        # SLURM_JWT stays in the environment: token and token_file given in the task win over it.
        env = ansible_env(values)
        self.process = start_playbook(PLAYBOOK, extra, env, self.log_path)
        if self.rotator:
            self.rotator.start()

    def _rotate(self):
        time.sleep(max(0.0, self.expires + GAP - time.monotonic()))
        fresh = issue_token(self.version, 600)
        self.tokens.append(fresh)
        write_atomically(self.token_file, fresh + "\n")
        self.rotated_at = time.monotonic()

    def output(self):
        with open(self.log_path) as handle:
            return handle.read()


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("token"))
    started = {}
    for version, case in CASES:
        values = slurm_env(version)
        if values is not None:
            started[(version, case)] = Case(version, case, values, directory)
    yield started
    for run in started.values():
        if run.process.poll() is None:
            run.process.kill()


def jobs_carrying(values, identity):
    """Every job Slurm knows with this identity, read with the cluster's long-lived token."""
    if COLLECTIONS not in sys.path:
        sys.path.insert(0, COLLECTIONS)
    from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient

    client = SlurmClient(values["SLURM_URL"], user=values["SLURM_USER"], token=values["SLURM_JWT"])
    try:
        return client.list(identities=[identity])
    finally:
        client.close()


@pytest.mark.parametrize("version, case", CASES)
def test_a_token_that_expires_during_the_wait(version, case, cases):
    values = require_slurm(version)
    run = cases[(version, case)]
    returncode = run.process.wait(timeout=600)
    output = run.output()
    for token in run.tokens:
        assert token not in output, "a token leaked into ansible-playbook output"
    assert returncode == 0 and "failed=0" in output, output[-6000:]
    jobs = jobs_carrying(values, "token-%s-%s-%s" % (RUN_ID, version.replace(".", ""), case))
    assert len(jobs) == 1, "submitted %d times: %r" % (len(jobs), [job["job_id"] for job in jobs])
    assert jobs[0]["phase"] == "completed", jobs[0]
    if case == "token_file":
        assert run.rotated_at is not None, "the task ended before the token was rotated"
