"""bridge.hpc.placement against the real services as candidates: Slurm 22.05, 24.11 and 26.05, the
Ray head, the Kubernetes node and the LSF PAC simulator. capacity() reads each of them, and jobs of
different shapes land where they fit, with the reason every other candidate and queue was not
taken. Then the workflow role's backend: auto places a step, and a second run finds it there.

Every run goes through ansible-playbook, as users run the module; secrets go through a 0600 vars
file and never show in the output."""

import json
import os
import subprocess
import uuid

import pytest

from conftest import (
    SLURM_VERSIONS,
    VENV_BIN,
    ansible_env,
    kube_namespace,
    require_kube_node,
    require_lsf,
    require_ray,
    require_slurm,
)

RUN_ID = uuid.uuid4().hex[:8]
SCRIPT = "#!/bin/bash\ntrue\n"


@pytest.fixture(scope="module")
def services():
    """{candidate name: connection options} of every service, and the secrets that must not show."""
    candidates, secrets = [], []
    for version in SLURM_VERSIONS:
        values = require_slurm(version)
        candidates.append({"name": "slurm-%s" % version, "backend": "slurm", "url": values["SLURM_URL"],
                           "user": values["SLURM_USER"], "token": values["SLURM_JWT"]})
        secrets.append(values["SLURM_JWT"])
    ray = require_ray()
    candidates.append(dict({"name": "ray", "backend": "ray", "url": ray["RAY_URL"]},
                           **({"token": ray["RAY_TOKEN"]} if ray.get("RAY_TOKEN") else {})))
    kube = require_kube_node()
    namespace = kube_namespace(kube, "placement")
    candidates.append({"name": "kubernetes", "backend": "kubernetes", "kubeconfig": kube["KUBECONFIG"],
                       "namespace": namespace})
    lsf = require_lsf()
    candidates.append({"name": "lsf", "backend": "lsf", "url": lsf["LSF_PAC_URL"], "user": lsf["LSF_USER"],
                       "password": lsf["LSF_PASSWORD"]})
    secrets.append(lsf["LSF_PASSWORD"])
    return {"candidates": candidates, "secrets": [s for s in secrets if s], "slurm": require_slurm("22.05"), "ray": ray}


