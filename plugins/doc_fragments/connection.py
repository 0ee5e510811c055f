# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # Connection options of the backend-neutral modules.
    DOCUMENTATION = r"""
options:
  url:
    description:
      - Base URL of the resource manager's REST endpoint; slurmrestd for O(backend=slurm), the Ray dashboard for O(backend=ray),
        LSF Application Center's context root (C(http://pac:8080/platform)) for O(backend=lsf), the Qiskit Runtime
        API (C(https://quantum.cloud.ibm.com/api/v1)) for O(backend=quantum). Required by every backend but V(kubernetes).
      - For O(backend=kubernetes), the apiserver's URL, overriding the kubeconfig's C(server); not needed, since the
        kubeconfig or the in-cluster ServiceAccount says where the apiserver is; E(K8S_AUTH_HOST) if not set.
    type: str
  user:
    description:
      - User name the request acts for, where the backend has one (Slurm's C(X-SLURM-USER-NAME)); Ray has none.
      - The LSF user that logs on to Application Center (O(backend=lsf)).
    type: str
  token:
    description:
      - Token or JWT for the backend. Never logged, never part of a result or an error message.
      - Mutually exclusive with O(token_file).
    type: str
  token_file:
    description:
      - File that holds Slurm's JWT, alone or as the C(SLURM_JWT=...) line of C(scontrol token)
        (O(backend=slurm) only). It is read again when Slurm refuses the token, so a token that
        expires can be rotated by rewriting the file while a task waits; see M(bridge.hpc.slurm_job).
      - Mutually exclusive with O(token). The token read from it is never logged, and it is never
        part of a result or an error message.
    type: path
  identity_key:
    description:
      - Secret key that tags each Slurm job's identity in its comment (O(backend=slurm) only), so that no other
        user of the cluster can make a job Bridge takes for this one's; see M(bridge.hpc.slurm_job).
      - Never logged, never part of a result or an error message.
    type: str
  password:
    description:
      - Password of O(user), which LSF Application Center trades for a session token (O(backend=lsf) only).
      - Never logged, never part of a result or an error message.
    type: str
  api_version:
    description:
      - The backend's API version where it has several, such as Slurm's C(v0.0.42). Discovered when
        not set; setting it saves the discovery requests (up to 8 for Slurm). Ignored by Ray and LSF.
      - For O(backend=quantum), the C(IBM-API-Version) date; C(2026-04-15) when not set.
    type: str
  iam_url:
    description:
      - IBM Cloud IAM, which trades O(api_key) for a bearer token (O(backend=quantum) only); C(https://iam.cloud.ibm.com) when not set.
    type: str
  api_key:
    description:
      - IBM Cloud API key (O(backend=quantum)); a bearer token for the apiserver at O(url) (O(backend=kubernetes)),
        E(K8S_AUTH_API_KEY) if not set.
      - Never logged, never part of a result or an error message.
    type: str
  service_crn:
    description:
      - CRN of the IBM Quantum service instance (O(backend=quantum) only).
    type: str
  kubeconfig:
    description:
      - Path of a kubeconfig file (O(backend=kubernetes) only). If not set, the environment variable
        E(K8S_AUTH_KUBECONFIG), then E(KUBECONFIG) is used; without any (and without O(kubeconfig_content)
        or O(url) with O(api_key)), the in-cluster ServiceAccount.
    type: path
  context:
    description:
      - The kubeconfig context to use instead of its current context (O(backend=kubernetes) only);
        the environment variable E(K8S_AUTH_CONTEXT) if not set.
    type: str
  kubeconfig_content:
    description:
      - A kubeconfig's content, as YAML text (O(backend=kubernetes) only); used instead of O(kubeconfig).
      - Never logged, never part of a result or an error message.
    type: str
  namespace:
    description:
      - The namespace the Kubernetes Jobs live in (O(backend=kubernetes) only); the kubeconfig
        context's namespace, the ServiceAccount's namespace in-cluster, or C(default).
    type: str
  gpu_resource:
    description:
      - The extended resource GPUs are counted in (O(backend=kubernetes) only), such as C(amd.com/gpu).
    type: str
    default: nvidia.com/gpu
  validate_certs:
    description:
      - Verify the server's TLS certificate.
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
      - How often an idempotent request is retried after a connection error or an HTTP 429, 502,
        503 or 504. A submit is never retried.
    type: int
    default: 3
requirements:
  - httpx
  - kubernetes (the Python client, for O(backend=kubernetes))
"""
