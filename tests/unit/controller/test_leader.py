"""Leader election against an in-memory coordination API: never two leaders, release, the gate.

The fake API keeps one Lease with a resourceVersion and refuses stale updates (409), as the
apiserver does. Most tests drive attempts by hand on a fake clock; a few run the real loop with
sub-second timings.
"""

import copy
import os
import sys
import threading
import time

import pytest
from kubernetes.client.exceptions import ApiException

from bridge_controller.leader import LeaderElector
from bridge_controller.main import parse_args
from bridge_controller.runner import AnsibleRunner, NotActing

from test_executor import bridgejob, settle, setup


class FakeCoordination:
    def __init__(self):
        self.lease = None
        self.version = 0
        self.down = set()          # identities whose requests fail (a partition)
        self.calls = []
        self.lock = threading.Lock()

    def _check(self, who, kwargs):
        self.calls.append((who, kwargs.get("_request_timeout")))
        if who in self.down:
            raise ConnectionError("apiserver unreachable")

    def _bump(self, lease):
        self.version += 1
        lease.metadata.resource_version = str(self.version)
        self.lease = copy.deepcopy(lease)
        return copy.deepcopy(lease)

    def for_identity(self, identity):
        api = self

        class View:
            def read_namespaced_lease(self, name, namespace, **kwargs):
                with api.lock:
                    api._check(identity, kwargs)
                    if api.lease is None:
                        raise ApiException(status=404, reason="Not Found")
                    return copy.deepcopy(api.lease)

            def create_namespaced_lease(self, namespace, body, **kwargs):
                with api.lock:
                    api._check(identity, kwargs)
                    if api.lease is not None:
                        raise ApiException(status=409, reason="AlreadyExists")
                    return api._bump(body)

            def replace_namespaced_lease(self, name, namespace, body, **kwargs):
                with api.lock:
                    api._check(identity, kwargs)
                    if body.metadata.resource_version != api.lease.metadata.resource_version:
                        raise ApiException(status=409, reason="Conflict")
                    return api._bump(body)

        return View()

    def holder(self):
        return self.lease.spec.holder_identity if self.lease else None


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def elector(api, identity, clock=None, **timing):
    timing = dict({"lease_duration": 10, "renew_deadline": 7, "retry_period": 2}, **timing)
    kwargs = {"clock": clock} if clock else {}
    return LeaderElector(api.for_identity(identity), "bridge-system", "lease", identity, **dict(timing, **kwargs))


def lead(candidate):
    """What run() does on a successful first attempt, without the thread."""
    assert candidate.try_acquire()
    candidate.leading.set()


# ------------------------------------------------------------------ acquiring

def test_the_first_candidate_creates_the_lease_and_the_second_stands_by():
    api, clock = FakeCoordination(), Clock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    lead(a)
    assert a.is_leading() and api.holder() == "a"
    assert not b.try_acquire() and not b.is_leading()
    assert api.lease.spec.lease_duration_seconds == 10 and api.lease.spec.lease_transitions == 0


def test_a_standby_takes_over_only_a_full_lease_duration_after_the_record_last_changed():
    api, clock = FakeCoordination(), Clock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    lead(a)
    assert not b.try_acquire()
    clock.now += 5
    assert a.try_acquire()                      # renewed: b's wait starts again from when it sees this
    clock.now += 1
    assert not b.try_acquire()
    clock.now += 9.9
    assert not b.try_acquire()
    clock.now += 0.2
    assert b.try_acquire() and api.holder() == "b"
    assert api.lease.spec.lease_transitions == 1


@pytest.mark.parametrize("renew_time", ["2000-01-01T00:00:00.000000Z", "2100-01-01T00:00:00.000000Z"])
def test_expiry_ignores_the_renew_time_the_holders_clock_wrote(renew_time):
    """A holder on a node whose clock is far behind or ahead: only the record changing counts."""
    api, clock = FakeCoordination(), Clock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    lead(a)
    renewal = copy.deepcopy(api.lease)
    renewal.spec.renew_time = renew_time
    api._bump(renewal)
    assert not b.try_acquire(), "a record that just changed is held, whatever its renewTime says"
    clock.now += 10.5
    assert b.try_acquire(), "a record unchanged for a lease duration is free, whatever its renewTime says"


def test_a_fresh_candidate_waits_a_full_duration_even_for_a_long_dead_holder():
    api, clock = FakeCoordination(), Clock()
    lead(elector(api, "dead", clock))
    api.lease.spec.renew_time = "2000-01-01T00:00:00.000000Z"
    b = elector(api, "b", clock)
    assert not b.try_acquire()
    clock.now += 10.5
    assert b.try_acquire()


def test_two_candidates_racing_for_an_expired_lease_cannot_both_win():
    api, clock = FakeCoordination(), Clock()
    lead(elector(api, "dead", clock))
    b, c = elector(api, "b", clock), elector(api, "c", clock)
    assert not b.try_acquire() and not c.try_acquire()
    clock.now += 11
    seen = copy.deepcopy(api.lease)
    assert b.try_acquire()
    # c read the same expired record before b's update landed: its update carries that version.
    original = api.for_identity("c").read_namespaced_lease
    c.api.read_namespaced_lease = lambda *args, **kwargs: (original(*args, **kwargs), copy.deepcopy(seen))[1]
    assert not c.try_acquire()
    assert api.holder() == "b"


