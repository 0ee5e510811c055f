#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: slurm_job_info
short_description: Read Slurm jobs, one by id or identity or a filtered list
version_added: 0.1.0
description:
  - Reads jobs from slurmrestd and returns them normalized across REST versions, the same shape
    M(bridge.hpc.slurm_job) returns.
  - With O(job_id) or O(identity) one job is read; otherwise every job slurmctld still remembers,
    narrowed by the filters.
author:
  - Bridge developers (@bridge-hpc)
extends_documentation_fragment:
  - bridge.hpc.slurm
options:
  job_id:
    description:
      - Id of one job. Fails if Slurm does not know it (any more).
    type: str
  identity:
    description:
      - Identity of one job, as given to or derived by M(bridge.hpc.slurm_job). Returns no job if none carries it.
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
  partition:
    description:
      - Only jobs in this partition.
    type: str
  job_user:
    description:
      - Only jobs of this Slurm user.
    type: str
  include_native:
    description:
      - Keep the raw job object under C(native) in each job.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Reads only.
notes:
  - Slurm forgets finished jobs after C(MinJobAge) (300 seconds by default) unless accounting is configured.
seealso:
  - module: bridge.hpc.slurm_job
"""

EXAMPLES = r"""
- name: One job
  bridge.hpc.slurm_job_info:
    job_id: "{{ submitted.job_id }}"
  register: one

- name: My running jobs in the batch partition
  bridge.hpc.slurm_job_info:
    phases: [running]
    partition: batch
    job_user: alice
  register: running
"""

RETURN = r"""
jobs:
  description: The jobs found, normalized (see M(bridge.hpc.slurm_job) for the fields).
  returned: always
  type: list
  elements: dict
  sample: [{"job_id": "42", "name": "hello", "phase": "running", "partition": "debug"}]
job:
  description: The one job asked for with O(job_id) or O(identity); null when the identity is not found.
  returned: when job_id or identity is given
  type: dict
  sample: {"job_id": "42", "phase": "completed", "exit_code": 0}
api_version:
  description: Slurm REST API version used.
  returned: always
  type: str
  sample: v0.0.42
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


def select_jobs(jobs, partition=None, job_user=None):
    return [
        job for job in jobs
        if (partition is None or job["partition"] == partition)
        and (job_user is None or job["user"] == job_user)
    ]


def read_jobs(module, client):
    params = module.params
    result = read_job_or_list(params, client, lambda: select_jobs(
        client.list(name=params["name"], phases=params["phases"]), params["partition"], params["job_user"]))
    result["api_version"] = client.api_version
    exit_with(module, client, result)


def main():
    module = AnsibleModule(**job_info_module_args(
        backend_connection_options("slurm"), partition=dict(type="str"), job_user=dict(type="str")))
    main_for(module, client_of("slurm"), read_jobs)


if __name__ == "__main__":
    main()
