# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The job spec's fields, each written once. Internal to this collection.

Every field of the backend-neutral job spec is one entry of FIELDS: its Ansible type, its doc
text (true for every backend), its BridgeJob schema, and for each backend either how it compiles
or why it is refused. From this table come the modules' argument spec (`argument_spec`), the
refusal of a field a backend cannot honour (`refusal`), the BridgeJob controller's camelCase
mapping, and -- through tools/generate_spec.py -- the `job_spec` doc fragment, the CRD's
properties and immutability rules, and the table in docs/spec.md. A new field is a new entry here
plus its compilation in each backend that compiles it; tests/unit/test_fields.py crosses every
field with every backend (compiled, or refused with its reason, never dropped).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import re


class Compiles(collections.namedtuple("Compiles", "how")):
    """The backend honours the field; `how` says what it becomes there (doc text)."""

    refused = False


class Refuses(collections.namedtuple("Refuses", "why allowed")):
    """The backend refuses the field when it is set, saying `why`; a value in `allowed` (such as one
    node for a backend whose job is one task) means nothing there and is accepted."""

    refused = True

    def __new__(cls, why, allowed=()):
        return super(Refuses, cls).__new__(cls, why, tuple(allowed))

    def refuses(self, value):
        return value not in self.allowed


class ByBridge(collections.namedtuple("ByBridge", "how")):
    """Bridge itself does what the field asks, around the backend's request (retries, reading the
    job's output): nothing of it is compiled into the request; `how` says what Bridge does there."""

    refused = False


# One field. `name` is its path in the spec ("resources.gpus"); `key` the key of the normalized
# spec it becomes (memory -> memory_mb); `option` its Ansible argument spec; `doc` its description
# (Ansible markup); `crd` its BridgeJob schema without description (None: not a BridgeJob field);
# `backends` maps each backend to Compiles or Refuses; `sample` is a value the crossing test sets.
Field = collections.namedtuple("Field", "name key option doc crd backends sample")

ONLY_ONE_TASK = "more than one is refused, since %s (allowed: 1 or unset)"
K8S_ONE_POD = ONLY_ONE_TASK % "a Job of Bridge is one Pod of one task; run more with several Jobs or backend_options"
RAY_ONE_DRIVER = ONLY_ONE_TASK % "a Ray job is one driver process; it starts its own tasks and actors"
QUANTUM_NO_CLASSICAL = "a primitive run asks for no classical resources; only resources.time_limit applies"
POD_LOG = "a Pod's output goes to the Pod log API (k8s_job_info logs=true), not to a file"
RAY_LOG = "Ray keeps the driver log itself; read it with bridge.hpc.ray_job_info logs=true"
MEMORY_TEXT = "a number of MiB or a size with a unit K, M, G, T (4G, 512M, 1.5GiB)"
MEMORY_RULES = [
    {"rule": "type(self) == int || self.matches('^[0-9]+([.][0-9]+)?([KMGTkmgt]([iI]?[bB])?)?$')",
     "message": "must be %s" % MEMORY_TEXT,
     "messageExpression": "'\\'' + string(self) + '\\' is not a memory size; use a number of MiB or a unit K, M, G, T "
                          "(4G, 512M, 1.5GiB)'"},
    {"rule": "type(self) == int || !self.matches('^[0.]+[A-Za-z]*$')", "message": "must be at least 1 MiB"},
]
MEMORY_SCHEMA = {"x-kubernetes-int-or-string": True, "minimum": 1, "maxLength": 32, "x-kubernetes-validations": MEMORY_RULES}
TIME_TEXT = "minutes (90), MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS"
DNS_LABEL = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

# backend_options is the managers' own request fields, free-form JSON, but bounded: the apiserver
# stores JSON nested up to 10,000 levels, much deeper than Python decodes (about 1,000), and one
# such BridgeJob stopped the controller's watch for every tenant (issue 37). Under its backend's
# key a value nests at most OPTION_LEVELS[backend] arrays and objects, each of at most OPTION_ITEMS
# items or keys, with strings of at most OPTION_LENGTH characters. The deepest of each: Kubernetes'
# tolerations > a toleration; LSF's bsub options are scalars (lsf/compile.py); Slurm's time_limit > {set, number} and room
# for one more; IBM Quantum's pubs > a PUB > parameter_values > a row (> a column); Ray's runtime_env
# > conda > dependencies > {pip} > its packages.
OPTION_LEVELS = {"kubernetes": 2, "lsf": 0, "quantum": 5, "ray": 5, "slurm": 3}
OPTION_KEYS = 64
OPTION_ITEMS = 1024
OPTION_LENGTH = 16384


