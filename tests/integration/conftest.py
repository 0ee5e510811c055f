"""Shared pieces of the integration tests: the real clusters started by tools/ and ansible runs."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = os.environ.get("BRIDGE_RUN", os.path.join(REPO, ".run"))
VENV_BIN = os.path.dirname(sys.executable)
SLURM_VERSIONS = ("22.05", "24.11", "26.05")


def slurm_env(version):
    """The env file tools/slurm-cluster.sh wrote for one cluster, or None if it is not running."""
    return read_env_file(os.path.join(RUN, "slurm-%s" % version, "env"))


def require_slurm(version):
    """Env of a running cluster. Under `make test` (BRIDGE_REQUIRE_SERVICES=1) a missing one fails."""
    values = slurm_env(version)
    if values is None:
        message = "Slurm %s is not running: tools/slurm-cluster.sh start %s" % (version, version)
        if os.environ.get("BRIDGE_REQUIRE_SERVICES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return values


def read_env_file(path):
    if not os.path.exists(path):
        return None
    values = {}
    with open(path) as handle:
        for line in handle:
            key, sep, value = line.strip().partition("=")
            if sep:
                values[key] = value
    return values


def ray_env():
    """The env file tools/ray-cluster.sh wrote, or None if the head is not running."""
    return read_env_file(os.path.join(RUN, "ray", "env"))


def require_ray():
    values = ray_env()
    if values is None:
        message = "Ray is not running: tools/ray-cluster.sh start"
        if os.environ.get("BRIDGE_REQUIRE_SERVICES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return values


def ansible_env(extra=None):
    env = dict(os.environ)
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": os.path.join(RUN, "collections"),
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        "PATH": VENV_BIN + os.pathsep + env.get("PATH", ""),
    })
    env.update(extra or {})
    return env


def start_playbook(playbook, extra_vars, env, log_path):
    """Start ansible-playbook in the background; returns the Popen (output goes to log_path)."""
    # Extra vars may hold a token: a 0600 file keeps it out of the process list.
    vars_path = log_path + ".vars.json"
    with os.fdopen(os.open(vars_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as handle:
        json.dump(extra_vars, handle)
    args = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local", playbook, "-e", "@" + vars_path]
    log = open(log_path, "w")
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=os.path.dirname(playbook))
