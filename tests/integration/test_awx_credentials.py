"""The AWX credential types of awx/credential_types against the real services: a credential's
inputs taken from a running service's env file, injected as AWX does (tests/awx_credentials.py), and
a module run with exactly that environment (`set -a; . FILE` of nothing else, as
conftest.adhoc_with_env_file runs it) reaches the service."""

import pytest

import awx_credentials
from conftest import adhoc_result, adhoc_with_env_file, require_lsf, require_quantum, require_ray, require_slurm

TYPES = awx_credentials.load_types()

# (credential type, its inputs from a service's env file, module, a key of its result)
CASES = {
    "slurm": (lambda: require_slurm("22.05"),
              lambda v: {"url": v["SLURM_URL"], "user": v["SLURM_USER"], "token": v["SLURM_JWT"]},
              "bridge.hpc.slurm_cluster_info", "partitions"),
    "ray": (require_ray,
            lambda v: {"url": v["RAY_ADDRESS"], "token": v.get("RAY_AUTH_TOKEN", "")},
            "bridge.hpc.ray_cluster_info", "nodes"),
    "lsf": (require_lsf,
            lambda v: {"url": v["LSF_PAC_URL"], "user": v["LSF_USER"], "password": v["LSF_PASSWORD"]},
            "bridge.hpc.lsf_cluster_info", "queues"),
    "quantum": (require_quantum,
                lambda v: {"url": v["QUANTUM_URL"], "iam_url": v["QUANTUM_IAM_URL"], "api_key": v["QUANTUM_API_KEY"],
                           "service_crn": v["QUANTUM_SERVICE_CRN"]},
                "bridge.hpc.quantum_backend_info", "devices"),
}


@pytest.mark.parametrize("backend", sorted(CASES))
def test_a_module_reaches_the_service_with_the_injected_environment_alone(backend, tmp_path):
    service, inputs_of, module, key = CASES[backend]
    env = awx_credentials.inject(TYPES[backend], inputs_of(service()), str(tmp_path / "private"))
    env_file = awx_credentials.write_env_file(str(tmp_path / "injected.env"), env)
    completed = adhoc_with_env_file(env_file, module)
    result = adhoc_result(completed)
    assert result is not None and result[key], (completed.stdout + completed.stderr)[-4000:]
    for variable, value in env.items():
        if variable in ("SLURM_JWT", "RAY_AUTH_TOKEN", "LSF_PASSWORD", "QUANTUM_API_KEY") and value:
            assert value not in completed.stdout + completed.stderr


def test_a_wrong_secret_is_refused_naming_the_variable_it_came_from(tmp_path):
    values = require_slurm("22.05")
    inputs = {"url": values["SLURM_URL"], "user": values["SLURM_USER"], "token": "not-a-jwt"}
    env = awx_credentials.inject(TYPES["slurm"], inputs)
    completed = adhoc_with_env_file(awx_credentials.write_env_file(str(tmp_path / "env"), env),
                                    "bridge.hpc.slurm_cluster_info")
    assert adhoc_result(completed) is None
    assert "not-a-jwt" not in completed.stdout + completed.stderr
