"""bridge.hpc.k8s_in_slurm against real Slurm 22.05 (the job runs as root on the host): a
single-node cluster comes up inside the job, a busybox Pod runs and its log is read through the
published API and token, a second run submits nothing, and after scancel and after the time limit
nothing of the cluster is left: no process, container or shim, mount, network namespace or veth,
listening port, cgroup or container log link. Main's node stays Ready throughout.
"""

import glob
import json
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.request
import uuid

import pytest

from conftest import REPO, RUN, VENV_BIN, ansible_env, kube_node_env, read_env_file, require_slurm

PLAYBOOK = os.path.join(REPO, "tests", "integration", "playbooks", "k8s_in_slurm.yml")
IMAGE_CACHE = os.path.expanduser("~/.cache/bridge/images")
BUSYBOX = "localhost/bridge/busybox:latest"


def kube_bin_dir():
    done = subprocess.run([os.path.join(REPO, "tools", "kube-control-plane.sh"), "bindir"], capture_output=True,
                          text=True, check=False, env=dict(os.environ, BRIDGE_RUN=RUN))
    if done.returncode != 0:
        pytest.skip("the Kubernetes binaries are not built: tools/kube-control-plane.sh build")
    return done.stdout.strip()


@pytest.fixture(scope="module")
def setting():
    values = require_slurm("22.05")
    images = sorted(glob.glob(os.path.join(IMAGE_CACHE, "pause-*.tar")) + glob.glob(os.path.join(IMAGE_CACHE, "busybox-*.tar")))
    if len(images) < 2:
        pytest.skip("no pause and busybox image tars in %s: tools/kube-node.sh build" % IMAGE_CACHE)
    token = subprocess.run([os.path.join(REPO, "tools", "slurm-cluster.sh"), "token", "22.05", "root"], capture_output=True,
                           text=True, check=True, env=dict(os.environ, BRIDGE_RUN=RUN)).stdout.strip()
    # A job dir of this run's own: a fresh clone's Slurm numbers its jobs from 1 again, and the
    # planting tests below must not meet ksi-<id> dirs that an earlier run left for the same ids.
    job_dir = tempfile.mkdtemp(prefix="ksi-it-", dir="/tmp")
    os.chmod(job_dir, 0o755)  # the role's mode: its "Make the job dir" then changes nothing
    yield {
        "url": values["SLURM_URL"], "token": token,
        "vars": {
            "k8s_in_slurm_slurm_url": values["SLURM_URL"], "k8s_in_slurm_slurm_user": "root",
            "k8s_in_slurm_slurm_token": token, "k8s_in_slurm_job_dir": job_dir,
            "k8s_in_slurm_bin_dir": kube_bin_dir(), "k8s_in_slurm_images": images,
            "k8s_in_slurm_wait_timeout": 300,
            # One of the test node's two CPUs: other suites' jobs share the partition.
            "k8s_in_slurm_cpus": 1,
        },
    }
    shutil.rmtree(job_dir, ignore_errors=True)


def run_role(setting, tmp_path, options=(), succeed=True, **extra):
    """ansible-playbook with the role; returns (published cluster, output)."""
    result = str(tmp_path / ("result-%s.json" % uuid.uuid4().hex[:6]))
    variables = dict(setting["vars"], result_file=result, **extra)
    vars_path = str(tmp_path / "vars.json")
    with os.fdopen(os.open(vars_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as handle:
        json.dump(variables, handle)
    done = subprocess.run([os.path.join(VENV_BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local", PLAYBOOK,
                           "-e", "@" + vars_path] + list(options), capture_output=True, text=True, env=ansible_env(),
                          check=False)
    output = done.stdout + done.stderr
    assert setting["token"] not in output
    assert (done.returncode == 0) == succeed, output
    published = {}
    if os.path.exists(result):
        with open(result) as handle:
            published = json.load(handle)
    return published, output


def slurm_job(setting, job_id):
    request = urllib.request.Request("%s/slurm/v0.0.38/job/%s" % (setting["url"], job_id), headers={
        "X-SLURM-USER-TOKEN": setting["token"], "X-SLURM-USER-NAME": "root"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)["jobs"][0]


def wait_until(predicate, what, timeout=300):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "%s: not within %ds" % (what, timeout)
        time.sleep(0.5)


def pod(name, text):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "main", "image": BUSYBOX, "imagePullPolicy": "Never",
                "command": ["sh", "-c", "echo %s; sleep 3600" % text]}]}}