def bounded_json(levels):
    """The BridgeJob schema of any JSON value at most `levels` arrays and objects deep.

    A structural schema gives each node one type, so a node that may be a scalar, an array or an
    object has none (x-kubernetes-preserve-unknown-fields) and is bounded by the validations that
    apply to the value it meets: maxItems and items to an array, maxProperties and
    additionalProperties to an object, maxLength to a string. At the last level no array or object
    may hold anything."""
    schema = {"x-kubernetes-preserve-unknown-fields": True, "maxLength": OPTION_LENGTH, "maxItems": 0,
              "maxProperties": 0}
    for _level in range(levels):
        schema = {"x-kubernetes-preserve-unknown-fields": True, "maxLength": OPTION_LENGTH, "maxItems": OPTION_ITEMS,
                  "maxProperties": OPTION_ITEMS, "items": schema, "additionalProperties": dict(schema)}
    return schema


def backend_options_schema(backend):
    """The BridgeJob schema of backendOptions.<backend>: its fields, each a bounded JSON value.

    The backends are properties of backendOptions, not its additionalProperties: CEL (the
    immutability rule) sees only nodes of one type, and a map's values must all be seen. So a key
    that names no backend is dropped (with a warning; refused by kubectl's strict validation)."""
    return {"type": "object", "maxProperties": OPTION_KEYS, "additionalProperties": bounded_json(OPTION_LEVELS[backend])}


INDEX_DOC = "a range C(0-99), a step C(0-98:2), a comma list of them (C(1,3,5-7)) or a list of numbers"
# The failure classes of _backend.FAILURE_CLASSES a job can be retried for: a cancelled job was
# cancelled by someone, and a rejected one would be rejected again.
RETRY_CLASSES = ("node_failure", "preempted", "timeout", "out_of_memory", "non_zero_exit")
# What goes wrong with a job that is not its own fault, the way Kubernetes' Pod failure policy and
# Armada retry by default.
DEFAULT_RETRY_CLASSES = ("node_failure", "preempted")
MAX_RETRIES = 100
MAX_BACKOFF_SECONDS = 86400
MAX_TAIL_LINES = 1000
OUTPUT_TAIL_BYTES = 4096
BY_BRIDGE_RETRY = dict((name, ByBridge("Bridge submits attempt C(<identity>.<n>) after the backoff"))
                       for name in ("slurm", "lsf", "kubernetes", "ray", "quantum"))
# Fields that say how Bridge conducts a job, not what the job is: they are left out of a derived
# identity, so adding a retry or an output tail to a task finds the job the task made before.
CONDUCT_FIELDS = ("retry.limit", "retry.classes", "retry.backoff_seconds", "output.tail_lines", "output.follow")

