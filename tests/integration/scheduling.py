"""How `make integration` spreads the integration tests over pytest-xdist workers.

A unit of work is a test module, run whole by one worker, so that its module fixtures (clusters,
namespaces, controllers) are made once. Units are handed out longest first, one at a time, to the
worker that has finished its last one, which keeps the run's end short on two cores where most
tests wait on jobs rather than compute.

xdist's own `loadgroup` would do the grouping, but in xdist 3.8 under pytest 9 it does not group at
all (it rewrites Item._nodeid, which pytest 9 no longer reads), so the units are made here.
"""

import os

from xdist.scheduler import LoadScopeScheduling

# Modules whose tests are independent of each other and long: each test is a unit of its own.
SPREAD_MODULES = ("tests/integration/test_playbooks.py", "tests/integration/test_getting_started.py")

# Modules that must not run at the same time (a unit holds them all), with the reason.
SHARED_UNITS = {
    # Each starts Ray heads of its own on the same fixed private ports.
    "private_ray_heads": ("tests/integration/test_ray_env_file.py", "tests/integration/test_ray_token_auth.py"),
    # Each starts sandboxed Slurm clusters with slurmdbd and MariaDB: two at once overload 2 cores.
    "slurm_sandboxes": ("tests/integration/test_slurm_cluster_script.py", "tests/integration/test_slurm_min_job_age.py"),
}

# The units that take longest (seconds in a warm run on 2 cores, 3 workers), handed out first;
# the rest follow in collection order.
EXPECTED_SECONDS = {
    "tests/integration/test_k8s_in_slurm.py": 330,
    "slurm_sandboxes": 300,
    "tests/integration/test_stage_roundtrip.py": 200,
    "tests/integration/test_hybrid_playbook.py": 170,
    "tests/integration/test_slurm_token_expiry.py": 150,
    "tests/integration/test_controller_token.py": 120,
    "tests/integration/test_controller_chaos.py": 110,
    "tests/integration/test_playbooks.py::test_job_playbook[slurm_job:slurm-22.05]": 95,
    "tests/integration/test_playbooks.py::test_job_playbook[slurm_job:slurm-26.05]": 95,
    "tests/integration/test_playbooks.py::test_job_playbook[slurm_job:slurm-24.11]": 90,
    "tests/integration/test_playbooks.py::test_job_playbook[lsf_job:lsf]": 80,
    "tests/integration/test_controller_backends.py": 80,
    "tests/integration/test_controller_site.py": 120,
    "tests/integration/test_controller_backend_objects.py": 30,
    "tests/integration/test_tenancy.py": 70,
    "tests/integration/test_placement_module.py": 60,
    "tests/integration/test_playbooks.py::test_job_playbook[ray_job:ray]": 70,
    "tests/integration/test_playbooks.py::test_job_playbook[k8s_job:kubernetes]": 70,
    "tests/integration/test_playbooks.py::test_job_playbook[quantum_job:quantum]": 65,
}


def unit_of(nodeid):
    """The unit of work a test belongs to (see the module's docstring)."""
    module = nodeid.split("::", 1)[0]
    if module in SPREAD_MODULES:
        return nodeid
    for unit, modules in SHARED_UNITS.items():
        if module in modules:
            return unit
    return module


class ModuleScheduling(LoadScopeScheduling):
    """xdist's loadscope with units from `unit_of`, longest first, and no unit queued ahead."""

    def __init__(self, config, log=None):
        super().__init__(config, log)
        self._ordered = False

    def _split_scope(self, nodeid):
        return unit_of(nodeid)

    def _assign_work_unit(self, node):
        if not self._ordered:
            ordered = sorted(self.workqueue.items(), key=lambda unit: -EXPECTED_SECONDS.get(unit[0], 0))
            self.workqueue.clear()
            self.workqueue.update(ordered)
            self._ordered = True
        super()._assign_work_unit(node)

    def _reschedule(self, node):
        # A worker holds back its last test until it knows the next one (for fixture teardown), so
        # the next unit is sent when one test is left: earlier would tie a unit to a busy worker
        # while another worker goes idle.
        if node.shutting_down:
            return
        if not self.workqueue:
            node.shutdown()
            return
        if self._pending_of(self.assigned_work[node]) > 1:
            return
        self._assign_work_unit(node)


class UnitTimes:
    """Seconds per unit of work and per worker, summed from the test reports (setup, call and
    teardown), printed at the end of a run and written to .run/budget/integration-units.tsv: what
    EXPECTED_SECONDS is refreshed from, and what shows whether the run's end is one long unit."""

    def __init__(self, path):
        self.path = path
        self.units = {}
        self.workers = {}

    def pytest_runtest_logreport(self, report):
        node = getattr(report, "node", None)
        worker = node.gateway.id if node is not None else "main"
        unit = unit_of(report.nodeid)
        self.units[unit] = self.units.get(unit, 0.0) + report.duration
        self.workers[worker] = self.workers.get(worker, 0.0) + report.duration

    def pytest_terminal_summary(self, terminalreporter):
        if not self.units:
            return
        ranked = sorted(self.units.items(), key=lambda item: -item[1])
        terminalreporter.section("seconds per unit of work (tests/integration/scheduling.py)")
        for unit, seconds in ranked[:15]:
            terminalreporter.write_line("%7.0f  %s" % (seconds, unit))
        terminalreporter.write_line("busy seconds per worker: %s, all units: %.0f" % (
            ", ".join("%s %.0f" % item for item in sorted(self.workers.items())), sum(self.units.values())))
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with open(self.path, "w") as handle:
            for unit, seconds in ranked:
                handle.write("%.1f\t%s\n" % (seconds, unit))
