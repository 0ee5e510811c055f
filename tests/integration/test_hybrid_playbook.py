"""playbooks/hybrid.yml against the real services: one workflow on Slurm 22.05, Ray, the Qiskit
Runtime simulator and the Kubernetes node (files through the sshd login node and S3 when they run).
Run twice: the second run finds every job by its identity, submits nothing and reports changed=0.
And the workflow role refuses a bad workflow before it submits anything."""

import os
import re
import subprocess
import sys
import uuid

import pytest
import yaml

from conftest import (REPO, RUN, adhoc_result, ansible_env, read_env_file, require_kube_node, require_quantum,
                      require_ray, require_slurm, require_sshd, start_playbook)

RUN_ID = uuid.uuid4().hex[:8]
# What the role's last task prints per step: "<step> (<backend>): job <id> <phase> ..., <how>, <seconds> s".
STEP_LINE = re.compile(r'"(\w+) \((\w+)\): job (\S+) (\w+)(?: exit (\S+))?,\s+(submitted now|found by its identity, not '
                       r'submitted again), ([\d.]+) s"')
BUCKET = "bridge-hybrid-it"


def service_env():
    """Every running service's env file, as `make hybrid` sources them; the four backends are required."""
    values = {}
    for required_values in (require_slurm("22.05"), require_ray(), require_quantum(), require_kube_node()):
        values.update(required_values)
    for name in ("sshd", "s3"):
        values.update(read_env_file(os.path.join(RUN, name, "env")) or {})
    # As `make hybrid` sources them: the node's env file names its kubeconfig KUBECONFIG alone.
    return values


def run_hybrid(values, workflow, log_path):
    env = ansible_env(dict(values, HYBRID_WORKFLOW=workflow, HYBRID_S3_BUCKET=BUCKET))
    process = start_playbook(os.path.join(REPO, "playbooks", "hybrid.yml"), {}, env, log_path)
    returncode = process.wait(timeout=900)
    with open(log_path) as handle:
        output = handle.read()
    assert returncode == 0, "hybrid.yml failed:\n%s" % output[-6000:]
    for secret in (values.get("SLURM_JWT"), values.get("QUANTUM_API_KEY"), values.get("AWS_SECRET_ACCESS_KEY")):
        assert not secret or secret not in output, "a secret leaked into ansible-playbook output"
    steps = dict((m.group(1), m.groups()[1:]) for m in STEP_LINE.finditer(output))
    changed = int(re.search(r"localhost\s+: ok=\d+\s+changed=(\d+)", output).group(1))
    return steps, changed, output


@pytest.fixture(scope="module")
def hybrid_runs(tmp_path_factory):
    values = service_env()
    if values.get("BRIDGE_S3_ENDPOINT"):
        subprocess.run([sys.executable, os.path.join(REPO, "tools", "s3_bucket.py"), BUCKET], check=True,
                       env=dict(os.environ, **values))
    logs = tmp_path_factory.mktemp("hybrid")
    workflow = "hybrid-it-%s" % RUN_ID
    first = run_hybrid(values, workflow, str(logs / "first.log"))
    second = run_hybrid(values, workflow, str(logs / "second.log"))
    return values, workflow, first, second


def test_every_step_ran_once_on_its_backend(hybrid_runs):
    _values, _workflow, (steps, changed, output), _second = hybrid_runs
    assert sorted(steps) == ["fit", "measure", "prepare", "publish", "summarise"], output[-4000:]
    assert dict((name, step[0]) for name, step in steps.items()) == {
        "prepare": "slurm", "fit": "ray", "measure": "quantum", "summarise": "kubernetes", "publish": "slurm"}
    assert all(step[2] == "completed" and step[4] == "submitted now" for step in steps.values()), steps
    assert changed > 0
    # The measured probability comes back from the Pod's summary, within sampling noise of the target.
    assert '"within_0.1": true' in output, output[-3000:]


def test_a_second_run_submits_nothing_and_finds_the_same_jobs(hybrid_runs):
    _values, _workflow, (first, _changed, _output), (second, changed, output) = hybrid_runs
    assert changed == 0, output[-4000:]
    assert dict((name, step[1]) for name, step in second.items()) == dict((name, step[1]) for name, step in first.items())
    assert all(step[4] == "found by its identity, not submitted again" for step in second.values()), second


def test_the_parameters_and_the_summary_are_staged_out(hybrid_runs):
    values, workflow, _first, _second = hybrid_runs
    if not values.get("BRIDGE_S3_ENDPOINT"):
        pytest.skip("no S3 server: tools/s3.sh start")
    import boto3

    s3 = boto3.client("s3", endpoint_url=values["BRIDGE_S3_ENDPOINT"], region_name=values.get("AWS_DEFAULT_REGION"),
                      aws_access_key_id=values["AWS_ACCESS_KEY_ID"], aws_secret_access_key=values["AWS_SECRET_ACCESS_KEY"],
                      verify=values.get("AWS_CA_BUNDLE") or True)
    params = s3.get_object(Bucket=BUCKET, Key="%s/params.json" % workflow)["Body"].read().decode()
    summary = s3.get_object(Bucket=BUCKET, Key="%s/summary.json" % workflow)["Body"].read().decode()
    assert '"target_p1": 0.8' in params
    assert '"within_0.1": true' in summary and "measure (quantum): job" in summary


