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
      - Optional for a user's own token; without it, the user the token names (its C(sun) claim, which
        C(scontrol token) writes) is sent, which Slurm 22.05 needs and later releases take from the token themselves.
        Required when a root or SlurmUser token acts for another user.
      - If not set, the environment variable E(SLURM_USER) is used.
    type: str
  token:
    description:
      - JWT sent as C(X-SLURM-USER-TOKEN), as printed by C(scontrol token).
      - If not set, the environment variable E(SLURM_JWT) is used.
      - Never logged, never part of a result or an error message.
      - Mutually exclusive with O(token_file).
    type: str
  token_file:
    description:
      - File that holds the JWT, on the host the task runs on; either the token alone or the
        C(SLURM_JWT=...) line that C(scontrol token) prints. Leading and trailing blanks are ignored.
      - Use it for tokens that expire (C(scontrol token lifespan=...)) and are rotated by rewriting
        the file, best by writing a new file and renaming it over the old one. When Slurm refuses
        the token (HTTP 401 or 511, or the bare HTTP 500 of Slurm 22.05), the file is read again
        and, if it holds another token, a read or a cancel is sent once more with it, and a wait
        goes on; until the file holds a token Slurm accepts, a wait keeps polling up to
        its C(wait_timeout).
      - A submit refused this way is not simply sent again. With the new token, the job's identity
        is looked up first, and the job is submitted only if no job carries it.
      - If not set, the environment variable E(SLURM_JWT_FILE) is used.
      - Mutually exclusive with O(token). One of the two that is set in the task wins over the
        other's environment variable (E(SLURM_JWT) or E(SLURM_JWT_FILE)).
      - The token read from the file is treated like O(token). It is never logged, and it is
        never part of a result or an error message.
    type: path
  api_version:
    description:
      - Slurm REST API version to speak, such as C(v0.0.38) or C(v0.0.42).
      - If not set, the newest version the server offers is discovered with C(GET /slurm/<version>/ping/).
    type: str
    choices: [v0.0.45, v0.0.44, v0.0.43, v0.0.42, v0.0.41, v0.0.40, v0.0.39, v0.0.38, v0.0.37, v0.0.36]
  identity_key:
    description:
      - Secret key that tags each job's identity in its comment (C(bridge:<identity> mac=<tag>), the tag an
        HMAC-SHA256 of the identity), so that no other user of the cluster can make a job that Bridge
        takes for this one's. Several keys, one a line; the first tags new jobs, every one is accepted.
      - Whatever the key, only jobs of the user the credential acts for are taken for a task's job; with a
        key, a job whose tag another key made is not either. A job without a tag (submitted without a key)
        is still found. Two jobs carrying one identity are refused with C(AmbiguousIdentity), naming both.
      - The BridgeJob controller hands over its own (C(--identity-key-file)).
      - Never logged, never part of a result or an error message.
    type: str
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
