"""The playbooks of playbooks/ as files: what a run with `-c local` (make hybrid, make demo, AWX's
localhost inventory) does to the hosts they add. tests/integration/test_hybrid_playbook.py and
test_execution_environment.py run them."""

import glob
import os

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOKS = os.path.join(REPO, "playbooks")
FILES = sorted(glob.glob(os.path.join(PLAYBOOKS, "*.yml")) + glob.glob(os.path.join(PLAYBOOKS, "tasks", "*.yml")))


def load(path):
    with open(path) as handle:
        return yaml.safe_load(handle) or []


def tasks_of(document):
    """Every task of a playbook's plays or of a tasks file, blocks opened."""
    pending = []
    for item in document:
        if "hosts" in item:
            for key in ("pre_tasks", "tasks", "post_tasks"):
                pending.extend(item.get(key) or [])
        else:
            pending.append(item)
    found = []
    while pending:
        task = pending.pop(0)
        found.append(task)
        for key in ("block", "rescue", "always"):
            pending.extend(task.get(key) or [])
    return found


def added_hosts():
    for path in FILES:
        for task in tasks_of(load(path)):
            for module in ("ansible.builtin.add_host", "add_host"):
                if module in task:
                    yield os.path.relpath(path, PLAYBOOKS), task.get("name"), task[module]


def imported(playbook):
    return [task.get("ansible.builtin.import_tasks") for task in tasks_of(load(os.path.join(PLAYBOOKS, playbook)))]


@pytest.mark.parametrize("playbook", ["hybrid.yml", "demo.yml"])
def test_the_playbooks_that_read_job_output_add_the_login_node(playbook):
    assert "tasks/login_node.yml" in imported(playbook)


@pytest.mark.parametrize("where, name, args", list(added_hosts()))
def test_a_host_a_playbook_adds_says_how_it_is_reached(where, name, args):
    """`ansible-playbook -c local` applies to every host that has no ansible_connection: a login node
    added without one runs each task delegated to it on this machine, as the user running Ansible
    (a delegated `id -un` said root, and files staged "to the login node" were root's)."""
    assert args.get("ansible_connection") == "ssh", "%s: %r adds a host without ansible_connection: ssh" % (
        where, name)


def test_there_is_a_host_added():
    assert list(added_hosts())
