# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # Connection options of every LSF module.
    DOCUMENTATION = r"""
options:
  url:
    description:
      - Context root of IBM Spectrum LSF Application Center (PAC), for example C(http://pac.example.org:8080/platform);
        every request goes to C(<url>/ws/...).
      - If not set, the environment variable E(LSF_PAC_URL) is used.
    type: str
  user:
    description:
      - LSF user that logs on to Application Center (C(POST /ws/logon)); jobs run as this user.
      - If not set, the environment variable E(LSF_USER) is used.
    type: str
  password:
    description:
      - Password of O(user). Application Center trades it for a session token, which is renewed
        when it expires or is refused.
      - If not set, the environment variable E(LSF_PASSWORD) is used.
      - Never logged, never part of a result or an error message; neither is the session token.
    type: str
  validate_certs:
    description:
      - Verify the server's TLS certificate (Application Center on https, port 8443 by default).
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
      - How often an idempotent request (a read, a logon, a kill) is retried after a connection
        error or an HTTP 429, 502, 503 or 504, with jittered backoff. A submit is never retried.
    type: int
    default: 3
requirements:
  - httpx
"""
