"""docs/controller.md's flag table is the controller's flags: each flag is in the table, each
flag of the table exists, and the defaults the table gives for numbers and switches are the
parser's. `python -m bridge_controller` is the documented command."""

import os
import re
import subprocess
import sys

import pytest

from bridge_controller.main import make_parser

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FLAG = re.compile(r"`(--[a-z][a-z-]*)`")


def table():
    """[(flags of the row, default cells of the row)] of the Operations table."""
    with open(os.path.join(REPO, "docs", "controller.md")) as handle:
        text = handle.read()
    start = text.index("| flag | default | meaning |")
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        # "`--runner-dir` (or `--work-dir`)": an alias shares its flag's default cell.
        rows.append((FLAG.findall(re.sub(r"\(or [^)]*\)", "", cells[0])), FLAG.findall(cells[0]), cells[1]))
    return rows


def parser_flags():
    return dict((option, action) for action in make_parser()._actions  # pylint: disable=protected-access
                for option in action.option_strings if option.startswith("--") and option != "--help")


def test_every_flag_is_in_the_table_and_every_flag_of_the_table_exists():
    documented = set(flag for _main, flags, _defaults in table() for flag in flags)
    assert documented == set(parser_flags())


@pytest.mark.parametrize("row", table(), ids=lambda row: ",".join(row[1]))
def test_the_table_gives_the_parsers_defaults(row):
    main, _all, defaults = row
    flags = parser_flags()
    cells = [cell.strip() for cell in re.split(r",\s+(?![^(]*\))", defaults)] if len(main) > 1 else [defaults]
    assert len(cells) == len(main), (main, defaults)
    for flag, cell in zip(main, cells):
        default = flags[flag].default
        if isinstance(default, bool):
            assert cell == ("on" if default else "off"), (flag, cell)
        elif isinstance(default, (int, float)):
            assert float(cell) == default, (flag, cell)
        elif flag == "--lease-namespace":
            assert "$POD_NAMESPACE" in cell and "bridge-system" in cell, cell


def test_python_m_bridge_controller_is_the_command():
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".run", "collections"))
    done = subprocess.run([sys.executable, "-m", "bridge_controller", "--help"], capture_output=True, text=True,
                          cwd=os.path.join(REPO, "controller"), env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: bridge-controller")
    for flag in ("--collections-path", "--python", "--lease-namespace"):
        assert flag in done.stdout
