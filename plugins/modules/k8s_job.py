#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: k8s_job
short_description: Run a batch script as a Kubernetes Job, wait for it, or stop it
version_added: 0.1.0
description:
  - Makes sure a Kubernetes Job with a deterministic identity exists (O(state=present)) or is gone
    (O(state=absent), which deletes it and its Pod), from the same backend-neutral job spec as every
    Bridge backend.
  - The script travels byte-exact in a ConfigMap mounted at C(/bridge/job/script) and is run by the
    interpreter of its C(#!) line (C(#!/bin/sh -e) runs C(/bin/sh -e /bridge/job/script)) in the image
    named by O(backend_options) key C(kubernetes) C(image), which is required. The ConfigMap is owned
    by the Job, so the garbage collector removes it with the Job.
  - Each job spec option below says what it becomes in the Job, or that Kubernetes refuses it and
    why; a refused option fails the task naming it, and nothing is created. Requests and limits of
    the container are equal.
  - A Job runs one Pod with C(restartPolicy=Never) and C(backoffLimit=0) (a failed batch step is not
    rerun blindly), kept C(ttlSecondsAfterFinished=604800) seconds after it ends. Its Pod passes the
    C(restricted) Pod Security level (non-root user 65532, no privilege escalation, no capabilities,
    the C(RuntimeDefault) seccomp profile, no ServiceAccount token).
  - The identity is the Job's annotation C(bridge.dev/identity), a hash of it is the label
    C(bridge.dev/identity-hash), and the Job and ConfigMap are named after both; the identity is looked up
    before every submit, and two submits that race create one Job.
  - Before submitting, the namespace must exist, the LocalQueue of O(queue) too, and the requests must fit
    some node's allocatable resources; otherwise the task fails naming the field.
author:
  - Bridge developers (@bridge-hpc)
extends_documentation_fragment:
  - bridge.hpc.kubernetes
  - bridge.hpc.job_spec.lifecycle
  - bridge.hpc.job_spec.for_kubernetes
attributes:
  check_mode:
    support: full
    description: Checks the namespace, queue and nodes and returns the predicted job and the rendered manifests without creating anything.
  diff_mode:
    support: full
    description: Shows the job before and after; never the kubeconfig.
notes:
  - "RBAC the user needs in O(namespace): C(batch/jobs) create, get, list, delete; C(configmaps)
    create, patch; C(pods) list and C(pods/log) get. Reading C(namespaces) and C(nodes) (cluster
    scope) and Kueue C(localqueues) makes the preflight check complete; without those rights it is skipped."
  - A deleted Job (O(state=absent), or its TTL) is forgotten; O(state=present) with the same identity then creates it again.
  - The failure classes come from the Job and its Pod, see RV(job.failure_class).
seealso:
  - module: bridge.hpc.k8s_job_info
  - module: bridge.hpc.job
  - plugin: bridge.hpc.kubernetes
    plugin_type: inventory
"""

EXAMPLES = r"""
- name: Run a Python step in the cluster and wait for it
  bridge.hpc.k8s_job:
    kubeconfig: ~/.kube/config
    namespace: research
    name: train
    script: |
      #!/usr/bin/env python3
      import os
      print("hello from", os.uname().nodename)
    resources:
      cpus_per_task: 2
      memory: 4G
      gpus: 1
      time_limit: "01:00:00"
    backend_options:
      kubernetes:
        image: docker.io/library/python:3.12-slim
    wait: true
    wait_timeout: 3900
  register: train

- name: Through Kueue's LocalQueue team-a, from a script file on the controller
  bridge.hpc.k8s_job:
    script_file: step.sh
    identity: "step-{{ run_id }}"
    queue: team-a
    backend_options:
      kubernetes:
        image: registry.example.org/hpc/tools:2.1
        node_selector:
          topology.kubernetes.io/zone: eu-west-1a

- name: Its output
  bridge.hpc.k8s_job_info:
    identity: "step-{{ run_id }}"
    logs: true
  register: step

- name: Stop it
  bridge.hpc.k8s_job:
    identity: "step-{{ run_id }}"
    state: absent

- name: Defaults for every Kubernetes task of a play
  module_defaults:
    group/bridge.hpc.kubernetes:
      context: prod
      namespace: batch
  block:
    - bridge.hpc.k8s_job:
        job_id: "{{ train.job_id }}"
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
  description: The Job's name in O(namespace), derived from the identity; null in check mode for a job that would be created.
  returned: always
  type: str
  sample: train-5f2c0a9e1b7d-3c4467a1b2f0
phase:
  description: The job's phase, as RV(job.phase).
  returned: always
  type: str
  choices: [queued, running, completed, failed, cancelled]
  sample: completed
exit_code:
  description: Exit code of the container of a finished job; null while it waits or runs.
  returned: always
  type: int
  sample: 0
signal:
  description: 9 when the kernel killed the container for its memory limit (C(OOMKilled)); null otherwise.
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
  description: RFC 3339 time the Job was created; also under RV(job.submit_time).
  returned: always
  type: str
  sample: "2026-12-01T10:00:00Z"
start_time:
  description: RFC 3339 time the container started; null while it waits. Also under RV(job.start_time).
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
  sample: train-5f2c0a9e1b7d3c44
rendered:
  description: The manifests created, exactly as sent, and the namespace.
  returned: when state is present
  type: dict
  contains:
    namespace:
      description: The namespace.
      type: str
    config_map:
      description: The ConfigMap holding the script under key C(script).
      type: dict
    job:
      description: The batch/v1 Job.
      type: dict
  sample: {"namespace": "research", "config_map": {"kind": "ConfigMap", "data": {"script": "#!/bin/sh\necho hi\n"}},
           "job": {"kind": "Job", "spec": {"backoffLimit": 0, "activeDeadlineSeconds": 3600}}}
api_version:
  description: Always C(batch/v1).
  returned: always
  type: str
  sample: batch/v1
job:
  description:
    - The job, with the keys every Bridge backend returns (see RV(bridge.hpc.job#module:job)) and
      those of Kubernetes; null with O(state=absent) when there is no such job.
    - In check mode, a job that would be created is predicted, with C(job_id) null, phase
      C(queued) and neither times nor C(native).
  returned: always
  type: dict
  contains:
    job_id:
      description: The Job's name.
      type: str
    name:
      description: The spec's name (annotation C(bridge.dev/name)).
      type: str
    identity:
      description: >-
        Identity from the annotation C(bridge.dev/identity), verified against the label
        C(bridge.dev/identity-hash); null for a Job Bridge did not create.
      type: str
    phase:
      description: >-
        The job's phase: C(queued) while the Job is suspended or its Pod waits, C(running) once its
        container runs, C(completed) or C(failed) by the Job's C(Complete) or C(Failed) condition,
        C(cancelled) once the Job is being deleted or is gone.
      type: str
      choices: [queued, running, completed, failed, cancelled]
    terminal:
      description: Whether the job is finished (its phase is C(completed), C(failed) or C(cancelled)).
      type: bool
    native_state:
      description: C(Pending), C(Suspended) (waiting for Kueue), C(Running), C(Complete), C(Failed) or C(Deleting).
      type: str
    reason:
      description: Why it waits (C(Unschedulable) and the scheduler's message, an image pull error) or failed (the Job condition's reason and message).
      type: str
    exit_code:
      description: Exit code of the container of a finished job (0 for a completed one); null while it waits or runs.
      type: int
    signal:
      description: 9 for an C(OOMKilled) container; null otherwise.
      type: int
    failure_class:
      description: >-
        C(timeout) (C(DeadlineExceeded)), C(out_of_memory) (C(OOMKilled)), C(non_zero_exit)
        (C(BackoffLimitExceeded) with the exit code), C(node_failure) (the Pod was evicted or its node
        lost), C(cancelled) (deleted) or C(rejected) (the Pod can never start: no node matches its
        selector or tolerates the taints, an invalid image name); null otherwise.
      type: str
      choices: [timeout, out_of_memory, node_failure, cancelled, non_zero_exit, rejected, preempted]
    submit_time:
      description: RFC 3339 creation time.
      type: str
    start_time:
      description: RFC 3339 start time of the container; null while the job waits.
      type: str
    end_time:
      description: RFC 3339 end time of a finished job.
      type: str
    namespace:
      description: The Job's namespace.
      type: str
    partition:
      description: The Kueue LocalQueue the Job was queued to (its label C(kueue.x-k8s.io/queue-name)), if any.
      type: str
    nodes:
      description: The node the Pod runs or ran on.
      type: str
    pod:
      description: The name of the Job's newest Pod.
      type: str
    native:
      description: The Job (C(job)) and its newest Pod (C(pod)) as the API returned them, without C(managedFields).
      type: dict
  sample: {"job_id": "exit3-1a2b3c4d5e6f", "phase": "failed", "exit_code": 3, "native_state": "Failed", "failure_class": "non_zero_exit"}
error:
  description: The typed error when the task failed on a Bridge error.
  returned: on failure
  type: dict
  sample: {"type": "SpecError", "field": "resources.cpus_per_task", "reason": "1000 CPUs requested, but the largest node has 4 allocatable (node-1: 4)"}
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
    module = AnsibleModule(**job_module_args(backend_connection_options("kubernetes")))
    main_for(module, client_of("kubernetes"), run_job)


if __name__ == "__main__":
    main()
