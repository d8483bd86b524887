"""What the service tells those who run it: its instruments (metrics.py), its log lines (logs.py),
its traces (tracing.py). Imports nothing of ours, so that every area can count and trace what it
does."""
