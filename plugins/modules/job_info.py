#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: job_info
short_description: Read many jobs of one backend by identity with one request
version_added: 0.1.0
description:
  - Reads the jobs carrying the given identities from one backend with a single list request,
    whatever their number, and returns them normalized like every Bridge job. This is how the
    BridgeJob controller polls every tracked job of a backend once per interval.
  - On Slurm with accounting (slurmdbd), identities slurmctld does not know are then looked for in
    accounting, with one more request per 50 of them, so that a job slurmctld forgot (C(MinJobAge)
    after its end) is still found.
  - With O(handoff_pipe), the handed-over object may hold C(identities), C(output_lines), C(output_follow), C(output_secrets),
    C(login) (with its key and known_hosts as text, never a path) and the backend's
    credentials (C(user) and C(token); C(user) and C(password) for LSF; C(api_key) and C(service_crn) for IBM Quantum; C(kubeconfig_content) for Kubernetes).
author:
  - Bridge developers (@bridge-hpc)
extends_documentation_fragment:
  - bridge.hpc.connection
  - bridge.hpc.handoff
  - bridge.hpc.query
  - bridge.hpc.login
options:
  backend:
    description:
      - The resource manager to read.
    type: str
    required: true
    choices: [kubernetes, lsf, quantum, ray, slurm]
  identities:
    description:
      - Identities of the jobs to read.
      - Required unless O(handoff_pipe) is set; the two are mutually exclusive.
    type: list
    elements: str
  include_native:
    description:
      - Keep the raw job objects under C(native).
    type: bool
    default: false
  results_summary:
    description:
      - Also read a small summary of the results of every finished job found, under C(results_summary)
        in the job, where the backend keeps results (IBM Quantum; one request per completed job). The
        BridgeJob controller asks for it and stops polling a job once it is finished, so it reads a
        job's results once.
      - For IBM Quantum, per PUB, each sampler register's shots, number of distinct outcomes and its 16 most
        frequent outcomes with their counts, or an estimator's expectation values C(evs) and standard
        deviations C(stds) (at most 64 each, flattened) with their C(shape); C(truncated) says whether
        anything was left out. When the results cannot be read, C(results_summary) holds C(error) instead.
    type: bool
    default: false
  output_lines:
    description:
      - Also read the end of the output of the finished jobs found among these identities, under C(output) in
        the job (or C(output_error) when it cannot be read), given as identity to the number of last lines (1 to 1000),
        as a spec's O(bridge.hpc.job#module:output.tail_lines) says, shown as RV(bridge.hpc.job#module:output).
        One request per finished job (one C(ssh) command on O(login) for Slurm); the BridgeJob controller asks
        for it and stops polling a job once it is finished, so it reads a job's output once.
    type: dict
  output_follow:
    description:
      - Identities of O(output_lines) whose output is read while their jobs run too, as a spec's
        O(bridge.hpc.job#module:output.follow) says, with one request per running job of these at each read; its
        C(output) then has C(running) true. An output not written yet is no output and no error while the job runs.
        The others' output is read only once their jobs have finished.
    type: list
    elements: str
  output_secrets:
    description:
      - Values masked in the output of each identity of O(output_lines), besides the connection's secrets, given as
        identity to a list of values, such as the values of the secret-looking environment variables of the job's spec (the
        BridgeJob controller hands them over). Never logged.
    type: dict
attributes:
  check_mode:
    support: full
    description: Reads only.
notes:
  - Slurm forgets finished jobs after C(MinJobAge); their identities are then listed under RV(missing).
seealso:
  - module: bridge.hpc.jobs
  - module: bridge.hpc.slurm_job_info
  - module: bridge.hpc.ray_job_info
"""

EXAMPLES = r"""
- name: Where are my sweep jobs
  bridge.hpc.job_info:
    backend: slurm
    url: "{{ slurm_url }}"
    user: "{{ slurm_user }}"
    token: "{{ slurm_jwt }}"
    identities: [sweep-lr-0.1, sweep-lr-0.01]
  register: sweep

- name: Phases
  ansible.builtin.debug:
    msg: "{{ sweep.jobs | dict2items | map(attribute='value.phase') | list }}"
