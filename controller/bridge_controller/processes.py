"""The processes the controller's playbooks leave: found through /proc, killed by pid.

Ansible's workers call setsid(), so neither ansible-runner's cancel (the playbook's process group)
nor a dead controller's exit ends the module they run. These functions find such processes by
parentage or by the pipe path in their environment (BRIDGE_HANDOFF) and SIGKILL them.
"""

import os
import shutil
import signal

# Pipe dirs of this process's runners, which remove_orphans must not take for a dead process's.
LIVE_PIPE_DIRS = set()


def descendants(pid):
    """Every live process below `pid`, parents before children."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(0), []):
            found.append(child)
            todo.append(child)
    return found


def with_environment(pids, marker):
    """Those of `pids` with an environment entry that starts with `marker` ("KEY=value...")."""
    wanted = marker.encode("utf-8")
    found = []
    for pid in pids:
        try:
            with open("/proc/%d/environ" % pid, "rb") as handle:
                if any(entry.startswith(wanted) for entry in handle.read().split(b"\0")):
                    found.append(pid)
        except OSError:
            continue
    return found


def remove_orphans(handoff_dir):
    """SIGKILL what dead controllers with this work dir left running, and remove their pipes.

    Each runner keeps its pipes in handoff/<pid>-<random>. Ansible's workers call setsid(), so a
    SIGKILLed controller's modules are not hung up with it. The launcher (launcher.py) kills them
    when the controller dies, and a waiting module exits once the controller's lock is free; what
    escaped both (a launcher SIGKILLed itself, say) is found here by the pipe path in its environment.
    Another live controller's dirs are left alone (two may share a work dir), and so are this
    process's own runners'. A dir with our pid that is not one of them is stale: in a container
    the restarted controller often gets the dead one's pid.
    """
    if not os.path.isdir(handoff_dir):
        return 0

    def stale(name):
        owner = name.split("-")[0]
        if not owner.isdigit():
            return True
        if int(owner) == os.getpid():
            return os.path.join(handoff_dir, name) not in LIVE_PIPE_DIRS
        return not os.path.exists("/proc/%s" % owner)

    stale = [name for name in os.listdir(handoff_dir) if stale(name)]
    killed = 0
    if stale and os.path.isdir("/proc"):
        mine = set(descendants(os.getpid()))
        pids = [int(entry) for entry in os.listdir("/proc") if entry.isdigit() and int(entry) not in mine]
        for name in stale:
            killed += sigkill(with_environment(pids, "BRIDGE_HANDOFF=%s/" % os.path.join(handoff_dir, name)))
    for name in stale:
        # Pipes never hold data, only a path for a reader.
        shutil.rmtree(os.path.join(handoff_dir, name), ignore_errors=True)
    return killed


def kill_descendants(pid=None, marker=None, rounds=5):
    """SIGKILL every process below `pid` (this one by default), or those whose environment holds
    `marker`; returns how many.

    ansible-runner's own cancel kills the playbook's process group only, and Ansible's workers
    call setsid(): the module that submits jobs would outlive the playbook and go on submitting.
    A few rounds catch processes forked while the first ones were being killed.
    """
    if not os.path.isdir("/proc"):
        return 0
    killed = 0
    for _round in range(rounds):
        victims = descendants(os.getpid() if pid is None else pid)
        if marker is not None:
            victims = with_environment(victims, marker)
        if not victims:
            break
        killed += sigkill(victims)
    return killed


def sigkill(pids):
    """SIGKILL each of `pids`; returns how many were still there to kill."""
    killed = 0
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except OSError:
            pass  # it ended meanwhile
    return killed
