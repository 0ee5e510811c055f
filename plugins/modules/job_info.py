#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: job_info
short_description: Read many jobs of one backend by identity with one request
version_added: 0.1.0
description:
  - Reads the jobs carrying the given identities from one backend with a single list request,
    whatever their number, and returns them normalized like every Bridge job. This is how the
    BridgeJob controller polls every tracked job of a backend once per interval.
  - With O(handoff_pipe), the handed-over object may hold C(identities) and the backend's
    credentials (C(user) and C(token); C(user) and C(password) for LSF; C(api_key) and C(service_crn) for IBM Quantum).
author:
  - Bridge developers (@bridge-hpc)
extends_documentation_fragment:
  - bridge.hpc.connection
  - bridge.hpc.handoff
options:
  backend:
    description:
      - The resource manager to read.
    type: str
    required: true
    choices: [lsf, quantum, ray, slurm]
  identities:
    description:
      - Identities of the jobs to read.
      - Required unless O(handoff_pipe) is set; the two are mutually exclusive.
    type: list
    elements: str
  include_native:
    description:
      - Keep the raw job objects under C(native).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Reads only.
notes:
  - Slurm forgets finished jobs after C(MinJobAge); their identities are then listed under RV(missing).
seealso:
  - module: bridge.hpc.jobs
  - module: bridge.hpc.slurm_job_info
  - module: bridge.hpc.ray_job_info
"""

EXAMPLES = r"""
- name: Where are my sweep jobs
  bridge.hpc.job_info:
    backend: slurm
    url: "{{ slurm_url }}"
    user: "{{ slurm_user }}"
    token: "{{ slurm_jwt }}"
    identities: [sweep-lr-0.1, sweep-lr-0.01]
  register: sweep

- name: Phases
  ansible.builtin.debug:
    msg: "{{ sweep.jobs | dict2items | map(attribute='value.phase') | list }}"
"""

RETURN = r"""
jobs:
  description: The jobs found, by identity, normalized.
  returned: always
  type: dict
  sample: {"sweep-lr-0.1": {"job_id": "41", "phase": "running"}}
missing:
  description: Identities without a job on the backend (never submitted, or forgotten).
  returned: always
  type: list
  elements: str
  sample: [sweep-lr-0.01]
requests:
  description: HTTP requests this read took.
  returned: always
  type: int
  sample: 1
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.bridge.hpc.plugins.module_utils._handoff import HANDOFF_OPTIONS, handoff_or_exit
from ansible_collections.bridge.hpc.plugins.module_utils._jobs import read_many
from ansible_collections.bridge.hpc.plugins.module_utils._module import (
    any_backend_options,
    chosen_backend,
    exit_with,
    main_for,
    without_native,
)


def read_jobs(module, client):
    found, missing = read_many(client, module.params["identities"])
    if not module.params["include_native"]:
        found = dict(zip(found, without_native(list(found.values()))))
    exit_with(module, client, {"changed": False, "jobs": found, "missing": missing, "requests": client.requests_sent})


def main():
    options = any_backend_options()
    options.update(
        identities=dict(type="list", elements="str"),
        include_native=dict(type="bool", default=False),
    )
    options.update(HANDOFF_OPTIONS)
    module = AnsibleModule(argument_spec=options, supports_check_mode=True, required_one_of=[("identities", "handoff_pipe")],
                           mutually_exclusive=[("identities", "handoff_pipe")])
    handoff_or_exit(module, {"identities": list}, idle_result={"jobs": {}, "missing": [], "requests": 0})
    main_for(module, chosen_backend, read_jobs)


if __name__ == "__main__":
    main()
