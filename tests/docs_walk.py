"""The runnable parts of a guide: its fenced blocks whose info string names a walk.

    ```bash walk=slurm                      a shell block of the section "slurm", run as written
    ```yaml walk=slurm file=hello.yml       a file the section's shell blocks use, saved as written

The words after the language are invisible on GitHub and on the docs site, which take the first
word of an info string as the language. Shared by tests/unit/test_docs_walk.py (the blocks parse and
name modules and options that exist) and tests/integration/test_getting_started.py (they run).
"""

import collections
import re
import shlex

# Run first, in the checkout, by every section's walk: what puts Ansible and the collection on the paths.
SETUP = "setup"
FENCE = re.compile(r"^```(\S*)(.*)$")

Block = collections.namedtuple("Block", "section language file text line")


def blocks(path):
    """Every walk block of the Markdown file at `path`, in the file's order; `line` is its fence's."""
    found = []
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().splitlines(True)
    index = 0
    while index < len(lines):
        fence = FENCE.match(lines[index].rstrip("\n"))
        if not fence:
            index += 1
            continue
        start, body = index, []
        index += 1
        while index < len(lines) and lines[index].rstrip("\n") != "```":
            body.append(lines[index])
            index += 1
        index += 1
        words = dict(word.split("=", 1) for word in fence.group(2).split() if "=" in word)
        if "walk" in words:
            found.append(Block(words["walk"], fence.group(1), words.get("file"), "".join(body), start + 1))
    return found


def sections(found):
    """{section: [its blocks]}, in the order the sections first appear."""
    grouped = collections.OrderedDict()
    for block in found:
        grouped.setdefault(block.section, []).append(block)
    return grouped


def commands(text):
    """The commands of a shell block: its lines, a line joined with the next while a quote is open."""
    pending = ""
    for line in text.splitlines():
        pending += line + "\n"
        try:
            words = shlex.split(pending, comments=True)
        except ValueError:
            continue
        if words:
            yield words
        pending = ""
    if pending.strip():
        raise ValueError("a quote is not closed in: %s" % pending)
