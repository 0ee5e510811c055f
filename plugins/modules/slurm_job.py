#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: slurm_job
short_description: Submit, wait for and cancel Slurm batch jobs through slurmrestd
version_added: 0.1.0
description:
  - Makes sure a Slurm batch job with a deterministic identity exists (O(state=present)) or is not
    queued or running any more (O(state=absent)), through the Slurm REST API (slurmrestd).
  - Speaks REST versions v0.0.36 to v0.0.45 (Slurm 22.05 to 26.05) and discovers the newest one
    the server offers.
  - The identity is looked up before submitting, so running the task again returns the same job
    instead of submitting a second one. A submit request is never retried.
  - Before submitting, the request is checked against the partition (time limit, nodes, CPUs,
    memory, GPUs, features), so a job Slurm would accept but never start fails early instead.
author:
  - Bridge developers (@bridge-hpc)
extends_documentation_fragment:
  - bridge.hpc.slurm
  - bridge.hpc.job_spec.lifecycle
  - bridge.hpc.job_spec.for_slurm
  - bridge.hpc.login
attributes:
  check_mode:
    support: full
    description: Validates against the cluster and returns the predicted job and the rendered request without submitting.
  diff_mode:
    support: full
    description: Shows the job before and after; never a token.
notes:
  - Where slurmrestd serves Slurm's accounting (slurmdbd, with C(AccountingStoreFlags=job_comment)), the
    identity is looked up there by job name, which costs the same however long the queue is, and a
    job is found for a year after it ended. Without accounting, slurmctld's list of every job it
    remembers is read, and slurmctld forgets a finished job C(MinJobAge) (300 seconds by default)
    after its end; after that, O(state=present) with the same identity submits again. See the
    collection's docs/slurm.md.
seealso:
  - module: bridge.hpc.slurm_job_info
  - module: bridge.hpc.slurm_cluster_info
  - module: bridge.hpc.job
"""

EXAMPLES = r"""
- name: Run a job and wait for it
  bridge.hpc.slurm_job:
    url: http://127.0.0.1:6820
    user: alice
    token: "{{ slurm_jwt }}"
    name: hello
    script: |
      #!/bin/bash
      echo "hello from $(hostname)"
    stdout: /tmp/hello-%j.out
    queue: debug
    resources:
      cpus_per_task: 1
      memory: 500M
      time_limit: "00:05:00"
    wait: true
  register: hello

- name: Submit from a script file on the controller, do not wait
  bridge.hpc.slurm_job:
    script_file: train.sh
    identity: "train-{{ run_id }}"
    resources:
      nodes: 2
      tasks_per_node: 4
      gpus: 4
      gpu_type: a100
      time_limit: 1-00:00:00
    exclusive: true

- name: Cancel it
  bridge.hpc.slurm_job:
    identity: "train-{{ run_id }}"
    state: absent