FIELDS = (
    Field("script", "script", dict(type="str"), [
        "The job script, sent byte-exact; C(rendered) shows the request it becomes (docs/spec.md).",
    ], {"type": "string", "maxLength": 262144,
        "description": "The job script, sent byte-exact: a program starting with an interpreter line (#!/bin/bash), "
                       "an OpenQASM 3 circuit for backend.type quantum. Scripts over 256 KiB go in a ConfigMap "
                       "(scriptFrom)."}, {
        "slurm": Compiles("a program whose first line names its interpreter (C(#!/bin/bash)), the batch script of "
                          "the submit request; C($(LAUNCHER)), where the parallel command starts, becomes C(srun) "
                          "with the requested tasks and nodes"),
        "lsf": Compiles("a program whose first line names its interpreter (C(#!/bin/bash)), a file uploaded with "
                        "the job and run from its submission directory; C($(LAUNCHER)), where the parallel command "
                        "starts, becomes C(blaunch) for several tasks"),
        "kubernetes": Compiles("a program whose first line names its interpreter (C(#!/bin/sh)), a ConfigMap mounted "
                               "into the Pod and run by that interpreter; C($(LAUNCHER)) is removed (one task)"),
        "ray": Compiles("a program whose first line names its interpreter (C(#!/usr/bin/env python3)), the "
                        "working_dir package's one file, run by that interpreter as the entrypoint; C($(LAUNCHER)) "
                        "is removed (one driver)"),
        "quantum": Compiles("an OpenQASM 3 circuit, the circuit of the primitive's PUBs; C($(LAUNCHER)) is refused"),
    }, "#!/bin/bash\necho other\n"),
    Field("name", "name", dict(type="str"), [
        "Job name (no spaces, commas, quotes or backslashes). Defaults to the identity.",
    ], {"type": "string", "maxLength": 200, "pattern": "^[^\\s,'\"\\\\]+$",
        "description": "Job name on the backend (no spaces, commas, quotes or backslashes); the BridgeJob's name "
                       "when unset."}, {
        "slurm": Compiles("C(name)"),
        "lsf": Compiles("C(-J)"),
        "kubernetes": Compiles("the annotation C(bridge.dev/name) (the Job's own name comes from the identity)"),
        "ray": Compiles("the metadata key C(bridge_name)"),
        "quantum": Compiles("a job tag C(bridge-name:<name>)"),
    }, "other-name"),
    Field("identity", "identity", dict(type="str"), [
        "Deterministic identity of the job; Bridge looks it up before submitting, so a job is never submitted "
        "twice.",
        "Defaults to the name plus a hash of the fields the spec sets, so the same task run again finds the same "
        "job. Give an explicit value (a run id, a ticket) to run an unchanged spec again.",
    ], None, {
        "slurm": Compiles("the comment C(bridge:<identity>)"),
        "lsf": Compiles("the job description C(-Jd bridge:<identity>)"),
        "kubernetes": Compiles("the Job's name, label C(bridge.dev/identity-hash) and annotation C(bridge.dev/identity)"),
        "ray": Compiles("the C(submission_id)"),
        "quantum": Compiles("the job tag C(bridge:<identity>)"),
    }, "other-identity"),
    Field("environment", "environment", dict(type="dict", default={}), [
        "Environment variables of the job; numbers and booleans become text (C(true), C(false)).",
    ], {"type": "object", "maxProperties": 128, "additionalProperties": {"type": "string", "maxLength": 32768},
        "description": "Environment variables of the job. Values are strings (quote numbers and booleans).",
        "x-kubernetes-validations": [{
            "rule": "self.all(k, k.matches('^[A-Za-z_][A-Za-z0-9_]{0,255}$'))",
            "message": "variable names are letters, digits and _, not starting with a digit, at most 256 characters",
            "messageExpression": "'variable name \\'' + self.filter(k, !k.matches('^[A-Za-z_][A-Za-z0-9_]{0,255}$'))[0] "
                                 "+ '\\' is not letters, digits and _ (not starting with a digit, at most 256 characters)'",
        }]}, {
        "slurm": Compiles("C(environment), with C(PATH=/usr/local/bin:/usr/bin:/bin) unless set (slurmrestd sends "
                          "no environment of its own)"),
        "lsf": Compiles("C(-env), with C(PATH=/usr/local/bin:/usr/bin:/bin) unless set; values cannot hold commas, "
                        "quotes or newlines"),
        "kubernetes": Compiles("the container's C(env); nothing is added (the image's C(PATH) applies)"),
        "ray": Compiles("C(runtime_env.env_vars)"),
        "quantum": Refuses("a primitive run has no environment; pass values as PUB parameter_values"),
    }, {"OTHER": "1"}),
    Field("working_directory", "working_directory", dict(type="str"), [
        "Working directory of the job where it runs.",
    ], {"type": "string", "maxLength": 4096}, {
        "slurm": Compiles("C(current_working_directory); C(/tmp) when unset"),
        "lsf": Compiles("C(-cwd); when unset the job runs in its submission directory, where Application Center keeps "
                        "the job's uploaded files (C(LS_SUBCWD))"),
        "kubernetes": Compiles("the container's C(workingDir); C(/bridge/work), an emptyDir, when unset"),
        "ray": Refuses("a Ray job runs in its uploaded working_dir"),
        "quantum": Refuses("a primitive run has no working directory"),
    }, "/srv/other"),
    Field("stdout", "stdout", dict(type="str"), [
        "Path of the job's standard output where the job runs.",
    ], {"type": "string", "maxLength": 4096}, {
        "slurm": Compiles("C(standard_output), with Slurm's patterns (C(%j) the job id, C(%x) its name); Slurm writes "
                          "C(slurm-%j.out) in the working directory when unset"),
        "lsf": Compiles("C(-o), with LSF's patterns (C(%J) the job id)"),
        "kubernetes": Refuses(POD_LOG),
        "ray": Refuses(RAY_LOG),
        "quantum": Refuses("results are read with bridge.hpc.quantum_job_info (results=true)"),
    }, "/srv/other.out"),
    Field("stderr", "stderr", dict(type="str"), [
        "Path of the job's standard error; merged into O(stdout) when unset.",
    ], {"type": "string", "maxLength": 4096}, {
        "slurm": Compiles("C(standard_error)"),
        "lsf": Compiles("C(-e)"),
        "kubernetes": Refuses(POD_LOG),
        "ray": Refuses(RAY_LOG),
        "quantum": Refuses("the job log is read with bridge.hpc.quantum_job_info (logs=true)"),
    }, "/srv/other.err"),
    Field("queue", "queue", dict(type="str"), [
        "Where the job waits to run: what it names differs per backend (below).",
    ], {"type": "string", "maxLength": 1024}, {
        "slurm": Compiles("C(partition), the cluster's default partition when unset; a comma list lets Slurm pick the "
                          "first that fits"),
        "lsf": Compiles("C(-q), LSF's default queue when unset"),
        "kubernetes": Compiles("a Kueue LocalQueue (label C(kueue.x-k8s.io/queue-name)); the Job starts suspended "
                               "until Kueue admits it; unset, the Job is not Kueue's and starts at once"),
        "ray": Refuses("Ray has no queues; place the driver with backend_options.ray.entrypoint_resources"),
        "quantum": Compiles("the device (C(backend)); required"),
    }, "other"),
    Field("account", "account", dict(type="str"), [
        "Account charged for the job.",
    ], {"type": "string", "maxLength": 256}, {
        "slurm": Compiles("C(account)"),
        "lsf": Compiles("the project C(-P)"),
        "kubernetes": Refuses("Kubernetes has no accounts to charge; use a namespace (option namespace) or Kueue's "
                              "LocalQueue (queue)"),
        "ray": Refuses("Ray has no accounts"),
        "quantum": Refuses("the instance is the service_crn connection option"),
    }, "other"),
    Field("qos", "qos", dict(type="str"), [
        "Quality of service or priority class of the job.",
    ], {"type": "string", "maxLength": 256}, {
        "slurm": Compiles("C(qos)"),
        "lsf": Refuses("LSF has no quality of service; use a queue or backend_options.lsf (-sla)"),
        "kubernetes": Compiles("the Pod's C(priorityClassName)"),
        "ray": Refuses("Ray has no quality of service"),
        "quantum": Refuses("IBM Quantum has no quality of service"),
    }, "other"),
    Field("constraints", "constraints", dict(type="str"), [
        "Node features the job needs.",
    ], {"type": "string", "maxLength": 1024}, {
        "slurm": Compiles("C(constraints), in Slurm's constraint syntax (C(a100&ib))"),
        "lsf": Refuses("LSF selects hosts with resource requirement strings; use backend_options.lsf with "
                       "-R \"select[...]\" (and no other Bridge-compiled -R field)"),
        "kubernetes": Refuses("use backend_options.kubernetes.node_selector"),
        "ray": Refuses("use backend_options.ray.entrypoint_label_selector or entrypoint_resources"),
        "quantum": Refuses("name the device with queue"),
    }, "other"),
    Field("exclusive", "exclusive", dict(type="bool"), [
        "Whole nodes: no other job shares the job's nodes while it runs. V(false) or unset leaves that to the "
        "manager's defaults.",
    ], {"type": "boolean"}, {
        "slurm": Compiles("C(exclusive) (C(sbatch --exclusive)); C(shared=none) from REST API v0.0.42 on"),
        "lsf": Compiles("C(-x)"),
        "kubernetes": Refuses("a Pod gets what it requests, never a whole node; size the requests (resources) or "
                              "use backend_options.kubernetes.node_selector", allowed=(False,)),
        "ray": Refuses("Ray places the driver in a running cluster, whose nodes it never reserves whole",
                       allowed=(False,)),
        "quantum": Refuses("a primitive run always has its device to itself while it runs", allowed=(False,)),
    }, True),
    Field("resources.nodes", "nodes", dict(type="int"), ["Number of nodes."], {"type": "integer", "minimum": 1}, {
        "slurm": Compiles("C(nodes)"),
        "lsf": Compiles("C(-n) with C(span[ptile]) (the same tasks on each host)"),
        "kubernetes": Refuses(K8S_ONE_POD, allowed=(1,)),
        "ray": Refuses(RAY_ONE_DRIVER, allowed=(1,)),
        "quantum": Refuses(QUANTUM_NO_CLASSICAL),
    }, 2),
    Field("resources.tasks", "tasks", dict(type="int"), ["Number of tasks (MPI ranks)."],
          {"type": "integer", "minimum": 1}, {
        "slurm": Compiles("C(tasks)"),
        "lsf": Compiles("C(-n) (one slot per CPU of each task)"),
        "kubernetes": Refuses(K8S_ONE_POD, allowed=(1,)),
        "ray": Refuses(RAY_ONE_DRIVER, allowed=(1,)),
        "quantum": Refuses(QUANTUM_NO_CLASSICAL),
    }, 2),
    Field("resources.tasks_per_node", "tasks_per_node", dict(type="int"), ["Tasks per node."],
          {"type": "integer", "minimum": 1}, {
        "slurm": Compiles("C(tasks_per_node)"),
        "lsf": Compiles("C(span[ptile])"),
        "kubernetes": Refuses(K8S_ONE_POD, allowed=(1,)),
        "ray": Refuses(RAY_ONE_DRIVER, allowed=(1,)),
        "quantum": Refuses(QUANTUM_NO_CLASSICAL),
    }, 2),
    Field("resources.cpus_per_task", "cpus_per_task", dict(type="int"), ["CPUs per task."],
          {"type": "integer", "minimum": 1}, {
        "slurm": Compiles("C(cpus_per_task)"),
        "lsf": Compiles("slots: C(-n) and C(span) count one per CPU"),
        "kubernetes": Compiles("the container's CPU request and limit"),
        "ray": Compiles("C(entrypoint_num_cpus)"),
        "quantum": Refuses(QUANTUM_NO_CLASSICAL),
    }, 2),
    Field("resources.gpus", "gpus", dict(type="int"), ["GPUs per node."],
          {"type": "integer", "minimum": 1}, {
        "slurm": Compiles("C(tres_per_node) C(gres/gpu:N) (C(gpus_per_node) before v0.0.39)"),
        "lsf": Compiles("C(-gpu num=N)"),
        "kubernetes": Compiles("the limit of the GPU resource (option gpu_resource, C(nvidia.com/gpu))"),
        "ray": Compiles("C(entrypoint_num_gpus)"),
        "quantum": Refuses(QUANTUM_NO_CLASSICAL),
    }, 2),
    Field("resources.gpu_type", "gpu_type", dict(type="str"), ["GPU type, such as C(a100); needs O(resources.gpus)."],
          {"type": "string", "maxLength": 64, "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]*$"}, {
        "slurm": Compiles("the type of the GPU request, C(gres/gpu:a100:N)"),
        "lsf": Compiles("C(-gpu gmodel=)"),
        "kubernetes": Compiles("a node selector on C(nvidia.com/gpu.product) (backend_options.kubernetes.gpu_type_label)"),
        "ray": Refuses("Ray schedules GPUs by count; select a type with backend_options.ray.entrypoint_resources "
                       "(e.g. accelerator_type:A100) or a label selector"),
        "quantum": Refuses(QUANTUM_NO_CLASSICAL),
    }, "h100"),
    Field("resources.memory", "memory_mb", dict(type="raw"), [
        "Memory per node, %s; rounded up to whole MiB." % MEMORY_TEXT.replace("(4G, 512M, 1.5GiB)", "(C(4G), C(512M))"),
    ], MEMORY_SCHEMA, {
        "slurm": Compiles("C(memory_per_node)"),
        "lsf": Compiles("the limit C(-M) and the reservation C(rusage[mem])"),
        "kubernetes": Compiles("the container's memory request and limit"),
        "ray": Compiles("C(entrypoint_memory)"),
        "quantum": Refuses(QUANTUM_NO_CLASSICAL),
    }, "3G"),
    Field("resources.memory_per_cpu", "memory_per_cpu_mb", dict(type="raw"), [
        "Memory per CPU, same syntax as O(resources.memory); exclusive with it.",
    ], MEMORY_SCHEMA, {
        "slurm": Compiles("C(memory_per_cpu)"),
        "lsf": Refuses("give resources.memory; Bridge sets LSF's job memory limit (-M) and reservation "
                       "(rusage[mem]) from it"),
        "kubernetes": Compiles("the container's memory, times its CPUs"),
        "ray": Refuses("Ray reserves driver memory as a whole; use resources.memory"),
        "quantum": Refuses(QUANTUM_NO_CLASSICAL),
    }, "3G"),
    Field("resources.time_limit", "time_limit_minutes", dict(type="raw"), [
        "Wall time limit: minutes (C(90)), C(MM:SS), C(HH:MM:SS), or days and hours as C(D-HH), C(D-HH:MM), "
        "C(D-HH:MM:SS); seconds round up to whole minutes.",
    ], {"x-kubernetes-int-or-string": True, "minimum": 1, "maxLength": 32, "x-kubernetes-validations": [
        {"rule": "type(self) == int || self.matches('^([0-9]+(:[0-5]?[0-9]){0,2}|[0-9]+-([01]?[0-9]|2[0-3])"
                 "(:[0-5]?[0-9]){0,2})$')",
         "message": "must be %s" % TIME_TEXT,
         "messageExpression": "'\\'' + string(self) + '\\' is not a time; use %s'" % TIME_TEXT},
        {"rule": "type(self) == int || !self.matches('^[-0:]+$')", "message": "must be longer than zero"},
    ]}, {
        "slurm": Compiles("C(time_limit), in minutes"),
        "lsf": Compiles("C(-W), in minutes"),
        "kubernetes": Compiles("the Job's C(activeDeadlineSeconds): the whole minutes times 60, counted from when the Job "
                               "starts (for a Job Kueue holds, from its admission)"),
        "ray": Compiles("a C(timeout) of the whole minutes around the entrypoint (TERM, then KILL after a grace period)"),
        "quantum": Compiles("the maximum execution time C(cost), in seconds: the whole minutes times 60; the service "
                            "caps it at three hours (10800 seconds)"),
    }, 77),
    Field("array.indexes", "text", dict(type="raw"), [
        "The array's task indexes: %s. Each task sees its own index in C(BRIDGE_ARRAY_INDEX) as well as "
        "in the manager's own variable; the array ends when every task has ended, V(failed) if any failed." % INDEX_DOC,
    ], {"x-kubernetes-int-or-string": True, "maxLength": 4096, "x-kubernetes-validations": [
        {"rule": "type(self) == int || self.matches('^[0-9]+(-[0-9]+(:[0-9]+)?)?(,[0-9]+(-[0-9]+(:[0-9]+)?)?)*$')",
         "message": "must be indexes such as 0-99, 1,3,5-7 or 0-98:2"}]}, {
        "slurm": Compiles("the submit request's C(array) (sbatch C(--array)); the script runs inside a C(/bin/sh) wrapper "
                          "that sets C(BRIDGE_ARRAY_INDEX) from C(SLURM_ARRAY_TASK_ID); indexes must be below the "
                          "cluster's C(MaxArraySize)"),
        "lsf": Compiles("C(-J \"name[indexes]%parallelism\"); LSF's indexes start at 1, so a set with index 0 runs each "
                        "index one higher in C(LSB_JOBINDEX), and C(BRIDGE_ARRAY_INDEX) is the asked index"),
        "kubernetes": Compiles("an Indexed Job (C(completions), C(backoffLimitPerIndex) 0); C(JOB_COMPLETION_INDEX) counts "
                               "0..size-1, C(BRIDGE_ARRAY_INDEX) is the asked index"),
        "ray": Refuses("a Ray job is one driver, and Ray cannot submit one per index exactly once under a "
                       "parallelism; run the tasks inside the driver (ray.remote) or one job per index"),
        "quantum": Refuses("a primitive run's PUBs are its vector; put the parameter sets in backend_options.quantum "
                           "pubs"),
    }, "0-3"),
    Field("array.parallelism", "parallelism", dict(type="int"), [
        "How many of the array's tasks run at once at most; the manager's limit when unset.",
    ], {"type": "integer", "minimum": 1}, {
        "slurm": Compiles("the running-task limit C(%parallelism) of C(array)"),
        "lsf": Compiles("the running-element limit C(%parallelism) of C(-J)"),
        "kubernetes": Compiles("the Job's C(parallelism)"),
        "ray": Refuses("arrays are not run by the Ray backend"),
        "quantum": Refuses("arrays are not run by the IBM Quantum backend"),
    }, 2),
    Field("retry.limit", "limit", dict(type="int"), [
        "How many times Bridge submits the job again after it fails with a class in O(retry.classes). Each "
        "attempt has its own identity (C(<identity>.<n>)), looked up before it is submitted, so no attempt is "
        "submitted twice; an array runs only its failed indexes again.",
    ], {"type": "integer", "minimum": 0, "maximum": MAX_RETRIES}, BY_BRIDGE_RETRY, 2),
    Field("retry.classes", "classes", dict(type="list", elements="str", choices=list(RETRY_CLASSES), aliases=["on"]), [
        "The failure classes that are retried; V(node_failure) and V(preempted) when unset. The alias C(on) must "
        "be quoted in YAML, where a bare C(on) means true.",
    ], {"type": "array", "maxItems": len(RETRY_CLASSES), "items": {"type": "string", "enum": list(RETRY_CLASSES)}},
        BY_BRIDGE_RETRY, ["timeout"]),
    Field("retry.backoff_seconds", "backoff_seconds", dict(type="int"), [
        "Seconds between an attempt's end and the next attempt's submit; 0 when unset.",
    ], {"type": "integer", "minimum": 0, "maximum": MAX_BACKOFF_SECONDS}, BY_BRIDGE_RETRY, 30),
    Field("output.tail_lines", "tail_lines", dict(type="int"), [
        "Read the last lines of the job's output when it ends: at most this many lines and %d bytes, secrets "
        "scrubbed, in the result's C(output)." % OUTPUT_TAIL_BYTES,
    ], {"type": "integer", "minimum": 1, "maximum": MAX_TAIL_LINES}, {
        "slurm": ByBridge("the file of O(stdout) (C(slurm-%j.out) in the working directory when unset), read "
                          "through the login node of option C(login), since slurmrestd serves no files"),
        "lsf": ByBridge("the file of O(stdout), downloaded through Application Center"),
        "kubernetes": ByBridge("the Pod log (of the first failed index for an array)"),
        "ray": ByBridge("the job's driver log"),
        "quantum": ByBridge("the job's log"),
    }, 20),
    Field("output.follow", "follow", dict(type="bool"), [
        "Also read the end of the output while the job runs, each time it is found running (a task's run, a "
        "BridgeJob's poll): one request each time, as at its end; that output carries C(running: true) until the "
        "read at the job's end replaces it. V(false) or unset reads the output once, when the job ends.",
    ], {"type": "boolean"}, {
        "slurm": ByBridge("the same file, once the job has written it (none before)"),
        "lsf": ByBridge("the same file, downloaded whole at each read"),
        "kubernetes": ByBridge("the running Pod's log"),
        "ray": ByBridge("the driver log so far"),
        "quantum": ByBridge("the job's log so far"),
    }, True),
    Field("backend_options", "backend_options", dict(type="dict", default={}), [
        "Native request fields per backend, merged over what Bridge compiles: one key per backend, named as the "
        "backend (V(slurm), ...), of which a backend uses only its own.",
        "Bridge does not check these fields against the cluster.",
        "Each backend's fields are at most %d, each value at most %s arrays or objects deep, of at most %d items, "
        "strings at most %d characters; a key that names no backend is dropped." % (
            OPTION_KEYS, ", ".join("%d (%s)" % (OPTION_LEVELS[name], name) for name in sorted(OPTION_LEVELS)),
            OPTION_ITEMS, OPTION_LENGTH),
    ], {"type": "object", "maxProperties": 5}, {
        "slurm": Compiles("fields of the submit request's C(job), over the compiled ones (not C(comment) or C(script))"),
        "lsf": Compiles("more C(bsub) options (C(-G: group), C(-x: true)); never one Bridge compiles"),
        "kubernetes": Compiles("the Job's and Pod's settings Bridge names (image, node_selector, tolerations, ...)"),
        "ray": Compiles("fields of the JobSubmitRequest (entrypoint_resources, runtime_env, ...)"),
        "quantum": Compiles("the primitive, its PUBs and options, the session mode"),
    }, None),
)

