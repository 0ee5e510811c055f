# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: workflow_plan
short_description: Check a workflow's steps and put them in the order their dependencies need
version_added: 0.1.0
description:
  - Validates the steps of a P(bridge.hpc.workflow#role) workflow before anything is submitted and returns them in an
    order where every step comes after the steps it names in C(after); steps without dependencies
    between them keep the order they were given in.
  - Fails, naming the step and the field, on a missing or duplicate step name, a name that cannot
    be part of a job identity, an unknown backend, a field the step does not take, an C(after) that
    names no step, and a dependency cycle (the message lists the cycle).
  - Also checks O(backends), the connection settings per backend, and marks each step to run or to
    skip. A step whose backend has no settings (or an empty C(url), for the backends that need one)
    is skipped, with the reason.
  - A step with C(backend=auto) runs where M(bridge.hpc.placement) places it when its turn comes,
    among its C(candidates) (names of O(backends) entries, each a backend) or, without them, every configured
    backend in the order of O(backends), the unconfigured ones left out; C(placement_policy) is the
    module's O(bridge.hpc.placement#module:policy). Such a step is skipped when none of its
    candidates is configured.
  - Only the fields C(name), C(backend), C(after), C(candidates) and C(placement_policy) of a step
    are read, so the rest of a step may refer to results of earlier steps that do not exist yet.
positional: _input, workflow, backends
options:
  _input:
    description: The steps, as the role's C(workflow_steps).
    type: list
    elements: dict
    required: true
  workflow:
    description: The workflow's name, the first part of every step's job identity (C(<workflow>.<step>)).
    type: str
    required: true
  backends:
    description: Connection settings per backend, as the role's C(workflow_backends).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: The order steps run in, and which run at all
  ansible.builtin.debug:
    msg: "{{ steps | bridge.hpc.workflow_plan('nightly', {'slurm': {'url': 'http://127.0.0.1:6820'}}) }}"
  vars:
    steps:
      - {name: summarise, backend: kubernetes, after: [prepare], script: "#!/bin/sh\ntrue\n"}
      - {name: prepare, backend: slurm, script: "#!/bin/bash\ntrue\n"}
# [{"name": "prepare", "backend": "slurm", "after": [], "identity": "nightly.prepare", "run": true, "reason": null},
#  {"name": "summarise", "backend": "kubernetes", "after": ["prepare"], "identity": "nightly.summarise", "run": false,
#   "reason": "backend 'kubernetes' is not configured: workflow_backends has no settings for it"}]
"""

RETURN = r"""
_value:
  description:
    - One entry per step, in the order to run them.
    - Each has C(name), C(backend), C(after) (a list), C(identity) (C(<workflow>.<step>)), C(run) (whether
      its backend is configured) and C(reason) (why it is skipped, or null).
    - A step with C(backend=auto) also has C(candidates), the configured backends to place it on, and
      C(policy).
  type: list
  elements: dict
"""

import re

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.six import string_types

from ansible_collections.bridge.hpc.plugins.module_utils._placement import POLICIES
from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS
from ansible_collections.bridge.hpc.plugins.module_utils._spec import IDENTITY_PATTERN, JOB_SPEC_OPTIONS

# Step and workflow names become the identity <workflow>.<step>: no dot inside either part, so the
# two parts can always be told apart, and what is left is what every backend's identity allows.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
# What a step takes besides the job spec: the workflow's own fields, what bridge.hpc.stage does for
# the step, and the job module's script_file and waiting. The identity is the workflow's to give.
STEP_FIELDS = frozenset(["name", "backend", "after", "job_name", "stage_in", "stage_out", "job_output", "script_file",
                         "wait_timeout", "poll_interval", "candidates", "placement_policy"])
# The backend of a step that bridge.hpc.placement places among its candidates.
AUTO = "auto"
SPEC_FIELDS = frozenset(JOB_SPEC_OPTIONS) - frozenset(["identity", "name"])
ALLOWED_FIELDS = STEP_FIELDS | SPEC_FIELDS


def fail(message):
    raise AnsibleFilterError("workflow: %s; nothing was submitted" % message)


def check_name(value, what):
    if not isinstance(value, string_types) or not NAME_PATTERN.match(value):
        fail("%s %r must be letters, digits, '_' and '-', starting with a letter or digit" % (what, value))
    return to_text(value)


def check_backends(backends):
    """The connection settings: known backends, and only the options each backend's modules take."""
    if backends is None:
        return {}
    if not isinstance(backends, dict):
        fail("workflow_backends must be a dict of backend name to settings, got %s" % type(backends).__name__)
    for name, settings in backends.items():
        if name not in BACKENDS:
            fail("workflow_backends.%s is not a backend; allowed: %s" % (name, ", ".join(sorted(BACKENDS))))
        if settings is None:
            continue
        if not isinstance(settings, dict):
            fail("workflow_backends.%s must be a dict of connection settings" % name)
        allowed = BACKENDS[name].connection_options()
        unknown = sorted(set(settings) - set(allowed))
        if unknown:
            fail("workflow_backends.%s.%s is not a connection setting of %s; allowed: %s" % (
                name, unknown[0], name, ", ".join(sorted(allowed))))
    return backends


def skip_reason(backend, backends):
    """Why a step of `backend` cannot run (its backend is not configured), or None."""
    settings = backends.get(backend) or {}
    if not any(value not in (None, "") for value in settings.values()):
        return "backend '%s' is not configured: workflow_backends has no settings for it" % backend
    if BACKENDS[backend].URL_NAME is not None and not settings.get("url"):
        return "backend '%s' is not configured: workflow_backends.%s.url is empty" % (backend, backend)
    return None


def read_step(index, step):
    """name, backend and after of one step, checked; no other field is read (see DOCUMENTATION)."""
    where = "workflow_steps[%d]" % index
    if not isinstance(step, dict):
        fail("%s must be a dict, got %s" % (where, type(step).__name__))
    if "name" not in step:
        fail("%s has no name" % where)
    name = check_name(step["name"], "%s.name" % where)
    where = "step '%s'" % name
    unknown = sorted(set(step) - ALLOWED_FIELDS)
    if unknown:
        fail("%s: field '%s' is not allowed%s; allowed: %s" % (
            where, unknown[0], " (the workflow gives every job its identity <workflow>.<step>)"
            if unknown[0] == "identity" else "", ", ".join(sorted(ALLOWED_FIELDS))))
    backend = step.get("backend")
    if backend not in BACKENDS and backend != AUTO:
        fail("%s: backend %r is not a backend; allowed: %s, or %s to place the step" % (
            where, backend, ", ".join(sorted(BACKENDS)), AUTO))
    after = step.get("after") or []
    if isinstance(after, string_types):
        after = [after]
    if not isinstance(after, list) or not all(isinstance(item, string_types) for item in after):
        fail("%s: after must be a list of step names" % where)
    read = dict(name=name, backend=to_text(backend), after=[to_text(item) for item in after])
    if backend != AUTO:
        for field in ("candidates", "placement_policy"):
            if field in step:
                fail("%s: %s is for a step with backend %s" % (where, field, AUTO))
        return read
    candidates = step.get("candidates")
    if candidates is not None and (not isinstance(candidates, list) or not candidates
                                   or not all(item in BACKENDS for item in candidates)):
        fail("%s: candidates must be a non-empty list of backends (names of workflow_backends entries); allowed: %s" % (
            where, ", ".join(sorted(BACKENDS))))
    policy = step.get("placement_policy", POLICIES[0])
    if policy not in POLICIES:
        fail("%s: placement_policy %r is not a policy; allowed: %s" % (where, policy, ", ".join(POLICIES)))
    read.update(candidates=None if candidates is None else [to_text(item) for item in candidates], policy=to_text(policy))
    return read


def find_cycle(steps):
    """A dependency cycle as a list of names (first == last), or None. Depth-first, in given order."""
    needs = dict((step["name"], step["after"]) for step in steps)
    state = {}

    def visit(name, path):
        state[name] = "open"
        path.append(name)
        for dependency in needs[name]:
            if state.get(dependency) == "open":
                return path[path.index(dependency):] + [dependency]
            if dependency not in state:
                cycle = visit(dependency, path)
                if cycle:
                    return cycle
        state[name] = "done"
        path.pop()
        return None

    for step in steps:
        if step["name"] not in state:
            cycle = visit(step["name"], [])
            if cycle:
                return cycle
    return None


def in_dependency_order(steps):
    """Every step after what it needs; otherwise the order given (the earliest ready step first)."""
    placed, ordered = set(), []
    while len(ordered) < len(steps):
        step = next(s for s in steps if s["name"] not in placed and set(s["after"]) <= placed)
        placed.add(step["name"])
        ordered.append(step)
    return ordered


def workflow_plan(steps, workflow, backends=None):
    workflow = check_name(workflow, "workflow_name")
    backends = check_backends(backends)
    if not isinstance(steps, list) or not steps:
        fail("workflow_steps must be a non-empty list of steps")
    read, seen = [], set()
    for index, step in enumerate(steps):
        step = read_step(index, step)
        if step["name"] in seen:
            fail("step name '%s' is used twice; step names must be unique" % step["name"])
        seen.add(step["name"])
        read.append(step)
    for step in read:
        for dependency in step["after"]:
            if dependency not in seen:
                fail("step '%s': after names '%s', which is not a step; steps: %s" % (
                    step["name"], dependency, ", ".join(s["name"] for s in read)))
    cycle = find_cycle(read)
    if cycle:
        fail("the steps depend on each other in a cycle: %s" % " -> ".join(cycle))
    plan = []
    for step in in_dependency_order(read):
        identity = "%s.%s" % (workflow, step["name"])
        if not IDENTITY_PATTERN.match(identity):
            fail("step '%s': the job identity '%s' is longer than 128 characters; shorten the workflow or step name"
                 % (step["name"], identity))
        if step["backend"] == AUTO:
            step, reason = placed_step(step, backends)
        else:
            reason = skip_reason(step["backend"], backends)
        plan.append(dict(step, identity=identity, run=reason is None, reason=reason))
    return plan


def placed_step(step, backends):
    """(a step of backend auto with its configured candidates, why it is skipped or None)."""
    named = step["candidates"] if step["candidates"] is not None else [to_text(name) for name in backends]
    configured = [name for name in named if skip_reason(name, backends) is None]
    reason = None
    if not configured:
        reason = "none of the candidates %s is configured in workflow_backends" % (", ".join(named) or "(none)")
    return dict(step, candidates=configured), reason


class FilterModule(object):
    def filters(self):
        return {"workflow_plan": workflow_plan}
