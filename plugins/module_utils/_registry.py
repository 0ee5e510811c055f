# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one registry of Bridge backends. Internal to this collection.

Everything that enumerates backends (module choices and argspecs, the spec's backend_options
namespaces, the controller's credential keys, the CRD's enum) derives from BACKENDS or is tested
against it (tests/unit/test_registry.py).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.bridge.hpc.plugins.module_utils.k8s.client import K8sClient
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.client import LsfClient
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.client import QuantumClient
from ansible_collections.bridge.hpc.plugins.module_utils.ray.client import RayClient
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient

BACKENDS = dict((backend.NAME, backend) for backend in (SlurmClient, RayClient, LsfClient, QuantumClient, K8sClient))
