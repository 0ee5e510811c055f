#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: job
short_description: Run a job on any Bridge backend from one backend-neutral spec
version_added: 0.1.0
description:
  - The same job spec (script, environment, resources, queue, and so on) compiled to the backend
    named in O(backend) and submitted there, with the lifecycle of the backend's own module
    (M(bridge.hpc.slurm_job) for Slurm). A deterministic identity is looked up before submitting;
    check mode, diff, waiting and cancelling work as there.
  - Backends available now are V(slurm), V(ray), V(lsf), V(quantum) and V(kubernetes) (a Job per script; see
    M(bridge.hpc.k8s_job)). For V(quantum) (IBM Quantum) the script is an
    OpenQASM 3 circuit and O(queue) the device; see M(bridge.hpc.quantum_job).
author:
  - Bridge developers (@bridge-hpc)
extends_documentation_fragment:
  - bridge.hpc.connection
  - bridge.hpc.login
  - bridge.hpc.job_spec.lifecycle
  - bridge.hpc.job_spec
options:
  backend:
    description:
      - The resource manager that runs the job.
    type: str
    required: true
    choices: [kubernetes, lsf, quantum, ray, slurm]
attributes:
  check_mode:
    support: full
    description: Validates against the backend and returns the predicted job and the rendered request.
  diff_mode:
    support: full
    description: Shows the job before and after.
seealso:
  - module: bridge.hpc.slurm_job
  - module: bridge.hpc.ray_job
"""

EXAMPLES = r"""
- name: One spec, run on Slurm
  bridge.hpc.job:
    backend: slurm
    url: http://127.0.0.1:6820
    user: alice
    token: "{{ slurm_jwt }}"
    script: |
      #!/bin/bash
      python3 -c 'print(6 * 7)'
    resources:
      cpus_per_task: 2
      memory: 1G
      time_limit: 10
    wait: true
  register: result

- name: Show the native request it compiled to
  ansible.builtin.debug:
    var: result.rendered
"""

RETURN = r"""
output:
  description:
    - The end of a finished job's output, when the spec asks for it with O(output) (read once, when the job is
      found finished; one request, or one C(ssh) command on the login node for Slurm).
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
  sample: "Failed to read job output '/home/alice/slurm-42.out' on the login node at ssh://alice@login1:22: tail: cannot open ..."
lookup:
  description:
    - How the backend looked the identity up, where it has more than one way (Slurm, C(accounting),
      C(live) or C(accounting+live), see M(bridge.hpc.slurm_job)); absent for the others.
  returned: when state is present, for Slurm
  type: str
  sample: accounting
job_id:
  description: The backend's job id, a string for every backend; null in check mode for a job that would be submitted.
  returned: always
  type: str
  sample: "42"
phase:
  description: The job's phase, as RV(job.phase).
  returned: always
  type: str
  choices: [queued, running, completed, failed, cancelled]
  sample: completed
exit_code:
  description: Exit code of a finished job; null while it runs or when a signal ended it.
  returned: always
  type: int
  sample: 0
signal:
  description: Signal that ended the job, where the backend reports one, as RV(job.signal); null otherwise.
  returned: always
  type: int
  sample: 15
failure_class:
  description: Why the job did not complete or will not, as RV(job.failure_class); null otherwise.
  returned: always
  type: str
  choices: [timeout, out_of_memory, node_failure, cancelled, non_zero_exit, rejected, preempted]
  sample: non_zero_exit
submit_time:
  description: RFC 3339 time the backend accepted the job; also under RV(job.submit_time).
  returned: always
  type: str
  sample: "2026-12-01T10:00:00Z"
start_time:
  description: RFC 3339 time the job started; null while it waits. Also under RV(job.start_time).
  returned: always
  type: str
  sample: "2026-12-01T10:00:02Z"
end_time:
  description: RFC 3339 time a finished job ended; null before. Also under RV(job.end_time).
  returned: always
  type: str
  sample: "2026-12-01T10:05:00Z"
