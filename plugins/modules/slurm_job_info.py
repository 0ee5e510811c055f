#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: slurm_job_info
short_description: Read Slurm jobs, one by id or identity or a filtered list
version_added: 0.1.0
description:
  - Reads jobs from slurmrestd and returns them normalized across REST versions, the same shape
    M(bridge.hpc.slurm_job) returns.
  - With O(job_id) or O(identity) one job is read; otherwise every job slurmctld still remembers,
    narrowed by the filters, or with O(source=accounting) the jobs Slurm's accounting (slurmdbd)
    recorded in a time window, finished ones of any age included, as sacct lists them.
  - Where slurmrestd serves accounting, a job slurmctld has forgotten (C(MinJobAge) after it ended)
    is read from there, by O(job_id) or O(identity); such a job has C(source=accounting) and the
    fields only accounting has (C(account), C(elapsed_seconds), C(cpu_seconds), C(max_rss_bytes)).
author:
  - Bridge developers (@bridge-hpc)
extends_documentation_fragment:
  - bridge.hpc.slurm
  - bridge.hpc.query
options:
  job_id:
    description:
      - Id of one job. Fails if Slurm does not know it (any more).
    type: str
  identity:
    description:
      - Identity of one job, as given to or derived by M(bridge.hpc.slurm_job). Returns no job if none carries it.
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
  partition:
    description:
      - Only jobs in this partition.
    type: str
  job_user:
    description:
      - Only jobs of this Slurm user.
    type: str
  account:
    description:
      - Only jobs charged to this account.
    type: str
  source:
    description:
      - "Where a list of jobs comes from. C(live) is slurmctld's queue (what it still remembers);
        C(accounting) is Slurm's accounting between O(start_time) and O(end_time), which needs slurmdbd
        and slurmrestd's slurmdbd plugin (C(openapi/slurmdbd), or C(openapi/dbv0.0.38) on Slurm 22.05)."
      - One job (O(job_id), O(identity)) is looked up in both, whatever this says.
    type: str
    choices: [live, accounting]
    default: live
  start_time:
    description:
      - With O(source=accounting), jobs that were eligible, running or ended at or after this time,
        given as RFC 3339 (V(2026-12-01T00:00:00Z)), an epoch in seconds, or relative to now (V(-12h), V(-7d);
        units s, m, h, d, w). V(-1d) when not set.
    type: str
  end_time:
    description:
      - With O(source=accounting), only jobs before this time (same forms as O(start_time)); now when not set.
    type: str
  include_native:
    description:
      - Keep the raw job object under C(native) in each job.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Reads only.
notes:
  - Slurm forgets finished jobs after C(MinJobAge) (300 seconds by default); without accounting they
    are gone from this module then.
  - Accounting learns of a job a moment after slurmctld, so the newest jobs may be missing from
    O(source=accounting) for a second or so; the v0.0.38 and v0.0.39 APIs report exit code 0 for every
    exit there, so a C(FAILED) job's exit_code is null on Slurm 22.05 and 23.02.
seealso:
  - module: bridge.hpc.slurm_job
"""

EXAMPLES = r"""
- name: One job
  bridge.hpc.slurm_job_info:
    job_id: "{{ submitted.job_id }}"
  register: one

- name: My running jobs in the batch partition
  bridge.hpc.slurm_job_info:
    phases: [running]
    partition: batch
    job_user: alice
  register: running

- name: Alice's failed jobs of the last week, from accounting (elapsed, CPU time, max RSS)
  bridge.hpc.slurm_job_info:
    source: accounting
    start_time: -7d
    job_user: alice
    account: physics
    phases: [failed]
  register: history

- name: Only the ids of Alice's running jobs (query keeps the registered variable small)
  bridge.hpc.slurm_job_info:
    phases: [running]
    job_user: alice
    query: jobs[].job_id
  register: running_ids   # running_ids.query_result: ["41", "42"]
