"""Ids: 26 Crockford base32 digits of 48 bits of milliseconds and 80 random bits, sorting by time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from service.storage.ids import first_id_at, is_id, new_id


def test_an_id_spells_its_time_then_its_random_bits_in_crockford_base32():
    at = datetime(2026, 11, 26, 7, 30, tzinfo=UTC)
    milliseconds = int(at.timestamp() * 1000)
    value = (milliseconds << 80) | (2**80 - 1)
    digits = "0123456789abcdefghjkmnpqrstvwxyz"
    expected = "".join(digits[(value >> (5 * position)) & 31] for position in reversed(range(26)))
    assert new_id("job", at=at, randbits=lambda bits: 2**bits - 1) == f"job_{expected}"
    assert first_id_at("job", at) == f"job_{expected[:10]}" + "0" * 16
    assert new_id("job", at=at, randbits=lambda bits: 0) == first_id_at("job", at)


def test_ids_sort_as_their_times_do_and_say_their_type():
    start = datetime(2026, 1, 1, tzinfo=UTC)
    times = [start + timedelta(milliseconds=step * 7919) for step in range(200)]
    ids = [new_id("evt", at=at) for at in times]
    assert sorted(ids) == ids
    assert all(is_id(value, "evt") and not is_id(value, "job") for value in ids)
    assert [first_id_at("evt", at) <= value for at, value in zip(times, ids, strict=True)] == [True] * 200
