"""The audit trail as it is written: its table and the one event every write appends (read by
service.audit)."""
