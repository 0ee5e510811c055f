"""Every environment Bridge makes installs from a lock of locks/ (tools/locks.py, `make lock`): each
lock holds a hash for every pin and only versions its ranges allow, the environments the suite runs
Bridge in agree on every version, the venv these tests run in holds exactly its lock, and the one
warning from below that is ignored is ignored alone and written the same wherever Ansible runs."""

import importlib.util
import os
import re
import subprocess
import sys

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load(path):
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], os.path.join(REPO, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


locks = load("tools/locks.py")
lock_check = load("tools/lib/lock_check.py")


def lock_path(name):
    return os.path.join(REPO, "locks", name + ".txt")


def requirements_of(path):
    """The requirements a requirements file names, following -r, as packaging Requirements."""
    found = []
    with open(path) as handle:
        for line in handle:
            line = line.split("#", 1)[0].strip()
            if line.startswith("-r "):
                found += requirements_of(os.path.join(os.path.dirname(path), line[3:].strip()))
            elif line:
                found.append(Requirement(line))
    return found


def package_pips(node):
    """Every package_pip of an EE definition: what ansible-builder pip installs."""
    if isinstance(node, dict):
        return sum((package_pips(value) for value in node.values()), [node["package_pip"]] if "package_pip" in node else [])
    return []


def ranges_of(name):
    """Every range that bears on lock NAME: its input's, and for the EE lock every package_pip of both
    definitions (the AWX one is not an input, but builds from the same lock)."""
    ranges = requirements_of(os.path.join(REPO, locks.input_path(name)))
    if name == "ee":
        for definition in ("execution-environment.yml", "execution-environment-awx.yml"):
            with open(os.path.join(REPO, "ee", definition)) as handle:
                ranges += [Requirement(text) for text in package_pips(yaml.safe_load(handle))]
    return ranges


@pytest.mark.parametrize("name", list(locks.LOCKS))
def test_every_pin_of_a_lock_has_its_hashes(name):
    with open(lock_path(name)) as handle:
        text = handle.read()
    entries = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
    assert entries and len(entries) == len(locks.pins(lock_path(name))), name
    for entry in entries:
        assert re.search(r"--hash=sha256:[0-9a-f]{64}", entry), "%s: no hash in %r" % (name, entry[:80])


@pytest.mark.parametrize("name", list(locks.LOCKS))
def test_every_locked_version_lies_in_its_ranges(name):
    pinned = locks.pins(lock_path(name))
    ranges = ranges_of(name)
    assert ranges, name
    for requirement in ranges:
        package = locks.normalize(requirement.name)
        assert package in pinned, "%s names %s, which locks/%s.txt lacks: make lock" % (requirement, package, name)
        assert requirement.specifier.contains(pinned[package], prereleases=True), (
            "locks/%s.txt holds %s==%s, outside %s: make lock" % (name, package, pinned[package], requirement))


def test_the_locked_ansible_core_meets_the_collections_requires_ansible():
    with open(os.path.join(REPO, "meta", "runtime.yml")) as handle:
        requires = SpecifierSet(yaml.safe_load(handle)["requires_ansible"])
    for name in locks.SAME_VERSIONS:
        assert requires.contains(locks.pins(lock_path(name))["ansible-core"]), name


def test_the_environments_the_suite_runs_bridge_in_hold_one_version_of_each_package():
    by_lock = {name: locks.pins(lock_path(name)) for name in locks.SAME_VERSIONS}
    for name, pinned in by_lock.items():
        for package, version in pinned.items():
            others = {other: by_lock[other][package] for other in by_lock if package in by_lock[other]}
            assert set(others.values()) == {version}, "%s: %s" % (package, others)


def test_the_generated_inputs_are_written_from_their_sources():
    assert locks.write_inputs(check=True) == [], "make lock"


def test_the_venv_holds_exactly_its_lock():
    venv = os.environ.get("BRIDGE_VENV")
    if not venv:
        pytest.skip("not run by make (BRIDGE_VENV names the venv tools/bootstrap.sh synced)")
    assert os.path.realpath(sys.prefix) == os.path.realpath(venv), "these tests run in %s, not %s" % (sys.prefix, venv)
    lock = os.environ.get("BRIDGE_DEV_LOCK") or lock_path("dev")
    expected = locks.pins(lock)
    assert lock_check.differences(expected, lock_check.installed(), set()) == []


def test_the_check_names_what_differs_from_a_lock():
    expected = {"httpx": "0.28.1", "jmespath": "1.1.0"}
    present = {"httpx": "0.28.1", "jmespath": "1.0.1", "rich": "14.0.0", "pip": "26.3"}
    assert lock_check.differences(expected, present, {"pip"}) == [
        "other version: jmespath 1.0.1, the lock says 1.1.0", "not in the lock: rich==14.0.0"]
    assert lock_check.differences({"kubernetes": "35.0.0"}, {}, set()) == ["missing: kubernetes==35.0.0"]


# The text of the filter, as the Makefile defines it.
def makefile_filter():
    with open(os.path.join(REPO, "Makefile")) as handle:
        return re.search(r"^DSA_WARNING := (.+)$", handle.read(), re.M).group(1)


def test_the_dsa_warning_filter_is_the_same_wherever_bridge_runs_ansible():
    text = makefile_filter()
    assert text.startswith("ignore:DSA is deprecated") and text.endswith(":UserWarning:ansible._internal._ssh._ssh_agent")
    for path in ("tools/bootstrap.sh", "deploy/Containerfile", "ee/execution-environment.yml",
                 "ee/execution-environment-awx.yml"):
        with open(os.path.join(REPO, path)) as handle:
            assert text in handle.read(), path


def test_the_filter_ignores_ansible_cores_dsa_import_and_nothing_else():
    """With the lock's cryptography, ansible-core's ssh-agent client warns at import; the filter
    silences exactly that, and the same warning raised anywhere else still reaches stderr."""
    environment = dict(os.environ, PYTHONWARNINGS=makefile_filter())
    unfiltered = subprocess.run([sys.executable, "-c", "import ansible._internal._ssh._ssh_agent"],
                                env=dict(os.environ, PYTHONWARNINGS=""), capture_output=True, text=True, check=True)
    assert "DSA is deprecated" in unfiltered.stderr, (
        "the locked ansible-core and cryptography no longer warn: drop the filter (Makefile, DSA_WARNING)")
    ansible = subprocess.run([sys.executable, "-c", "import ansible._internal._ssh._ssh_agent"],
                             env=environment, capture_output=True, text=True, check=True)
    assert ansible.stderr == ""
    elsewhere = subprocess.run(
        [sys.executable, "-c", "from cryptography.utils import CryptographyDeprecationWarning as W\n"
         "import warnings\nwarnings.warn('DSA is deprecated and support will be removed in a future release.', W)"],
        env=environment, capture_output=True, text=True, check=True)
    assert "CryptographyDeprecationWarning: DSA is deprecated" in elsewhere.stderr
    other = subprocess.run([sys.executable, "-c", "import warnings; warnings.warn('something else', UserWarning)"],
                           env=environment, capture_output=True, text=True, check=True)
    assert "UserWarning: something else" in other.stderr


def test_the_readmes_tested_versions_are_the_locked_ones():
    with open(os.path.join(REPO, "README.md")) as handle:
        text = handle.read()
    table = text.split("### Tested versions", 1)[1].split("\n\n", 2)[2].split("\n\n", 1)[0]
    with open(os.path.join(REPO, "controller", "pyproject.toml")) as handle:
        declared = handle.read()
    with open(os.path.join(REPO, "requirements.txt")) as handle:
        declared += handle.read()
    locked = locks.pins(lock_path("dev"))
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()[2:]]
    checked = 0
    for name, tested, allowed in rows:
        if name in locked:
            assert tested == locked[name], "README: %s %s, locks/dev.txt: %s" % (name, tested, locked[name])
            checked += 1
            if allowed[:1] == ">":
                assert "%s%s" % (name, allowed.split()[0]) in declared, "README: %s %s" % (name, allowed)
    assert checked >= 7


def test_the_developers_guide_names_the_locked_versions():
    with open(os.path.join(REPO, "docs", "developing.md")) as handle:
        section = handle.read().split("## Locked installs", 1)[1].split("\n## ", 1)[0]
    locked = locks.pins(lock_path("dev"))
    named = re.findall(r"\b(ansible-core|ansible-runner|kubernetes|httpx|jmespath|cryptography) (\d+\.\d+\.\d+)\b", section)
    assert len(named) >= 6
    for name, version in named:
        assert version == locked[name], "docs/developing.md: %s %s, locks/dev.txt: %s" % (name, version, locked[name])
