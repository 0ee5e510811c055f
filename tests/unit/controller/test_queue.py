"""Unit tests of bridge_controller.queue: dedupe, one worker per key, delays, backoff, shutdown.

Timing-sensitive cases use a fake clock and `get(timeout=0)`; the threaded cases only wait on
events with generous bounds, so a loaded 2-core machine makes them slower, never red.
"""

import random
import threading
import time

import pytest

from bridge_controller.queue import Depth, ExponentialBackoff, WorkQueue, run_workers

PATIENCE = 30.0  # seconds a threaded test may wait for something that should take milliseconds


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


def drain_ready(queue):
    """Every key get(timeout=0) hands out now, marking each done."""
    keys = []
    while True:
        key = queue.get(timeout=0)
        if key is None:
            return keys
        queue.done(key)
        keys.append(key)


def wait_until(predicate, timeout=PATIENCE):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_duplicates_while_queued_collapse_into_one():
    queue = WorkQueue(max_workers=2, clock=FakeClock())
    for key in ("ns/a", "ns/b", "ns/a", "ns/a", "ns/b"):
        queue.add(key)
    assert queue.depth().ready == 2
    assert drain_ready(queue) == ["ns/a", "ns/b"]
    assert queue.depth() == Depth(0, 0, 0)


def test_key_added_while_processing_is_requeued_on_done():
    queue = WorkQueue(max_workers=2, clock=FakeClock())
    queue.add("ns/a")
    assert queue.get(timeout=0) == "ns/a"
    queue.add("ns/a")
    queue.add("ns/a")
    # Not handed to a second worker while the first still holds it.
    assert queue.depth().ready == 0
    assert queue.get(timeout=0) is None
    assert queue.depth() == Depth(0, 0, 1)
    queue.done("ns/a")
    assert queue.depth() == Depth(1, 0, 0)
    assert queue.get(timeout=0) == "ns/a"
    queue.done("ns/a")
    assert queue.get(timeout=0) is None


def test_done_without_readd_does_not_requeue():
    queue = WorkQueue(clock=FakeClock())
    queue.add("ns/a")
    key = queue.get(timeout=0)
    queue.done(key)
    assert queue.depth() == Depth(0, 0, 0)


def test_no_key_is_processed_by_two_workers_at_once():
    queue = WorkQueue(max_workers=8)
    keys = ["ns/job-%d" % i for i in range(5)]
    lock = threading.Lock()
    active = set()
    overlaps = []
    processed = {key: 0 for key in keys}

    def handler(key):
        with lock:
            if key in active:
                overlaps.append(key)
            active.add(key)
        time.sleep(0.0005)  # widen the window in which a second worker could take the same key
        with lock:
            active.discard(key)
            processed[key] += 1

    workers = run_workers(queue, handler, 8)

    def produce(seed):
        rng = random.Random(seed)
        for count in range(1500):
            queue.add(rng.choice(keys))
            if count % 50 == 0:
                time.sleep(0.001)

    producers = [threading.Thread(target=produce, args=(seed,)) for seed in range(4)]
    for thread in producers:
        thread.start()
    for thread in producers:
        thread.join(PATIENCE)
    assert wait_until(lambda: queue.depth() == Depth(0, 0, 0)), queue.depth()
    assert queue.shutdown(drain=True, timeout=PATIENCE)
    for thread in workers:
        thread.join(PATIENCE)
        assert not thread.is_alive()
    assert overlaps == []
    # Every key was processed, and dedupe collapsed most of the 6000 adds.
    assert all(processed[key] >= 1 for key in keys)
    assert sum(processed.values()) <= 6000


def test_at_most_max_workers_keys_are_processed_at_once():
    queue = WorkQueue(max_workers=2)
    lock = threading.Lock()
    running = [0]
    peak = [0]
    release = threading.Event()

    def handler(_key):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        release.wait(PATIENCE)
        with lock:
            running[0] -= 1

    workers = run_workers(queue, handler, 6)
    for index in range(10):
        queue.add("ns/job-%d" % index)
    assert wait_until(lambda: queue.depth().processing == 2)
    # Four idle threads are blocked in get() although eight keys are ready.
    assert queue.depth() == Depth(8, 0, 2)
    release.set()
    assert wait_until(lambda: queue.depth() == Depth(0, 0, 0))
    queue.shutdown()
    for thread in workers:
        thread.join(PATIENCE)
    assert peak[0] == 2


def test_delayed_keys_come_out_in_due_order():
    clock = FakeClock()
    queue = WorkQueue(clock=clock)
    queue.add_after("ns/c", 3)
    queue.add_after("ns/a", 1)
    queue.add_after("ns/b", 2)
    queue.add_after("ns/now", 0)
    assert queue.depth() == Depth(1, 3, 0)
    assert drain_ready(queue) == ["ns/now"]
    clock.advance(1.5)
    assert drain_ready(queue) == ["ns/a"]
    clock.advance(10)
    assert drain_ready(queue) == ["ns/b", "ns/c"]


def test_earliest_of_several_delays_for_one_key_wins():
    clock = FakeClock()
    queue = WorkQueue(clock=clock)
    queue.add_after("ns/a", 5)
    queue.add_after("ns/a", 1)
    queue.add_after("ns/a", 10)
    assert queue.depth() == Depth(0, 1, 0)
    clock.advance(1)
    assert drain_ready(queue) == ["ns/a"]
    # The superseded heap entries (at +5 and +10) do not bring the key back.
    clock.advance(60)
    assert drain_ready(queue) == []


