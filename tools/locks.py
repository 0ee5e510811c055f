#!/usr/bin/env python
"""The locks every Python environment Bridge makes installs from (locks/*.txt), made with uv.

    tools/locks.py compile [--upgrade] [NAME...]   make lock: resolve locks/NAME.txt from its inputs,
                                                   keeping each locked version the inputs still allow
                                                   (--upgrade: the newest they allow)
    tools/locks.py latest DIR                      the newest versions the inputs allow, as locks in
                                                   DIR, and what differs from locks/ (make check-latest)
    tools/locks.py inputs [--check]                write (or check) the generated inputs locks/*.in
    tools/locks.py report DIR STATUS               after the checks on DIR's locks: the drift, then
                                                   what broke (make check-latest)
    tools/locks.py pins LOCK                       a lock's `name==version` lines

UV names uv (tools/bootstrap.sh --uv prints the one it installs from locks/uv.txt). Every lock is
for CPython 3.11 on x86_64 Linux (manylinux_2_28: Debian 12's and the AWX EE's CentOS Stream 9's
glibc are newer) and holds the sha256 of every file PyPI has of each version, so an install with
--require-hashes takes exactly those files. docs/developing.md, "Locked installs", says when to run
what.
"""
import argparse
import os
import re
import subprocess
import sys
import tomllib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCK_DIR = os.path.join(REPO, "locks")
PYTHON_VERSION = "3.11"
PLATFORM = "x86_64-manylinux_2_28"
ONLY_BINARY = ["--only-binary", ":all:"]

# name: (what installs from it, uv options). Its input is locks/NAME.in; those of GENERATED are
# written from the files that state the ranges, so that each range is written once.
LOCKS = {
    "dev": ("the development and test venv .venv (tools/bootstrap.sh)", []),
    "controller": ("the controller image (deploy/Containerfile)", ONLY_BINARY),
    "ee": ("both execution environments (ee/execution-environment*.yml)", ONLY_BINARY),
    "ee-builder": ("ansible-builder's builder stage (tools/ee-image.sh)", ONLY_BINARY),
    "ray": ("the Ray head's venv (tools/ray-cluster.sh)", []),
    "qiskit": ("the Qiskit Runtime simulator's venv (tools/quantum-runtime.sh)", ONLY_BINARY),
    "uv": ("the installer of .venv (tools/bootstrap.sh)", ONLY_BINARY),
    "ansible": ("the ansible wheel ansible.posix is unpacked from (tools/bootstrap.sh)", ["--no-deps"]),
}
# The environments the suite runs Bridge in: a package in several holds one version in all.
SAME_VERSIONS = ("dev", "controller", "ee")

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)")


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path):
    """{normalized name: version} of a lock (or any file of `name==version` lines)."""
    found = {}
    with open(path) as handle:
        for line in handle:
            match = PIN.match(line)
            if match:
                found[normalize(match.group(1))] = match.group(2)
    return found


def ee_ranges():
    """What ee/execution-environment.yml has ansible-builder pip install (every package_pip:
    ansible-core, ansible-runner, the init), read without PyYAML: this runs before any venv exists."""
    text = open(os.path.join(REPO, "ee", "execution-environment.yml")).read()
    return re.findall(r"^\s+package_pip:\s*(\S+)\s*$", text, re.M)


def generated_inputs():
    """{NAME: text} of the inputs written from the files that state the ranges."""
    project = tomllib.load(open(os.path.join(REPO, "controller", "pyproject.toml"), "rb"))
    controller = [
        "# Written by `make lock` (tools/locks.py) from controller/pyproject.toml: its dependencies and",
        "# its build backend (deploy/Containerfile builds its wheel with --no-build-isolation). Edit that.",
    ] + project["project"]["dependencies"] + project["build-system"]["requires"]
    ee = [
        "# Written by `make lock` (tools/locks.py) from the collection's requirements.txt and every",
        "# package_pip of ee/execution-environment.yml. Edit those.",
        "-r ../requirements.txt",
    ] + ee_ranges()
    return {"controller": "\n".join(controller) + "\n", "ee": "\n".join(ee) + "\n"}


def write_inputs(check=False):
    stale = []
    for name, text in generated_inputs().items():
        path = os.path.join(LOCK_DIR, name + ".in")
        current = open(path).read() if os.path.exists(path) else None
        if current != text:
            stale.append(os.path.relpath(path, REPO))
            if not check:
                with open(path, "w") as handle:
                    handle.write(text)
    return stale


def input_path(name):
    return "requirements-dev.txt" if name == "dev" else os.path.join("locks", name + ".in")


