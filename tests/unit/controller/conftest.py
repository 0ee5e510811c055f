"""Make the controller package (controller/bridge_controller) importable in unit tests without installing it."""

import os
import sys

CONTROLLER = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))), "controller")

if CONTROLLER not in sys.path:
    sys.path.insert(0, CONTROLLER)
