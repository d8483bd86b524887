"""The Organization Management Service."""

__version__ = "0.1.0"
