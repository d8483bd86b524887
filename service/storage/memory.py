"""Answers kept in this process for what cannot change under their keys: the most recently used
ones, within a budget. Whoever keeps an answer puts in its key everything it was made from."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

Answer = TypeVar("Answer")


class Kept(Generic[Answer]):
    """Answers whose costs add up to at most `budget` (each costs 1 unless `cost` says otherwise);
    the least recently used go first."""

    def __init__(self, budget: int, cost: Callable[[Answer], int] = lambda _: 1) -> None:
        self._budget = budget
        self._cost = cost
        self._spent = 0
        self._answers: OrderedDict[Hashable, Answer] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Answer | None:
        with self._lock:
            answer = self._answers.get(key)
            if answer is not None:
                self._answers.move_to_end(key)
            return answer

    def get_or_make(self, key: Hashable, make: Callable[[], Answer]) -> Answer:
        """The answer kept under `key`, or the one `make` gives, kept from now on."""
        answer = self.get(key)
        if answer is None:
            answer = make()
            self.put(key, answer)
        return answer

    def put(self, key: Hashable, answer: Answer) -> None:
        with self._lock:
            replaced = self._answers.pop(key, None)
            if replaced is not None:
                self._spent -= self._cost(replaced)
            self._answers[key] = answer
            self._spent += self._cost(answer)
            while self._spent > self._budget and self._answers:
                _, evicted = self._answers.popitem(last=False)
                self._spent -= self._cost(evicted)
