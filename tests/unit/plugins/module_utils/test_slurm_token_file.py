"""SlurmClient with token_file: the token is read again when Slurm refuses it (issue 13, part 5).

HTTP is answered by tests/unit/token_slurm.py's TokenSlurm: recorded Slurm 22.05 and 24.11
responses, and only the tokens it accepts.
"""

import httpx
import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._errors import AuthFailed, CredentialsRefused, Rejected, SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_present, wait_for
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec
from ansible_collections.bridge.hpc.plugins.module_utils._transport import Transport
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient, read_token_file, token_of

from fake_backend import FakeBackend
from token_slurm import NEW, OLD, TokenSlurm, token_file

VERSIONS = ("v0.0.38", "v0.0.42")
SPEC = normalize_spec({"script": "#!/bin/bash\ntrue\n", "identity": "fixture-ok"})
JOB_ID = {"v0.0.38": "115", "v0.0.42": "3"}


def client(slurm, token_file=None, token=None):
    http = httpx.Client(base_url="http://slurm.test", transport=httpx.MockTransport(slurm.handler))
    transport = Transport("http://slurm.test", "Slurm", http_client=http, sleep=lambda s: None)
    return SlurmClient("http://slurm.test", user="bridge", token=token, token_file=token_file,
                       api_version=slurm.version, transport=transport)


@pytest.fixture
def jwt(tmp_path):
    return token_file(tmp_path, "SLURM_JWT=%s\n" % OLD)


# ------------------------------------------------------------------ reading the file

@pytest.mark.parametrize("text, token", [
    (OLD, OLD), ("  %s\n" % OLD, OLD), ("SLURM_JWT=%s\n" % OLD, OLD), ("\nSLURM_JWT=%s  \n\n" % OLD, OLD),
    ("", None), ("  \n", None), ("SLURM_JWT=\n", None), ("%s %s" % (OLD, NEW), None), ("SLURM_JWT=a\nSLURM_JWT=b", None),
])
def test_a_token_file_holds_the_jwt_alone_or_as_scontrol_prints_it(text, token):
    assert token_of(text) == token


def test_an_unreadable_or_empty_token_file_fails_naming_the_file_not_its_content(tmp_path):
    with pytest.raises(SpecError) as missing:
        read_token_file(str(tmp_path / "nope"))
    assert missing.value.field == "token_file" and "nope" in str(missing.value)
    blank = tmp_path / "blank"
    blank.write_text("\n")
    with pytest.raises(SpecError) as empty:
        read_token_file(str(blank))
    assert "holds no token" in str(empty.value)
    two = tmp_path / "two"
    two.write_text("%s %s\n" % (OLD, NEW))
    with pytest.raises(SpecError) as words:
        read_token_file(str(two))
    assert OLD not in str(words.value) and NEW not in str(words.value)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_token_of_the_file_is_sent_and_scrubbed(version, jwt):
    slurm = TokenSlurm(version)
    slurm_client = client(slurm, token_file=jwt.path)
    assert slurm_client.get("1")["phase"] == "running"
    assert slurm.tokens() == [OLD] and OLD in slurm_client.transport.secrets


def test_token_and_token_file_are_mutually_exclusive(jwt):
    with pytest.raises(SpecError) as err:
        SlurmClient.from_options({"url": "http://slurm.test", "token": OLD, "token_file": jwt.path}.get)
    assert err.value.field == "token_file" and "mutually exclusive" in str(err.value) and OLD not in str(err.value)


# ------------------------------------------------------------------ reads across a rotation

@pytest.mark.parametrize("version", VERSIONS)
def test_a_refused_read_reads_the_file_again_and_is_sent_once_more_with_the_new_token(version, jwt):
    slurm = TokenSlurm(version)
    slurm_client = client(slurm, token_file=jwt.path)
    slurm.accepted = {NEW}
    jwt(NEW + "\n")
    assert slurm_client.get("1")["phase"] == "running"
    assert slurm.tokens() == [OLD, NEW]
    assert slurm_client.get("1")["phase"] == "completed"
    assert slurm.tokens() == [OLD, NEW, NEW], "later requests carry the new token"
    assert {OLD, NEW} <= set(slurm_client.transport.secrets)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_refused_read_with_the_same_token_in_the_file_fails_at_once(version, jwt):
    slurm = TokenSlurm(version, accepted=())
    with pytest.raises(AuthFailed) as err:
        client(slurm, token_file=jwt.path).get("1")
    assert len(slurm.sent) == 1
    assert "still holds the token that was refused" in str(err.value) and OLD not in str(err.value)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_new_token_that_is_refused_too_is_not_tried_again(version, jwt):
    slurm = TokenSlurm(version, accepted=())
    slurm_client = client(slurm, token_file=jwt.path)
    jwt(NEW)
    with pytest.raises(AuthFailed) as err:
        slurm_client.get("1")
    assert slurm.tokens() == [OLD, NEW]
    assert "refused too" in str(err.value) and OLD not in str(err.value) and NEW not in str(err.value)


