#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: placement
short_description: Choose which of several backends and which of its queues a job fits, and say why not the others
version_added: 0.1.0
description:
  - Checks one job spec against the queues of several candidate backends (Slurm partitions, LSF
    queues, Kueue LocalQueues, IBM Quantum devices; a whole Ray or Kubernetes cluster where there is
    no queue to choose) and returns the backend and queue chosen by O(policy), with the reason every
    other candidate and queue was not taken. The BridgeJob controller places a BridgeJob's
    C(spec.placement) with the same logic.
  - A candidate is either a connection, whose capacity is read once (a fixed number of requests
    whatever the number of jobs there, as each backend's docs page says), or the capacity records
    themselves (O(candidates[].capacity), such as the inventory plugins' host variable
    C(bridge_capacity)), in which case nothing is read.
  - A candidate whose capacity cannot be read is not ready and rejected with the error. A spec field
    a candidate's backend refuses (docs/spec.md's field table) rejects that candidate with the
    table's reason; each queue is checked for its state, run-time limit, nodes per job, CPUs,
    memory and GPUs per node, GPU types, node features and, for IBM Quantum, qubits. A limit a
    record does not know (null) lets the job pass.
  - With O(identity), a job that already carries it on a connected candidate is where the job is
    placed, whatever the capacity says, so that a job placed and submitted before never lands on a
    second backend (one lookup per connected candidate).
  - Submits nothing and changes nothing; the task fails when the job fits no candidate, with every
    reason in RV(placement.rejected). Run the job with M(bridge.hpc.job) on the chosen backend and queue.
author:
  - Bridge developers (@bridge-hpc)
