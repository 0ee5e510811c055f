#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: ray_job_info
short_description: Read Ray jobs and their driver logs
version_added: 0.1.0
description:
  - Reads jobs from the Ray Jobs API, normalized like every Bridge backend's jobs.
  - With O(job_id) or O(identity) one job is read, optionally with its driver log; otherwise every
    job the cluster knows, narrowed by O(phases) and O(name).
author:
  - Bridge developers (@bridge-hpc)
extends_documentation_fragment:
  - bridge.hpc.ray
  - bridge.hpc.query
options:
  job_id:
    description:
      - Submission id (or Ray job id) of one job. Fails if Ray does not know it.
    type: str
  identity:
    description:
      - Identity of one job, as given to or derived by M(bridge.hpc.ray_job). Returns no job if none has it.
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
  logs:
    description:
      - Also return the driver log of the one job asked for.
    type: bool
    default: false
  logs_tail_lines:
    description:
      - Keep only the last this many lines of the log; C(0) keeps all of it.
    type: int
    default: 1000
  include_native:
    description:
      - Keep the raw job object under C(native) in each job.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Reads only.
seealso:
  - module: bridge.hpc.ray_job
"""

EXAMPLES = r"""
- name: A job and the end of its log
  bridge.hpc.ray_job_info:
    identity: "train-{{ run_id }}"
    logs: true
    logs_tail_lines: 50
  register: train

- name: Every failed job
  bridge.hpc.ray_job_info:
    phases: [failed]
  register: failed

- name: Phase and exit code of one job, nothing else
  bridge.hpc.ray_job_info:
    identity: "train-{{ run_id }}"
    query: "job.{phase: phase, exit_code: exit_code}"
  register: train_state

- name: Go on only when it completed
  ansible.builtin.assert:
    that: train_state.query_result.phase == 'completed'
"""

RETURN = r"""
jobs:
  description: >-
    The jobs found, normalized, the same shape M(bridge.hpc.ray_job) returns; C(native) only with
    O(include_native=true).
  returned: when query is not set
  type: list
  elements: dict
  sample: [{"job_id": "train-42", "phase": "running"}]
  contains:
    job_id:
      description: The submission id.
      type: str
    ray_job_id:
      description: Ray's own job id of the driver; null until the entrypoint connects to Ray (C(ray.init())), and for one that never does.
      type: str
    name:
      description: The spec's name (metadata C(bridge_name)), else the submission id.
      type: str
    identity:
      description: Identity from the metadata C(bridge_identity); null for a job Bridge did not submit.
      type: str
    phase:
      description: >-
        The job's phase: Ray's C(PENDING) is C(queued), C(RUNNING) C(running), C(SUCCEEDED)
        C(completed), C(FAILED) C(failed) and C(STOPPED) C(cancelled).
      type: str
      choices: [queued, running, completed, failed, cancelled]
    terminal:
      description: Whether the job is finished (its phase is C(completed), C(failed) or C(cancelled)).
      type: bool
    native_state:
      description: Ray's status, C(PENDING), C(RUNNING), C(SUCCEEDED), C(FAILED) or C(STOPPED).
      type: str
    reason:
      description: >-
        The first line of Ray's message about the job, or why a pending driver fits no alive node.
      type: str
    error_type:
      description: Ray's type of the error of a failed job, such as C(RUNTIME_ENV_SETUP_FAILURE).
      type: str
    exit_code:
      description: The driver's exit code once the job is finished; null before.
      type: int
    signal:
      description: Always null for Ray.
      type: int
    failure_class:
      description: >-
        C(cancelled) for a stopped job; C(timeout) for a driver the spec's time limit ended (exit code
        124); C(rejected) for a job that failed before its entrypoint ran (its runtime environment or
        supervisor could not start) or a pending one no alive node could ever host; C(non_zero_exit)
        for any other failure; null otherwise.
      type: str
      choices: [timeout, out_of_memory, node_failure, cancelled, non_zero_exit, rejected, preempted]
    submit_time:
      description: RFC 3339 time Ray accepted the job.
      type: str
    start_time:
      description: The same as C(submit_time), which Ray counts as the job's start.
      type: str
    end_time:
      description: RFC 3339 end time of a finished job.
      type: str
    partition:
      description: Always null; Ray has no queues. Kept so every job of a backend without them has the key.
      type: str
    nodes:
      description: The IP address of the driver's node; null until the entrypoint connects to Ray, and for one that never does.
      type: str
    entrypoint:
      description: The command Ray runs as the driver.
      type: str
    native:
      description: The job details as the Jobs API returned them.
      type: dict
      returned: when include_native is true
job:
  description: The one job asked for with O(job_id) or O(identity), with the keys of RV(jobs); null when the identity is not found.
  returned: when job_id or identity is given and query is not set
  type: dict
  sample: {"job_id": "train-42", "phase": "completed", "exit_code": 0}
log:
  description: The driver's stdout and stderr, tail-limited.
  returned: when logs is true and the job exists and query is not set
  type: str
  sample: "hello\n42\n"
query_result:
  description: >-
    What O(query) selects from the result this module would return without it
    (the sample is what V(job.phase) selects); null when it selects nothing.
  returned: when query is set
  type: raw
  sample: "completed"
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.bridge.hpc.plugins.module_utils._module import (
    backend_connection_options,
    client_of,
    exit_with,
    job_info_module_args,
    main_for,
    without_native,
)


def read_jobs(module, client):
    params = module.params
    result = {"changed": False}
    if params["job_id"] is not None or params["identity"] is not None:
        job = client.get(params["job_id"]) if params["job_id"] is not None else client.find(params["identity"])
        jobs = [job] if job else []
        if job and params["logs"]:
            result["log"] = client.logs(job["job_id"], params["logs_tail_lines"] or None)
    else:
        jobs = client.list(name=params["name"], phases=params["phases"])
    if not params["include_native"]:
        jobs = without_native(jobs)
    if params["job_id"] is not None or params["identity"] is not None:
        result["job"] = jobs[0] if jobs else None
    result["jobs"] = jobs
    exit_with(module, client, result)


def main():
    module = AnsibleModule(**job_info_module_args(
        backend_connection_options("ray"), logs=dict(type="bool", default=False), logs_tail_lines=dict(type="int", default=1000)))
    main_for(module, client_of("ray"), read_jobs)


if __name__ == "__main__":
    main()
