"""The controller imports the bridge.hpc its playbooks run, from where Ansible finds collections."""

import os
import subprocess
import sys

import pytest

from bridge_controller import collection
from bridge_controller.main import parse_args

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CONTROLLER = os.path.join(REPO, "controller")


def installed(tmp_path, name="collections"):
    """A collections directory holding bridge.hpc as tools/bootstrap.sh links it: to the checkout."""
    directory = tmp_path / name
    (directory / "ansible_collections" / "bridge").mkdir(parents=True)
    (directory / "ansible_collections" / "bridge" / "hpc").symlink_to(REPO)
    return str(directory)


def test_the_directories_are_ansible_collections_path_else_ansibles_defaults():
    assert collection.search_path({"ANSIBLE_COLLECTIONS_PATH": "/a:~/b:"}) == ["/a", os.path.expanduser("~/b")]
    assert collection.search_path({"ANSIBLE_COLLECTIONS_PATHS": "/old"}) == ["/old"]
    assert collection.search_path({"ANSIBLE_HOME": "/home/ansible"}) == [
        "/home/ansible/collections", "/usr/share/ansible/collections"]
    assert collection.search_path({})[1:] == ["/usr/share/ansible/collections"]


def test_the_first_directory_that_holds_the_collection_is_used_also_when_it_names_ansible_collections(tmp_path):
    first, second = installed(tmp_path, "first"), installed(tmp_path, "second")
    assert collection.collections_dir([str(tmp_path / "none"), first, second]) == first
    assert collection.collections_dir([os.path.join(second, "ansible_collections")]) == second
    assert collection.collections_dir([str(tmp_path)]) is None


def test_the_playbooks_must_run_the_collection_the_controller_imported(tmp_path):
    assert collection.imported_from() == os.path.realpath(REPO)
    assert collection.mismatch("%s:%s" % (tmp_path / "none", installed(tmp_path))) is None
    problem = collection.mismatch(str(tmp_path))
    assert problem == "the controller imported bridge.hpc from %s, but the playbooks would run none " \
                      "(no ansible_collections/bridge/hpc in %s)" % (os.path.realpath(REPO), tmp_path)


def test_a_collections_path_without_the_imported_collection_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        parse_args(["--collections-path", str(tmp_path)])
    assert "--collections-path: the controller imported bridge.hpc from" in capsys.readouterr().err
    directory = installed(tmp_path)
    assert parse_args(["--collections-path", directory]).collections_path == directory


def controller_imports(environ):
    """What a fresh interpreter with the controller package on its path prints or raises on importing
    bridge_controller.backends."""
    env = dict(environ, PYTHONPATH=CONTROLLER)
    return subprocess.run([sys.executable, "-c", "from bridge_controller import backends; print(sorted(backends.BACKENDS))"],
                          env=env, capture_output=True, text=True, check=False, cwd="/")


def test_the_controller_finds_the_collection_through_ansible_collections_path(tmp_path):
    found = controller_imports({"ANSIBLE_COLLECTIONS_PATH": installed(tmp_path), "PATH": os.environ["PATH"]})
    assert found.returncode == 0, found.stderr
    assert "'kubernetes'" in found.stdout and "'slurm'" in found.stdout


def test_without_the_collection_the_controller_says_where_it_looked_and_what_to_do(tmp_path):
    missing = controller_imports({"ANSIBLE_COLLECTIONS_PATH": str(tmp_path), "PATH": os.environ["PATH"]})
    assert missing.returncode != 0
    last = missing.stderr.strip().splitlines()[-1]
    assert last == ("bridge_controller.collection.CollectionNotFound: the bridge.hpc collection is not installed where "
                    "the controller looks: no ansible_collections/bridge/hpc in %s nor on sys.path; install it "
                    "(ansible-galaxy collection install -p DIR bridge-hpc-*.tar.gz) and set "
                    "ANSIBLE_COLLECTIONS_PATH=DIR" % tmp_path)
