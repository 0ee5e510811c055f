"""Does this interpreter hold exactly the packages of a lock, at exactly the locked versions?

    python lock_check.py [--allow NAME]... NAME==VERSION...       (or `python - ...` on stdin)

Standalone, standard library only: tools/controller-image.sh and tools/ee-image.sh run it inside
their images with the pins of `tools/locks.py pins LOCK` as arguments; tests/unit/test_locks.py
runs it with the venv's python. --allow names a package that may be there beside the lock (the
base image's own pip, the controller's own wheel), at any version. Prints what differs and exits 1,
or one line and 0.
"""
import argparse
import importlib.metadata
import re
import sys


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def installed():
    """{normalized name: version} of every distribution this interpreter's sys.path holds."""
    found = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(normalize(name), dist.version)
    return found


def differences(expected, present, allowed):
    """What keeps PRESENT from being EXPECTED, with ALLOWED extra names at any version."""
    lines = []
    for name, version in sorted(expected.items()):
        if name not in present:
            lines.append("missing: %s==%s" % (name, version))
        elif present[name] != version:
            lines.append("other version: %s %s, the lock says %s" % (name, present[name], version))
    for name in sorted(set(present) - set(expected) - set(allowed)):
        lines.append("not in the lock: %s==%s" % (name, present[name]))
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--allow", action="append", default=[], metavar="NAME")
    parser.add_argument("pins", nargs="+", metavar="NAME==VERSION")
    args = parser.parse_args(argv)
    expected = {normalize(pin.split("==")[0]): pin.split("==")[1] for pin in args.pins}
    problems = differences(expected, installed(), {normalize(name) for name in args.allow})
    if problems:
        print("lock check: %s differs from the lock:\n  %s" % (sys.prefix, "\n  ".join(problems)))
        return 1
    print("lock check: %s holds the %d locked packages at their versions%s" % (
        sys.prefix, len(expected), " (and %s)" % ", ".join(args.allow) if args.allow else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