"""

RETURN = r"""
jobs:
  description:
    - The jobs found, normalized across Slurm versions, the same shape M(bridge.hpc.slurm_job) returns;
      C(native) only with O(include_native=true).
    - A job read from Slurm's accounting has the keys only accounting has too.
  returned: when query is not set
  type: list
  elements: dict
  sample: [{"job_id": "42", "name": "hello", "phase": "running", "partition": "debug"}]
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
      returned: when include_native is true
job:
  description: The one job asked for with O(job_id) or O(identity), with the keys of RV(jobs); null when the identity is not found.
  returned: when job_id or identity is given and query is not set
  type: dict
  sample: {"job_id": "42", "phase": "completed", "exit_code": 0}
lookup:
  description: How O(identity) was looked up, C(accounting), C(live) (slurmctld's queue) or C(accounting+live).
  returned: when identity is given and query is not set
  type: str
  sample: accounting
api_version:
  description: Slurm REST API version used.
  returned: when query is not set
  type: str
  sample: v0.0.42
query_result:
  description: >-
    What O(query) selects from the result this module would return without it
    (the sample is what V(jobs[?phase=='running'].job_id) selects); null when it selects nothing.
  returned: when query is set
  type: raw
  sample: ["41", "42"]
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.accounting import window_start
from ansible_collections.bridge.hpc.plugins.module_utils._module import (
    backend_connection_options,
    client_of,
    exit_with,
    job_info_module_args,
    main_for,
    read_job_or_list,
)


DEFAULT_WINDOW = "-1d"


def select_jobs(jobs, partition=None, job_user=None, account=None, phases=None):
    return [
        job for job in jobs
        if (partition is None or job["partition"] == partition)
        and (job_user is None or job["user"] == job_user)
        and (account is None or account_of(job) == account)
        and (not phases or job["phase"] in phases)
    ]


def account_of(job):
    return job.get("account") or (job.get("native") or {}).get("account")


def accounting_jobs(params, client):
    now = time.time()
    start = window_start(params["start_time"] or DEFAULT_WINDOW, "start_time", now)
    end = window_start(params["end_time"], "end_time", now)
    if end is not None and end < start:
        raise SpecError("end_time", "'%s' is before start_time '%s'" % (params["end_time"], params["start_time"]))
    if not client.accounting_available():
        raise SpecError("source", "accounting: %s serves no Slurm accounting (no slurmdbd, or slurmrestd runs "
                                  "without its slurmdbd plugin)" % client.url)
    jobs = client.history(
        start=start, end=end, names=[params["name"]] if params["name"] else None,
        users=[params["job_user"]] if params["job_user"] else None,
        accounts=[params["account"]] if params["account"] else None,
        partitions=[params["partition"]] if params["partition"] else None, now=now)
    return select_jobs(jobs, params["partition"], params["job_user"], params["account"], params["phases"])


def live_jobs(params, client):
    return select_jobs(client.list(name=params["name"], phases=params["phases"]),
                       params["partition"], params["job_user"], params["account"])


def read_jobs(module, client):
    params = module.params
    for window in ("start_time", "end_time"):
        if params["source"] == "live" and params[window] is not None:
            raise SpecError(window, "is only for source=accounting (slurmctld's queue has no time window)")
    jobs_of = accounting_jobs if params["source"] == "accounting" else live_jobs
    result = read_job_or_list(params, client, lambda: jobs_of(params, client))
    if params["identity"] is not None:
        result["lookup"] = client.lookup
    result["api_version"] = client.api_version
    exit_with(module, client, result)


def main():
    module = AnsibleModule(**job_info_module_args(
        backend_connection_options("slurm"), partition=dict(type="str"), job_user=dict(type="str"),
        account=dict(type="str"), source=dict(type="str", choices=["live", "accounting"], default="live"),
        start_time=dict(type="str"), end_time=dict(type="str")))
    main_for(module, client_of("slurm"), read_jobs)


if __name__ == "__main__":
    main()
