"""The login node of tools/sshd.sh: the real OpenSSH server that roles reach a cluster's login node
through. Key authentication only, host-key checking on, for the job users bridge and bridgeother;
the script's own start/status/stop on a second instance in a run dir of its own."""

import os
import stat
import subprocess

import pytest

from conftest import REPO, ansible_env, private_service, read_env_file, require_sshd

SSHD = os.path.join(REPO, "tools", "sshd.sh")
# A port of its own for the second instance: main's login node stays on 2222.
PRIVATE_PORT = "2223"


@pytest.fixture(scope="module")
def login():
    return require_sshd()


def ssh(env, *command, user=None, key=None, known_hosts=None):
    """`ssh` as a client of the login node types it: BatchMode (never a prompt), host-key checking on."""
    args = ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", "UserKnownHostsFile=%s" % (known_hosts or env["BRIDGE_SSH_KNOWN_HOSTS"]),
            "-o", "IdentitiesOnly=yes", "-i", key or env["BRIDGE_SSH_KEY"],
            "-p", env["BRIDGE_SSH_PORT"], "%s@%s" % (user or env["BRIDGE_SSH_USER"], env["BRIDGE_SSH_HOST"])]
    return subprocess.run(args + list(command), capture_output=True, text=True, timeout=60, check=False)


def new_key(directory):
    path = os.path.join(directory, "id_ed25519")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path], check=True)
    return path


@pytest.mark.parametrize("user_key", ["BRIDGE_SSH_USER", "BRIDGE_SSH_OTHER_USER"])
def test_key_login_with_host_key_checking(login, user_key):
    done = ssh(login, "id", "-un", user=login[user_key])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == login[user_key]


def test_login_node_has_what_ansible_and_synchronize_run(login):
    done = ssh(login, "command -v python3 rsync")
    assert done.returncode == 0, done.stderr
    assert [os.path.basename(p) for p in done.stdout.split()] == ["python3", "rsync"]


def test_ansible_ping_over_ssh(login):
    common = "-o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes" % login["BRIDGE_SSH_KNOWN_HOSTS"]
    done = subprocess.run(
        ["ansible", "all", "-i", "%s," % login["BRIDGE_SSH_HOST"], "-e", "ansible_port=%s" % login["BRIDGE_SSH_PORT"],
         "-e", "ansible_user=%s" % login["BRIDGE_SSH_USER"], "-e", "ansible_ssh_private_key_file=%s" % login["BRIDGE_SSH_KEY"],
         "-e", "ansible_ssh_common_args='%s'" % common, "-e", "ansible_python_interpreter=/usr/bin/python3",
         "-m", "ansible.builtin.ping"],
        env=ansible_env(), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"ping": "pong"' in done.stdout


def test_rsync_over_ssh_as_synchronize_uses_it(login, tmp_path):
    source = tmp_path / "payload.txt"
    source.write_text("staged\n")
    target = "bridge-sshd-test-%d.txt" % os.getpid()
    transport = "ssh -F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile=%s -i %s -p %s" % (
        login["BRIDGE_SSH_KNOWN_HOSTS"], login["BRIDGE_SSH_KEY"], login["BRIDGE_SSH_PORT"])
    done = subprocess.run(["rsync", "-e", transport, str(source),
                           "%s@%s:%s" % (login["BRIDGE_SSH_USER"], login["BRIDGE_SSH_HOST"], target)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    try:
        assert ssh(login, "cat", target).stdout == "staged\n"
    finally:
        ssh(login, "rm", "-f", target)


def test_a_key_not_authorized_is_refused(login, tmp_path):
    done = ssh(login, "true", key=new_key(str(tmp_path)))
    assert done.returncode == 255
    assert "Permission denied (publickey)" in done.stderr


def test_root_is_refused_even_with_the_authorized_key(login):
    done = ssh(login, "true", user="root")
    assert done.returncode == 255
    # Only publickey is offered: no password or keyboard-interactive fallback.
    assert "Permission denied (publickey)" in done.stderr


def test_an_unknown_host_key_is_refused(login, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    done = ssh(login, "true", known_hosts=str(empty))
    assert done.returncode == 255
    assert "Host key verification failed" in done.stderr


def test_another_host_key_for_the_address_is_refused(login, tmp_path):
    impostor = new_key(str(tmp_path)) + ".pub"
    with open(impostor) as handle:
        key_type, key = handle.read().split()[:2]
    known = tmp_path / "known_hosts"
    known.write_text("[%s]:%s %s %s\n" % (login["BRIDGE_SSH_HOST"], login["BRIDGE_SSH_PORT"], key_type, key))
    done = ssh(login, "true", known_hosts=str(known))
    assert done.returncode == 255
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in done.stderr


def test_script_start_is_idempotent_and_stop_ends_it():
    settings = {"BRIDGE_SSH_PORT": PRIVATE_PORT}
    # Under /tmp (mode 1777), where sshd's StrictModes would refuse authorized keys kept in the run dir.
    with private_service("sshd.sh", "sshd", settings) as env_file:
        run_env = dict(os.environ, BRIDGE_RUN=os.path.dirname(os.path.dirname(env_file)), **settings)
        run_dir = os.path.dirname(env_file)
        values = read_env_file(env_file)
        assert values["BRIDGE_SSH_PORT"] == PRIVATE_PORT
        for secret in (env_file, values["BRIDGE_SSH_KEY"]):
            assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
        with open(values["BRIDGE_SSH_KNOWN_HOSTS"]) as handle:
            assert handle.read().startswith("[127.0.0.1]:%s ssh-ed25519 " % PRIVATE_PORT)
        with open(os.path.join(run_dir, "pids", "sshd.pid")) as handle:
            recorded = handle.read()

        again = subprocess.run([SSHD, "start"], env=run_env, capture_output=True, text=True, check=False)
        assert again.returncode == 0, again.stderr
        assert "already running" in again.stderr
        with open(os.path.join(run_dir, "pids", "sshd.pid")) as handle:
            assert handle.read() == recorded
        assert ssh(values, "true").returncode == 0

        status = subprocess.run([SSHD, "status"], env=run_env, capture_output=True, text=True, check=True)
        assert status.stdout.strip() == "running ssh://127.0.0.1:%s" % PRIVATE_PORT
        subprocess.run([SSHD, "stop"], env=run_env, check=True)
        status = subprocess.run([SSHD, "status"], env=run_env, capture_output=True, text=True, check=True)
        assert status.stdout.strip() == "stopped ssh://127.0.0.1:%s" % PRIVATE_PORT
        assert ssh(values, "true").returncode == 255