def test_a_token_file_gone_at_the_re_read_is_reported_without_retrying(jwt, tmp_path):
    slurm = TokenSlurm("v0.0.42", accepted=())
    slurm_client = client(slurm, token_file=jwt.path)
    (tmp_path / "slurm_jwt").unlink()
    with pytest.raises(AuthFailed) as err:
        slurm_client.get("1")
    assert len(slurm.sent) == 1 and "could not be read again" in str(err.value)


def test_without_token_file_a_refused_read_is_not_sent_again():
    slurm = TokenSlurm("v0.0.42", accepted=())
    with pytest.raises(AuthFailed):
        client(slurm, token=OLD).get("1")
    assert len(slurm.sent) == 1


def test_a_rotated_token_is_scrubbed_from_later_messages(jwt):
    slurm = TokenSlurm("v0.0.42")
    slurm_client = client(slurm, token_file=jwt.path)
    slurm.accepted = {NEW}
    jwt(NEW)
    slurm_client.get("1")
    slurm.echo_token_in_errors = True
    with pytest.raises(Rejected) as err:
        slurm_client.get("1")
    assert NEW not in str(err.value) and "********" in str(err.value)


def test_discovery_reads_the_file_again_on_22_05(jwt):
    """22.05's ping needs a valid token (24.11's answers 200 whatever the token)."""
    slurm = TokenSlurm("v0.0.38", accepted={NEW})
    http = httpx.Client(base_url="http://slurm.test", transport=httpx.MockTransport(
        lambda request: httpx.Response(404) if "v0.0.38" not in request.url.path else slurm.handler(request)))
    slurm_client = SlurmClient("http://slurm.test", token_file=jwt.path, transport=Transport(
        "http://slurm.test", "Slurm", http_client=http, sleep=lambda s: None))
    jwt(NEW)
    assert slurm_client.api_version == "v0.0.38"
    assert slurm.tokens() == [OLD, NEW]


# ------------------------------------------------------------------ a submit across a rotation

@pytest.mark.parametrize("version", VERSIONS)
def test_a_refused_submit_looks_the_identity_up_with_the_new_token_then_submits_once(version, jwt):
    slurm = TokenSlurm(version)
    slurm_client = client(slurm, token_file=jwt.path)
    slurm.accepted = {NEW}
    jwt(NEW)
    assert slurm_client.submit(SPEC) == JOB_ID[version]
    assert slurm.methods() == [("POST", "job/submit"), ("GET", "jobs/"), ("POST", "job/submit")]
    assert slurm.tokens() == [OLD, NEW, NEW]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_refused_submit_whose_identity_has_a_job_now_is_not_submitted_again(version, jwt):
    slurm = TokenSlurm(version, listed=True)
    slurm_client = client(slurm, token_file=jwt.path)
    slurm.accepted = {NEW}
    jwt(NEW)
    assert slurm_client.submit(SPEC) == JOB_ID[version]
    assert slurm.methods() == [("POST", "job/submit"), ("GET", "jobs/")], "never a second POST"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_refused_submit_with_the_same_token_in_the_file_sends_nothing_more(version, jwt):
    slurm = TokenSlurm(version, accepted=())
    with pytest.raises(AuthFailed):
        client(slurm, token_file=jwt.path).submit(SPEC)
    assert slurm.methods() == [("POST", "job/submit")]


def test_a_refused_submit_without_token_file_is_not_looked_up_or_sent_again():
    slurm = TokenSlurm("v0.0.42", accepted=())
    with pytest.raises(AuthFailed):
        client(slurm, token=OLD).submit(SPEC)
    assert slurm.methods() == [("POST", "job/submit")]


def test_a_second_refusal_of_the_submit_is_final(jwt):
    slurm = TokenSlurm("v0.0.42")
    slurm_client = client(slurm, token_file=jwt.path)
    jwt(NEW)
    slurm.accepted = {"yet-another"}
    # The lookup with the new token is refused too: nothing is submitted again.
    with pytest.raises(AuthFailed) as err:
        slurm_client.submit(SPEC)
    assert slurm.methods() == [("POST", "job/submit"), ("GET", "jobs/")]
    assert "Failed to list jobs" in str(err.value) and "still holds the token that was refused" in str(err.value)


# ------------------------------------------------------------------ waiting across a rotation