- name: Defaults for every Slurm task of a play
  module_defaults:
    group/bridge.hpc.slurm:
      url: https://slurm.example.org:6820
      user: alice
      token: "{{ slurm_jwt }}"
  block:
    - bridge.hpc.slurm_job:
        job_id: "{{ hello.job_id }}"
        state: absent
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
    - How the job's identity was looked up before submitting, C(accounting) (Slurm's accounting, by
      job name), C(live) (slurmctld's list of every job it remembers) or C(accounting+live) (what
      accounting did not have was looked for in slurmctld's list).
  returned: when state is present
  type: str
  sample: accounting
job_id:
  description: Slurm job id, as a string; null in check mode for a job that would be submitted.
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
  description: Exit code of a finished job (a wait status of 768 reads 3); null while it waits or runs, or when a signal ended it.
  returned: always
  type: int
  sample: 0
signal:
  description: Signal that ended a finished job, as RV(job.signal); null otherwise.
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
  description: RFC 3339 time Slurm accepted the job; also under RV(job.submit_time).
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
  description: The submit request body compiled for the server's REST version.
  returned: when state is present
  type: dict
  sample: {"script": "#!/bin/bash\necho hi\n", "job": {"name": "hello", "comment": "bridge:hello-5f2c0a9e1b7d3c44"}}
api_version:
  description: Slurm REST API version used.
  returned: always
  type: str
  sample: v0.0.38
job:
  description:
    - The job, normalized across Slurm versions, with the keys every Bridge backend returns (see
      RV(bridge.hpc.job#module:job)) and Slurm's own; null with O(state=absent) when there is no such job.
    - A job found in Slurm's accounting (a finished one slurmctld has forgotten) has the keys only
      accounting has too.
    - In check mode, a job that would be submitted is predicted, with C(job_id) null, phase
      C(queued) and neither times nor C(native).
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
      description: Identity from the C(bridge:) comment tag; null for a job Bridge did not submit.
      type: str
    phase:
      description: >-
        The job's phase. Slurm's C(SUSPENDED) is C(running); C(TIMEOUT), C(OUT_OF_MEMORY),
        C(NODE_FAIL), C(PREEMPTED) and the other failed states are C(failed).
      type: str
      choices: [queued, running, completed, failed, cancelled]
    terminal:
      description: Whether the job is finished (its phase is C(completed), C(failed) or C(cancelled)).
      type: bool
    native_state:
      description: Slurm's state with its flags, such as C(CANCELLED+COMPLETING).
      type: str
    reason:
      description: Slurm's state reason, such as C(PartitionTimeLimit).
      type: str
    exit_code:
      description: Exit code of a finished job; null while it waits or runs, or when a signal ended it.
      type: int
    signal:
      description: Signal that ended a finished job (15 for a cancel or a time limit); null otherwise.
      type: int
    failure_class:
      description: >-
        Why a finished job did not complete, from Slurm's state: C(TIMEOUT) and C(DEADLINE) are
        C(timeout), C(OUT_OF_MEMORY) is C(out_of_memory), C(NODE_FAIL) and C(BOOT_FAIL) are
        C(node_failure), C(CANCELLED) is C(cancelled), C(PREEMPTED) is C(preempted), C(FAILED) is
        C(non_zero_exit). C(rejected) for a pending job whose reason never clears by itself (such as
        C(PartitionTimeLimit) or C(InvalidAccount)). Null otherwise.
      type: str
      choices: [timeout, out_of_memory, node_failure, cancelled, non_zero_exit, rejected, preempted]
    submit_time:
      description: RFC 3339 time of submission.
      type: str
    start_time:
      description: RFC 3339 start time; null while the job waits.
      type: str
    end_time:
      description: RFC 3339 end time of a finished job.
      type: str
    partition:
      description: The job's partition.
      type: str
    nodes:
      description: The nodes allocated to the job, as a Slurm node list (C(node[1-4])); null while it waits.
      type: str
    user:
      description: The Slurm user the job runs as.
      type: str
    time_limit_minutes:
      description: The job's time limit in minutes; null when it has none.
      type: int
    working_directory:
      description: The job's working directory.
      type: str
    stdout:
      description: The path of the job's standard output, as Slurm reports it.
      type: str
    stderr:
      description: The path of the job's standard error, as Slurm reports it.
      type: str
    source:
      description: C(accounting) for a job read from Slurm's accounting; absent for one read from slurmctld.
      type: str
      returned: for a job read from accounting
    account:
      description: The account the job was charged to.
      type: str
      returned: for a job read from accounting
    elapsed_seconds:
      description: Wall time the job ran.
      type: int
      returned: for a job read from accounting
    cpu_seconds:
      description: User plus system CPU time of all its steps (needs C(JobAcctGatherType)).
      type: float
      returned: for a job read from accounting
    max_rss_bytes:
      description: Largest resident set size of any task of any step (needs C(JobAcctGatherType)).
      type: int
      returned: for a job read from accounting
    native:
      description: The job object as slurmrestd returned it, from slurmctld or from accounting.
      type: dict
  sample: {"job_id": "42", "phase": "completed", "exit_code": 0, "native_state": "COMPLETED", "partition": "debug"}
error:
  description: The typed error when the task failed on a Bridge error.
  returned: on failure
  type: dict
  sample: {"type": "Rejected", "reason": "Invalid partition name specified", "status": 500}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.bridge.hpc.plugins.module_utils._module import (
    backend_connection_options,
    client_of,
    job_module_args,
    main_for,
    run_job,
)
from ansible_collections.bridge.hpc.plugins.module_utils._login import LOGIN_OPTIONS


def main():
    module = AnsibleModule(**job_module_args(backend_connection_options("slurm"), **LOGIN_OPTIONS))
    main_for(module, client_of("slurm"), run_job)


if __name__ == "__main__":
    main()
