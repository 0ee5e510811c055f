#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: jobs
short_description: Submit or cancel many jobs on one backend in one call
version_added: 0.1.0
description:
  - Makes sure every job of a list exists (O(state=present)) or is cancelled (O(state=absent)) on
    one backend, with one identity lookup for the whole list instead of one per job. This is how
    the BridgeJob controller submits many custom resources with a single module run.
  - Each item is a job spec as M(bridge.hpc.job) takes it (its C(identity) is required) and is
    validated on its own; an invalid or refused item is reported in its result and does not stop
    the others. The task fails when any item failed, unless O(fail_on_item_error=false).
  - Submitted jobs are reported as queued without reading each back; read them all at once with
    M(bridge.hpc.job_info).
  - With O(handoff_pipe), the handed-over object may hold C(jobs), C(wait_timeout), C(login) (with its key and
    known_hosts as text, never a path) and the backend's
    credentials (C(user) and C(token); C(user) and C(password) for LSF; C(api_key) and C(service_crn) for IBM Quantum; C(kubeconfig_content) for Kubernetes).
author:
  - Bridge developers (@bridge-hpc)
extends_documentation_fragment:
  - bridge.hpc.connection
  - bridge.hpc.handoff
  - bridge.hpc.login
options:
  backend:
    description:
      - The resource manager that runs the jobs.
    type: str
    required: true
    choices: [kubernetes, lsf, quantum, ray, slurm]
  state:
    description:
      - V(present) submits every job whose identity has no job yet; V(absent) cancels every listed
        job that is still queued or running.
    type: str
    default: present
    choices: [present, absent]
  jobs:
    description:
      - The jobs. With O(state=present) each item takes the job spec options of M(bridge.hpc.job)
        (docs/spec.md lists them), with C(identity) required. With O(state=absent) an item needs its
        C(identity).
      - Required unless O(handoff_pipe) is set; the two are mutually exclusive.
    type: list
    elements: dict
  wait:
    description:
      - With O(state=absent), wait until every cancelled job is finished, reading them all with one
        list request per O(poll_interval). O(state=present) never waits; poll with M(bridge.hpc.job_info).
    type: bool
    default: false
  wait_timeout:
    description:
      - Seconds to wait when O(wait=true); items still running then are failed.
    type: int
    default: 600
  poll_interval:
    description:
      - Seconds between two reads while waiting.
    type: float
    default: 5.0
  fail_on_item_error:
    description:
      - Fail the task when any item failed. Results of every item are returned either way.
    type: bool
    default: true
  include_native:
    description:
      - Keep the raw job object under C(native) in each item's RV(results[].job).
      - Off by default, since a batch of jobs that already exist would return each job's whole
        record (about 5 KB each on Slurm), which no caller of a batch needs.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Validates every item against the backend and predicts the results; nothing is submitted or cancelled.
  diff_mode:
    support: none
    description: The per-item results say what changed.
seealso:
  - module: bridge.hpc.job
  - module: bridge.hpc.job_info
"""

EXAMPLES = r"""
- name: Submit a parameter sweep in one module run
  bridge.hpc.jobs:
    backend: slurm
    url: "{{ slurm_url }}"
    user: "{{ slurm_user }}"
    token: "{{ slurm_jwt }}"
    jobs:
      - identity: sweep-lr-0.1
        script: "#!/bin/bash\n./train --lr 0.1\n"
        queue: batch
      - identity: sweep-lr-0.01
        script: "#!/bin/bash\n./train --lr 0.01\n"
        queue: batch
  register: sweep

- name: Cancel them
  bridge.hpc.jobs:
    backend: slurm
    url: "{{ slurm_url }}"
    user: "{{ slurm_user }}"
    token: "{{ slurm_jwt }}"
    state: absent
    jobs:
      - identity: sweep-lr-0.1
      - identity: sweep-lr-0.01
