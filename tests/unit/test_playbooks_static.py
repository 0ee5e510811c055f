"""The playbooks of playbooks/ as files: what a run with `-c local` (make hybrid, make demo, AWX's
localhost inventory) does to the hosts they add. tests/integration/test_hybrid_playbook.py runs them."""

import glob
import os

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOKS = sorted(glob.glob(os.path.join(REPO, "playbooks", "*.yml")))


def tasks_of(play):
    """Every task of a play, blocks opened."""
    found = []
    pending = list(play.get("tasks") or []) + list(play.get("pre_tasks") or []) + list(play.get("post_tasks") or [])
    while pending:
        task = pending.pop(0)
        found.append(task)
        for key in ("block", "rescue", "always"):
            pending.extend(task.get(key) or [])
    return found


def added_hosts():
    for path in PLAYBOOKS:
        with open(path) as handle:
            for play in yaml.safe_load(handle) or []:
                for task in tasks_of(play):
                    for module in ("ansible.builtin.add_host", "add_host"):
                        if module in task:
                            yield os.path.basename(path), task.get("name"), task[module]


def test_the_playbooks_add_a_login_node():
    assert any(playbook == "hybrid.yml" for playbook, _name, _args in added_hosts())


@pytest.mark.parametrize("playbook, name, args", list(added_hosts()))
def test_a_host_a_playbook_adds_says_how_it_is_reached(playbook, name, args):
    """`ansible-playbook -c local` applies to every host that has no ansible_connection: a login node
    added without one runs each task delegated to it on this machine, as the user running Ansible
    (a delegated `id -un` said root, and files staged "to the login node" were root's)."""
    assert args.get("ansible_connection") == "ssh", "%s: %r adds a host without ansible_connection: ssh" % (
        playbook, name)
