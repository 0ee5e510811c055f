# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Glue between AnsibleModule and Bridge clients. Internal to this collection.

Clients never import AnsibleModule; this is the one place that does, so every module builds its
argspec from the same fragments and turns a BridgeError into fail_json the same way.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os

from ansible.module_utils.basic import env_fallback, missing_required_lib

from ansible_collections.bridge.hpc.plugins.module_utils._backend import PHASES
from ansible_collections.bridge.hpc.plugins.module_utils._errors import BridgeError, SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_absent, ensure_present
from ansible_collections.bridge.hpc.plugins.module_utils._login import attach_login
from ansible_collections.bridge.hpc.plugins.module_utils._query import (
    HAS_JMESPATH,
    JMESPATH_IMPORT_ERROR,
    QUERY_OPTIONS,
    compile_query,
    narrowed,
)
from ansible_collections.bridge.hpc.plugins.module_utils._spec import JOB_SPEC_OPTIONS, normalize_spec
from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS
from ansible_collections.bridge.hpc.plugins.module_utils._transport import HAS_HTTPX, HTTPX_IMPORT_ERROR


def backend_connection_options(name):
    """The connection argspec of one backend's own modules, with its environment fallbacks."""
    return BACKENDS[name].connection_options(env_fallback)


def any_backend_options():
    """The argspec of a module whose `backend` option picks the backend (job, jobs, job_info):
    every backend's connection options, each as the backend declares it, choices aside."""
    options = {}
    for backend in BACKENDS.values():
        for name, spec in backend.connection_options().items():
            spec.pop("choices", None)
            options.setdefault(name, spec)
    # url is required by each backend reached through one (Backend.require_url), not here: the
    # kubernetes backend finds its apiserver in a kubeconfig or in the cluster it runs in.
    options["backend"] = dict(type="str", required=True, choices=sorted(BACKENDS))
    return options


WAIT_OPTIONS = dict(
    wait=dict(type="bool", default=False),
    wait_timeout=dict(type="int", default=600),
    poll_interval=dict(type="float", default=5.0),
)

JOB_STATE_OPTIONS = dict(
    state=dict(type="str", default="present", choices=["present", "absent"]),
    job_id=dict(type="str"),
    script_file=dict(type="str"),
    cancel_rejected=dict(type="bool", default=True),
)


JOB_INFO_OPTIONS = dict(
    job_id=dict(type="str"),
    identity=dict(type="str"),
    name=dict(type="str"),
    phases=dict(type="list", elements="str", choices=list(PHASES)),
    include_native=dict(type="bool", default=False),
)


def job_module_args(connection, **extra_options):
    """AnsibleModule arguments of a module that makes a job present or absent (run_job)."""
    options = copy.deepcopy(connection)
    options.update(copy.deepcopy(JOB_SPEC_OPTIONS))
    options.update(copy.deepcopy(WAIT_OPTIONS))
    options.update(copy.deepcopy(JOB_STATE_OPTIONS))
    options.update(extra_options)
    return dict(argument_spec=options, mutually_exclusive=[("script", "script_file")], supports_check_mode=True)


def job_info_module_args(connection, **extra_options):
    """AnsibleModule arguments of a module that reads one job (job_id or identity) or filters the list."""
    options = copy.deepcopy(connection)
    options.update(copy.deepcopy(JOB_INFO_OPTIONS))
    options.update(copy.deepcopy(QUERY_OPTIONS))
    options.update(extra_options)
    return dict(argument_spec=options, mutually_exclusive=[("job_id", "identity")], supports_check_mode=True)


def require_httpx(module):
    if not HAS_HTTPX:
        module.fail_json(msg=missing_required_lib("httpx"), exception=HTTPX_IMPORT_ERROR)


def check_query(module):
    """Refuse a bad `query` (QUERY_OPTIONS) before anything is contacted; jmespath is needed only with one."""
    if module.params.get("query") is None:
        return
    if not HAS_JMESPATH:
        module.fail_json(msg=missing_required_lib("jmespath"), exception=JMESPATH_IMPORT_ERROR)
    compile_query(module.params["query"])


def with_query(module, result):
    """`result`, or with a `query` only `changed` and the `query_result` it selects (a small registered variable)."""
    if module.params.get("query") is None:
        return result
    return narrowed(module.params["query"], result)


def chosen_backend(params):
    """The client of the backend a module's `backend` option names (job, jobs, job_info)."""
    return BACKENDS[params["backend"]].from_options(params.get)


