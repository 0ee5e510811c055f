"""slurm_job, slurm_job_info and job with a token that expires: token_file, its environment variable,
and the failure that keeps job_id when the token is refused during a wait (issue 13, part 5).

The modules run in-process with the real SlurmClient; its HTTP is answered by TokenSlurm (recorded
Slurm 24.11 responses, only the tokens it accepts) through a stubbed Transport.
"""

import httpx
import pytest
from ansible.module_utils import basic

from ansible_collections.bridge.hpc.plugins.module_utils.slurm import client as slurm_client
from ansible_collections.bridge.hpc.plugins.module_utils._transport import Transport
from ansible_collections.bridge.hpc.plugins.modules import job, slurm_job, slurm_job_info

from module_runner import Fail, run
from token_slurm import NEW, OLD, TokenSlurm, token_file

SCRIPT = "#!/bin/bash\ntrue\n"
URL = "http://slurm.test"

pytestmark = pytest.mark.usefixtures("capture")


@pytest.fixture
def slurm(monkeypatch):
    """A Slurm 24.11 (v0.0.42) that accepts OLD; every SlurmClient the modules build talks to it."""
    fake = TokenSlurm("v0.0.42", job_cases=("job_running", "job_running", "job_completed"))

    def transport(url, manager, **_options):
        http = httpx.Client(base_url=url, transport=httpx.MockTransport(fake.handler))
        return Transport(url, manager, http_client=http, sleep=lambda s: None)

    monkeypatch.setattr(slurm_client, "Transport", transport)
    for variable in ("SLURM_URL", "SLURM_USER", "SLURM_JWT", "SLURM_JWT_FILE"):
        monkeypatch.delenv(variable, raising=False)
    return fake


@pytest.fixture
def hidden(monkeypatch):
    """The values Ansible masks in the module's output, as they were when the module exited."""
    seen = set()
    for name in ("exit_json", "fail_json"):
        patched = getattr(basic.AnsibleModule, name)

        def record(self, _patched=patched, **kwargs):
            seen.update(self.no_log_values)
            _patched(self, **kwargs)

        monkeypatch.setattr(basic.AnsibleModule, name, record)
    return seen


@pytest.fixture
def jwt(tmp_path):
    return token_file(tmp_path, "SLURM_JWT=%s\n" % OLD)


def job_args(**extra):
    args = dict(url=URL, user="bridge", api_version="v0.0.42", script=SCRIPT, identity="fixture-ok", wait=True,
                poll_interval=0.01, wait_timeout=30)
    args.update(extra)
    return args


def expire_on_the_wait(slurm, then=None):
    """The token in use stops working at the first poll of the wait (the second GET of the job)."""
    def expire():
        slurm.accepted.clear()
        if then:
            then()
    slurm.before_job_get = [lambda: None, expire]


@pytest.mark.parametrize("module, extra", [(slurm_job, {}), (job, {"backend": "slurm"})], ids=["slurm_job", "job"])
def test_a_token_refused_while_waiting_fails_with_the_expiry_and_the_job_id(slurm, hidden, module, extra):
    expire_on_the_wait(slurm)
    outcome = run(module, job_args(token=OLD, **extra))
    assert isinstance(outcome, Fail)
    result = outcome.result
    assert result["msg"].startswith("the Slurm token was refused (expired?) while waiting for job 3; rerun with a "
                                    "fresh token or use token_file: the job is not resubmitted, a later task finds "
                                    "it by its identity")
    assert result["job_id"] == "3" and result["job"]["phase"] == "running" and result["phase"] == "running"
    assert result["error"]["type"] == "CredentialsRefused" and result["changed"] is True
    assert result["identity"] == "fixture-ok"
    assert OLD not in repr(result) and OLD in hidden
    assert [m for m in slurm.methods() if m[0] == "POST"] == [("POST", "job/submit")]


def test_a_later_task_with_a_fresh_token_finds_the_job_and_waits_without_a_second_submit(slurm):
    expire_on_the_wait(slurm)
    first = run(slurm_job, job_args(token=OLD))
    assert isinstance(first, Fail) and first.result["job_id"] == "3"
    slurm.accepted = {NEW}
    slurm.listed = True   # the job carries its identity in the list now
    again = run(slurm_job, job_args(token=NEW))
    assert not isinstance(again, Fail), again.result
    assert again.result["changed"] is False and again.result["phase"] == "completed" and again.result["job_id"] == "3"
    assert [m for m in slurm.methods() if m[0] == "POST"] == [("POST", "job/submit")]


