"""docs/getting-started.md walked as a new user walks it, one test per section: the section's shell
blocks run with bash exactly as written, in one fresh shell that has only PATH and HOME, after the
page's setup block (run in the checkout: it puts the venv and the collection on the paths); the
section's file blocks are saved first under their names. The commands say `.run/<service>/env`, so
they run in a view of the checkout (symlinks to its entries) whose `.run` is the services' run dir
(BRIDGE_RUN, which may be another checkout's); the collection is this checkout's, as the setup block
says. A failure shows the block that failed and what the walk printed. tests/docs_walk.py says how
the blocks are marked; tests/unit/test_docs_walk.py checks them without services. The sections
share no job, so `make integration` hands each to a worker of its own (scheduling.py, SPREAD_MODULES).
"""

import os
import re
import shlex
import subprocess

import pytest

import docs_walk
from conftest import REPO, RUN, require_kube_node, require_lsf, require_quantum, require_ray, require_slurm, require_sshd

DOC = os.path.join(REPO, "docs", "getting-started.md")
SECTIONS = docs_walk.sections(docs_walk.blocks(DOC))
# The services whose env files a section sources.
SERVICES = {
    "slurm": lambda: (require_slurm("22.05"), require_sshd()),
    "lsf": require_lsf,
    "ray": require_ray,
    "quantum": require_quantum,
    "kubernetes": require_kube_node,
    "any": lambda: (require_ray(), require_kube_node()),
}
# What a section prints besides succeeding: its playbook's last line (the job completed, the end of
# its output read back), and the second job cancelled.
PRINTS = {
    "slurm": ["completed, exit code 0: hello from", '"phase": "cancelled"'],
    "lsf": ["completed, exit code 0: hello from", '"phase": "cancelled"'],
    # The driver log's end holds the job supervisor's lines too.
    "ray": ["completed, exit code 0: ", "hello from", '"phase": "cancelled"'],
    # The log's last line; the counts are read by quantum_job_info. The simulator may finish the
    # 5-second job before the cancel comes, which leaves it alone.
    "quantum": [" completed: ", "completed.", '"counts"'],
    "kubernetes": ["completed, exit code 0: hello from", '"phase": "cancelled"'],
    "any": ["ray job ", "kubernetes job ", "completed: hello from"],
}
MARKER = "=== docs/getting-started.md:"
# A user's shell, but for what the setup block adds: nothing of this process's Ansible or venv.
SHELL_ENV = ("HOME", "LANG", "LC_ALL")


def checkout_view(directory):
    """`directory` made this checkout but for .run, which is the services' run dir."""
    for entry in os.listdir(REPO):
        if entry != ".run":
            os.symlink(os.path.join(REPO, entry), os.path.join(directory, entry))
    os.symlink(RUN, os.path.join(directory, ".run"))


def walk_script(section, view):
    """The setup block in the checkout, then the section's shell blocks in the view, each announced
    with its line; `set -e` stops at the first command that fails."""
    lines = ["set -e"]
    for where, blocks in ((REPO, SECTIONS[docs_walk.SETUP]), (view, SECTIONS[section])):
        lines.append("cd %s" % shlex.quote(where))
        for block in blocks:
            if block.language == "bash":
                lines.append("printf '\\n%s%d\\n'" % (MARKER, block.line))
                lines.append(block.text)
    return "\n".join(lines)


def failed_block(section, output):
    """The block whose marker `output` shows last: the one that was running."""
    started = re.findall(re.escape(MARKER) + r"(\d+)", output)
    for block in SECTIONS[docs_walk.SETUP] + SECTIONS[section]:
        if started and block.line == int(started[-1]):
            return "docs/getting-started.md:%d\n%s" % (block.line, block.text)
    return "(before the first block)"


@pytest.mark.parametrize("section", [name for name in SECTIONS if name != docs_walk.SETUP])
def test_a_section_of_getting_started_runs_as_written(section, tmp_path):
    if section not in SERVICES:
        pytest.fail("walk %s of docs/getting-started.md: name the services it needs in SERVICES" % section)
    SERVICES[section]()
    view = str(tmp_path / "checkout")
    os.mkdir(view)
    checkout_view(view)
    for block in SECTIONS[section]:
        if block.file:
            path = os.path.join(view, block.file)
            assert not os.path.lexists(path), "docs/getting-started.md:%d: %s is a file of the checkout" % (block.line, block.file)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(block.text)

    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    env.update((name, os.environ[name]) for name in SHELL_ENV if name in os.environ)
    try:
        walked = subprocess.run(["bash", "-c", walk_script(section, view)], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, timeout=900, check=False)
        output, status = walked.stdout, walked.returncode
    except subprocess.TimeoutExpired as expired:
        output, status = expired.output or "", "timed out"
        if isinstance(output, bytes):
            output = output.decode("utf-8", "replace")

    if status != 0:
        pytest.fail("walk %s failed (%s) in the block at %s\n--- it printed:\n%s" % (
            section, status, failed_block(section, output), output[-12000:]), pytrace=False)
    missing = [text for text in PRINTS[section] if text not in output]
    assert not missing, "walk %s did not print %s\n--- it printed:\n%s" % (section, missing, output[-12000:])
