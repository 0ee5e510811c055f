# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The login node a Slurm job's output is read on (module_utils/_login.py, LOGIN_OPTIONS).
    DOCUMENTATION = r"""
options:
  login:
    description:
      - A login node of the Slurm cluster, reached over SSH, where a finished job's stdout file is read when the
        spec asks for C(output) (Slurm only; slurmrestd does not serve a job's output). Without it, a
        Slurm spec with C(output) is refused.
      - The connection is the one the C(bridge.hpc.stage) role's login node uses, made with OpenSSH's C(ssh)
        client where the task runs, with key authentication, never a prompt (C(BatchMode)), the host key checked
        against O(login.known_hosts) or O(login.known_hosts_file) and never learned (C(StrictHostKeyChecking=yes)),
        no ssh configuration file read. One C(ssh) command per finished job reads the end of its stdout file
        (C(tail -c)), the path expanded as Slurm expands its filename patterns (see M(bridge.hpc.job_output)).
      - Log in as the user the job runs as, or one who may read its files.
    type: dict
    suboptions:
      host:
        description: Host name or address of the login node.
        type: str
        required: true
      port:
        description: SSH port.
        type: int
        default: 22
      user:
        description: User to log in as; the user the task runs as when not set.
        type: str
      private_key:
        description:
          - The private key, as text (an OpenSSH or PEM key without a passphrase). It is written to a file only
            the task's user can read for the one C(ssh) command and removed after it.
          - Never logged, never part of a result or an error message.
          - Mutually exclusive with O(login.private_key_file). Without either, C(ssh) uses its default keys.
        type: str
      private_key_file:
        description: Path of the private key file, on the host the task runs on.
        type: path
      known_hosts:
        description:
          - The login node's host key as C(known_hosts) lines (C([host]:port key-type key) for a port other
            than 22). One of O(login.known_hosts) and O(login.known_hosts_file) is required.
        type: str
      known_hosts_file:
        description: Path of a C(known_hosts) file holding the login node's host key, on the host the task runs on.
        type: path
      timeout:
        description: Seconds to wait for the SSH connection.
        type: int
        default: 30
"""
