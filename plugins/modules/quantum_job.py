#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: quantum_job
short_description: Run, wait for and cancel IBM Quantum primitive jobs over the Qiskit Runtime REST API
version_added: 0.1.0
description:
  - Makes sure an IBM Quantum job with a deterministic identity exists (O(state=present)) or is not
    queued or running any more (O(state=absent), which cancels it), through the Qiskit Runtime REST
    API of IBM Quantum Platform. Needs httpx only; no qiskit, no numpy.
  - A job is one run of a primitive, the sampler (counts of measured bitstrings) or the estimator
    (expectation values of observables), over one or more PUBs on the device named in O(queue).
    Each PUB is an OpenQASM 3 circuit, by default O(script), with its parameter values and the
    sampler's shots or the estimator's observables and precision; they go under O(backend_options)
    key C(quantum) (C(primitive), C(pubs), C(shots), C(precision), C(options), C(resilience_level),
    C(session), C(mode), C(max_ttl), C(log_level), C(private)). See the C(docs/quantum.md) guide of
    the collection.
  - When unset, the sampler's shots are the service's default (the primitive option C(default_shots), else
    4096), and so is the estimator's precision (C(default_precision), else 0.015625, that is 1/sqrt(4096)).
  - Circuits must be ISA circuits of the device (its basis gates, physical qubits C($0), C($1),
    ..., two-qubit gates only on the pairs of its coupling map, which M(bridge.hpc.quantum_backend_info)
    returns as C(coupling_map)), as C(qiskit.qasm3.dumps) writes them after transpiling; Bridge does
    not transpile.
  - The identity travels as the job tag C(bridge:<identity>) (with the tag C(bridge), and
    C(bridge-name:<name>) when a name is given) and is looked up before submitting, so running the
    task again returns the same job instead of submitting a second one. A submit is never retried;
    when its answer is lost the identity is looked up instead.
  - Before submitting, the device must exist (the error names those there are), be operational and
    be as wide as every circuit, and the instance must not have reached its usage limit.
  - Each job spec option below says what it becomes for IBM Quantum, or that IBM Quantum refuses
    it and why (a primitive run has no environment, files or classical resources). A job that
    exceeds its maximum execution time (O(resources.time_limit), in minutes, sent as seconds in
    C(cost)) ends C(failed) with RV(failure_class=timeout).
author:
  - Bridge developers (@bridge-hpc)
extends_documentation_fragment:
  - bridge.hpc.quantum
  - bridge.hpc.job_spec.lifecycle
  - bridge.hpc.job_spec.for_quantum
attributes:
  check_mode:
    support: full
    description: >-
      Validates against the device and the instance (device, status, width, usage) and returns the predicted job and
      the rendered request without submitting.
  diff_mode:
    support: full
    description: Shows the job before and after; never the API key or the bearer token.
notes:
  - Results and logs are read with M(bridge.hpc.quantum_job_info).
  - With C(mode) under O(backend_options) key C(quantum), a session (C(session)) or batch (C(batch))
    is opened for the job and closed to new jobs right after it is submitted; C(session) joins the job to an
    existing one instead.
  - Tested against a simulator of the Qiskit Runtime API (C(tests/simulators/quantum_runtime.py)) and answers written
    from IBM's documentation and the qiskit-ibm-runtime 0.51 client source; not yet against IBM Quantum itself.
seealso:
  - module: bridge.hpc.quantum_job_info
  - module: bridge.hpc.quantum_backend_info
  - module: bridge.hpc.job
