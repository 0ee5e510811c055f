# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # Connection options of every Kubernetes module and of the bridge.hpc.kubernetes inventory.
    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path of a kubeconfig file; its current context (or O(context)) says which apiserver, which
        credentials (certificates, tokens, exec plugins such as C(aws eks get-token)) and which namespace.
      - If not set, the environment variable E(K8S_AUTH_KUBECONFIG) is used (as by kubernetes.core).
      - Without O(kubeconfig) and O(kubeconfig_content), the in-cluster ServiceAccount of the Pod
        the task runs in (the BridgeJob controller's own cluster). Note that E(KUBECONFIG) is not read.
    type: path
  context:
    description:
      - The kubeconfig context to use instead of the current one.
      - If not set, the environment variable E(K8S_AUTH_CONTEXT) is used.
    type: str
  kubeconfig_content:
    description:
      - A kubeconfig's content as YAML text, used instead of O(kubeconfig); what a BridgeJob's
        Secret key C(kubeconfig) holds.
      - Never logged, never part of a result or an error message (a kubeconfig that does not parse
        is reported by line number only).
    type: str
  namespace:
    description:
      - The namespace the Jobs (and their ConfigMaps) live in; identities are looked up there.
      - If not set, the namespace of the kubeconfig context, in-cluster the ServiceAccount's
        namespace, else C(default).
    type: str
  gpu_resource:
    description:
      - The extended resource the job spec's C(resources.gpus) requests, such as C(amd.com/gpu) or C(gpu.intel.com/i915).
    type: str
    default: nvidia.com/gpu
  url:
    description:
      - The apiserver's URL, overriding the kubeconfig's C(server) (a proxy, a tunnel). Not needed otherwise.
    type: str
  validate_certs:
    description:
      - Verify the apiserver's TLS certificate. V(false) overrides the kubeconfig.
    type: bool
    default: true
  ca_path:
    description:
      - PEM file of the certificate authorities to trust instead of the kubeconfig's.
    type: path
  timeout:
    description:
      - Seconds to wait for one API response.
    type: float
    default: 30.0
  retries:
    description:
      - How often a read (a get, a list, a delete of a known Job) is retried after a connection error
        or an HTTP 429 or 5xx, with jittered backoff honoring C(Retry-After). A create is never
        retried; a Job name derived from the identity turns a repeated create into a lookup.
    type: int
    default: 3
requirements:
  - kubernetes (the Python client)
"""