def uv_compile(name, output, upgrade, constraints=None):
    """uv pip compile of NAME's input into OUTPUT (repo-relative paths, so the header is the same
    wherever the checkout is)."""
    uv = os.environ.get("UV") or "uv"
    command = [
        uv, "pip", "compile", "--quiet", "--generate-hashes", "--python-version", PYTHON_VERSION,
        "--python-platform", PLATFORM, "--custom-compile-command", "make lock",
        "--no-config", "--index-url", "https://pypi.org/simple",
    ] + LOCKS[name][1] + [input_path(name), "-o", output]
    if upgrade:
        command.append("--upgrade")
    if constraints:
        command += ["--constraint", constraints]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
    if result.returncode:
        sys.exit("locks: %s failed:\n%s" % (" ".join(command), result.stderr))


def compile_all(names, out_dir, upgrade):
    """Compile NAMES into OUT_DIR; dev first, then the other environments the suite runs Bridge in,
    constrained to dev's versions, so that one package is one version in each."""
    write_inputs()
    names = sorted(names, key=lambda name: list(LOCKS).index(name))
    os.makedirs(out_dir, exist_ok=True)
    dev = os.path.relpath(os.path.join(out_dir, "dev.txt"), REPO)
    for name in names:
        output = os.path.relpath(os.path.join(out_dir, name + ".txt"), REPO)
        uses_dev = name in SAME_VERSIONS and name != "dev"
        uv_compile(name, output, upgrade, dev if uses_dev else None)
        print("locks: %s: %d packages (%s)" % (output, len(pins(os.path.join(REPO, output))), LOCKS[name][0]))


def drift(out_dir):
    """Print each package whose version in OUT_DIR's locks differs from locks/; True when any does."""
    changed = False
    for name in LOCKS:
        locked, newest = pins(os.path.join(LOCK_DIR, name + ".txt")), pins(os.path.join(out_dir, name + ".txt"))
        rows = []
        for package in sorted(set(locked) | set(newest)):
            before, after = locked.get(package, "-"), newest.get(package, "-")
            if before != after:
                rows.append("  %-32s %-18s -> %s" % (package, before, after))
        print("%s.txt: %s" % (name, "%d of %d differ" % (len(rows), len(locked)) if rows else "as locked"))
        if rows:
            print("\n".join(rows))
        changed = changed or bool(rows)
    return changed


# Lines of `make check`'s log that say what failed: pytest's summary, ansible-test's and
# ansible-lint's errors, the doc check's, make's own.
BROKE = re.compile(r"^(FAILED |ERROR[: ]|FAIL |make(\[\d+\])?: \*\*\*)|: (ERROR|error)\b| \d+ failed")


def report(out_dir, status):
    """The end of make check-latest: what differs from the lock, and what broke on it."""
    print("\ncheck-latest: the newest versions the ranges allow, against locks/:")
    changed = drift(os.path.join(out_dir, "locks"))
    log = os.path.join(out_dir, "check.log")
    lines = open(log, errors="replace").read().splitlines()
    if status == 0:
        print("check-latest: make check and the doc check PASSED on them%s (log: %s)" % (
            "" if changed else ", which are the locked ones", os.path.relpath(log, REPO)))
        return 0
    print("check-latest: make check or the doc check FAILED on them. What broke (log: %s):" % os.path.relpath(log, REPO))
    print("\n".join("  " + line for line in [line for line in lines if BROKE.search(line)][:60]))
    print("check-latest: the last lines of the log:")
    print("\n".join("  " + line for line in lines[-15:]))
    return status


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    commands = parser.add_subparsers(dest="command", required=True)
    compile_ = commands.add_parser("compile")
    compile_.add_argument("--upgrade", action="store_true")
    compile_.add_argument("names", nargs="*", metavar="NAME", help=", ".join(LOCKS))
    latest = commands.add_parser("latest")
    latest.add_argument("out_dir")
    inputs = commands.add_parser("inputs")
    inputs.add_argument("--check", action="store_true")
    report_ = commands.add_parser("report")
    report_.add_argument("out_dir")
    report_.add_argument("status", type=int)
    pins_ = commands.add_parser("pins")
    pins_.add_argument("lock")
    args = parser.parse_args(argv)
    if args.command == "compile":
        unknown = sorted(set(args.names) - set(LOCKS))
        if unknown:
            parser.error("no lock named %s; the locks: %s" % (", ".join(unknown), ", ".join(LOCKS)))
        compile_all(args.names or list(LOCKS), LOCK_DIR, args.upgrade)
    elif args.command == "latest":
        out_dir = os.path.abspath(args.out_dir)
        compile_all(list(LOCKS), out_dir, upgrade=True)
        drift(out_dir)
    elif args.command == "report":
        sys.exit(report(os.path.abspath(args.out_dir), args.status))
    elif args.command == "inputs":
        stale = write_inputs(check=args.check)
        if stale and args.check:
            sys.exit("locks: %s not as written from their sources: make lock" % ", ".join(stale))
    elif args.command == "pins":
        for name, version in sorted(pins(args.lock).items()):
            print("%s==%s" % (name, version))


if __name__ == "__main__":
    main()
