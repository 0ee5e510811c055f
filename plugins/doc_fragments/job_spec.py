# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The backend-neutral job spec, the lifecycle options and the wait options.
    DOCUMENTATION = r"""
options:
  state:
    description:
      - V(present) makes sure a job with this identity exists, in any phase; an existing job is
        returned unchanged and nothing is submitted.
      - V(absent) makes sure the job is not queued or running; a queued or running job is cancelled,
        a finished or unknown job is left alone.
    type: str
    default: present
    choices: [present, absent]
  job_id:
    description:
      - With O(state=absent), the id of the job to cancel instead of looking it up by identity.
    type: str
  script:
    description:
      - The job script, starting with an interpreter line such as C(#!/bin/bash). Sent byte-exact.
      - Except that C($(LAUNCHER)), where the parallel command starts, is replaced by the backend's launcher for
        the requested tasks and nodes (C(srun) on Slurm, C(blaunch) on LSF for several tasks, nothing for one
        task on Ray or LSF); C(rendered) shows the result. See docs/spec.md.
      - For the quantum backend, an OpenQASM 3 circuit instead (the default circuit of its PUBs).
      - Required with O(state=present) unless O(script_file) is given.
    type: str
  script_file:
    description:
      - Path of the job script on the Ansible controller, looked up like other C(files/) content.
      - Read by the action plugin and sent as O(script). Mutually exclusive with O(script).
    type: str
  name:
    description:
      - Job name. Defaults to the identity.
    type: str
  identity:
    description:
      - Deterministic identity of the job; Bridge looks it up before submitting, so a job is never
        submitted twice. Written into the job (Slurm comment, LSF job description, IBM Quantum job tag C(bridge:<identity>)).
      - Defaults to the name plus a hash of the whole spec, so the same task run again finds the same
        job. Give an explicit value (a run id, a ticket) to run an unchanged spec again.
    type: str
  environment:
    description:
      - Environment variables of the job. C(PATH) defaults to C(/usr/local/bin:/usr/bin:/bin).
    type: dict
    default: {}
  working_directory:
    description:
      - Working directory of the job on the cluster. Defaults to C(/tmp).
    type: str
  stdout:
    description:
      - Path of the job's standard output on the cluster; Slurm patterns such as C(%j) and LSF's C(%J) work.
    type: str
  stderr:
    description:
      - Path of the job's standard error; merged into O(stdout) when not set.
    type: str
  queue:
    description:
      - Partition (Slurm) or queue to run in; a comma list lets Slurm pick the first that fits.
      - Defaults to the cluster's default partition.
    type: str
  account:
    description:
      - Account charged for the job.
    type: str
  qos:
    description:
      - Quality of service.
    type: str
  constraints:
    description:
      - Node features the job needs, in Slurm's constraint syntax (C(a100&ib)).
    type: str
  resources:
    description:
      - What the job needs. Checked against the partition before submitting.
    type: dict
    default: {}
    suboptions:
      nodes:
        description: Number of nodes.
        type: int
      tasks:
        description: Number of tasks (MPI ranks).
        type: int
      tasks_per_node:
        description: Tasks per node.
        type: int
      cpus_per_task:
        description: CPUs per task.
        type: int
      gpus:
        description: GPUs per node.
        type: int
      gpu_type:
        description: GPU type, such as C(a100); needs O(resources.gpus).
        type: str
      memory:
        description: Memory per node, a number of MiB or with a unit K, M, G, T (C(4G), C(512M)).
        type: raw
      memory_per_cpu:
        description: Memory per CPU, same syntax as O(resources.memory); exclusive with it.
        type: raw
      time_limit:
        description:
          - Wall time limit as minutes (C(90)), C(MM:SS), C(HH:MM:SS), C(D-HH), C(D-HH:MM) or C(D-HH:MM:SS).
          - Seconds are rounded up to whole minutes.
        type: raw
  backend_options:
    description:
      - Native request fields per backend, merged over what Bridge compiles; for example the key
        C(slurm) with C(exclusive=user) adds Slurm's C(exclusive) field to the submit request.
      - Allowed namespaces are the backends, C(slurm), C(ray), C(lsf), C(quantum) and C(kubernetes); a backend uses only its own.
      - Bridge does not check these fields against the cluster.
    type: dict
    default: {}
  cancel_rejected:
    description:
      - When waiting and the manager accepted the job but reports that it can never start (Slurm
        reasons such as C(PartitionTimeLimit)), cancel it so nothing is left pending, and fail.
    type: bool
    default: true
  wait:
    description:
      - Wait until the job is finished (completed, failed or cancelled). The task fails if the job
        failed, was cancelled, can never start, or O(wait_timeout) passed.
    type: bool
    default: false
  wait_timeout:
    description:
      - Seconds to wait when O(wait=true). The job keeps running when the wait times out.
    type: int
    default: 600
  poll_interval:
    description:
      - Seconds between two status reads while waiting.
    type: float
    default: 5.0
"""
