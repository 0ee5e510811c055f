# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The `query` option of every *_info module (module_utils/_query.py).
    DOCUMENTATION = r"""
options:
  query:
    description:
      - A L(JMESPath,https://jmespath.org/) expression that narrows the result, as the AWS CLI's C(--query)
        does. It is applied to what the module would return (its documented return values, without
        C(changed) and the other keys Ansible itself adds), and the module then returns only C(changed) and
        RV(query_result), the value it selects, so that a registered variable holds just that.
      - "For example V(jobs[?phase=='running'].job_id) (the ids of the running jobs) or
        V(job.{phase: phase, exit: exit_code}) (a dictionary of two fields)."
      - The expression is checked before any request is sent (its syntax, and that every function it calls
        exists and is given as many arguments as it takes); a bad one fails the task naming this option,
        with jmespath's own message, and nothing is contacted.
      - Needs the C(jmespath) Python library on the host the module runs on, only when this is set.
    type: str
requirements:
  - jmespath >= 1.0.1 (only with O(query))
"""
