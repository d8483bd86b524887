"""Benchmarks: speed is measured here, never asserted in a timed test."""
