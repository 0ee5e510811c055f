"""tests/fault_server.py does what each of its fault modes says, seen with plain httpx."""

import json
import time

import httpx
import pytest

from fault_server import HUGE_LIST_LENGTH, MODES, PAGE, WRONG_TYPES, FaultServer

TOKEN = "t0ken"


@pytest.fixture(scope="module")
def server():
    with FaultServer(delay=1.5) as running:
        yield running


def fetch(server, mode, method="GET", path="/slurm/v0.0.42/jobs", timeout=5.0, **kwargs):
    server.mode = mode
    server.clear()
    headers = {"X-SLURM-USER-TOKEN": TOKEN}
    return httpx.request(method, server.url + path, headers=headers, timeout=timeout, **kwargs)


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "DELETE"])
def test_any_method_and_path_gets_the_fault(server, method):
    response = fetch(server, "not_json_object", method, "/any/where?x=1", json={"a": 1})
    assert (response.status_code, response.json()) == (200, [1, 2, 3])
    assert server.requests == [(method, "/any/where?x=1")]


def test_wrong_types(server):
    response = fetch(server, "wrong_types")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == WRONG_TYPES


@pytest.mark.parametrize("mode, status", [("html", 200), ("status_500_html", 500)])
def test_html_pages_echo_the_request_headers(server, mode, status):
    response = fetch(server, mode)
    assert response.status_code == status
    assert response.headers["content-type"].startswith("text/html")
    assert response.text.lstrip().startswith("<!DOCTYPE html>")
    assert TOKEN in response.text  # what makes the tests' "no token in messages" check bite
    with pytest.raises(ValueError):
        response.json()


def test_empty(server):
    response = fetch(server, "empty")
    assert (response.status_code, response.content) == (200, b"")
    assert response.headers["content-length"] == "0"


def test_truncated_body_is_cut_mid_object_with_an_honest_length(server):
    response = fetch(server, "truncated")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert int(response.headers["content-length"]) == len(response.content) > 0
    assert response.content.startswith(b"{")
    with pytest.raises(ValueError):
        json.loads(response.content)


def test_huge_list_of_objects_that_are_no_jobs(server):
    jobs = fetch(server, "huge_list").json()["jobs"]
    assert len(jobs) == HUGE_LIST_LENGTH
    assert jobs[:2] == [{"id": 0}, {"id": 1}]


def test_reset_closes_without_an_answer(server):
    with pytest.raises(httpx.TransportError):
        fetch(server, "reset")
    assert len(server.requests) == 1


def test_slow_outlasts_the_client_timeout_and_then_answers(server):
    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        fetch(server, "slow", timeout=0.3)
    assert time.monotonic() - started < 1.0
    started = time.monotonic()
    response = fetch(server, "slow", timeout=5.0)
    assert 1.4 < time.monotonic() - started < 3.0
    assert response.json() == WRONG_TYPES


@pytest.mark.parametrize("status", [200, 404, 500])
def test_a_page_is_served_as_set(server, status):
    server.serve_page(status, "text/plain; charset=utf-8", "ünïcode page")
    response = fetch(server, PAGE)
    assert (response.status_code, response.headers["content-type"], response.text) == (
        status, "text/plain; charset=utf-8", "ünïcode page")


def test_every_mode_is_covered_and_unknown_ones_are_refused(server):
    assert set(MODES) == {"wrong_types", "html", "empty", "truncated", "huge_list", "not_json_object", "reset",
                          "slow", "status_500_html"}
    with pytest.raises(ValueError):
        server.mode = "teapot"
    with pytest.raises(ValueError):
        FaultServer(delay=10)