options:
  spec:
    description:
      - The job spec, with the options of M(bridge.hpc.job) (docs/spec.md lists them) but the
        connection, C(backend) and C(state); validated as that module validates them. C(script) is
        required, since what a backend can run depends on it (an OpenQASM 3 circuit for IBM Quantum,
        a C(#!) program for the others).
      - A C(queue) here restricts every candidate to that queue.
    type: dict
    required: true
  candidates:
    description:
      - The backends to choose from, in the order O(policy=FirstFit) tries them.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: How the result and the reasons name this candidate, such as C(cluster-a).
        type: str
        required: true
      backend:
        description: The candidate's kind of resource manager.
        type: str
        required: true
        choices: [kubernetes, lsf, quantum, ray, slurm]
      queues:
        description:
          - Restrict the candidate to these of its queues (partitions, LSF queues, LocalQueues, devices).
        type: list
        elements: str
      capacity:
        description:
          - The candidate's queues as capacity records (the keys of the inventory plugins' C(bridge_capacity)),
            used instead of reading them; the connection options are not used then.
          - A key a record leaves out is unknown.
        type: list
        elements: dict
      url:
        description: As O(bridge.hpc.job#module:url).
        type: str
      user:
        description: As O(bridge.hpc.job#module:user).
        type: str
      token:
        description: As O(bridge.hpc.job#module:token). Never logged, never part of a result or an error message.
        type: str
      token_file:
        description: As O(bridge.hpc.job#module:token_file).
        type: path
      password:
        description: As O(bridge.hpc.job#module:password). Never logged, never part of a result or an error message.
        type: str
      identity_key:
        description: As O(bridge.hpc.job#module:identity_key). Never logged, never part of a result or an error message.
        type: str
      api_version:
        description: As O(bridge.hpc.job#module:api_version).
        type: str
      iam_url:
        description: As O(bridge.hpc.job#module:iam_url).
        type: str
      api_key:
        description: As O(bridge.hpc.job#module:api_key). Never logged, never part of a result or an error message.
        type: str
      service_crn:
        description: As O(bridge.hpc.job#module:service_crn).
        type: str
      kubeconfig:
        description: As O(bridge.hpc.job#module:kubeconfig).
        type: path
      context:
        description: As O(bridge.hpc.job#module:context).
        type: str
      kubeconfig_content:
        description: As O(bridge.hpc.job#module:kubeconfig_content). Never logged, never part of a result or an error message.
        type: str
      namespace:
        description: As O(bridge.hpc.job#module:namespace); its Kueue LocalQueues are the candidate's queues.
        type: str
      gpu_resource:
        description: As O(bridge.hpc.job#module:gpu_resource).
        type: str
        default: nvidia.com/gpu
      validate_certs:
        description: As O(bridge.hpc.job#module:validate_certs).
        type: bool
        default: true
      ca_path:
        description: As O(bridge.hpc.job#module:ca_path).
        type: path
      timeout:
        description: As O(bridge.hpc.job#module:timeout).
        type: float
        default: 30.0
      retries:
        description: As O(bridge.hpc.job#module:retries).
        type: int
        default: 3
  identity:
    description:
      - The identity the job is run with (O(bridge.hpc.job#module:identity)). Each connected candidate
        is asked for a job carrying it first; the first that has one is the placement (RV(placement.found)),
        on the queue that job is in where the manager says it.
    type: str
  policy:
    description:
      - V(FirstFit) takes the first candidate the job fits, in the order given, and of its queues the
        default first, then the others in order.
      - V(LeastQueued) takes, of every candidate and queue the job fits, the one with the fewest jobs
        pending (unknown counts as none), then the fewest running, then the first in order.
    type: str
    default: FirstFit
    choices: [FirstFit, LeastQueued]
attributes:
  check_mode:
    support: full
    description: Reads and decides as it does outside check mode; it never changes anything.
  diff_mode:
    support: none
    description: Nothing changes, so there is nothing to show.
requirements:
  - httpx
  - kubernetes (the Python client, for a candidate with O(candidates[].backend=kubernetes))
seealso:
  - module: bridge.hpc.job
  - plugin: bridge.hpc.slurm
    plugin_type: inventory
"""

EXAMPLES = r"""
- name: Where does a 2-GPU job fit, the cluster first
  bridge.hpc.placement:
    spec:
      script: "#!/bin/bash\nnvidia-smi\n"
      resources: {gpus: 2, memory: 32G, time_limit: "04:00:00"}
    candidates:
      - {name: cluster-a, backend: slurm, url: https://slurm-a.example.org:6820, user: alice, token: "{{ jwt_a }}"}
      - {name: cluster-b, backend: lsf, url: https://pac.example.org:8443/platform, user: alice, password: "{{ pac_password }}"}
      - {name: ray, backend: ray, url: http://ray-head.example.org:8265}
  register: where

- name: Run it there
  bridge.hpc.job:
    backend: "{{ where.placement.type }}"
    queue: "{{ where.placement.queue | default(omit, true) }}"
    url: "{{ {'cluster-a': 'https://slurm-a.example.org:6820', 'cluster-b': 'https://pac.example.org:8443/platform',
              'ray': 'http://ray-head.example.org:8265'}[where.placement.backend] }}"
    script: "#!/bin/bash\nnvidia-smi\n"
    resources: {gpus: 2, memory: 32G, time_limit: "04:00:00"}

- name: The least queued Slurm partition, from the inventory (bridge.hpc.slurm) without a request
  bridge.hpc.placement:
    spec: {script: "#!/bin/bash\nhostname\n", resources: {nodes: 2}}
    policy: LeastQueued
    candidates:
      - name: cluster-a
        backend: slurm
        capacity: "{{ groups['slurm_partitions'] | map('extract', hostvars, 'bridge_capacity') | list }}"
"""

RETURN = r"""
placement:
  description: The choice, and why every other candidate and queue was not taken.
  returned: always
  type: dict
  contains:
    backend:
      description: The chosen candidate's O(candidates[].name); null when the job fits none.
      type: str
      sample: cluster-a
    type:
      description: The chosen candidate's O(candidates[].backend); null when the job fits none.
      type: str
      sample: slurm
    queue:
      description:
        - The chosen queue (partition, LSF queue, LocalQueue, device); null when the job fits none, or
          for a backend without queues (Ray, Kubernetes without Kueue).
      type: str
      sample: gpu
    policy:
      description: The O(policy) that chose.
      type: str
      sample: FirstFit
    found:
      description: Whether a job with O(identity) exists already on the chosen candidate, which chose it.
      type: bool
      sample: false
    job_id:
      description: The id of that job; null when none was found.
      type: str
      sample: "87"
    rejected:
      description:
        - One entry per candidate or queue that was not taken, with the reason, which names the spec
          field and what the queue offers (a field the backend refuses, a limit, a candidate not ready).
        - With O(policy=FirstFit) the candidates after the chosen one are not checked.
      type: list
      elements: dict
      sample:
        - {backend: cluster-a, queue: debug, reason: "resources.gpus: 2 GPUs per node requested; the nodes of 'debug' have at most 0"}
        - {backend: ray, queue: null, reason: "not ready: Failed to read version on Ray at http://ray-head.example.org:8265: ..."}
candidates:
  description: Each candidate as it was checked, in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The candidate's name.
      type: str
    type:
      description: The candidate's backend.
      type: str
    ready:
      description: Whether its capacity could be read (always true for O(candidates[].capacity)).
      type: bool
    reason:
      description: The error that made it not ready; null when ready.
      type: str
    manager:
      description: The resource manager, as it names itself (C(Slurm), C(LSF), C(Ray), C(Kubernetes), C(IBM Quantum)); null when not read.
      type: str
    version:
      description: The manager's version where it says one (Slurm's release, Ray's, the apiserver's); null otherwise.
      type: str
    api_version:
      description: The API version in use (Slurm's REST version, IBM Quantum's API date); null where there is none.
      type: str
    queues:
      description:
        - Its capacity records, one per queue, with the keys C(name), C(state), C(usable), C(default),
          C(max_time_minutes), C(max_nodes), C(cpus_per_node), C(memory_mb_per_node), C(gpus_per_node),
          C(gpu_types), C(features), C(qubits), C(pending), C(running); null is unknown or unlimited
          (docs/inventory.md).
      type: list
      elements: dict
  sample:
    - name: cluster-a
      type: slurm
      ready: true
      reason: null
      manager: Slurm
      version: 26.05.5
      api_version: v0.0.45
      queues:
        - {name: debug, state: UP, usable: true, default: true, max_time_minutes: 30, max_nodes: 1, cpus_per_node: 2,
           memory_mb_per_node: 4000, gpus_per_node: 0, gpu_types: [], features: [], qubits: null, pending: 0, running: 1}
error:
  description: The typed error when the spec or a capacity record is invalid.
  returned: on failure
  type: dict
  sample: {"type": "SpecError", "field": "spec.resources.memory", "reason": "spec.resources.memory: '4X' is not a memory size"}
"""

import copy

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.bridge.hpc.plugins.module_utils._backend import QUEUE_KEYS, queue_record
from ansible_collections.bridge.hpc.plugins.module_utils._errors import BridgeError, SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._module import (
    any_backend_options,
    fail_on_bridge_error,
    hide_client_secrets,
    require_httpx,
)
from ansible_collections.bridge.hpc.plugins.module_utils._placement import POLICIES, place
from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS
from ansible_collections.bridge.hpc.plugins.module_utils._spec import JOB_SPEC_OPTIONS, normalize_spec

# What stands in for the script while the fields every backend reads alike are checked once: the
# script itself is checked per candidate (a circuit for IBM Quantum, a #! program for the others).
ANY_PROGRAM = "#!/bin/sh\n"


def candidate_options():
    """The suboptions of one candidate: every backend's connection options, its name and backend,
    the queues it is restricted to, or its capacity records."""
    options = any_backend_options()
    options["backend"] = dict(type="str", required=True, choices=sorted(BACKENDS))
    options.update(name=dict(type="str", required=True), queues=dict(type="list", elements="str"),
                   capacity=dict(type="list", elements="dict"))
    return options


def checked_spec(spec):
    """The job spec validated as bridge.hpc.job validates its options; SpecError naming spec.<field>."""
    options = copy.deepcopy(JOB_SPEC_OPTIONS)
    options["script"]["required"] = True
    checked = ArgumentSpecValidator(options).validate(spec)
    if checked.error_messages:
        raise SpecError("spec", "; ".join(checked.error_messages))
    params = checked.validated_parameters
    try:
        normalize_spec(dict(params, script=ANY_PROGRAM))
    except SpecError as exc:
        raise SpecError("spec.%s" % exc.field, exc.reason.split(": ", 1)[-1])
    return params


def given_capacity(index, records):
    """Capacity records given as an option, every key of QUEUE_KEYS filled in."""
    queues = []
    for number, record in enumerate(records):
        try:
            queues.append(queue_record(**record))
        except KeyError as exc:
            raise SpecError("candidates[%d].capacity[%d].%s" % (index, number, exc.args[0]),
                            "is not a key of a capacity record; allowed: %s" % ", ".join(QUEUE_KEYS))
    return {"manager": None, "version": None, "api_version": None, "queues": queues}


def read_capacity(module, option, identity):
    """(capacity, None, the job carrying `identity` or None) of one connected candidate, or (None,
    why not, None) when it cannot be read."""
    backend = BACKENDS[option["backend"]]
    client = None
    try:
        client = backend.from_options(option.get)
        capacity = client.capacity()
        return capacity, None, client.find(identity) if identity else None
    except BridgeError as exc:
        return None, str(exc), None
    finally:
        if client is not None:
            hide_client_secrets(module, client)
            for warning in client.warnings:
                module.warn("%s: %s" % (option["name"], warning))
            client.close()


def checked_candidates(module):
    """Each candidate with its capacity, given or read (once), and the job carrying the identity
    where one has it."""
    candidates, names = [], set()
    for index, option in enumerate(module.params["candidates"]):
        if option["name"] in names:
            raise SpecError("candidates[%d].name" % index, "'%s' names an earlier candidate too; names must be unique"
                            % option["name"])
        names.add(option["name"])
        if option["capacity"] is not None:
            capacity, reason, job = given_capacity(index, option["capacity"]), None, None
        else:
            capacity, reason, job = read_capacity(module, option, module.params["identity"])
        candidates.append(dict(capacity or {"manager": None, "version": None, "api_version": None, "queues": []},
                               name=option["name"], type=option["backend"], ready=reason is None, reason=reason,
                               allowed_queues=option["queues"], job=job))
    return candidates


def placed(spec, candidates, policy):
    """_placement.place's choice, unless a candidate has the job already: then that one, without
    checking anything (the job is there; where it fits no longer matters)."""
    existing = next((candidate for candidate in candidates if candidate["job"]), None)
    if existing is None:
        return dict(place(spec, candidates, policy), found=False, job_id=None)
    job = existing["job"]
    return {"backend": existing["name"], "type": existing["type"], "policy": policy, "rejected": [], "waiting": [],
            "queue": job.get("partition") or job.get("queue") or job.get("device") or None, "found": True,
            "job_id": job["job_id"]}


def main():
    module = AnsibleModule(argument_spec=dict(
        spec=dict(type="dict", required=True),
        candidates=dict(type="list", elements="dict", required=True, options=candidate_options()),
        policy=dict(type="str", default="FirstFit", choices=list(POLICIES)),
        identity=dict(type="str"),
    ), supports_check_mode=True)
    require_httpx(module)
    try:
        spec = checked_spec(module.params["spec"])
        candidates = checked_candidates(module)
        placement = placed(spec, candidates, module.params["policy"])
    except BridgeError as exc:
        fail_on_bridge_error(module, exc)
    placement.pop("waiting")
    result = dict(changed=False, placement=placement,
                  candidates=[dict((key, value) for key, value in candidate.items() if key not in ("allowed_queues", "job"))
                              for candidate in candidates])
    if placement["backend"] is None:
        module.fail_json(msg="the job fits none of the candidates: %s" % "; ".join(
            "%s%s: %s" % (r["backend"], "/%s" % r["queue"] if r["queue"] else "", r["reason"])
            for r in placement["rejected"]), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