"""

RETURN = r"""
jobs:
  description:
    - The jobs found, by identity, each normalized as RV(bridge.hpc.job#module:job) with the keys of
      its backend, without C(native) unless O(include_native=true).
    - With O(results_summary=true), a finished job's C(results_summary), where its backend keeps results.
    - With O(output_lines), a finished job's C(output) or C(output_error); with O(output_follow) a running job's too,
      its C(output) with C(running) true.
  returned: when query is not set
  type: dict
  sample: {"sweep-lr-0.1": {"job_id": "41", "phase": "running"}}
missing:
  description: Identities without a job on the backend (never submitted, or forgotten).
  returned: when query is not set
  type: list
  elements: str
  sample: [sweep-lr-0.01]
refused:
  description:
    - Identities that no one job of the credential's user can be pinned on (Slurm), by identity,
      each the error (C(type) C(AmbiguousIdentity), C(job_ids), C(message)); such an identity is
      neither in RV(jobs) nor in RV(missing). Only there when an identity was refused.
  returned: when query is not set
  type: dict
  sample: {"3f2a": {"type": "AmbiguousIdentity", "job_ids": ["457", "458"]}}
requests:
  description: HTTP requests this read took.
  returned: when query is not set
  type: int
  sample: 1
query_result:
  # BEGIN generated by tools/generate_spec.py from tools/returns.yml (make spec): query_result jobs.*.phase
  description: >-
    What O(query) selects from the result this module would return without it
    (the sample is what V(jobs.*.phase) selects); null when it selects nothing.
  returned: when query is set
  type: raw
  # END generated
  sample: ["running", "completed"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.bridge.hpc.plugins.module_utils._handoff import HANDOFF_OPTIONS, handoff_or_exit
from ansible_collections.bridge.hpc.plugins.module_utils._errors import BridgeError, SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._jobs import read_many, read_output
from ansible_collections.bridge.hpc.plugins.module_utils._login import LOGIN_OPTIONS, attach_login
from ansible_collections.bridge.hpc.plugins.module_utils._fields import MAX_TAIL_LINES
from ansible_collections.bridge.hpc.plugins.module_utils._module import (
    any_backend_options,
    chosen_backend,
    exit_with,
    main_for,
    without_native,
)
from ansible_collections.bridge.hpc.plugins.module_utils._query import QUERY_OPTIONS


def add_results_summary(client, job):
    """The summary of a finished job's results, or the error that kept it from being read: one job's
    results that cannot be read (a private job's results are served once) must not fail the poll of
    every other job."""
    if not job.get("terminal"):
        return
    try:
        summary = client.results_summary(job)
    except BridgeError as exc:
        summary = {"error": str(exc)[:1000]}
    if summary is not None:
        job["results_summary"] = summary


def add_output(client, job, tail_lines, follow=False, secrets=()):
    """A finished job's output under `output` (with `follow`, a running job's too), or why it could
    not be read under `output_error`: one job's output must not fail the poll of every other job."""
    job.update(read_output(client, job, {"output": {"tail_lines": tail_lines, "follow": follow}}, secrets=secrets))


def output_lines(value):
    """{identity: tail_lines} of the option, checked."""
    lines = {}
    for identity, count in (value or {}).items():
        try:
            count = int(count)
        except (TypeError, ValueError):
            count = 0
        if not 1 <= count <= MAX_TAIL_LINES:
            raise SpecError("output_lines.%s" % identity, "must be a number of lines from 1 to %d" % MAX_TAIL_LINES)
        lines[identity] = count
    return lines


def read_jobs(module, client):
    lines = output_lines(module.params.get("output_lines"))
    follow = set(module.params.get("output_follow") or ())
    secrets = module.params.get("output_secrets") or {}
    attach_login(client, module.params)
    found, missing, refused = read_many(client, module.params["identities"])
    # Read before the native payloads go: a Slurm array task's file name needs its array ids.
    for identity, job in found.items():
        if identity in lines:
            add_output(client, job, lines[identity], identity in follow, [str(value) for value in secrets.get(identity) or ()])
    if not module.params["include_native"]:
        found = dict(zip(found, without_native(list(found.values()))))
    if module.params["results_summary"]:
        for job in found.values():
            add_results_summary(client, job)
    result = {"changed": False, "jobs": found, "missing": missing, "requests": client.requests_sent}
    if refused:
        result["refused"] = dict((identity, error.to_dict()) for identity, error in refused.items())
    exit_with(module, client, result)


def main():
    options = any_backend_options()
    options.update(
        identities=dict(type="list", elements="str"),
        include_native=dict(type="bool", default=False),
        results_summary=dict(type="bool", default=False),
        output_lines=dict(type="dict"),
        output_follow=dict(type="list", elements="str"),
        output_secrets=dict(type="dict", no_log=True),
    )
    options.update(HANDOFF_OPTIONS)
    options.update(LOGIN_OPTIONS)
    options.update(QUERY_OPTIONS)
    module = AnsibleModule(argument_spec=options, supports_check_mode=True, required_one_of=[("identities", "handoff_pipe")],
                           mutually_exclusive=[("identities", "handoff_pipe")])
    handoff_or_exit(module, {"identities": list, "output_lines": dict, "output_follow": list, "output_secrets": dict},
                    idle_result={"jobs": {}, "missing": [], "requests": 0})
    main_for(module, chosen_backend, read_jobs)


if __name__ == "__main__":
    main()