BY_NAME = dict((field.name, field) for field in FIELDS)
RESOURCES_PREFIX = "resources."
RESOURCE_FIELDS = tuple(field for field in FIELDS if field.name.startswith(RESOURCES_PREFIX))
TOP_FIELDS = tuple(field for field in FIELDS if "." not in field.name)
# The resources group itself: an option of its own in the argument spec and the CRD.
RESOURCES_DOC = ["What the job needs, per node where it says so. Checked against the cluster before submitting "
                 "where the backend can (check mode too)."]
RESOURCES_RULES = [
    {"rule": "!has(self.gpuType) || has(self.gpus)", "message": "needs resources.gpus, the number of GPUs per node",
     "fieldPath": ".gpuType", "reason": "FieldValueRequired"},
    {"rule": "!(has(self.memory) && has(self.memoryPerCpu))", "message": "give either memory (per node) or "
     "memoryPerCpu, not both", "fieldPath": ".memoryPerCpu", "reason": "FieldValueForbidden"},
]

# A group of fields: one dict option of the argument spec and one object of the CRD. `default` is
# the option's default (resources is always a dict; the others are unset until given), `rules` the
# object's CEL rules.
Group = collections.namedtuple("Group", "name doc rules default")
GROUPS = (
    Group("resources", RESOURCES_DOC, RESOURCES_RULES, {}),
    Group("array", ["Run the job as an array of tasks, one per index (docs/spec.md, Arrays)."],
          [{"rule": "has(self.indexes)", "message": "an array needs indexes", "reason": "FieldValueRequired"}], None),
    Group("retry", ["Submit the job again when it fails for a reason worth another try (docs/spec.md, Retries). "
                    "Not part of a derived identity."], [], None),
    Group("output", ["Read the end of the job's output when it ends, or also while it runs (docs/spec.md, Output). "
                     "Not part of a derived identity."],
          [{"rule": "has(self.tailLines)", "message": "output needs tailLines", "reason": "FieldValueRequired"}], None),
)
GROUP_FIELDS = dict((group.name, tuple(field for field in FIELDS if field.name.startswith(group.name + ".")))
                    for group in GROUPS)