def client_of(name):
    """A build_client for main_for: the client of backend `name` from a module's params, its
    EXCLUSIVE options falling back to their environment variables (Backend.with_environment)."""
    backend = BACKENDS[name]
    return lambda params: backend.from_options(backend.with_environment(params.get, os.environ))


def run_job(module, client):
    """The whole of a job module once the client exists: present or absent, then exit."""
    params = module.params
    if params.get("script_file"):
        raise SpecError("script_file", "is read on the controller by this module's action plugin; "
                        "call the module by its name so the action plugin runs")
    if params["wait_timeout"] < 0 or params["poll_interval"] <= 0:
        raise SpecError("wait_timeout", "wait_timeout must be >= 0 and poll_interval > 0")
    wait_args = dict(check_mode=module.check_mode, wait=params["wait"], wait_timeout=params["wait_timeout"],
                     poll_interval=params["poll_interval"])
    attach_login(client, params)
    if params["state"] == "present":
        spec = normalize_spec(params, client)
        result = ensure_present(client, spec, cancel_rejected=params["cancel_rejected"], **wait_args)
        # An alias when the job was found under the identity an earlier Bridge derived; the spec's
        # own for a job of attempts (each attempt's job carries its attempt identity).
        job_identity = None if spec.get("retry") else (result.get("job") or {}).get("identity")
        result["identity"] = job_identity or spec["identity"]
    else:
        identity, spec = params.get("identity"), None
        if params.get("job_id") is None and identity is None and params.get("script"):
            spec = normalize_spec(params, client)
        elif params.get("job_id") is None and identity is not None and (params.get("retry") or {}).get("limit"):
            # Its latest attempt is the job to cancel: all attempt identities are looked up.
            spec = {"identity": identity, "name": params.get("name"), "retry": {"limit": params["retry"]["limit"]}}
        if params.get("job_id") is None and identity is None and spec is None:
            raise SpecError("job_id", "state=absent needs job_id, identity, or the job's spec to derive its identity")
        result = ensure_absent(client, job_id=params.get("job_id"), identity=identity, spec=spec, **wait_args)
    return finish_job_result(module, client, result)


# Job fields a job module also returns at the top level, so that `register: r` then `r.phase` works.
TOP_LEVEL_JOB_FIELDS = ("job_id", "phase", "exit_code", "signal", "failure_class", "submit_time", "start_time",
                        "end_time")


def finish_job_result(module, client, result):
    job = result.get("job") or {}
    for field in TOP_LEVEL_JOB_FIELDS:
        result[field] = job.get(field)
    result["api_version"] = client.api_version
    if not module._diff:
        result.pop("diff", None)
    exit_with(module, client, result)


def without_native(items):
    """Results without the raw payloads, unless a module's include_native asks for them."""
    return [dict((k, v) for k, v in item.items() if k != "native") for item in items]


def read_job_or_list(params, client, list_jobs):
    """The result of a job_info module (JOB_INFO_OPTIONS): with job_id or identity the one job (`job`,
    null when no job carries the identity; an unknown job_id fails), else `list_jobs()`; raw payloads
    only with include_native."""
    one = params["job_id"] is not None or params["identity"] is not None
    if params["job_id"] is not None:
        jobs = [client.get(params["job_id"])]
    elif params["identity"] is not None:
        jobs = [job for job in [client.find(params["identity"])] if job]
    else:
        jobs = list_jobs()
    if not params["include_native"]:
        jobs = without_native(jobs)
    result = {"changed": False, "jobs": jobs}
    if one:
        result["job"] = jobs[0] if jobs else None
    return result


def hide_client_secrets(module, client):
    """Have Ansible mask every secret the client came to know besides the module's no_log options
    (a token read from token_file, again after a rotation), in whatever the module returns."""
    transport = getattr(client, "transport", None)
    module.no_log_values.update(secret for secret in getattr(transport, "secrets", ()) if secret)


def exit_with(module, client, result):
    """Pass the client's warnings on, then exit (or fail when result says so)."""
    hide_client_secrets(module, client)
    for warning in client.warnings:
        module.warn(warning)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**with_query(module, result))


def fail_on_bridge_error(module, exc):
    """The one place a BridgeError becomes fail_json: typed, with no secret in it."""
    module.fail_json(msg=str(exc), error=exc.to_dict())


def main_for(module, build_client, body):
    """Run `body(module, client)` and report a BridgeError once, the same way everywhere."""
    require_httpx(module)
    client = None
    try:
        check_query(module)
        client = build_client(module.params)
        body(module, client)
    except BridgeError as exc:
        if client is not None:
            hide_client_secrets(module, client)
        fail_on_bridge_error(module, exc)
    finally:
        if client is not None:
            client.close()
