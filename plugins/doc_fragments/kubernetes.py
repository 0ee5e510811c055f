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
        Several paths separated by C(:) are merged as C(kubectl) merges them (the first file to set a
        value wins).
      - If not set, the environment variable E(K8S_AUTH_KUBECONFIG) is used (as by kubernetes.core), then
        E(KUBECONFIG) (as by C(kubectl)).
      - Without O(kubeconfig), O(kubeconfig_content) and O(url) with O(api_key), the in-cluster
        ServiceAccount of the Pod the task runs in.
      - Where the BridgeJob controller runs the module (E(BRIDGE_AMBIENT_CREDENTIALS=refuse)), neither the
        environment nor the in-cluster ServiceAccount is used, since they are the controller's own.
    type: path
  context:
    description:
      - The kubeconfig context to use instead of the current one.
      - If not set, the environment variable E(K8S_AUTH_CONTEXT) is used.
    type: str
  kubeconfig_content:
    description:
      - A kubeconfig's content as YAML text, used instead of O(kubeconfig); what a BridgeJob's
        Secret key C(kubeconfig) holds. The environment variables of O(url), O(api_key) and O(ca_path)
        do not apply to it.
      - Never logged, never part of a result or an error message (a kubeconfig that does not parse
        is reported by line number only).
    type: str
  api_key:
    description:
      - A bearer token for the apiserver at O(url), without a kubeconfig, as kubernetes.core's
        C(api_key); with a kubeconfig, it replaces the kubeconfig's credentials.
      - If not set, the environment variable E(K8S_AUTH_API_KEY) is used; with E(K8S_AUTH_HOST) and
        E(K8S_AUTH_SSL_CA_CERT), what AWX's own Kubernetes credential type (OpenShift or Kubernetes API
        Bearer Token) injects.
      - Never logged, never part of a result or an error message.
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
      - The apiserver's URL, overriding the kubeconfig's C(server) (a proxy, a tunnel); with O(api_key), the
        apiserver without a kubeconfig.
      - If not set, the environment variable E(K8S_AUTH_HOST) is used.
    type: str
  validate_certs:
    description:
      - Verify the apiserver's TLS certificate. V(false) overrides the kubeconfig.
      - E(K8S_AUTH_VERIFY_SSL) is not read; verification is turned off only by this option. With AWX's own
        Kubernetes credential, give its CA certificate instead (E(K8S_AUTH_SSL_CA_CERT)).
    type: bool
    default: true
  ca_path:
    description:
      - PEM file of the certificate authorities to trust instead of the kubeconfig's.
      - If not set, the environment variable E(K8S_AUTH_SSL_CA_CERT) is used.
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
