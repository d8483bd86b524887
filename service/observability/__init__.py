"""What the service tells those who run it: its instruments (metrics.py), its log lines as JSON
(logs.py). Imports nothing of ours but settings, so that every area can count what it does."""
