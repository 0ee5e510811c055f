# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # Connection options of every IBM Quantum module.
    DOCUMENTATION = r"""
options:
  url:
    description:
      - Base URL of the Qiskit Runtime REST API of IBM Quantum Platform, for example
        C(https://quantum.cloud.ibm.com/api/v1) (us-east) or C(https://eu-de.quantum.cloud.ibm.com/api/v1)
        (eu-de, the region in field 6 of the instance CRN).
      - If not set, the environment variable E(QUANTUM_URL) is used.
    type: str
  iam_url:
    description:
      - Base URL of IBM Cloud IAM, which trades the API key for a bearer token (C(POST <iam_url>/identity/token)).
      - If not set, the environment variable E(QUANTUM_IAM_URL) is used, else C(https://iam.cloud.ibm.com).
    type: str
  api_key:
    description:
      - IBM Cloud API key. Traded for an IAM bearer token, which is cached, renewed at 80% of its
        lifetime and renewed once more when the service refuses it.
      - If not set, the environment variable E(QUANTUM_API_KEY) is used.
      - Never logged, never part of a result or an error message; neither is the bearer token.
    type: str
  service_crn:
    description:
      - CRN of the IBM Quantum service instance, sent as C(Service-CRN) with every request
        (C(crn:v1:bluemix:public:quantum-computing:us-east:a/<account>:<instance>::)).
      - If not set, the environment variable E(QUANTUM_SERVICE_CRN) is used.
    type: str
  api_version:
    description:
      - The C(IBM-API-Version) date sent with every request, which selects the answers' schemas.
      - If not set, C(2026-04-15), the version qiskit-ibm-runtime 0.51 sends.
    type: str
  validate_certs:
    description:
      - Verify the servers' TLS certificates (the API's and IAM's).
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
      - How often an idempotent request (a read, a token exchange, a cancel) is retried after a
        connection error or an HTTP 429, 502, 503 or 504, with jittered backoff. A submit is never retried.
    type: int
    default: 3
requirements:
  - httpx
"""
