"""Credentials kept from every reader: in free-form objects wherever they are shown (objects), and
in every log line (logs)."""
