"""The Organization Management Service."""
