import io
import json
import zipfile

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._backend import compilable
from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec
from ansible_collections.bridge.hpc.plugins.module_utils.ray.client import RayClient
from ansible_collections.bridge.hpc.plugins.module_utils.ray.compile import compile_job, package
from ansible_collections.bridge.hpc.plugins.module_utils.ray.fit import camel_case, check_fits
from ansible_collections.bridge.hpc.plugins.module_utils.ray.states import normalize_job

SCRIPT = "#!/usr/bin/env python3\nprint('hi \\u00fc $HOME')\n"


def spec(**params):
    params.setdefault("script", SCRIPT)
    params.setdefault("identity", "r1")
    return normalize_spec(params)


def test_script_becomes_a_reproducible_package_run_by_its_interpreter():
    request = compile_job(spec(environment={"A": "1"}))
    content, uri = package(SCRIPT)
    assert request["runtime_env"]["working_dir"] == uri == package(SCRIPT)[1]
    assert request["entrypoint"] == "/usr/bin/env python3 bridge_job"
    assert request["submission_id"] == "r1"
    assert request["runtime_env"]["env_vars"] == {"A": "1"}
    assert request["metadata"]["bridge_identity"] == "r1"
    with zipfile.ZipFile(io.BytesIO(content)) as archive:
        assert archive.read("bridge_job").decode("utf-8") == SCRIPT


def test_the_entrypoint_runs_the_interpreter_as_the_kernel_would():
    assert compile_job(spec(script="#!/bin/bash -eu\ntrue\n"))["entrypoint"] == "/bin/bash -eu bridge_job"
    # One optional argument, the rest of the line, as where the manager executes the script.
    assert compile_job(spec(script="#!/bin/sh -e -u\ntrue\n"))["entrypoint"] == "/bin/sh '-e -u' bridge_job"
    with pytest.raises(SpecError, match="names no interpreter"):
        compile_job(spec(script="#!\ntrue\n"))


def test_resources_reserve_the_driver_and_time_limit_wraps_the_entrypoint():
    request = compile_job(spec(resources={"cpus_per_task": 2, "gpus": 1, "memory": "1G", "time_limit": "00:01:30"}))
    assert request["entrypoint_num_cpus"] == 2 and request["entrypoint_num_gpus"] == 1
    assert request["entrypoint_memory"] == 1024 ** 3
    assert request["entrypoint"].startswith("timeout --signal=TERM --kill-after=30 120s ")
    assert request["metadata"]["bridge_time_limit_minutes"] == "2"
    assert json.loads(request["metadata"]["bridge_entrypoint_request"]) == {
        "entrypoint_memory": 1024 ** 3, "entrypoint_num_cpus": 2, "entrypoint_num_gpus": 1}


def test_backend_options_merge_runtime_env_and_resources():
    request = compile_job(spec(backend_options={"ray": {
        "runtime_env": {"pip": ["requests"], "env_vars": {"B": "2"}},
        "entrypoint_resources": {"bridge_test": 1}, "metadata": {"team": "ml"}}}, environment={"A": "1"}))
    assert request["runtime_env"]["pip"] == ["requests"]
    assert request["runtime_env"]["env_vars"] == {"A": "1", "B": "2"}
    assert request["entrypoint_resources"] == {"bridge_test": 1}
    assert request["metadata"]["team"] == "ml"


@pytest.mark.parametrize("params, field", [
    ({"queue": "debug"}, "queue"),
    ({"stdout": "/tmp/x"}, "stdout"),
    ({"resources": {"nodes": 2}}, "resources.nodes"),
    ({"resources": {"gpus": 1, "gpu_type": "a100"}}, "resources.gpu_type"),
    ({"backend_options": {"ray": {"entrypoint": "x"}}}, "backend_options.ray.entrypoint"),
    ({"backend_options": {"ray": {"runtime_env": {"nope": 1}}}}, "backend_options.ray.runtime_env.nope"),
    ({"backend_options": {"ray": {"runtime_env": {"working_dir": "s3://x.zip"}}}}, "backend_options.ray.runtime_env.working_dir"),
    ({"backend_options": {"ray": {"entrypoint_num_cpus": -1}}}, "backend_options.ray.entrypoint_num_cpus"),
    ({"backend_options": {"ray": {"entrypoint_resources": {"x": -2}}}}, "backend_options.ray.entrypoint_resources.x"),
])
def test_what_ray_cannot_do_is_refused_naming_the_field(params, field):
    with pytest.raises(SpecError) as err:
        compile_job(compilable(RayClient, spec(**params)))
    assert err.value.field == field


NODE = {"cpus": 2.0, "gpus": 0, "memory_bytes": 4 * 1024 ** 3, "custom_resources": {"bridge_test": 1.0}}


def test_check_fits_names_what_no_node_has():
    check_fits({"entrypoint_num_cpus": 2, "entrypoint_resources": {"bridge_test": 1}}, [NODE])
    with pytest.raises(SpecError) as err:
        check_fits({"entrypoint_num_gpus": 1}, [NODE])
    assert err.value.field == "resources.gpus"
    with pytest.raises(SpecError) as err:
        check_fits({"entrypoint_resources": {"nope": 1}}, [NODE])
    assert err.value.field == "backend_options.ray.entrypoint_resources.nope"


def test_check_fits_needs_one_node_with_everything():
    small_cpu = dict(NODE, cpus=1.0, custom_resources={"bridge_test": 1.0})
    big_cpu = dict(NODE, cpus=8.0, custom_resources={})
    with pytest.raises(SpecError) as err:
        check_fits({"entrypoint_num_cpus": 4, "entrypoint_resources": {"bridge_test": 1}}, [small_cpu, big_cpu])
    assert err.value.field == "resources"


@pytest.mark.parametrize("native, phase, failure_class", [
    ({"status": "PENDING"}, "queued", None),
    ({"status": "RUNNING"}, "running", None),
    ({"status": "SUCCEEDED", "driver_exit_code": 0}, "completed", None),
    ({"status": "FAILED", "driver_exit_code": 3}, "failed", "non_zero_exit"),
    ({"status": "FAILED", "driver_exit_code": 124, "metadata": {"bridge_time_limit_minutes": "1"}}, "failed", "timeout"),
    ({"status": "FAILED", "driver_exit_code": 124}, "failed", "non_zero_exit"),
    ({"status": "FAILED", "error_type": "RUNTIME_ENV_SETUP_FAILURE"}, "failed", "rejected"),
    ({"status": "STOPPED"}, "cancelled", "cancelled"),
])
def test_phases_follow_the_slurm_normalization(native, phase, failure_class):
    job = normalize_job(dict(native, submission_id="s1"))
    assert (job["phase"], job["failure_class"]) == (phase, failure_class)


def test_long_failure_messages_keep_their_first_line():
    job = normalize_job({"submission_id": "s", "status": "FAILED", "message": "Job entrypoint command failed with exit code 1, logs:\nline\nline"})
    assert job["reason"] == "Job entrypoint command failed with exit code 1, logs:"


def test_camel_case_matches_the_dashboard():
    assert camel_case("bridge_test") == "bridgeTest"
    assert camel_case("object_store_memory") == "objectStoreMemory"
    assert camel_case("CPU") == "CPU"
    assert camel_case("node_0433c58bb4") == "node0433C58Bb4"
    assert camel_case("gpu_NVL") == "gpuNvl"
