# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # Options of the batch modules the BridgeJob controller starts before their work exists.
    DOCUMENTATION = r"""
options:
  handoff_pipe:
    description:
      - Path of a named pipe to read the module's work from, as one JSON object, instead of from its
        options. The BridgeJob controller starts its playbooks ahead of time with this set and
        writes the work and the credentials into the pipe when a custom resource arrives, which
        saves the start of ansible-playbook and the module (about 1.4 s) and keeps the token out of
        files, extra vars and the environment.
      - The object may hold the keys the module lists in its description and the connection options
        C(url), C(namespace), C(api_version), C(iam_url), C(validate_certs) and C(ca_path); they replace
        the options of the same names. The controller hands the connection over this way because a
        value in the pipe is data, while an extra var holding a Jinja expression would be rendered as
        a template. A handed-over secret (C(token), LSF's C(password), IBM Quantum's C(api_key)) is scrubbed from all
        output like the option of its name.
      - When nothing is written within O(handoff_timeout) seconds the module ends unchanged with no
        results. It ends so at once, too, when a C(controller.lock) file beside the pipe is no longer
        locked (C(flock)) by anyone; the controller that made the pipe holds that lock while it lives,
        and is gone.
    type: path
  handoff_timeout:
    description:
      - Seconds to wait for the work on O(handoff_pipe).
    type: int
    default: 900
  credentials:
    description:
      - The backend's credentials as one dictionary of the connection options they set (C(user) and
        C(token) for Slurm, C(token) for Ray, C(user) and C(password) for LSF, C(api_key) and
        C(service_crn) for IBM Quantum); they replace the options of the same names, and other keys are refused.
      - This lets one task serve every backend, as the C(playbooks/bridgejob_*.yml) playbooks run by hand do.
        Every value in it is masked in the output. Credentials handed over through O(handoff_pipe) win.
    type: dict
"""
