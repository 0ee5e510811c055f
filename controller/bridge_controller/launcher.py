"""What ansible-runner starts instead of ansible-playbook, so that no playbook outlives the controller.

ansible-runner forks each playbook from its run_async thread (pexpect, a new session each) and
that thread lives as long as the playbook, so the kernel's parent-death signal (prctl
PR_SET_PDEATHSIG, which fires when the forking *thread* ends) comes exactly when the controller
exits or is SIGKILLed. The launcher asks for it, runs ansible-playbook as its child and waits.
On the signal it SIGKILLs every process below it: Ansible's workers call setsid(), so killing the
playbook's process group alone would leave the module running (processes.py).
"""

import ctypes
import os
import signal
import subprocess
import sys

from bridge_controller.processes import kill_descendants

# <linux/prctl.h>
PR_SET_PDEATHSIG = 1
# The controller's pid, in the launcher's environment: a launcher whose parent is another process
# lost the controller before the prctl took effect, and would never get the signal.
CONTROLLER_PID = "BRIDGE_CONTROLLER_PID"
# The launcher's exit status when the controller was gone before the playbook started.
CONTROLLER_GONE = 75
SCRIPT = """#!%(python)s
# Written by bridge-controller (launcher.py): ansible-runner's `binary`.
import sys
sys.path.insert(0, %(path)r)
from bridge_controller.launcher import main
main()
"""


def write_launcher(work_dir):
    """The path of the launcher script in `work_dir`, for this interpreter and this package."""
    path = os.path.join(os.path.abspath(work_dir), "ansible-playbook-launcher")
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(path + ".new", "w") as handle:
        handle.write(SCRIPT % {"python": sys.executable, "path": package_parent})
    os.chmod(path + ".new", 0o700)
    os.replace(path + ".new", path)
    return path


def _end_everything(signum, _frame):
    kill_descendants()
    os._exit(128 + signum)


def main(argv=None, playbook="ansible-playbook"):
    argv = sys.argv[1:] if argv is None else argv
    # The handler first: the signal may come as soon as the prctl is made.
    signal.signal(signal.SIGTERM, _end_everything)
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    expected = os.environ.get(CONTROLLER_PID)
    if expected and os.getppid() != int(expected):
        sys.exit(CONTROLLER_GONE)
    returncode = subprocess.call([playbook] + list(argv))
    sys.exit(returncode if returncode >= 0 else 128 - returncode)