"""

EXAMPLES = r"""
- name: Sample a Bell pair on a device and wait for it (counts of 00 and 11 only, up to the device's noise)
  bridge.hpc.quantum_job:
    url: https://quantum.cloud.ibm.com/api/v1
    api_key: "{{ ibm_quantum_api_key }}"
    service_crn: "{{ ibm_quantum_crn }}"
    name: bell
    queue: ibm_kingston
    script: |
      OPENQASM 3.0;
      include "stdgates.inc";
      bit[2] meas;
      // H on the first qubit, then CX from it to the second, written as H CZ H in the basis gates
      rz(pi/2) $0;
      sx $0;
      rz(pi/2) $0;
      rz(pi/2) $1;
      sx $1;
      rz(pi/2) $1;
      cz $0, $1;
      rz(pi/2) $1;
      sx $1;
      rz(pi/2) $1;
      meas[0] = measure $0;
      meas[1] = measure $1;
    backend_options:
      quantum:
        shots: 1000
    resources:
      time_limit: 5
    wait: true
    wait_timeout: 3600
    poll_interval: 30
  register: bell

- name: Expectation values of two observables, from a transpiled circuit file (or set QUANTUM_URL, QUANTUM_API_KEY, QUANTUM_SERVICE_CRN)
  bridge.hpc.quantum_job:
    script_file: ansatz.qasm
    identity: "vqe-step-{{ step }}"
    queue: ibm_kingston
    backend_options:
      quantum:
        primitive: estimator
        precision: 0.01
        resilience_level: 1
        pubs:
          - observables: {"ZZ": 1.0, "XX": 0.5}
            parameter_values: {"theta": [0.1, 0.2, 0.3]}

- name: Run in a batch
  bridge.hpc.quantum_job:
    script_file: circuit.qasm
    queue: ibm_kingston
    backend_options:
      quantum:
        mode: batch

- name: Cancel it
  bridge.hpc.quantum_job:
    identity: "vqe-step-{{ step }}"
    state: absent
"""

RETURN = r"""
output:
  # BEGIN generated by tools/generate_spec.py from tools/returns.yml (make spec): output
  description:
    - The end of a finished job's output, when the spec asks for it with O(output) (read once, when the job is
      found finished, with one request; O(output.tail_lines) says from where).
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
  # END generated
output_error:
  # BEGIN generated by tools/generate_spec.py from tools/returns.yml (make spec): output_error
  description: Why the output of a finished job could not be read, when the spec asks for it; the job's result stands.
  returned: when the spec sets output and the job is finished and its output could not be read
  type: str
  # END generated
  sample: "Failed to read logs of job '42' on ...: ..."
job_id:
  description: IBM Quantum job id; null in check mode for a job that would be submitted.
  returned: always
  type: str
  sample: d6147q3traac73bef6f0
phase:
  # BEGIN generated by tools/generate_spec.py from tools/returns.yml (make spec): phase
  description: The job's phase, as RV(job.phase).
  returned: always
  type: str
  choices: [queued, running, completed, failed, cancelled]
  sample: completed
  # END generated
exit_code:
  description: Always null; a primitive run has no exit code. Kept so every job module returns the same keys.
  returned: always
  type: int
  sample: null
signal:
  description: Always null for IBM Quantum.
  returned: always
  type: int
  sample: null
failure_class:
  description: Why the job did not complete, as RV(job.failure_class); null otherwise.
  returned: always
  type: str
  choices: [timeout, out_of_memory, node_failure, cancelled, non_zero_exit, rejected, preempted]
  sample: timeout
submit_time:
  description: RFC 3339 time the job was created; also under RV(job.submit_time).
  returned: always
  type: str
  sample: "2026-12-01T10:00:00Z"
start_time:
  description: Always null; the job's running time is in its metrics (M(bridge.hpc.quantum_job_info) O(bridge.hpc.quantum_job_info#module:metrics=true)).
  returned: always
  type: str
  sample: null
end_time:
  description: As RV(job.end_time), the end of a finished job where the service says it; null before.
  returned: always
  type: str
  sample: null
identity:
  # BEGIN generated by tools/generate_spec.py from tools/returns.yml (make spec): identity
  description: The job's identity, given or derived from the spec.
  returned: when state is present
  type: str
  # END generated
  sample: bell-5f2c0a9e1b7d3c44
rendered:
  description: >-
    The exact body of C(POST /jobs): C(program_id), C(backend), C(params) (C(pubs), C(version),
    C(shots), C(precision), C(options), ...), C(tags), C(cost), C(session_id), C(log_level),
    C(private). With C(mode), the C(session_id) of the session opened first is added when submitting.
  returned: when state is present
  type: dict
  sample: {"program_id": "sampler", "backend": "ibm_kingston",
           "params": {"pubs": [["OPENQASM 3.0; ..."]], "version": 2, "shots": 1000},
           "tags": ["bridge", "bridge:bell-5f2c0a9e1b7d3c44", "bridge-name:bell"], "cost": 300}