def test_tasks_delegated_to_the_login_node_run_there_as_its_user(tmp_path):
    """The login node as hybrid.yml and demo.yml add it (playbooks/tasks/login_node.yml), then what
    the stage role does there, with `-c local` as `make hybrid` runs it: a command and a file
    written, both as the login node's user over SSH, not as the user running Ansible here."""
    login = require_sshd()
    written = "/tmp/bridge-hybrid-login-%s" % RUN_ID
    play = [{"name": "The login node as hybrid.yml adds it", "hosts": "localhost", "gather_facts": False, "tasks": [
        {"ansible.builtin.import_tasks": os.path.join(REPO, "playbooks", "tasks", "login_node.yml")},
        {"name": "Who runs a delegated task", "ansible.builtin.command": "id -un", "delegate_to": "login",
         "changed_when": False, "register": "who"},
        {"name": "A file written on the login node", "ansible.builtin.copy": {"content": "x\n", "dest": written},
         "delegate_to": "login"},
        {"name": "Its owner", "ansible.builtin.stat": {"path": written}, "delegate_to": "login", "register": "made"},
        {"name": "Remove it", "ansible.builtin.file": {"path": written, "state": "absent"}, "delegate_to": "login"},
        {"name": "Show", "ansible.builtin.debug": {"msg": "login user={{ who.stdout }} owner={{ made.stat.pw_name }}"}},
    ]}]
    playbook = tmp_path / "login.yml"
    playbook.write_text(yaml.safe_dump(play))
    log_path = str(tmp_path / "login.log")
    process = start_playbook(str(playbook), {}, ansible_env(login), log_path)
    assert process.wait(timeout=300) == 0, open(log_path).read()[-4000:]
    output = open(log_path).read()
    user = login["BRIDGE_SSH_USER"]
    assert "login user=%s owner=%s" % (user, user) in output, output[-3000:]


@pytest.mark.parametrize("case, steps, expected", [
    ("cycle", [{"name": "first", "backend": "slurm"}, {"name": "a", "backend": "slurm", "after": ["c"]},
               {"name": "b", "backend": "ray", "after": ["a"]}, {"name": "c", "backend": "slurm", "after": ["b"]}],
     "the steps depend on each other in a cycle: a -> c -> b -> a"),
    ("backend", [{"name": "first", "backend": "slurm"}, {"name": "a", "backend": "pbs"}],
     "step 'a': backend 'pbs' is not a backend; allowed: kubernetes, lsf, quantum, ray, slurm, or auto to place the step"),
    ("duplicate", [{"name": "first", "backend": "slurm"}, {"name": "first", "backend": "ray"}],
     "step name 'first' is used twice; step names must be unique"),
])
def test_a_bad_workflow_is_refused_before_anything_is_submitted(case, steps, expected, tmp_path):
    values = require_slurm("22.05")
    workflow = "refused-%s-%s" % (case, RUN_ID)
    for step in steps:
        step["script"] = "#!/bin/bash\ntrue\n"
    backends = {"slurm": {"url": values["SLURM_URL"], "user": values["SLURM_USER"], "token": values["SLURM_JWT"]}}
    log_path = str(tmp_path / "refused.log")
    process = start_playbook(os.path.join(REPO, "tests", "integration", "playbooks", "workflow_given.yml"),
                             {"workflow": workflow, "steps": steps, "backends": backends}, ansible_env(), log_path)
    assert process.wait(timeout=120) != 0
    output = open(log_path).read()
    assert "workflow: %s; nothing was submitted" % expected in output, output[-3000:]
    assert values["SLURM_JWT"] not in output
    looked_up = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-m", "bridge.hpc.slurm_job_info",
         "-a", "identity=%s.first" % workflow], env=ansible_env(values), capture_output=True, text=True, check=False)
    result = adhoc_result(looked_up)
    assert result is not None, looked_up.stdout + looked_up.stderr
    assert result["job"] is None


def test_a_failed_job_fails_the_workflow_at_its_step_and_the_steps_after_it_do_not_run(tmp_path):
    values = require_ray()
    workflow = "failing-%s" % RUN_ID
    steps = [{"name": "ok", "backend": "ray", "script": "#!/bin/bash\necho '{\"x\": 1}'\n"},
             {"name": "bad", "backend": "ray", "after": ["ok"], "script": "#!/bin/bash\necho failing\nexit 3\n"},
             {"name": "never", "backend": "ray", "after": ["bad"], "script": "#!/bin/bash\ntrue\n"}]
    log_path = str(tmp_path / "failing.log")
    process = start_playbook(os.path.join(REPO, "tests", "integration", "playbooks", "workflow_given.yml"),
                             {"workflow": workflow, "steps": steps, "backends": {"ray": {"url": values["RAY_URL"]}}},
                             ansible_env(), log_path)
    assert process.wait(timeout=300) != 0
    output = open(log_path).read()
    assert ("Workflow %s: step bad (ray) failed: job %s.bad phase=failed exit_code=3 failure_class=non_zero_exit: "
            % (workflow, workflow)) in output, output[-3000:]
    looked_up = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-m", "bridge.hpc.ray_job_info",
         "-a", "identity=%s.never" % workflow], env=ansible_env({"RAY_ADDRESS": values["RAY_URL"]}),
        capture_output=True, text=True, check=False)
    result = adhoc_result(looked_up)
    assert result is not None, looked_up.stdout + looked_up.stderr
    assert result["job"] is None
