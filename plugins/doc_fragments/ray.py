# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # Connection options of every Ray module.
    DOCUMENTATION = r"""
options:
  url:
    description:
      - Base URL of the Ray dashboard, which serves the Jobs API, for example C(http://ray-head:8265).
      - If not set, the environment variable E(RAY_ADDRESS) is used (the same one the Ray CLI reads).
    type: str
  token:
    description:
      - Token of a cluster started with C(RAY_AUTH_MODE=token), sent in the C(Authorization) header as a bearer token.
      - If not set, the environment variable E(RAY_AUTH_TOKEN) is used.
      - Never logged, never part of a result or an error message.
    type: str
  validate_certs:
    description:
      - Verify the server's TLS certificate (for a dashboard behind a TLS proxy).
    type: bool
    default: true
  ca_path:
    description:
      - PEM file of the certificate authorities to trust instead of the system store.
    type: path
  timeout:
    description:
      - Seconds to wait for one HTTP response.
    type: float
    default: 30.0
  retries:
    description:
      - How often an idempotent request (GET, stop) is retried after a connection error or an HTTP
        429, 502, 503 or 504, with jittered backoff. A submit is never retried.
    type: int
    default: 3
requirements:
  - httpx
"""
