"""The bounded store of kept answers: least recently used out first, within a budget of costs."""

from __future__ import annotations

from service.storage.memory import Kept


def test_answers_past_the_budget_leave_least_recently_used_first():
    kept = Kept[str](3)
    for key in "abc":
        kept.put(key, key.upper())
    assert kept.get("a") == "A"  # now the most recently used
    kept.put("d", "D")
    assert [kept.get(key) for key in "abcd"] == ["A", None, "C", "D"]


def test_costs_bound_what_is_kept_and_a_replaced_answer_gives_its_cost_back():
    kept = Kept[bytes](10, cost=len)
    kept.put("a", b"12345")
    kept.put("b", b"1234")
    kept.put("a", b"1")  # replaces 5 bytes with 1: 5 in all
    kept.put("c", b"12345")  # 10 in all: nothing leaves
    assert [kept.get(key) for key in "abc"] == [b"1", b"1234", b"12345"]
    kept.put("d", b"123")  # 13: the least recently used ("a", then "b") leave until it fits
    assert [kept.get(key) for key in "abcd"] == [None, None, b"12345", b"123"]


def test_get_or_make_makes_an_answer_once_and_keeps_it():
    kept = Kept[str](2)
    made: list[str] = []

    def make() -> str:
        made.append("a")
        return "answer"

    assert kept.get_or_make("k", make) == "answer"
    assert kept.get_or_make("k", make) == "answer"
    assert made == ["a"]
    assert kept.get("k") == "answer"
