#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: k8s_job_info
short_description: Read Bridge's Kubernetes Jobs and their output, one by name or identity or a filtered list
version_added: 0.1.0
description:
  - Reads the Jobs M(bridge.hpc.k8s_job) made in O(namespace) (label C(app.kubernetes.io/managed-by=bridge))
    with their Pods, and returns them normalized, the same shape M(bridge.hpc.k8s_job) returns.
  - With O(job_id) or O(identity) one job is read, and with O(logs=true) its output from the Pod log API.
author:
  - Bridge developers (@bridge-hpc)
extends_documentation_fragment:
  - bridge.hpc.kubernetes
  - bridge.hpc.query
options:
  job_id:
    description:
      - Name of one Job. Fails if there is no such Job (any more).
    type: str
  identity:
    description:
      - Identity of one job, as given to or derived by M(bridge.hpc.k8s_job). Returns no job if none carries it.
    type: str
  name:
    description:
      - Only jobs with this name (the spec's name).
    type: str
  phases:
    description:
      - Only jobs in these normalized phases.
    type: list
    elements: str
    choices: [queued, running, completed, failed, cancelled]
  include_native:
    description:
      - Keep the Job and its newest Pod under C(native) in each job.
    type: bool
    default: false
  logs:
    description:
      - With O(job_id) or O(identity), also return the output of the job's newest Pod as RV(log).
    type: bool
    default: false
  logs_tail_lines:
    description:
      - Only the last lines of the output; 0 for all of it.
    type: int
    default: 1000
attributes:
  check_mode:
    support: full
    description: Reads only.
notes:
  - Needs C(batch/jobs) list and get, C(pods) list and, for O(logs), C(pods/log) get in O(namespace).
seealso:
  - module: bridge.hpc.k8s_job
"""

EXAMPLES = r"""
- name: One job with its output
  bridge.hpc.k8s_job_info:
    identity: "step-{{ run_id }}"
    logs: true
  register: step

- name: Everything still waiting or running in the namespace
  bridge.hpc.k8s_job_info:
    namespace: research
    phases: [queued, running]
  register: active
"""

RETURN = r"""
jobs:
  description: >-
    The jobs found, normalized, the same shape M(bridge.hpc.k8s_job) returns; C(native) only with
    O(include_native=true).
  returned: when query is not set
  type: list
  elements: dict
  sample: [{"job_id": "train-1a2b3c4d5e6f", "name": "train", "phase": "running", "nodes": "node-1"}]
  contains:
    job_id:
      description: The Job's name.
      type: str
    name:
      description: The spec's name (annotation C(bridge.dev/name)).
      type: str
    identity:
      description: >-
        Identity from the annotation C(bridge.dev/identity), verified against the label
        C(bridge.dev/identity-hash); null for a Job Bridge did not create.
      type: str
    phase:
      description: >-
        The job's phase: C(queued) while the Job is suspended or its Pod waits, C(running) once its
        container runs, C(completed) or C(failed) by the Job's C(Complete) or C(Failed) condition,
        C(cancelled) once the Job is being deleted or is gone.
      type: str
      choices: [queued, running, completed, failed, cancelled]
    terminal:
      description: Whether the job is finished (its phase is C(completed), C(failed) or C(cancelled)).
      type: bool
    native_state:
      description: C(Pending), C(Suspended) (waiting for Kueue), C(Running), C(Complete), C(Failed) or C(Deleting).
      type: str
    reason:
      description: Why it waits (C(Unschedulable) and the scheduler's message, an image pull error) or failed (the Job condition's reason and message).
      type: str
    exit_code:
      description: Exit code of the container of a finished job (0 for a completed one); null while it waits or runs.
      type: int
    signal:
      description: 9 for an C(OOMKilled) container; null otherwise.
      type: int
    failure_class:
      description: >-
        C(timeout) (C(DeadlineExceeded)), C(out_of_memory) (C(OOMKilled)), C(non_zero_exit)
        (C(BackoffLimitExceeded) with the exit code), C(node_failure) (the Pod was evicted or its node
        lost), C(cancelled) (deleted) or C(rejected) (the Pod can never start: no node matches its
        selector or tolerates the taints, an invalid image name); null otherwise.
      type: str
      choices: [timeout, out_of_memory, node_failure, cancelled, non_zero_exit, rejected, preempted]
    submit_time:
      description: RFC 3339 creation time.
      type: str
    start_time:
      description: RFC 3339 start time of the container; null while the job waits.
      type: str
    end_time:
      description: RFC 3339 end time of a finished job.
      type: str
    namespace:
      description: The Job's namespace.
      type: str
    partition:
      description: The Kueue LocalQueue the Job was queued to (its label C(kueue.x-k8s.io/queue-name)), if any.
      type: str
    nodes:
      description: The node the Pod runs or ran on.
      type: str
    pod:
      description: The name of the Job's newest Pod.
      type: str
    native:
      description: The Job (C(job)) and its newest Pod (C(pod)) as the API returned them, without C(managedFields).
      type: dict
      returned: when include_native is true
job:
  description: The one job asked for with O(job_id) or O(identity), with the keys of RV(jobs); null when the identity is not found.
  returned: when job_id or identity is given and query is not set
  type: dict
  sample: {"job_id": "train-1a2b3c4d5e6f", "phase": "completed", "exit_code": 0}
log:
  description: The output (stdout and stderr) of the job's newest Pod; empty while its container has not started.
  returned: when logs is true and the job exists and query is not set
  type: str
  sample: "hello from train-1a2b3c4d5e6f-x7k2p\n"
query_result:
  description: >-
    What O(query) selects from the result this module would return without it
    (the sample is what V(job.exit_code) selects); null when it selects nothing.
  returned: when query is set
  type: raw
  sample: 0
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
    result = read_job_or_list(params, client, lambda: client.list(name=params["name"], phases=params["phases"]))
    if result.get("job") and params["logs"]:
        result["log"] = client.logs(result["job"]["job_id"], params["logs_tail_lines"] or None)
    exit_with(module, client, result)


def main():
    module = AnsibleModule(**job_info_module_args(
        backend_connection_options("kubernetes"), logs=dict(type="bool", default=False),
        logs_tail_lines=dict(type="int", default=1000)))
    main_for(module, client_of("kubernetes"), read_jobs)


if __name__ == "__main__":
    main()
