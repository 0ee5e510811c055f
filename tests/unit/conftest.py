"""Make bridge.hpc importable as ansible_collections.bridge.hpc for plain pytest runs, and the helpers
in tests/ (shared with tests/integration) importable."""

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(REPO, ".run", "collections")
LINK = os.path.join(COLLECTIONS, "ansible_collections", "bridge", "hpc")

if not os.path.exists(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink(REPO, LINK)
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
TESTS = os.path.join(REPO, "tests")
if TESTS not in sys.path:
    sys.path.append(TESTS)
