"""The controller's children are bounded and die with it: the standby pool's bookkeeping under
concurrent starts, the launcher's parent-death signal, and the lock a waiting module watches."""

import os
import signal
import subprocess
import sys
import threading
import time
import uuid

from ansible_collections.bridge.hpc.plugins.module_utils import _handoff
from bridge_controller.handoff import CONTROLLER_LOCK, hold_controller_lock
from bridge_controller.processes import with_environment
from bridge_controller.standby import StandbyPool

import bridge_controller

CONTROLLER = os.path.dirname(os.path.dirname(os.path.abspath(bridge_controller.__file__)))


class SlowStarted:
    """A standby whose start takes a while, as ansible-playbook's does on a busy machine."""

    def __init__(self, action, backend):
        self.action, self.backend, self.pipe, self.started_at = action, backend, "/nonexistent", time.monotonic()
        self.dismissed = self.finished = False

    def alive(self):
        return not self.dismissed

    def dismiss(self):
        self.dismissed = True

    def finish(self):
        if self.dismissed:
            time.sleep(0.005)   # a killed playbook takes a moment to be gone
        self.finished = True


def counting_pool(max_standby, start_seconds=0.01):
    """A pool whose start records how many standbys exist at once (started and not yet gone, the
    one being started included)."""
    started, peaks, lock = [], [], threading.Lock()

    def start(action, backend):
        with lock:
            peaks.append(1 + sum(1 for s in started if not s.finished))
        time.sleep(start_seconds)
        with lock:
            started.append(SlowStarted(action, backend))
            return started[-1]

    return StandbyPool(start, max_standby=max_standby), started, peaks


def backend(index):
    return {"type": "slurm", "url": "http://slurm-%d.example" % index}


def test_max_standby_holds_when_twenty_backends_are_prepared_at_once():
    pool, started, peaks = counting_pool(max_standby=2)
    observed = []
    threads = [threading.Thread(target=pool.prepare, args=(backend(i),)) for i in range(20)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        observed.append(pool.count())
    for thread in threads:
        thread.join()
    assert max(peaks) <= 2 and max(observed + [pool.count()]) <= 2, (peaks, observed)
    assert sum(1 for s in started if not s.finished) == pool.count() <= 2
    assert all(s.dismissed for s in started if pool.take("submit", s.backend) is not s)


def test_no_standby_starts_while_every_slot_is_still_starting():
    entered, release = threading.Event(), threading.Event()

    def start(action, backend_):
        entered.set()
        release.wait(10)
        return SlowStarted(action, backend_)

    pool = StandbyPool(start, max_standby=1)
    first = threading.Thread(target=pool.prepare, args=(backend(1),))
    first.start()
    entered.wait(10)
    pool.prepare(backend(2))        # returns at once: the only slot is being started
    assert pool.count() == 1
    release.set()
    first.join()
    assert pool.take("submit", backend(1)) is not None and pool.take("submit", backend(2)) is None


def test_max_standby_zero_starts_none():
    pool, started, _peaks = counting_pool(max_standby=0)
    pool.prepare(backend(1))
    assert not started and pool.count() == 0


def test_a_standby_let_go_is_killed_not_asked_to_leave():
    pool, started, _peaks = counting_pool(max_standby=1)
    pool.prepare(backend(1))
    pool.prepare(backend(2))
    assert started[0].dismissed and not started[1].dismissed
    pool.close()
    assert started[1].dismissed and started[1].finished
    pool.prepare(backend(3))
    assert len(started) == 2, "none starts once closed"


def test_a_standby_started_while_the_pool_closes_is_killed():
    release = threading.Event()
    made = []

    def start(action, backend_):
        release.wait(10)
        made.append(SlowStarted(action, backend_))
        return made[-1]

    pool = StandbyPool(start, max_standby=2)
    thread = threading.Thread(target=pool.prepare, args=(backend(1),))
    thread.start()
    while pool.count() == 0:
        time.sleep(0.001)
    pool.close()
    release.set()
    thread.join()
    assert made[0].dismissed and pool.count() == 0


# ------------------------------------------------------------------ the lock a waiting module watches

def test_the_module_and_the_controller_name_the_same_lock():
    assert _handoff.CONTROLLER_LOCK == CONTROLLER_LOCK


def test_a_waiting_module_gives_up_once_its_controller_lets_go(tmp_path, monkeypatch):
    monkeypatch.setattr(_handoff, "LIVENESS_INTERVAL", 0.02)
    pipe = str(tmp_path / "submit-1")
    os.mkfifo(pipe, 0o600)
    held = hold_controller_lock(str(tmp_path))
    assert _handoff.read_handoff(pipe, 0.1) is None and not _handoff.controller_gone(pipe), "held: it waits its time"
    got = []
    reader = threading.Thread(target=lambda: got.append(_handoff.read_handoff(pipe, 600)))
    reader.start()
    time.sleep(0.1)
    os.close(held)                   # what the kernel does when the controller dies
    reader.join(10)
    assert not reader.is_alive() and got == [None]
    assert _handoff.controller_gone(pipe)


def test_a_pipe_made_by_hand_has_no_controller_to_outlive(tmp_path):
    pipe = str(tmp_path / "pipe")
    os.mkfifo(pipe, 0o600)
    assert not _handoff.controller_gone(pipe)


# ------------------------------------------------------------------ the launcher

# A stand-in controller: it starts the launcher from a thread that lives as long as the launcher,
# as ansible-runner's run_async thread does, with a "playbook" that leaves a detached process
# (setsid, as Ansible's workers do) and then waits.
FAKE_CONTROLLER = """
import os, subprocess, sys, threading, time
launch = ("from bridge_controller.launcher import main; "
          "main(['-c', 'setsid sleep 301 & exec sleep 302'], playbook='sh')")
env = dict(os.environ, BRIDGE_CONTROLLER_PID=str(os.getpid()))
threading.Thread(target=subprocess.call, args=([sys.executable, "-c", launch],), kwargs={"env": env}).start()
time.sleep(300)
"""


def marked(marker):
    return with_environment([int(pid) for pid in os.listdir("/proc") if pid.isdigit()], marker)


def wait_until(predicate, timeout=20):
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.02)
    return predicate()


