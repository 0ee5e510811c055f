"""`python -m bridge_controller`: the same as the `bridge-controller` command."""

import sys

from bridge_controller.main import main

if __name__ == "__main__":
    sys.exit(main())
