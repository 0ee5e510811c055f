# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one HTTP transport every Bridge client uses. Internal to this collection.

It owns TLS, timeouts, secret scrubbing and the one retry policy of every Bridge client
(RetryPolicy, which the Kubernetes client, over the `kubernetes` library, follows too): idempotent
calls are retried on connection errors, 429 and 502-504 with jittered backoff that honours
Retry-After; anything not marked idempotent (a submit POST) is sent exactly once. Every request's
whole URL is read by _urls.parse_url and checked against the operator's allow-list (the
controller's, from the environment) right before it is sent.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import random
import ssl
import time
import traceback

from ansible_collections.bridge.hpc.plugins.module_utils._errors import (
    ConnectionFailed,
    Timeout,
)
from ansible_collections.bridge.hpc.plugins.module_utils._scrub import scrub as scrub_secrets
from ansible_collections.bridge.hpc.plugins.module_utils._urls import AllowList, require_sendable

try:
    import httpx

    HAS_HTTPX = True
    HTTPX_IMPORT_ERROR = None
except ImportError:
    HAS_HTTPX = False
    HTTPX_IMPORT_ERROR = traceback.format_exc()

IDEMPOTENT_METHODS = frozenset(["GET", "HEAD", "OPTIONS", "PUT", "DELETE"])
# What a proxy, a gateway or a server under load answers, and what may pass by the next attempt.
# 500 is not among them, for any manager: Ray answers a reused submission_id and a delete of a
# running job with 500, Slurm 22.05 a bad token and slurmctld's refusals, so sending again only
# delays the same answer; and where a 500 is the server's passing trouble (an apiserver whose etcd
# hiccups), ServerError says it is temporary and the controller retries the whole step later.
RETRY_STATUSES = frozenset([429, 502, 503, 504])


def retry_delay(attempt, backoff, retry_after=None, max_delay=30.0, rand=random.random):
    """Seconds to wait before retry number `attempt` (1-based): Retry-After wins, else jittered
    exponential backoff ("full jitter" keeps many Bridge workers from retrying in lockstep)."""
    if retry_after is not None:
        try:
            return min(max(float(retry_after), 0.0), max_delay)
        except (TypeError, ValueError):
            pass
    ceiling = min(max_delay, backoff * (2 ** (attempt - 1)))
    return ceiling / 2 + rand() * ceiling / 2


class RetryPolicy:
    """When a call is sent again: an idempotent one up to `retries` more times on a lost answer
    (ConnectionFailed, Timeout) or a RETRY_STATUSES answer, after retry_delay; any other once."""

    def __init__(self, retries=3, backoff=0.5, sleep=time.sleep):
        self.retries = max(0, int(retries))
        self.backoff = backoff
        self.sleep = sleep

    def send(self, attempt, idempotent):
        """The answer of attempt(), which sends the call once and returns (answer, HTTP status,
        Retry-After header or None), or raises ConnectionFailed or Timeout when no answer came.
        The last attempt's answer is returned whatever its status, its error raised."""
        attempts = 1 + (self.retries if idempotent else 0)
        for number in range(1, attempts + 1):
            last = number == attempts
            try:
                answer, status, retry_after = attempt()
            except (ConnectionFailed, Timeout):
                if last:
                    raise
                self.sleep(retry_delay(number, self.backoff))
                continue
            if status in RETRY_STATUSES and not last:
                self.sleep(retry_delay(number, self.backoff, retry_after))
                continue
            return answer
        raise AssertionError("unreachable: the last attempt returns or raises")


class Transport:
    """A thin httpx wrapper bound to one manager endpoint."""

    def __init__(
        self,
        base_url,
        manager,
        headers=None,
        secrets=(),
        validate_certs=True,
        ca_path=None,
        timeout=30.0,
        retries=3,
        backoff=0.5,
        http_client=None,
        sleep=time.sleep,
        allow_list=None,
    ):
        if not HAS_HTTPX and http_client is None:
            raise ImportError("the Python library httpx is required: %s" % HTTPX_IMPORT_ERROR)
        self.base_url = base_url.rstrip("/")
        self.manager = manager
        self.secrets = [s for s in secrets if s]
        self.retry = RetryPolicy(retries, backoff, sleep)
        self.requests_sent = 0
        # Whether this server has answered as the manager's API (a shape only that API sends), so
        # that the words of its error answers may be repeated (_backend.manager_reason).
        self.vouched = False
        self.allow_list = AllowList.from_environ() if allow_list is None else allow_list
        if http_client is None:
            http_client = httpx.Client(
                base_url=self.base_url,
                headers=headers or {},
                verify=self._verify(validate_certs, ca_path),
                timeout=httpx.Timeout(timeout, connect=min(10.0, timeout)),
                follow_redirects=False,
            )
        self.http = http_client

    @staticmethod
    def _verify(validate_certs, ca_path):
        if not validate_certs:
            return False
        if ca_path:
            return ssl.create_default_context(cafile=ca_path)
        return True

    def add_secret(self, secret):
        """Scrub `secret` from every later message too: a token read again (rotated) or traded for."""
        if secret and secret not in self.secrets:
            self.secrets.append(secret)

    def set_header(self, name, value):
        """Send `name: value` with every later request (a token that was read again)."""
        self.http.headers[name] = value

    def scrub(self, text):
        """Remove every secret this transport knows, in any encoding (_scrub), from a text meant for humans."""
        return scrub_secrets(text, self.secrets)

    def close(self):
        self.http.close()

    def request(self, method, path, params=None, json=None, content=None, headers=None, idempotent=None, verb="call",
                obj=None, ident=None):
        """Send one request; returns the httpx response whatever its status.

        `headers` add to (or replace) the client's for this request only: a raw body's
        Content-Type, a session cookie that changes when the client logs on again.

        Raises ConnectionFailed or Timeout when no response arrived. The caller interprets the
        status and body, because each manager reports errors its own way.
        """
        method = method.upper()
        if idempotent is None:
            idempotent = method in IDEMPOTENT_METHODS
        url = self.base_url + path

        def attempt():
            request = self.http.build_request(method, path, params=params, json=json, content=content, headers=headers)
            require_sendable(str(request.url), self.allow_list, self.manager, verb, obj)
            self.requests_sent += 1
            try:
                response = self.http.send(request)
            except httpx.TimeoutException as exc:
                raise Timeout(self._describe(exc), verb, obj, ident, self.manager, url)
            except httpx.TransportError as exc:
                raise ConnectionFailed(self._describe(exc), verb, obj, ident, self.manager, url)
            return response, response.status_code, response.headers.get("retry-after")

        return self.retry.send(attempt, idempotent)

    def _describe(self, exc):
        reason = str(exc) or type(exc).__name__
        return self.scrub("%s (%s)" % (reason, type(exc).__name__))
