# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # Connection options of every Slurm module.
    DOCUMENTATION = r"""
options:
  url:
    description:
      - Base URL of slurmrestd, for example C(https://slurm.example.org:6820).
      - If not set, the environment variable E(SLURM_URL) is used.
    type: str
  user:
    description:
      - Slurm user name sent as C(X-SLURM-USER-NAME).
      - Optional for a user's own token; required when a root or SlurmUser token acts for another user.
      - If not set, the environment variable E(SLURM_USER) is used.
    type: str
  token:
    description:
      - JWT sent as C(X-SLURM-USER-TOKEN), as printed by C(scontrol token).
      - If not set, the environment variable E(SLURM_JWT) is used.
      - Never logged, never part of a result or an error message.
    type: str
  api_version:
    description:
      - Slurm REST API version to speak, such as C(v0.0.38) or C(v0.0.42).
      - If not set, the newest version the server offers is discovered with C(GET /slurm/<version>/ping/).
    type: str
    choices: [v0.0.45, v0.0.44, v0.0.43, v0.0.42, v0.0.41, v0.0.40, v0.0.39, v0.0.38, v0.0.37, v0.0.36]
  validate_certs:
    description:
      - Verify the server's TLS certificate. Turn off only for a throwaway test cluster.
    type: bool
    default: true
  ca_path:
    description:
      - PEM file of the certificate authorities to trust instead of the system store.
    type: path
  timeout:
    description:
      - Seconds to wait for one HTTP response. Keep it well above 5; some slurmrestd releases stall
        for 5 seconds on a small share of requests.
    type: float
    default: 30.0
  retries:
    description:
      - How often an idempotent request (GET, cancel) is retried after a connection error or an
        HTTP 429, 502, 503 or 504, with jittered backoff. A submit is never retried.
    type: int
    default: 3
requirements:
  - httpx
"""
