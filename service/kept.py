"""Answers kept in this process for what cannot change under their keys: the most recently used
ones, a bounded number of them. Whoever keeps an answer puts in its key everything it was made from."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

Answer = TypeVar("Answer")


class Kept(Generic[Answer]):
    """At most `size` answers; the least recently used goes first."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._answers: OrderedDict[Hashable, Answer] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Answer | None:
        with self._lock:
            answer = self._answers.get(key)
            if answer is not None:
                self._answers.move_to_end(key)
            return answer

    def put(self, key: Hashable, answer: Answer) -> None:
        with self._lock:
            self._answers[key] = answer
            self._answers.move_to_end(key)
            while len(self._answers) > self._size:
                self._answers.popitem(last=False)
