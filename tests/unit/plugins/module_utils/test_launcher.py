"""$(LAUNCHER) in a job script: each backend's render() replaces the exact token with its launcher.

The rendered request is what is submitted, so these pin the submitted script byte for byte.
"""

import io
import zipfile

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils._backend import LAUNCHER_TOKEN, with_launcher
from ansible_collections.bridge.hpc.plugins.module_utils._errors import SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.client import LsfClient
from ansible_collections.bridge.hpc.plugins.module_utils.lsf.compile import SCRIPT_FILE
from ansible_collections.bridge.hpc.plugins.module_utils.quantum.client import QuantumClient
from ansible_collections.bridge.hpc.plugins.module_utils.ray.client import RayClient
from ansible_collections.bridge.hpc.plugins.module_utils.ray.compile import SCRIPT_NAME, package
from ansible_collections.bridge.hpc.plugins.module_utils.slurm.client import SlurmClient

from recorded import recorded, replaying_transport

# The token where a command starts, and look-alikes that are the script's own shell text.
SCRIPT = "#!/bin/bash\n$(LAUNCHER) ./a.out --size 4\necho $LAUNCHER ${LAUNCHER} $(LAUNCHER_X) \"$(LAUNCHER )\"\n"
LOOK_ALIKES = "echo $LAUNCHER ${LAUNCHER} $(LAUNCHER_X) \"$(LAUNCHER )\"\n"
BELL = "OPENQASM 3.0;\ninclude \"stdgates.inc\";\nqubit[2] q;\nbit[2] c;\nh q[0];\ncx q[0], q[1];\nc = measure q;\n"


def spec(**resources):
    return normalize_spec({"script": SCRIPT, "resources": resources})


def slurm_script(job_spec, version="v0.0.42"):
    rendered = SlurmClient("http://slurm.test", api_version=version).render(job_spec)
    return rendered["script"] if "script" in rendered else rendered["job"]["script"]


def lsf_script(job_spec):
    return LsfClient("http://lsf.test", user="u", password="p").render(job_spec)["files"][SCRIPT_FILE]


@pytest.mark.parametrize("resources, launcher", [
    ({}, "srun"),
    ({"tasks": 2}, "srun -n 2"),
    ({"tasks": 8, "nodes": 2}, "srun -n 8 -N 2"),
    ({"nodes": 2, "tasks_per_node": 4, "cpus_per_task": 2}, "srun -N 2 --ntasks-per-node=4 -c 2"),
])
@pytest.mark.parametrize("version", ["v0.0.38", "v0.0.42"])
def test_slurm_renders_srun_with_the_counts_the_spec_gives(resources, launcher, version):
    expected = "#!/bin/bash\n%s ./a.out --size 4\n%s" % (launcher, LOOK_ALIKES)
    assert slurm_script(spec(**resources), version) == expected


def test_every_token_is_replaced_and_the_identity_stays_that_of_the_users_script():
    job_spec = normalize_spec({"script": "#!/bin/sh\n$(LAUNCHER) a\n$(LAUNCHER) b\n", "resources": {"tasks": 2}})
    rendered = SlurmClient("http://slurm.test", api_version="v0.0.42").render(job_spec)
    assert rendered["job"]["script"] == "#!/bin/sh\nsrun -n 2 a\nsrun -n 2 b\n"
    assert rendered["job"]["comment"] == "bridge:" + job_spec["identity"]
    replaced = normalize_spec({"script": rendered["job"]["script"], "resources": {"tasks": 2}})
    assert job_spec["identity"] != replaced["identity"]
    assert LAUNCHER_TOKEN in job_spec["script"], "the spec itself is left as the user wrote it"


def test_a_script_without_the_token_renders_as_before():
    job_spec = normalize_spec({"script": "#!/bin/sh\necho $LAUNCHER\n", "resources": {"tasks": 2}})
    assert with_launcher(SlurmClient, job_spec) is job_spec
    assert with_launcher(QuantumClient, job_spec) is job_spec


@pytest.mark.parametrize("resources", [{}, {"tasks": 1}, {"nodes": 1, "tasks_per_node": 1}, {"cpus_per_task": 4}])
def test_lsf_runs_one_task_as_it_is(resources):
    assert lsf_script(spec(**resources)) == "#!/bin/bash\n./a.out --size 4\n" + LOOK_ALIKES


@pytest.mark.parametrize("resources", [{"tasks": 2}, {"nodes": 2}, {"nodes": 2, "tasks_per_node": 4}])
def test_lsf_launches_several_tasks_with_blaunch(resources):
    assert lsf_script(spec(**resources)) == "#!/bin/bash\nblaunch ./a.out --size 4\n" + LOOK_ALIKES


def test_lsf_refuses_several_multi_cpu_tasks_naming_cpus_per_task():
    with pytest.raises(SpecError) as refused:
        lsf_script(spec(tasks=2, cpus_per_task=4))
    assert refused.value.field == "resources.cpus_per_task"
    assert "one task per job slot" in str(refused.value)


@pytest.mark.parametrize("resources", [{}, {"tasks": 1, "nodes": 1, "tasks_per_node": 1}])
def test_ray_runs_the_command_as_it_is(resources):
    job_spec = spec(**resources)
    expected = "#!/bin/bash\n./a.out --size 4\n" + LOOK_ALIKES
    assert RayClient("http://ray.test").render(job_spec)["runtime_env"]["working_dir"] == package(expected)[1]


@pytest.mark.parametrize("resources, field", [({"tasks": 2}, "resources.tasks"), ({"nodes": 3}, "resources.nodes"),
                                              ({"tasks_per_node": 2}, "resources.tasks_per_node")])
def test_ray_refuses_more_than_one_process_naming_the_field(resources, field):
    with pytest.raises(SpecError) as refused:
        RayClient("http://ray.test").render(spec(**resources))
    assert refused.value.field == field
    assert "allowed: 1 or unset" in str(refused.value)


def test_ray_uploads_the_replaced_script():
    transport, sent = replaying_transport("Ray", [recorded("ray", "2.60.0", case)
                                                  for case in ("package_get_missing", "package_put", "submit_ok")])
    job_spec = normalize_spec({"script": "#!/bin/bash\n$(LAUNCHER) echo hello ok\n", "identity": "fixture-ok"})
    RayClient("http://ray.test", transport=transport).submit(job_spec)
    uploaded = zipfile.ZipFile(io.BytesIO(sent[1].content)).read(SCRIPT_NAME)
    assert uploaded == b"#!/bin/bash\necho hello ok\n"
    assert sent[2].url.path == "/api/jobs/"


def test_quantum_refuses_the_token_in_its_circuit():
    job_spec = normalize_spec({"script": BELL + "// $(LAUNCHER)\n"}, QuantumClient)
    with pytest.raises(SpecError) as refused:
        QuantumClient("https://quantum.test/api/v1").render(job_spec)
    assert refused.value.field == "script"
    assert "OpenQASM 3 circuit" in str(refused.value)
