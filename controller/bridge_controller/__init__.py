"""The BridgeJob controller: watch -> queue -> plan -> batches -> resolver -> runner -> results -> writer."""

__version__ = "0.1.0"