@pytest.mark.parametrize("module, extra", [(slurm_job, {}), (job, {"backend": "slurm"})], ids=["slurm_job", "job"])
def test_a_token_rotated_in_token_file_during_the_wait_is_used_and_the_task_succeeds(slurm, hidden, jwt, module, extra):
    def rotate():
        slurm.accepted.add(NEW)
        jwt(NEW + "\n")

    expire_on_the_wait(slurm, then=rotate)
    outcome = run(module, job_args(token_file=jwt.path, **extra), diff=True)
    assert not isinstance(outcome, Fail), outcome.result
    assert outcome.result["phase"] == "completed" and outcome.result["changed"] is True
    assert [m for m in slurm.methods() if m[0] == "POST"] == [("POST", "job/submit")]
    assert NEW in slurm.tokens()
    text = repr(outcome.result)
    assert OLD not in text and NEW not in text
    assert {OLD, NEW} <= hidden, "Ansible masks both tokens in whatever the module returns"


def test_token_file_from_the_environment(slurm, jwt, monkeypatch):
    monkeypatch.setenv("SLURM_JWT_FILE", jwt.path)
    outcome = run(slurm_job_info, dict(url=URL, api_version="v0.0.42", job_id="3"))
    assert not isinstance(outcome, Fail), outcome.result
    assert slurm.tokens() == [OLD]


def test_a_token_file_given_in_the_task_wins_over_slurm_jwt_in_the_environment(slurm, jwt, monkeypatch):
    monkeypatch.setenv("SLURM_JWT", "from-the-environment")
    outcome = run(slurm_job_info, dict(url=URL, api_version="v0.0.42", job_id="3", token_file=jwt.path))
    assert not isinstance(outcome, Fail), outcome.result
    assert slurm.tokens() == [OLD]


def test_a_token_given_in_the_task_wins_over_slurm_jwt_file_in_the_environment(slurm, jwt, monkeypatch):
    monkeypatch.setenv("SLURM_JWT_FILE", "/nonexistent/jwt")
    outcome = run(slurm_job_info, dict(url=URL, api_version="v0.0.42", job_id="3", token=OLD))
    assert not isinstance(outcome, Fail), outcome.result
    assert slurm.tokens() == [OLD]


def test_slurm_jwt_and_slurm_jwt_file_both_in_the_environment_fail_naming_both(slurm, jwt, monkeypatch):
    monkeypatch.setenv("SLURM_JWT", OLD)
    monkeypatch.setenv("SLURM_JWT_FILE", jwt.path)
    outcome = run(slurm_job_info, dict(url=URL, api_version="v0.0.42", job_id="3"))
    assert isinstance(outcome, Fail)
    assert "SLURM_JWT and SLURM_JWT_FILE" in outcome.result["msg"] and OLD not in repr(outcome.result)
    assert slurm.sent == []


def test_slurm_jwt_from_the_environment_still_works_and_is_hidden(slurm, hidden, monkeypatch):
    monkeypatch.setenv("SLURM_JWT", OLD)
    outcome = run(slurm_job_info, dict(url=URL, api_version="v0.0.42", job_id="3"))
    assert not isinstance(outcome, Fail), outcome.result
    assert slurm.tokens() == [OLD] and OLD in hidden


def test_token_and_token_file_in_one_task_fail_before_any_request(slurm, jwt):
    outcome = run(slurm_job_info, dict(url=URL, job_id="3", token=OLD, token_file=jwt.path))
    assert isinstance(outcome, Fail) and outcome.result["error"]["field"] == "token_file"
    assert "mutually exclusive" in outcome.result["msg"] and slurm.sent == []


def test_an_unreadable_token_file_fails_naming_the_option(slurm, tmp_path):
    outcome = run(slurm_job_info, dict(url=URL, job_id="3", token_file=str(tmp_path / "missing")))
    assert isinstance(outcome, Fail) and outcome.result["error"]["field"] == "token_file"
    assert "missing" in outcome.result["msg"] and slurm.sent == []