def test_the_launchers_playbook_dies_with_the_controller_detached_processes_too():
    marker = "BRIDGE_TEST_CHILDREN=%s" % uuid.uuid4().hex
    env = dict(os.environ, PYTHONPATH=CONTROLLER, BRIDGE_TEST_CHILDREN=marker.split("=", 1)[1])
    controller = subprocess.Popen([sys.executable, "-c", FAKE_CONTROLLER], env=env)
    try:
        # The launcher, sh's sleep and the detached sleep (the controller itself carries the marker too).
        assert wait_until(lambda: len(marked(marker)) >= 4), marked(marker)
        controller.send_signal(signal.SIGKILL)
        controller.wait(10)
        assert wait_until(lambda: not marked(marker)), "left running: %s" % marked(marker)
    finally:
        for pid in marked(marker):
            os.kill(pid, signal.SIGKILL)


def test_a_launcher_whose_controller_is_already_gone_starts_nothing():
    from bridge_controller.launcher import CONTROLLER_GONE

    env = dict(os.environ, PYTHONPATH=CONTROLLER, BRIDGE_CONTROLLER_PID="1")   # not its parent
    launched = subprocess.run([sys.executable, "-c", "from bridge_controller.launcher import main; main(['-c', 'exit 0'], playbook='sh')"],
                              env=env, check=False)
    assert launched.returncode == CONTROLLER_GONE


def test_the_launcher_exits_with_its_playbooks_status():
    env = dict(os.environ, PYTHONPATH=CONTROLLER, BRIDGE_CONTROLLER_PID=str(os.getpid()))
    launched = subprocess.run([sys.executable, "-c", "from bridge_controller.launcher import main; main(['-c', 'exit 3'], playbook='sh')"],
                              env=env, check=False)
    assert launched.returncode == 3
