#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: lsf_job_info
short_description: Read LSF jobs through LSF Application Center, one by id or identity or a filtered list
version_added: 0.1.0
description:
  - Reads jobs from IBM Spectrum LSF Application Center and returns them normalized, the same shape
    M(bridge.hpc.lsf_job) returns.
  - With O(job_id) or O(identity) one job is read; otherwise every job of O(user) that LSF still
    remembers (finished ones within C(CLEAN_PERIOD) included), narrowed by the filters.
author:
  - Bridge developers (@bridge-hpc)
extends_documentation_fragment:
  - bridge.hpc.lsf
  - bridge.hpc.query
options:
  job_id:
    description:
      - Id of one job. Fails if LSF does not know it (any more).
    type: str
  identity:
    description:
      - Identity of one job, as given to or derived by M(bridge.hpc.lsf_job). Returns no job if none carries it.
    type: str
  name:
    description:
      - Only jobs with this name.
    type: str
  phases:
    description:
      - Only jobs in these normalized phases.
    type: list
    elements: str
    choices: [queued, running, completed, failed, cancelled]
  queue:
    description:
      - Only jobs in this queue.
    type: str
  include_native:
    description:
      - Keep the raw job record under C(native) in each job.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Reads only.
notes:
  - LSF forgets finished jobs after C(CLEAN_PERIOD) (3600 seconds by default).
  - Tested against a protocol simulator of Application Center only, not yet against a real one.
seealso:
  - module: bridge.hpc.lsf_job
"""

EXAMPLES = r"""
- name: One job
  bridge.hpc.lsf_job_info:
    job_id: "{{ submitted.job_id }}"
  register: one

- name: My pending and running jobs in the normal queue
  bridge.hpc.lsf_job_info:
    phases: [queued, running]
    queue: normal
  register: active
"""

RETURN = r"""
jobs:
  description: The jobs found, normalized (see M(bridge.hpc.lsf_job) for the fields).
  returned: when query is not set
  type: list
  elements: dict
  sample: [{"job_id": "1234", "name": "hello", "phase": "running", "queue": "normal"}]
job:
  description: The one job asked for with O(job_id) or O(identity); null when the identity is not found.
  returned: when job_id or identity is given and query is not set
  type: dict
  sample: {"job_id": "1234", "phase": "completed", "exit_code": 0}
query_result:
  description: >-
    What O(query) selects from the result this module would return without it
    (the sample is what V(jobs[?queue=='short'].{id: job_id, phase: phase}) selects); null when it selects nothing.
  returned: when query is set
  type: raw
  sample: [{"id": "1042", "phase": "running"}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.bridge.hpc.plugins.module_utils._module import (
    backend_connection_options,
    client_of,
    exit_with,
    job_info_module_args,
    main_for,
    read_job_or_list,
)


def read_jobs(module, client):
    params = module.params
    exit_with(module, client, read_job_or_list(params, client, lambda: [
        job for job in client.list(name=params["name"], phases=params["phases"])
        if params["queue"] is None or job["queue"] == params["queue"]]))


def main():
    module = AnsibleModule(**job_info_module_args(backend_connection_options("lsf"), queue=dict(type="str")))
    main_for(module, client_of("lsf"), read_jobs)


if __name__ == "__main__":
    main()
