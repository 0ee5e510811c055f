"""Replay responses recorded from real services (tests/unit/fixtures/<manager>/...) through httpx."""

import json
import os

import httpx

from ansible_collections.bridge.hpc.plugins.module_utils._transport import Transport

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def recorded(manager, version, case):
    with open(os.path.join(FIXTURES, manager, version, case + ".json")) as handle:
        return json.load(handle)


def replaying_transport(manager_name, fixtures, secrets=("tok",)):
    """A Transport answering each request with the next fixture, in order; returns (transport, sent)."""
    answers = list(fixtures)
    sent = []

    def handler(request):
        sent.append(request)
        fixture = answers.pop(0)
        body = fixture["body"]
        if isinstance(body, (dict, list)):
            return httpx.Response(fixture["status"], json=body)
        return httpx.Response(fixture["status"], text=body or "")

    http = httpx.Client(base_url="http://%s.test" % manager_name.lower(), transport=httpx.MockTransport(handler))
    transport = Transport("http://%s.test" % manager_name.lower(), manager_name, secrets=list(secrets),
                          http_client=http, sleep=lambda s: None)
    return transport, sent
