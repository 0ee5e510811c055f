"""What the stage tests share: the login node (tools/sshd.sh) and the S3 server (tools/s3.sh) as an
inventory and a boto3 client, and ansible-playbook runs against them."""

import contextlib
import json
from datetime import datetime
import os
import subprocess
import uuid

import boto3
import botocore.config
import yaml

from conftest import REPO, RUN, ansible_env, read_env_file, required

PLAYBOOKS = os.path.join(REPO, "tests", "integration", "playbooks")


def require_login_node():
    login = required(read_env_file(os.path.join(RUN, "sshd", "env")),
                     "the login node's sshd is not running: tools/sshd.sh start")
    ensure_login_boto3(login)
    return login


def ensure_login_boto3(login):
    """The S3 module runs on the login node with its own python3 (tools/sshd.sh installs Debian's
    python3-boto3 on the login node it provisions)."""
    if ssh(login, "/usr/bin/python3 -c 'import boto3'", check=False).returncode != 0:
        raise AssertionError("the login node has no boto3 for bridge.hpc.s3_object_sync: install python3-boto3 "
                             "there (tools/sshd.sh start does)")


def require_s3_server():
    return required(read_env_file(os.path.join(RUN, "s3", "env")), "the S3 server is not running: tools/s3.sh start")


def write_inventory(directory, login):
    """localhost (the controller) and `login`, reached over the real sshd with host-key checking on.
    The login node runs modules with Debian's python3 (and its python3-boto3): the controller's venv
    is not readable by the login user, as on a real cluster."""
    ssh_args = "-o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes" % login["BRIDGE_SSH_KNOWN_HOSTS"]
    inventory = {"all": {"hosts": {
        "localhost": {"ansible_connection": "local"},
        "login": {"ansible_host": login["BRIDGE_SSH_HOST"], "ansible_port": int(login["BRIDGE_SSH_PORT"]),
                  "ansible_user": login["BRIDGE_SSH_USER"], "ansible_ssh_private_key_file": login["BRIDGE_SSH_KEY"],
                  "ansible_ssh_common_args": ssh_args, "ansible_python_interpreter": "/usr/bin/python3"},
    }}}
    path = os.path.join(str(directory), "inventory.yml")
    with open(path, "w") as handle:
        yaml.safe_dump(inventory, handle)
    return path


def ssh(login, command, stdin=None, check=True):
    """Run `command` on the login node as its user, over the real sshd."""
    args = ["ssh", "-o", "BatchMode=yes", "-o", "UserKnownHostsFile=%s" % login["BRIDGE_SSH_KNOWN_HOSTS"],
            "-o", "StrictHostKeyChecking=yes", "-i", login["BRIDGE_SSH_KEY"], "-p", login["BRIDGE_SSH_PORT"],
            "%s@%s" % (login["BRIDGE_SSH_USER"], login["BRIDGE_SSH_HOST"]), command]
    return subprocess.run(args, input=stdin, capture_output=True, check=check, timeout=120)


def run_playbook(name, inventory, extra_vars, env=None, tmp_path=None):
    """ansible-playbook NAME (under tests/integration/playbooks) with extra vars from a 0600 file."""
    vars_path = os.path.join(str(tmp_path or os.path.dirname(inventory)), "vars-%s.json" % uuid.uuid4().hex[:6])
    with os.fdopen(os.open(vars_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as handle:
        json.dump(extra_vars, handle)
    return subprocess.run(["ansible-playbook", "-i", inventory, os.path.join(PLAYBOOKS, name), "-e", "@" + vars_path],
                          env=ansible_env(env), capture_output=True, text=True, timeout=1200, check=False)


def recap(completed):
    """{"ok": n, "changed": n, "failed": n} of localhost from a playbook's PLAY RECAP."""
    for line in completed.stdout.splitlines()[::-1]:
        if line.startswith("localhost") and "changed=" in line:
            return dict((k, int(v)) for k, v in (field.split("=") for field in line.split(":", 1)[1].split()))
    raise AssertionError("no recap in:\n" + completed.stdout[-3000:])


def s3_client(s3):
    return boto3.client("s3", endpoint_url=s3["BRIDGE_S3_ENDPOINT"], region_name=s3["AWS_DEFAULT_REGION"],
                        aws_access_key_id=s3["AWS_ACCESS_KEY_ID"], aws_secret_access_key=s3["AWS_SECRET_ACCESS_KEY"],
                        verify=s3["AWS_CA_BUNDLE"], config=botocore.config.Config(s3={"addressing_style": "path"}))


@contextlib.contextmanager
def fresh_bucket():
    """A fresh bucket, emptied (uploads aborted) and removed afterwards."""
    s3 = require_s3_server()
    client = s3_client(s3)
    name = "stage-%s" % uuid.uuid4().hex[:10]
    client.create_bucket(Bucket=name)
    try:
        yield name
    finally:
        for upload in client.list_multipart_uploads(Bucket=name).get("Uploads", []):
            client.abort_multipart_upload(Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"])
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=name):
            for item in page.get("Contents", []):
                client.delete_object(Bucket=name, Key=item["Key"])
        client.delete_bucket(Bucket=name)


def run_json(args, env=None):
    """An ansible or ansible-playbook command's results through the json callback, with each task's
    duration (the callback records start and end)."""
    env = dict(env or {}, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    done = subprocess.run(args, env=ansible_env(env), capture_output=True, text=True, timeout=1200, check=False)
    return done, json.loads(done.stdout) if done.stdout.startswith("{") else None


def task_results(output, name):
    """[(localhost's result, seconds)] of every task called `name`, in order."""
    found = []
    for play in output["plays"]:
        for task in play["tasks"]:
            if task["task"]["name"] == name:
                took = task["task"]["duration"]
                found.append((task["hosts"]["localhost"], seconds_between(took["start"], took["end"])))
    return found


def seconds_between(start, end):
    pattern = "%Y-%m-%dT%H:%M:%S.%fZ"
    return (datetime.strptime(end, pattern) - datetime.strptime(start, pattern)).total_seconds()


def stage_once(inventory, extra_vars, env, tmp_path):
    """Run stage_one.yml; (completed process, stage_result, {task name: seconds})."""
    vars_path = os.path.join(str(tmp_path), "vars-%s.json" % uuid.uuid4().hex[:6])
    with os.fdopen(os.open(vars_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as handle:
        json.dump(extra_vars, handle)
    done, output = run_json(["ansible-playbook", "-i", inventory, os.path.join(PLAYBOOKS, "stage_one.yml"),
                             "-e", "@" + vars_path], env)
    if output is None or done.returncode != 0:
        return done, None, {}
    durations = {}
    for play in output["plays"]:
        for task in play["tasks"]:
            took = task["task"]["duration"]
            # Role tasks are named "<role> : <task>"
            durations[task["task"]["name"].split(" : ")[-1]] = seconds_between(took["start"], took["end"])
    shown = task_results(output, "Show the result")[-1][0]
    return done, shown["stage_result"], durations