def test_a_restarted_replica_with_the_same_identity_renews_at_once():
    api, clock = FakeCoordination(), Clock()
    lead(elector(api, "pod-1", clock))
    again = elector(api, "pod-1", clock)
    assert again.try_acquire() and api.holder() == "pod-1"
    assert api.lease.spec.lease_transitions == 0


def test_a_failed_attempt_is_false_never_an_exception():
    api, clock = FakeCoordination(), Clock()
    a = elector(api, "a", clock)
    api.down.add("a")
    assert a.try_acquire() is False


# ------------------------------------------------------------------ never two leaders

def test_the_gate_closes_at_the_renew_deadline_before_anyone_can_take_the_lease():
    """A partitioned leader against a standby, stepped every 0.1 s: never both acting at once."""
    api, clock = FakeCoordination(), Clock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    lead(a)
    next_a = next_b = clock.now
    partition_at, closed_at, taken_at = clock.now + 4.3, None, None
    while clock.now < 1060:
        if clock.now >= partition_at:
            api.down.add("a")
        if clock.now >= next_a:
            a.try_acquire()
            next_a = clock.now + a.retry_period
        if clock.now >= next_b and not b.leading.is_set():
            if b.try_acquire():
                b.leading.set()
                taken_at = clock.now
            next_b = clock.now + b.retry_period
        assert not (a.is_leading() and b.is_leading()), "two leaders at %.1f" % clock.now
        if closed_at is None and not a.is_leading():
            closed_at = clock.now
        clock.now = round(clock.now + 0.1, 1)
    assert closed_at is not None and taken_at is not None
    assert taken_at - closed_at >= a.lease_duration - a.renew_deadline - a.retry_period


def test_the_gate_closes_by_the_clock_even_when_the_renewing_thread_hangs():
    api, clock = FakeCoordination(), Clock()
    a = elector(api, "a", clock)
    lead(a)
    clock.now += 6.9
    assert a.is_leading()
    clock.now += 0.2
    assert not a.is_leading()


def test_a_renewal_request_never_outlives_the_renew_deadline():
    api, clock = FakeCoordination(), Clock()
    a = elector(api, "a", clock)
    lead(a)
    a.try_acquire(timeout=1.5)
    assert {timeout for _who, timeout in api.calls[-2:]} == {1.5}


def test_timing_must_leave_a_margin():
    api = FakeCoordination()
    for lease, deadline, retry in ((10, 10, 2), (10, 12, 2), (10, 7, 7), (10, 7, 0)):
        with pytest.raises(ValueError):
            elector(api, "a", lease_duration=lease, renew_deadline=deadline, retry_period=retry)


# ------------------------------------------------------------------ the loop, in real time

def run_in_thread(candidate, events):
    thread = threading.Thread(target=candidate.run, args=(lambda: events.append((candidate.identity, "started")),
                                                          lambda: events.append((candidate.identity, "lost"))),
                              daemon=True)
    thread.start()
    return thread


