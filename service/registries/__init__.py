"""Prompt registries: immutable artifact versions, movable labels, public read."""
