"""Retention: the worker deletes what is older than each kind's setting, a bounded batch at a time."""