api_version:
  description: The C(IBM-API-Version) date the client sent.
  returned: always
  type: str
  sample: "2026-04-15"
job:
  description:
    - The job, with the keys every Bridge backend returns (see RV(bridge.hpc.job#module:job)) and
      those of IBM Quantum; null with O(state=absent) when there is no such job.
    - In check mode, a job that would be submitted is predicted, with C(job_id) null, phase
      C(queued) and neither times nor C(native).
  returned: always
  type: dict
  contains:
    # BEGIN generated by tools/generate_spec.py from tools/returns.yml (make spec): job_keys quantum
    job_id:
      description: Job id.
      type: str
    name:
      description: Name, from the C(bridge-name:) tag, else the identity.
      type: str
    identity:
      description: Identity, from the C(bridge:) tag; null for a job Bridge did not submit.
      type: str
    phase:
      description: >-
        The job's phase, from the service's state (C(Queued), C(Running), C(Completed), C(Failed),
        C(Cancelled)). C(Cancelled) with reason code 1305 (it ran longer than its maximum execution
        time) is C(failed) with failure class C(timeout); a state Bridge does not know is C(queued).
      type: str
      choices: [queued, running, completed, failed, cancelled]
    terminal:
      description: Whether the job is finished (its phase is C(completed), C(failed) or C(cancelled)).
      type: bool
    native_state:
      description: The service's state, C(Queued), C(Running), C(Completed), C(Failed) or C(Cancelled).
      type: str
    reason:
      description: The service's reason for a failed or cancelled job.
      type: str
    reason_code:
      description: The service's reason code (1305 for a job that ran too long).
      type: int
    reason_solution:
      description: The service's suggested solution, where it gives one.
      type: str
    exit_code:
      description: Always null; a primitive run has no exit code.
      type: int
    signal:
      description: Always null.
      type: int
    failure_class:
      description: >-
        IBM Quantum reports three of the classes: C(timeout) (reason code 1305, or a reason that says
        so), C(cancelled), and C(non_zero_exit) for any other failure, whose reason the service gives;
        null otherwise.
      type: str
      choices: [timeout, out_of_memory, node_failure, cancelled, non_zero_exit, rejected, preempted]
    submit_time:
      description: RFC 3339 creation time.
      type: str
    start_time:
      description: Always null; the job's running time is in its metrics.
      type: str
    end_time:
      description: >-
        RFC 3339 end time of a finished job, the service's C(end_time) where its answer has one (the
        Qiskit Runtime simulator's does); null while the job is queued or running.
      type: str
    device:
      description: The device the job runs on.
      type: str
    primitive:
      description: C(sampler) or C(estimator).
      type: str
    session_id:
      description: The session or batch the job belongs to.
      type: str
    private:
      description: Whether the job is private; the service serves its results once.
      type: bool
    tags:
      description: The job's tags.
      type: list
      elements: str
    quantum_seconds:
      description: Quantum time used, as the job reports it.
      type: float
    native:
      description: The job object as the service returned it.
      type: dict
    # END generated
  sample: {"job_id": "d6147q3traac73bef6f0", "phase": "failed", "native_state": "Cancelled", "reason_code": 1305,
           "failure_class": "timeout", "device": "ibm_kingston", "primitive": "sampler"}
error:
  # BEGIN generated by tools/generate_spec.py from tools/returns.yml (make spec): error
  description: The typed error when the task failed on a Bridge error.
  returned: on failure
  type: dict
  # END generated
  sample: {"type": "SpecError", "field": "queue", "reason": "'ibm_nosuch' is not a device of this instance; available: ibm_kingston"}
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
    module = AnsibleModule(**job_module_args(backend_connection_options("quantum")))
    main_for(module, client_of("quantum"), run_job)


if __name__ == "__main__":
    main()
