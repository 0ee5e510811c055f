"""The bridge.hpc collection, imported: the controller reads the backends and their credential keys,
the error kinds, the job phases, the job spec's fields and the JMESPath check of resultQuery from
its module_utils, never from a copy of its own.

The collection is no part of this package. It is installed where Ansible finds collections, and
the controller imports the copy its playbooks run: deploy/Containerfile installs it with
ansible-galaxy into /usr/share/ansible/collections and names that in ANSIBLE_COLLECTIONS_PATH; a
checkout links itself into <repo>/.run/collections (tools/bootstrap.sh), which the Makefile exports
as ANSIBLE_COLLECTIONS_PATH. As ansible-playbook does, the directories of ANSIBLE_COLLECTIONS_PATH
(else Ansible's default ones) come first and sys.path after them.
"""

import importlib
import os
import sys

PACKAGE = "ansible_collections.bridge.hpc"
MODULE_UTILS = PACKAGE + ".plugins.module_utils"


class CollectionNotFound(ImportError):
    """bridge.hpc is in no collections directory and not on sys.path."""


def search_path(environ):
    """The collections directories Ansible searches, first first: ANSIBLE_COLLECTIONS_PATH (or the
    older ANSIBLE_COLLECTIONS_PATHS), else ANSIBLE_HOME's collections and /usr/share/ansible/collections,
    ansible-core's default."""
    value = environ.get("ANSIBLE_COLLECTIONS_PATH") or environ.get("ANSIBLE_COLLECTIONS_PATHS")
    if value:
        return [os.path.expanduser(path) for path in value.split(os.pathsep) if path]
    home = environ.get("ANSIBLE_HOME") or "~/.ansible"
    return [os.path.expanduser(os.path.join(home, "collections")), "/usr/share/ansible/collections"]


def collections_dir(directories):
    """The first of `directories` that holds bridge.hpc, else None. A directory may name
    ansible_collections itself, as Ansible allows."""
    for directory in directories:
        directory = os.path.normpath(directory)
        if os.path.basename(directory) == "ansible_collections":
            directory = os.path.dirname(directory)
        if os.path.isdir(os.path.join(directory, "ansible_collections", "bridge", "hpc")):
            return directory
    return None


def module_utils(name):
    """The collection's plugins/module_utils/<name>."""
    return importlib.import_module("%s.%s" % (MODULE_UTILS, name))


def imported_from():
    """The directory of the bridge.hpc this process imported, resolved (a checkout's symlink too)."""
    return os.path.realpath(os.path.join(os.path.dirname(module_utils("_errors").__file__), "..", ".."))


def mismatch(collections_path):
    """Why playbooks run with ANSIBLE_COLLECTIONS_PATH=`collections_path` would not run the bridge.hpc
    this process imported; None when they run the same."""
    directory = collections_dir(collections_path.split(os.pathsep))
    theirs = directory and os.path.realpath(os.path.join(directory, "ansible_collections", "bridge", "hpc"))
    ours = imported_from()
    if theirs == ours:
        return None
    return "the controller imported bridge.hpc from %s, but the playbooks would run %s" % (
        ours, theirs or "none (no ansible_collections/bridge/hpc in %s)" % collections_path)


def _load(environ):
    directories = search_path(environ)
    directory = collections_dir(directories)
    if directory and directory not in sys.path:
        sys.path.insert(0, directory)
    first = "%s._errors" % MODULE_UTILS
    try:
        importlib.import_module(first)
    except ModuleNotFoundError as exc:
        if exc.name and (first + ".").startswith(exc.name + "."):
            raise CollectionNotFound(
                "the bridge.hpc collection is not installed where the controller looks: no ansible_collections/bridge/hpc "
                "in %s nor on sys.path; install it (ansible-galaxy collection install -p DIR bridge-hpc-*.tar.gz) and "
                "set ANSIBLE_COLLECTIONS_PATH=DIR" % ", ".join(directories)) from exc
        raise


_load(os.environ)
