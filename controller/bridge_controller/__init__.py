"""The BridgeJob controller: watch -> queue -> reconcile -> runner -> status writer."""

__version__ = "0.1.0"
