#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: job_output
short_description: Read the end of a Slurm or LSF batch job's stdout and stderr files
version_added: 0.1.0
description:
  - Finds where a batch job writes its stdout and stderr from the job as M(bridge.hpc.slurm_job_info) or
    M(bridge.hpc.lsf_job_info) return it, and reads the end of each file on the host the task runs on.
    Delegate it to a login node that sees the cluster's file system.
  - "Slurm paths are expanded as Slurm expands filename patterns (sbatch(1)): C(%j) C(%J) job id,
    C(%A) array job id, C(%a) array index, C(%b) index modulo 10, C(%x) job name, C(%u) user,
    C(%N) first node, C(%n) C(%t) 0, C(%s) C(batch), C(%%) a percent sign, a number after C(%) zero-pads,
    and a backslash anywhere turns expansion off. Without C(--output) the file is C(slurm-%j.out)
    (C(slurm-%A_%a.out) for an array task) in the job's working directory; without C(--error) stderr
    is in the stdout file."
  - LSF paths expand C(%J) (job id) and C(%I) (array index, 0 outside an array). Without C(-e) stderr is
    in the stdout file; without C(-o) LSF mails the output and there is no file.
  - Relative paths are relative to the job's working directory.
  - Reads only; works for queued (no file yet), running and finished jobs.
author:
  - Bridge developers (@bridge-hpc)
options:
  backend:
    description:
      - The workload manager the job ran on.
    type: str
    required: true
    choices: [slurm, lsf]
  job:
    description:
      - The job, as the C(job) result of M(bridge.hpc.slurm_job_info) or M(bridge.hpc.lsf_job_info)
        (or M(bridge.hpc.job_info)). With C(include_native=true) its array ids are used too.
    type: dict
    required: true
  tail_bytes:
    description:
      - Return at most this many last bytes of each file. 65536 when neither this nor O(tail_lines) is set.
    type: int
  tail_lines:
    description:
      - Return at most this many last lines (of the last O(tail_bytes) bytes when both are set).
    type: int
  path_prefix:
    description:
      - Put before every path, for a cluster whose nodes see the file system under another root than
        the host this runs on (a chroot).
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    description: Reads only.
  diff_mode:
    support: none
seealso:
  - module: bridge.hpc.slurm_job_info
  - module: bridge.hpc.lsf_job_info
  - role: bridge.hpc.stage
    description: Reads a job's output on the login node with this module.
"""

EXAMPLES = r"""
- name: The job
  bridge.hpc.slurm_job_info:
    job_id: "{{ submitted.job_id }}"
    include_native: true
  register: info

- name: The last 50 lines of its output, read on the login node
  bridge.hpc.job_output:
    backend: slurm
    job: "{{ info.job }}"
    tail_lines: 50
  delegate_to: login1
  register: output

- name: Show them
  ansible.builtin.debug:
    msg: "{{ output.stdout_file.text }}"
"""

RETURN = r"""
stdout_file:
  description: The end of the stdout file.
  returned: always
  type: dict
  contains:
    path:
      description: The expanded path; null for an LSF job without C(-o).
      type: str
    exists:
      description: Whether the file exists (not yet, for a queued job).
      type: bool
    size:
      description: Size of the whole file in bytes.
      type: int
    text:
      description: The end of the file, decoded as UTF-8; undecodable bytes become U+FFFD.
      type: str
    truncated:
      description: Whether C(text) is less than the whole file.
      type: bool
  sample: {"path": "/home/alice/run-42.out", "exists": true, "size": 6, "text": "hello\n", "truncated": false}
stderr_file:
  description: The end of the stderr file, as RV(stdout_file) plus C(same_as_stdout).
  returned: always
  type: dict
  contains:
    same_as_stdout:
      description: Whether stderr goes to the stdout file (then the fields repeat stdout's).
      type: bool
  sample: {"path": "/home/alice/run-42.out", "exists": true, "size": 6, "text": "hello\n", "truncated": false,
           "same_as_stdout": true}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.bridge.hpc.plugins.module_utils._errors import BridgeError
from ansible_collections.bridge.hpc.plugins.module_utils._job_output import read_output


def main():
    module = AnsibleModule(
        argument_spec=dict(
            backend=dict(type="str", required=True, choices=["slurm", "lsf"]),
            job=dict(type="dict", required=True),
            tail_bytes=dict(type="int"),
            tail_lines=dict(type="int"),
            path_prefix=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        result = read_output(params["backend"], params["job"], params["path_prefix"], params["tail_bytes"],
                             params["tail_lines"])
    except BridgeError as exc:
        # Runs on a login node: no _module import, which pulls in every backend's client (httpx).
        module.fail_json(msg=str(exc), error=exc.to_dict())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
