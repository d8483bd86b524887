"""Idempotent writes: a POST or PATCH sent again with the same `Idempotency-Key` is answered, not redone."""
