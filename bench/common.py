"""What every submit benchmark shares: timing, the ansible-playbook run, the ratio table."""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(REPO, ".run", "collections")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)


def timed(submit_one, items):
    """(total seconds, per-item seconds) of calling submit_one on each item in turn."""
    durations = []
    started = time.perf_counter()
    for item in items:
        t0 = time.perf_counter()
        submit_one(item)
        durations.append(time.perf_counter() - t0)
    return time.perf_counter() - started, durations


def timed_playbook(playbook_text, extra_vars, count):
    """(total, per-job) seconds of one ansible-playbook run that submits `count` jobs."""
    with tempfile.TemporaryDirectory() as tmp:
        playbook = os.path.join(tmp, "bench.yml")
        with open(playbook, "w") as handle:
            handle.write(playbook_text)
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_PYTHON_INTERPRETER=sys.executable,
                   ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
        ansible_playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
        t0 = time.perf_counter()
        subprocess.run([ansible_playbook, "-i", "localhost,", "-c", "local", playbook, "-e", json.dumps(extra_vars)],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        total = time.perf_counter() - t0
    return total, [total / count] * count


def print_table(title, results, count, baseline="raw POST"):
    print(title)
    print("%-18s %12s %12s %10s" % ("method", "ms/job mean", "ms/job p50", "x raw"))
    floor = results[baseline][0] / count
    for method, (total, durations) in results.items():
        mean = total / count
        print("%-18s %12.1f %12.1f %10.1f" % (method, mean * 1000, statistics.median(durations) * 1000, mean / floor))
