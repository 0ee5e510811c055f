"""A user's own Slurm JWT without `user` (issue 26, item 3): Slurm 22.05's slurmrestd refuses a
token without the X-SLURM-USER-NAME header (HTTP 401, "Authentication failure", recorded as
ping_no_auth), later releases take the user from the token. The client sends the token's own user,
its `sun` claim (what `scontrol token` writes), and a refusal while the REST versions are probed
reads "authentication refused", not "Failed to discover REST API 'v0.0.45'"."""

import base64
import json

import httpx
import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._errors import AuthFailed
from ansible_collections.bridge.hpc.plugins.module_utils._transport import Transport
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient, read_token_file, token_user

from recorded import recorded


def jwt(claims):
    """A JWT of these claims, shaped as `scontrol token` makes them (HS256; the signature is not read)."""
    def part(value):
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")
    return "%s.%s.%s" % (part({"alg": "HS256", "typ": "JWT"}), part(claims), "c2lnbmF0dXJlLW5vdC1jaGVja2Vk")


ALICE = jwt({"exp": 2000000000, "iat": 1700000000, "sun": "alice"})
NAMELESS = jwt({"exp": 2000000000, "iat": 1700000000})


class Slurm2205:
    """slurmrestd 22.05 as it authenticates: 401 text/plain "Authentication failure" for a request
    without both headers, whatever its path; then v0.0.38 only (others 404)."""

    def __init__(self):
        self.sent = []

    def handler(self, request):
        self.sent.append(dict(request.headers))
        if not request.headers.get("x-slurm-user-token") or not request.headers.get("x-slurm-user-name"):
            refusal = recorded("slurm", "v0.0.38", "ping_no_auth")
            return httpx.Response(refusal["status"], text=refusal["body"], headers=refusal["headers"])
        if request.url.path == "/slurm/v0.0.38/ping/":
            ping = recorded("slurm", "v0.0.38", "ping")
            return httpx.Response(ping["status"], json=ping["body"])
        return httpx.Response(404, text="Unable to find path")


def client(slurm, **options):
    http = httpx.Client(base_url="http://slurm.test", transport=httpx.MockTransport(slurm.handler))
    transport = Transport("http://slurm.test", "Slurm", http_client=http, sleep=lambda s: None)
    return SlurmClient("http://slurm.test", transport=transport, **options)


@pytest.mark.parametrize("token, user", [
    (ALICE, "alice"), (NAMELESS, None), ("eyJold.token.aaaaaaaa", None), ("not-a-jwt", None), ("", None), (None, None),
    (jwt({"sun": 42}), None), (jwt({"sun": "two words"}), None), (jwt(["sun"]), None),
])
def test_the_user_of_a_token_is_its_sun_claim(token, user):
    assert token_user(token) == user


def test_a_users_own_token_without_user_reaches_slurm_2205_as_that_user():
    slurm = Slurm2205()
    slurm_client = client(slurm, token=ALICE)
    assert slurm_client.api_version == "v0.0.38"
    assert slurm_client.user == "alice"
    assert all(headers["x-slurm-user-name"] == "alice" for headers in slurm.sent)


def test_a_given_user_wins_over_the_tokens():
    slurm = Slurm2205()
    slurm_client = client(slurm, token=ALICE, user="bob")
    assert slurm_client.api_version == "v0.0.38"
    assert {headers["x-slurm-user-name"] for headers in slurm.sent} == {"bob"}


def test_a_token_file_gives_its_tokens_user(tmp_path):
    path = tmp_path / "jwt"
    path.write_text("SLURM_JWT=%s\n" % ALICE)
    assert read_token_file(str(path)) == ALICE
    slurm = Slurm2205()
    assert client(slurm, token_file=str(path)).api_version == "v0.0.38"
    assert slurm.sent[-1]["x-slurm-user-name"] == "alice"


@pytest.mark.parametrize("options, sent, hint", [
    ({"token": NAMELESS}, "the token without a user name", "Slurm 22.05 and older need the user with every token"),
    ({}, "a request without a token", "give token (SLURM_JWT)"),
])
def test_a_refusal_while_probing_says_authentication_refused_not_which_version(options, sent, hint):
    slurm = Slurm2205()
    with pytest.raises(AuthFailed) as refused:
        client(slurm, **options).api_version
    message = str(refused.value)
    assert message.startswith("Failed to discover REST API on Slurm at http://slurm.test: authentication refused: "
                              "slurmrestd refused %s" % sent), message
    assert hint in message and message.endswith("(HTTP 401)")
    assert "v0.0.45" not in message
    assert NAMELESS not in message
    assert len(slurm.sent) == 1, "the first refusal ends the probe"
