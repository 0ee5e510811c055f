"""A finished job's `output` on real services: Slurm 22.05 through the real sshd of tools/sshd.sh (its
jobs run as the login node's user), Ray's driver log, the Pod log on the real Kubernetes node, the
file download of this tree's LSF simulator (a private instance) and the Qiskit Runtime simulator's job log.
A followed Ray job (output.follow) shows its first line while it runs, through the module's lifecycle
and through the controller's poll playbook.

Each job prints the same bytes: UTF-8 text, two bytes that are not UTF-8, a NUL, terminal escapes,
a secret of its environment and 30 numbered lines; what comes back is text with U+FFFD for the bad
bytes, no control characters, the secret masked. A login node whose host key is not the one given
is refused; the BridgeJob controller's runner reads the output through the pipe with the login
node's key handed over as text.
"""

import json
import os
import subprocess
import sys
import time
import uuid

import pytest

from conftest import (
    COLLECTIONS,
    REPO,
    RUN,
    adhoc_with_env_file,
    kube_namespace,
    private_service,
    read_env_file,
    require_kube_node,
    require_lsf,
    require_quantum,
    require_ray,
    require_slurm,
    require_sshd,
)

from controller_support import free_port

sys.path.insert(0, COLLECTIONS)

SECRET = "s3cr3t-%s" % uuid.uuid4().hex[:12]
# POSIX printf octal escapes: bash and busybox sh print the same bytes.
PRINTS = ("printf 'h\\303\\251llo \\342\\234\\223 \\346\\227\\245\\346\\234\\254\\n'\n"
          "printf 'raw \\377\\376 bytes\\n'\n"
          "printf 'nul \\000here \\033[31mred\\033[0m\\n'\n"
          "echo \"token=$API_TOKEN\"\n"
          "i=1; while [ $i -le 30 ]; do echo \"line $i\"; i=$((i+1)); done\n")
EXPECTED = (u"h\u00e9llo \u2713 \u65e5\u672c\nraw \ufffd\ufffd bytes\nnul here red\ntoken=********\n"
            + "".join("line %d\n" % i for i in range(1, 31)))
RUN_ID = uuid.uuid4().hex[:8]


def spec_params(identity, shell="/bin/bash", **more):
    params = {"identity": identity, "script": "#!%s\n%s" % (shell, PRINTS), "environment": {"API_TOKEN": SECRET},
              "output": {"tail_lines": 40}}
    params.update(more)
    return params


def run_to_the_end(client, params):
    from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_present
    from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec

    return ensure_present(client, normalize_spec(params, client), wait=True, wait_timeout=300, poll_interval=1)


def assert_cleaned(output, exact=True):
    """The output of PRINTS as results show it; `exact` where the output is the job's alone (a file),
    else among the manager's own lines (Ray's driver log holds the job supervisor's)."""
    text = output["text"]
    assert SECRET not in text and "token=********\n" in text
    assert not any(ord(c) < 32 and c not in "\n\t" for c in text), repr(text)
    for line in (u"h\u00e9llo \u2713 \u65e5\u672c\n", u"raw \ufffd\ufffd bytes\n", "nul here red\n", "line 29\nline 30\n"):
        assert line in text, (line, text)
    if exact:
        assert output == {"text": EXPECTED, "lines": 34, "truncated": False}


# ---------------------------------------------------------------- Slurm over the login node


def login_option(login, **change):
    option = {"host": login["BRIDGE_SSH_HOST"], "port": int(login["BRIDGE_SSH_PORT"]), "user": login["BRIDGE_SSH_USER"],
              "private_key_file": login["BRIDGE_SSH_KEY"], "known_hosts_file": login["BRIDGE_SSH_KNOWN_HOSTS"]}
    option.update(change)
    return option