def clock_and_sleep():
    now = [0.0]
    return (lambda: now[0]), (lambda seconds: now.__setitem__(0, now[0] + seconds))


@pytest.mark.parametrize("version", VERSIONS)
def test_a_wait_goes_on_across_a_rotation(version, jwt):
    slurm = TokenSlurm(version, job_cases=("job_running", "job_running", "job_completed"))
    slurm_client = client(slurm, token_file=jwt.path)

    def rotate():
        slurm.accepted = {NEW}
        jwt(NEW)

    slurm.before_job_get = [lambda: None, rotate]
    clock, sleep = clock_and_sleep()
    job, timed_out = wait_for(slurm_client, "1", 600, 5, clock=clock, sleep=sleep)
    assert job["phase"] == "completed" and not timed_out
    assert slurm.tokens() == [OLD, OLD, NEW, NEW]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_wait_outlasts_a_token_that_expired_before_the_file_was_rotated(version, jwt):
    slurm = TokenSlurm(version, job_cases=("job_running", "job_completed"))
    slurm_client = client(slurm, token_file=jwt.path)

    def expire():
        slurm.accepted = {NEW}

    slurm.before_job_get = [lambda: None, expire, lambda: None, lambda: jwt(NEW)]
    clock, sleep = clock_and_sleep()
    job, timed_out = wait_for(slurm_client, "1", 600, 5, clock=clock, sleep=sleep)
    assert job["phase"] == "completed" and not timed_out
    assert slurm.tokens() == [OLD, OLD, OLD, OLD, NEW]


def test_a_wait_whose_token_file_is_never_rotated_ends_at_wait_timeout_with_the_job(jwt):
    slurm = TokenSlurm("v0.0.42", job_cases=("job_running",))
    slurm_client = client(slurm, token_file=jwt.path)
    slurm.before_job_get = [lambda: None, slurm.accepted.clear]
    clock, sleep = clock_and_sleep()
    with pytest.raises(CredentialsRefused) as err:
        wait_for(slurm_client, "3", 60, 5, clock=clock, sleep=sleep)
    assert clock() == 60 and err.value.job["phase"] == "running"
    message = str(err.value)
    assert message.startswith("the Slurm token read from token_file was refused (expired?) while waiting for job 3, "
                              "and no token it accepts appeared in the file within wait_timeout")
    assert OLD not in message


@pytest.mark.parametrize("version", VERSIONS)
def test_without_token_file_a_refused_wait_fails_with_the_job_as_last_seen(version):
    slurm = TokenSlurm(version, job_cases=("job_running",))
    slurm_client = client(slurm, token=OLD)
    slurm.before_job_get = [lambda: None, slurm.accepted.clear]
    clock, sleep = clock_and_sleep()
    with pytest.raises(CredentialsRefused) as err:
        wait_for(slurm_client, JOB_ID[version], 600, 5, clock=clock, sleep=sleep)
    assert clock() == 5, "no waiting for a token that cannot change"
    assert err.value.job["job_id"] == JOB_ID[version] and err.value.job["phase"] == "running"
    assert str(err.value).startswith(
        "the Slurm token was refused (expired?) while waiting for job %s; rerun with a fresh token or use "
        "token_file: the job is not resubmitted, a later task finds it by its identity (Failed to get job" % JOB_ID[version])
    assert err.value.to_dict()["type"] == "CredentialsRefused" and err.value.to_dict()["kind"] == "auth"


def test_a_present_job_whose_wait_is_refused_fails_with_its_job_id_and_is_found_again_later():
    backend = FakeBackend(progression=("queued", "running", "running", "completed"))
    spec = normalize_spec({"script": "#!/bin/bash\ntrue\n", "identity": "expiring"})
    real_get = backend.get
    refusals = [False, True]

    def get(job_id):
        if refusals and refusals.pop(0):
            raise AuthFailed("authentication failed", "get", "job", job_id, "Fake", "http://fake", 511)
        return real_get(job_id)

    backend.get = get
    clock, sleep = clock_and_sleep()
    result = ensure_present(backend, spec, wait=True, poll_interval=1, sleep=sleep, clock=clock)
    assert result["failed"] is True and result["changed"] is True
    assert result["job"]["job_id"] == "100" and result["job"]["phase"] == "running"
    assert result["msg"].startswith("the Fake token was refused (expired?) while waiting for job 100; rerun with a "
                                    "fresh token: the job is not resubmitted")
    assert result["error"]["type"] == "CredentialsRefused"
    again = ensure_present(backend, spec, wait=True, poll_interval=1, sleep=sleep, clock=clock)
    assert again["failed"] is False and again["changed"] is False and again["job"]["phase"] == "completed"
    assert len(backend.submits) == 1
