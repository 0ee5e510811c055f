"""The two execution environment definitions (ee/execution-environment.yml on the project's Debian
base, ee/execution-environment-awx.yml on AWX's own EE) install the same ansible-core,
ansible-runner and collections, and the AWX one carries nothing of the Debian base (docs/awx.md)."""

import os
import shutil
import subprocess

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def definition(name):
    with open(os.path.join(REPO, "ee", name)) as handle:
        return yaml.safe_load(handle)


def test_the_awx_based_definition_installs_what_the_own_one_does():
    own, awx = definition("execution-environment.yml"), definition("execution-environment-awx.yml")
    for key in ("ansible_core", "ansible_runner", "galaxy"):
        assert own["dependencies"][key] == awx["dependencies"][key], key
    assert own["additional_build_files"] == awx["additional_build_files"]
    # Both install locks/ee.txt first, hash-checked (tests/unit/test_locks.py holds its ranges).
    assert own["additional_build_steps"] == awx["additional_build_steps"]
    assert {"src": "../locks/ee.txt", "dest": "lock"} in own["additional_build_files"]
    assert any("--require-hashes -r" in step for step in own["additional_build_steps"]["prepend_base"])
    assert awx["images"]["base_image"]["name"].startswith("quay.io/ansible/awx-ee:")
    assert not awx["images"]["base_image"]["name"].endswith(":latest"), "pin the AWX it is made for"
    assert "package_manager_path" not in (awx.get("options") or {}), "awx-ee has dnf, ansible-builder's default"
    assert awx["dependencies"]["python_interpreter"]["python_path"] == "/usr/bin/python3.11"


@pytest.mark.skipif(not shutil.which("ansible-builder"), reason="ansible-builder is not installed")
def test_ansible_builder_makes_a_build_context_of_the_awx_based_definition(tmp_path):
    # The artifacts ee/collections holds are made by tools/ee-image.sh; create only copies the dir.
    ee = tmp_path / "ee"
    (ee / "collections").mkdir(parents=True)
    for name in ("execution-environment-awx.yml", "requirements.yml"):
        shutil.copy(os.path.join(REPO, "ee", name), str(ee / name))
    (tmp_path / "locks").mkdir()
    shutil.copy(os.path.join(REPO, "locks", "ee.txt"), str(tmp_path / "locks" / "ee.txt"))
    context = tmp_path / "context"
    done = subprocess.run(["ansible-builder", "create", "-f", str(ee / "execution-environment-awx.yml"),
                           "-c", str(context), "--output-filename", "Containerfile"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    containerfile = (context / "Containerfile").read_text()
    assert "FROM $EE_BASE_IMAGE" in containerfile or "quay.io/ansible/awx-ee" in containerfile
    assert "quay.io/ansible/awx-ee:24.6.1" in containerfile
    assert "apt-get" not in containerfile
    assert "--require-hashes -r /tmp/bridge-ee.lock" in containerfile
    assert (context / "_build" / "lock" / "ee.txt").read_text() == open(os.path.join(REPO, "locks", "ee.txt")).read()