def leaf(field):
    """A field's own name within its group: "resources.gpus" -> "gpus"."""
    return field.name.rsplit(".", 1)[-1]


def camel(name):
    """camelCase of a snake_case name, as a BridgeJob spells it: working_directory -> workingDirectory."""
    head, _sep, rest = name.partition("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest.split("_") if part)


def argument_spec():
    """The Ansible argument spec of the job spec; modules extend it with connection and state options."""
    options = dict((field.name, dict(field.option)) for field in TOP_FIELDS)
    for group in GROUPS:
        options[group.name] = dict(type="dict", options=dict((leaf(field), dict(field.option))
                                                             for field in GROUP_FIELDS[group.name]))
        if group.default is not None:
            options[group.name]["default"] = group.default
    return options


def group_of(field):
    """The group a field belongs to ("resources" of "resources.gpus"), "" for a top-level field."""
    return field.name.rpartition(".")[0]


def value_of(spec, field):
    """The normalized spec's value of a field (None for a field of a group the spec leaves unset)."""
    group = group_of(field)
    if group:
        return (spec.get(group) or {}).get(field.key)
    return spec.get(field.key)


def is_set(value):
    """Whether a normalized value asks for something: None, False, "" and empty collections do not."""
    return value not in (None, False, "") and not (isinstance(value, (dict, list, tuple)) and not value)


def refusal(spec, backend_name):
    """(field name, why) of the first field the spec sets that the backend refuses, or None. A
    backend the table does not name (a test double) refuses nothing: tests/unit/test_fields.py
    holds every registered backend to the table."""
    for field in FIELDS:
        rule = field.backends.get(backend_name)
        value = value_of(spec, field)
        if rule is not None and rule.refused and is_set(value) and rule.refuses(value):
            return field.name, rule.why
    return None


MARKUP = re.compile(r"\b([CIOVM])\(([^()]*(?:\([^()]*\)[^()]*)*)\)")


def plain(text, code="%s"):
    """Ansible doc markup (C(x), O(x), V(x)) as plain text, code spans written with `code`."""
    return MARKUP.sub(lambda match: code % match.group(2), text)