def wait(predicate, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


FAST = {"lease_duration": 1, "renew_deadline": 0.6, "retry_period": 0.1}


def test_a_leader_that_cannot_renew_stops_acting_and_says_so():
    api, events = FakeCoordination(), []
    a = elector(api, "a", **FAST)
    thread = run_in_thread(a, events)
    assert wait(a.is_leading)
    api.down.add("a")
    cut = time.monotonic()
    assert wait(lambda: ("a", "lost") in events)
    lost_after = time.monotonic() - cut
    thread.join(2)
    assert not a.is_leading() and not thread.is_alive()
    assert lost_after < a.lease_duration, "on_lost came only after the lease could be taken"


def test_a_leader_that_sees_another_holder_stops_at_once():
    api, events = FakeCoordination(), []
    a = elector(api, "a", lease_duration=FAST["lease_duration"], renew_deadline=0.8, retry_period=0.05)
    run_in_thread(a, events)
    assert wait(a.is_leading)
    stolen = copy.deepcopy(api.lease)
    stolen.spec.holder_identity = "intruder"
    api._bump(stolen)
    assert wait(lambda: ("a", "lost") in events, timeout=0.5)
    assert not a.is_leading()


def test_stop_releases_and_the_standby_takes_over_at_once():
    api, events = FakeCoordination(), []
    a = elector(api, "a", lease_duration=30, renew_deadline=20, retry_period=0.1)
    run_in_thread(a, events)
    assert wait(a.is_leading)
    b = elector(api, "b", lease_duration=30, renew_deadline=20, retry_period=0.1)
    run_in_thread(b, events)
    assert wait(lambda: b._waiting_on == "a")
    stopped = time.monotonic()
    a.stop()
    assert not a.is_leading()
    assert wait(b.is_leading, timeout=5), "the standby waited for expiry instead"
    print("takeover after release: %.2fs (lease 30 s)" % (time.monotonic() - stopped))
    assert ("a", "lost") not in events and api.lease.spec.lease_transitions == 1


def test_release_leaves_a_lease_someone_else_holds_alone():
    api, clock = FakeCoordination(), Clock()
    a = elector(api, "a", clock)
    lead(a)
    taken = copy.deepcopy(api.lease)
    taken.spec.holder_identity = "b"
    api._bump(taken)
    version = api.version
    assert a.release() is False
    assert api.holder() == "b" and api.version == version


def test_stop_without_release_on_cancel_keeps_the_lease():
    api, events = FakeCoordination(), []
    a = elector(api, "a", release_on_cancel=False, **FAST)
    run_in_thread(a, events)
    assert wait(a.is_leading)
    a.stop()
    assert not a.is_leading() and api.holder() == "a"


# ------------------------------------------------------------------ what the gate stops

def test_a_closed_gate_runs_no_batch_and_writes_nothing():
    kube, backend, runner, queue, executor = setup()
    kube.create(bridgejob("a"))
    acting = [True]
    executor.may_act = lambda: acting[0]
    for key in list(queue.keys):
        executor.reconcile(key)               # finalizer added while leading
    queue.keys = []
    before = copy.deepcopy(kube.objects)
    acting[0] = False
    kube.create(bridgejob("b"))
    settle(executor, queue)
    executor.flush()
    assert runner.calls == [] and backend.submits == []
    assert [o.get("status") for o in kube.objects.values()] == [o.get("status") for o in before.values()] + [None]
    assert kube.objects["ns/b"]["metadata"].get("finalizers") in (None, [])


def test_a_batch_the_gate_cut_short_writes_nothing():
    kube, _backend, runner, queue, executor = setup()
    acting = [True]
    executor.may_act = lambda: acting[0]
    kube.create(bridgejob("b"))
    for _round in range(2):                    # the finalizer, then the submit joins a batch
        keys, queue.keys = queue.keys, []
        for key in keys:
            executor.reconcile(key)
    assert executor.batches.changed_in_flight("ns/b")

    def killed(*_args, **_kwargs):
        acting[0] = False
        raise NotActing("submit playbook killed")

    runner.run = killed
    executor.flush()
    assert kube.objects["ns/b"].get("status") is None, "no BackendReachable=False from a deposed leader"


def test_the_runner_starts_no_playbook_when_not_acting(tmp_path):
    runner = AnsibleRunner(str(tmp_path / "playbooks"), str(tmp_path / "work"))
    runner.may_act = lambda: False
    with pytest.raises(NotActing):
        runner.run("poll", {"type": "slurm", "url": "http://x"}, {}, identities=["i"])
    assert not os.path.exists(tmp_path / "work" / "artifacts")


def test_a_running_playbook_is_killed_when_the_gate_closes(tmp_path, monkeypatch):
    """With its whole process group: the module's own children too."""
    pytest.importorskip("ansible_runner")
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    playbooks = tmp_path / "playbooks"
    playbooks.mkdir()
    seconds = "60.%d" % os.getpid()             # finds this test's sleep among the machine's processes
    (playbooks / "bridgejob_poll.yml").write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - name: Bridge\n      ansible.builtin.command: sleep %s\n" % seconds)
    runner = AnsibleRunner(str(playbooks), str(tmp_path / "work"), python=sys.executable)
    acting = threading.Event()
    acting.set()
    runner.may_act = acting.is_set

    def sleeping():
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as handle:
                    if handle.read().split(b"\0")[:2] == [b"sleep", seconds.encode()]:
                        found.append(pid)
            except OSError:
                pass
        return found

    outcome = []

    def call():
        try:
            runner.run("poll", {"type": "slurm", "url": "http://x"}, {}, identities=["i"])
        except NotActing as exc:
            outcome.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    assert wait(lambda: bool(sleeping()), timeout=60), "the playbook's command never started"
    closed = time.monotonic()
    acting.clear()
    assert wait(lambda: not sleeping(), timeout=5), "the module's child survived"
    print("module killed %.2fs after the gate closed" % (time.monotonic() - closed))
    thread.join(30)
    assert outcome, "the runner did not return"


# ------------------------------------------------------------------ flags

def test_lease_flags_default_to_client_go_proportions():
    args = parse_args(["--leader-elect"])
    assert (args.lease_duration, args.renew_deadline, args.retry_period) == (30, 20.0, 5.0)
    args = parse_args(["--lease-duration", "6", "--renew-deadline", "4", "--retry-period", "0.5"])
    assert (args.lease_duration, args.renew_deadline, args.retry_period) == (6, 4.0, 0.5)


@pytest.mark.parametrize("flags", [["--lease-duration", "10", "--renew-deadline", "10"],
                                   ["--renew-deadline", "3", "--retry-period", "3"]])
def test_lease_flags_without_a_margin_are_refused(flags):
    with pytest.raises(SystemExit):
        parse_args(flags)