def slurm_job(values, login_value, name, workdir, **more):
    """bridge.hpc.slurm_job run by `ansible localhost` with Slurm 22.05's env file: the module itself."""
    args = dict(spec_params("out-%s-%s" % (RUN_ID, name)), name="out-%s" % name, queue="debug", working_directory=workdir,
                resources={"time_limit": 2}, wait=True, poll_interval=1, login=login_value)
    args.update(more)
    done = adhoc_with_env_file(os.path.join(RUN, "slurm-22.05", "env"), "bridge.hpc.slurm_job", "-a", json.dumps(args))
    head, _sep, body = done.stdout.partition(" => ")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(body)


@pytest.fixture(scope="module")
def slurm_login():
    values = require_slurm("22.05")
    login = require_sshd()
    assert values["SLURM_USER"] == login["BRIDGE_SSH_USER"], "Slurm 22.05's jobs run as the login node's user"
    workdir = "/home/%s/output-%s" % (login["BRIDGE_SSH_USER"], RUN_ID)
    ssh(login, "mkdir -p %s" % workdir)
    yield values, login, workdir
    ssh(login, "rm -rf %s" % workdir)


def ssh(login, command):
    args = ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", "UserKnownHostsFile=%s" % login["BRIDGE_SSH_KNOWN_HOSTS"], "-i", login["BRIDGE_SSH_KEY"],
            "-p", login["BRIDGE_SSH_PORT"], "-l", login["BRIDGE_SSH_USER"], login["BRIDGE_SSH_HOST"], command]
    return subprocess.run(args, capture_output=True, check=True, timeout=60)


def test_slurm_output_is_read_on_the_login_node_once_the_job_ends(slurm_login):
    values, login, workdir = slurm_login
    result = slurm_job(values, login_option(login), "files", workdir)
    assert result["phase"] == "completed", result
    assert_cleaned(result["output"])
    # Again: the job is found, not submitted, and its output read again from the same file.
    again = slurm_job(values, login_option(login), "files", workdir)
    assert again["changed"] is False and again["output"] == result["output"]


def test_slurm_output_with_the_key_and_host_key_as_text(slurm_login):
    values, login, workdir = slurm_login
    with open(login["BRIDGE_SSH_KEY"]) as key, open(login["BRIDGE_SSH_KNOWN_HOSTS"]) as known:
        option = login_option(login, private_key_file=None, known_hosts_file=None, private_key=key.read(),
                              known_hosts=known.read())
    result = slurm_job(values, option, "text", workdir, output={"tail_lines": 3})
    assert result["output"] == {"text": "line 28\nline 29\nline 30\n", "lines": 3, "truncated": True}
    assert "PRIVATE KEY" not in json.dumps(result)


def test_a_login_node_with_another_host_key_is_refused(slurm_login, tmp_path):
    values, login, workdir = slurm_login
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
    with open(str(tmp_path / "other.pub")) as other:
        wrong = "[%s]:%s %s\n" % (login["BRIDGE_SSH_HOST"], login["BRIDGE_SSH_PORT"], " ".join(other.read().split()[:2]))
    result = slurm_job(values, login_option(login, known_hosts_file=None, known_hosts=wrong), "wrong-key", workdir)
    assert result["phase"] == "completed" and "output" not in result
    assert "host key is not the one known_hosts holds" in result["output_error"], result["output_error"]


def test_slurm_refuses_output_without_a_login_node(slurm_login):
    values, _login, workdir = slurm_login
    args = dict(spec_params("out-%s-nologin" % RUN_ID), queue="debug", working_directory=workdir)
    done = adhoc_with_env_file(os.path.join(RUN, "slurm-22.05", "env"), "bridge.hpc.slurm_job", "-a", json.dumps(args))
    assert done.returncode != 0 and "login" in done.stdout and "output" in done.stdout, done.stdout