def test_delayed_key_already_queued_is_not_duplicated():
    clock = FakeClock()
    queue = WorkQueue(clock=clock)
    queue.add("ns/a")
    queue.add_after("ns/a", 1)
    clock.advance(2)
    assert drain_ready(queue) == ["ns/a"]


def test_blocking_get_wakes_for_a_delayed_key():
    queue = WorkQueue()
    queue.add_after("ns/a", 0.05)
    start = time.monotonic()
    assert queue.get(timeout=PATIENCE) == "ns/a"
    assert time.monotonic() - start < PATIENCE


def test_blocking_get_wakes_when_an_earlier_key_arrives():
    queue = WorkQueue()
    queue.add_after("ns/far", 3600)
    got = []
    waiter = threading.Thread(target=lambda: got.append(queue.get()))
    waiter.start()
    queue.add("ns/near")
    waiter.join(PATIENCE)
    assert got == ["ns/near"]


def test_get_times_out_with_none():
    queue = WorkQueue()
    assert queue.get(timeout=0.01) is None


def test_backoff_doubles_up_to_the_cap_and_forget_resets_it():
    backoff = ExponentialBackoff(base=0.5, cap=300, jitter=0)
    delays = [backoff.when("ns/a") for count in range(12)]
    assert delays[:6] == [0.5, 1, 2, 4, 8, 16]
    assert delays[-1] == 300
    assert max(delays) == 300
    assert backoff.when("ns/b") == 0.5  # per key
    backoff.forget("ns/a")
    assert backoff.when("ns/a") == 0.5


def test_backoff_jitter_only_shortens_and_survives_many_failures():
    backoff = ExponentialBackoff(base=0.5, cap=300, jitter=0.1, rng=random.Random(7))
    for failures in range(2000):
        nominal = min(300, 0.5 * 2 ** min(failures, 64))
        delay = backoff.when("ns/a")
        assert nominal * 0.9 <= delay <= nominal


def test_add_rate_limited_delays_by_the_backoff():
    clock = FakeClock()
    queue = WorkQueue(clock=clock, rate_limiter=ExponentialBackoff(jitter=0))
    queue.add_rate_limited("ns/a")
    clock.advance(0.49)
    assert drain_ready(queue) == []
    clock.advance(0.02)
    assert drain_ready(queue) == ["ns/a"]
    queue.add_rate_limited("ns/a")
    clock.advance(0.99)
    assert drain_ready(queue) == []
    clock.advance(0.02)
    assert drain_ready(queue) == ["ns/a"]
    queue.forget("ns/a")
    queue.add_rate_limited("ns/a")
    clock.advance(0.51)
    assert drain_ready(queue) == ["ns/a"]


class CountingBackoff(ExponentialBackoff):
    """Counts each key's failures, as the queue reports them, and the forgets."""

    def __init__(self):
        super().__init__(base=0.01, jitter=0)
        self.failures, self.forgotten = [], []

    def when(self, key):
        self.failures.append(key)
        return super().when(key)

    def forget(self, key):
        self.forgotten.append((key, len(self.failures)))
        super().forget(key)


def test_failing_handler_is_retried_with_backoff_which_only_the_handler_forgets():
    limiter = CountingBackoff()
    queue = WorkQueue(max_workers=2, rate_limiter=limiter)
    calls = []
    succeeded = threading.Event()

    def handler(key):
        calls.append(key)
        if len(calls) < 3:
            raise RuntimeError("backend unreachable")
        if len(calls) == 3:
            queue.add(key)            # returned, but its work goes on: the backoff stays
            return
        queue.forget(key)
        succeeded.set()

    workers = run_workers(queue, handler)
    assert len(workers) == 2
    queue.add("ns/a")
    assert succeeded.wait(PATIENCE)
    assert wait_until(lambda: queue.depth() == Depth(0, 0, 0))
    assert calls == ["ns/a"] * 4
    assert limiter.failures == ["ns/a"] * 2 and limiter.forgotten == [("ns/a", 2)], "forgotten once, by the handler"
    queue.shutdown()


def test_shutdown_drains_the_running_key_and_drops_the_rest():
    queue = WorkQueue(max_workers=1)
    started = threading.Event()
    release = threading.Event()
    handled = []

    def handler(key):
        handled.append(key)
        started.set()
        release.wait(PATIENCE)

    workers = run_workers(queue, handler, 2)
    queue.add("ns/running")
    assert started.wait(PATIENCE)
    queue.add("ns/queued")
    queue.add_after("ns/delayed", 0.01)
    result = []
    stopper = threading.Thread(target=lambda: result.append(queue.shutdown(drain=True)))
    stopper.start()
    # The running playbook is blocked on `release`, so shutdown cannot have returned.
    stopper.join(0.2)
    assert stopper.is_alive()
    assert queue.get(timeout=0) is None
    queue.add("ns/after-shutdown")
    release.set()
    stopper.join(PATIENCE)
    assert result == [True]
    for thread in workers:
        thread.join(PATIENCE)
        assert not thread.is_alive()
    assert handled == ["ns/running"]
    assert queue.depth() == Depth(0, 0, 0)


def test_shutdown_drain_timeout_reports_keys_still_running():
    queue = WorkQueue(clock=FakeClock())
    queue.add("ns/a")
    key = queue.get(timeout=0)
    assert queue.shutdown(drain=True, timeout=0.01) is False
    queue.done(key)
    assert queue.shutdown(drain=True, timeout=0.01) is True
    queue.add("ns/b")
    assert queue.depth() == Depth(0, 0, 0), "adds after shutdown are ignored"


def test_max_workers_must_be_positive():
    with pytest.raises(ValueError):
        WorkQueue(max_workers=0)