"""

RETURN = r"""
results:
  description: One result per item, in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    identity:
      description: The item's identity.
      type: str
    changed:
      description: Whether this item was submitted or cancelled (or would be, in check mode).
      type: bool
    failed:
      description: Whether this item was invalid or refused.
      type: bool
    output:
      description:
        - The end of the output of a job found finished, when its spec asks for it, as RV(bridge.hpc.job#module:output)
          (a job this run submits is not finished yet; M(bridge.hpc.job_info) reads its output later).
      type: dict
      returned: when the item's spec sets output and its job was found finished
    output_error:
      description: Why that output could not be read.
      type: str
      returned: when the item's spec sets output, its job was found finished and its output could not be read
    job:
      description:
        - The job, normalized, with the keys every backend returns; each backend adds its own, as its
          module documents them (M(bridge.hpc.slurm_job), M(bridge.hpc.lsf_job), M(bridge.hpc.k8s_job),
          M(bridge.hpc.ray_job), M(bridge.hpc.quantum_job)). Without C(native) unless O(include_native=true);
          null with O(state=absent) for an identity without a job.
        - A job submitted by this run (or that would be, in check mode) is not read back; it has
          C(job_id) (null in check mode), C(name), C(identity), phase C(queued), C(terminal),
          C(native_state), C(reason), C(exit_code), C(signal) and C(failure_class), and besides them
          the spec's queue as C(partition) and the backend's name as C(backend).
        - An item with C(retry) takes one step (docs/spec.md, Retries) and returns its latest attempt's job, with C(attempts)
          and, while the next attempt waits for its backoff, C(next_attempt), as M(bridge.hpc.job) returns them;
          with O(state=absent) the latest attempt is cancelled.
      type: dict
      contains:
        # BEGIN generated by tools/generate_spec.py from tools/returns.yml (make spec): job_keys all include_native
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
          returned: when include_native is true
        # END generated
    rendered:
      description: The native request compiled for this item (state present).
      type: dict
    error:
      description: The typed error of a failed item; C(field) names the invalid option, prefixed C(jobs[N]).
      type: dict
    msg:
      description: Why the item failed.
      type: str
  sample: [{"identity": "sweep-0", "changed": true, "failed": false, "job": {"job_id": "41", "phase": "queued"}}]
failed_count:
  description: How many items failed.
  returned: always
  type: int
  sample: 0
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._handoff import HANDOFF_OPTIONS, handoff_or_exit
from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_many_absent, ensure_many_present
from ansible_collections.bridge.hpc.plugins.module_utils._login import LOGIN_OPTIONS, attach_login
from ansible_collections.bridge.hpc.plugins.module_utils._module import (
    any_backend_options,
    chosen_backend,
    exit_with,
    main_for,
    without_native,
)
from ansible_collections.bridge.hpc.plugins.module_utils._spec import JOB_SPEC_OPTIONS, normalize_spec


def validate_items(items):
    """(specs or absent targets, failures) with each item checked by the single-job argspec."""
    validator = ArgumentSpecValidator(JOB_SPEC_OPTIONS)
    valid, failures = [], []
    for index, item in enumerate(items):
        field = "jobs[%d]" % index
        checked = validator.validate(item)
        if checked.error_messages:
            failures.append((index, SpecError(field, "; ".join(checked.error_messages))))
            continue
        params = checked.validated_parameters
        if not params.get("identity"):
            failures.append((index, SpecError("%s.identity" % field, "every item needs an identity")))
            continue
        valid.append((index, params))
    return valid, failures


def failed_item(index, items, exc):
    return {"identity": items[index].get("identity"), "changed": False, "failed": True,
            "error": exc.to_dict(), "msg": str(exc)}


def run_batch(module, client):
    items = module.params["jobs"]
    valid, failures = validate_items(items)
    results = dict((index, failed_item(index, items, exc)) for index, exc in failures)
    attach_login(client, module.params)
    if module.params["state"] == "present":
        specs = []
        for index, params in valid:
            try:
                specs.append((index, normalize_spec(params, client)))
            except SpecError as exc:
                exc = SpecError("jobs[%d].%s" % (index, exc.field), exc.reason.split(": ", 1)[-1])
                results[index] = failed_item(index, items, exc)
        outcomes = ensure_many_present(client, [spec for _index, spec in specs], check_mode=module.check_mode)
        results.update((index, outcome) for (index, _spec), outcome in zip(specs, outcomes))
    else:
        targets = [(index, params["identity"]) for index, params in valid]
        # An item with retry runs as attempts: its latest attempt is the one cancelled.
        limits = dict((params["identity"], (params.get("retry") or {}).get("limit")) for _index, params in valid)
        outcomes = ensure_many_absent(client, [identity for _index, identity in targets], check_mode=module.check_mode,
                                      wait=module.params["wait"], wait_timeout=module.params["wait_timeout"],
                                      poll_interval=module.params["poll_interval"], limits=limits)
        results.update((index, outcome) for (index, _identity), outcome in zip(targets, outcomes))
    ordered = [results[index] for index in range(len(items))]
    if not module.params["include_native"]:
        for result in ordered:
            if result.get("job"):
                result["job"] = without_native([result["job"]])[0]
    failed_count = sum(1 for result in ordered if result.get("failed"))
    result = {"changed": any(r.get("changed") for r in ordered), "results": ordered, "failed_count": failed_count}
    if failed_count and module.params["fail_on_item_error"]:
        result["failed"] = True
        result["msg"] = "%d of %d jobs failed" % (failed_count, len(items))
    exit_with(module, client, result)


def main():
    options = any_backend_options()
    options.update(
        state=dict(type="str", default="present", choices=["present", "absent"]),
        jobs=dict(type="list", elements="dict"),
        fail_on_item_error=dict(type="bool", default=True),
        include_native=dict(type="bool", default=False),
        wait=dict(type="bool", default=False),
        wait_timeout=dict(type="int", default=600),
        poll_interval=dict(type="float", default=5.0),
    )
    options.update(HANDOFF_OPTIONS)
    options.update(LOGIN_OPTIONS)
    module = AnsibleModule(argument_spec=options, supports_check_mode=True,
                           required_one_of=[("jobs", "handoff_pipe")], mutually_exclusive=[("jobs", "handoff_pipe")])
    handoff_or_exit(module, {"jobs": list, "wait_timeout": int}, idle_result={"results": [], "failed_count": 0})
    main_for(module, chosen_backend, run_batch)


if __name__ == "__main__":
    main()
