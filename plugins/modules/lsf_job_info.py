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
  description: >-
    The jobs found, normalized, the same shape M(bridge.hpc.lsf_job) returns; C(native) only with
    O(include_native=true).
  returned: when query is not set
  type: list
  elements: dict
  sample: [{"job_id": "1234", "name": "hello", "phase": "running", "queue": "normal"}]
  contains:
    job_id:
      description: Job id, as a string.
      type: str
    name:
      description: Job name (C(-J)).
      type: str
    identity:
      description: Identity from the C(bridge:) job description (C(-Jd)); null for a job Bridge did not submit.
      type: str
    phase:
      description: >-
        The job's phase. C(PEND), C(PSUSP), C(WAIT) and C(PROV) are C(queued); C(RUN), C(USUSP),
        C(SSUSP) and C(UNKWN) are C(running); C(DONE) and C(PDONE) are C(completed); C(EXIT),
        C(PERR) and C(ZOMBI) are C(failed), except a job killed by its owner or an administrator
        (C(TERM_OWNER), C(TERM_ADMIN), C(TERM_FORCE_OWNER), C(TERM_FORCE_ADMIN)), which is C(cancelled).
      type: str
      choices: [queued, running, completed, failed, cancelled]
    terminal:
      description: Whether the job is finished (its phase is C(completed), C(failed) or C(cancelled)).
      type: bool
    native_state:
      description: LSF's short state name, such as C(PEND), C(RUN), C(DONE), C(EXIT) or C(USUSP).
      type: str
    suspended:
      description: Whether the job is suspended (C(PSUSP), C(USUSP), C(SSUSP)).
      type: bool
    reason:
      description: >-
        LSF's pending reason of a pending job, the exit reason (C(TERM_RUNLIMIT), ...) of a failed or
        killed one, or what a suspended or unknown state means.
      type: str
    exit_code:
      description: Exit code of a finished job (0 for a completed one); null while it is pending or running.
      type: int
    signal:
      description: Always null for LSF.
      type: int
    failure_class:
      description: >-
        Why a finished job did not complete, from its exit reason: C(TERM_RUNLIMIT), C(TERM_DEADLINE)
        and C(TERM_CPULIMIT) are C(timeout), C(TERM_MEMLIMIT) and C(TERM_SWAP) C(out_of_memory),
        C(TERM_PREEMPT) C(preempted), C(TERM_ZOMBIE) C(node_failure), a kill C(cancelled), any other
        exit C(non_zero_exit). C(node_failure) also for a C(ZOMBI) job and for a running job in
        C(UNKWN) (LSF lost contact with its host and may recover it). C(rejected) for a pending job
        whose reason never clears by itself (a closed queue, no suitable host). Null otherwise.
      type: str
      choices: [timeout, out_of_memory, node_failure, cancelled, non_zero_exit, rejected, preempted]
    submit_time:
      description: RFC 3339 time of submission.
      type: str
    start_time:
      description: RFC 3339 start time; null while the job pends.
      type: str
    end_time:
      description: RFC 3339 end time of a finished job.
      type: str
    queue:
      description: The job's queue.
      type: str
    hosts:
      description: The job's execution hosts.
      type: str
    user:
      description: The LSF user the job runs as.
      type: str
    working_directory:
      description: The job's current working directory.
      type: str
    stdout:
      description: The path of the job's standard output.
      type: str
    native:
      description: The job record as Application Center returned it.
      type: dict
      returned: when include_native is true
job:
  description: The one job asked for with O(job_id) or O(identity), with the keys of RV(jobs); null when the identity is not found.
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
