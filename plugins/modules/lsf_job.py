#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: lsf_job
short_description: Submit, wait for and kill IBM Spectrum LSF jobs through LSF Application Center
version_added: 0.1.0
description:
  - Makes sure an LSF job with a deterministic identity exists (O(state=present)) or is not pending
    or running any more (O(state=absent), which kills it), through the RESTful web services of
    IBM Spectrum LSF Application Center (PAC).
  - The job is submitted through Application Center's C(generic) application template; the script
    travels byte-exact as an uploaded file and runs from the job's submission directory. The
    spec compiles to C(bsub) options (C(-J), C(-Jd), C(-q), C(-n), C(-R), C(-M), C(-gpu), C(-W),
    C(-P), C(-x), C(-o), C(-e), C(-cwd), C(-env)); the equivalent command line is returned as
    C(rendered.bsub).
  - The identity travels as the job description (C(-Jd bridge:<identity>)) and is looked up before
    submitting, so running the task again returns the same job instead of submitting a second one.
    A submit request is never retried.
  - Before submitting, the request is checked against the queues (unknown or closed queue, run
    limit, slots, memory limit) and their hosts (slots on one host, slots in all, memory per host),
    so a job LSF would refuse or keep pending forever fails early.
  - Each job spec option below says what it becomes for LSF, or that LSF refuses it and why. More
    C(bsub) options (C(-G), C(-sla), ...) go under O(backend_options) key C(lsf), an option
    name with C(true) for a flag or its value (C(-G) with C(physics)); an option Bridge compiles
    itself, or one that would make the web service wait (C(-I), C(-K)), is refused.
author:
  - Bridge developers (@bridge-hpc)
extends_documentation_fragment:
  - bridge.hpc.lsf
  - bridge.hpc.job_spec.lifecycle
  - bridge.hpc.job_spec.for_lsf
attributes:
  check_mode:
    support: full
    description: Validates against the queues and hosts and returns the predicted job and the rendered request without submitting.
  diff_mode:
    support: full
    description: Shows the job before and after; never the password or the session token.
notes:
  - LSF forgets finished jobs after C(CLEAN_PERIOD) (3600 seconds by default). After that,
    O(state=present) with the same identity submits again.
  - Tested against a protocol simulator of Application Center only (C(tests/simulators/lsf_pac.py));
    not yet against a real Application Center.
seealso:
  - module: bridge.hpc.lsf_job_info
  - module: bridge.hpc.lsf_cluster_info
  - module: bridge.hpc.job
"""

EXAMPLES = r"""
- name: Run a job and wait for it
  bridge.hpc.lsf_job:
    url: http://pac.example.org:8080/platform
    user: alice
    password: "{{ lsf_password }}"
    name: hello
    script: |
      #!/bin/bash
      echo "hello from $(hostname)"
    stdout: /home/alice/hello-%J.out
    queue: normal
    resources:
      tasks: 4
      memory: 2G
      time_limit: "00:30:00"
    wait: true
  register: hello

- name: Submit from a script file on the controller, exclusive hosts, do not wait
  bridge.hpc.lsf_job:
    script_file: train.sh
    identity: "train-{{ run_id }}"
    resources:
      nodes: 2
      tasks_per_node: 4
      gpus: 2
      gpu_type: TeslaV100
      time_limit: 1-00:00:00
    exclusive: true

- name: Kill it, and wait until LSF reports it ended (without wait, the result is what the kill leads to)
  bridge.hpc.lsf_job:
    identity: "train-{{ run_id }}"
    state: absent
    wait: true
    wait_timeout: 120

- name: Defaults for every LSF task of a play (or set LSF_PAC_URL, LSF_USER, LSF_PASSWORD)
  module_defaults:
    group/bridge.hpc.lsf:
      url: https://pac.example.org:8443/platform
      user: alice
      password: "{{ lsf_password }}"
  block:
    - bridge.hpc.lsf_job:
        job_id: "{{ hello.job_id }}"
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
  description: LSF job id, as a string; null in check mode for a job that would be submitted.
  returned: always
  type: str
  sample: "1234"
phase:
  description: The job's phase, as RV(job.phase).
  returned: always
  type: str
  choices: [queued, running, completed, failed, cancelled]
  sample: completed
exit_code:
  description: Exit code of a finished job; null while it is pending or running.
  returned: always
  type: int
  sample: 0
signal:
  description: Always null for LSF, which reports no signal of a job through Application Center; kept so every job module returns the same keys.
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
  description: RFC 3339 time LSF accepted the job; also under RV(job.submit_time).
  returned: always
  type: str
  sample: "2026-12-01T10:00:00Z"
start_time:
  description: RFC 3339 time the job started; null while it pends. Also under RV(job.start_time).
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
  description: >-
    The submit request compiled from the spec: the application template, its parameters
    (C(COMMANDTORUN), C(JOB_NAME), C(OUTPUT_FILE), C(ERROR_FILE), C(EXTRA_PARAMS), the script
    file), the files uploaded and the equivalent C(bsub) command line.
  returned: when state is present
  type: dict
  sample: {"method": "POST", "path": "/ws/jobs/submit", "app_name": "generic",
           "bsub": "bsub -J hello -Jd bridge:hello-5f2c0a9e1b7d3c44 -q normal -W 30 -env PATH=/usr/local/bin:/usr/bin:/bin /bin/sh -c ..."}
api_version:
  description: Always null; Application Center's web services have no version Bridge picks.
  returned: always
  type: str
  sample: null
job:
  description:
    - The job, with the keys every Bridge backend returns (see RV(bridge.hpc.job#module:job)) and
      LSF's own; null with O(state=absent) when there is no such job.
    - In check mode, a job that would be submitted is predicted, with C(job_id) null, phase
      C(queued) and neither times nor C(native).
  returned: always
  type: dict
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
  sample: {"job_id": "1234", "phase": "failed", "exit_code": 3, "native_state": "EXIT", "failure_class": "non_zero_exit"}
error:
  description: The typed error when the task failed on a Bridge error.
  returned: on failure
  type: dict
  sample: {"type": "SpecError", "field": "queue", "reason": "'nosuch' is not a queue of this cluster; existing queues: normal, short"}
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
    module = AnsibleModule(**job_module_args(backend_connection_options("lsf")))
    main_for(module, client_of("lsf"), run_job)


if __name__ == "__main__":
    main()
