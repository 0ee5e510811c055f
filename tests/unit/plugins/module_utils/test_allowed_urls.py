"""The operator's allow-list checked by the clients on every request, right before it is sent
(issue 37 items 3 and 4): the httpx Transport and the kubernetes client, with the list the
controller hands over in BRIDGE_ALLOWED_URLS. A refused request is never sent."""

import httpx
import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._errors import BackendURLNotAllowed, ConnectionFailed, SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._transport import Transport
from ansible_collections.bridge.hpc.plugins.module_utils._urls import ALLOWED_URLS_ENV, AllowList
from ansible_collections.bridge.hpc.plugins.module_utils.k8s.client import K8sClient
from ansible_collections.bridge.hpc.plugins.module_utils.ray.client import RayClient

from k8s_stub import ApiServerStub


def transport(base_url, allow_list=None):
    sent = []

    def handler(request):
        sent.append(str(request.url))
        return httpx.Response(200, json={})

    client = httpx.Client(base_url=base_url, transport=httpx.MockTransport(handler))
    return Transport(base_url, "Slurm", http_client=client, sleep=lambda s: None, allow_list=allow_list), sent


def test_a_request_inside_the_list_is_sent_with_its_query():
    slurm, sent = transport("http://slurm.test/slurm", AllowList(["http://slurm.test/slurm"]))
    assert slurm.request("GET", "/v0.0.40/jobs", params={"update_time": "1 2"}).status_code == 200
    assert sent == ["http://slurm.test/slurm/v0.0.40/jobs?update_time=1+2"]


@pytest.mark.parametrize("path", ["/../admin/v0.0.40/jobs", "/%2e%2e/admin", "/x%2f..%2fadmin"])
def test_a_request_leaving_the_allowed_path_is_not_sent(path):
    slurm, sent = transport("http://slurm.test/slurm", AllowList(["http://slurm.test/slurm"]))
    with pytest.raises(BackendURLNotAllowed):
        slurm.request("GET", path, idempotent=True)
    assert sent == [] and slurm.requests_sent == 0


def test_every_request_is_checked_so_a_list_given_later_applies_to_the_next_one():
    slurm, sent = transport("http://slurm.test")
    slurm.request("GET", "/ping")
    slurm.allow_list = AllowList(["http://other.test"])
    with pytest.raises(BackendURLNotAllowed, match="not among the backend URLs") as caught:
        slurm.request("GET", "/ping")
    assert caught.value.to_dict()["type"] == "BackendURLNotAllowed" and not caught.value.temporary
    assert len(sent) == 1


def test_the_list_comes_from_the_environment_the_controller_sets(monkeypatch):
    monkeypatch.setenv(ALLOWED_URLS_ENV, "http://ray.allowed:8265")
    ray = RayClient("http://ray.elsewhere:8265", retries=0)
    with pytest.raises(BackendURLNotAllowed):
        ray.describe()
    assert ray.requests_sent == 0


def test_without_the_variable_any_url_the_parser_accepts_may_be_reached(monkeypatch):
    monkeypatch.delenv(ALLOWED_URLS_ENV, raising=False)
    assert AllowList.from_environ().refusal("url", "http://anywhere.example:1/") is None


@pytest.mark.parametrize("url", ["http://127.0.0.1:9\\@127.0.0.1:8265/ok", "http://2130706433:8265", "http://a@b:1"])
def test_require_url_refuses_what_the_parser_refuses(url):
    with pytest.raises(SpecError) as caught:
        RayClient.from_options({"url": url}.get)
    assert caught.value.field == "url"


# ------------------------------------------------------------------ the kubernetes client

def test_a_kubernetes_request_outside_the_list_is_not_sent(monkeypatch):
    monkeypatch.setenv(ALLOWED_URLS_ENV, "https://other.test:6443")
    stub = ApiServerStub()
    with pytest.raises(BackendURLNotAllowed):
        stub.client().describe()
    assert stub.sent == []
    monkeypatch.setenv(ALLOWED_URLS_ENV, "https://apiserver.test:6443")
    stub.client().list()
    assert stub.sent


def kubeconfig(server):
    return (
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: '%s'}}]\n"
        "users: [{name: u, user: {token: t0ken}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u, namespace: ns}}]\n" % server)


def test_a_kubeconfig_server_with_a_backslash_is_never_connected_to(monkeypatch):
    """Issue 37 item 3: urllib3 reads this server as port 9; nothing is sent at all."""
    monkeypatch.delenv(ALLOWED_URLS_ENV, raising=False)
    k8s = K8sClient(kubeconfig_content=kubeconfig("http://127.0.0.1:9\\@127.0.0.1:8/ok"), retries=0)
    with pytest.raises(BackendURLNotAllowed, match="backslash"):
        k8s.describe()
    assert k8s.requests_sent == 1   # counted as attempted, refused before the pool manager


def test_the_url_option_overrides_the_kubeconfig_server_on_every_request(monkeypatch):
    """The token refresh hook sets the kubeconfig's server again before each request; `url` wins."""
    monkeypatch.setenv(ALLOWED_URLS_ENV, "https://override.test:6443")
    k8s = K8sClient(kubeconfig_content=kubeconfig("https://kube.test:6443"), url="https://override.test:6443", retries=0)
    seen = []

    def pool_request(method, url, **kwargs):
        seen.append(url)
        raise OSError("stop here")

    k8s.api_client.rest_client.pool_manager.request = pool_request
    with pytest.raises(ConnectionFailed):
        k8s.describe()
    assert seen and seen[0].startswith("https://override.test:6443/")


def test_a_proxy_the_client_would_use_must_be_allowed_too(monkeypatch):
    monkeypatch.setenv(ALLOWED_URLS_ENV, "https://kube.test:6443")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.test:3128")
    k8s = K8sClient(kubeconfig_content=kubeconfig("https://kube.test:6443"), retries=0)
    with pytest.raises(BackendURLNotAllowed, match="proxy"):
        k8s.describe()


def test_limit_urls_sets_the_list_on_a_client_built_without_one(monkeypatch):
    """The controller's probe builds clients in its own process, where no environment hands the list over."""
    monkeypatch.delenv(ALLOWED_URLS_ENV, raising=False)
    stub = ApiServerStub()
    k8s = stub.client()
    k8s.limit_urls(AllowList(["https://other.test:6443"]))
    with pytest.raises(BackendURLNotAllowed):
        k8s.describe()
    ray = RayClient("http://ray.elsewhere:8265", retries=0)
    ray.limit_urls(AllowList(["http://ray.allowed:8265"]))
    with pytest.raises(BackendURLNotAllowed):
        ray.describe()
    assert stub.sent == [] and ray.requests_sent == 0