def api_get(env, path):
    """GET on the published API with the published token, verifying the cluster's CA."""
    context = ssl.create_default_context(cafile=env["KSI_CA_FILE"])
    request = urllib.request.Request(env["K8S_CLUSTER_API"] + path,
                                     headers={"Authorization": "Bearer " + env["K8S_CLUSTER_API_TOKEN"]})
    with urllib.request.urlopen(request, context=context, timeout=10) as response:
        return response.read().decode()


def what_the_cluster_holds(job_dir):
    """Everything the job recorded: pids, ports, netns, veth, cgroups, pod network namespaces."""
    held = {"pids": [], "ports": [], "pod_netns": []}
    for path in glob.glob(os.path.join(job_dir, "pids", "*.pid")):
        with open(path) as handle:
            pid, start = handle.read().split()
        held["pids"].append((int(pid), start))
    with open(os.path.join(job_dir, "ports")) as handle:
        held["ports"] = [int(p) for p in handle.read().split()]
    for name in ("netns", "veth", "cgroups"):
        with open(os.path.join(job_dir, name)) as handle:
            held[name] = handle.read().split()
    for state in glob.glob(os.path.join(job_dir, "containerd", "runc", "*", "*", "state.json")):
        with open(state) as handle:
            spec = json.load(handle)
        # /var/run is /run, and /proc/mounts says /run.
        held["pod_netns"] += [n["path"].replace("/var/run/", "/run/", 1) for n in spec.get("config", {}).get("namespaces", [])
                              if n.get("type") == "NEWNET" and "/netns/" in n.get("path", "")]
    return held


