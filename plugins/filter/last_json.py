# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: last_json
short_description: The last line of a job's output that is a JSON object
version_added: 0.1.0
description:
  - Reads a job's output (a Slurm or LSF job's stdout, a Ray driver log, a Kubernetes Pod's log) from
    its end and returns the first line that is a whole JSON object, parsed.
  - This is how a job hands data to later steps of a P(bridge.hpc.workflow#role) workflow, by printing
    one JSON object on a line of its own. Lines the manager adds around the job's own output (Ray's
    C(Running entrypoint for job ...) comes after it) are passed over.
positional: _input, default
options:
  _input:
    description: The output text.
    type: str
    required: true
  default:
    description: What to return when no line is a JSON object.
    type: raw
    default: {}
"""

EXAMPLES = r"""
- name: The parameters the prepare job printed last
  ansible.builtin.debug:
    msg: "{{ 'Runtime env is setting up.\n{\"theta\": 0.5}\nRunning entrypoint for job x\n' | bridge.hpc.last_json }}"
# {"theta": 0.5}
"""

RETURN = r"""
_value:
  description: The parsed object, or O(default).
  type: raw
"""

import json

from ansible.module_utils.six import string_types


def last_json(text, default=None):
    if default is None:
        default = {}
    if not isinstance(text, string_types):
        return default
    for line in reversed(text.splitlines()):
        line = line.strip()
        if not (line.startswith("{") and line.endswith("}")):
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return default


class FilterModule(object):
    def filters(self):
        return {"last_json": last_json}