def test_the_controllers_poll_reads_the_output_with_the_key_handed_over_as_text(slurm_login, tmp_path, monkeypatch):
    """AnsibleRunner runs playbooks/bridgejob_{submit,poll}.yml: spec.login and the Secret's
    loginPrivateKey go through the pipe; the key never reaches the runner's directory."""
    sys.path.insert(0, os.path.join(REPO, "controller"))
    from bridge_controller.runner import AnsibleRunner

    values, login, workdir = slurm_login
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    runner = AnsibleRunner(os.path.join(REPO, "playbooks"), str(tmp_path / "runner"), collections_path=COLLECTIONS,
                           python=sys.executable)
    with open(login["BRIDGE_SSH_KEY"]) as key, open(login["BRIDGE_SSH_KNOWN_HOSTS"]) as known:
        private_key, known_hosts = key.read(), known.read()
    backend = {"type": "slurm", "url": values["SLURM_URL"],
               "login": {"host": login["BRIDGE_SSH_HOST"], "port": int(login["BRIDGE_SSH_PORT"]),
                         "user": login["BRIDGE_SSH_USER"], "known_hosts": known_hosts}}
    credentials = {"user": values["SLURM_USER"], "token": values["SLURM_JWT"], "loginPrivateKey": private_key}
    identity = "cr-out-%s" % RUN_ID
    job = dict(spec_params(identity), queue="debug", working_directory=workdir, output={"tail_lines": 5})
    try:
        submitted = runner.run("submit", backend, credentials, jobs=[job])
        assert submitted["results"][0]["failed"] is False, submitted
        for _attempt in range(120):
            polled = runner.run("poll", backend, credentials, identities=[identity], output_lines={identity: 5})
            found = polled["jobs"][identity]
            if found["terminal"]:
                break
            assert "output" not in found, "a running job's output is not read"
        assert found["output"] == {"text": "".join("line %d\n" % i for i in range(26, 31)), "lines": 5, "truncated": True}
    finally:
        runner.close()
    secret_line = private_key.strip().splitlines()[1]
    leaks = subprocess.run(["grep", "-rlF", secret_line, str(tmp_path)], capture_output=True, text=True, check=False)
    assert leaks.stdout == "", "the login key reached the runner directory: %s" % leaks.stdout


# ---------------------------------------------------------------- the others


def test_ray_driver_log():
    from ansible_collections.bridge.hpc.plugins.module_utils.ray.client import RayClient

    env = require_ray()
    client = RayClient.from_options({"url": env["RAY_URL"], "token": env.get("RAY_TOKEN") or None}.get)
    try:
        result = run_to_the_end(client, spec_params("out-ray-%s" % RUN_ID))
    finally:
        client.close()
    assert result["job"]["phase"] == "completed", result
    assert_cleaned(result["output"], exact=False)


# A job that prints a line, sleeps long enough for a few polls to find it running, then prints more.
FOLLOWED = "#!/bin/bash\necho 'first line'\nsleep 20\necho 'second line'\necho 'last line'\n"


def ray_client(env):
    from ansible_collections.bridge.hpc.plugins.module_utils.ray.client import RayClient

    return RayClient.from_options({"url": env["RAY_URL"], "token": env.get("RAY_TOKEN") or None}.get)


def until_followed(read, deadline=120):
    """The first of `read()`'s jobs (with the output fields of a job_info job) that is running with
    its first line read; fails when the job ends first or `deadline` seconds pass."""
    ends = time.monotonic() + deadline
    while True:
        job = read()
        assert not job.get("terminal"), "the job ended before a poll found it running with output: %s" % job
        if job["phase"] == "running" and "first line\n" in (job.get("output") or {}).get("text", ""):
            return job
        assert time.monotonic() < ends, job
        time.sleep(1)


