"""ansible-playbook against every real backend: the module suites in playbooks/<backend>_job.yml.

Each playbook is a test of its own, which `make integration` hands to whichever worker is free
(tests/integration/scheduling.py, SPREAD_MODULES): they mostly wait on time limits, beside other modules.
"""

import os
import uuid

import pytest

from conftest import (REPO, SLURM_VERSIONS, ansible_env, kube_namespace, kube_node_env, lsf_env, quantum_env, ray_env,
                      require_kube_node, require_lsf, require_quantum, require_ray, require_slurm, slurm_env, start_playbook)

PLAYBOOKS = os.path.join(REPO, "tests", "integration", "playbooks")
RUN_ID = uuid.uuid4().hex[:8]
# <playbook>:<backend>; the batch pair runs against one Slurm version, Ray and the LSF simulator
# (quantum_job.yml covers the batch modules for the Qiskit Runtime simulator: its jobs are circuits).
TARGETS = ["slurm_job:slurm-%s" % version for version in SLURM_VERSIONS] + [
    "ray_job:ray", "lsf_job:lsf", "quantum_job:quantum", "k8s_job:kubernetes", "jobs_batch:slurm-22.05", "jobs_batch:ray",
    "jobs_batch:lsf"]
# The token of the broken kubeconfig k8s_job.yml hands over: it must never be printed.
BAD_KUBECONFIG_TOKEN = "kc-s3cret-%s" % uuid.uuid4().hex


def target_env(backend):
    if backend == "lsf":
        return lsf_env()
    if backend == "quantum":
        return quantum_env()
    if backend == "kubernetes":
        values = kube_node_env()
        return None if values is None else dict(values, K8S_AUTH_KUBECONFIG=values["KUBECONFIG"])
    if backend == "ray":
        values = ray_env()
        return None if values is None else dict(values, RAY_ADDRESS=values["RAY_URL"])
    return slurm_env(backend.split("-", 1)[1])


def batch_vars(backend, values):
    """The connection the batch playbook takes as variables (it tests the generic options)."""
    if backend == "ray":
        return {"backend": "ray", "url": values["RAY_URL"]}
    if backend == "lsf":
        return {"backend": "lsf", "url": values["LSF_PAC_URL"], "user": values["LSF_USER"],
                "password": values["LSF_PASSWORD"]}
    return {"backend": "slurm", "url": values["SLURM_URL"], "user": values["SLURM_USER"],
            "token": values["SLURM_JWT"], "api_version": values["SLURM_API_VERSIONS"].split(",")[0],
            "accounting": values.get("SLURM_ACCOUNTING") == "1"}


def secret_of(values):
    if values.get("KUBE_NODE_NAME"):
        return BAD_KUBECONFIG_TOKEN
    return (values.get("SLURM_JWT") or values.get("RAY_TOKEN") or values.get("LSF_PASSWORD")
            or values.get("QUANTUM_API_KEY") or None)


def start_target(target, values, directory):
    """Start TARGET's playbook against the backend of VALUES; returns the process and its log's path."""
    name, backend = target.split(":")
    log_path = str(directory / ("%s-%s.log" % (name, backend)))
    extra = {"run_id": "%s-%s" % (RUN_ID, backend.replace(".", ""))}
    if name == "jobs_batch":
        extra.update(batch_vars(backend, values))
    if backend == "kubernetes":
        extra.update(namespace=kube_namespace(values, "playbook"), bad_token=BAD_KUBECONFIG_TOKEN)
    return start_playbook(os.path.join(PLAYBOOKS, name + ".yml"), extra, ansible_env(values), log_path), log_path


@pytest.mark.parametrize("target", TARGETS)
def test_job_playbook(target, tmp_path):
    backend = target.split(":")[1]
    if backend == "ray":
        require_ray()
    elif backend == "lsf":
        require_lsf()
    elif backend == "quantum":
        require_quantum()
    elif backend == "kubernetes":
        require_kube_node()
    else:
        require_slurm(backend.split("-", 1)[1])
    values = target_env(backend)
    process, log_path = start_target(target, values, tmp_path)
    try:
        returncode = process.wait(timeout=900)
    finally:
        if process.poll() is None:
            process.kill()
    with open(log_path) as handle:
        output = handle.read()
    secret = secret_of(values)
    assert not secret or secret not in output, "the token leaked into ansible-playbook output"
    assert returncode == 0, "playbook failed against %s:\n%s" % (target, output[-6000:])
    assert "failed=0" in output


def test_demo_playbook_prints_the_job_output():
    values = require_slurm("22.05")
    log_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "bridge-demo-test-%s.log" % RUN_ID)
    process = start_playbook(os.path.join(REPO, "playbooks", "demo.yml"), {}, ansible_env(values), log_path)
    assert process.wait(timeout=300) == 0, open(log_path).read()[-4000:]
    output = open(log_path).read()
    assert "phase=completed" in output and "exit_code=0" in output
    assert "Hello from Slurm job" in output


@pytest.mark.parametrize("target", ["launcher_slurm:slurm-%s" % version for version in SLURM_VERSIONS]
                         + ["launcher_lsf:lsf", "launcher_ray:ray", "launcher_kubernetes:kubernetes"])
def test_launcher_playbook(target, tmp_path):
    """$(LAUNCHER): really srun on Slurm; blaunch in the rendered script on the LSF simulator; nothing
    for one task and a refusal for two on Ray and on the Kubernetes node."""
    name, backend = target.split(":")
    require = {"lsf": require_lsf, "ray": require_ray, "kubernetes": require_kube_node}.get(backend)
    if require:
        require()
    else:
        require_slurm(backend.split("-", 1)[1])
    values = target_env(backend)
    log_path = str(tmp_path / "playbook.log")
    extra = {"run_id": "%s-%s" % (RUN_ID, backend.replace(".", ""))}
    if backend == "kubernetes":
        extra.update(namespace=kube_namespace(values, "launcher"))
    process = start_playbook(os.path.join(PLAYBOOKS, name + ".yml"), extra, ansible_env(values), log_path)
    returncode = process.wait(timeout=300)
    with open(log_path) as handle:
        output = handle.read()
    assert returncode == 0, "playbook failed against %s:\n%s" % (target, output[-6000:])
    assert "failed=0" in output
