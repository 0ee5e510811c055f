#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: quantum_job_info
short_description: Read IBM Quantum jobs, their results, logs and metrics
version_added: 0.1.0
description:
  - Reads jobs from the Qiskit Runtime REST API and returns them normalized, the same shape
    M(bridge.hpc.quantum_job) returns.
  - With O(job_id) or O(identity) one job is read; otherwise the instance's jobs, newest first,
    narrowed by the filters (O(device) and whether O(phases) are all pending or all finished are
    filtered by the service, the rest here).
  - With O(results), each completed job's results are decoded into plain data without qiskit or
    numpy, from either encoding the service may send (plain JSON, or qiskit's RuntimeEncoder with
    arrays as base64 of zlib of numpy's C(.npy) bytes). A sampler register becomes the counts of
    each bitstring (clbit 0 last, as qiskit prints them) and, up to O(max_bitstrings) shots, the
    bitstrings of all shots; an estimator's C(evs) and C(stds) become numbers or lists of numbers.
author:
  - Bridge developers (@bridge-hpc)
extends_documentation_fragment:
  - bridge.hpc.quantum
  - bridge.hpc.query
options:
  job_id:
    description:
      - Id of one job. Fails if the service does not know it.
    type: str
  identity:
    description:
      - Identity of one job, as given to or derived by M(bridge.hpc.quantum_job). Returns no job if none carries it.
    type: str
  name:
    description:
      - Only jobs with this name (their C(bridge-name:) tag, else their identity).
    type: str
  phases:
    description:
      - Only jobs in these normalized phases.
    type: list
    elements: str
    choices: [queued, running, completed, failed, cancelled]
  device:
    description:
      - Only jobs on this device.
    type: str
  limit:
    description:
      - Read at most this many jobs when listing (pages of 200, newest first); C(0) reads them all.
    type: int
    default: 200
  results:
    description:
      - Also read and decode the results of every completed job returned (one request per job), under C(results) in the job.
    type: bool
    default: false
  max_bitstrings:
    description:
      - With O(results), keep the bitstring of every shot of a register only when it has at most this many
        shots; the counts are always returned.
    type: int
    default: 1024
  logs:
    description:
      - Also read the log of every job returned (one request per job), under C(log) in the job.
    type: bool
    default: false
  logs_tail_lines:
    description:
      - Keep only the last this many lines of each log; C(0) keeps all of it.
    type: int
    default: 1000
  metrics:
    description:
      - Also read the metrics of every job returned (one request per job), under C(metrics) in the job
        (C(created), C(running), C(finished) times, C(quantum_seconds), C(usage_status)).
    type: bool
    default: false
  include_native:
    description:
      - Keep the raw job object under C(native) in each job (and in its metrics).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Reads only.
notes:
  - The results of a private job (C(private) under O(bridge.hpc.quantum_job#module:backend_options) key C(quantum)) can be read once.
  - Tested against a simulator of the Qiskit Runtime API (C(tests/simulators/quantum_runtime.py)) and answers written
    from IBM's documentation and the qiskit-ibm-runtime 0.51 client source; not yet against IBM Quantum itself.
seealso:
  - module: bridge.hpc.quantum_job
"""

EXAMPLES = r"""
- name: One job with its results
  bridge.hpc.quantum_job_info:
    identity: "bell-{{ run_id }}"
    results: true
  register: bell

- name: The counts of the first PUB's register meas
  ansible.builtin.debug:
    msg: "{{ bell.job.results.pubs[0].data.meas.counts }}"

- name: Failed jobs on one device, with their logs
  bridge.hpc.quantum_job_info:
    device: ibm_kingston
    phases: [failed]
    logs: true
    limit: 20
"""

RETURN = r"""
jobs:
  description: >-
    The jobs found, normalized, the same shape M(bridge.hpc.quantum_job) returns, with C(results),
    C(log) and C(metrics) when asked for; C(native) only with O(include_native=true).
  returned: when query is not set
  type: list
  elements: dict
  sample: [{"job_id": "d6147q3traac73bef6f0", "phase": "completed", "device": "ibm_kingston", "primitive": "sampler"}]
  contains:
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
      returned: when include_native is true
    results:
      description: >-
        The decoded results of a completed job (O(results=true)): C(format) (C(qiskit) or C(json), the
        encoding the service sent), C(pubs) (one per PUB, each with C(data) and C(metadata)) and
        C(metadata). A sampler register in C(data) holds C(num_bits), C(shape) (of its parameter
        sweep; empty for one binding), C(shots), C(counts) and, up to O(max_bitstrings) shots,
        C(bitstrings). An estimator's C(data) holds C(evs) and C(stds).
      type: dict
      returned: when results is true and the job completed
      sample: {"format": "qiskit", "pubs": [{"data": {"meas": {"num_bits": 2, "shape": [], "shots": 1000,
               "counts": {"00": 489, "11": 511}}}, "metadata": {"circuit_metadata": {}}}], "metadata": {"version": 2}}
    log:
      description: The job's log (O(logs=true)); empty when the service keeps none.
      type: str
      returned: when logs is true
    metrics:
      description: The job's times and usage (O(metrics=true)).
      type: dict
      returned: when metrics is true
      sample: {"created": "2026-12-01T10:00:00Z", "running": "2026-12-01T10:00:05Z", "finished": "2026-12-01T10:00:09Z",
               "quantum_seconds": 2, "usage_status": "done"}
job:
  description: The one job asked for with O(job_id) or O(identity), with the keys of RV(jobs); null when the identity is not found.
  returned: when job_id or identity is given and query is not set
  type: dict
  sample: {"job_id": "d6147q3traac73bef6f0", "phase": "completed", "results": {"format": "json", "pubs": []}}
query_result:
  description: >-
    What O(query) selects from the result this module would return without it
    (the sample is what V(job.results.pubs[0].data.meas.counts) selects); null when it selects nothing.
  returned: when query is set
  type: raw
  sample: {"00": 489, "11": 511}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.bridge.hpc.plugins.module_utils._module import (
    backend_connection_options,
    client_of,
    exit_with,
    job_info_module_args,
    main_for,
    read_job_or_list,
    without_native,
)


def read_jobs(module, client):
    params = module.params
    result = read_job_or_list(params, client, lambda: client.list(
        name=params["name"], phases=params["phases"], device=params["device"], limit=params["limit"] or None))
    for job in result["jobs"]:
        if params["results"] and job["phase"] == "completed":
            job["results"] = client.results(job["job_id"], params["max_bitstrings"])
        if params["logs"]:
            job["log"] = client.logs(job["job_id"], params["logs_tail_lines"] or None)
        if params["metrics"]:
            metrics = client.metrics(job["job_id"])
            job["metrics"] = metrics if params["include_native"] else without_native([metrics])[0]
    exit_with(module, client, result)


def main():
    module = AnsibleModule(**job_info_module_args(
        backend_connection_options("quantum"),
        device=dict(type="str"),
        limit=dict(type="int", default=200),
        results=dict(type="bool", default=False),
        max_bitstrings=dict(type="int", default=1024),
        logs=dict(type="bool", default=False),
        logs_tail_lines=dict(type="int", default=1000),
        metrics=dict(type="bool", default=False),
    ))
    main_for(module, client_of("quantum"), read_jobs)


if __name__ == "__main__":
    main()
