"""The integration tests' xdist scheduler (tests/integration/scheduling.py), driven with fake workers."""

import os
import sys

import pytest

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(TESTS)
sys.path.insert(0, os.path.join(TESTS, "integration"))

import scheduling  # noqa: E402  pylint: disable=wrong-import-position


class Config:
    def __init__(self, workers):
        self.tx = ["%d*popen" % workers]
        self.option = type("Options", (), {"loadscopereorder": True})()

    def getvalue(self, name):
        return {"tx": self.tx}[name]


class Worker:
    def __init__(self, name):
        self.gateway = type("Gateway", (), {"id": name})()
        self.shutting_down = False
        self.sent = []

    def send_runtest_some(self, indexes):
        self.sent.append(indexes)

    def shutdown(self):
        self.shutting_down = True


COLLECTION = [
    "tests/integration/test_crd.py::test_a",
    "tests/integration/test_crd.py::test_b",
    "tests/integration/test_k8s_in_slurm.py::test_a",
    "tests/integration/test_k8s_in_slurm.py::test_b",
    "tests/integration/test_playbooks.py::test_job_playbook[ray_job:ray]",
    "tests/integration/test_playbooks.py::test_job_playbook[slurm_job:slurm-22.05]",
    "tests/integration/test_slurm_cluster_script.py::test_a",
    "tests/integration/test_slurm_min_job_age.py::test_a",
    "tests/integration/test_s3.py::test_a",
]


def start(workers):
    scheduler = scheduling.ModuleScheduling(Config(len(workers)))
    for worker in workers:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, COLLECTION)
    scheduler.schedule()
    return scheduler


def names(indexes_sent):
    return [COLLECTION[index] for index in indexes_sent]


def test_units_are_modules_spread_modules_split_and_shared_modules_together():
    assert scheduling.unit_of("tests/integration/test_crd.py::test_a") == "tests/integration/test_crd.py"
    spread = "tests/integration/test_playbooks.py::test_job_playbook[ray_job:ray]"
    assert scheduling.unit_of(spread) == spread
    assert scheduling.unit_of("tests/integration/test_slurm_min_job_age.py::test_a") == "slurm_sandboxes"
    assert scheduling.unit_of("tests/integration/test_slurm_cluster_script.py::test_b") == "slurm_sandboxes"


def test_longest_units_go_first_a_whole_unit_to_one_worker():
    workers = [Worker("gw0"), Worker("gw1")]
    start(workers)
    first, second = (names(worker.sent[0]) for worker in workers)
    assert first == ["tests/integration/test_k8s_in_slurm.py::test_a", "tests/integration/test_k8s_in_slurm.py::test_b"]
    assert second == ["tests/integration/test_slurm_cluster_script.py::test_a",
                      "tests/integration/test_slurm_min_job_age.py::test_a"]
    # Nothing queued behind a unit of two or more tests: the next goes to whichever worker is free.
    assert [len(worker.sent) for worker in workers] == [1, 1]


def test_the_next_unit_is_sent_when_one_test_of_the_last_is_left():
    workers = [Worker("gw0"), Worker("gw1")]
    scheduler = start(workers)
    scheduler.mark_test_complete(workers[0], COLLECTION.index("tests/integration/test_k8s_in_slurm.py::test_a"))
    assert names(workers[0].sent[1]) == ["tests/integration/test_playbooks.py::test_job_playbook[slurm_job:slurm-22.05]"]
    assert len(workers[1].sent) == 1


def test_every_module_named_in_the_schedule_exists():
    named = set(scheduling.SPREAD_MODULES)
    for modules in scheduling.SHARED_UNITS.values():
        named.update(modules)
    named.update(unit.split("::", 1)[0] for unit in scheduling.EXPECTED_SECONDS if unit.startswith("tests/"))
    missing = sorted(path for path in named if not os.path.isfile(os.path.join(REPO, path)))
    assert not missing


@pytest.mark.parametrize("unit", [unit for unit in scheduling.EXPECTED_SECONDS if not unit.startswith("tests/")])
def test_every_shared_unit_with_a_duration_exists(unit):
    assert unit in scheduling.SHARED_UNITS
