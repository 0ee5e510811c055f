#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: ray_job
short_description: Submit, wait for and stop Ray jobs through the Ray Jobs REST API
version_added: 0.1.0
description:
  - Makes sure a Ray job with a deterministic C(submission_id) exists (O(state=present)) or is not
    pending or running any more (O(state=absent), which stops it), through the Ray dashboard's Jobs API.
  - The job spec is the one every Bridge backend takes. The script is shipped to the cluster as a
    content-addressed C(working_dir) package and run with the interpreter of its C(#!) line.
  - O(resources.cpus_per_task), O(resources.gpus) and O(resources.memory) reserve the driver's CPUs,
    GPUs and memory (C(entrypoint_num_cpus), C(entrypoint_num_gpus), C(entrypoint_memory)).
    O(resources.time_limit) wraps the entrypoint in C(timeout), so an overrun fails as C(timeout).
  - Each job spec option below says what it becomes for Ray, or that Ray refuses it and why; a
    refused option fails the task naming it, and nothing is submitted.
  - Custom resources, label selectors, C(pip), C(uv), C(conda), C(py_modules) and other runtime
    environment fields go under O(backend_options) key C(ray), as C(entrypoint_resources),
    C(entrypoint_label_selector), C(runtime_env) and C(metadata). Unknown keys are refused.
  - Before submitting, the request is checked against the alive nodes, so a driver no node can
    host fails at once instead of waiting Ray's 15 minutes.
author:
  - Bridge developers (@bridge-hpc)
extends_documentation_fragment:
  - bridge.hpc.ray
  - bridge.hpc.job_spec.lifecycle
  - bridge.hpc.job_spec.for_ray
attributes:
  check_mode:
    support: full
    description: Validates against the cluster and returns the predicted job and the rendered request; nothing is uploaded or submitted.
  diff_mode:
    support: full
    description: Shows the job before and after.
notes:
  - Ray keeps a submission id for the cluster's lifetime, so the identity keeps finding the job
    (O(state=present) never submits it again) until the job is deleted.
seealso:
  - module: bridge.hpc.ray_job_info
  - module: bridge.hpc.ray_cluster_info
  - module: bridge.hpc.job
"""

EXAMPLES = r"""
- name: Train on Ray and wait
  bridge.hpc.ray_job:
    url: http://ray-head:8265
    identity: "train-{{ run_id }}"
    script: |
      #!/usr/bin/env python3
      import ray
      ray.init()
      print(ray.cluster_resources())
    resources:
      cpus_per_task: 1
      gpus: 1
      memory: 4G
      time_limit: "02:00:00"
    backend_options:
      ray:
        runtime_env:
          pip: [torch]
        entrypoint_resources:
          accelerator_type:A100: 1
    wait: true
    wait_timeout: 7200
  register: train

- name: Stop it
  bridge.hpc.ray_job:
    identity: "train-{{ run_id }}"
    state: absent
"""

RETURN = r"""
output:
  description:
    - The end of a finished job's output, when the spec asks for it with O(output) (read once, when the job is
      found finished, with one request).
    - Decoded as UTF-8 (U+FFFD for bytes that are not), without terminal escapes and control characters but
      newline and tab, secrets masked as C(********) (the connection's token or password, and the values of
      the spec's environment variables whose names hold TOKEN, SECRET, PASSWORD, PASSWD, KEY or CREDENTIAL),
      then its last O(output.tail_lines) lines, cut to 4096 bytes at a line (or character) boundary.
    - With O(output.follow=true), a running job's output too, as far as it is written (read at each run that finds the
      job running), with RV(output.running=true).
  returned: when the spec sets output and the job is finished (or running, with output.follow) and its output could be read
  type: dict
  contains:
    text:
      description: The lines, each ending with a newline.
      type: str
    lines:
      description: How many lines RV(output.text) holds.
      type: int
    truncated:
      description: Whether the job wrote more than RV(output.text) shows.
      type: bool
    running:
      description: True when the job was running as its output was read (O(output.follow=true)); the job may write more.
      type: bool
      returned: when the job is running
  sample: {"text": "step 9 of 10\nloss 0.0123\n", "lines": 2, "truncated": true}
output_error:
  description: Why the output of a finished job could not be read, when the spec asks for it; the job's result stands.
  returned: when the spec sets output and the job is finished and its output could not be read
  type: str
  sample: "Failed to read logs of job '42' on ...: ..."
job_id:
  description: >-
    The job's submission id (Ray's own job id is RV(job.ray_job_id)); null in check mode for a job
    that would be submitted.
  returned: always
  type: str
  sample: train-42
phase:
  description: The job's phase, as RV(job.phase).
  returned: always
  type: str
  choices: [queued, running, completed, failed, cancelled]
  sample: completed
exit_code:
  description: The driver's exit code once the job is finished; null before.
  returned: always
  type: int
  sample: 0
signal:
  description: Always null for Ray, which reports no signal of a driver; kept so every job module returns the same keys.
  returned: always
  type: int
  sample: null
failure_class:
  description: Why the job did not complete or will not, as RV(job.failure_class); null otherwise.
  returned: always
  type: str
  choices: [timeout, out_of_memory, node_failure, cancelled, non_zero_exit, rejected, preempted]
  sample: non_zero_exit
submit_time:
  description: RFC 3339 time Ray accepted the job; also under RV(job.submit_time).
  returned: always
  type: str
  sample: "2026-12-01T10:00:00Z"
start_time:
  description: The same as RV(submit_time), which Ray counts as the job's start; also under RV(job.start_time).
  returned: always
  type: str
  sample: "2026-12-01T10:00:00Z"
end_time:
  description: RFC 3339 time a finished job ended; null before. Also under RV(job.end_time).
  returned: always
  type: str
  sample: "2026-12-01T10:05:00Z"
identity:
  description: The job's identity, given or derived from the spec; it is the submission id.
  returned: when state is present
  type: str
  sample: train-42
rendered:
  description: The JobSubmitRequest compiled from the spec.
  returned: when state is present
  type: dict
  sample: {"entrypoint": "/usr/bin/env python3 bridge_job", "submission_id": "train-42", "runtime_env": {"working_dir": "gcs://_ray_pkg_0f1e.zip"}}
api_version:
  description: Jobs API version the dashboard reports.
  returned: always
  type: str
  sample: "5"
job:
  description:
    - The job, with the keys every Bridge backend returns (see RV(bridge.hpc.job#module:job)) and
      Ray's own; null with O(state=absent) when there is no such job.
    - In check mode, a job that would be submitted is predicted, with C(job_id) null, phase
      C(queued) and neither times nor C(native).
  returned: always
  type: dict
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
  sample: {"job_id": "train-42", "phase": "failed", "exit_code": 3, "failure_class": "non_zero_exit", "native_state": "FAILED"}
error:
  description: The typed error when the task failed on a Bridge error.
  returned: on failure
  type: dict
  sample: {"type": "SpecError", "field": "queue", "reason": "queue: not supported by the Ray backend"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.bridge.hpc.plugins.module_utils._module import (
    backend_connection_options,
    client_of,
    job_module_args,
    main_for,
    run_job,
)


def main():
    module = AnsibleModule(**job_module_args(backend_connection_options("ray")))
    main_for(module, client_of("ray"), run_job)


if __name__ == "__main__":
    main()
