"""The README's table of what the collection has names every module, role and inventory plugin,
and nothing that is not there (a user reading it missed bridge.hpc.jobs and job_info)."""

import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def listed():
    with open(os.path.join(REPO, "README.md")) as handle:
        rows = [line for line in handle if re.match(r"^\| (module|role|inventory) \| `bridge\.hpc\.", line)]
    return set((row.split(" | ")[0][2:], re.search(r"`bridge\.hpc\.(\w+)`", row).group(1)) for row in rows)


def present():
    def names(folder, suffix=".py"):
        return set(entry[:-len(suffix)] if suffix else entry for entry in os.listdir(os.path.join(REPO, folder))
                   if (entry.endswith(suffix) if suffix else True) and not entry.startswith("_"))
    return (set(("module", name) for name in names("plugins/modules")) | set(("inventory", name) for name in names("plugins/inventory"))
            | set(("role", name) for name in names("roles", suffix="")))


def test_the_readme_table_lists_what_the_collection_has():
    assert listed() == present()