identity:
  description: The job's identity, given or derived from the spec.
  returned: when state is present
  type: str
  sample: hello-5f2c0a9e1b7d3c44
rendered:
  description: The native submit request compiled from the spec for the backend and its version.
  returned: when state is present
  type: dict
  sample: {"script": "#!/bin/bash\necho hi\n", "job": {"name": "hello", "comment": "bridge:hello-5f2c0a9e1b7d3c44"}}
api_version:
  description: The API version of the backend that was used (Slurm's REST version, the Ray Jobs API's).
  returned: always
  type: str
  sample: v0.0.38
job:
  description:
    - The job, normalized across backends and their versions; null with O(state=absent) when there is no such job.
    - These are the keys every backend returns. Each backend adds its own, as its module documents
      them (M(bridge.hpc.slurm_job), M(bridge.hpc.lsf_job), M(bridge.hpc.k8s_job), M(bridge.hpc.ray_job),
      M(bridge.hpc.quantum_job)).
    - In check mode, a job that would be submitted is predicted, with C(job_id) null, phase
      C(queued) and neither times nor C(native).
    - With O(retry), the latest attempt's job, plus C(attempts), a record per attempt found (C(attempt),
      C(identity), C(job_id), C(phase), C(failure_class), C(exit_code) and the three times; of an array also the
      C(indexes) it ran, their C(counts), its C(failed_indexes) and C(failures)), and while the next
      attempt waits for its backoff C(next_attempt) (C(attempt), C(identity), C(due)); docs/spec.md, Retries.
  returned: always
  type: dict
  contains:
    job_id:
      description: Job id, as a string.
      type: str
    name:
      description: Job name.
      type: str
    identity:
      description: >-
        The Bridge identity the job carries (Slurm's C(bridge:) comment tag, Ray's submission id, ...);
        null for a job Bridge did not submit.
      type: str
    phase:
      description: The job's phase, the same words for every backend.
      type: str
      choices: [queued, running, completed, failed, cancelled]
    terminal:
      description: Whether the job is finished (its phase is C(completed), C(failed) or C(cancelled)).
      type: bool
    native_state:
      description: The backend's own state, such as Slurm's C(CANCELLED+COMPLETING) or Ray's C(STOPPED).
      type: str
    reason:
      description: Why the job is in its state, in the backend's words (Slurm's C(PartitionTimeLimit), Ray's message).
      type: str
    exit_code:
      description: Exit code of a finished job, where the backend has one; null while it waits or runs.
      type: int
    signal:
      description: >-
        Signal that ended the job, where the backend reports one (Slurm's 15 for a cancel or a time
        limit, 9 for a Kubernetes container killed for its memory limit); null otherwise.
      type: int
    failure_class:
      description: >-
        Why a finished job did not complete, in the same words for every backend, C(rejected) being a
        job the manager accepted that can never start; null otherwise. Which of them a backend reports,
        and from what, its module says.
      type: str
      choices: [timeout, out_of_memory, node_failure, cancelled, non_zero_exit, rejected, preempted]
    submit_time:
      description: RFC 3339 time of submission.
      type: str
    start_time:
      description: RFC 3339 start time.
      type: str
    end_time:
      description: RFC 3339 end time of a finished job.
      type: str
    native:
      description: The job object as the backend's API returned it.
      type: dict
  sample: {"job_id": "42", "phase": "completed", "exit_code": 0, "native_state": "COMPLETED"}
error:
  description: The typed error when the task failed on a Bridge error.
  returned: on failure
  type: dict
  sample: {"type": "Rejected", "reason": "Invalid partition name specified", "status": 500}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.bridge.hpc.plugins.module_utils._module import (
    any_backend_options,
    chosen_backend,
    job_module_args,
    main_for,
    run_job,
)
from ansible_collections.bridge.hpc.plugins.module_utils._login import LOGIN_OPTIONS


def main():
    module = AnsibleModule(**job_module_args(any_backend_options(), **LOGIN_OPTIONS))
    main_for(module, chosen_backend, run_job)


if __name__ == "__main__":
    main()