def play(tmp_path, tasks, extra_vars, secrets):
    """Run `tasks` on localhost with `extra_vars`; returns ({register: what the task returned}, the
    output), after checking that no secret shows in the output."""
    vars_path = tmp_path / "vars.json"
    with os.fdopen(os.open(str(vars_path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as handle:
        json.dump(extra_vars, handle)
    results = tmp_path / "results.json"
    registered = ", ".join("'%s': %s | default(none)" % (task["register"], task["register"])
                           for task in tasks if "register" in task)
    playbook = [{"hosts": "localhost", "gather_facts": False, "tasks": tasks + [{
        "name": "Keep what each task returned",
        "ansible.builtin.copy": {"content": "{{ {%s} | to_json }}" % registered, "dest": str(results), "mode": "0600"}}]}]
    path = tmp_path / "play.yml"
    path.write_text(json.dumps(playbook))
    completed = subprocess.run([os.path.join(VENV_BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local", str(path),
                                "-e", "@" + str(vars_path)], env=ansible_env(), capture_output=True, text=True,
                               timeout=600, check=False)
    output = completed.stdout + completed.stderr
    for secret in secrets:
        assert secret not in output, "a secret leaked into ansible-playbook output"
    assert completed.returncode == 0, output[-6000:]
    return json.loads(results.read_text()), output


def placement_task(register, spec, policy="FirstFit", **more):
    return {"name": register, "register": register, "ignore_errors": True,
            "bridge.hpc.placement": dict({"spec": spec, "candidates": "{{ candidates }}", "policy": policy}, **more)}


def reasons_of(result, candidate):
    return [entry["reason"] for entry in result["placement"]["rejected"] if entry["backend"] == candidate]


@pytest.fixture(scope="module")
def placed(services, tmp_path_factory):
    """Several shapes placed in one play (each candidate's capacity is read once per task)."""
    tasks = [
        placement_task("small", {"script": SCRIPT, "resources": {"time_limit": 5}}),
        placement_task("gpu", {"script": SCRIPT, "resources": {"gpus": 1}}),
        placement_task("two_nodes", {"script": SCRIPT, "resources": {"nodes": 2}}),
        placement_task("long", {"script": SCRIPT, "resources": {"time_limit": 120}}),
        placement_task("big_memory", {"script": SCRIPT, "resources": {"memory": "8G"}}),
        placement_task("least_queued", {"script": SCRIPT}, policy="LeastQueued"),
        placement_task("lsf_only", {"script": SCRIPT, "resources": {"time_limit": 1}, "queue": "short"},
                       candidates="{{ candidates | selectattr('backend', 'equalto', 'lsf') | list }}"),
    ]
    results, output = play(tmp_path_factory.mktemp("placement"), tasks, {"candidates": services["candidates"]},
                           services["secrets"])
    return results, output


def test_capacity_is_read_from_every_service(placed, services):
    results, _output = placed
    small = results["least_queued"]
    by_name = dict((candidate["name"], candidate) for candidate in small["candidates"])
    assert sorted(by_name) == sorted(c["name"] for c in services["candidates"])
    for name, candidate in by_name.items():
        assert candidate["ready"] is True, (name, candidate["reason"])
        assert candidate["queues"], name
    for version in SLURM_VERSIONS:
        slurm = by_name["slurm-%s" % version]
        assert slurm["manager"] == "Slurm" and slurm["version"].startswith(version)
        partitions = dict((queue["name"], queue) for queue in slurm["queues"])
        assert partitions["debug"]["max_time_minutes"] == 30 and partitions["batch"]["max_time_minutes"] == 1440
        assert partitions["debug"]["usable"] and partitions["debug"]["gpus_per_node"] == 0
        assert isinstance(partitions["debug"]["pending"], int) and isinstance(partitions["debug"]["running"], int)
    assert by_name["slurm-26.05"]["api_version"] == "v0.0.45"
    ray = by_name["ray"]
    assert ray["manager"] == "Ray" and ray["version"] == services["ray"]["RAY_VERSION"]
    assert [queue["name"] for queue in ray["queues"]] == [None] and ray["queues"][0]["cpus_per_node"] >= 1
    kubernetes = by_name["kubernetes"]
    assert kubernetes["manager"] == "Kubernetes" and kubernetes["version"].startswith("v1.")
    (cluster,) = kubernetes["queues"]
    assert cluster["name"] is None and cluster["usable"] and (cluster["pending"], cluster["running"]) == (0, 0)
    lsf = dict((queue["name"], queue) for queue in by_name["lsf"]["queues"])
    assert lsf["normal"]["usable"] and lsf["short"]["max_time_minutes"] == 1 and not lsf["closed"]["usable"]


def test_a_small_job_goes_to_the_first_candidate_and_its_default_partition(placed):
    results, _output = placed
    placement = results["small"]["placement"]
    assert (placement["backend"], placement["type"], placement["queue"], placement["rejected"]) == (
        "slurm-22.05", "slurm", "debug", [])
    assert results["small"]["changed"] is False


def test_a_gpu_job_fits_nowhere_and_every_reason_names_resources_gpus(placed, services):
    result = placed[0]["gpu"]
    assert result["failed"] and result["placement"]["backend"] is None
    for candidate in services["candidates"]:
        reasons = reasons_of(result, candidate["name"])
        assert any(reason.startswith("resources.gpus: 1 GPUs per node requested; the nodes of ") for reason in reasons), (
            candidate["name"], reasons)
    assert ("resources.gpus: 1 GPUs per node requested; the nodes of 'debug' have at most 0"
            in reasons_of(result, "slurm-24.11"))
    assert reasons_of(result, "ray") == ["resources.gpus: 1 GPUs per node requested; the nodes of the Ray cluster "
                                         "have at most 0"]
    assert "fits none of the candidates" in result["msg"]


def test_a_two_node_job_is_refused_by_the_field_table_on_ray_and_kubernetes(placed):
    result = placed[0]["two_nodes"]
    assert result["placement"]["backend"] is None
    for name in ("ray", "kubernetes"):
        (reason,) = reasons_of(result, name)
        assert reason.startswith("resources.nodes: not supported by the %s backend: more than one is refused" % (
            "Ray" if name == "ray" else "Kubernetes")), reason
    # The Slurm test clusters have one node; batch allows one per job anyway.
    assert "resources.nodes: 2 nodes requested; 'batch' allows at most 1 per job" in reasons_of(result, "slurm-26.05")


def test_a_long_job_skips_the_partition_whose_limit_is_too_short(placed):
    placement = placed[0]["long"]["placement"]
    assert (placement["backend"], placement["queue"]) == ("slurm-22.05", "batch")
    assert placement["rejected"] == [{"backend": "slurm-22.05", "queue": "debug",
                                      "reason": "resources.time_limit: 120 minutes requested; 'debug' allows at most 30"}]


def test_a_job_bigger_than_the_slurm_nodes_goes_to_ray(placed):
    placement = placed[0]["big_memory"]["placement"]
    # The Slurm test nodes have 4000 MB; Ray's head has more than 8 GiB.
    assert (placement["backend"], placement["queue"]) == ("ray", None)
    for version in SLURM_VERSIONS:
        assert ("resources.memory: 8192 MiB per node requested; the largest node of 'debug' has 4000 MiB"
                in reasons_of(placed[0]["big_memory"], "slurm-%s" % version))


def test_least_queued_takes_a_queue_with_the_fewest_jobs_waiting(placed):
    result = placed[0]["least_queued"]
    placement = result["placement"]
    assert placement["policy"] == "LeastQueued" and placement["backend"] is not None
    chosen = next(c for c in result["candidates"] if c["name"] == placement["backend"])
    queue = next(q for q in chosen["queues"] if q["name"] == placement["queue"])
    fits = [q for c in result["candidates"] for q in c["queues"] if q["usable"]]
    assert (queue["pending"] or 0) <= min(q["pending"] or 0 for q in fits)


def test_a_queue_in_the_spec_is_kept_to(placed):
    placement = placed[0]["lsf_only"]["placement"]
    assert (placement["backend"], placement["type"], placement["queue"]) == ("lsf", "lsf", "short")


def test_the_workflow_places_an_auto_step_and_finds_it_there_again(services, tmp_path):
    slurm, ray = services["slurm"], services["ray"]
    backends = {"slurm": {"url": slurm["SLURM_URL"], "user": slurm["SLURM_USER"], "token": slurm["SLURM_JWT"]},
                "ray": dict({"url": ray["RAY_URL"]}, **({"token": ray["RAY_TOKEN"]} if ray.get("RAY_TOKEN") else {}))}
    workflow = "placement-%s" % RUN_ID
    tasks = [{"name": "run", "ansible.builtin.include_role": {"name": "bridge.hpc.workflow"}, "vars": {
        "workflow_name": workflow, "workflow_backends": "{{ backends }}", "workflow_poll_interval": 1,
        "workflow_wait_timeout": 300, "workflow_steps": [{
            "name": "fit", "backend": "auto", "candidates": ["slurm", "ray"],
            # More memory than the Slurm test nodes have: Slurm is rejected, Ray takes it.
            "resources": {"memory": "6G"},
            "script": "#!/usr/bin/env python3\nimport json\nprint(json.dumps({'placed': True}))\n"}]}},
        {"name": "keep", "register": "results", "ansible.builtin.set_fact": {"kept": "{{ workflow_results }}"}}]
    for run in ("first", "second"):
        (tmp_path / run).mkdir()
    first, output = play(tmp_path / "first", tasks, {"backends": backends}, services["secrets"])
    fit = first["results"]["ansible_facts"]["kept"]["fit"]
    assert fit["backend"] == "ray" and fit["phase"] == "completed" and fit["data"] == {"placed": True}, output[-3000:]
    assert fit["placement"]["found"] is False and fit["placement"]["type"] == "ray"
    assert fit["placement"]["rejected"][0]["backend"] == "slurm"
    assert fit["placement"]["rejected"][0]["reason"].startswith("resources.memory: 6144 MiB per node requested")
    second, output = play(tmp_path / "second", tasks, {"backends": backends}, services["secrets"])
    again = second["results"]["ansible_facts"]["kept"]["fit"]
    assert again["placement"]["found"] is True and again["job_id"] == fit["job_id"] and again["submitted"] is False
