"""Make bridge.hpc importable as ansible_collections.bridge.hpc for plain pytest runs, and the helpers
in tests/ (shared with tests/integration) importable."""

import os
import sys

import pytest

from module_runner import capture_exits  # pytest puts this directory on sys.path first

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(REPO, ".run", "collections")
LINK = os.path.join(COLLECTIONS, "ansible_collections", "bridge", "hpc")

if not os.path.exists(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink(REPO, LINK)
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
TESTS = os.path.join(REPO, "tests")
if TESTS not in sys.path:
    sys.path.append(TESTS)


@pytest.fixture
def capture(monkeypatch):
    """A module's exit_json and fail_json raise module_runner's Exit and Fail."""
    capture_exits(monkeypatch)


@pytest.fixture(scope="module")
def lsf_pac(tmp_path_factory):
    """The LSF PAC SIMULATOR in-process, with a 0.4 s run-limit minute: {url, user, password, simulator}."""
    from simulators.lsf_pac import LsfPacSimulator

    user, password = "alice", "s3cret&<x>"
    simulator = LsfPacSimulator(str(tmp_path_factory.mktemp("lsf")), {user: password}, minute_seconds=0.4,
                                tick=0.05, kill_grace=0.3).start()
    yield {"url": simulator.url, "user": user, "password": password, "simulator": simulator}
    simulator.stop()