def test_ray_follows_a_running_jobs_output_and_the_end_replaces_it():
    from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_present
    from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec

    client = ray_client(require_ray())
    spec = normalize_spec({"identity": "follow-ray-%s" % RUN_ID, "script": FOLLOWED,
                           "output": {"tail_lines": 20, "follow": True}}, client)

    def read():
        result = ensure_present(client, spec)
        return dict(result["job"], output=result.get("output"))

    try:
        running = until_followed(read)
        final = ensure_present(client, spec, wait=True, wait_timeout=120, poll_interval=1)
    finally:
        client.close()
    assert running["output"]["running"] is True and "second line" not in running["output"]["text"]
    assert final["job"]["phase"] == "completed" and "running" not in final["output"]
    for line in ("first line\n", "second line\n", "last line\n"):
        assert line in final["output"]["text"], final["output"]


def test_the_controllers_poll_follows_a_running_ray_job(tmp_path, monkeypatch):
    """AnsibleRunner runs playbooks/bridgejob_{submit,poll}.yml: output_follow goes through the pipe
    to bridge.hpc.job_info, whose running job carries its output; the job left out of it none."""
    sys.path.insert(0, os.path.join(REPO, "controller"))
    from bridge_controller.runner import AnsibleRunner

    env = require_ray()
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    runner = AnsibleRunner(os.path.join(REPO, "playbooks"), str(tmp_path / "runner"), collections_path=COLLECTIONS,
                           python=sys.executable)
    backend = {"type": "ray", "url": env["RAY_URL"]}
    credentials = {"token": env["RAY_TOKEN"]} if env.get("RAY_TOKEN") else {}
    followed, other = "cr-follow-%s" % RUN_ID, "cr-nofollow-%s" % RUN_ID
    # As job_params makes them of two CRs, one with spec.output.follow.
    jobs = [{"identity": identity, "script": FOLLOWED, "output": dict({"tail_lines": 20}, **more)}
            for identity, more in ((followed, {"follow": True}), (other, {}))]
    lines = {followed: 20, other: 20}

    def poll():
        return runner.run("poll", backend, credentials, identities=[followed, other], output_lines=lines,
                          output_follow=[followed])["jobs"]

    try:
        submitted = runner.run("submit", backend, credentials, jobs=jobs)
        assert [item["failed"] for item in submitted["results"]] == [False, False], submitted
        polled = {}

        def read():
            polled.update(poll())
            return polled[followed]

        running = until_followed(read)
        assert running["output"]["running"] is True and "second line" not in running["output"]["text"]
        if polled[other]["phase"] == "running":
            assert "output" not in polled[other], "a running job that does not follow is not read"
        ends = time.monotonic() + 120
        while not (polled[followed]["terminal"] and polled[other]["terminal"]):
            assert time.monotonic() < ends, polled
            time.sleep(2)
            polled.update(poll())
    finally:
        runner.close()
    for job in (polled[followed], polled[other]):
        assert job["phase"] == "completed" and "running" not in job["output"]
        assert "first line\n" in job["output"]["text"] and "last line\n" in job["output"]["text"]


def test_kubernetes_pod_log_on_the_node():
    from ansible_collections.bridge.hpc.plugins.module_utils.k8s.client import K8sClient

    env = require_kube_node()
    namespace = kube_namespace(env, "output")
    client = K8sClient.from_options({"kubeconfig": env["KUBECONFIG"], "namespace": namespace}.get)
    image = {"kubernetes": {"image": env.get("KUBE_BUSYBOX_IMAGE") or "localhost/bridge/busybox:latest",
                            "image_pull_policy": "Never"}}
    try:
        result = run_to_the_end(client, spec_params("out-k8s-%s" % RUN_ID, shell="/bin/sh", backend_options=image))
    finally:
        client.close()
        from kubernetes import client as k8s, config

        k8s.CoreV1Api(config.new_client_from_config(config_file=env["KUBECONFIG"])).delete_namespace(namespace)
    assert result["job"]["phase"] == "completed", result
    assert_cleaned(result["output"], exact=False)


@pytest.fixture(scope="module")
def lsf_simulator():
    """This tree's LSF simulator (its file download is what is tested), in a run dir of its own."""
    require_lsf()
    with private_service("lsf-pac.sh", "lsf", {"BRIDGE_LSF_PAC_PORT": str(free_port())}) as env_file:
        yield read_env_file(env_file)


