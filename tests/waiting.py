"""Waiting in tests: poll for a positive signal until a deadline, never sleep a fixed time and hope."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float = 120, every: float = 0.5,
             what: str | Callable[[], str] = "condition") -> T:
    """Call ``predicate`` every ``every`` seconds until it returns something truthy, and return that; fail
    naming ``what`` once ``timeout`` seconds have passed (a callable ``what`` is asked then, e.g. for a log tail)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what() if callable(what) else what}")
        time.sleep(every)