def starttime(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else fields[19]


def processes_of(job_dir):
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink("/proc/%s/cwd" % entry)
        except OSError:
            continue
        if job_dir + "/" in cmdline or cwd == job_dir or cwd.startswith(job_dir + "/"):
            found.append("%s %s" % (entry, cmdline))
    return found


def listening(port):
    out = subprocess.run(["ss", "-Hltn", "sport = :%d" % port], capture_output=True, text=True, check=False).stdout
    return bool(out.strip())


def leftovers(job_dir, held):
    """What is left of the cluster; empty when the teardown was complete."""
    left = ["process %s" % p for p in processes_of(job_dir)]
    left += ["recorded pid %d" % pid for pid, start in held["pids"] if starttime(pid) == start]
    with open("/proc/mounts") as handle:
        mounts = [line.split()[1] for line in handle]
    left += ["mount %s" % m for m in mounts if m.startswith(job_dir + "/") or m in held["pod_netns"]]
    left += ["pod netns %s" % n for n in held["pod_netns"] if os.path.exists(n)]
    left += ["netns %s" % n for n in held["netns"] if os.path.exists("/run/netns/" + n)]
    for veth in held["veth"]:
        if subprocess.run(["ip", "link", "show", veth], capture_output=True, check=False).returncode == 0:
            left.append("veth %s" % veth)
    left += ["port %d" % p for p in held["ports"] if listening(p)]
    left += ["cgroup %s" % c for c in held["cgroups"] if os.path.exists(c)]
    # Also any the job did not record: the kubelet's cgroup root is /ksi-<job id> in every hierarchy.
    left += ["unrecorded cgroup %s" % c for n in held["netns"]
             for c in glob.glob("/sys/fs/cgroup/*/%s" % n) + glob.glob("/sys/fs/cgroup/%s" % n) if c not in held["cgroups"]]
    left += ["log link %s" % link for link in glob.glob("/var/log/containers/*.log")
             if os.path.realpath(link).startswith(job_dir + "/")]
    return left


def assert_torn_down(job_dir, held):
    assert held["pids"] and held["netns"] and held["cgroups"], held
    wait_until(lambda: os.path.exists(os.path.join(job_dir, "torn-down")), "teardown of %s" % job_dir)
    # The reaper leaves within a second of the batch script's end; nothing else may stay.
    try:
        wait_until(lambda: not leftovers(job_dir, held), "nothing left of %s" % job_dir, timeout=30)
    except AssertionError:
        raise AssertionError("left after teardown: %s\n%s" % (leftovers(job_dir, held), teardown_log(job_dir)))


def teardown_log(job_dir):
    path = os.path.join(job_dir, "log", "teardown.log")
    return open(path).read() if os.path.exists(path) else "(no teardown log)"


def main_node_ready():
    values = kube_node_env()
    if values is None:
        return
    out = subprocess.run([values["KUBECTL"], "--kubeconfig", values["KUBECONFIG"], "get", "node", values["KUBE_NODE_NAME"],
                          "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}"],
                         capture_output=True, text=True, check=False).stdout
    assert out == "True", "main's node %s is not Ready after the in-job cluster" % values["KUBE_NODE_NAME"]


def jobs_named(setting, name):
    request = urllib.request.Request("%s/slurm/v0.0.38/jobs" % setting["url"], headers={
        "X-SLURM-USER-TOKEN": setting["token"], "X-SLURM-USER-NAME": "root"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return [job for job in json.load(response)["jobs"] if job["name"] == name]


def test_bad_input_names_the_variable_and_submits_nothing(setting, tmp_path):
    _none, output = run_role(setting, tmp_path, succeed=False, k8s_in_slurm_name="Not_A_Name")
    assert "k8s_in_slurm_name must be 1-40 lowercase letters" in output, output
    _none, output = run_role(setting, tmp_path, succeed=False, k8s_in_slurm_name="ok", k8s_in_slurm_state="gone")
    assert "k8s_in_slurm_state" in output and "present, absent" in output, output
    assert not jobs_named(setting, "ksi-Not_A_Name") and not jobs_named(setting, "ksi-ok")


def test_pod_runs_second_run_submits_nothing_cancel_leaves_nothing(setting, tmp_path):
    name = "it-%s" % uuid.uuid4().hex[:6]
    text = "hello from ksi %s" % name
    _none, output = run_role(setting, tmp_path, options=["--check"], k8s_in_slurm_name=name, k8s_in_slurm_time_limit=10,
                             k8s_in_slurm_manifests=[pod("hello", text)])
    assert "changed=1" in output and not jobs_named(setting, "ksi-" + name), output
    t0 = time.monotonic()
    first, output = run_role(setting, tmp_path, k8s_in_slurm_name=name, k8s_in_slurm_time_limit=10,
                             k8s_in_slurm_manifests=[pod("hello", text)])
    print("bring-up: role %.1fs (submit, queue, Ready, Pod running); in the job: %s"
          % (time.monotonic() - t0, open(os.path.join(first["job_dir"], "times")).read().replace("\n", " ")))
    assert first["submitted"] is True, output
    try:
        job_dir = first["job_dir"]
        env = read_env_file(first["env_file"])
        assert set(env) >= {"K8S_CLUSTER_NAME", "K8S_CLUSTER_API", "K8S_CLUSTER_API_TOKEN", "K8S_CLUSTER_PORT"}
        assert env["K8S_CLUSTER_NAME"] == name and env["K8S_CLUSTER_API"] == "https://127.0.0.1:" + env["K8S_CLUSTER_PORT"]
        assert oct(os.stat(first["env_file"]).st_mode & 0o777) == "0o600"
        assert oct(os.stat(first["kubeconfig"]).st_mode & 0o777) == "0o600"
        assert env["K8S_CLUSTER_API_TOKEN"] not in output
        wait_until(lambda: text in api_get(env, "/api/v1/namespaces/default/pods/hello/log"), "the Pod's log", timeout=60)
        print("bring-up: submit -> Pod output read %.1fs" % (time.monotonic() - t0))
        node = json.loads(api_get(env, "/api/v1/nodes/" + env["KSI_NODE_NAME"]))
        assert [c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready"] == ["True"]
        main_node_ready()

        again, output = run_role(setting, tmp_path, k8s_in_slurm_name=name, k8s_in_slurm_time_limit=10,
                                 k8s_in_slurm_manifests=[pod("hello", text)])
        assert again["submitted"] is False and again["job_id"] == first["job_id"], output
        assert "changed=0" in output, output
        held = what_the_cluster_holds(job_dir)
        assert held["pod_netns"], "no pod network namespace recorded"
    except BaseException:
        run_role(setting, tmp_path, k8s_in_slurm_name=name, k8s_in_slurm_state="absent")
        raise
    t1 = time.monotonic()
    _gone, output = run_role(setting, tmp_path, k8s_in_slurm_name=name, k8s_in_slurm_state="absent")
    print("teardown on cancel: %.1fs (role: scancel -> torn-down)" % (time.monotonic() - t1))
    assert "changed=1" in output, output
    assert slurm_job(setting, first["job_id"])["job_state"] == "CANCELLED"
    assert_torn_down(job_dir, held)
    _gone, output = run_role(setting, tmp_path, k8s_in_slurm_name=name, k8s_in_slurm_state="absent")
    assert "changed=0" in output, output
    main_node_ready()


@pytest.mark.parametrize("grace", [0, 20], ids=["slurm-kills-at-limit", "job-ends-before-limit"])
def test_time_limit_leaves_nothing(setting, tmp_path, grace):
    """grace 0: Slurm's TERM at the limit, SIGKILL after KillWait (5 s), the reaper finishes;
    grace 20: the job's own clock tears down 20 s before the limit and the job completes."""
    name = "tl-%s" % uuid.uuid4().hex[:6]
    first, output = run_role(setting, tmp_path, k8s_in_slurm_name=name, k8s_in_slurm_time_limit=1,
                             k8s_in_slurm_teardown_grace=grace, k8s_in_slurm_manifests=[pod("hello", "timeout test")])
    job_dir = first["job_dir"]
    try:
        held = what_the_cluster_holds(job_dir)
        wait_until(lambda: slurm_job(setting, first["job_id"])["job_state"] not in ("RUNNING", "COMPLETING", "PENDING"),
                   "the end of job %s" % first["job_id"], timeout=180)
    except BaseException:
        run_role(setting, tmp_path, k8s_in_slurm_name=name, k8s_in_slurm_state="absent")
        raise
    ended = time.monotonic()
    state = slurm_job(setting, first["job_id"])["job_state"]
    assert state == ("TIMEOUT" if grace == 0 else "COMPLETED"), state
    assert_torn_down(job_dir, held)
    print("time limit (grace %d): job %s, nothing left %.1fs after its end; %s"
          % (grace, state, time.monotonic() - ended, teardown_log(job_dir).strip().splitlines()[-1]))
    main_node_ready()


def batch_script_of(job_dir):
    """(pid, start time) of the job's batch script, as its reaper recorded them on its command line."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/cmdline" % entry, "rb") as handle:
                    args = handle.read().decode().split("\0")
            except OSError:
                continue
            if "reap" in args and job_dir in args:
                index = args.index("reap")
                return int(args[index + 2]), args[index + 3]
    raise AssertionError("no reaper of %s" % job_dir)


def test_sigkill_of_the_batch_script_leaves_nothing(setting, tmp_path):
    """A SIGKILL to the batch script (the OOM killer, KillWait running out) runs no trap: the
    reaper sees the script gone and tears down."""
    name = "kill-%s" % uuid.uuid4().hex[:6]
    first, output = run_role(setting, tmp_path, k8s_in_slurm_name=name, k8s_in_slurm_time_limit=10,
                             k8s_in_slurm_manifests=[pod("hello", "sigkill test")])
    job_dir = first["job_dir"]
    try:
        held = what_the_cluster_holds(job_dir)
        pid, start = batch_script_of(job_dir)
        assert starttime(pid) == start
        os.kill(pid, signal.SIGKILL)
    except BaseException:
        run_role(setting, tmp_path, k8s_in_slurm_name=name, k8s_in_slurm_state="absent")
        raise
    assert_torn_down(job_dir, held)
    assert "teardown (the batch script ended)" in teardown_log(job_dir), teardown_log(job_dir)
    print("SIGKILL of the batch script: %s" % teardown_log(job_dir).strip().splitlines()[-1])
    main_node_ready()


# How many of the ids after a probe job are planted. 22.05 is shared with the tests that run at the
# same time, whose jobs take ids between the probe and the role's submit (seconds later): the role's
# job gets one of the next PLANTED ids as long as fewer than that many jobs are submitted in between,
# which is more than a whole run of the integration tests submits to 22.05. Planting an id costs a
# directory in this module's own job dir, which no other test reads.
PLANTED = 1000


def next_job_ids(setting, count=PLANTED):
    """The ids Slurm hands out next: one held job is submitted and cancelled to learn the counter."""
    body = json.dumps({"script": "#!/bin/sh\ntrue\n", "job": {
        "name": "ksi-probe", "hold": True, "current_working_directory": "/tmp", "environment": {"PATH": "/bin:/usr/bin"}}})
    headers = {"X-SLURM-USER-TOKEN": setting["token"], "X-SLURM-USER-NAME": "root", "Content-Type": "application/json"}
    request = urllib.request.Request("%s/slurm/v0.0.38/job/submit" % setting["url"], data=body.encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        probe = json.load(response)["job_id"]
    cancel = urllib.request.Request("%s/slurm/v0.0.38/job/%s" % (setting["url"], probe), headers=headers, method="DELETE")
    urllib.request.urlopen(cancel, timeout=10).close()
    return [probe + n for n in range(1, count + 1)]


def plant_earlier_cluster(setting, job_id, pid_line):
    """A job dir as an earlier cluster with this job id left it: torn down, one daemon recorded."""
    job_dir = os.path.join(setting["vars"]["k8s_in_slurm_job_dir"], "ksi-%d" % job_id)
    os.makedirs(os.path.join(job_dir, "pids"))
    with open(os.path.join(job_dir, "torn-down"), "w") as handle:
        handle.write("earlier cluster\n")
    with open(os.path.join(job_dir, "state"), "w") as handle:
        handle.write("torn-down\n")
    with open(os.path.join(job_dir, "pids", "etcd.pid"), "w") as handle:
        handle.write(pid_line + "\n")
    return job_dir


def test_a_job_dir_left_by_an_earlier_cluster_is_moved_aside_and_this_one_torn_down(setting, tmp_path):
    """Slurm numbers jobs anew after a state reset: a dir ksi-<id> with a torn-down mark may wait
    for the new job. Its mark must not make the new cluster's teardown a no-op."""
    planted = {}
    for job_id in next_job_ids(setting):
        # A dead daemon: pid 1 with a start time it never had.
        planted[job_id] = plant_earlier_cluster(setting, job_id, "1 0")
    name = "reuse-%s" % uuid.uuid4().hex[:6]
    first, output = run_role(setting, tmp_path, k8s_in_slurm_name=name, k8s_in_slurm_time_limit=10,
                             k8s_in_slurm_manifests=[pod("hello", "reused dir")])
    try:
        job_id = int(first["job_id"])
        assert job_id in planted, "job %d got none of the planted ids %d-%d" % (job_id, min(planted), max(planted))
        job_dir = first["job_dir"]
        assert job_dir == planted[job_id]
        assert not os.path.exists(os.path.join(job_dir, "torn-down"))
        aside = glob.glob(job_dir + ".earlier-*")
        assert len(aside) == 1 and open(os.path.join(aside[0], "torn-down")).read() == "earlier cluster\n", aside
        held = what_the_cluster_holds(job_dir)
    except BaseException:
        run_role(setting, tmp_path, k8s_in_slurm_name=name, k8s_in_slurm_state="absent")
        raise
    run_role(setting, tmp_path, k8s_in_slurm_name=name, k8s_in_slurm_state="absent")
    assert_torn_down(job_dir, held)
    subprocess.run(["rm", "-rf"] + list(planted.values()) + glob.glob(job_dir + ".earlier-*"), check=False)
    main_node_ready()


def test_a_job_dir_whose_daemon_still_runs_is_refused(setting, tmp_path):
    keeper = subprocess.Popen(["sleep", "600"])
    planted = {}
    try:
        planted = {job_id: plant_earlier_cluster(setting, job_id, "%d %s" % (keeper.pid, starttime(keeper.pid)))
                   for job_id in next_job_ids(setting)}
        name = "busy-%s" % uuid.uuid4().hex[:6]
        _none, output = run_role(setting, tmp_path, succeed=False, k8s_in_slurm_name=name, k8s_in_slurm_time_limit=5,
                                 k8s_in_slurm_wait_timeout=30)
        # The job ends at once: the role sees it ended, or (seeing it run) not taking its dir.
        assert "still runs; not reusing it" in output, output
        for path in planted.values():
            assert os.path.exists(os.path.join(path, "torn-down")) and not glob.glob(path + ".earlier-*"), path
        wait_until(lambda: all(job["job_state"] not in ("RUNNING", "PENDING", "COMPLETING")
                               for job in jobs_named(setting, "ksi-" + name)), "the refused job's end", timeout=60)
    finally:
        keeper.kill()
        keeper.wait()
        subprocess.run(["rm", "-rf"] + list(planted.values()), check=False)


def test_a_cluster_that_cannot_come_up_fails_with_its_reason(setting, tmp_path):
    name = "bad-%s" % uuid.uuid4().hex[:6]
    _none, output = run_role(setting, tmp_path, succeed=False, k8s_in_slurm_name=name, k8s_in_slurm_time_limit=5,
                             k8s_in_slurm_bin_dir="/nonexistent/bin")
    assert "is not ready: failed: missing binaries: /nonexistent/bin/etcd" in output, output
    wait_until(lambda: all(job["job_state"] not in ("RUNNING", "PENDING", "COMPLETING")
                           for job in jobs_named(setting, "ksi-" + name)), "the failed job's end", timeout=60)
