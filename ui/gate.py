"""One run at a time on a shared resource (the Live page's model), with a fair waiting count.

`Gate.turn(on_wait)` is a context manager: it counts the caller as waiting, calls
`on_wait(ahead)` every `poll_s` seconds until the lock is free, then holds the lock for the
body. The waiting count is given back in a `finally`, so a visitor who leaves while queued
(Streamlit raises StopException at their next st call) leaves no phantom waiter behind, and the
lock is released whatever the body raises.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class Gate:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._count = threading.Lock()
        self.waiting = 0

    @contextmanager
    def turn(self, on_wait: Callable[[int], None], poll_s: float = 0.5) -> Iterator[None]:
        with self._count:
            self.waiting += 1
        try:
            while not self.lock.acquire(timeout=poll_s):
                on_wait(self.waiting - 1)  # how many others wait (the holder is not counted)
        finally:
            with self._count:
                self.waiting -= 1
        try:
            yield
        finally:
            self.lock.release()
