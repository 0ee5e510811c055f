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

from ansible.module_utils.basic import env_fallback, missing_required_lib

from ansible_collections.bridge.hpc.plugins.module_utils._errors import BridgeError, SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_absent, ensure_present
from ansible_collections.bridge.hpc.plugins.module_utils._spec import JOB_SPEC_OPTIONS, normalize_spec
from ansible_collections.bridge.hpc.plugins.module_utils._transport import HAS_HTTPX, HTTPX_IMPORT_ERROR
from ansible_collections.bridge.hpc.plugins.module_utils.ray import RayClient
from ansible_collections.bridge.hpc.plugins.module_utils.slurm import KNOWN_VERSIONS, SlurmClient

CONNECTION_OPTIONS = dict(
    url=dict(type="str", required=True),
    user=dict(type="str"),
    token=dict(type="str", no_log=True),
    validate_certs=dict(type="bool", default=True),
    ca_path=dict(type="path"),
    timeout=dict(type="float", default=30.0),
    retries=dict(type="int", default=3),
    api_version=dict(type="str"),
)

SLURM_ENV = dict(url=["SLURM_URL"], user=["SLURM_USER"], token=["SLURM_JWT"])
RAY_ENV = dict(url=["RAY_ADDRESS"], token=["RAY_AUTH_TOKEN"])

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


def _connection_options(environment):
    options = copy.deepcopy(CONNECTION_OPTIONS)
    for key, names in environment.items():
        options[key]["fallback"] = (env_fallback, names)
    options["url"]["required"] = False
    return options


def slurm_connection_options():
    options = _connection_options(SLURM_ENV)
    options["api_version"]["choices"] = list(KNOWN_VERSIONS)
    return options


def ray_connection_options():
    options = _connection_options(RAY_ENV)
    del options["user"]
    del options["api_version"]
    return options


JOB_INFO_OPTIONS = dict(
    job_id=dict(type="str"),
    identity=dict(type="str"),
    name=dict(type="str"),
    phases=dict(type="list", elements="str", choices=["queued", "running", "completed", "failed", "cancelled"]),
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
    options.update(extra_options)
    return dict(argument_spec=options, mutually_exclusive=[("job_id", "identity")], supports_check_mode=True)


def require_httpx(module):
    if not HAS_HTTPX:
        module.fail_json(msg=missing_required_lib("httpx"), exception=HTTPX_IMPORT_ERROR)


def slurm_client(params):
    if not params.get("url"):
        raise SpecError("url", "the slurmrestd URL is required (option url or environment SLURM_URL)")
    return SlurmClient(
        params["url"], user=params.get("user"), token=params.get("token"),
        api_version=params.get("api_version"), validate_certs=params["validate_certs"],
        ca_path=params.get("ca_path"), timeout=params["timeout"], retries=params["retries"])


def ray_client(params):
    if not params.get("url"):
        raise SpecError("url", "the Ray dashboard URL is required (option url or environment RAY_ADDRESS)")
    return RayClient(
        params["url"], token=params.get("token"), validate_certs=params["validate_certs"],
        ca_path=params.get("ca_path"), timeout=params["timeout"], retries=params["retries"])


CLIENT_FACTORIES = {"slurm": slurm_client, "ray": ray_client}


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
    if params["state"] == "present":
        spec = normalize_spec(params)
        result = ensure_present(client, spec, cancel_rejected=params["cancel_rejected"], **wait_args)
        result["identity"] = spec["identity"]
    else:
        identity = params.get("identity")
        if params.get("job_id") is None and identity is None and params.get("script"):
            identity = normalize_spec(params)["identity"]
        if params.get("job_id") is None and identity is None:
            raise SpecError("job_id", "state=absent needs job_id, identity, or the job's spec to derive its identity")
        result = ensure_absent(client, job_id=params.get("job_id"), identity=identity, **wait_args)
    return finish_job_result(module, client, result)


def finish_job_result(module, client, result):
    job = result.get("job") or {}
    result["job_id"] = job.get("job_id")
    result["phase"] = job.get("phase")
    result["exit_code"] = job.get("exit_code")
    result["api_version"] = getattr(client, "_api_version", None)
    if not module._diff:
        result.pop("diff", None)
    exit_with(module, client, result)


def without_native(items):
    """Results without the raw payloads, unless a module's include_native asks for them."""
    return [dict((k, v) for k, v in item.items() if k != "native") for item in items]


def exit_with(module, client, result):
    """Pass the client's warnings on, then exit (or fail when result says so)."""
    for warning in getattr(client, "warnings", []):
        module.warn(warning)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


def fail_on_bridge_error(module, exc):
    """The one place a BridgeError becomes fail_json: typed, with no secret in it."""
    module.fail_json(msg=str(exc), error=exc.to_dict())


def main_for(module, build_client, body):
    """Run `body(module, client)` and report a BridgeError once, the same way everywhere."""
    require_httpx(module)
    client = None
    try:
        client = build_client(module.params)
        body(module, client)
    except BridgeError as exc:
        fail_on_bridge_error(module, exc)
    finally:
        if client is not None:
            client.close()