def test_lsf_file_download_through_the_simulator(lsf_simulator):
    from ansible_collections.bridge.hpc.plugins.module_utils.lsf.client import LsfClient

    env = lsf_simulator
    client = LsfClient.from_options({"url": env["LSF_PAC_URL"], "user": env["LSF_USER"], "password": env["LSF_PASSWORD"]}.get)
    workdir = "/tmp/output-lsf-%s" % RUN_ID
    try:
        params = spec_params("out-lsf-%s" % RUN_ID, working_directory=workdir, stdout="out-%J.txt")
        # The connection's password, written into the script as it is: masked in the output too.
        params["script"] += "echo 'pw=%s'\n" % env["LSF_PASSWORD"].replace("'", "'\"'\"'")
        result = run_to_the_end(client, params)
    finally:
        client.close()
        subprocess.run(["rm", "-rf", workdir], check=False)
    assert result["job"]["phase"] == "completed", result
    assert result["output"] == {"text": EXPECTED + "pw=********\n", "lines": 35, "truncated": False}


def test_quantum_job_log_through_the_simulator():
    from ansible_collections.bridge.hpc.plugins.module_utils.quantum.client import QuantumClient

    env = require_quantum()
    client = QuantumClient.from_options({"url": env["QUANTUM_URL"], "iam_url": env["QUANTUM_IAM_URL"],
                                         "api_key": env["QUANTUM_API_KEY"], "service_crn": env["QUANTUM_SERVICE_CRN"]}.get)
    circuit = "OPENQASM 3.0;\ninclude \"stdgates.inc\";\nbit[1] c;\nsx $0;\nc[0] = measure $0;\n"
    device = env["QUANTUM_DEVICES"].split(",")[0]
    try:
        result = run_to_the_end(client, {"identity": "out-q-%s" % RUN_ID, "script": circuit, "queue": device,
                                         "output": {"tail_lines": 1},
                                         "backend_options": {"quantum": {"shots": 10, "log_level": "info"}}})
    finally:
        client.close()
    assert result["job"]["phase"] == "completed", result
    assert result["output"]["lines"] == 1 and result["output"]["truncated"] is True
    assert result["output"]["text"].endswith("INFO: Job %s completed.\n" % result["job"]["job_id"])
    assert env["QUANTUM_API_KEY"] not in json.dumps(result)


def test_an_indexed_jobs_output_is_that_of_its_first_failed_index():
    """indexes 3,7,20-22 run as completion indexes 0-4; index 7 (completion index 1) fails."""
    from ansible_collections.bridge.hpc.plugins.module_utils.k8s.client import K8sClient

    env = require_kube_node()
    namespace = kube_namespace(env, "output-array")
    client = K8sClient.from_options({"kubeconfig": env["KUBECONFIG"], "namespace": namespace}.get)
    image = {"kubernetes": {"image": env.get("KUBE_BUSYBOX_IMAGE") or "localhost/bridge/busybox:latest",
                            "image_pull_policy": "Never"}}
    script = "#!/bin/sh\necho \"task $BRIDGE_ARRAY_INDEX\"\n[ \"$BRIDGE_ARRAY_INDEX\" = 7 ] && exit 3\nexit 0\n"
    try:
        result = run_to_the_end(client, {"identity": "out-arr-%s" % RUN_ID, "script": script, "backend_options": image,
                                         "array": {"indexes": "3,7,20-22"}, "output": {"tail_lines": 5}})
    finally:
        client.close()
        from kubernetes import client as k8s, config

        k8s.CoreV1Api(config.new_client_from_config(config_file=env["KUBECONFIG"])).delete_namespace(namespace)
    assert result["job"]["phase"] == "failed" and result["job"]["array"]["failed_indexes"] == "7", result["job"]
    assert result["output"] == {"text": "task 7\n", "lines": 1, "truncated": False}, result
