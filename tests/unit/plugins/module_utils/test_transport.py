import httpx
import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._errors import ConnectionFailed, Timeout
from ansible_collections.bridge.hpc.plugins.module_utils._transport import RetryPolicy, Transport, retry_delay


def make(handler, **kwargs):
    sleeps = []
    client = httpx.Client(base_url="http://slurm.test", transport=httpx.MockTransport(handler))
    transport = Transport("http://slurm.test", "Slurm", secrets=["s3cret"], http_client=client,
                          sleep=sleeps.append, **kwargs)
    return transport, sleeps


def test_idempotent_get_is_retried_on_503_then_succeeds():
    calls = []

    def handler(request):
        calls.append(request)
        return httpx.Response(503 if len(calls) < 3 else 200, json={})

    transport, sleeps = make(handler)
    assert transport.request("GET", "/x").status_code == 200
    assert len(calls) == 3 and len(sleeps) == 2


def test_a_500_is_answered_at_once_even_to_a_get():
    calls = []

    def handler(request):
        calls.append(request)
        return httpx.Response(500, text="submission_id already exists")

    transport, sleeps = make(handler)
    assert transport.request("GET", "/x").status_code == 500
    assert len(calls) == 1 and sleeps == []


def test_the_policy_retries_what_an_attempt_says_may_pass():
    sleeps = []
    answers = iter([("busy", 429, "2"), ("lost", None, None), ("ok", 200, None)])

    def attempt():
        answer = next(answers)
        if answer[0] == "lost":
            raise ConnectionFailed("reset")
        return answer

    assert RetryPolicy(retries=3, sleep=sleeps.append).send(attempt, idempotent=True) == "ok"
    assert sleeps[0] == 2.0 and len(sleeps) == 2


def test_post_is_sent_exactly_once_even_on_503():
    calls = []

    def handler(request):
        calls.append(request)
        return httpx.Response(503)

    transport, sleeps = make(handler)
    assert transport.request("POST", "/submit", json={}).status_code == 503
    assert len(calls) == 1 and sleeps == []


def test_post_connection_error_is_not_retried_and_is_typed():
    calls = []

    def handler(request):
        calls.append(request)
        raise httpx.ConnectError("refused s3cret")

    transport = make(handler)[0]
    with pytest.raises(ConnectionFailed) as err:
        transport.request("POST", "/submit", verb="submit", obj="job", ident="j1")
    assert len(calls) == 1
    assert "s3cret" not in str(err.value)
    assert str(err.value).startswith("Failed to submit job 'j1' on Slurm at http://slurm.test/submit: ")


def test_get_timeouts_exhaust_retries_then_raise_timeout():
    calls = []

    def handler(request):
        calls.append(request)
        raise httpx.ReadTimeout("slow")

    transport, sleeps = make(handler, retries=2)
    with pytest.raises(Timeout):
        transport.request("GET", "/jobs")
    assert len(calls) == 3 and len(sleeps) == 2


def test_retry_after_is_honoured():
    assert retry_delay(1, 0.5, retry_after="7") == 7.0
    assert retry_delay(1, 0.5, retry_after="1000") == 30.0


def test_backoff_is_jittered_and_bounded():
    low = retry_delay(3, 0.5, rand=lambda: 0.0)
    high = retry_delay(3, 0.5, rand=lambda: 1.0)
    assert low == 1.0 and high == 2.0
    assert retry_delay(30, 0.5, rand=lambda: 1.0) == 30.0


def test_tls_verification_is_on_by_default():
    assert Transport._verify(True, None) is True
    assert Transport._verify(False, "/nope") is False
